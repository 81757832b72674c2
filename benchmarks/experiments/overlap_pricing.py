"""Offline: the plans the split rule would choose if it priced side-by-side plans below their serial sum.

    python benchmarks/experiments/overlap_pricing.py [FIT] [FACTOR]

``_ShapeTable.launches`` prices a plan at its launches' summed bucket times, though a plan that
``overlaps`` runs side by side. At row 121's held-out plans whose later launches' times fit the idle SMs'
share of the largest launch's last wave once over (need / capacity <= 1, no slack) the measured time was
0.976-1.055 of the largest launch's bucket time alone; between 1 and 1.5 it ran anywhere from that to the
serial sum. So here a candidate plan with need / capacity <= FIT (default 1.0) is priced at FACTOR (default
1.06) times its largest launch's time, and every (shape, M) of the packaged H200 table whose plan would
change is counted, with the first few predicted 5% or more faster. Nothing is timed: the plans it lists are
for a same-call A/B (NOTES.md, the session plan written in `_s61`)."""
import sys

from tunesearch.dispatch import load_dispatch
from tunesearch.export import two_launches_win
from tunesearch.variants.space import launch_waves


def need_over_capacity(shape, rows, N, K, sms=132):
    """(later launches' summed time / the idle SMs' share of one of the largest's waves, its time)."""
    first, *later = sorted(rows, reverse=True)
    v = shape.pick(first)
    waves = launch_waves(v.family, v.params, first, N, K, sms)
    first_us, later_us = shape.us[shape.index(first)], [shape.us[shape.index(r)] for r in later]
    if waves is None or first_us is None or None in later_us or not later:
        return None, first_us
    ctas, at_once = waves
    count = -(-ctas // at_once)
    idle = 1 - (ctas - (count - 1) * at_once) / at_once
    return (sum(later_us) / (idle * first_us / count) if idle > 0 else float("inf")), first_us


def priced_launches(shape, m, N, K, fit, factor):
    """``_ShapeTable.launches`` with side-by-side plans priced as above: (rows, predicted us)."""
    i = shape.index(m)
    whole = shape.whole_us(m) if m <= shape.m_maxes[i] else None
    if whole is None:
        return (m,), None
    below = [shape.m_maxes[j] for j in reversed(shape.full) if j < i]
    best = {}
    for first in below:
        for second in [None] + [r for r in below if r <= first and first + r < m]:
            rows = (first,) if second is None else (first, second)
            rows += (m - sum(rows),)
            us = shape.table_us(m, rows)
            ratio, first_us = need_over_capacity(shape, rows, N, K)
            if us is not None and ratio is not None and ratio <= fit:
                us = min(us, factor * first_us)
            if us is not None and (len(rows) not in best or us < best[len(rows)][0]):
                best[len(rows)] = (us, rows)
    chosen_us, chosen = whole, (m,)
    for count in sorted(best):
        us, rows = best[count]
        if two_launches_win(us, chosen_us):
            chosen_us, chosen = us, rows
    return chosen, chosen_us


def main(fit=1.0, factor=1.06):
    table = next(t for name, t in load_dispatch().gpus.items() if "H200" in name)
    for (N, K), shape in sorted(table.shapes.items()):
        changed = []
        for m in range(2, 4097):
            old = shape.launches(m)
            new, new_us = priced_launches(shape, m, N, K, fit, factor)
            if new != old:
                old_us = shape.table_us(m, old)
                ratio, first_us = need_over_capacity(shape, old, N, K) if len(old) > 1 else (None, None)
                if ratio is not None and ratio <= 1.5:  # the plan runs side by side already
                    old_us = min(old_us, factor * first_us)
                changed.append((m, old, new, round(old_us, 1), round(new_us, 1)))
        faster = [c for c in changed if c[4] < 0.95 * c[3]]
        print(f"{K}x{N}: {len(changed)} plans change, {len(faster)} predicted 5% or more faster; first:",
              " ".join(f"M={m} {old}->{new} {a}->{b}us" for m, old, new, a, b in faster[:4]))


if __name__ == "__main__":
    main(*map(float, sys.argv[1:3]))
