"""The twotile family: rsmma with a token tile of HI + LO tokens as two accumulators on one weight fragment
(Gluon, Hopper, frag32 weights), for M = 65..96 (HI = 64) and 129..192 (HI = 128).

rsmma's token tile is the wgmma's N, and Triton's tensors need power-of-two shapes: past 128 tokens every
rsmma variant takes a second 128-token tile or a third 64-token one over all the weights, so M = 129..192
cost what M = 256 costs (43 us on 4096x12288 wherever M falls, cuBLAS fp16 29.4 us at M=129). Here each
block's weights are unpacked once into the register fragment and fed to two wgmmas, one of HI tokens
([BN, HI] accumulator) and one of LO ([BN, LO]; LO = 8, 16, 32 or 64, below HI), both left in flight. The
unpack, the MMA warps' chain (NOTES.md row 78), is paid once for HI + LO tokens.

Measured on the H200 before it was a family (benchmarks/experiments/rsmma_two_tiles.py, NOTES.md row 91):
4096x12288 M=129..192 29.4-34.2 us against the table's 43.6-43.9 (cuBLAS 29.4-42.5), 4096x22016 M=65..96
32.4-35.7 against 48.8-49.1 and M=129..160 50.0-52.5 against 65.3-65.5; 11008x4096 lost (its M=65..192
picks, 64-token tiles with two splits, stay ahead).

The kernel is rsmma's (variants/rsmma.py) in its scaled-fragment form on frag32 weights: the same loader
warp and TMA ring, each ring slot's A as two boxes of the same activations kept inside A as rsmma's shifted
last tile is (``dqmma.token_origin``, ``_token_rows``): for M in (HI, HI + LO] rows [0, HI) and [M - LO,
M), the LO accumulator's rows below HI repeating the HI one's and masked at the store. Any M runs (a
bucket's variant runs at all of its M; the search offers it only where HI < M <= HI + LO). One tile a CTA
(SPLIT_K = 1: both accumulators leave through the drained ring, rsmma's staged store), or stream-K
(SPLIT_K = 0) over CTAS x the SMs, each tile segment stored through the family's deterministic split
reduction (``dqmma.store_tile``), the LO accumulators' workspace slots and counters after the HI ones'.

Gluon has no CPU interpreter: the family is offered only on an sm_90 GPU (``space.DeviceLimits``); CI
compiles it for sm_90 and checks its schedule (two wgmmas in flight, no spills), the GPU tests its results.
"""
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import mbarrier, tma, warpgroup_mma, warpgroup_mma_wait

from .dqmma import _first_cta, _next_unit, _unit, store_tile, stream_k_segment, stream_k_segments, token_origin
from .rsmma import LOAD_REGS, _store_tile_staged, a_descriptor, frag32_descriptors


@gluon.jit
def _token_rows(pid_m, HI: gl.constexpr, LO: gl.constexpr, M):
    """Token tile pid_m's A boxes and the C rows each accumulator stores: (the HI box's first row, the LO
    box's, the first row the HI accumulator stores, the LO one's). The boxes stay inside A where M allows
    (the TMA's zero fill of rows past A is slow, ``dqmma.token_origin``): a last tile that M fills in part
    starts at M - (HI + LO), and the LO box at M - LO where that is below HI rows on; the rows a box
    repeats (its neighbour's, or the HI box's) are computed again and not stored. Where M <= HI the LO
    box stores nothing."""
    own = pid_m * (HI + LO)
    hi_row = token_origin(pid_m, HI + LO, M)
    lo_row = gl.maximum(gl.minimum(hi_row + HI, M - LO), 0)
    return hi_row, lo_row, own, gl.maximum(own, hi_row + HI)


@gluon.jit
def _two_tile_block(i, first, acc_hi, acc_lo, a_hi, a_lo, p_smem, s_smem, ready, empty, FRAGMENT: gl.constexpr,
                    WORDS: gl.constexpr, FRAG: gl.constexpr, FRAG_LO: gl.constexpr):
    """Block i of a segment that began at block ``first``: unpack its fragment once, issue both wgmmas on
    it, wait for block i-1's two and free that slot (rsmma._mma_block with a second accumulator)."""
    STAGES: gl.constexpr = a_hi.type.shape[0]
    s = i % STAGES
    mbarrier.wait(ready.index(s), (i // STAGES) & 1)
    w = FRAGMENT(p_smem.index(s), s_smem.index(s), WORDS, FRAG, True)
    acc_hi = warpgroup_mma(w, a_hi.index(s).permute((1, 0)), acc_hi, is_async=True)
    # the same registers seen with the LO accumulator as parent: an A operand's layout depends on the MMA's
    # rows and depth only, so the conversion moves nothing
    w_lo = gl.convert_layout(w, FRAG_LO, assert_trivial=True)
    acc_lo = warpgroup_mma(w_lo, a_lo.index(s).permute((1, 0)), acc_lo, is_async=True)
    acc_hi, acc_lo = warpgroup_mma_wait(num_outstanding=2, deps=(acc_hi, acc_lo))
    mbarrier.arrive(empty.index((i + STAGES - 1) % STAGES), pred=i > first)
    return acc_hi, acc_lo


@gluon.jit
def _two_tile_segment(acc_hi, acc_lo, begin, end, a_hi, a_lo, p_smem, s_smem, ready, empty, FRAGMENT: gl.constexpr,
                      WORDS: gl.constexpr, FRAG: gl.constexpr, FRAG_LO: gl.constexpr):
    """Both accumulators += the CTA's ring blocks [begin, end) (one column tile's), the last wgmmas waited for
    and every slot freed (rsmma._mma_segment's scaled-fragment form)."""
    STAGES: gl.constexpr = a_hi.type.shape[0]
    n_blocks = end - begin
    # two blocks a trip, so that each block's fragment has registers of its own (rsmma._mma_segment, C7515)
    for j in range(n_blocks // 2):
        acc_hi, acc_lo = _two_tile_block(begin + 2 * j, begin, acc_hi, acc_lo, a_hi, a_lo, p_smem, s_smem, ready,
                                         empty, FRAGMENT, WORDS, FRAG, FRAG_LO)
        acc_hi, acc_lo = _two_tile_block(begin + 2 * j + 1, begin, acc_hi, acc_lo, a_hi, a_lo, p_smem, s_smem, ready,
                                         empty, FRAGMENT, WORDS, FRAG, FRAG_LO)
    if n_blocks % 2 == 1:
        acc_hi, acc_lo = _two_tile_block(end - 1, begin, acc_hi, acc_lo, a_hi, a_lo, p_smem, s_smem, ready, empty,
                                         FRAGMENT, WORDS, FRAG, FRAG_LO)
    acc_hi, acc_lo = warpgroup_mma_wait(num_outstanding=0, deps=(acc_hi, acc_lo))
    mbarrier.arrive(empty.index((end - 1) % STAGES), pred=end > begin)  # the segment's last slot
    return acc_hi, acc_lo


@gluon.jit
def _two_tile_mma(BN: gl.constexpr, LO: gl.constexpr, num_warps: gl.constexpr, FRAGMENT: gl.constexpr,
                  WORDS: gl.constexpr, MAX_PARTS: gl.constexpr, a_hi, a_lo, p_smem, s_smem, ready, empty, u0,
                  n_units, blocks, tiles_n, units, ctas, c_ptr, ws_ptr, lock_ptr, M, N, stride_cm, stride_cn):
    """The MMA warps. One tile a CTA (MAX_PARTS = 1): its two accumulators, stored after the join.
    Stream-K: a segment a tile that the CTA's units touch, each stored as it ends through the family's
    reduction (``dqmma.store_tile``), the LO accumulators' slots and counters after the HI ones'."""
    HI_ROWS: gl.constexpr = a_hi.type.shape[1]
    HI_ACC: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[num_warps, 1],
                                                     instr_shape=[16, HI_ROWS, 16])
    LO_ACC: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[num_warps, 1],
                                                     instr_shape=[16, LO, 16])
    FRAG: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=HI_ACC, k_width=2)
    FRAG_LO: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=LO_ACC, k_width=2)
    acc_hi = gl.zeros([BN, HI_ROWS], gl.float32, HI_ACC)
    acc_lo = gl.zeros([BN, LO], gl.float32, LO_ACC)
    if MAX_PARTS == 1:
        acc_hi, acc_lo = _two_tile_segment(acc_hi, acc_lo, 0, n_units, a_hi, a_lo, p_smem, s_smem, ready, empty,
                                           FRAGMENT, WORDS, FRAG, FRAG_LO)
    else:
        tiles = units // blocks
        ws_lo = ws_ptr + tiles * (MAX_PARTS * BN * HI_ROWS)
        for seg in range(stream_k_segments(u0, n_units, blocks)):
            begin, end = stream_k_segment(seg, u0, n_units, blocks)
            hi, lo = _two_tile_segment(gl.zeros([BN, HI_ROWS], gl.float32, HI_ACC), gl.zeros([BN, LO], gl.float32,
                                                                                            LO_ACC),
                                       begin, end, a_hi, a_lo, p_smem, s_smem, ready, empty, FRAGMENT, WORDS, FRAG,
                                       FRAG_LO)
            pid_n, pid_m, _ = _unit(u0 + end - 1, blocks, tiles_n)
            tile = (u0 + end - 1) // blocks
            first = _first_cta(tile * blocks, units, ctas)
            rank = gl.program_id(0) - first
            parts = _first_cta(tile * blocks + blocks - 1, units, ctas) - first + 1
            hi_row, lo_row, hi_own, lo_own = _token_rows(pid_m, HI_ROWS, LO, M)
            # C from each accumulator's first own row: the rows a shifted box repeats, at negative offsets, masked
            store_tile(hi, c_ptr + hi_own * stride_cm, pid_n * BN, hi_row - hi_own, N, M - hi_own, stride_cn,
                       stride_cm, ws_ptr, lock_ptr, tile, rank, parts, MAX_PARTS, True)
            store_tile(lo, c_ptr + lo_own * stride_cm, pid_n * BN, lo_row - lo_own, N, M - lo_own, stride_cn,
                       stride_cm, ws_lo, lock_ptr + tiles, tile, rank, parts, MAX_PARTS, True)
    return acc_hi, acc_lo


@gluon.jit
def _two_tile_load(a_hi_desc, a_lo_desc, p_desc, s_desc, a_hi, a_lo, p_smem, s_smem, ready, empty, u0, n_units,
                   blocks, tiles_n, M, group):
    """rsmma's loader (frag32 boxes) over the CTA's units in order, each slot's A as the two boxes."""
    STAGES: gl.constexpr = a_hi.type.shape[0]
    HI_ROWS: gl.constexpr = a_hi.type.shape[1]
    LO: gl.constexpr = a_lo.type.shape[1]
    BK: gl.constexpr = a_hi.type.shape[2]
    BN: gl.constexpr = s_smem.type.shape[2]
    BYTES: gl.constexpr = (a_hi_desc.block_type.nbytes + a_lo_desc.block_type.nbytes
                           + p_desc.block_type.nbytes * (BN // 64) + s_desc.block_type.nbytes)
    pid_n, pid_m, kb = _unit(u0, blocks, tiles_n)
    for i in range(n_units):
        s = i % STAGES
        mbarrier.wait(empty.index(s), ((i // STAGES) & 1) ^ 1)  # a fresh barrier counts as freed
        bar = ready.index(s)
        k = kb * BK
        col = pid_n * BN
        hi_row, lo_row, _, _ = _token_rows(pid_m, HI_ROWS, LO, M)
        mbarrier.expect(bar, BYTES)
        tma.async_copy_global_to_shared(a_hi_desc, [hi_row, k], bar, a_hi.index(s))
        tma.async_copy_global_to_shared(a_lo_desc, [lo_row, k], bar, a_lo.index(s))
        for j in gl.static_range(BN // 64):  # frag32: a box of whole chunks [BK/32, 256] per 64 columns
            tma.async_copy_global_to_shared(p_desc, [k // 32, (col + 64 * j) * 4], bar,
                                            p_smem.index(s).slice(j * (BK // 32), BK // 32))
        tma.async_copy_global_to_shared(s_desc, [k // group, col], bar, s_smem.index(s))
        pid_n, pid_m, kb = _next_unit(pid_n, pid_m, kb, blocks, tiles_n)


@gluon.jit
def two_tile_kernel(a_hi_desc, a_lo_desc, p_desc, s_desc, c_ptr, ws_ptr, lock_ptr, M, N, K, stride_cm, stride_cn,
                    GROUP: gl.constexpr, LO: gl.constexpr, BK: gl.constexpr, STAGES: gl.constexpr,
                    WORDS: gl.constexpr, FRAGMENT: gl.constexpr, MAX_PARTS: gl.constexpr, num_warps: gl.constexpr):
    """C [M, N] in tiles of HI + LO tokens (HI: a_hi_desc's box rows, ``_token_rows``) and BN = 16 x
    num_warps columns of frag32 weights: a CTA a tile (MAX_PARTS = 1), or stream-K over the grid's CTAs
    (MAX_PARTS, the most CTAs a tile meets: ``space.gluon_grid``)."""
    BN: gl.constexpr = 16 * num_warps
    HI_ROWS: gl.constexpr = a_hi_desc.block_type.shape[0]
    gl.static_assert(GROUP % BK == 0, "a block lies in one scale group")
    gl.static_assert(STAGES * BK >= BN, "the ring holds C's tiles for the staged store")
    blocks = K // BK
    tiles_n = gl.cdiv(N, BN)
    units = blocks * tiles_n * gl.cdiv(M, HI_ROWS + LO)
    ctas = gl.num_programs(0)  # a tile each: u0 = the tile's first unit, n_units = blocks
    u0 = gl.program_id(0) * units // ctas
    n_units = (gl.program_id(0) + 1) * units // ctas - u0
    a_hi = gl.allocate_shared_memory(gl.float16, [STAGES, HI_ROWS, BK], a_hi_desc.layout)
    a_lo = gl.allocate_shared_memory(gl.float16, [STAGES, LO, BK], a_lo_desc.layout)
    p_smem = gl.allocate_shared_memory(gl.int32, [STAGES, BN // 64 * (BK // 32), 256], p_desc.layout)
    s_smem = gl.allocate_shared_memory(gl.float16, [STAGES, 1, BN], s_desc.layout)
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for j in gl.static_range(STAGES):
        mbarrier.init(ready.index(j), count=1)
        mbarrier.init(empty.index(j), count=1)
    acc_hi, acc_lo = gl.warp_specialize([
        (_two_tile_mma, (BN, LO, num_warps, FRAGMENT, WORDS, MAX_PARTS, a_hi, a_lo, p_smem, s_smem, ready, empty, u0,
                         n_units, blocks, tiles_n, units, ctas, c_ptr, ws_ptr, lock_ptr, M, N, stride_cm, stride_cn)),
        (_two_tile_load, (a_hi_desc, a_lo_desc, p_desc, s_desc, a_hi, a_lo, p_smem, s_smem, ready, empty, u0, n_units,
                          blocks, tiles_n, M, GROUP)),
    ], [1], [LOAD_REGS])
    if MAX_PARTS == 1:  # the whole tile here, the ring drained: both accumulators staged through it
        pid_n, pid_m, _ = _unit(u0, blocks, tiles_n)
        hi_row, lo_row, hi_own, lo_own = _token_rows(pid_m, HI_ROWS, LO, M)
        # C from each accumulator's first own row: the rows a shifted box repeats, at negative offsets, masked
        _store_tile_staged(acc_hi, a_hi, c_ptr + hi_own * stride_cm, hi_row - hi_own, pid_n * BN, M - hi_own, N,
                           stride_cm, stride_cn, True)
        _store_tile_staged(acc_lo, a_lo, c_ptr + lo_own * stride_cm, lo_row - lo_own, pid_n * BN, M - lo_own, N,
                           stride_cm, stride_cn, True)


def descriptors(a, packed_f, scales, HI: int, LO: int, BN: int, BK: int):
    """TMA descriptors of A in boxes of HI and of LO rows [., BK] at any M (the loader takes whole boxes),
    the frag32 weights and the scales (``rsmma.frag32_descriptors``'): the kernel's first four arguments."""
    a_hi, p_desc, s_desc = frag32_descriptors(a, packed_f, scales, HI, BN, BK, row_boxes=False)
    return a_hi, a_descriptor(a, LO, BK, row_boxes=False), p_desc, s_desc
