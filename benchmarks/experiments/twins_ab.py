"""EXPERIMENT: the packaged table's picks against twins with some parameters changed, on the GPU, before a
grid change is worth a sweep (NOTES.md row 72: rsmma with SPLIT_K=3 and 6, splits the grid lacks).

    python benchmarks/experiments/twins_ab.py OUT_DIR PARAM=V1,V2,...[;PARAM=...] [M,...]   (on an sm_90 GPU)

For each llama-7b shape and M (default 1, 8, 16, 32, 64), the table's pick on the table's layout and its
twins with each combination of the values named (those the space allows and does not prune at the key, on
one wave of CTAs: grid CTAs <= CTAS x SMs, since a second wave is a known loss): each checked
against A @ dequantize(W), then timed with the sweep's harness (CUDA-graph replay over rotated copies
> 3x L2, median of 20 replays), twice in alternating rounds, keeping each one's best. Writes
OUT_DIR/twins_ab.json and prints a table: the pick's time, the fastest twin's, and the gain.
"""
import itertools
import json
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # so that it runs as a script from anywhere

from benchmarks.experiments import gluon_checks  # noqa: E402

def one_wave(variant, M, N, K, sms) -> bool:
    """Whether the variant's split-K grid runs in one wave of CTAS (default 1) CTAs an SM."""
    from tunesearch.variants.space import gluon_grid

    p = variant.params
    ctas = p.get("CTAS", 1)
    grid, _ = gluon_grid(M, N, K, p["BM"], p["BN"], p["BK"], p.get("SPLIT_K", 1), ctas * sms)
    return grid[0] * grid[1] * grid[2] <= ctas * sms


def main(out_dir, change, ms=(1, 8, 16, 32, 64)):
    from tunesearch.bench import REL_TOL, CheckInputs, Operands, time_variant
    from tunesearch.gpu import gpu_info
    from tunesearch.variants import Variant
    from tunesearch.variants.space import variant_error

    changes = {}
    for spec in change.split(";"):
        param, _, values = spec.partition("=")
        changes[param] = [int(v) for v in values.split(",")]
    info = gpu_info(0)
    cuda = torch.device("cuda")
    rows = []
    for M, K, N, layout, pick in gluon_checks.packaged_picks(ms):
        if not set(changes) <= set(pick.params):
            continue
        twins = [Variant(pick.family, {**pick.params, **dict(zip(changes, values))})
                 for values in itertools.product(*changes.values())]
        twins = [t for t in dict.fromkeys(twins) if t != pick and one_wave(t, M, N, K, info.sm_count)
                 and variant_error(t, M, N, K, 128, cuda, prune=True, layout=layout) is None]
        ops = Operands(M, N, K, 128, info.l2_bytes, layout=layout)
        check = CheckInputs(M, N, K, 128, "cuda", layout=layout)
        times = {}
        for variant in [pick] + twins:
            try:
                err = check.check(variant)
                times[variant.id] = [time_variant(variant, ops, replays=20).us] if err < REL_TOL \
                    else f"WRONG {err:.3g}"
            except Exception as e:
                times[variant.id] = f"{type(e).__name__}: {str(e)[:160]}"
        for variant in [pick] + twins:  # a second round, after every first
            if isinstance(times[variant.id], list):
                times[variant.id].append(time_variant(variant, ops, replays=20).us)
        row = dict(M=M, K=K, N=N, layout=layout, pick=pick.id, times=times)
        rows.append(row)
        print(f"M={M} {K}x{N}: {times}", flush=True)
        del ops, check
        with open(f"{out_dir}/twins_ab.json", "w") as f:
            json.dump(dict(gpu=info.to_dict(), change=change, rows=rows), f, indent=1)
    print(f"{'key':>17} {'pick':>36} {'us':>7} {'best twin':>36} {'us':>7} {'gain':>6}")
    for r in rows:
        best = {vid: min(t) for vid, t in r["times"].items() if isinstance(t, list)}
        mine = best.get(r["pick"])
        twin = min((vid for vid in best if vid != r["pick"]), key=best.get, default=None)
        gain = f"{(mine / best[twin] - 1) * 100:+5.1f}%" if mine and twin else "     -"
        print(f"{'M=%d %dx%d' % (r['M'], r['K'], r['N']):>17} {r['pick']:>36} {mine or 0:7.2f} "
              f"{twin or '-':>36} {best.get(twin, 0):7.2f} {gain}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], *(tuple(map(int, sys.argv[3].split(","))) for _ in sys.argv[3:4]))
