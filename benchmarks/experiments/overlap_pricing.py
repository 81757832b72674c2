"""Offline: the plans the split rule would choose if it priced side-by-side plans below their serial sum.

    python benchmarks/experiments/overlap_pricing.py [FIT] [FACTOR]

``_ShapeTable.launches`` prices a plan at its launches' summed bucket times, though a plan that
``overlaps`` runs side by side. At row 121's held-out plans whose later launches' times fit the idle SMs'
share of the largest launch's last wave once over (need / capacity <= 1, no slack) the measured time was
0.976-1.055 of the largest launch's bucket time alone; between 1 and 1.5 it ran anywhere from that to the
serial sum. So here a candidate plan that fits with no slack (``_ShapeTable.overlap_price``; FIT must be
1.0) is priced in ``_ShapeTable.launches`` at FACTOR (default 1.06, ``dispatch.OVERLAP_PRICE``) times its
largest launch's time, and every (shape, M) of the packaged H200 table whose plan would
change is counted, with the first few predicted 5% or more faster. Nothing is timed: the plans it lists are
for a same-call A/B (NOTES.md, the session plan written in `_s61`)."""
import sys

from tunesearch import dispatch
from tunesearch.dispatch import load_dispatch

SMS = 132  # the H200's


def main(fit=1.0, factor=1.06):
    assert fit == 1.0, "the dispatch's overlap_price fits with no slack"
    dispatch.OVERLAP_PRICE = factor
    table = next(t for name, t in load_dispatch().gpus.items() if "H200" in name)
    for (N, K), shape in sorted(table.shapes.items()):
        changed = []
        for m in range(2, 4097):
            old = shape.launches(m)
            new = shape.launches(m, lambda rows: shape.overlap_price(rows, N, K, SMS))  # noqa: B023
            if new != old:
                old_us = shape.table_us(m, old)
                if shape.overlaps(old, N, K, SMS):  # it runs side by side already
                    old_us = min(old_us, factor * shape.wave_room(old, N, K, SMS)[2])
                new_us = min(shape.table_us(m, new), shape.overlap_price(new, N, K, SMS) or float("inf"))
                changed.append((m, old, new, round(old_us, 1), round(new_us, 1)))
        faster = [c for c in changed if c[4] < 0.95 * c[3]]
        print(f"{K}x{N}: {len(changed)} plans change, {len(faster)} predicted 5% or more faster; first:",
              " ".join(f"M={m} {old}->{new} {a}->{b}us" for m, old, new, a, b in faster[:4]))


if __name__ == "__main__":
    main(*map(float, sys.argv[1:3]))
