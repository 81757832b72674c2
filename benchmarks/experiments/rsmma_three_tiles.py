"""EXPERIMENT: one token tile of HI + MID + LO tokens as three accumulators on one weight fragment, for
M = 161..176 (128 + 32 + 16), where every form of the space runs 192 tokens' MMA or more.

    python benchmarks/experiments/rsmma_three_tiles.py OUT_DIR    (on an sm_90 GPU: checked on mask edges
                                                                  and at each key against A @ dequantize(W),
                                                                  timed beside twotile's 128 + 64, the
                                                                  table's pick and cuBLAS fp16; env
                                                                  THREE_TILES_SHAPES "KxN,...",
                                                                  THREE_TILES_MS "161,168")
    python benchmarks/experiments/rsmma_three_tiles.py --compile CONFIG  (offline, sm_90: registers,
                                                                          spills, the wgmmas in flight)

Why (NOTES.md rows 91-92, `_s45`'s plan (b)): the twotile family feeds two wgmmas, of HI and LO tokens,
from one unpacked fragment, and serves M=129..160 at cuBLAS's time on the wide shapes. Past 160 its
largest form, 128 + 64, does 192 tokens' MMA wherever M falls (33.9 us on 4096x12288; cuBLAS ~30 at
M=161: 0.89x), and a Triton tensor needs a power-of-two shape, so 176 tokens are three accumulators:
[BN, 128], [BN, 32] and [BN, 16], three wgmmas on the same registers. Predicted from 128 + 64's time at
192 tokens, ~31-32 us at 176 on 4096x12288: perhaps not enough to pass cuBLAS.

RESULT (H200, 2026-12-03, benchmarks/results/rsmma_three_tiles_h200_2026-12-03_s50.json, NOTES.md row 101):
right on every mask edge, but 1-5% under the picks only (4096x12288 M=161 32.41 us against 33.92, cuBLAS
30.02; 4096x11008 32.17 against 32.66, cuBLAS 29.40) and behind twotile's 128 + 64 on 4096x22016: the
16-24 tokens' MMA saved is about what the third wgmma and box cost. Not shipped.

The kernel is twotile's (variants/twotile.py) with a third A box and accumulator, cut to one tile a CTA
(its staged stores through the drained rings); the boxes stay inside A as twotile's do
(``_token_rows``): for M in (HI + MID, HI + MID + LO] rows [0, HI), then MID rows from HI (or M - MID),
then LO rows from HI + MID (or M - LO); rows a box repeats are computed again and not stored.

A config: "BN,HI,MID,LO,BK,STAGES,CTAS", e.g. "64,128,32,16,64,4,2".
"""
import json
import os
import sys
from pathlib import Path

import torch
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import mbarrier, tma, warpgroup_mma, warpgroup_mma_wait

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # so that it runs as a script from anywhere

from tunesearch.variants.dqmma import _unit, token_origin  # noqa: E402
from tunesearch.variants.rsmma import LOAD_REGS, _store_tile_staged, a_descriptor, frag32_descriptors  # noqa: E402

FIELDS = ("BN", "HI", "MID", "LO", "BK", "STAGES", "CTAS")  # a config's order on the command line


@gluon.jit
def _token_rows(pid_m, HI: gl.constexpr, MID: gl.constexpr, LO: gl.constexpr, M):
    """Token tile pid_m's three A boxes' first rows and the first row each accumulator stores (twotile's
    ``_token_rows`` with a box between): each box follows the one before it, or ends at M where that is
    sooner; a box's rows below the first it stores are the previous boxes' (or the neighbour tile's)."""
    own = pid_m * (HI + MID + LO)
    hi_row = token_origin(pid_m, HI + MID + LO, M)
    mid_row = gl.maximum(gl.minimum(hi_row + HI, M - MID), 0)
    lo_row = gl.maximum(gl.minimum(hi_row + HI + MID, M - LO), 0)
    return hi_row, mid_row, lo_row, own, gl.maximum(own, hi_row + HI), gl.maximum(own, mid_row + MID)


@gluon.jit
def _three_tile_block(i, acc_hi, acc_mid, acc_lo, a_hi, a_mid, a_lo, p_smem, s_smem, ready, empty,
                      FRAGMENT: gl.constexpr, WORDS: gl.constexpr, FRAG: gl.constexpr, FRAG_MID: gl.constexpr,
                      FRAG_LO: gl.constexpr):
    """Block i: unpack its fragment once, issue the three wgmmas on it, wait for block i-1's three and
    free that slot (twotile's ``_two_tile_block`` with a third accumulator)."""
    STAGES: gl.constexpr = a_hi.type.shape[0]
    s = i % STAGES
    mbarrier.wait(ready.index(s), (i // STAGES) & 1)
    w = FRAGMENT(p_smem.index(s), s_smem.index(s), WORDS, FRAG, True)
    acc_hi = warpgroup_mma(w, a_hi.index(s).permute((1, 0)), acc_hi, is_async=True)
    # the same registers seen with another accumulator as parent (an A operand's layout depends on the
    # MMA's rows and depth only): nothing moves
    acc_mid = warpgroup_mma(gl.convert_layout(w, FRAG_MID, assert_trivial=True), a_mid.index(s).permute((1, 0)),
                            acc_mid, is_async=True)
    acc_lo = warpgroup_mma(gl.convert_layout(w, FRAG_LO, assert_trivial=True), a_lo.index(s).permute((1, 0)),
                           acc_lo, is_async=True)
    acc_hi, acc_mid, acc_lo = warpgroup_mma_wait(num_outstanding=3, deps=(acc_hi, acc_mid, acc_lo))
    mbarrier.arrive(empty.index((i + STAGES - 1) % STAGES), pred=i > 0)
    return acc_hi, acc_mid, acc_lo


@gluon.jit
def _three_tile_mma(BN: gl.constexpr, MID: gl.constexpr, LO: gl.constexpr, num_warps: gl.constexpr,
                    FRAGMENT: gl.constexpr, WORDS: gl.constexpr, a_hi, a_mid, a_lo, p_smem, s_smem, ready, empty,
                    n_blocks):
    """The MMA warps: the tile's three accumulators over its n_blocks blocks, two blocks a trip (so that
    each block's fragment has registers of its own, as rsmma's ``_mma_segment``), the last waited for."""
    HI: gl.constexpr = a_hi.type.shape[1]
    STAGES: gl.constexpr = a_hi.type.shape[0]
    HI_ACC: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[num_warps, 1],
                                                     instr_shape=[16, HI, 16])
    MID_ACC: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[num_warps, 1],
                                                      instr_shape=[16, MID, 16])
    LO_ACC: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[num_warps, 1],
                                                     instr_shape=[16, LO, 16])
    FRAG: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=HI_ACC, k_width=2)
    FRAG_MID: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=MID_ACC, k_width=2)
    FRAG_LO: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=LO_ACC, k_width=2)
    acc_hi = gl.zeros([BN, HI], gl.float32, HI_ACC)
    acc_mid = gl.zeros([BN, MID], gl.float32, MID_ACC)
    acc_lo = gl.zeros([BN, LO], gl.float32, LO_ACC)
    for j in range(n_blocks // 2):
        acc_hi, acc_mid, acc_lo = _three_tile_block(2 * j, acc_hi, acc_mid, acc_lo, a_hi, a_mid, a_lo, p_smem,
                                                    s_smem, ready, empty, FRAGMENT, WORDS, FRAG, FRAG_MID, FRAG_LO)
        acc_hi, acc_mid, acc_lo = _three_tile_block(2 * j + 1, acc_hi, acc_mid, acc_lo, a_hi, a_mid, a_lo, p_smem,
                                                    s_smem, ready, empty, FRAGMENT, WORDS, FRAG, FRAG_MID, FRAG_LO)
    if n_blocks % 2 == 1:
        acc_hi, acc_mid, acc_lo = _three_tile_block(n_blocks - 1, acc_hi, acc_mid, acc_lo, a_hi, a_mid, a_lo,
                                                    p_smem, s_smem, ready, empty, FRAGMENT, WORDS, FRAG, FRAG_MID,
                                                    FRAG_LO)
    acc_hi, acc_mid, acc_lo = warpgroup_mma_wait(num_outstanding=0, deps=(acc_hi, acc_mid, acc_lo))
    mbarrier.arrive(empty.index((n_blocks - 1) % STAGES), pred=n_blocks > 0)  # the last slot
    return acc_hi, acc_mid, acc_lo


@gluon.jit
def _three_tile_load(a_hi_desc, a_mid_desc, a_lo_desc, p_desc, s_desc, a_hi, a_mid, a_lo, p_smem, s_smem, ready,
                     empty, u0, n_blocks, blocks, tiles_n, M, group):
    """twotile's loader with a third A box a slot."""
    STAGES: gl.constexpr = a_hi.type.shape[0]
    HI: gl.constexpr = a_hi.type.shape[1]
    MID: gl.constexpr = a_mid.type.shape[1]
    LO: gl.constexpr = a_lo.type.shape[1]
    BK: gl.constexpr = a_hi.type.shape[2]
    BN: gl.constexpr = s_smem.type.shape[2]
    BYTES: gl.constexpr = (a_hi_desc.block_type.nbytes + a_mid_desc.block_type.nbytes + a_lo_desc.block_type.nbytes
                           + p_desc.block_type.nbytes * (BN // 64) + s_desc.block_type.nbytes)
    pid_n, pid_m, kb = _unit(u0, blocks, tiles_n)
    hi_row, mid_row, lo_row, _, _, _ = _token_rows(pid_m, HI, MID, LO, M)
    col = pid_n * BN
    for i in range(n_blocks):
        s = i % STAGES
        mbarrier.wait(empty.index(s), ((i // STAGES) & 1) ^ 1)  # a fresh barrier counts as freed
        bar = ready.index(s)
        k = kb * BK
        mbarrier.expect(bar, BYTES)
        tma.async_copy_global_to_shared(a_hi_desc, [hi_row, k], bar, a_hi.index(s))
        tma.async_copy_global_to_shared(a_mid_desc, [mid_row, k], bar, a_mid.index(s))
        tma.async_copy_global_to_shared(a_lo_desc, [lo_row, k], bar, a_lo.index(s))
        for j in gl.static_range(BN // 64):  # frag32: a box of whole chunks [BK/32, 256] per 64 columns
            tma.async_copy_global_to_shared(p_desc, [k // 32, (col + 64 * j) * 4], bar,
                                            p_smem.index(s).slice(j * (BK // 32), BK // 32))
        tma.async_copy_global_to_shared(s_desc, [k // group, col], bar, s_smem.index(s))
        kb += 1  # one tile a CTA: its blocks in order


@gluon.jit
def three_tile_kernel(a_hi_desc, a_mid_desc, a_lo_desc, p_desc, s_desc, c_ptr, ws_ptr, lock_ptr, M, N, K, stride_cm,
                      stride_cn, GROUP: gl.constexpr, MID: gl.constexpr, LO: gl.constexpr, BK: gl.constexpr,
                      STAGES: gl.constexpr, WORDS: gl.constexpr, FRAGMENT: gl.constexpr, num_warps: gl.constexpr):
    """C [M, N] in tiles of HI + MID + LO tokens (HI: a_hi_desc's box rows) and BN = 16 x num_warps columns
    of frag32 weights, a CTA a tile (ws_ptr and lock_ptr unused: the families' signature)."""
    BN: gl.constexpr = 16 * num_warps
    HI: gl.constexpr = a_hi_desc.block_type.shape[0]
    gl.static_assert(GROUP % BK == 0, "a block lies in one scale group")
    gl.static_assert(STAGES * BK >= BN, "the rings hold C's tiles for the staged stores")
    blocks = K // BK
    tiles_n = gl.cdiv(N, BN)
    u0 = gl.program_id(0) * blocks  # the CTA's tile's first unit
    a_hi = gl.allocate_shared_memory(gl.float16, [STAGES, HI, BK], a_hi_desc.layout)
    a_mid = gl.allocate_shared_memory(gl.float16, [STAGES, MID, BK], a_mid_desc.layout)
    a_lo = gl.allocate_shared_memory(gl.float16, [STAGES, LO, BK], a_lo_desc.layout)
    p_smem = gl.allocate_shared_memory(gl.int32, [STAGES, BN // 64 * (BK // 32), 256], p_desc.layout)
    s_smem = gl.allocate_shared_memory(gl.float16, [STAGES, 1, BN], s_desc.layout)
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for j in gl.static_range(STAGES):
        mbarrier.init(ready.index(j), count=1)
        mbarrier.init(empty.index(j), count=1)
    acc_hi, acc_mid, acc_lo = gl.warp_specialize([
        (_three_tile_mma, (BN, MID, LO, num_warps, FRAGMENT, WORDS, a_hi, a_mid, a_lo, p_smem, s_smem, ready, empty,
                           blocks)),
        (_three_tile_load, (a_hi_desc, a_mid_desc, a_lo_desc, p_desc, s_desc, a_hi, a_mid, a_lo, p_smem, s_smem, ready,
                            empty, u0, blocks, blocks, tiles_n, M, GROUP)),
    ], [1], [LOAD_REGS])
    # the whole tile here, the rings drained: each accumulator staged through its own ring, C from its
    # first own row (the rows a box repeats at negative offsets, masked)
    pid_n, pid_m, _ = _unit(u0, blocks, tiles_n)
    hi_row, mid_row, lo_row, hi_own, mid_own, lo_own = _token_rows(pid_m, HI, MID, LO, M)
    _store_tile_staged(acc_hi, a_hi, c_ptr + hi_own * stride_cm, hi_row - hi_own, pid_n * BN, M - hi_own, N,
                       stride_cm, stride_cn, True)
    _store_tile_staged(acc_mid, a_mid, c_ptr + mid_own * stride_cm, mid_row - mid_own, pid_n * BN, M - mid_own, N,
                       stride_cm, stride_cn, True)
    _store_tile_staged(acc_lo, a_lo, c_ptr + lo_own * stride_cm, lo_row - lo_own, pid_n * BN, M - lo_own, N,
                       stride_cm, stride_cn, True)


def parse_config(text: str) -> dict:
    return dict(zip(FIELDS, (int(x) for x in text.split(","))))


def config_id(c: dict) -> str:
    return f"hi{c['HI']}.mid{c['MID']}.lo{c['LO']}.bn{c['BN']}.bk{c['BK']}.s{c['STAGES']}.c{c['CTAS']}"


def launch_args(config: dict, a, packed_f, scales, out):
    """(grid, args, meta): a CTA per (column tile, token tile), frag32 weights ``packed_f`` [K/32, 4N]."""
    from tunesearch.variants import rsmma
    from tunesearch.variants.api import _gluon_args
    from tunesearch.variants.rsmma_launch import launch_registers
    from tunesearch.variants.space import cdiv

    hi, mid, lo, bn, bk = config["HI"], config["MID"], config["LO"], config["BN"], config["BK"]
    M, N = a.shape[0], scales.shape[1]
    tiles = cdiv(M, hi + mid + lo) * cdiv(N, bn)

    def descriptors(a, packed_f, scales, bm, bn, bk):
        a_hi, p_desc, s_desc = frag32_descriptors(a, packed_f, scales, hi, bn, bk, row_boxes=False)
        return (a_hi, a_descriptor(a, mid, bk, row_boxes=False), a_descriptor(a, lo, bk, row_boxes=False),
                p_desc, s_desc)
    args = _gluon_args(descriptors, a, packed_f, scales, out, hi + mid + lo, bn, bk, tiles, 1)
    warps = bn // 16
    meta = dict(GROUP=128, MID=mid, LO=lo, BK=bk, STAGES=config["STAGES"], WORDS=rsmma.frag32_word_layout(bk, warps),
                FRAGMENT=rsmma.frag32_fragment, num_warps=warps, maxnreg=launch_registers(warps, config["CTAS"]))
    return (tiles,), args, meta


def three_tile_launch(config: dict):
    """gluon_checks' launch form: (a, packed, scales, out) -> a no-argument launch."""
    from benchmarks.experiments import gluon_checks

    return gluon_checks.kernel_launch(three_tile_kernel, lambda *operands: launch_args(config, *operands))


def smoke_shapes(config: dict):
    """Mask edges (M, K, N): M below MID, between HI and HI + MID, at HI + MID + 1 and the whole tile (the
    boxes shifted), past it (a second tile) and twice past; N no multiple of BN; K of two blocks up."""
    hi, mid, tile = config["HI"], config["MID"], config["HI"] + config["MID"] + config["LO"]
    return [(5, 256, 272), (hi + 3, 256, 208), (hi + mid + 1, 512, 528), (tile, 1024, 208), (tile + 3, 512, 272),
            (2 * tile + 5, 256, 208)]


def smoke(config: dict) -> str | None:
    from benchmarks.experiments import gluon_checks

    return gluon_checks.frag32_smoke(three_tile_launch(config), smoke_shapes(config))


def compile_offline(config: dict, N: int = 12288, K: int = 4096):
    """The kernel for ``config`` compiled for sm_90 without a GPU, at M = HI + MID + LO."""
    from benchmarks.experiments import gluon_checks

    return gluon_checks.compile_frag32_offline(three_tile_kernel, lambda *operands: launch_args(config, *operands),
                                               config["HI"] + config["MID"] + config["LO"], N, K)


# 64-column tiles two or one CTA an SM, 128-column tiles one; BK=64 (BK=128 with two CTAs an SM left
# twotile's 128 + LO 1.3-1.6x behind, row 91)
CONFIGS = [dict(BN=64, HI=128, MID=32, LO=16, BK=64, STAGES=4, CTAS=2),
           dict(BN=64, HI=128, MID=32, LO=16, BK=64, STAGES=6, CTAS=1),
           dict(BN=128, HI=128, MID=32, LO=16, BK=64, STAGES=4, CTAS=1),
           dict(BN=64, HI=128, MID=32, LO=8, BK=64, STAGES=4, CTAS=2)]
# twotile's 128 + 64 in the same configs (rsmma_two_tiles.py's form: BN,HI,LO,BK,STAGES,CTAS,STREAM)
TWO_TILE_CONFIGS = [dict(BN=64, HI=128, LO=64, BK=64, STAGES=4, CTAS=2, STREAM=0),
                    dict(BN=64, HI=128, LO=64, BK=64, STAGES=6, CTAS=1, STREAM=0),
                    dict(BN=128, HI=128, LO=64, BK=64, STAGES=4, CTAS=1, STREAM=0)]
MS = (161, 168, 176)


def main(out_dir):
    from benchmarks.experiments import gluon_checks, rsmma_two_tiles
    from tunesearch.bench import REL_TOL, CheckInputs, Operands, graph_time, time_fp16, time_variant
    from tunesearch.dispatch import Dispatcher, read_table
    from tunesearch.gpu import gpu_info

    info = gpu_info(0)
    table = Dispatcher(read_table(ROOT / "tunesearch" / "tables" / "h200.json"), strict=True)
    shapes = [(4096, 12288), (4096, 22016), (4096, 11008)]
    if os.environ.get("THREE_TILES_SHAPES"):
        shapes = [tuple(int(x) for x in s.split("x")) for s in os.environ["THREE_TILES_SHAPES"].split(",")]
    ms = [int(m) for m in os.environ["THREE_TILES_MS"].split(",")] if os.environ.get("THREE_TILES_MS") else MS
    unsound = gluon_checks.smoke_all(__file__, FIELDS, CONFIGS, config_id, workers=len(CONFIGS), timeout_s=240)
    configs = [c for c in CONFIGS if config_id(c) not in unsound]
    forms = [(config_id(c), three_tile_launch(c), c["HI"] + c["MID"] + c["LO"]) for c in configs]
    forms += [("twotile." + rsmma_two_tiles.config_id(c), rsmma_two_tiles.two_tile_launch(c), c["HI"] + c["LO"])
              for c in TWO_TILE_CONFIGS]
    rows = []
    for K, N in shapes:
        for M in ms:
            pick = table.resolve(M, N, K, torch.device("cuda"))
            check = CheckInputs(M, N, K, 128, "cuda", layout="frag32")
            ops = Operands(M, N, K, 128, info.l2_bytes, layout="frag32")
            row = dict(M=M, K=K, N=N, fp16=time_fp16(M, N, K, info.l2_bytes, replays=20).us,
                       pick=pick.id if pick is not None else "dequant+cuBLAS",
                       pick_us=time_variant(pick, ops, replays=20).us if pick is not None else None, forms={})
            for name, launch, tokens in forms:
                if tokens < M:  # one tile a CTA must hold M here
                    continue
                try:
                    err = gluon_checks.relative_error_of(launch, check)
                    if not err < REL_TOL:
                        raise AssertionError(f"WRONG: relative error {err:.3g}")
                    us = graph_time([launch(*c) for c in ops.copies], replays=20).us
                    row["forms"][name] = dict(us=us, rel_error=err)
                except Exception as e:  # one form's failure is a result, not the run's end
                    row["forms"][name] = dict(error=f"{type(e).__name__}: {str(e)[:300]}")
            rows.append(row)
            print(json.dumps(row), flush=True)
            del ops
            with open(f"{out_dir}/rsmma_three_tiles.json", "w") as f:
                json.dump(dict(gpu=info.to_dict(), smoke_failures=unsound, rows=rows), f, indent=1)
    nan = float("nan")
    print(f"{'key':>16} {'fp16':>7} {'pick':>7} {'3-tile':>7} {'128+64':>7} best 3-tile config")
    for r in rows:
        timed = {k: v["us"] for k, v in r["forms"].items() if "us" in v}
        three = {k: v for k, v in timed.items() if not k.startswith("twotile.")}
        two = {k: v for k, v in timed.items() if k.startswith("twotile.")}
        best = min(three, key=three.get) if three else None
        print(f"{'M=%d %dx%d' % (r['M'], r['K'], r['N']):>16} {r['fp16']:7.2f} {r['pick_us'] or nan:7.2f} "
              f"{three[best] if best else nan:7.2f} {min(two.values()) if two else nan:7.2f} {best or '-'}")


if __name__ == "__main__":
    from benchmarks.experiments import gluon_checks

    gluon_checks.config_cli(sys.argv, parse_config, smoke, compile_offline, main)
