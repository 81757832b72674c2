"""EXPERIMENT: the W4A16 GEMM with the weights as the wgmma's register operand (NOTES.md row 50).

    python benchmarks/experiments/dqmma_rs.py OUT_DIR                          (on an sm_90 GPU: check, time)
    python benchmarks/experiments/dqmma_rs.py --compile BM,BK,WG,STAGES[,SPLIT_K[,SCALE_AFTER]]  (offline: the schedule)
    python benchmarks/experiments/dqmma_rs.py --compile-family VARIANT_ID [LAYOUT]  (offline: the rsmma family's)
    python benchmarks/experiments/dqmma_rs.py --registers VARIANT_ID@MAXNREG,[VARIANT_ID@]MAXNREG...
                                                                  (offline: does it fit? a count alone: the same variant)
    python benchmarks/experiments/dqmma_rs.py --registers-scale-after VARIANT_ID@MAXNREG,...  (its scale-after form)

Measured (row 51, _s20): frag32 beats the packaged table's dqmma picks from M=64 (4096x11008 M=128
34.9 -> 26.3 us) and loses at decode (M=1..32); a kernel reading the base layout as it is keeps most of
that (28.96 us) with no second copy of the weights: that one is the rsmma family (variants/rsmma.py).
PLAN holds the last probe (row 60: rsmma with 256-column tiles at M=8..64); the frag32 plans of rows 50-51 are in
commits 3cf0466 and b58f078, their results in benchmarks/results/dqmma_rs*_s20.*.

Row 49 found the dqmma family's two partitions overlapping only in part: its unpack warps write every
fp16 weight to shared memory for the MMA warps' wgmma to read (once per warp group), ~176 KB of shared
traffic a 128x128x128 block. Here the product is taken transposed, C^T [N, M] = W^T [N, K] x A^T [K, M]:
W^T is the wgmma's A operand, unpacked by the MMA warps straight into the registers the instruction
reads, and A^T (the activations' TMA tile, a transposed view) its shared B operand. No fp16 weight
touches shared memory (~112 KB a block), and no hand-over between partitions is left but the copies.
Each warp group unpacks block i + 1 while its wgmma of block i runs (one left in flight).

The register operand's fragment puts, for each 16-deep k step, k = 2t, 2t + 1, 2t + 8, 2t + 9 of two
rows in thread t of a quad. Layout **frag32** stores exactly those (variants/layout.py, its specification
and tests; rows 50-51 had it as [K/32, N, 4] with rows in natural order, shipped in row 69 as [K/32, 4N]
with a column pair's words adjacent, so the fragment's rows come in the family's paired order). The kernel
is the rsmma family's (`rsmma_kernel`), launched here with frag32's fragment builder and descriptors on
weights repacked from the base layout, and checked against A @ dequantize(base packing).

The probe first runs each config on mask-edge shapes in a child process with a timeout (a wrong barrier
phase hangs), checks it at the key against A @ dequantize(W), then times it beside the packaged table's
pick and cuBLAS fp16.
"""
import json
import sys
from pathlib import Path

import torch
import triton

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # so that it runs as a script from anywhere

from benchmarks.experiments import gluon_checks  # noqa: E402
from tunesearch.variants.layout import to_layout  # noqa: E402
from tunesearch.variants.rsmma import (ALL_PARTS, frag32_descriptors, frag32_fragment,  # noqa: E402
                                       frag32_word_layout, rsmma_kernel)

def launch_registers(WG: int) -> int:
    """The MMA warps (4 per warp group) and the loader, padded to a warp group, share an SM's 64K."""
    return min(232, 65536 // (32 * (4 * WG + 4)) // 8 * 8)


def _constexprs(BM, BK, WG, STAGES, SPLIT_K, group_size, scale_after=False) -> dict:
    """The family kernel's constexprs for the frag32 layout (its fragment builder, rows in the paired order)."""
    return dict(GROUP=group_size, BM=BM, BK=BK, SPLIT_K=SPLIT_K, MAX_PARTS=SPLIT_K, STAGES=STAGES,
                WORDS=frag32_word_layout(BK, 4 * WG), FRAGMENT=frag32_fragment, PAIRED_ROWS=True, PARTS=ALL_PARTS,
                SCALE_AFTER=scale_after, SKEW=0, OWNER_FIRST=False, num_warps=4 * WG)


def launcher(a, packed_f, scales, out, BM, BK, WG, STAGES, SPLIT_K=1, group_size=128, **meta_overrides):
    """A no-argument callable running the kernel on these operands (for graph capture); ``meta_overrides``
    replace its meta-parameters (e.g. ``maxnreg`` for several CTAs an SM, ``PARTS`` for the ring alone)."""
    M, K = a.shape
    N = scales.shape[1]
    BN = 64 * WG
    tiles = triton.cdiv(N, BN) * triton.cdiv(M, BM)
    ws = torch.empty(tiles * SPLIT_K * BN * BM if SPLIT_K > 1 else 1, dtype=torch.float32, device=a.device)
    locks = torch.zeros(tiles, dtype=torch.int32, device=a.device)
    args = (*frag32_descriptors(a, packed_f, scales, BM, BN, BK), out, ws, locks, M, N, K, *out.stride())
    meta = _constexprs(BM, BK, WG, STAGES, SPLIT_K, group_size) | dict(maxnreg=launch_registers(WG)) | meta_overrides
    grid = (triton.cdiv(N, BN), SPLIT_K, triton.cdiv(M, BM))
    return lambda: rsmma_kernel[grid](*args, **meta)


def compile_offline(BM, BK, WG, STAGES, SPLIT_K=1, SCALE_AFTER=0, group_size=128):
    """The kernel compiled for sm_90 without a GPU (descriptors of a 4096-deep layer's operands); SCALE_AFTER
    scales each block's partial. (The natural-row form of rows 50-64 serialized every wgmma with it, C7514;
    frag32 now keeps the family's paired rows, row 69.)"""
    a = torch.empty(BM, 4096, dtype=torch.float16)
    packed_f = torch.empty(128, 4 * 11008, dtype=torch.int32)
    scales = torch.empty(32, 11008, dtype=torch.float16)
    consts = _constexprs(BM, BK, WG, STAGES, SPLIT_K, group_size, bool(SCALE_AFTER))
    return gluon_checks.compile_tma_kernel(rsmma_kernel, frag32_descriptors(a, packed_f, scales, BM, 64 * WG, BK),
                                           consts, 4 * WG, launch_registers(WG))


def schedule(BM, BK, WG, STAGES, SPLIT_K=1, SCALE_AFTER=0) -> dict:
    """What the compiled kernel holds (sm_90, offline): wgmma (and whether their A operand is registers),
    their waits, TMA loads, shared stores, registers and spills."""
    from benchmarks.sass_stats import disassemble, resources, wgmma_waits

    compiled = compile_offline(BM, BK, WG, STAGES, SPLIT_K, SCALE_AFTER)
    sass = disassemble(compiled)
    hgmma = [rest for _, op, rest in sass if op.startswith("HGMMA")]
    return dict(wgmma=len(hgmma), register_a=sum("gdesc" not in r.split(",")[1] for r in hgmma),
                waits=wgmma_waits(sass),
                tma_loads=sum(op.startswith("UTMALDG") for _, op, _ in sass),
                shared_stores=sum(op.startswith("STS") for _, op, _ in sass),
                shared=compiled.metadata.shared, **resources(compiled))


def compile_family_offline(variant_id: str, M: int = 128, N: int = 11008, K: int = 4096, group_size: int = 128,
                           layout: str = "base", **meta_overrides):
    """The rsmma family's kernel for ``variant_id`` compiled for sm_90 without a GPU, with the launch the
    family makes (``api._rsmma_call``) on CPU stand-ins for a layer's operands, any of its meta-parameters
    replaced by ``meta_overrides`` (e.g. ``maxnreg``, or rsmma_anatomy's ``FRAGMENT``)."""
    from tunesearch.variants.api import _rsmma_call
    from tunesearch.variants.space import Variant

    a = torch.empty(M, K, dtype=torch.float16)
    packed = torch.empty(*((K // 8, N) if layout == "base" else (K // 32, 4 * N)), dtype=torch.int32)
    scales = torch.empty(K // group_size, N, dtype=torch.float16)
    out = torch.empty(M, N, dtype=torch.float16)
    kernel, _, args, meta = _rsmma_call(Variant.from_id(variant_id).params, a, packed, scales, out, group_size)
    meta = meta | meta_overrides
    consts = {name: meta[name] for name in kernel.arg_names if name in meta}
    return gluon_checks.compile_tma_kernel(kernel, args[:3], consts, meta["num_warps"], meta["maxnreg"])


def fits_registers(variant_id: str, maxnreg: int, scale_after: bool | None = None) -> dict:
    """Whether the rsmma kernel of ``variant_id`` compiles at ``maxnreg`` registers a thread as the family
    needs it: ptxas fits it (it may refuse: "insufficient registers"), with no spills and one wgmma left in
    flight (short of registers, ptxas may instead wait for every wgmma, C7512/C7515). The kernel is the one a
    launch with that many registers runs (rsmma_launch.scale_after), or the form ``scale_after`` names."""
    from triton.runtime.errors import PTXASError

    from benchmarks.sass_stats import disassemble, resources, wgmma_waits
    from tunesearch.variants.rsmma_launch import scale_after as launch_scales_after
    from tunesearch.variants.space import Variant

    if scale_after is None:
        p = Variant.from_id(variant_id).params
        scale_after = launch_scales_after(p["BN"], p["BM"], p["BK"], maxnreg)
    try:
        compiled = compile_family_offline(variant_id, maxnreg=maxnreg, SCALE_AFTER=scale_after)
    except PTXASError as e:
        return dict(fits=False, why=str(e).split("ptxas fatal")[-1].strip()[:200])
    waits = wgmma_waits(disassemble(compiled))
    got = resources(compiled)
    in_flight = "gsb0, 0x1" in waits
    return dict(fits=got["local"] == 0 and in_flight, why=None if in_flight else "every wgmma waited for", **got)


def family_launch(variant, **meta_overrides):
    """The rsmma family's launch of ``variant`` as gluon_checks takes it, any of its meta-parameters
    replaced by ``meta_overrides`` (e.g. ``maxnreg``: that many registers a thread, not the family's)."""
    from tunesearch.variants.api import _rsmma_call

    def launch(a, packed, scales, out):
        kernel, grid, args, meta = _rsmma_call(variant.params, a, packed, scales, out, 128)
        return lambda: kernel[grid](*args, **(meta | meta_overrides))
    return launch


def family_schedule(variant_id: str, layout: str = "base") -> dict:
    """``schedule``'s figures for the rsmma family's kernel of ``variant_id``, with its shared loads by width
    (the split reduction's read-back of the partials apart: ``readback_loads``)."""
    from benchmarks.sass_stats import before_split_readback, disassemble, resources, split_readback_loads, wgmma_waits

    compiled = compile_family_offline(variant_id, layout=layout)
    sass = disassemble(compiled)
    loads = before_split_readback(sass)
    hgmma = [rest for _, op, rest in sass if op.startswith("HGMMA")]
    return dict(wgmma=len(hgmma), register_a=sum("gdesc" not in r.split(",")[1] for r in hgmma),
                waits=wgmma_waits(sass),
                tma_loads=sum(op.startswith("UTMALDG") for _, op, _ in sass),
                fp16_multiplies=sum(op.startswith("HMUL2") for _, op, _ in sass),
                shared_loads={op: sum(o == op for _, o, _ in loads) for op in sorted({o for _, o, _ in loads
                                                                                     if o.startswith("LDS")})},
                readback_loads=split_readback_loads(sass),
                shared=compiled.metadata.shared, **resources(compiled))


# (M, K, N) -> frag32 configs (BM, BK, WG, STAGES, SPLIT_K) and rsmma variant ids ("@R": launched with R
# registers a thread), beside the packaged table's pick. Row 60: column tiles of 256 (16 MMA warps, 96
# registers a thread) at M=8..64. Each CTA reads its token tile of A for every block, and at BN=64 that
# is 1x (BM=16) to 4x (BM=64) the bytes of W it reads: through L2 the kernel moves 2-5x the packed bytes.
# BN=256 cuts A's share 4x. (The family's rules admit BN <= 128; the probe launches what it is given.)
# Row 57's plan (M=16/48 at BN=64) is in commit 0535b78, row 56's (M=32) in 139d56e.
def _bn256(bm, splits):
    return [f"rsmma.bm{bm}.bn256.bk128.sk{splits[0]}.w16.s4", f"rsmma.bm{bm}.bn256.bk64.sk{splits[0]}.w16.s6",
            f"rsmma.bm{bm}.bn256.bk128.sk{splits[1]}.w16.s4"]


PLAN = {(8, 4096, 11008): _bn256(16, (4, 2)),
        (16, 4096, 11008): _bn256(16, (4, 2)), (16, 11008, 4096): _bn256(16, (8, 4)),
        (16, 4096, 22016): _bn256(16, (2, 1)),
        (32, 4096, 11008): _bn256(32, (4, 2)) + ["rsmma.bm32.bn128.bk128.sk4.w8.s4"],
        (32, 11008, 4096): _bn256(32, (8, 4)) + ["rsmma.bm32.bn128.bk128.sk8.w8.s4"],
        (32, 4096, 22016): _bn256(32, (2, 1)) + ["rsmma.bm32.bn128.bk128.sk2.w8.s4"],
        (64, 4096, 11008): ["rsmma.bm64.bn256.bk64.sk2.w16.s6", "rsmma.bm64.bn256.bk64.sk4.w16.s6"],
        (64, 4096, 22016): ["rsmma.bm64.bn256.bk64.sk1.w16.s6", "rsmma.bm64.bn256.bk64.sk2.w16.s6"]}
FIELDS = ("BM", "BK", "WG", "STAGES", "SPLIT_K")
# mask edges: M across the token tile (65, 130), N no multiple of BN (200, 520), K of one block a split
SMOKE_SHAPES = [(65, 512, 200), (130, 1024, 520), (5, 256, 264)]


def _launch(config):
    """``config``'s launch on base-layout operands (weights repacked to frag32), as gluon_checks takes it."""
    return lambda a, packed, scales, out: launcher(a, to_layout(packed, "frag32"), scales, out, **config)


def smoke(config) -> str | None:
    """``config`` on the smoke shapes against A @ dequantize(W); None, or what went wrong."""
    return gluon_checks.smoke(_launch(config), SMOKE_SHAPES)


def main(out_dir):
    from tunesearch.bench import REL_TOL, CheckInputs, Operands, graph_time, time_fp16, time_variant
    from tunesearch.dispatch import Dispatcher, read_table
    from tunesearch.gpu import gpu_info
    from tunesearch.variants import Variant

    info = gpu_info(0)
    table = Dispatcher(read_table(ROOT / "tunesearch" / "tables" / "h200.json"), strict=True)
    rows, smoked = [], {}
    for (M, K, N), configs in PLAN.items():
        ops = Operands(M, N, K, 128, info.l2_bytes)
        frag = [(c[0], to_layout(c[1], "frag32"), c[2], c[3]) for c in ops.copies]
        inputs = CheckInputs(M, N, K, 128, "cuda")
        shipped = table.resolve(M, N, K, torch.device("cuda"))
        ref = dict(fp16=time_fp16(M, N, K, info.l2_bytes, replays=20).us,
                   table=time_variant(shipped, ops, replays=20).us, table_variant=shipped.id)
        print(f"M={M} {K}x{N}: fp16 {ref['fp16']:.2f} | table {ref['table']:.2f} ({shipped.id})", flush=True)
        for key in configs:
            if isinstance(key, str):  # the family's launch, its registers a thread as given after "@"
                ident, _, regs = key.partition("@")
                launch = family_launch(Variant.from_id(ident), **({"maxnreg": int(regs)} if regs else {}))
                try:
                    err = gluon_checks.relative_error_of(launch, inputs)
                    if not err < REL_TOL:
                        raise AssertionError(f"WRONG: relative error {err:.3g}")
                    us = graph_time([launch(*c) for c in ops.copies], replays=20).us
                except Exception as e:
                    us = f"{type(e).__name__}: {str(e)[:200]}"
                rows.append(dict(M=M, K=K, N=N, variant=key, us=us, **ref))
                print(f"  {key}: " + (us if isinstance(us, str) else f"{us:.2f}"), flush=True)
                continue
            config = dict(zip(FIELDS, key))
            if key not in smoked:  # once per config, in a child process: a hang must not stop the probe
                smoked[key] = gluon_checks.smoke_in_child(__file__, FIELDS, config, timeout_s=60)
            try:
                if smoked[key]:
                    raise RuntimeError(smoked[key])
                err = gluon_checks.relative_error_of(_launch(config), inputs)
                if not err < REL_TOL:
                    raise AssertionError(f"WRONG: relative error {err:.3g}")
                us = graph_time([launcher(*c, **config) for c in frag], replays=20).us
            except Exception as e:  # a config that does not compile, fit or compute right: say so
                us = f"{type(e).__name__}: {str(e)[:200]}"
            rows.append(dict(M=M, K=K, N=N, **config, us=us, **ref))
            print("  bm{} bk{} wg{} s{} sk{}: ".format(*key) + (us if isinstance(us, str) else f"{us:.2f}"),
                  flush=True)
        del ops, frag, inputs
        with open(f"{out_dir}/dqmma_rs.json", "w") as f:
            json.dump(dict(gpu=info.to_dict(), rows=rows), f, indent=1)


if __name__ == "__main__":
    if sys.argv[1] == "--compile":
        print(json.dumps(schedule(*map(int, sys.argv[2].split(",")))))
    elif sys.argv[1] == "--compile-family":
        print(json.dumps(family_schedule(*sys.argv[2:4])))
    elif sys.argv[1] in ("--registers", "--registers-scale-after"):  # VARIANT_ID@MAXNREG[,[VARIANT_ID@]MAXNREG...]
        forced = True if sys.argv[1] == "--registers-scale-after" else None
        fits, variant_id = [], None
        for item in sys.argv[2].split(","):  # a count alone is the previous variant's
            variant_id, regs = item.split("@") if "@" in item else (variant_id, item)
            fits.append(fits_registers(variant_id, int(regs), forced))
        print(json.dumps(fits))
    elif sys.argv[1] == "--smoke":
        problem = smoke(dict(zip(FIELDS, map(int, sys.argv[2].split(",")))))
        print(problem or "ok")
        sys.exit(1 if problem else 0)
    else:
        main(sys.argv[1])
