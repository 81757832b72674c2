"""Offline: the block scheduler model (``tunesearch/schedule.py``) against the side-by-side A/Bs it is meant
to predict (NOTES.md row 124).

    python benchmarks/experiments/schedule_check.py

For each plan an A/B changed (``device_dispatch_ab.sh``'s "plans differ" rows: the A runs' mean over B's
time), the ratio the model predicts: each plan's time the model's where the call runs it side by side
(``overlaps``), else its summed bucket times, by the packaged H200 table. The first two files timed
``OVERLAP_PRICE``'s first form (1.06 times the largest launch's time where the others fit its idle SMs by
``wave_room``), the third the model's own plans at 1.05. Then row 121's two H200 A/Bs of side by side against
serial on the same plans (CONCURRENT=True with priority; "auto" at held-out M), at the plans ``overlaps``
picks: data the model was not made from."""
import re
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # so that it runs as a script from anywhere

# a plan's time as the dispatch runs it, side by side at OVERLAP_PRICE times the model
from benchmarks.experiments.overlap_pricing import SMS, plan_us  # noqa: E402
from tunesearch import dispatch  # noqa: E402
from tunesearch.dispatch import load_dispatch  # noqa: E402

RESULTS = ROOT / "benchmarks/results"
FIRST_FORM = ("ab_overlap_price_h100_2026-12-05_s65.txt", "ab_overlap_price_held_out_h100_2026-12-05_s66.txt")
MODEL = ("ab_overlap_model_h100_2026-12-05_s66.txt",)
SIDE_BY_SIDE = ("ab_concurrent_priority_h200_2026-12-04_s61.txt", "ab_concurrent_auto_h200_2026-12-04_s61.txt")


def ratios(name: str, differ_only: bool = True) -> dict:
    """(K, N, M) -> the A runs' mean time over B's, from an A/B's printed table."""
    out = {}
    for line in (RESULTS / name).read_text().splitlines():
        m = re.match(r"\s*M=(\d+) (\d+)x(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)", line)
        if m and (not differ_only or "plans differ" in line):
            out[(int(m[2]), int(m[3]), int(m[1]))] = (float(m[4]) + float(m[6])) / 2 / float(m[5])
    return out


def first_form(shape, N, K):
    def price(rows):
        room = shape.wave_room(rows, N, K, SMS)
        return 1.06 * room[2] if room is not None and room[0] <= room[1] else None
    return price


def main():
    table = next(t for name, t in load_dispatch().gpus.items() if "H200" in name)
    right = total = 0
    for names, form in ((FIRST_FORM, "first form"), (MODEL, "the model at 1.05")):
        print(f"plans of {form}: predicted / measured ratio to the plan they replaced")
        for name in names:
            for (K, N, M), measured in sorted(ratios(name).items(), key=lambda item: item[1]):
                shape = table.shapes[(N, K)]
                dispatch.OVERLAP_PRICE = None
                old = shape.launches(M)
                if form == "first form":
                    new = shape.launches(M, first_form(shape, N, K))
                else:
                    dispatch.OVERLAP_PRICE = 1.05
                    price = lambda rows: shape.side_by_side_price(M, rows, N, K, SMS, False)  # noqa: B023, E731
                    new = shape.launches(M, price)
                dispatch.OVERLAP_PRICE = 1.0  # the model's own time, no margin
                predicted = plan_us(shape, M, new, N, K) / plan_us(shape, M, old, N, K)
                ok = (predicted < 1) == (measured < 1) or abs(measured - 1) < 0.01
                right, total = right + ok, total + 1
                print(f"  {predicted:.3f} {measured:.3f} {'' if ok else 'WRONG '}{K}x{N} M={M} {old} -> {new}")
    print(f"{right} of {total} on the measured side of 1 (within 1%)")
    dispatch.OVERLAP_PRICE = None
    for name in SIDE_BY_SIDE:
        print(f"side by side against serial, same plans (H200, row 121, {name}), where overlaps picks it: "
              "predicted / measured")
        off = []
        for (K, N, M), measured in sorted(ratios(name, differ_only=False).items()):
            shape = table.shapes[(N, K)]
            rows = shape.launches(M)
            if len(rows) > 1 and shape.overlaps(rows, N, K, SMS):
                predicted = shape.side_by_side_us(rows, N, K, SMS) / shape.table_us(M, rows)
                off.append(measured / predicted)
                print(f"  {predicted:.3f} {measured:.3f} {K}x{N} M={M} {rows}")
        print(f"  {len(off)} plans: measured / predicted {min(off):.3f}-{max(off):.3f}, "
              f"median {statistics.median(off):.3f}")


if __name__ == "__main__":
    main()
