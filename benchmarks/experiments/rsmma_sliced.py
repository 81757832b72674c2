"""EXPERIMENT: sliced K in rsmma, the split-K reduction's tail kept inside the CTA (NOTES.md row 68).

    python benchmarks/experiments/rsmma_sliced.py OUT_DIR       (on an sm_90 GPU: the diagonal form checked and
                                                                 timed beside the picks)
    python benchmarks/experiments/rsmma_sliced.py --compile     (offline: both forms' schedules)

Status (row 68): this form compiles for sm_90 with no spills, but ptxas waits for every wgmma (C7512,
"serialized due to insufficient register resources") at any register split tried (80 to 232 a thread,
the worker slice's 80 to 200): a worker partition that uses its wgmma accumulator (a shared or a global
store after the loop) serializes both slices' wgmmas; with the worker's tile unused, or only the default
partition storing, one wgmma stays in flight. So it is not timed. The diagonal form below (no MMA worker)
keeps one wgmma in flight and is right on the H200 (relative errors 3.5e-4 to 4.2e-4), but slower than
the picks at every key timed (`main`, the _s30 run: M=1 4096x11008 16.42 vs 12.18 us, M=16 19.62 vs
12.96, M=32 31.13 vs 15.33): the cross products double its MMA work at 2 BM tokens and four times the
useful, and a 128-row tile of 8 warps at BK=64 is not the picks' ring (3 CTAs of BN=64, BK=128).

Row 66: where the table's pick splits K, every CTA of the one wave ends on the split reduction's tail
(its fp32 partial stored, a fence, the counter, the last CTA reading the partials back): 1.3-2.6 us at
M <= 64. Row 68's bare ring (`layout_ring.py`, probe_sliced_tail) took that tail out where a CTA held both
halves of K in two consumer warp groups summing through shared memory: M=16 4096x11008 10.62 -> 9.45 us,
M=32 13.69 -> 10.29, against 8.3 and 8.7 with no tail at all.

Here the family's MMA partition does it: one CTA per (column tile, SPLIT_K / 2 splits), each running two
copies of rsmma's MMA partition (`_mma_segment`, unchanged) side by side, each over a TMA ring of its own
that one loader warp fills a block of each in turn (rsmma's loader step), slice 0 over the first half of
the CTA's blocks and slice 1 over the second (contiguous halves: two streams, as two split CTAs read
them). Slice 0 (the default partition) stores its fp32 tile [BN, BM] in shared memory and signals; slice
1 (a worker) adds it to its own and runs the family's epilogue (fp16 straight to C where no split is
left, else the reduction over the CTAs left). BN = 64 (one warp group a slice); the scale after the
wgmma where rsmma_launch.scale_after gives the launch's registers.
"""
import json
import sys
from pathlib import Path

import torch
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import mbarrier, tma

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # so that it runs as a script from anywhere

from benchmarks.experiments import gluon_checks  # noqa: E402
from tunesearch.variants.dqmma import _issue_block, _next_unit, _tile_epilogue, _unit  # noqa: E402
from tunesearch.variants.rsmma import ALL_PARTS, _mma_segment, fragment  # noqa: E402

LOAD_REGS = gl.constexpr(24)  # the loaders only issue TMA (rsmma.LOAD_REGS)
PARTS = gl.constexpr(ALL_PARTS)  # every part of the kernel (rsmma_anatomy leaves some out)


@gluon.jit
def _slice_acc(BN: gl.constexpr, BM: gl.constexpr, a_smem, p_smem, s_smem, ready, empty, n_blocks,
               FRAGMENT: gl.constexpr, WORDS: gl.constexpr, SCALE_AFTER: gl.constexpr):
    """One slice's C^T tile [BN, BM] over its ring's n_blocks blocks: rsmma's MMA partition, one warp group."""
    ACC: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, BM, 16])
    FRAG: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=ACC, k_width=2)
    return _mma_segment(gl.zeros([BN, BM], gl.float32, ACC), 0, n_blocks, a_smem, p_smem, s_smem, ready, empty,
                        FRAGMENT, WORDS, FRAG, PARTS, SCALE_AFTER, True)


@gluon.jit
def _first_slice(BN: gl.constexpr, BM: gl.constexpr, a_smem, p_smem, s_smem, ready, empty, n_blocks, red_smem,
                 red_bar, FRAGMENT: gl.constexpr, WORDS: gl.constexpr, SCALE_AFTER: gl.constexpr):
    """Slice 0 (the default partition): its tile into shared memory for slice 1. (The other way round, a
    worker partition's shared store after its wgmma loop made ptxas serialize every wgmma, C7512.)"""
    red_smem.store(_slice_acc(BN, BM, a_smem, p_smem, s_smem, ready, empty, n_blocks, FRAGMENT, WORDS, SCALE_AFTER))
    mbarrier.arrive(red_bar.index(0))


@gluon.jit
def _second_slice(BN: gl.constexpr, BM: gl.constexpr, a_smem, p_smem, s_smem, ready, empty, n_blocks, red_smem,
                  red_bar, FRAGMENT: gl.constexpr, WORDS: gl.constexpr, SCALE_AFTER: gl.constexpr, c_ptr, ws_ptr,
                  lock_ptr, M, N, stride_cm, stride_cn, u_last, n_units, blocks, tiles_n, units,
                  SPLIT_K: gl.constexpr, MAX_PARTS: gl.constexpr):
    """Slice 1 (a worker partition): its tile plus slice 0's, once that is in shared memory, into C
    through the family's epilogue."""
    acc = _slice_acc(BN, BM, a_smem, p_smem, s_smem, ready, empty, n_blocks, FRAGMENT, WORDS, SCALE_AFTER)
    mbarrier.wait(red_bar.index(0), 0)
    acc += red_smem.load(acc.type.layout)
    if n_units > 0:  # C^T's tile [BN, BM] into C [M, N]
        _tile_epilogue(acc, u_last, c_ptr, ws_ptr, lock_ptr, M, N, stride_cm, stride_cn, blocks, tiles_n, units, 1,
                       SPLIT_K, MAX_PARTS, True, True)


@gluon.jit
def _issue(a_desc, p_desc, s_desc, a_smem, p_smem, s_smem, ready, empty, i, pid_n, pid_m, kb, group):
    """Block i of a ring (unit (pid_n, pid_m, kb)) into its slot, once that is free: dqmma's TMA step."""
    STAGES: gl.constexpr = a_smem.type.shape[0]
    mbarrier.wait(empty.index(i % STAGES), ((i // STAGES) & 1) ^ 1)  # a fresh barrier counts as freed
    _issue_block(a_desc, p_desc, s_desc, a_smem, p_smem, s_smem, ready, i, pid_n, pid_m, kb, group)


@gluon.jit
def _load_two_rings(a_desc, p_desc, s_desc, a0, p0, s0, ready0, empty0, a1, p1, s1, ready1, empty1, u0, n0, n1,
                    blocks, tiles_n, group):
    """One loader warp for both slices, a block of each in turn: slice 0's units from u0, slice 1's from
    u0 + n0. (A loader partition a slice, the family's own twice, padded each to a warp group: 16 warps,
    whose register split left ptxas serializing every wgmma, C7512.)"""
    n0_, m0, k0 = _unit(u0, blocks, tiles_n)
    n1_, m1, k1 = _unit(u0 + n0, blocks, tiles_n)
    for i in range(n0):
        _issue(a_desc, p_desc, s_desc, a0, p0, s0, ready0, empty0, i, n0_, m0, k0, group)
        n0_, m0, k0 = _next_unit(n0_, m0, k0, blocks, tiles_n)
        if i < n1:
            _issue(a_desc, p_desc, s_desc, a1, p1, s1, ready1, empty1, i, n1_, m1, k1, group)
            n1_, m1, k1 = _next_unit(n1_, m1, k1, blocks, tiles_n)


@gluon.jit
def _ring(a_desc, p_desc, s_desc, STAGES: gl.constexpr, BM: gl.constexpr, BK: gl.constexpr, BN: gl.constexpr):
    """One slice's TMA ring: A's tiles, the packed blocks, the scale rows, and its ready/empty barriers."""
    a_smem = gl.allocate_shared_memory(gl.float16, [STAGES, BM, BK], a_desc.layout)
    p_smem = gl.allocate_shared_memory(gl.int32, [STAGES, BK // 8, BN], p_desc.layout)
    s_smem = gl.allocate_shared_memory(gl.float16, [STAGES, 1, BN], s_desc.layout)
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for j in gl.static_range(STAGES):
        mbarrier.init(ready.index(j), count=1)
        mbarrier.init(empty.index(j), count=1)
    return a_smem, p_smem, s_smem, ready, empty


@gluon.jit
def rsmma_sliced_kernel(a_desc, p_desc, s_desc, c_ptr, ws_ptr, lock_ptr, M, N, K, stride_cm, stride_cn,
                        GROUP: gl.constexpr, BM: gl.constexpr, BK: gl.constexpr, SPLIT_K: gl.constexpr,
                        STAGES: gl.constexpr, WORDS: gl.constexpr, FRAGMENT: gl.constexpr,
                        SCALE_AFTER: gl.constexpr, MMA_REGS: gl.constexpr, num_warps: gl.constexpr,
                        MAX_PARTS: gl.constexpr = 1):
    """rsmma's split-K kernel with two slices a CTA (grid: column tiles, SPLIT_K CTAs along K, token tiles)."""
    gl.static_assert(num_warps == 4, "one warp group a slice: BN = 64")
    BN: gl.constexpr = 64
    gl.static_assert(GROUP % BK == 0, "a block lies in one scale group")
    blocks = K // BK
    tiles_n = gl.cdiv(N, BN)
    units = blocks * tiles_n * gl.cdiv(M, BM)
    per_split = (blocks + SPLIT_K - 1) // SPLIT_K
    first_block = gl.program_id(1) * per_split
    u0 = (gl.program_id(2) * tiles_n + gl.program_id(0)) * blocks + first_block
    n_units = gl.maximum(gl.minimum(blocks - first_block, per_split), 0)
    n0 = (n_units + 1) // 2
    a0, p0, s0, ready0, empty0 = _ring(a_desc, p_desc, s_desc, STAGES, BM, BK, BN)
    a1, p1, s1, ready1, empty1 = _ring(a_desc, p_desc, s_desc, STAGES, BM, BK, BN)
    red_smem = gl.allocate_shared_memory(gl.float32, [BN, BM], gl.SwizzledSharedLayout(1, 1, 1, [1, 0]))
    red_bar = gl.allocate_shared_memory(gl.int64, [1, 1], mbarrier.MBarrierLayout())
    mbarrier.init(red_bar.index(0), count=1)
    gl.warp_specialize([
        (_first_slice, (BN, BM, a0, p0, s0, ready0, empty0, n0, red_smem, red_bar, FRAGMENT, WORDS, SCALE_AFTER)),
        (_second_slice, (BN, BM, a1, p1, s1, ready1, empty1, n_units - n0, red_smem, red_bar, FRAGMENT, WORDS,
                         SCALE_AFTER, c_ptr, ws_ptr, lock_ptr, M, N, stride_cm, stride_cn, u0 + n_units - 1, n_units,
                         blocks, tiles_n, units, SPLIT_K, MAX_PARTS)),
        (_load_two_rings, (a_desc, p_desc, s_desc, a0, p0, s0, ready0, empty0, a1, p1, s1, ready1, empty1, u0, n0,
                           n_units - n0, blocks, tiles_n, GROUP)),
    ], [4, 1], [MMA_REGS, LOAD_REGS])


def sliced_call(p: dict, a, packed, scales, out, maxnreg: int, group_size: int = 128):
    """The sliced kernel for rsmma variant parameters ``p`` (BN=64, split-K): half the pick's CTAs along K
    (at least one), each ring the pick's stages; its kernel, grid, arguments and meta."""
    from tunesearch.variants.api import _gluon_args
    from tunesearch.variants.rsmma import descriptors, fragment, word_layout
    from tunesearch.variants.rsmma_launch import scale_after

    assert p["BN"] == 64 and p["SPLIT_K"] >= 1, p
    M, K = a.shape
    N = packed.shape[1]
    bm, bk, split_k = p["BM"], p["BK"], max(1, p["SPLIT_K"] // 2)
    tiles_m, tiles_n = triton.cdiv(M, bm), triton.cdiv(N, 64)
    args = _gluon_args(descriptors, a, packed, scales, out, bm, 64, bk, tiles_m * tiles_n, split_k)
    meta = dict(GROUP=group_size, BM=bm, BK=bk, SPLIT_K=split_k, MAX_PARTS=split_k, STAGES=p["num_stages"],
                WORDS=word_layout(bk, 4), FRAGMENT=fragment, SCALE_AFTER=scale_after(64, bm, bk, maxnreg),
                MMA_REGS=maxnreg, num_warps=4, maxnreg=maxnreg)
    return rsmma_sliced_kernel, (tiles_n, split_k, tiles_m), args, meta


def form_launch(call, p: dict, maxnreg: int):
    """gluon_checks' form of a launch of ``call``'s kernel (``sliced_call`` or ``diag_call``) for variant
    parameters ``p``: (a, packed, scales, out) -> a no-argument launch."""
    def launch(a, packed, scales, out):
        kernel, grid, args, meta = call(p, a, packed, scales, out, maxnreg)
        return lambda: kernel[grid](*args, **meta)
    return launch


def compile_form(call, variant_id: str, maxnreg: int, M: int = 16, N: int = 11008, K: int = 4096) -> dict:
    """``call``'s kernel (``sliced_call`` or ``diag_call``) for ``variant_id`` compiled for sm_90 offline:
    its wgmma waits, TMA loads, atomics, registers and spills."""
    from benchmarks.sass_stats import disassemble, resources, wgmma_waits
    from tunesearch.variants import Variant

    a = torch.empty(M, K, dtype=torch.float16)
    packed = torch.empty(K // 8, N, dtype=torch.int32)
    scales = torch.empty(K // 128, N, dtype=torch.float16)
    out = torch.empty(M, N, dtype=torch.float16)
    kernel, _, args, meta = call(Variant.from_id(variant_id).params, a, packed, scales, out, maxnreg)
    consts = {name: meta[name] for name in kernel.arg_names if name in meta}
    compiled = gluon_checks.compile_tma_kernel(kernel, args[:3], consts, meta["num_warps"], maxnreg)
    sass = disassemble(compiled)
    return dict(scale_after=meta["SCALE_AFTER"], waits=wgmma_waits(sass),
                tma_loads=sum(op.startswith("UTMALDG") for _, op, _ in sass),
                atomics=sum(op.startswith(("ATOMG", "RED")) for _, op, _ in sass), **resources(compiled))


# The diagonal form: no MMA worker (row 68). The family's 128-column tile (two warp groups, 8 MMA warps)
# with its warp groups' rows on the two K halves of one 64-column tile, and a token tile of 2 BM whose
# first BM rows hold A's block of the first half and the next BM of the second: each wgmma also forms
# the two cross products (wasted; the tensor cores idle at BM <= 16, row 67), and the wanted diagonal
# blocks [0:64, 0:BM] and [64:128, BM:2BM] are summed through shared memory inside the one partition.


@gluon.jit
def halves_fragment(p_tile, s_tile, WORDS: gl.constexpr, FRAG: gl.constexpr, SCALED: gl.constexpr):
    """rsmma's fragment of a slot whose packed block is two boxes [KW, 64] stacked along rows (the two K
    halves' words of one 64-column tile): seen as [KW, 128], column 64 h + j from half h."""
    KW: gl.constexpr = p_tile.type.shape[0] // 2
    view = p_tile.reshape([2, KW, 64]).permute((1, 0, 2)).reshape([KW, 128])
    return fragment(view, s_tile, WORDS, FRAG, SCALED)


@gluon.jit
def _diag_mma(a_smem, p_smem, s_smem, ready, empty, n_blocks, red_smem, BM: gl.constexpr, WORDS: gl.constexpr,
              SCALE_AFTER: gl.constexpr):
    """The MMA partition (8 warps): the stacked blocks' C^T [128, 2 BM], then its two diagonal blocks summed."""
    TOKENS: gl.constexpr = a_smem.type.shape[1]
    ACC: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[8, 1], instr_shape=[16, TOKENS, 16])
    FRAG: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=ACC, k_width=2)
    acc = _mma_segment(gl.zeros([128, TOKENS], gl.float32, ACC), 0, n_blocks, a_smem, p_smem, s_smem, ready, empty,
                       halves_fragment, WORDS, FRAG, PARTS, SCALE_AFTER, True)
    red_smem.store(acc)
    gl.thread_barrier()
    OUT: gl.constexpr = gl.BlockedLayout([1, 1], [32 // BM, BM], [8, 1], [1, 0])
    first = red_smem.slice(0, 64, dim=0).slice(0, BM, dim=1).load(OUT)
    second = red_smem.slice(64, 64, dim=0).slice(BM, BM, dim=1).load(OUT)
    return (first + second,)


@gluon.jit
def _load_halves(a_desc, p_desc, s_desc, a_smem, p_smem, s_smem, ready, empty, u0, n_blocks, half, blocks, tiles_n,
                 group):
    """The loader warp: block i of the first half and block i of the second (``half`` blocks on) into one
    slot: A's two [BM, BK] tiles as the slot's two row halves, the two packed boxes stacked, the two scale
    rows side by side."""
    STAGES: gl.constexpr = a_smem.type.shape[0]
    BM: gl.constexpr = a_smem.type.shape[1] // 2
    BK: gl.constexpr = a_smem.type.shape[2]
    KW: gl.constexpr = BK // 8
    pid_n, pid_m, kb = _unit(u0, blocks, tiles_n)
    for i in range(n_blocks):
        s = i % STAGES
        mbarrier.wait(empty.index(s), ((i // STAGES) & 1) ^ 1)  # a fresh barrier counts as freed
        bar = ready.index(s)
        mbarrier.expect(bar, 2 * (a_desc.block_type.nbytes + p_desc.block_type.nbytes + s_desc.block_type.nbytes))
        for h in gl.static_range(2):
            k = (kb + h * half) * BK
            tma.async_copy_global_to_shared(a_desc, [pid_m * BM, k], bar, a_smem.index(s).slice(h * BM, BM))
            tma.async_copy_global_to_shared(p_desc, [k // 8, pid_n * 64], bar, p_smem.index(s).slice(h * KW, KW))
            tma.async_copy_global_to_shared(s_desc, [k // group, pid_n * 64], bar,
                                            s_smem.index(s).slice(h * 64, 64, dim=1))
        pid_n, pid_m, kb = _next_unit(pid_n, pid_m, kb, blocks, tiles_n)


@gluon.jit
def rsmma_diag_kernel(a_desc, p_desc, s_desc, c_ptr, ws_ptr, lock_ptr, M, N, K, stride_cm, stride_cn,
                      GROUP: gl.constexpr, BM: gl.constexpr, BK: gl.constexpr, SPLIT_K: gl.constexpr,
                      STAGES: gl.constexpr, WORDS: gl.constexpr, SCALE_AFTER: gl.constexpr, num_warps: gl.constexpr,
                      MAX_PARTS: gl.constexpr = 1):
    """Sliced K in one MMA partition of 8 warps (grid: 64-column tiles, SPLIT_K CTAs along K, token tiles);
    a CTA's range of blocks split in two halves of equal length (an odd count: not handled, see sliced_call)."""
    gl.static_assert(num_warps == 8, "two warp groups: one a K half")
    gl.static_assert(GROUP % BK == 0, "a block lies in one scale group")
    blocks = K // BK
    tiles_n = gl.cdiv(N, 64)
    units = blocks * tiles_n * gl.cdiv(M, BM)
    per_split = (blocks + SPLIT_K - 1) // SPLIT_K
    first_block = gl.program_id(1) * per_split
    u0 = (gl.program_id(2) * tiles_n + gl.program_id(0)) * blocks + first_block
    n_units = gl.maximum(gl.minimum(blocks - first_block, per_split), 0)
    half = n_units // 2
    a_smem = gl.allocate_shared_memory(gl.float16, [STAGES, 2 * BM, BK], a_desc.layout)
    p_smem = gl.allocate_shared_memory(gl.int32, [STAGES, 2 * (BK // 8), 64], p_desc.layout)
    s_smem = gl.allocate_shared_memory(gl.float16, [STAGES, 1, 128], s_desc.layout)
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for j in gl.static_range(STAGES):
        mbarrier.init(ready.index(j), count=1)
        mbarrier.init(empty.index(j), count=1)
    red_smem = gl.allocate_shared_memory(gl.float32, [128, 2 * BM], gl.SwizzledSharedLayout(1, 1, 1, [1, 0]))
    (acc,) = gl.warp_specialize([
        (_diag_mma, (a_smem, p_smem, s_smem, ready, empty, half, red_smem, BM, WORDS, SCALE_AFTER)),
        (_load_halves, (a_desc, p_desc, s_desc, a_smem, p_smem, s_smem, ready, empty, u0, half, half, blocks, tiles_n,
                        GROUP)),
    ], [1], [LOAD_REGS])
    if n_units > 0:  # C^T's tile [64, BM] into C [M, N]
        _tile_epilogue(acc, u0 + n_units - 1, c_ptr, ws_ptr, lock_ptr, M, N, stride_cm, stride_cn, blocks, tiles_n,
                       units, 1, SPLIT_K, MAX_PARTS, True, True)


def diag_call(p: dict, a, packed, scales, out, maxnreg: int, group_size: int = 128):
    """The diagonal kernel for rsmma variant parameters ``p`` (BN=64, split-K, BM <= 32): half their CTAs
    along K (at least one), their BK and stages; its kernel, grid, arguments and meta."""
    from tunesearch.variants.api import _gluon_args
    from tunesearch.variants.dqmma import shared_layouts
    from tunesearch.variants.rsmma import word_layout
    from tunesearch.variants.rsmma_launch import scale_after
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

    assert p["BN"] == 64 and p["SPLIT_K"] >= 1 and p["BM"] <= 32, p
    M, K = a.shape
    N = packed.shape[1]
    bm, bk, split_k = p["BM"], p["BK"], max(1, p["SPLIT_K"] // 2)
    assert (K // bk) % (2 * split_k) == 0, "each CTA's blocks in two equal halves"
    tiles_m, tiles_n = triton.cdiv(M, bm), triton.cdiv(N, 64)

    def descriptors(a, packed, scales, BM, BN, BK):
        a_layout, p_layout, s_layout = shared_layouts(2 * BM, 64, BK)
        return (TensorDescriptor.from_tensor(a, [BM, BK], a_layout),
                TensorDescriptor.from_tensor(packed, [BK // 8, 64], p_layout),
                TensorDescriptor.from_tensor(scales, [1, 64], s_layout))
    args = _gluon_args(descriptors, a, packed, scales, out, bm, 64, bk, tiles_m * tiles_n, split_k)
    meta = dict(GROUP=group_size, BM=bm, BK=bk, SPLIT_K=split_k, MAX_PARTS=split_k, STAGES=p["num_stages"],
                WORDS=word_layout(bk, 8), SCALE_AFTER=scale_after(128, 2 * bm, bk, maxnreg), num_warps=8,
                maxnreg=maxnreg)
    return rsmma_diag_kernel, (tiles_n, split_k, tiles_m), args, meta


# (M, K, N): keys whose pick splits K (two ways on the 11008- and 12288-wide layers, four on the 4096-wide)
KEYS = [(1, 4096, 11008), (4, 4096, 12288), (8, 11008, 4096), (16, 4096, 11008), (16, 4096, 12288),
        (16, 11008, 4096), (32, 4096, 11008), (32, 4096, 12288)]
MAXNREG = 80  # two CTAs of 12 warps an SM (the family's 80 at three CTAs of 8)
# the diagonal form's tile: BK=64, so that 8 MMA warps keep one wgmma in flight at 80 registers with token
# tiles of up to 64 (rsmma_registers: 128x64x64 needs 72), and 8 stages (12.3 KB a stage at 2 x 32 tokens:
# two CTAs' rings fit an SM)
DIAG = dict(BK=64, num_stages=8)


def main(out_dir):
    from benchmarks.experiments.dqmma_rs import family_launch
    from tunesearch.bench import CheckInputs, Operands, kernel_bytes
    from tunesearch.dispatch import Dispatcher, read_table
    from tunesearch.gpu import gpu_info, stream_read_floor

    info = gpu_info(0)
    table = Dispatcher(read_table(ROOT / "tunesearch" / "tables" / "h200.json"), strict=True)
    rows = []
    for M, K, N in KEYS:
        variant = table.resolve(M, N, K, torch.device("cuda"))
        diag = {**variant.params, **DIAG}
        row = dict(M=M, K=K, N=N, variant=variant.id, diag=diag,
                   floor=stream_read_floor(kernel_bytes(1, N, K, 128), info.l2_bytes, info.sm_count, replays=20).us)
        inputs = CheckInputs(M, N, K, 128, "cuda")
        launches = {"pick": family_launch(variant), "diag": form_launch(diag_call, diag, MAXNREG)}
        ops = Operands(M, N, K, 128, info.l2_bytes)
        for form, launch in launches.items():
            gluon_checks.time_form(row, form, launch, inputs, ops.copies)
        rows.append(row)
        print(json.dumps(row), flush=True)
        del ops, inputs
        with open(f"{out_dir}/rsmma_sliced.json", "w") as f:
            json.dump(dict(gpu=info.to_dict(), maxnreg=MAXNREG, rows=rows), f, indent=1)
    print(f"{'key':>17} {'pick':>36} {'pick us':>8} {'diag us':>8} {'floor':>6}")
    for r in rows:
        f = lambda x: f"{x:8.2f}" if isinstance(x, float) else "    fail"  # noqa: E731
        print(f"{'M=%d %dx%d' % (r['M'], r['K'], r['N']):>17} {r['variant']:>36} {f(r['pick'])} {f(r['diag'])} "
              f"{r['floor']:6.2f}")


if __name__ == "__main__":
    if sys.argv[1] == "--compile":
        sliced = {v: compile_form(sliced_call, v, MAXNREG) for v in ("rsmma.bm16.bn64.bk128.sk2.w4.s5.c3",
                                                          "rsmma.bm8.bn64.bk128.sk4.w4.s6.c3")}
        diag = {v: compile_form(diag_call, v, MAXNREG) for v in ("rsmma.bm8.bn64.bk64.sk2.w4.s8.c3", "rsmma.bm16.bn64.bk64.sk4.w4.s8.c3",
                                                      "rsmma.bm32.bn64.bk64.sk2.w4.s8.c3")}
        print(json.dumps(dict(sliced=sliced, diag=diag)))
    else:
        main(sys.argv[1])
