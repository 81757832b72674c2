"""Offline: the plans the split rule would choose if it priced side-by-side plans at the scheduler model's time.

    python benchmarks/experiments/overlap_pricing.py [FACTOR] [SHOWN]

``_ShapeTable.launches`` prices a plan at its launches' summed bucket times, though a plan that ``overlaps``
runs side by side. With ``dispatch.OVERLAP_PRICE`` set (FACTOR, default 1.05), such a plan is priced at that
factor times ``side_by_side_us``, the block scheduler model of ``tunesearch/schedule.py``. Every (shape, M)
of the packaged H200 table whose plan would change is counted, with the first SHOWN (default 6) of those
predicted 3% or more faster and every one predicted slower (each plan's time: the factor times the model's
where it runs side by side, else its summed bucket times), and the M whose plans change.
Nothing is timed: the plans it lists are for a same-call A/B (`device_dispatch_ab.sh`, KNOB=OVERLAP_PRICE).
"""
import sys

from tunesearch import dispatch
from tunesearch.dispatch import load_dispatch

SMS = 132  # the H200's and the H100's


def plan_us(shape, m, rows, N, K):
    """What the table and the model say a plan of ``rows`` costs, run as the dispatch would run it."""
    if len(rows) == 1:
        return shape.table_us(m, rows)
    side = shape.side_by_side_price(m, rows, N, K, SMS, eager=False)
    return shape.table_us(m, rows) if side is None else min(side, shape.table_us(m, rows))


def spans(ms: list[int]) -> str:
    """Ascending M as runs: 385-392,769-832."""
    runs = []
    for m in ms:
        if runs and m == runs[-1][1] + 1:
            runs[-1][1] = m
        else:
            runs.append([m, m])
    return ",".join(f"{a}-{b}" if a != b else f"{a}" for a, b in runs)


def main(factor=1.05, shown=6):
    dispatch.OVERLAP_PRICE = factor
    table = next(t for name, t in load_dispatch().gpus.items() if "H200" in name)
    for (N, K), shape in sorted(table.shapes.items()):
        changed = []
        for m in range(2, 4097):
            old = shape.launches(m)
            price = lambda rows: shape.side_by_side_price(m, rows, N, K, SMS, eager=False)  # noqa: B023, E731
            floor = lambda rows: shape.side_by_side_floor(rows, N, K, SMS)  # noqa: B023, E731
            new = shape.launches(m, price, floor)
            if new != old:
                changed.append((m, old, new, plan_us(shape, m, old, N, K), plan_us(shape, m, new, N, K)))
        faster = [c for c in changed if c[4] < 0.97 * c[3]]
        slower = [c for c in changed if c[4] > c[3]]
        print(f"{K}x{N}: {len(changed)} plans change, {len(faster)} predicted 3% or more faster, {len(slower)} slower")
        print(f"   at M={spans([c[0] for c in changed])}")
        for m, old, new, a, b in faster[:shown] + slower:
            print(f"   M={m} {old} -> {new}: {a:.1f} -> {b:.1f} us ({b / a:.3f})")


if __name__ == "__main__":
    main(*(float(a) if i == 0 else int(a) for i, a in enumerate(sys.argv[1:])))
