"""EXPERIMENT: an rsmma column tile of 192 columns on one A tile, two warp groups (M = 129..512 on the wide
shapes, where a 256 x 128 tile leaves SMs idle).

    python benchmarks/experiments/rsmma_slabs.py OUT_DIR          (on an sm_90 GPU: every config checked on
                                                                   mask edges, then at each key against
                                                                   A @ dequantize(W), timed beside the
                                                                   table's pick and cuBLAS fp16; env
                                                                   SLABS_KEYS "M,K,N;...")
    python benchmarks/experiments/rsmma_slabs.py --compile CONFIG  (offline, sm_90: registers, spills,
                                                                   the wgmmas left in flight)

Why (NOTES.md rows 112, 113): at M=256 on 4096x12288 the table's pick, 256 x 128 tiles, is bound by its
wgmma chain on 96 CTAs while 36 of the 132 SMs idle (42.6 us whole, 42.5 with nothing unpacked, cuBLAS
38.4); stream-K, which spreads those tiles' blocks over every SM, runs no faster even with its reduction
left out (43.0 us: its ring alone 30.4 against the pick's 20.2). Every power-of-two tile of 12288 x 256
makes 3 x 2^k tiles, so the waves stay uneven. A tile of 192 columns x 128 tokens makes 64 x 2 = 128 of
them on 4096x12288 (58 x 2 = 116 on 4096x11008), one a SM, each three quarters of a 256 x 128 tile's MMA:
~32 us at the pick's rate an SM. Two or three CTAs an SM of 64-column tiles would balance as well, but each
reads A's tile for itself (A's copies bind the ring at M=256, rows 63, 112) and three 128-token CTAs do
not fit an SM's registers; here one A tile a block serves all 192 columns.

The wgmma's M is 64 a warp group and a Gluon tensor's shape a power of two, so 192 rows are two
accumulators on the MMA partition's two warp groups: slabs 0 and 1 as rsmma's [128, BM] (warp group g its
64 columns g), and slab 2 as [64, BM] with the warp groups side by side along the tokens (warps_per_cta
[4, 2]: warp group g its tokens g x BM/2..), both unpacking slab 2's fragment. Each block: wait for the
slot, unpack both fragments, two wgmmas async on the slot's A, wait for the block before's, free its slot
(twotile's two-accumulator step). Three MMA partitions of one warp group each, the plain form, made ptxas
serialize every wgmma (each worker partition's accumulator is used: NOTES.md row 68's C7512; offline, all
of its waits were 0), so the MMA stays in the default partition. The loader warp copies A's box [BM, BK],
three frag32 boxes [BK/32, 256] and the scale rows [1, 128] and [1, 64] a block. One tile a CTA (no
split): [128, BM] leaves through the drained ring (rsmma's staged store), [64, BM] from registers. Scaled
fragments (the family's form above 32 tokens), frag32 weights, token tiles kept inside A as rsmma's are
(``dqmma.token_origin``).

A config: "BM,BK,STAGES", e.g. "128,64,6".

RESULT (H200, 2026-12-04, benchmarks/results/rsmma_slabs_h200_2026-12-04_s60.*, NOTES.md row 114): right
everywhere, no gain. us, fp16 / pick / best config (bm128.bk64.s4): M=256 4096x12288 40.34 / 42.69 / 42.49,
4096x11008 38.40 / 40.98 / 41.34; at M=192 and 512 and on 4096x22016 8-25% behind the picks. A 192 x 128
tile takes what the pick's 256 x 128 does: the rate an SM falls with the tokens each unpacked fragment
feeds (256 in the pick; 128, and 64 twice, here).
"""
import json
import sys
from pathlib import Path

import torch
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import mbarrier, tma, warpgroup_mma, warpgroup_mma_wait

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # so that it runs as a script from anywhere

from tunesearch.variants.dqmma import store_tile, token_origin  # noqa: E402
from tunesearch.variants.rsmma import LOAD_REGS, _frag32_codes_ptx, _store_tile_staged, frag32_fragment  # noqa: E402

FIELDS = ("BM", "BK", "STAGES")  # a config's order on the command line
COLUMNS = gl.constexpr(192)  # a tile's columns: slabs 0 and 1 (one [128, BM] accumulator) and slab 2 ([64, BM])
MMA_WARPS = gl.constexpr(8)


@triton.constexpr_function
def _shared_words_layout(BK):
    """frag32_word_layout(BK, 4) of slab 2's box [BK/32, 256] with a third warp bit that repeats the first
    group's words: both warp groups hold the whole slab's fragment."""
    chunks = [[1 << b, 0] for b in range((BK // 32).bit_length() - 1)]
    return gl.DistributedLinearLayout(reg_bases=[[0, 1]] + chunks,
                                      lane_bases=[[0, 2], [0, 4], [0, 8], [0, 16], [0, 32]],
                                      warp_bases=[[0, 64], [0, 128], [0, 0]], block_bases=[], shape=[BK // 32, 256])


@triton.constexpr_function
def _shared_rows_layout():
    """rsmma._paired_rows_layout(4) [w, h, g] with a third warp bit repeating the first group's rows."""
    return gl.DistributedLinearLayout(
        reg_bases=[[0, 1, 0]], lane_bases=[[0, 0, 0], [0, 0, 0], [0, 0, 1], [0, 0, 2], [0, 0, 4]],
        warp_bases=[[1, 0, 0], [2, 0, 0], [0, 0, 0]], block_bases=[], shape=[4, 2, 8])


@gluon.jit
def _slab2_fragment(p_tile, s_tile, WORDS: gl.constexpr, FRAG: gl.constexpr):
    """rsmma.frag32_fragment of slab 2's [64, BK] in FRAG (parent warps [4, 2]), scaled: the same
    relabelling, its words and scale row read by both warp groups."""
    C: gl.constexpr = p_tile.type.shape[0]
    q = _frag32_codes_ptx(gl.reshape(p_tile.load(WORDS), [1, C, 256]))
    z = gl.join(gl.join(gl.join(q[0], q[4]), gl.join(q[1], q[5])),
                gl.join(gl.join(q[2], q[6]), gl.join(q[3], q[7])))
    z = gl.reshape(z, [1, C, 4, 8, 4, 2, 2, 2, 2])
    z = gl.permute(z, [0, 2, 5, 3, 1, 8, 7, 4, 6])
    w = gl.convert_layout(gl.reshape(z, [64, C * 32]), FRAG, assert_trivial=True)
    scale = s_tile.reshape([4, 8, 2]).permute((0, 2, 1)).load(_shared_rows_layout())
    scale = gl.convert_layout(gl.reshape(scale, [64]), gl.SliceLayout(1, FRAG), assert_trivial=True)
    return w * gl.expand_dims(scale, 1)


@gluon.jit
def _slabs_block(i, first, acc, acc2, a_smem, p_smem, s_smem, p2_smem, s2_smem, ready, empty, WORDS: gl.constexpr,
                 WORDS2: gl.constexpr, FRAG: gl.constexpr, FRAG2: gl.constexpr):
    """Block i (of the tile's from ``first``): both fragments unpacked, both wgmmas on the slot's A in
    flight, block i-1's waited for and its slot freed (twotile._two_tile_block with a fragment each)."""
    STAGES: gl.constexpr = a_smem.type.shape[0]
    s = i % STAGES
    mbarrier.wait(ready.index(s), (i // STAGES) & 1)
    w = frag32_fragment(p_smem.index(s), s_smem.index(s), WORDS, FRAG, True)
    w2 = _slab2_fragment(p2_smem.index(s), s2_smem.index(s), WORDS2, FRAG2)
    tokens = a_smem.index(s).permute((1, 0))
    acc = warpgroup_mma(w, tokens, acc, is_async=True)
    acc2 = warpgroup_mma(w2, tokens, acc2, is_async=True)
    acc, acc2 = warpgroup_mma_wait(num_outstanding=2, deps=(acc, acc2))
    mbarrier.arrive(empty.index((i + STAGES - 1) % STAGES), pred=i > first)
    return acc, acc2


@gluon.jit
def _slabs_mma(BM: gl.constexpr, BK: gl.constexpr, a_smem, p_smem, s_smem, p2_smem, s2_smem, ready, empty,
               n_blocks):
    """The MMA warps: C^T's [128, BM] and [64, BM] over all of the tile's blocks, two a trip (so that each
    block's fragments have registers of their own, rsmma._mma_segment's C7515)."""
    ACC: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[MMA_WARPS, 1],
                                                  instr_shape=[16, BM, 16])
    ACC2: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 2],
                                                   instr_shape=[16, BM // 2, 16])
    FRAG: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=ACC, k_width=2)
    FRAG2: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=ACC2, k_width=2)
    WORDS: gl.constexpr = _words_layout(BK)
    WORDS2: gl.constexpr = _shared_words_layout(BK)
    STAGES: gl.constexpr = a_smem.type.shape[0]
    acc = gl.zeros([128, BM], gl.float32, ACC)
    acc2 = gl.zeros([64, BM], gl.float32, ACC2)
    for j in range(n_blocks // 2):
        acc, acc2 = _slabs_block(2 * j, 0, acc, acc2, a_smem, p_smem, s_smem, p2_smem, s2_smem, ready, empty, WORDS,
                                 WORDS2, FRAG, FRAG2)
        acc, acc2 = _slabs_block(2 * j + 1, 0, acc, acc2, a_smem, p_smem, s_smem, p2_smem, s2_smem, ready, empty,
                                 WORDS, WORDS2, FRAG, FRAG2)
    if n_blocks % 2 == 1:
        acc, acc2 = _slabs_block(n_blocks - 1, 0, acc, acc2, a_smem, p_smem, s_smem, p2_smem, s2_smem, ready, empty,
                                 WORDS, WORDS2, FRAG, FRAG2)
    acc, acc2 = warpgroup_mma_wait(num_outstanding=0, deps=(acc, acc2))
    mbarrier.arrive(empty.index((n_blocks - 1) % STAGES), pred=n_blocks > 0)
    return acc, acc2


@gluon.jit
def _slabs_load(a_desc, p_desc, s_desc, s2_desc, a_smem, p_smem, s_smem, p2_smem, s2_smem, ready, empty, n_blocks,
                a_row, col0, group):
    """TMA each block's A box, the three slabs' packed boxes and the scale rows into the ring, in order."""
    STAGES: gl.constexpr = a_smem.type.shape[0]
    BK: gl.constexpr = a_smem.type.shape[2]
    BYTES: gl.constexpr = (a_desc.block_type.nbytes + 3 * p_desc.block_type.nbytes + s_desc.block_type.nbytes
                           + s2_desc.block_type.nbytes)
    for i in range(n_blocks):
        s = i % STAGES
        mbarrier.wait(empty.index(s), ((i // STAGES) & 1) ^ 1)  # a fresh barrier counts as freed
        bar = ready.index(s)
        k = i * BK
        mbarrier.expect(bar, BYTES)
        tma.async_copy_global_to_shared(a_desc, [a_row, k], bar, a_smem.index(s))
        # frag32 rows [K/32, 4N]: a slab's box is its 64 columns' chunks; past N the TMA fills zeros
        for j in gl.static_range(2):
            tma.async_copy_global_to_shared(p_desc, [k // 32, (col0 + 64 * j) * 4], bar,
                                            p_smem.index(s).slice(j * (BK // 32), BK // 32))
        tma.async_copy_global_to_shared(p_desc, [k // 32, (col0 + 128) * 4], bar, p2_smem.index(s))
        tma.async_copy_global_to_shared(s_desc, [k // group, col0], bar, s_smem.index(s))
        tma.async_copy_global_to_shared(s2_desc, [k // group, col0 + 128], bar, s2_smem.index(s))


@triton.constexpr_function
def _words_layout(BK):
    from tunesearch.variants.rsmma import frag32_word_layout

    return frag32_word_layout(BK, MMA_WARPS.value)


@gluon.jit
def slabs_kernel(a_desc, p_desc, s_desc, s2_desc, c_ptr, ws_ptr, lock_ptr, M, N, K, stride_cm, stride_cn,
                 GROUP: gl.constexpr, BM: gl.constexpr, BK: gl.constexpr, STAGES: gl.constexpr,
                 num_warps: gl.constexpr):
    """Grid: (column tiles of 192, token tiles of BM); one tile a CTA over all of K."""
    gl.static_assert(num_warps == MMA_WARPS, "two MMA warp groups")
    gl.static_assert(GROUP % BK == 0, "a block lies in one scale group")
    gl.static_assert(STAGES * BK >= 128, "the ring holds C's [128, BM] tile for the staged store")
    n_blocks = K // BK
    col0 = gl.program_id(0) * COLUMNS
    pid_m = gl.program_id(1)
    a_row = token_origin(pid_m, BM, M)
    lo = pid_m * BM  # C from the tile's own first token: a shifted box's rows below it are masked
    a_smem = gl.allocate_shared_memory(gl.float16, [STAGES, BM, BK], a_desc.layout)
    p_smem = gl.allocate_shared_memory(gl.int32, [STAGES, 2 * (BK // 32), 256], p_desc.layout)
    p2_smem = gl.allocate_shared_memory(gl.int32, [STAGES, BK // 32, 256], p_desc.layout)
    s_smem = gl.allocate_shared_memory(gl.float16, [STAGES, 1, 128], s_desc.layout)
    s2_smem = gl.allocate_shared_memory(gl.float16, [STAGES, 1, 64], s2_desc.layout)
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for j in gl.static_range(STAGES):
        mbarrier.init(ready.index(j), count=1)
        mbarrier.init(empty.index(j), count=1)
    acc, acc2 = gl.warp_specialize([
        (_slabs_mma, (BM, BK, a_smem, p_smem, s_smem, p2_smem, s2_smem, ready, empty, n_blocks)),
        (_slabs_load, (a_desc, p_desc, s_desc, s2_desc, a_smem, p_smem, s_smem, p2_smem, s2_smem, ready, empty,
                       n_blocks, a_row, col0, GROUP)),
    ], [1], [LOAD_REGS])
    c_tile = c_ptr + lo * stride_cm
    # every partition has joined and the ring is drained: slabs 0 and 1 leave through it, slab 2 from registers
    _store_tile_staged(acc, a_smem, c_tile, a_row - lo, col0, M - lo, N, stride_cm, stride_cn, True)
    store_tile(acc2, c_tile, col0 + 128, a_row - lo, N, M - lo, stride_cn, stride_cm, ws_ptr, lock_ptr, 0, 0, 1, 1,
               True)


def parse_config(text: str) -> dict:
    return dict(zip(FIELDS, (int(x) for x in text.split(","))))


def config_id(c: dict) -> str:
    return f"slabs.bm{c['BM']}.bk{c['BK']}.s{c['STAGES']}"


def launch_args(config: dict, a, packed_f, scales, out):
    """(grid, args, meta): a CTA per (192-column tile, token tile), frag32 weights ``packed_f`` [K/32, 4N]."""
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

    from tunesearch.variants.api import _gluon_args
    from tunesearch.variants.rsmma import frag32_descriptors
    from tunesearch.variants.rsmma_launch import launch_registers
    from tunesearch.variants.space import cdiv

    bm, bk = config["BM"], config["BK"]
    M, N = a.shape[0], scales.shape[1]
    grid = (cdiv(N, COLUMNS.value), cdiv(M, bm))

    def descriptors(a, packed_f, scales, bm, bn, bk):
        a_desc, p_desc, s_desc = frag32_descriptors(a, packed_f, scales, bm, 128, bk, row_boxes=False)
        return a_desc, p_desc, s_desc, TensorDescriptor.from_tensor(scales, [1, 64], s_desc.layout)
    args = _gluon_args(descriptors, a, packed_f, scales, out, bm, 128, bk, grid[0] * grid[1], 1)
    meta = dict(GROUP=128, BM=bm, BK=bk, STAGES=config["STAGES"], num_warps=MMA_WARPS.value,
                maxnreg=launch_registers(MMA_WARPS.value))
    return grid, args, meta


def slabs_launch(config: dict):
    """gluon_checks' launch form: (a, packed, scales, out) -> a no-argument launch."""
    from benchmarks.experiments import gluon_checks

    return gluon_checks.kernel_launch(slabs_kernel, lambda *operands: launch_args(config, *operands))


def smoke_shapes(config: dict):
    """Mask edges (M, K, N): M below BM (rows past A), a second token tile that M fills in part (its box
    shifted), N past a 192-column tile by one slab (the other two all zero-filled) and by two, K of two
    blocks up."""
    bm = config["BM"]
    return [(5, 256, 200), (bm, 512, 384), (bm + 3, 256, 264), (2 * bm + 7, 1024, 320), (3 * bm, 256, 136)]


def smoke(config: dict) -> str | None:
    from benchmarks.experiments import gluon_checks

    return gluon_checks.frag32_smoke(slabs_launch(config), smoke_shapes(config))


def compile_offline(config: dict, M: int = 256, N: int = 12288, K: int = 4096):
    """The kernel for ``config`` compiled for sm_90 without a GPU."""
    from benchmarks.experiments import gluon_checks

    return gluon_checks.compile_frag32_offline(slabs_kernel, lambda *operands: launch_args(config, *operands), M,
                                               N, K)


# BK=64 only: at BK=128 the two blocks' fragments a trip made ptxas wait for every wgmma (offline)
CONFIGS = [dict(BM=128, BK=64, STAGES=6), dict(BM=128, BK=64, STAGES=4), dict(BM=128, BK=64, STAGES=8),
           dict(BM=64, BK=64, STAGES=8)]
# M=256 on the two shapes where the pick loses to cuBLAS (row 112), and the bucket's other end on them
KEYS = [(256, 4096, 12288), (256, 4096, 11008), (192, 4096, 12288), (192, 4096, 11008), (512, 4096, 12288),
        (512, 4096, 11008), (256, 4096, 22016)]


def main(out_dir):
    from benchmarks.experiments import gluon_checks
    from tunesearch.bench import CheckInputs, Operands, time_fp16, time_variant
    from tunesearch.dispatch import Dispatcher, read_table
    from tunesearch.gpu import gpu_info

    info = gpu_info(0)
    table = Dispatcher(read_table(ROOT / "tunesearch" / "tables" / "h200.json"), strict=True)
    keys = gluon_checks.env_keys("SLABS_KEYS", KEYS)
    unsound = gluon_checks.smoke_all(__file__, FIELDS, CONFIGS, config_id, workers=len(CONFIGS), timeout_s=240)
    configs = [c for c in CONFIGS if config_id(c) not in unsound]
    rows = []
    for M, K, N in keys:
        pick = table.resolve(M, N, K, torch.device("cuda"))
        check = CheckInputs(M, N, K, 128, "cuda", layout="frag32")
        ops = Operands(M, N, K, 128, info.l2_bytes, layout="frag32")
        row = dict(M=M, K=K, N=N, fp16=time_fp16(M, N, K, info.l2_bytes, replays=20).us,
                   pick=pick.id if pick is not None else "dequant+cuBLAS",
                   pick_us=time_variant(pick, ops, replays=20).us if pick is not None else None)
        for c in configs:
            gluon_checks.time_form(row, config_id(c), slabs_launch(c), check, ops.copies)
        rows.append(row)
        print(json.dumps(row), flush=True)
        del ops, check
        with open(f"{out_dir}/rsmma_slabs.json", "w") as f:
            json.dump(dict(gpu=info.to_dict(), smoke_failures=unsound, rows=rows), f, indent=1)
    names = [config_id(c) for c in configs]
    print(f"{'key':>16} {'fp16':>7} {'pick':>7} " + " ".join(f"{n[6:]:>18}" for n in names))
    for r in rows:
        f = lambda x: f"{x:18.2f}" if isinstance(x, float) else f"{'fail':>18}"  # noqa: E731
        print(f"{'M=%d %dx%d' % (r['M'], r['K'], r['N']):>16} {r['fp16']:7.2f} {r['pick_us'] or float('nan'):7.2f} "
              + " ".join(f(r[n]) for n in names))


if __name__ == "__main__":
    from benchmarks.experiments import gluon_checks

    gluon_checks.config_cli(sys.argv, parse_config, smoke, compile_offline, main)
