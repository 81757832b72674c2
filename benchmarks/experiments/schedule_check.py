"""Offline: the block scheduler model (``tunesearch/schedule.py``) against the side-by-side A/Bs it is meant to
predict (NOTES.md rows 124-125).

    python benchmarks/experiments/schedule_check.py [CLOCK_DROP]   # default: schedule.CLOCK_DROP

For each plan an A/B changed (``device_dispatch_ab.sh``'s "plans differ" rows: the A runs' mean over B's
time), the ratio the model predicts: each plan's time the model's where the call runs it side by side
(``overlaps``), else its summed bucket times, by the packaged H200 table. The first two files timed
``OVERLAP_PRICE``'s first form (1.06 times the largest launch's time where the others fit its idle SMs by
``wave_room``), its plans made again here; the others timed the model's own plans at 1.05, the plans of the
model then (``overlap_ab_plans_….json``, which ``ab_plans.py`` makes from an A/B's bench JSONs): the first
model's at M=270..1100 and at held-out M, then the mended model's at other held-out M (row 125). Then row
121's two H200 A/Bs of side by side against serial on the same plans (CONCURRENT=True with priority; "auto" at
held-out M), at the plans ``overlaps`` picks, and the plans ``side_by_side_parts.py`` took apart (side by side
over serial, same call). Last, the median of |predicted - measured| over the A/Bs' plans (the model's error
where it decides)."""
import json
import re
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # so that it runs as a script from anywhere

# a plan's time as the dispatch runs it, side by side at OVERLAP_PRICE times the model
from benchmarks.experiments.overlap_pricing import SMS, plan_us  # noqa: E402
from tunesearch import dispatch, schedule  # noqa: E402
from tunesearch.dispatch import load_dispatch  # noqa: E402

RESULTS = ROOT / "benchmarks/results"
FIRST_FORM = ("ab_overlap_price_h100_2026-12-05_s65.txt", "ab_overlap_price_held_out_h100_2026-12-05_s66.txt")
MODEL_PLANS = "overlap_ab_plans_*.json"  # each A/B's, by date (``ab_plans.py`` writes them)
PARTS = ("side_by_side_parts_h100_2026-12-05_s67.json", "side_by_side_parts_mended_h100_2026-12-05_s67.json",
         "side_by_side_parts_misses_h100_2026-12-05_s67.json")
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


def first_form_plans():
    """(file, K, N, M, before, after, measured ratio) of the first form's A/Bs, its plans made again."""
    table = next(t for name, t in load_dispatch().gpus.items() if "H200" in name)
    for name in FIRST_FORM:
        for (K, N, M), measured in sorted(ratios(name).items(), key=lambda item: item[1]):
            shape = table.shapes[(N, K)]
            yield name, K, N, M, shape.launches(M), shape.launches(M, first_form(shape, N, K)), measured


def main():
    table = next(t for name, t in load_dispatch().gpus.items() if "H200" in name)
    model_plans = [(p["file"], p["K"], p["N"], p["M"], tuple(p["before"]), tuple(p["after"]), p["ratio"])
                   for path in sorted(RESULTS.glob(MODEL_PLANS)) for p in json.loads(path.read_text())["plans"]]
    dispatch.OVERLAP_PRICE = 1.0  # the model's own time, no margin
    count, errors = {}, []
    for name, K, N, M, old, new, measured in [*first_form_plans(), *model_plans]:
        if name not in count:
            print(f"plans {name} changed: predicted / measured ratio to the plan they replaced")
        shape = table.shapes[(N, K)]
        predicted = plan_us(shape, M, new, N, K) / plan_us(shape, M, old, N, K)
        ok = (predicted < 1) == (measured < 1) or abs(measured - 1) < 0.01
        errors.append(abs(predicted - measured))
        right, total = count.get(name, (0, 0))
        count[name] = (right + ok, total + 1)
        print(f"  {predicted:.3f} {measured:.3f} {'' if ok else 'WRONG '}{K}x{N} M={M} {old} -> {new}")
    for name, (right, total) in count.items():
        print(f"{right} of {total} on the measured side of 1 (within 1%): {name}")
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
    print("plans taken apart (H100, side_by_side_parts.py): side by side over serial, predicted / measured; "
          "side by side over the largest launch alone, predicted / measured")
    for name in PARTS:
        for row in json.loads((RESULTS / name).read_text())["rows"]:
            K, N, M, rows, us = row["K"], row["N"], row["M"], tuple(row["plan"]), row["us"]
            shape = table.shapes[(N, K)]
            side = shape.side_by_side_us(rows, N, K, SMS)
            largest = max(rows)
            print(f"  {side / shape.table_us(M, rows):.3f} {us['side by side'] / us['serial']:.3f}   "
                  f"{side / shape.us[shape.index(largest)]:.3f} {us['side by side'] / us[f'{largest} alone']:.3f}"
                  f"   {K}x{N} M={M} {rows}")
    print(f"CLOCK_DROP {schedule.CLOCK_DROP}: {sum(right for right, _ in count.values())} of {len(errors)} A/B plans "
          f"on their measured side of 1, |predicted - measured| median {statistics.median(errors):.3f}, "
          f"largest {max(errors):.3f}")


if __name__ == "__main__":
    if len(sys.argv) > 1:
        schedule.CLOCK_DROP = float(sys.argv[1])
    main()
