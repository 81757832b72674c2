"""EXPERIMENT (NOTES.md row 72): the codes' fp16 offsets taken back by a constant wgmma (rsmma's OFFSET_MMA,
row 71) against one HADD2 a weight pair, on the GPU, for the same variant and launch.

    git apply benchmarks/experiments/offsets_mma.patch   (OFFSET_MMA: not in rsmma.py as shipped)
    python benchmarks/experiments/offsets_ab.py OUT_DIR [M,...]   (on an sm_90 GPU)

For each llama-7b shape and M (default 1, 2, 4, 8), the packaged table's pick on the table's layout, and its
8-token twins at 2 and 3 CTAs an SM with BK=128 (the launches offset_mma offers the form to): each checked
against A @ dequantize(W) in both forms, then timed in both, alternating (off, on, off, on) with the
sweep's harness (CUDA-graph replay over rotated copies > 3x L2, median of 20 replays); the best of each
form's two timings is kept. Writes OUT_DIR/offsets_ab.json and prints a table. Measured
(`offsets_ab_h200_2026-12-01_s33.*`): the offsets' form 0.1-6.4% slower in 36 of the 40 pairs the rule
offers it, so the patch stays unapplied.
"""
import json
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # so that it runs as a script from anywhere

from benchmarks.experiments import gluon_checks  # noqa: E402
from benchmarks.experiments.dqmma_rs import family_launch  # noqa: E402


def candidates(pick, M):
    """The pick and its 8-token BK=128 twins at 2 and 3 CTAs an SM (deduplicated), as variants."""
    from tunesearch.variants import Variant

    out = [pick]
    if M <= 8:
        for ctas in (2, 3):
            twin = Variant(pick.family, {**pick.params, "BM": 8, "BK": 128, "CTAS": ctas})
            if twin.id not in {v.id for v in out}:
                out.append(twin)
    return out


def main(out_dir, ms=(1, 2, 4, 8)):
    from tunesearch.bench import REL_TOL, CheckInputs, Operands, graph_time
    from tunesearch.gpu import gpu_info
    from tunesearch.variants.rsmma_launch import launch_registers, offset_mma
    from tunesearch.variants.space import variant_error

    info = gpu_info(0)
    rows = []
    for M, K, N, layout, pick in gluon_checks.packaged_picks(ms, "rsmma"):
        ops = Operands(M, N, K, 128, info.l2_bytes, layout=layout)
        check = CheckInputs(M, N, K, 128, "cuda", layout=layout)
        for variant in candidates(pick, M):
            p = variant.params
            why = variant_error(variant, M, N, K, 128, torch.device("cuda"), layout=layout)
            on = offset_mma(p["BN"], p["BM"], p["BK"], launch_registers(p["num_warps"], p["CTAS"]))
            row = dict(M=M, K=K, N=N, variant=variant.id, pick=variant.id == pick.id, rule_on=on, error=why)
            if why is None:
                forms = {"hadd2": {"OFFSET_MMA": False}, "offsets": {"OFFSET_MMA": True, "SCALE_AFTER": True}}
                for name, meta in forms.items():
                    try:
                        err = gluon_checks.relative_error_of(family_launch(variant, **meta), check)
                        row[name + "_rel_error"] = err
                        if not err < REL_TOL:
                            row[name] = f"WRONG {err:.3g}"
                            continue
                        launches = [family_launch(variant, **meta)(*c) for c in ops.copies]
                        row[name] = [graph_time(launches, replays=20).us]
                    except Exception as e:
                        row[name] = f"{type(e).__name__}: {str(e)[:160]}"
                for name, meta in forms.items():  # a second round, alternating with the first
                    if isinstance(row.get(name), list):
                        launches = [family_launch(variant, **meta)(*c) for c in ops.copies]
                        row[name].append(graph_time(launches, replays=20).us)
            rows.append(row)
            best = {n: min(row[n]) if isinstance(row.get(n), list) else row.get(n) for n in ("hadd2", "offsets")}
            print(f"M={M} {K}x{N} {variant.id}{' (pick)' if row['pick'] else ''} rule={on}: {best}", flush=True)
        del ops, check
        with open(f"{out_dir}/offsets_ab.json", "w") as f:
            json.dump(dict(gpu=info.to_dict(), rows=rows), f, indent=1)
    print(f"{'key':>17} {'variant':>38} {'rule':>5} {'hadd2':>7} {'offsets':>7} {'gain':>6}")
    for r in rows:
        a, b = (min(r[n]) if isinstance(r.get(n), list) else None for n in ("hadd2", "offsets"))
        gain = f"{(a / b - 1) * 100:+5.1f}%" if a and b else "     -"
        f = lambda x: f"{x:7.2f}" if x else "      -"  # noqa: E731
        print(f"{'M=%d %dx%d' % (r['M'], r['K'], r['N']):>17} {r['variant'] + ('*' if r['pick'] else ''):>38} "
              f"{str(r['rule_on']):>5} {f(a)} {f(b)} {gain}")


if __name__ == "__main__":
    main(sys.argv[1], *(tuple(map(int, sys.argv[2].split(","))) for _ in sys.argv[2:3]))
