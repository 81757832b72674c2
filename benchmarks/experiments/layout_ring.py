"""EXPERIMENT: does the weights' layout hold rsmma's ring over the streaming floor at small M (NOTES.md row 66)?

    python benchmarks/experiments/layout_ring.py OUT_DIR      (on an sm_90 GPU)

The _s29 anatomy: at M <= 32 the TMA ring alone (no MMA) runs 1.5-3 us over the floor on 4096x11008,
11008x4096 and 4096^2, with or without splits, and stream-K, which scatters the CTAs over K, made it
slower still. The base layout's box is BK/8 rows of 256 bytes (BN=64 columns of int32), N * 4 bytes
apart; the frag32 layout of dqmma_rs.py (int32 [K/32, N, 4]) gives the same block as BK/32 rows of 1 KB.
If DRAM locality is the ring's excess, the frag32 ring comes closer to the floor. Each key's table pick
(base layout) is timed whole and as the ring alone, then the same launch (tile, stages, splits, the
registers of its CTAs an SM) on a frag32 copy of the weights, whole (checked against A @ dequantize(W);
the fragment scaled before the wgmma, as frag32's scale-after form serializes) and as the ring alone.
"""
import json
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # so that it runs as a script from anywhere

from benchmarks.experiments import gluon_checks  # noqa: E402
from benchmarks.experiments.dqmma_rs import family_launch, launcher, pack_frag32  # noqa: E402

# (M, K, N): the keys whose ring ran over the floor in the _s29 anatomy, and 4096x22016 (at the floor)
KEYS = [(1, 4096, 11008), (16, 4096, 11008), (16, 11008, 4096), (16, 4096, 4096), (16, 4096, 22016),
        (32, 4096, 11008), (32, 11008, 4096)]


def main(out_dir):
    from tunesearch.bench import REL_TOL, CheckInputs, Operands, graph_time, kernel_bytes
    from tunesearch.dispatch import Dispatcher, read_table
    from tunesearch.gpu import gpu_info, stream_read_floor
    from tunesearch.variants import Variant
    from tunesearch.variants.rsmma import A_COPY
    from tunesearch.variants.rsmma_launch import launch_registers

    info = gpu_info(0)
    table = Dispatcher(read_table(ROOT / "tunesearch" / "tables" / "h200.json"), strict=True)
    rows = []
    for M, K, N in KEYS:
        variant = table.resolve(M, N, K, torch.device("cuda"))
        if variant.family != "rsmma":  # M=1 where the gemv holds the bucket: its rsmma seed instead
            variant = Variant.from_id("rsmma.bm16.bn64.bk128.sk2.w4.s6.c3")
        p = variant.params
        config = dict(BM=p["BM"], BK=p["BK"], WG=p["BN"] // 64, STAGES=p["num_stages"], SPLIT_K=p["SPLIT_K"],
                      maxnreg=launch_registers(p["num_warps"], p["CTAS"]))
        row = dict(M=M, K=K, N=N, variant=variant.id,
                   floor=stream_read_floor(kernel_bytes(1, N, K, 128), info.l2_bytes, info.sm_count, replays=20).us)
        inputs = CheckInputs(M, N, K, 128, "cuda")
        ops = Operands(M, N, K, 128, info.l2_bytes)
        frag = [(c[0], pack_frag32(c[1]), c[2], c[3]) for c in ops.copies]

        def frag32(a, packed, scales, out, **overrides):
            return launcher(a, pack_frag32(packed), scales, out, **config, **overrides)

        checks = {"base": gluon_checks.relative_error_of(family_launch(variant), inputs),
                  "frag32": gluon_checks.relative_error_of(frag32, inputs)}
        row.update({f"{name}_rel_error": err for name, err in checks.items()})
        forms = (("base", [family_launch(variant)(*c) for c in ops.copies]),
                 ("ring_base", [family_launch(variant, PARTS=A_COPY.value)(*c) for c in ops.copies]),
                 ("frag32", [launcher(*c, **config) for c in frag]),
                 ("ring_frag32", [launcher(*c, **config, PARTS=A_COPY.value) for c in frag]))
        for form, launches in forms:
            try:
                if form in checks and not checks[form] < REL_TOL:
                    raise AssertionError(f"WRONG: relative error {checks[form]:.3g}")
                row[form] = graph_time(launches, replays=20).us
            except Exception as e:
                row[form] = f"{type(e).__name__}: {str(e)[:200]}"
        rows.append(row)
        print(f"M={M} {K}x{N} {variant.id}: " + " ".join(f"{name} {row[name]}" for name, _ in forms)
              + f" floor {row['floor']:.2f}", flush=True)
        del ops, frag, inputs
        with open(f"{out_dir}/layout_ring.json", "w") as f:
            json.dump(dict(gpu=info.to_dict(), rows=rows), f, indent=1)
    names = [name for name, _ in forms] + ["floor"]
    print(f"{'key':>17} {'variant':>36} " + " ".join(f"{n:>11}" for n in names))
    for r in rows:
        f = lambda x: f"{x:11.2f}" if isinstance(x, float) else "       fail"  # noqa: E731
        print(f"{'M=%d %dx%d' % (r['M'], r['K'], r['N']):>17} {r['variant']:>36} " + " ".join(f(r[n]) for n in names))


if __name__ == "__main__":
    main(sys.argv[1])
