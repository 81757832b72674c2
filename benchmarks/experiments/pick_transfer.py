"""How much a GPU loses running the packaged H200 table's picks (`python pick_transfer.py DB GPU_SUBSTRING`).

For each key a sweep on that GPU timed (the H200 store loaded first, so the H200's winners are among its
seeds), on the layout the table serves the shape in: the fastest trial there, and the time there of the
variant the packaged table picks for that M (its bucket's pick). The ratio is what an own table would gain
at that key, by this sweep's trials; a pick it did not time again shows as such."""
import collections
import sys

from tunesearch.db import Store
from tunesearch.dispatch import load_dispatch


def main(db: str, gpu: str) -> None:
    table = next(t for name, t in load_dispatch().gpus.items() if "H200" in name)
    by_key = collections.defaultdict(list)
    for t in Store(db).trials(status="ok"):
        if gpu in t.gpu_name:
            by_key[(t.k, t.n, t.m, t.layout)].append(t)
    print(f"{'key':>18} {'layout':>7} {'trials':>6} {'fastest':>8} {'pick':>8} {'pick/fastest':>12}  fastest; pick")
    for (k, n, m, layout), trials in sorted(by_key.items()):
        shape = table.shapes.get((n, k))
        if shape is None or shape.layout != layout:
            continue
        fastest = min(trials, key=lambda t: t.us)
        pick = shape.pick(m).id
        at_pick = [t.us for t in trials if t.variant_id == pick]
        pick_us = min(at_pick) if at_pick else float("nan")
        print(f"{f'M={m} {k}x{n}':>18} {layout:>7} {len(trials):6d} {fastest.us:8.2f} {pick_us:8.2f} "
              f"{pick_us / fastest.us:12.3f}  {fastest.variant_id}; {pick}{'' if at_pick else ' (not timed)'}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
