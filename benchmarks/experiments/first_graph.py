"""Is it the first graph timed after new memory is mapped that runs slow? (NOTES.md row 130)

    python benchmarks/experiments/first_graph.py OUT

state_ranking.py: after 3 GB are allocated and freed (cudaMalloc'd, kept by the caching allocator) the
first variant timed over an unchanged Operands ran 6-13% slow and every later one at its usual time. Here,
4096x22016 M=1's pick over one Operands, in that state, three ways (each after its own 3 GB): the same
graph timing three times in a row; 200 eager calls first; a graph of another kernel timed first. Prints
each timing's median and its first and last replays (us a call); writes OUT/first_graph.json."""
import json
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # so that it runs as a script from anywhere

from benchmarks.experiments.placement_probe import G, M, N, K, map_gb, the_pick  # noqa: E402
from tunesearch.bench import Operands, replay_times  # noqa: E402
from tunesearch.variants import matmul  # noqa: E402


def mapped():
    torch.cuda.empty_cache()  # so that the 3 GB are mapped anew each time, not taken from the cache
    map_gb()
    torch.cuda.synchronize()


def main(out):
    info, _, layout, variant = the_pick()
    ops = Operands(M, N, K, G, info.l2_bytes, layout=layout)
    ours = [lambda c=c: matmul(c[0], c[1], c[2], variant, G, out=c[3]) for c in ops.copies]
    other = [lambda c=c: c[3].zero_() for c in ops.copies]  # a memset of C: a graph of another kernel
    report = {}

    def show(name, times):
        report[name] = times
        print(f"{name:>28}: median {statistics.median(times):5.1f}  first {' '.join(f'{t:.1f}' for t in times[:5])}"
              f"  last {' '.join(f'{t:.1f}' for t in times[-5:])}", flush=True)

    for rnd in range(2):
        torch.cuda.empty_cache()
        show(f"{rnd} light", replay_times(ours))
        mapped()
        for i in range(3):
            show(f"{rnd} mapped, timing {i + 1}", replay_times(ours))
        mapped()
        for _ in range(200):
            ours[0]()
        show(f"{rnd} mapped, 200 eager first", replay_times(ours))
        mapped()
        show(f"{rnd} mapped, other graph", replay_times(other))
        show(f"{rnd} mapped, then ours", replay_times(ours))
    json.dump(dict(gpu=info.to_dict(), variant=variant.id, replays=report), open(f"{out}/first_graph.json", "w"))


if __name__ == "__main__":
    main(sys.argv[1])
