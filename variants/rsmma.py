"""The rsmma family: W4A16 GEMM with the weights as the wgmma's register operand (Gluon, Hopper), M = 1..4096.

dqmma's unpack warps write every fp16 weight to shared memory for its MMA warps to read, and the two
partitions overlap only in part (NOTES.md row 49). Here the product is taken transposed,

    C^T [N, M] = W^T [N, K] x A^T [K, M],

so W^T is the wgmma's A operand, which may live in registers: the MMA warps unpack each block of packed
weights straight into the registers the instruction reads, while their previous wgmma runs (one left in
flight). A^T, the activations' TMA tile seen transposed, is the shared-memory operand. No fp16 weight
touches shared memory, and the only hand-over left is the loader warp's TMA ring:

    load (1 warp):  wait until ring slot s is free -> TMA A [BM, BK], packed W [BK/8, BN] and the block's
                    scale row [1, BN] into it
    MMA (BN/16 warps, one warp group per 64 columns of W): wait for slot s -> unpack and scale block i
                    into the fragment -> wgmma async -> wait for block i-1's -> free its slot

It reads the base layout as it is, or layout frag32 (layout.py: the weights repacked once at load, a
layout chosen per shape), whose words each hold one thread's 8 codes (row 69). The register fragment puts k = 2t,
2t + 1, 2t + 8, 2t + 9 of each 16-deep step in thread t of a quad: per 32-deep chunk, byte t of each of
a column's 4 words, which one PRMT picks (the quad's 4 threads load the same words: a broadcast). A
thread's two fragment rows (g and g + 8 of each 16) are given columns 2g and 2g + 1, so one 8-byte load
serves both; C^T's rows come out in that order and the epilogue writes each to its column.
frag32 stores exactly those 8 codes in one word a thread, its column pairs' words adjacent: one 8-byte load a
chunk, one SHF, four LOP3 and four HADD2 for 8 weights (no PRMT), its rows 64 columns' chunks a 1 KB TMA box
(a box with a 16-byte inner dimension ran 30% slower, row 66). On the H200 it took 4-11% off the table's picks
at M = 1..256 (NOTES.md row 69).

Tile: BN = 16 x num_warps columns of W (64 or 128: the wgmma M, 64 a warp group), BM tokens (the wgmma
N: 8 to 256; 8 only where one tile holds M, NOTES.md row 67), BK = 64 or 128 dividing the group size (one
scale row per block). The scale is folded into the fp16 weights as dequantize does ((q - 8) exact in
fp16, then one rounding by the scale), or, for 8- to 32-token tiles with the registers for it
(SCALE_AFTER, rsmma_launch.scale_after, NOTES.md rows 64 and 67), applied to each block's fp32 partial
after its wgmma: BM/2 FFMA a block instead of 32 HMUL2.
Split-K over whole blocks with the Triton families' deterministic reduction (fp32 partials in the tile's
slot per split, summed in split order by the last to arrive, which reads them back through the drained
ring by async copies where it holds an fp32 tile: STAGED_SPLIT, row 84), or stream-K (SPLIT_K=0, row 65): as many
CTAs as run at once, each taking an equal run of all tiles' blocks across tile boundaries, its MMA
warps writing each tile segment as it ends while the loader streams the next (dqmma's scheme, the same
reduction). TMA zero-fills rows past M and N and needs A, packed and scales with unit column stride,
16-byte aligned base and rows (the launcher copies otherwise; N a multiple of 8). C may have any strides.

CTAS: the launch's registers a thread are sized for that many CTAs an SM (`rsmma_launch.py`): at BN=64 a
CTA has one MMA warp per scheduler, and a second CTA's warps hide its unpack latency (row 53); with them
32-token tiles beat swapab at M=32 (row 56).

The kernel takes the fragment builder as a parameter: `fragment` for the base layout, `frag32_fragment`
for frag32 (the packed descriptor's box tells the loader which: [BK/8, BN] or [BK/32, 256]).

Gluon has no CPU interpreter: the family is offered only on an sm_90 GPU (`space.DeviceLimits`); CI
compiles it for sm_90 and checks its schedule, the GPU tests check its results.
"""
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.ampere import async_copy
from triton.experimental.gluon.language.nvidia.hopper import mbarrier, tma, warpgroup_mma, warpgroup_mma_wait

from . import dqmma
from .dqmma import (_next_unit, _tile_epilogue, _unit, split_arrive, split_parts, stream_k_segment,
                    stream_k_segments, token_origin)

LOAD_REGS = gl.constexpr(24)  # the loader only issues TMA: its registers go to the MMA warps
# PARTS, what a launch does: the family launches ALL_PARTS; benchmarks/experiments/rsmma_anatomy.py times
# the kernel without a part (no MMA: the ring is only waited on and freed; no A copy: the wgmma reads the
# slot's stale activations) to see what holds it (NOTES.md row 63).
MMA = gl.constexpr(1)  # unpack each block into the fragment and issue its wgmma
A_COPY = gl.constexpr(2)  # TMA the activations' tile into the ring with the packed weights and scales
ALL_PARTS = MMA.value | A_COPY.value
# A slot's 128-byte column chunks as plain rows [BK/64 x BM, 64] (or [BK/64 x BM, 1, 64], indexed by row),
# which Gluon slices below the 8-row atom of the slot's swizzle (it refuses to slice the swizzled slot so):
# a launch of fewer tokens than BM copies its rows there (``a_rows_box``), and the TMA swizzles them by the
# shared address, as the slot holds them
CHUNK_ROWS = gl.NVMMASharedLayout(swizzle_byte_width=0, element_bitwidth=16, rank=2)


@gluon.jit
def _pair_ptx(word, select):
    """Byte t of a packed word (``select`` = t * 0x0101 + 0x4040 copies it to bytes 0 and 2): its two codes,
    k = 8j + 2t and 8j + 2t + 1, as the fp16 pair q - 8. LOP3 puts the low nibble under fp16's 1024 (0x6400:
    1024 + q) and the high one, still 16x scaled in bits 4-7, under 64 (0x5400, whose unit in the last
    place is 1/16: 64 + q); one HADD2 with an immediate pair subtracts 1032 and 72, exactly. (The former
    FMA by (1, 1/16) needed a register for its multiplier, which ptxas re-made with a MOV before every
    use at three CTAs an SM: 32 of the ~300 instructions a block.)"""
    return gl.inline_asm_elementwise(
        asm="""{
        .reg .b32 x, r, bias;
        mov.b32 bias, 0xD480E408;
        prmt.b32 x, $2, 0, $3;
        lop3.b32 r, x, 0x00F0000F, 0x54006400, 0xEA;
        add.rn.f16x2 r, r, bias;
        mov.b32 {$0, $1}, r;
        }""",
        constraints="=h,=h,r,r", args=[word, select], dtype=(gl.float16, gl.float16), is_pure=True, pack=1)


@gluon.jit
def fragment(p_tile, s_tile, WORDS: gl.constexpr, FRAG: gl.constexpr, SCALED: gl.constexpr):
    """W^T [BN, BK] of one block (its codes q - 8, times the scale row if SCALED) in the wgmma's register-
    operand layout FRAG, its rows in the paired order (fragment row 16w + 8h + g holds column 16w + 2g + h).
    ``WORDS`` spreads the words [BK/32 chunks, 4 words j, BN, 4 bytes t] as FRAG wants them (``word_layout``)."""
    KW: gl.constexpr = p_tile.type.shape[0]
    BN: gl.constexpr = p_tile.type.shape[1]
    C: gl.constexpr = KW // 4
    words = gl.expand_dims(p_tile.reshape([C, 4, BN]).load(gl.SliceLayout(3, WORDS)), 3)  # [C, j, BN, 1]
    t = gl.arange(0, 4, layout=gl.SliceLayout(0, gl.SliceLayout(0, gl.SliceLayout(0, WORDS))))
    select = gl.expand_dims(gl.expand_dims(gl.expand_dims(t * 0x0101 + 0x4040, 0), 0), 0)  # [1, 1, 1, t]
    words, select = gl.broadcast(words, select)
    lo, hi = _pair_ptx(words, select)  # [C, j, BN, t]
    w = gl.reshape(gl.permute(gl.join(lo, hi), [2, 0, 1, 3, 4]), [BN, C * 32])  # k = 32c + 8j + 2t + e
    if SCALED:
        scale = s_tile.reshape([BN]).load(gl.SliceLayout(1, w.type.layout))
        w = w * gl.expand_dims(scale, 1)
    # columns 16w + 2g + h to fragment rows 16w + 8h + g: a relabelling of what each thread holds
    w = gl.reshape(gl.permute(gl.reshape(w, [BN // 16, 8, 2, C * 32]), [0, 2, 1, 3]), [BN, C * 32])
    return gl.convert_layout(w, FRAG, assert_trivial=True)


@gluon.jit
def _frag32_codes_ptx(words):
    """The eight codes of each frag32 word as fp16 q - 8: pair i's nibbles (positions i, i + 4) under 0x6400
    for even i, under 0x5400 for odd i (still 16x in bits 4-7), then one HADD2 each, as ``_pair_ptx`` does
    for one pair: four pairs a word with one shift and no PRMT."""
    return gl.inline_asm_elementwise(
        asm="""{
        .reg .b32 r0, r1, r2, r3, w8, even, odd;
        mov.b32 even, 0xE408E408;
        mov.b32 odd, 0xD480D480;
        lop3.b32 r0, $8, 0x000F000F, 0x64006400, 0xEA;
        lop3.b32 r1, $8, 0x00F000F0, 0x54005400, 0xEA;
        shr.b32 w8, $8, 8;
        lop3.b32 r2, w8, 0x000F000F, 0x64006400, 0xEA;
        lop3.b32 r3, w8, 0x00F000F0, 0x54005400, 0xEA;
        add.rn.f16x2 r0, r0, even;
        add.rn.f16x2 r1, r1, odd;
        add.rn.f16x2 r2, r2, even;
        add.rn.f16x2 r3, r3, odd;
        mov.b32 {$0, $4}, r0;
        mov.b32 {$1, $5}, r1;
        mov.b32 {$2, $6}, r2;
        mov.b32 {$3, $7}, r3;
        }""",
        constraints="=h,=h,=h,=h,=h,=h,=h,=h,r", args=[words], dtype=(gl.float16,) * 8, is_pure=True, pack=1)


@gluon.jit
def frag32_fragment(p_tile, s_tile, WORDS: gl.constexpr, FRAG: gl.constexpr, SCALED: gl.constexpr):
    """``fragment`` for layout frag32: its words [BN/64 x BK/32 chunks, 256] (a slot's boxes), each thread's
    pair of columns' words adjacent, give the fragment's rows in the paired order directly."""
    BN: gl.constexpr = s_tile.type.shape[1]
    G: gl.constexpr = BN // 64
    C: gl.constexpr = p_tile.type.shape[0] // G
    q = _frag32_codes_ptx(gl.reshape(p_tile.load(WORDS), [G, C, 256]))  # 8 x [G, C, 256]
    z = gl.join(gl.join(gl.join(q[0], q[4]), gl.join(q[1], q[5])),
                gl.join(gl.join(q[2], q[6]), gl.join(q[3], q[7])))  # [G, C, 8p + 2t + h, e, i0, i1]
    z = gl.reshape(z, [G, C, 4, 8, 4, 2, 2, 2, 2])  # p = 8w + g: [G, C, w, g, t, h, e, i0, i1]
    z = gl.permute(z, [0, 2, 5, 3, 1, 8, 7, 4, 6])  # [G, w, h, g, C, i1, i0, t, e]
    w = gl.convert_layout(gl.reshape(z, [BN, C * 32]), FRAG, assert_trivial=True)  # registers only
    if SCALED:
        w = w * gl.expand_dims(_row_scales(s_tile, gl.SliceLayout(1, FRAG), True).to(gl.float16), 1)
    return w


@triton.constexpr_function
def _paired_rows_layout(warps):
    """[w, h, g] (column 16w + 2g + h of a permuted scale row) held as the accumulator holds its row
    16w + 8h + g: h in a register, g in lane bits 2-4 (lane bits 0-1, a quad, hold the same row), w the warp."""
    return gl.DistributedLinearLayout(
        reg_bases=[[0, 1, 0]], lane_bases=[[0, 0, 0], [0, 0, 0], [0, 0, 1], [0, 0, 2], [0, 0, 4]],
        warp_bases=[[1 << b, 0, 0] for b in range(warps.bit_length() - 1)], block_bases=[], shape=[warps, 2, 8])


@gluon.jit
def _row_scales(s_tile, ROWS: gl.constexpr, PAIRED_ROWS: gl.constexpr):
    """The block's scale row [BN] as fp32 in ROWS, the accumulator's row layout (paired order if PAIRED_ROWS:
    row 16w + 8h + g gets column 16w + 2g + h, read through a permuted view of the slot)."""
    BN: gl.constexpr = s_tile.type.shape[1]
    if PAIRED_ROWS:
        scale = s_tile.reshape([BN // 16, 8, 2]).permute((0, 2, 1)).load(_paired_rows_layout(BN // 16))
        scale = gl.convert_layout(gl.reshape(scale, [BN]), ROWS, assert_trivial=True)
    else:
        scale = s_tile.reshape([BN]).load(ROWS)
    return scale.to(gl.float32)


@gluon.jit
def _mma_block(i, first, acc, a_smem, p_smem, s_smem, ready, empty, FRAGMENT: gl.constexpr, WORDS: gl.constexpr,
               FRAG: gl.constexpr):
    """Block i of a segment that began at block ``first``: unpack its fragment, issue its wgmma, wait for
    block i-1's and free that slot."""
    STAGES: gl.constexpr = a_smem.type.shape[0]
    s = i % STAGES
    mbarrier.wait(ready.index(s), (i // STAGES) & 1)
    w = FRAGMENT(p_smem.index(s), s_smem.index(s), WORDS, FRAG, True)
    acc = warpgroup_mma(w, a_smem.index(s).permute((1, 0)), acc, is_async=True)
    acc = warpgroup_mma_wait(num_outstanding=1, deps=(acc,))
    mbarrier.arrive(empty.index((i + STAGES - 1) % STAGES), pred=i > first)
    return acc


@gluon.jit
def _mma_block_scaled_after(i, first, acc, part, prev, prev_scale, a_smem, p_smem, s_smem, ready, empty,
                            FRAGMENT: gl.constexpr, WORDS: gl.constexpr, FRAG: gl.constexpr,
                            PAIRED_ROWS: gl.constexpr):
    """Block i (of a segment from block ``first``) with the scale applied after the MMA: its codes' wgmma
    into a partial of its own (``part``, whose former block is folded already), then block i-1's partial
    ``prev``, once done, times its scale row into acc, and its slot freed. Returns acc, block i's partial
    (in flight) and its scale row, and ``prev`` as the wait gave it back: the next block's wgmma writes over
    it (passing the value from before the wait would keep it alive, and copying it ahead of the wait made
    ptxas serialize every wgmma, C7514)."""
    STAGES: gl.constexpr = a_smem.type.shape[0]
    s = i % STAGES
    mbarrier.wait(ready.index(s), (i // STAGES) & 1)
    w = FRAGMENT(p_smem.index(s), s_smem.index(s), WORDS, FRAG, False)
    scale = _row_scales(s_smem.index(s), gl.SliceLayout(1, acc.type.layout), PAIRED_ROWS)
    part = warpgroup_mma(w, a_smem.index(s).permute((1, 0)), part, use_acc=False, is_async=True)
    # block i-1's wgmma done (block i's still in flight: its partial is only read after the next wait)
    part, prev = warpgroup_mma_wait(num_outstanding=1, deps=(part, prev))
    acc = acc + prev * gl.expand_dims(prev_scale, 1)
    mbarrier.arrive(empty.index((i + STAGES - 1) % STAGES), pred=i > first)
    return acc, part, scale, prev


@gluon.jit
def _mma_segment(acc, begin, end, a_smem, p_smem, s_smem, ready, empty, FRAGMENT: gl.constexpr, WORDS: gl.constexpr,
                 FRAG: gl.constexpr, PARTS: gl.constexpr, SCALE_AFTER: gl.constexpr, PAIRED_ROWS: gl.constexpr):
    """acc += the CTA's ring blocks [begin, end) (one tile's), the last wgmma waited for and every slot freed."""
    STAGES: gl.constexpr = a_smem.type.shape[0]
    if (PARTS & MMA) == 0:  # anatomy: the ring alone
        for i in range(begin, end):
            mbarrier.wait(ready.index(i % STAGES), (i // STAGES) & 1)
            mbarrier.arrive(empty.index(i % STAGES))
        return acc
    n_blocks = end - begin
    if SCALE_AFTER:
        # fp32 partials a block, scaled once done: (q - 8) x A exact in the MMA, then one product by the
        # scale in fp32, instead of the HMUL2 a weight pair of the scaled fragment
        BN: gl.constexpr = acc.type.shape[0]
        BM: gl.constexpr = acc.type.shape[1]
        ACC: gl.constexpr = acc.type.layout
        part_a = gl.zeros([BN, BM], gl.float32, ACC)
        part_b = gl.zeros([BN, BM], gl.float32, ACC)
        scale_a = gl.zeros([BN], gl.float32, gl.SliceLayout(1, ACC))
        scale_b = gl.zeros([BN], gl.float32, gl.SliceLayout(1, ACC))
        for j in range(n_blocks // 2):
            i = begin + 2 * j
            acc, part_a, scale_a, part_b = _mma_block_scaled_after(i, begin, acc, part_a, part_b, scale_b, a_smem,
                                                                   p_smem, s_smem, ready, empty, FRAGMENT, WORDS,
                                                                   FRAG, PAIRED_ROWS)
            acc, part_b, scale_b, part_a = _mma_block_scaled_after(i + 1, begin, acc, part_b, part_a, scale_a,
                                                                   a_smem, p_smem, s_smem, ready, empty, FRAGMENT,
                                                                   WORDS, FRAG, PAIRED_ROWS)
        # the last block's partial: waited for where it was issued (a copy of one in flight serializes, C7514)
        if n_blocks % 2 == 1:
            acc, part_a, scale_a, part_b = _mma_block_scaled_after(end - 1, begin, acc, part_a, part_b, scale_b,
                                                                   a_smem, p_smem, s_smem, ready, empty, FRAGMENT,
                                                                   WORDS, FRAG, PAIRED_ROWS)
            part_a = warpgroup_mma_wait(num_outstanding=0, deps=(part_a,))
            acc = acc + part_a * gl.expand_dims(scale_a, 1)
        else:
            part_b = warpgroup_mma_wait(num_outstanding=0, deps=(part_b,))
            acc = acc + part_b * gl.expand_dims(scale_b, 1)
    else:
        # two blocks a trip: each block's fragment gets registers of its own, so the next block's unpack never
        # writes the registers an in-flight wgmma reads (one shared set made ptxas serialize every wgmma, C7515)
        for j in range(n_blocks // 2):
            acc = _mma_block(begin + 2 * j, begin, acc, a_smem, p_smem, s_smem, ready, empty, FRAGMENT, WORDS, FRAG)
            acc = _mma_block(begin + 2 * j + 1, begin, acc, a_smem, p_smem, s_smem, ready, empty, FRAGMENT, WORDS,
                             FRAG)
        if n_blocks % 2 == 1:
            acc = _mma_block(end - 1, begin, acc, a_smem, p_smem, s_smem, ready, empty, FRAGMENT, WORDS, FRAG)
        acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc,))
    mbarrier.arrive(empty.index((end - 1) % STAGES), pred=end > begin)  # the segment's last slot
    return acc


@gluon.jit
def _mma_partition(BM: gl.constexpr, BN: gl.constexpr, num_warps: gl.constexpr, FRAGMENT: gl.constexpr,
                   WORDS: gl.constexpr, PARTS: gl.constexpr, SCALE_AFTER: gl.constexpr, PAIRED_ROWS: gl.constexpr,
                   SPLIT_K: gl.constexpr, MAX_PARTS: gl.constexpr, a_smem, p_smem, s_smem, ready, empty, u0, n_units,
                   blocks, tiles_n, units, ctas, c_ptr, ws_ptr, lock_ptr, M, N, stride_cm, stride_cn):
    ACC: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[num_warps, 1],
                                                  instr_shape=[16, BM, 16])
    FRAG: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=ACC, k_width=2)
    acc = gl.zeros([BN, BM], gl.float32, ACC)
    if SPLIT_K == 0:
        # stream-K: the CTA's units cross tile boundaries; one loop per tile segment, each written as it
        # ends, while the loader streams the next segment's blocks (dqmma's form, row 49: a branch at the
        # segment's end inside one block loop made the compiler wait for every wgmma)
        for seg in range(stream_k_segments(u0, n_units, blocks)):
            begin, end = stream_k_segment(seg, u0, n_units, blocks)
            acc = _mma_segment(gl.zeros([BN, BM], gl.float32, ACC), begin, end, a_smem, p_smem, s_smem, ready, empty,
                               FRAGMENT, WORDS, FRAG, PARTS, SCALE_AFTER, PAIRED_ROWS)
            _tile_epilogue(acc, u0 + end - 1, c_ptr, ws_ptr, lock_ptr, M, N, stride_cm, stride_cn, blocks, tiles_n,
                           units, ctas, SPLIT_K, MAX_PARTS, True, PAIRED_ROWS)
    else:  # one segment, written after the partitions join
        acc = _mma_segment(acc, 0, n_units, a_smem, p_smem, s_smem, ready, empty, FRAGMENT, WORDS, FRAG, PARTS,
                           SCALE_AFTER, PAIRED_ROWS)
    return (acc,)


@gluon.jit
def _load_partition(a_desc, p_desc, s_desc, a_smem, p_smem, s_smem, ready, empty, u0, n_units, blocks, tiles_n,
                    group, PARTS: gl.constexpr, A_TAIL: gl.constexpr):
    """TMA the CTA's units (a block of one tile each, tiles in _unit's order) into the ring, in order.
    A_TAIL (``a_tail``): A's box has fewer rows than M, so a second box of A's last rows follows it."""
    STAGES: gl.constexpr = a_smem.type.shape[0]
    BM: gl.constexpr = a_smem.type.shape[1]
    BK: gl.constexpr = a_smem.type.shape[2]
    BN: gl.constexpr = s_smem.type.shape[2]
    BASE: gl.constexpr = p_smem.type.shape[1] == BK // 8
    P_BYTES: gl.constexpr = p_desc.block_type.nbytes * (1 if BASE else BN // 64)
    A_ROWS: gl.constexpr = a_desc.block_type.shape[0]  # BM, or M's last power of two where M < BM (``a_rows_box``)
    A_BYTES: gl.constexpr = a_desc.block_type.nbytes * (BK // 64 if A_ROWS < BM else 1)
    A_BOXES: gl.constexpr = 2 if A_TAIL else 1
    REST: gl.constexpr = P_BYTES + s_desc.block_type.nbytes
    M = a_desc.shape[0]
    pid_n, pid_m, kb = _unit(u0, blocks, tiles_n)
    for i in range(n_units):
        s = i % STAGES
        mbarrier.wait(empty.index(s), ((i // STAGES) & 1) ^ 1)  # a fresh barrier counts as freed
        bar = ready.index(s)
        k = kb * BK
        if PARTS & A_COPY:
            if A_ROWS < BM:  # one token tile of fewer tokens: their rows alone, in each 128-byte column chunk
                # rows 0..A_ROWS-1, then with A_TAIL A's last A_ROWS rows at rows M - A_ROWS..M-1 (the same
                # values twice where they overlap). A constexpr, not a predicate on M: the predicated copy
                # and expect cost M=1, 2, 4 1-3% where they issued nothing (NOTES.md row 109)
                mbarrier.expect(bar, A_BOXES * A_BYTES + REST)
                chunks = a_smem.index(s)._reinterpret(gl.float16, [BK // 64 * BM, 64], CHUNK_ROWS)
                rows = a_smem.index(s)._reinterpret(gl.float16, [BK // 64 * BM, 1, 64], CHUNK_ROWS)
                for c in gl.static_range(BK // 64):
                    tma.async_copy_global_to_shared(a_desc, [0, k + 64 * c], bar, chunks.slice(c * BM, A_ROWS))
                    if A_TAIL:  # the TMA writes the box from the address of the row it is given (Gluon slices
                        # only at constant multiples of a slice's length; `index` takes M's)
                        tma.async_copy_global_to_shared(a_desc, [M - A_ROWS, k + 64 * c], bar,
                                                        rows.index(c * BM + M - A_ROWS))
            else:
                mbarrier.expect(bar, A_BYTES + REST)
                # a last tile that M fills in part starts at M - BM where it can (token_origin): no rows past A
                tma.async_copy_global_to_shared(a_desc, [token_origin(pid_m, BM, M), k], bar, a_smem.index(s))
        else:
            mbarrier.expect(bar, P_BYTES + s_desc.block_type.nbytes)
        if BASE:  # the base layout's box [BK/8, BN]
            tma.async_copy_global_to_shared(p_desc, [k // 8, pid_n * BN], bar, p_smem.index(s))
        else:  # a chunk-major layout's rows [K/32, 4N]: a box of whole chunks [BK/32, 256] per 64 columns
            for j in gl.static_range(BN // 64):
                tma.async_copy_global_to_shared(p_desc, [k // 32, (pid_n * BN + 64 * j) * 4], bar,
                                                p_smem.index(s).slice(j * (BK // 32), BK // 32))
        tma.async_copy_global_to_shared(s_desc, [k // group, pid_n * BN], bar, s_smem.index(s))
        pid_n, pid_m, kb = _next_unit(pid_n, pid_m, kb, blocks, tiles_n)


@gluon.jit
def rsmma_kernel(a_desc, p_desc, s_desc, c_ptr, ws_ptr, lock_ptr, M, N, K, stride_cm, stride_cn,
                 GROUP: gl.constexpr, BM: gl.constexpr, BK: gl.constexpr, SPLIT_K: gl.constexpr,
                 STAGES: gl.constexpr, WORDS: gl.constexpr, FRAGMENT: gl.constexpr, PAIRED_ROWS: gl.constexpr,
                 PARTS: gl.constexpr, SCALE_AFTER: gl.constexpr, num_warps: gl.constexpr,
                 MAX_PARTS: gl.constexpr = 1, STAGED_C: gl.constexpr = True, SKEW: gl.constexpr = 0,
                 OWNER_FIRST: gl.constexpr = False, STAGED_SPLIT: gl.constexpr = False,
                 A_TAIL: gl.constexpr = False):
    """FRAGMENT (``fragment`` for the base layout) builds a block's register operand from the packed box
    ``p_desc`` loads, [BK/8, BN] words of the base layout or BN/64 boxes [BK/32, 256] of frag32's;
    PAIRED_ROWS says its rows come in the paired order. PARTS (the MMA and A_COPY bits) is ALL_PARTS but
    in the anatomy; SCALE_AFTER scales each block's fp32 partial instead of its fragment. SPLIT_K: that
    many CTAs along K per tile (grid: column tiles, splits, token tiles), or 0, stream-K (grid: CTAs that
    split all tiles' blocks evenly; MAX_PARTS, the most of them one tile meets, ``space.gluon_grid``).
    STAGED_C (one split): C's tile leaves through the drained ring in 16-byte rows (``_store_tile_staged``).
    SKEW > 0 (SPLIT_K > 1): split r >= 1 takes blocks // SPLIT_K - SKEW blocks, the last ones, and split 0
    the rest, so that the others end (and store their partials) before it; OWNER_FIRST: split 0 then sums
    their partials with its own from registers when all are in (``dqmma.store_tile``). STAGED_SPLIT (SPLIT_K
    > 1, the ring holding an fp32 tile): the reduction's last part reads the others' partials through the
    drained ring by async copies (``_reduce_staged``) and stores C as STAGED_C does. A_TAIL: ``a_tail``
    of the launch (A's box, ``a_rows_box``, holds fewer rows than M)."""
    BN: gl.constexpr = 16 * num_warps
    gl.static_assert(GROUP % BK == 0, "a block lies in one scale group")
    blocks = K // BK
    tiles_n = gl.cdiv(N, BN)
    units = blocks * tiles_n * gl.cdiv(M, BM)
    if SPLIT_K == 0:
        ctas = gl.num_programs(0)
        u0 = gl.program_id(0) * units // ctas
        n_units = (gl.program_id(0) + 1) * units // ctas - u0
    elif SKEW > 0:  # split 0 (the owner) SKEW blocks longer than an even share from each other split
        ctas = 1
        helper = blocks // SPLIT_K - SKEW
        owner = blocks - (SPLIT_K - 1) * helper
        rank = gl.program_id(1)
        first_block = (rank > 0) * (owner + (rank - 1) * helper)
        u0 = (gl.program_id(2) * tiles_n + gl.program_id(0)) * blocks + first_block
        n_units = owner + (rank > 0) * (helper - owner)
    else:  # one tile per CTA, its blocks split SPLIT_K ways (an empty split adds nothing: the reduction
        # counts the others)
        ctas = 1
        per_split = (blocks + SPLIT_K - 1) // SPLIT_K
        first_block = gl.program_id(1) * per_split
        u0 = (gl.program_id(2) * tiles_n + gl.program_id(0)) * blocks + first_block
        n_units = gl.maximum(gl.minimum(blocks - first_block, per_split), 0)
    a_smem = gl.allocate_shared_memory(gl.float16, [STAGES, BM, BK], a_desc.layout)
    if p_desc.block_type.shape[0] == BK // 8:  # the base layout
        p_smem = gl.allocate_shared_memory(gl.int32, [STAGES, BK // 8, BN], p_desc.layout)
    else:  # a chunk-major one (frag32's): 64 columns' chunks a box, [BN/64 x BK/32, 256] a slot
        p_smem = gl.allocate_shared_memory(gl.int32, [STAGES, BN // 64 * (BK // 32), 256], p_desc.layout)
    s_smem = gl.allocate_shared_memory(gl.float16, [STAGES, 1, BN], s_desc.layout)
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for j in gl.static_range(STAGES):
        mbarrier.init(ready.index(j), count=1)
        mbarrier.init(empty.index(j), count=1)
    (acc,) = gl.warp_specialize([
        (_mma_partition, (BM, BN, num_warps, FRAGMENT, WORDS, PARTS, SCALE_AFTER, PAIRED_ROWS, SPLIT_K, MAX_PARTS,
                          a_smem, p_smem, s_smem, ready, empty, u0, n_units, blocks, tiles_n, units, ctas, c_ptr,
                          ws_ptr, lock_ptr, M, N, stride_cm, stride_cn)),
        (_load_partition, (a_desc, p_desc, s_desc, a_smem, p_smem, s_smem, ready, empty, u0, n_units, blocks, tiles_n,
                           GROUP, PARTS, A_TAIL)),
    ], [1], [LOAD_REGS])
    if SPLIT_K == 1 and STAGED_C and STAGES * BK >= BN:  # the whole tile here, the ring drained: staged
        pid_n, pid_m, _ = _unit(u0, blocks, tiles_n)
        lo = pid_m * BM  # C from the tile's own first token: a shifted box's rows below it are masked
        _store_tile_staged(acc, a_smem, c_ptr + lo * stride_cm, token_origin(pid_m, BM, M) - lo, pid_n * BN, M - lo,
                           N, stride_cm, stride_cn, PAIRED_ROWS)
    elif SPLIT_K > 1 and STAGED_SPLIT:  # the split reduction's reads through the drained ring
        gl.static_assert(STAGES * BK >= 2 * BN, "the ring holds one fp32 partial of the tile")
        if n_units > 0:
            pid_n, pid_m, _ = _unit(u0, blocks, tiles_n)
            parts = split_parts(blocks, SPLIT_K, SKEW)
            lo = pid_m * BM
            _reduce_staged(acc, a_smem, c_ptr + lo * stride_cm, ws_ptr, lock_ptr, u0 // blocks, gl.program_id(1),
                           parts, token_origin(pid_m, BM, M) - lo, pid_n * BN, M - lo, N, stride_cm, stride_cn,
                           MAX_PARTS, PAIRED_ROWS, OWNER_FIRST)
    elif SPLIT_K != 0:
        if n_units > 0:  # C^T's tile [BN, BM] into C [M, N]
            _tile_epilogue(acc, u0 + n_units - 1, c_ptr, ws_ptr, lock_ptr, M, N, stride_cm, stride_cn, blocks,
                           tiles_n, units, ctas, SPLIT_K, MAX_PARTS, True, PAIRED_ROWS, SKEW, OWNER_FIRST)


@triton.constexpr_function
def _copy_layout(rows, cols, warps):
    """[rows, cols] fp32 spread 4 contiguous a thread (16-byte async copies), a row's threads neighbours."""
    across = min(32, cols // 4)
    return gl.BlockedLayout([1, 4], [32 // across, across], [warps, 1], [1, 0])


@triton.constexpr_function
def _pass_slots(parts, fit):
    """The slots a pass of the split reduction brings into the ring: as many of the ``parts`` as ``fit``,
    rounded down to a power of two (one shared-memory view of them; Triton's layouts need one)."""
    n = min(parts, fit)
    return 1 << (n.bit_length() - 1)


@triton.constexpr_function
def _partials_layout(cols):
    """Shared memory for fp32 partials [slots x BN, BM] (rows of BM): 16-byte units swizzled across 8 rows, so
    that the accumulator's 8-byte pieces of 8 rows read back from different banks."""
    return gl.SwizzledSharedLayout(vec=4, per_phase=1, max_phase=min(8, cols // 4), order=[1, 0])


@gluon.jit
def _add_slots(total, slots, ws_tile, parts, FIRST: gl.constexpr, MAX_PARTS: gl.constexpr):
    """total + the tile's slots FIRST .. parts - 1 in rank order, brought into ``slots`` (the ring, room for
    GROUP partials) by async copies, GROUP at a time. A slot past ``parts`` is not read and adds +0.0,
    which changes nothing (the sum is never -0.0: it starts at +0.0)."""
    BN: gl.constexpr = total.type.shape[0]
    BM: gl.constexpr = total.type.shape[1]
    SIZE: gl.constexpr = BN * BM
    WARPS: gl.constexpr = BN // 16
    GROUP: gl.constexpr = slots.type.shape[0] // BN
    # a copy instruction's rows at a time: 4 copies a thread, so that their addresses stay few
    CHUNK: gl.constexpr = min(BN, 16 * 32 * WARPS // BM)
    COPY: gl.constexpr = _copy_layout(CHUNK, BM, WARPS)
    crow = gl.arange(0, CHUNK, layout=gl.SliceLayout(1, COPY))
    ccol = gl.arange(0, BM, layout=gl.SliceLayout(0, COPY))
    chunk = gl.expand_dims(crow, 1) * BM + gl.expand_dims(ccol, 0)
    for first in gl.static_range(FIRST, MAX_PARTS, GROUP):
        for j in gl.static_range(GROUP):
            if first + j < MAX_PARTS:
                for c in gl.static_range(BN // CHUNK):
                    async_copy.async_copy_global_to_shared(
                        slots.slice(j * BN + c * CHUNK, CHUNK), ws_tile + (first + j) * SIZE + c * CHUNK * BM + chunk,
                        mask=first + j < parts, cache_modifier=".cg")
        async_copy.commit_group()
        async_copy.wait_group(0)
        gl.thread_barrier()  # every thread's copies have landed
        for j in gl.static_range(GROUP):
            if first + j < MAX_PARTS:
                total += slots.slice(j * BN, BN).load(total.type.layout)
        gl.thread_barrier()  # read before the next pass (or C's staging) writes over them
    return total


@gluon.jit
def _reduce_staged(acc, ring, c_ptr, ws_ptr, lock_ptr, tile, rank, parts, row0, col0, M, N, stride_cm, stride_cn,
                   MAX_PARTS: gl.constexpr, PAIRED_ROWS: gl.constexpr, OWNER_FIRST: gl.constexpr):
    """``dqmma.store_tile``'s split reduction for C^T's tile acc [BN, BM] with the ring drained: the part
    that sums (``dqmma.split_arrive``: the last to arrive, or with OWNER_FIRST rank 0 when it finds the
    others all in) adds the slots in rank order, rank 0's own term from registers, and stores C through
    the ring (``_store_tile_staged``). The sum's order and terms are the register reduction's, so the bits
    are the same. What differs is how the slots come back: async copies 16 bytes a thread into the ring,
    a group of slots in flight at once, instead of loads into the accumulator's layout, of which a thread
    holds only a few in flight (NOTES.md row 80 (b): 128 KB partials of 256 x 128 tiles read at ~10 GB/s
    an SM); row 84: 11-31% faster at 256 x 128, 0.5-4% at 7 of the 8 M <= 64 split picks timed."""
    BN: gl.constexpr = acc.type.shape[0]
    BM: gl.constexpr = acc.type.shape[1]
    SIZE: gl.constexpr = BN * BM
    RING_FLOATS: gl.constexpr = ring.type.shape[0] * ring.type.shape[1] * ring.type.shape[2] // 2
    GROUP: gl.constexpr = _pass_slots(MAX_PARTS, RING_FLOATS // SIZE)  # slots a pass brings in
    slots = ring._reinterpret(gl.float32, [GROUP * BN, BM], _partials_layout(BM))  # slot j: rows j BN ..
    lock = lock_ptr + tile
    ws_tile = ws_ptr + tile * (MAX_PARTS * SIZE)  # a scalar: offsets are added where used (row 82's spills)
    if split_arrive(acc, ws_tile, lock, rank, parts, OWNER_FIRST):
        if rank == 0:  # its own partial is the sum's first term: added from registers, in place
            total = _add_slots(gl.zeros_like(acc) + acc, slots, ws_tile, parts, 1, MAX_PARTS)
        else:  # its own slot read back with the others (keeping acc beside the sum would spill at 256 x 128)
            total = _add_slots(gl.zeros_like(acc), slots, ws_tile, parts, 0, MAX_PARTS)
        _store_tile_staged(total, ring, c_ptr, row0, col0, M, N, stride_cm, stride_cn, PAIRED_ROWS)
        gl.atomic_xchg(lock, 0, sem="relaxed")


@gluon.jit
def _store_tile_staged(acc, ring, c_ptr, row0, col0, M, N, stride_cm, stride_cn, PAIRED_ROWS: gl.constexpr):
    """C's tile [BM, BN] from acc, C^T's [BN, BM] (rows in the paired order if PAIRED_ROWS), through the
    drained ring: fp16 into shared memory transposed, then read back 8 columns a thread, so that each
    thread stores 16 bytes of a C row. Stored straight from the accumulator's layout, every value is a
    2-byte store of its own with its own address and mask (128 a thread at 256 x 128): ~15% of a
    one-split CTA's time at M=1024 (NOTES.md row 80's profile)."""
    BN: gl.constexpr = acc.type.shape[0]
    BM: gl.constexpr = acc.type.shape[1]
    WARPS: gl.constexpr = BN // 16  # rsmma's BN is 16 a warp
    c = acc.to(gl.float16)
    if PAIRED_ROWS:  # row 16w + 8h + g holds column 16w + 2g + h: relabel the registers in column order
        c = gl.reshape(gl.permute(gl.reshape(c, [BN // 16, 2, 8, BM]), (0, 2, 1, 3)), [BN, BM])
    TILE: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BM, BN], gl.float16)
    c_smem = ring._reinterpret(gl.float16, [BM, BN], TILE)
    c_smem.permute((1, 0)).store(c)
    gl.thread_barrier()  # the whole tile is in shared memory before any thread reads it back
    # 16 rows a pass: at BM=8 two threads store the same 16 bytes (harmless; 8-byte rows would end the
    # duplicates but not the loads' and stores' one width, which the offline SASS checks count)
    ROWS: gl.constexpr = gl.BlockedLayout([1, 8], [32 * 8 // BN, BN // 8], [WARPS, 1], [1, 0])
    tile = c_smem.load(ROWS)
    rows = gl.arange(0, BM, layout=gl.SliceLayout(1, ROWS))
    cols = gl.arange(0, BN, layout=gl.SliceLayout(0, ROWS))
    row = gl.expand_dims(row0 + rows, 1)
    col = gl.expand_dims(col0 + cols, 0)
    gl.store(c_ptr + row * stride_cm + col * stride_cn, tile, mask=(row >= 0) & (row < M) & (col < N))


def word_layout(BK: int, num_warps: int):
    """Where the MMA threads hold the packed words [BK/32 chunks, 4 words j, BN, 4 bytes t]: lane 4g + t
    as the fragment's quads (g -> the column pair 2g, 2g + 1, t -> the byte), the pair's second column in
    a register, words and chunks in registers, 16 columns a warp. The load takes the slice without t."""
    chunks = [[1 << b, 0, 0, 0] for b in range((BK // 32).bit_length() - 1)]
    return gl.DistributedLinearLayout(
        reg_bases=[[0, 0, 1, 0], [0, 1, 0, 0], [0, 2, 0, 0]] + chunks,
        lane_bases=[[0, 0, 0, 1], [0, 0, 0, 2], [0, 0, 2, 0], [0, 0, 4, 0], [0, 0, 8, 0]],
        warp_bases=[[0, 0, 16 << b, 0] for b in range(num_warps.bit_length() - 1)],
        block_bases=[], shape=[BK // 32, 4, 16 * num_warps, 4])


def frag32_word_layout(BK: int, num_warps: int):
    """Where the MMA threads hold a slot's frag32 words [BN/64 x BK/32 chunks, 256]: the pair's two words
    (h) in a register (one 8-byte load), lane 4g + t as the fragment's quads, warp w of a group 64 words
    on, then the group's box, chunks in registers."""
    C = BK // 32
    chunks = [[1 << b, 0] for b in range(C.bit_length() - 1)]
    groups = [[C << b, 0] for b in range((num_warps // 4).bit_length() - 1)]
    return gl.DistributedLinearLayout(reg_bases=[[0, 1]] + chunks,
                                      lane_bases=[[0, 2], [0, 4], [0, 8], [0, 16], [0, 32]],
                                      warp_bases=[[0, 64], [0, 128]] + groups, block_bases=[],
                                      shape=[num_warps // 4 * C, 256])


# token tiles whose launches below BM take one box of M's next power of two (``a_rows_box``): on a 16-token
# tile the two boxes ran 4096x22016 M=9 at 18.86 against one box's 18.12 us, the one key of fifteen where
# they lost (NOTES.md row 105 (a)); they won 2.6-3.3 us at the first M of 32- and 64-token tiles
ONE_BOX_TILES = (16,)


def a_rows_box(a_desc):
    """A's TMA descriptor ``a_desc`` (boxes [BM, BK], the slot's layout) as a launch of M < BM tokens (one
    token tile) reads A: boxes [R, 64], R being M's last power of two, one per 128-byte column chunk of the
    slot and, where M > R, a second of A's last R rows (``_load_partition``): the TMA zero-fills a box's
    rows past A slowly (M=1 on 4096x22016 took 17.23 against 16.08 us, NOTES.md row 104); the slot's other
    rows keep what they held, their tokens' columns masked at C. On ``ONE_BOX_TILES`` R is M's next power
    of two instead (one box, rows past M zero-filled). ``a_desc`` itself where R >= BM."""
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

    rows = a_box_rows(a_desc.shape[0], a_desc.block_shape[0])
    if rows >= a_desc.block_shape[0]:
        return a_desc
    return TensorDescriptor.from_tensor(a_desc.base, [rows, 64], a_desc.layout)


def a_box_rows(M: int, BM: int) -> int:
    """Rows R of A's box in a launch of M tokens on BM-token tiles (``a_rows_box``): R >= BM means the
    whole [BM, BK] box."""
    return 1 << ((M - 1).bit_length() if BM in ONE_BOX_TILES else M.bit_length() - 1)


def a_tail(M: int, BM: int) -> bool:
    """Whether the loader follows A's box with a second one of A's last rows (the kernel's A_TAIL): its box
    (``a_rows_box``) holds fewer rows than M. Never where M is a power of two, or on ``ONE_BOX_TILES``."""
    rows = a_box_rows(M, BM)
    return rows < BM and M > rows


def a_descriptor(a, BM: int, BK: int, row_boxes: bool = True):
    """A's TMA descriptor, boxes [BM, BK] in the slot's layout (as ``a_rows_box`` makes it, unless
    ``row_boxes`` is False: twotile's loader takes whole boxes at any M)."""
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

    a_desc = TensorDescriptor.from_tensor(a, [BM, BK], dqmma.a_shared_layout(BM, BK))
    return a_rows_box(a_desc) if row_boxes else a_desc


def descriptors(a, packed, scales, BM: int, BN: int, BK: int):
    """dqmma's TMA descriptors of A, the base layout's packed W [BK/8, BN] and the scales [1, BN], A's as
    ``a_rows_box`` makes it."""
    a_desc, p_desc, s_desc = dqmma.descriptors(a, packed, scales, BM, BN, BK)
    return a_rows_box(a_desc), p_desc, s_desc


def frag32_descriptors(a, packed_f, scales, BM: int, BN: int, BK: int, row_boxes: bool = True):
    """TMA descriptors of A [BM, BK] (``a_descriptor``), frag32 rows [K/32, 4N] in boxes [BK/32, 256] (64
    columns' chunks, BN/64 a block) and the scales [1, BN]."""
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

    _, p_layout, s_layout = dqmma.shared_layouts(BM, BN, BK)
    return (a_descriptor(a, BM, BK, row_boxes),
            TensorDescriptor.from_tensor(packed_f, [BK // 32, 256], p_layout),
            TensorDescriptor.from_tensor(scales, [1, BN], s_layout))
