"""EXPERIMENT: narrow column tiles on mma.sync, no split-K, for M <= 16 (NOTES.md row 115).

    python benchmarks/experiments/narrow_v2.py OUT_DIR          (on an sm_90 GPU: every config checked on
                                                                 mask edges, then at each key against
                                                                 A @ dequantize(W), timed beside the
                                                                 table's pick and the streaming floor; env
                                                                 NARROW_KEYS "M,K,N;...")
    python benchmarks/experiments/narrow_v2.py --compile CONFIG (offline, sm_90: registers, spills, MMAs)

Why: at M <= 16 every table pick but 4096x22016's splits K two or four ways, and the split reduction's tail
(each split's fp32 partial stored, a fence, a counter, the last reading them back, all after the last
block) costs 1.3-2.6 us of a 7-12 us kernel (row 66); the splits are there because the wgmma's M, here W's
columns, is 64 a warp group, so 4096 columns are only 64 tiles for 132 SMs. Every way tried of keeping the
split inside the CTA lost (rows 68, 89, 111), and M=1 stays 1.28-1.55x the streaming floor where the pick
splits (1.15x on 4096x22016, whose pick does not). PyTorch's tinygemm, 2% ahead of the table at 4096^2
M=1, splits nothing. Here the columns go to mma.sync, whose M is 16 a warp: a CTA of W warps (one or two)
takes 16 W columns over all of K, so 4096 columns are 256 or 128 CTAs with no partial to reduce, and
the tail is the fp16 store alone. mma.sync ran 3-13% behind the wgmma at the same grid (row 111, BN=64);
at M <= 16 the tensor cores idle either way.

The kernel: rsmma's TMA ring (A's box, the tile's frag32 words, its scale row), its copies issued by the
MMA warps themselves STAGES blocks ahead (a warp-specialized kernel's default partition takes 4 warps or
more, so no loader warp), the MMA warps unpacking each block into the register fragment rsmma builds
(frag32's 8 codes a word, the rows in the paired order, scaled), A's block read from the slot by
ldmatrix, one mma.sync chain a warp; C's tile [16 W, BM] stored from registers. frag32 holds a 16-column
slab's words at 64 s.. 64 s + 63 of each chunk row (s = column // 16: warp w of a 64-column group's words,
``rsmma.frag32_word_layout``), so a tile's packed box is [BK/32, 64 W] words. Below BM tokens A's box is
M's next power of two of rows (rsmma's ``a_rows_box`` on its ONE_BOX_TILES, through the slot's 128-byte
column chunks), so no row is zero-filled at M=1, 2, 4.

A config: "BN,BM,BK,STAGES", e.g. "16,8,128,8": BN/16 MMA warps, BM tokens a tile (8 or 16).

RESULT (H200, 2026-12-04, benchmarks/results/narrow_v2_*_s60.*, NOTES.md row 115): right everywhere, far
slower everywhere. us, pick / best narrow: M=1 4096^2 7.17 / 12.04, 4096x11008 10.99 / 14.93, 11008x4096
10.74 / 28.87, 4096x12288 11.42 / 15.04, 4096x22016 16.42 / 19.09; M=8 and 16 the same (1.2-2.6x). One or
two warps a CTA and a few CTAs an SM leave each SM a few serial chains (wait, unpack, ldmatrix, mma, the
next copy) a block: latency-bound, where the picks run 3-4 CTAs of 5 warps an SM. More warps a tile means
splitting its K among them, which is the split this was to remove.
"""
import json
import sys
from pathlib import Path

import torch
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.ampere import mma_v2
from triton.experimental.gluon.language.nvidia.hopper import fence_async_shared, mbarrier, tma

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # so that it runs as a script from anywhere

from tunesearch.variants.dqmma import store_tile  # noqa: E402
from tunesearch.variants.rsmma import CHUNK_ROWS, _frag32_codes_ptx, _row_scales  # noqa: E402

FIELDS = ("BN", "BM", "BK", "STAGES")  # a config's order on the command line


@triton.constexpr_function
def _narrow_words_layout(BK, warps):
    """A tile's frag32 words [BK/32 chunks, 64 W] as rsmma's MMA threads hold them (``frag32_word_layout``
    for one 16-column slab a warp): the pair's two words in a register, lane 4g + t as the fragment's quads,
    chunks in registers, warp w the next 64 words."""
    chunks = [[1 << b, 0] for b in range((BK // 32).bit_length() - 1)]
    return gl.DistributedLinearLayout(reg_bases=[[0, 1]] + chunks,
                                      lane_bases=[[0, 2], [0, 4], [0, 8], [0, 16], [0, 32]],
                                      warp_bases=[[0, 64 << b] for b in range(warps.bit_length() - 1)],
                                      block_bases=[], shape=[BK // 32, 64 * warps])


@gluon.jit
def _narrow_fragment(p_tile, s_tile, WORDS: gl.constexpr, FRAG: gl.constexpr):
    """rsmma.frag32_fragment of a [16 W, BK] tile: the same codes and relabelling, W slabs of 16 columns."""
    C: gl.constexpr = p_tile.type.shape[0]
    W: gl.constexpr = p_tile.type.shape[1] // 64
    q = _frag32_codes_ptx(p_tile.load(WORDS))  # 8 x [C, 64 W]
    z = gl.join(gl.join(gl.join(q[0], q[4]), gl.join(q[1], q[5])),
                gl.join(gl.join(q[2], q[6]), gl.join(q[3], q[7])))  # [C, 8p + 2t + h, e, i0, i1]
    z = gl.reshape(z, [1, C, W, 8, 4, 2, 2, 2, 2])  # p = 8w + g: [1, C, w, g, t, h, e, i0, i1]
    z = gl.permute(z, [0, 2, 5, 3, 1, 8, 7, 4, 6])  # [1, w, h, g, C, i1, i0, t, e]
    w = gl.convert_layout(gl.reshape(z, [16 * W, C * 32]), FRAG, assert_trivial=True)  # registers only
    return w * gl.expand_dims(_row_scales(s_tile, gl.SliceLayout(1, FRAG), True).to(gl.float16), 1)


@gluon.jit
def _scale_row(s_smem, s, s_desc):
    """Slot s's scale row [1, BN] of its 128-byte slot: the TMA writes a slot from a 128-byte aligned address
    (slots of 16 columns, 32 bytes, faulted misaligned from the second block on)."""
    return s_smem.index(s)._reinterpret(gl.float16, s_desc.block_type.shape, s_desc.layout)


@gluon.jit
def _issue(a_desc, p_desc, s_desc, a_smem, p_smem, s_smem, ready, i, a_row, col0, group):
    """Block i's A box (or, below BM tokens, M's rows in each 128-byte column chunk, as rsmma's loader
    copies them), the tile's frag32 words and its scale row into ring slot i % STAGES."""
    STAGES: gl.constexpr = a_smem.type.shape[0]
    BM: gl.constexpr = a_smem.type.shape[1]
    BK: gl.constexpr = a_smem.type.shape[2]
    A_ROWS: gl.constexpr = a_desc.block_type.shape[0]
    A_BYTES: gl.constexpr = a_desc.block_type.nbytes * (BK // 64 if A_ROWS < BM else 1)
    s = i % STAGES
    bar = ready.index(s)
    k = i * BK
    mbarrier.expect(bar, A_BYTES + p_desc.block_type.nbytes + s_desc.block_type.nbytes)
    if A_ROWS < BM:
        chunks = a_smem.index(s)._reinterpret(gl.float16, [BK // 64 * BM, 64], CHUNK_ROWS)
        for c in gl.static_range(BK // 64):
            tma.async_copy_global_to_shared(a_desc, [0, k + 64 * c], bar, chunks.slice(c * BM, A_ROWS))
    else:
        tma.async_copy_global_to_shared(a_desc, [a_row, k], bar, a_smem.index(s))
    tma.async_copy_global_to_shared(p_desc, [k // 32, col0 * 4], bar, p_smem.index(s))  # slab c at words 64 c
    tma.async_copy_global_to_shared(s_desc, [k // group, col0], bar, _scale_row(s_smem, s, s_desc))


@gluon.jit
def narrow_kernel(a_desc, p_desc, s_desc, c_ptr, ws_ptr, lock_ptr, M, N, K, stride_cm, stride_cn,
                  GROUP: gl.constexpr, BM: gl.constexpr, BK: gl.constexpr, STAGES: gl.constexpr,
                  num_warps: gl.constexpr):
    """Grid: (column tiles of 16 x num_warps, token tiles of BM); one tile a CTA over all of K. No warp
    specialization (its default partition takes 4 warps or more): the MMA warps issue each slot's next
    copy once every warp has read it, STAGES blocks ahead."""
    BN: gl.constexpr = 16 * num_warps
    S_SLOT: gl.constexpr = 64 if BN < 64 else BN
    ACC: gl.constexpr = gl.NVMMADistributedLayout(version=[2, 0], warps_per_cta=[num_warps, 1], instr_shape=[16, 8])
    FRAG: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=ACC, k_width=2)
    TOKENS: gl.constexpr = gl.DotOperandLayout(operand_index=1, parent=ACC, k_width=2)
    WORDS: gl.constexpr = _narrow_words_layout(BK, num_warps)
    gl.static_assert(GROUP % BK == 0, "a block lies in one scale group")
    n_blocks = K // BK
    col0 = gl.program_id(0) * BN
    pid_m = gl.program_id(1)
    a_row = gl.maximum(gl.minimum(pid_m * BM, M - BM), 0)  # dqmma.token_origin: the box inside A
    lo = pid_m * BM
    a_smem = gl.allocate_shared_memory(gl.float16, [STAGES, BM, BK], a_desc.layout)
    p_smem = gl.allocate_shared_memory(gl.int32, [STAGES, BK // 32, 4 * BN], p_desc.layout)
    # a scale row's slot padded to 128 bytes (``_scale_row``)
    s_smem = gl.allocate_shared_memory(gl.float16, [STAGES, 1, S_SLOT], s_desc.layout)
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for j in gl.static_range(STAGES):
        mbarrier.init(ready.index(j), count=1)
    for j in gl.static_range(STAGES):
        if j < n_blocks:
            _issue(a_desc, p_desc, s_desc, a_smem, p_smem, s_smem, ready, j, a_row, col0, GROUP)
    acc = gl.zeros([BN, BM], gl.float32, ACC)
    for i in range(n_blocks):
        s = i % STAGES
        mbarrier.wait(ready.index(s), (i // STAGES) & 1)
        w = _narrow_fragment(p_smem.index(s), _scale_row(s_smem, s, s_desc), WORDS, FRAG)
        x = a_smem.index(s).permute((1, 0)).load(TOKENS)
        gl.thread_barrier()  # every warp's reads of the slot done before the TMA writes it again
        fence_async_shared()
        if i + STAGES < n_blocks:
            _issue(a_desc, p_desc, s_desc, a_smem, p_smem, s_smem, ready, i + STAGES, a_row, col0, GROUP)
        acc = mma_v2(w, x, acc)
    # C^T's tile into C from the tile's own first token (a shifted box's rows below it masked), fp16
    store_tile(acc, c_ptr + lo * stride_cm, col0, a_row - lo, N, M - lo, stride_cn, stride_cm, ws_ptr, lock_ptr, 0, 0,
               1, 1, True)


def parse_config(text: str) -> dict:
    return dict(zip(FIELDS, (int(x) for x in text.split(","))))


def config_id(c: dict) -> str:
    return f"narrow.bn{c['BN']}.bm{c['BM']}.bk{c['BK']}.s{c['STAGES']}"


MAXNREG = 128  # a CTA is one or two MMA warps and the loader's: registers are not what limits CTAs an SM


def launch_args(config: dict, a, packed_f, scales, out):
    """(grid, args, meta): a CTA per (column tile, token tile), frag32 weights ``packed_f`` [K/32, 4N]."""
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

    from tunesearch.variants.api import _gluon_args
    from tunesearch.variants.dqmma import a_shared_layout, shared_layouts
    from tunesearch.variants.space import cdiv

    bn, bm, bk = config["BN"], config["BM"], config["BK"]
    M, N = a.shape[0], scales.shape[1]
    grid = (cdiv(N, bn), cdiv(M, bm))

    def descriptors(a, packed_f, scales, bm, bn, bk):
        _, p_layout, s_layout = shared_layouts(bm, bn, bk)
        # below BM tokens one box of M's next power of two rows a 64-column chunk (rsmma's ONE_BOX_TILES form:
        # no second box of A's last rows, the rows past M zero-filled)
        rows = min(bm, 1 << (a.shape[0] - 1).bit_length())
        a_desc = TensorDescriptor.from_tensor(a, [rows, 64] if rows < bm else [bm, bk], a_shared_layout(bm, bk))
        return (a_desc, TensorDescriptor.from_tensor(packed_f, [bk // 32, 4 * bn], p_layout),
                TensorDescriptor.from_tensor(scales, [1, bn], s_layout))
    args = _gluon_args(descriptors, a, packed_f, scales, out, bm, bn, bk, grid[0] * grid[1], 1)
    meta = dict(GROUP=128, BM=bm, BK=bk, STAGES=config["STAGES"], num_warps=bn // 16, maxnreg=MAXNREG)
    return grid, args, meta


def narrow_launch(config: dict):
    """gluon_checks' launch form: (a, packed, scales, out) -> a no-argument launch."""
    from benchmarks.experiments import gluon_checks

    return gluon_checks.kernel_launch(narrow_kernel, lambda *operands: launch_args(config, *operands))


def smoke_shapes(config: dict):
    """Mask edges (M, K, N): one token (A's row box), M below BM, the whole tile, a second tile that M fills
    in part (its box shifted), N no multiple of the tile (the TMA's zero columns), K of one block up."""
    bm, bk = config["BM"], config["BK"]
    return [(1, bk, 200), (3, 2 * bk, 136), (bm, 1024, 256), (bm + 5, 512, 72), (2 * bm + 1, 256, 40)]


def smoke(config: dict) -> str | None:
    from benchmarks.experiments import gluon_checks

    return gluon_checks.frag32_smoke(narrow_launch(config), smoke_shapes(config))


def compile_offline(config: dict, M: int = 8, N: int = 11008, K: int = 4096):
    """The kernel for ``config`` compiled for sm_90 without a GPU."""
    from benchmarks.experiments import gluon_checks

    return gluon_checks.compile_frag32_offline(narrow_kernel, lambda *operands: launch_args(config, *operands), M,
                                               N, K)


CONFIGS = [dict(BN=16, BM=8, BK=128, STAGES=8), dict(BN=32, BM=8, BK=128, STAGES=8),
           dict(BN=16, BM=8, BK=128, STAGES=4), dict(BN=32, BM=8, BK=128, STAGES=4),
           dict(BN=16, BM=16, BK=128, STAGES=8), dict(BN=32, BM=16, BK=128, STAGES=8)]
# M=1 (the floor's target), 8 and 16 on the four shapes whose picks split K, and 4096x22016's (which do not)
KEYS = [(M, K, N) for M in (1, 8, 16) for K, N in ((4096, 4096), (4096, 11008), (11008, 4096), (4096, 12288),
                                                    (4096, 22016))]


def main(out_dir):
    from benchmarks.experiments import gluon_checks
    from tunesearch.bench import CheckInputs, Operands, kernel_bytes, time_variant
    from tunesearch.dispatch import Dispatcher, read_table
    from tunesearch.gpu import gpu_info, stream_read_floor

    info = gpu_info(0)
    table = Dispatcher(read_table(ROOT / "tunesearch" / "tables" / "h200.json"), strict=True)
    keys = gluon_checks.env_keys("NARROW_KEYS", KEYS)
    unsound = gluon_checks.smoke_all(__file__, FIELDS, CONFIGS, config_id, workers=len(CONFIGS), timeout_s=240)
    configs = [c for c in CONFIGS if config_id(c) not in unsound]
    rows = []
    for M, K, N in keys:
        pick = table.resolve(M, N, K, torch.device("cuda"))
        check = CheckInputs(M, N, K, 128, "cuda", layout="frag32")
        ops = Operands(M, N, K, 128, info.l2_bytes, layout="frag32")
        row = dict(M=M, K=K, N=N, pick=pick.id, pick_us=time_variant(pick, ops, replays=20).us,
                   floor=stream_read_floor(kernel_bytes(M, N, K, 128), info.l2_bytes, info.sm_count, replays=20).us)
        for c in configs:
            if (M <= 8) == (c["BM"] == 8):  # 8-token tiles up to M=8, 16-token ones at M=16
                gluon_checks.time_form(row, config_id(c), narrow_launch(c), check, ops.copies)
        rows.append(row)
        print(json.dumps(row), flush=True)
        del ops, check
        with open(f"{out_dir}/narrow_v2.json", "w") as f:
            json.dump(dict(gpu=info.to_dict(), smoke_failures=unsound, rows=rows), f, indent=1)
    names = [config_id(c) for c in configs]
    print(f"{'key':>15} {'floor':>6} {'pick':>6} " + " ".join(f"{n[7:]:>17}" for n in names))
    for r in rows:
        f = lambda x: f"{x:17.2f}" if isinstance(x, float) else f"{'fail':>17}" if x else f"{'-':>17}"  # noqa: E731
        print(f"{'M=%d %dx%d' % (r['M'], r['K'], r['N']):>15} {r['floor']:6.2f} {r['pick_us']:6.2f} "
              + " ".join(f(r.get(n)) for n in names))


if __name__ == "__main__":
    from benchmarks.experiments import gluon_checks

    gluon_checks.config_cli(sys.argv, parse_config, smoke, compile_offline, main)
