"""EXPERIMENT: what holds the rsmma family under cuBLAS fp16 at M=96..256 (NOTES.md row 59).

    python benchmarks/experiments/rsmma_anatomy.py OUT_DIR              (on an sm_90 GPU: time)
    python benchmarks/experiments/rsmma_anatomy.py --compile VARIANT_ID (offline: the MMA-only schedule)

At 4096x11008 M=256 the table's rsmma pick runs ~515 TFLOPS against cuBLAS's ~610 (row 54), and the
wave count is not it: 4096^2 (one CTA an SM, 128 CTAs) runs the same TFLOPS. So either the unpack, which
the MMA warps do between their wgmmas, or the wgmma skeleton itself (ring, waits, register operand) is
the limit. This times each key's table pick as launched, then the same launch with the fragment builder
swapped (rsmma_kernel's FRAGMENT) for one that reads no packed word and unpacks nothing: a constant
fragment times the block's scale row (still loaded, as in the family), the MMA-only form. The full form
is checked against A @ dequantize(W) first; the MMA-only one computes something else by design.
Reading: MMA-only ~ full -> the skeleton is the limit (ping-pong or deeper pipelining would not help the
unpack, it is hidden already); MMA-only << full -> the unpack is exposed (more warps, a ping-pong).
"""
import json
import sys
from pathlib import Path

import torch
from triton.experimental import gluon
from triton.experimental.gluon import language as gl

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # so that it runs as a script from anywhere

from benchmarks.experiments import gluon_checks  # noqa: E402
from benchmarks.experiments.dqmma_rs import compile_family_offline, family_launch  # noqa: E402

# (M, K, N): the rows under fp16 in the _s23/_s25 tables, the M=32 row that now uses rsmma, and 4096^2
KEYS = [(256, 4096, 11008), (128, 4096, 11008), (256, 4096, 22016), (256, 4096, 4096), (192, 4096, 11008),
        (32, 4096, 11008)]


@gluon.jit
def mma_only_fragment(p_tile, s_tile, WORDS: gl.constexpr, FRAG: gl.constexpr):
    """The block's scale row on a constant fragment: no packed word read, nothing unpacked."""
    BN: gl.constexpr = p_tile.type.shape[1]
    BK: gl.constexpr = p_tile.type.shape[0] * 8
    scale = s_tile.reshape([BN]).load(gl.SliceLayout(1, FRAG))
    return gl.full([BN, BK], 1.0, gl.float16, FRAG) * gl.expand_dims(scale, 1)


def compile_mma_only(variant_id: str) -> dict:
    """The MMA-only form of ``variant_id`` compiled for sm_90 offline: its wgmma waits, registers, spills."""
    from benchmarks.sass_stats import disassemble, resources, wgmma_waits

    compiled = compile_family_offline(variant_id, FRAGMENT=mma_only_fragment)
    sass = disassemble(compiled)
    return dict(wgmma=sum(op.startswith("HGMMA") for _, op, _ in sass), waits=wgmma_waits(sass),
                shared_loads=sum(op.startswith("LDS") for _, op, _ in sass), **resources(compiled))


def main(out_dir):
    from tunesearch.bench import REL_TOL, CheckInputs, Operands, graph_time, time_fp16
    from tunesearch.dispatch import Dispatcher, read_table
    from tunesearch.gpu import gpu_info

    info = gpu_info(0)
    table = Dispatcher(read_table(ROOT / "tunesearch" / "tables" / "h200.json"), strict=True)
    rows = []
    for M, K, N in KEYS:
        variant = table.resolve(M, N, K, torch.device("cuda"))
        row = dict(M=M, K=K, N=N, variant=variant.id, fp16=time_fp16(M, N, K, info.l2_bytes, replays=20).us)
        err = gluon_checks.relative_error_of(family_launch(variant), CheckInputs(M, N, K, 128, "cuda"))
        row["rel_error"] = err
        ops = Operands(M, N, K, 128, info.l2_bytes)
        for form, overrides in (("full", {}), ("mma_only", {"FRAGMENT": mma_only_fragment})):
            try:
                if form == "full" and not err < REL_TOL:
                    raise AssertionError(f"WRONG: relative error {err:.3g}")
                launch = family_launch(variant, **overrides)
                row[form] = graph_time([launch(*c) for c in ops.copies], replays=20).us
            except Exception as e:
                row[form] = f"{type(e).__name__}: {str(e)[:200]}"
        flops = 2 * M * N * K
        row["tflops_full"] = flops / row["full"] / 1e6 if isinstance(row["full"], float) else None
        row["tflops_fp16"] = flops / row["fp16"] / 1e6
        rows.append(row)
        print(f"M={M} {K}x{N} {variant.id}: full {row['full']} mma-only {row['mma_only']} fp16 {row['fp16']:.2f}",
              flush=True)
        del ops
        with open(f"{out_dir}/rsmma_anatomy.json", "w") as f:
            json.dump(dict(gpu=info.to_dict(), rows=rows), f, indent=1)
    print(f"{'key':>20} {'variant':>36} {'full':>7} {'mma-only':>8} {'fp16':>7} {'TF full':>7} {'TF fp16':>7}")
    for r in rows:
        f = lambda x: f"{x:7.2f}" if isinstance(x, float) else "   fail"  # noqa: E731
        print(f"{'M=%d %dx%d' % (r['M'], r['K'], r['N']):>20} {r['variant']:>36} {f(r['full'])} {f(r['mma_only']):>8}"
              f" {f(r['fp16'])} {r['tflops_full'] or 0:7.0f} {r['tflops_fp16']:7.0f}")


if __name__ == "__main__":
    if sys.argv[1] == "--compile":
        print(json.dumps(compile_mma_only(sys.argv[2])))
    else:
        main(sys.argv[1])
