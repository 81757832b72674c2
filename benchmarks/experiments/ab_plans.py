"""The plans an A/B of ``device_dispatch_ab.sh`` changed, in the form ``schedule_check.py`` predicts: a file
``overlap_ab_plans_….json`` of {file, K, N, M, before, after, ratio} per (K, N, M) whose plans differ.

    python benchmarks/experiments/ab_plans.py DIR TAG NAME OUT

DIR holds ``bench_{TAG}_{a1,b,a2}.json`` (the A run, the B run, the A run again); NAME is the name its printed
table is committed under (``ab_….txt``), written into each plan as its file; OUT is written, or extended
where it exists (a plan of the same file and key replaced). Before: B's launches, after: A's (rows each, in
A's order as the variant string gives them: "768: id + 16: id", or one id for M whole); ratio: the A runs'
mean over B's time, as the printed table has it."""
import json
import sys
from pathlib import Path


def launch_rows(variant: str, m: int) -> list[int]:
    """The rows of each launch in a bench row's variant string ("768: id + 16: id (side by side)"), [M] whole."""
    parts = variant.removesuffix(" (side by side)").split(" + ")
    if len(parts) == 1 and ": " not in parts[0]:
        return [m]
    return [int(part.split(": ", 1)[0]) for part in parts]


def changed_plans(runs: dict[str, list[dict]], name: str) -> list[dict]:
    """{file, K, N, M, before, after, ratio} for each key whose A and B plans differ."""
    a1, b, a2 = ({(r["K"], r["N"], r["M"]): r for r in runs[k]} for k in ("a1", "b", "a2"))
    plans = []
    for key, row in a1.items():
        if row["variant"] == b[key]["variant"]:
            continue
        if row["variant"] != a2[key]["variant"]:
            raise ValueError(f"the two A runs planned {key} differently: {row['variant']!r}, {a2[key]['variant']!r}")
        K, N, M = key
        ratio = (row["tunesearch_us"] + a2[key]["tunesearch_us"]) / 2 / b[key]["tunesearch_us"]
        plans.append(dict(file=name, K=K, N=N, M=M, before=launch_rows(b[key]["variant"], M),
                          after=launch_rows(row["variant"], M), ratio=round(ratio, 4)))
    return plans


def main(folder: str, tag: str, name: str, out: str):
    runs = {k: json.loads((Path(folder) / f"bench_{tag}_{k}.json").read_text())["rows"] for k in ("a1", "b", "a2")}
    new = changed_plans(runs, name)
    path = Path(out)
    kept = json.loads(path.read_text()) if path.exists() else {
        "note": "Plans an OVERLAP_PRICE A/B changed (B: before, A: after; rows of each launch in A's order) and A's "
                "mean time over B's, per (K, N, M), made by ab_plans.py from the A/B's bench JSONs; "
                "schedule_check.py predicts each with the current model.", "plans": []}
    keys = {(p["file"], p["K"], p["N"], p["M"]) for p in new}
    kept["plans"] = [p for p in kept["plans"] if (p["file"], p["K"], p["N"], p["M"]) not in keys] + new
    path.write_text(json.dumps(kept, indent=1) + "\n")
    print(f"{len(new)} changed plans of {name} written to {out}")


if __name__ == "__main__":
    main(*sys.argv[1:5])
