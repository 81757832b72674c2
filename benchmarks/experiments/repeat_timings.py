"""Does the bench's slow first timing end after one more, or last the whole row? (NOTES.md row 131)

    python benchmarks/experiments/repeat_timings.py OUT [SHAPES] [M]

With bench.SETTLE on (a discarded timing first where new memory was mapped), the H100 bench timed
4096x22016 M=1 at 19.5 us (22.2 off) but M=2..32 still at 21.9-22.4 against 19.5-21.2 stored, and 19.7-20.0
timed alone (sweep_vs_bench.py). Here `tunesearch bench`'s own rows (run_bench, no peers) with every
graph timing taken five times in a row, each median kept. Run in `_s73` at commit 90dbca0, where it also
had benchmark.CHECK_APART's rows (the check first, its memory handed back, then the Operands): that order is
now the bench's only one, so the rounds here are alike. Prints each row's five timings of ours and of fp16;
writes OUT/repeat_timings.json."""
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # so that it runs as a script from anywhere

from tunesearch import bench, benchmark, load_dispatch  # noqa: E402
from tunesearch.shapes import parse_ms, parse_shapes  # noqa: E402

TIMINGS = 5
_bench_graph_time = bench.graph_time


def main(out, shapes="4096x22016,4096x12288", ms="1,2,8,32"):
    log = []

    def graph_time(calls, replays=30, warmup=3):
        timings = [bench._graph_time(calls, replays, warmup) for _ in range(TIMINGS)]
        log[-1].append([t.us for t in timings])
        return timings[-1]

    bench.graph_time = benchmark.graph_time = graph_time  # time_fp16 and the floor look it up in bench
    mm = load_dispatch()
    report = {}
    for round_ in range(2):
        rows = []

        def row_log(row):
            rows.append(dict(N=row["N"], M=row["M"], table_us=row["table_us"], timings=log[-1]))
            log.append([])

        log.append([])
        benchmark.run_bench(mm, parse_shapes(shapes), parse_ms(ms), peers=False, log=row_log)
        name = f"bench{round_}"
        report[name] = rows
        for r in rows:
            if len(r["timings"]) >= 2:  # a shape's first row also holds the floor's four grids
                ours, fp16 = r["timings"][-2], r["timings"][-1]
                print(f"{name:>7} {r['N']:>5} M={r['M']:<3} table {r['table_us']:5.1f}  ours "
                      + " ".join(f"{t:5.1f}" for t in ours) + "   fp16 " + " ".join(f"{t:5.1f}" for t in fp16),
                      flush=True)
    json.dump(report, open(f"{out}/repeat_timings.json", "w"))
    bench.graph_time = benchmark.graph_time = _bench_graph_time


if __name__ == "__main__":
    main(*sys.argv[1:])
