"""The dqmma family: a warp-specialized W4A16 tensor-core GEMM in Gluon, for M = 64..256 on Hopper.

Triton's `tl.dot` waits for every wgmma before the threads unpack the next block of weights (NOTES.md
rows 15, 18, 35), and a Gluon kernel that runs one schedule in every warp still steps serially
(copy wait, unpack, barrier, MMA issue: rows 39-41). Here each kind of work has warps of its own,
handing buffers over through mbarriers:

    load (1 warp):     wait until ring slot s is free -> TMA A [BM, BK], packed W [BK/8, BN] and the
                       block's scale row [1, BN] into it
    unpack (4 warps):  wait for slot s -> packed W and scales to registers -> free the slot's W half
                       -> unpack and scale (PTX) -> wait for W buffer b -> store fp16 W -> fence -> ready
    MMA (BM/16 warps): wait for slot s and W buffer b -> wgmma async -> wait for the previous one ->
                       free its A slot and W buffer; then the epilogue

so the loader keeps STAGES blocks in flight, the unpack runs a buffer ahead of the MMA, and the tensor
cores start as soon as both halves of a block are ready. TMA zero-fills rows past M and columns past N.
The scale row travels with its block: loaded by the unpack warps from global memory, its L2 round trip
gated every block (row 45: 45.96 -> 34.84 us at 4096x11008 M=128 with that and BK=128).

Tile: acc [BM, BN] = A [BM, BK] x W [BK, BN], BM = 16 x num_warps (64: one warp group, 128: two);
BN = 64, 128 or 256 (the wgmma N); BK = 64 or 128 (64 at BN=256: an unpack thread holds BK/2 words),
dividing the group size (one scale row per block, folded into the fp16 weights: exactly dequantize's
fp16 product). The work is a line of units, one BK block of one tile each, a tile's blocks consecutive.
A CTA takes one contiguous range of it: with SPLIT_K >= 1 one tile's K range split SPLIT_K ways; with
SPLIT_K = 0 (stream-K) a grid of one CTA per SM splits the whole line evenly, so no SM idles for a wave
of too few tiles (row 49: 4096x22016 at M=64..256 4-22% faster; level at 86 tiles of 4096x11008, M=128).
Each tile's segment ends in fp16 when one CTA did the whole tile, else in the Triton families'
deterministic reduction (fp32 partials in slots by the contributors' order, summed in that order by the
last to arrive); stream-K's MMA warps write each segment as it ends, a split-K CTA after the join.
TMA needs A [M, K] with unit column stride and 16-byte aligned base and rows (the launcher copies A
otherwise), packed and scales likewise (N a multiple of 8: the scales' rows are 2N bytes); C may have
any strides. MMA_LOADS (the family sets it at BN=256): no loader partition, the MMA warps issue the
TMA into the slot of the block whose MMA just finished, once the unpack has read its packed half; the
CTA is then 4 warps smaller (the loader is padded to a warp group), so 168 registers a thread fit the SM
at launch, which N=256's wgmma needs (ptxas holds every partition to the launch's count; row 47).
PARTS is timing anatomy only (benchmarks/experiments/gluon_ws.py): 1 the unpack without
the MMA, 2 the MMA without the unpack; wrong results.

Gluon has no CPU interpreter: the family is offered only on an sm_90 GPU (`space.DeviceLimits`); CI
compiles it for sm_90 and checks its schedule, the GPU tests check its results.
"""
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (fence_async_shared, mbarrier, tma, warpgroup_mma,
                                                              warpgroup_mma_wait)

LOAD_WARPS = gl.constexpr(1)
LOAD_REGS = gl.constexpr(24)  # the loader only issues TMA: its registers go to the MMA warps
UNPACK_WARPS = 4  # 8 were no faster at M=64 and do not launch beside BM=128 (row 45)
UNPACK_REGS = 128
W_BUFFERS = 2  # fp16 W buffers between the unpack and the MMA (row 45: 2 at BK=128 beat 3 at BK=64)


@gluon.jit
def _nibbles_ptx(packed):
    """The eight nibble planes of ``packed`` as fp16 q - 8, two neighbouring words per PTX block.

    The same PTX as swapab's ``_nibble_planes_ptx`` (copied: a Gluon function cannot call a
    ``triton.jit`` one, and moving the text out of swapab.py would change the Triton families' kernel
    hash, which every stored trial of theirs is keyed by). Words n and n+1 of one row give plane j's
    fp16 pair (n, n+1), the pair the register layout holds side by side along n.
    """
    return gl.inline_asm_elementwise(
        asm="""{
        .reg .b32 lo, hi, los, his, c1032, c16, c72;
        prmt.b32 lo, $8, $9, 0x5410;
        prmt.b32 hi, $8, $9, 0x7632;
        shr.b32 los, lo, 8;
        shr.b32 his, hi, 8;
        mov.b32 c1032, 0x64086408;
        mov.b32 c16, 0x2C002C00;
        mov.b32 c72, 0xD480D480;
        lop3.b32 $0, lo, 0x000F000F, 0x64006400, 0xEA;
        lop3.b32 $1, lo, 0x00F000F0, 0x64006400, 0xEA;
        lop3.b32 $2, los, 0x000F000F, 0x64006400, 0xEA;
        lop3.b32 $3, los, 0x00F000F0, 0x64006400, 0xEA;
        lop3.b32 $4, hi, 0x000F000F, 0x64006400, 0xEA;
        lop3.b32 $5, hi, 0x00F000F0, 0x64006400, 0xEA;
        lop3.b32 $6, his, 0x000F000F, 0x64006400, 0xEA;
        lop3.b32 $7, his, 0x00F000F0, 0x64006400, 0xEA;
        sub.f16x2 $0, $0, c1032;
        fma.rn.f16x2 $1, $1, c16, c72;
        sub.f16x2 $2, $2, c1032;
        fma.rn.f16x2 $3, $3, c16, c72;
        sub.f16x2 $4, $4, c1032;
        fma.rn.f16x2 $5, $5, c16, c72;
        sub.f16x2 $6, $6, c1032;
        fma.rn.f16x2 $7, $7, c16, c72;
        }""",
        constraints="=r,=r,=r,=r,=r,=r,=r,=r,r,r", args=[packed],
        dtype=(gl.float16,) * 8, is_pure=True, pack=2)


@gluon.jit
def _unpack_scaled_ptx(packed, s):
    """As ``_unpack_scaled``, the planes from ``_nibbles_ptx`` joined into k order (j = j0 + 2 j1 + 4 j2)."""
    q = _nibbles_ptx(packed)
    s2 = gl.expand_dims(s, 0)
    w = gl.join(gl.join(gl.join(q[0] * s2, q[1] * s2), gl.join(q[2] * s2, q[3] * s2)),
                gl.join(gl.join(q[4] * s2, q[5] * s2), gl.join(q[6] * s2, q[7] * s2)))  # [BK8, BN, j0, j1, j2]
    w = gl.permute(w, [0, 4, 3, 2, 1])  # [BK8, j2, j1, j0, BN]
    return gl.reshape(w, [w.shape[0] * 8, w.shape[4]])


@gluon.jit
def _unit(u, blocks, tiles_n):
    """Work unit u (one BK block of one output tile; a tile's blocks are consecutive units, and tiles of
    one row of A are neighbours) as (pid_n, pid_m, its block along K)."""
    t = u // blocks
    return t % tiles_n, t // tiles_n, u - t * blocks


@gluon.jit
def _next_unit(pid_n, pid_m, kb, blocks, tiles_n):
    """The unit after (pid_n, pid_m, kb), without a division: the issuing warps walk their units in order
    (decoding each unit by division cost 2-5% at M=64..256, the MMA_LOADS form most; row 49)."""
    kb += 1
    tile_done = (kb == blocks).to(gl.int32)
    kb -= tile_done * blocks
    pid_n += tile_done
    row_done = (pid_n == tiles_n).to(gl.int32)
    return pid_n - row_done * tiles_n, pid_m + row_done, kb


@gluon.jit
def _issue_block(a_desc, p_desc, s_desc, a_smem, p_smem, s_smem, ready, i, pid_n, pid_m, kb, group):
    """TMA of the CTA's block i (block kb of tile (pid_m, pid_n): A, packed W and its scale row) into
    ring slot i % STAGES, completing ready[slot]."""
    STAGES: gl.constexpr = a_smem.type.shape[0]
    BM: gl.constexpr = a_smem.type.shape[1]
    BK: gl.constexpr = a_smem.type.shape[2]
    BN: gl.constexpr = p_smem.type.shape[2]
    s = i % STAGES
    bar = ready.index(s)
    k = kb * BK
    mbarrier.expect(bar, a_desc.block_type.nbytes + p_desc.block_type.nbytes + s_desc.block_type.nbytes)
    tma.async_copy_global_to_shared(a_desc, [pid_m * BM, k], bar, a_smem.index(s))
    tma.async_copy_global_to_shared(p_desc, [k // 8, pid_n * BN], bar, p_smem.index(s))
    # the block's scale row rides with its weights (row 45: a global load of it in the unpack warps,
    # even one block ahead, left every block waiting on an L2 round trip)
    tma.async_copy_global_to_shared(s_desc, [k // group, pid_n * BN], bar, s_smem.index(s))


@gluon.jit
def _first_cta(u, units, ctas):
    """The stream-K CTA whose range holds unit u (CTA c holds units [c U // P, (c + 1) U // P))."""
    return ((u + 1) * ctas - 1) // units


@gluon.jit
def token_origin(pid_m, BM: gl.constexpr, M):
    """rsmma's first token of token tile pid_m's A box: pid_m BM, but M - BM for a last tile that M fills in
    part where M >= BM, so that the box lies inside A: the TMA fills a box's rows past A's edge with zeros,
    slowly (NOTES.md rows 85-86: 32-token tiles took 28.1 us at M=33 against 17.3 at M=64). Such a tile's
    rows below pid_m BM are its neighbour's: computed again, not stored (``_tile_epilogue``)."""
    return gl.maximum(gl.minimum(pid_m * BM, M - BM), 0)


@gluon.jit
def _tile_epilogue(acc, u, c_ptr, ws_ptr, lock_ptr, M, N, stride_cm, stride_cn, blocks, tiles_n, units, ctas,
                   SPLIT_K: gl.constexpr, MAX_PARTS: gl.constexpr, TRANSPOSED: gl.constexpr = False,
                   PAIRED_ROWS: gl.constexpr = False, SKEW: gl.constexpr = 0, OWNER_FIRST: gl.constexpr = False):
    """C's tile for the segment of blocks that ends at unit u: fp16 when this CTA computed the whole tile,
    else the deterministic reduction: each contributor stores its fp32 partial in the tile's slot of its
    rank, and the last to arrive sums the slots in rank order. TRANSPOSED: acc is rsmma's C^T tile
    [BN, BM] (its rows in the paired order if PAIRED_ROWS). SKEW > 0: rsmma's skewed splits (every one of
    the SPLIT_K non-empty); OWNER_FIRST: rank 0 sums the others' slots itself when they are in
    (``store_tile``)."""
    if TRANSPOSED:
        BN: gl.constexpr = acc.type.shape[0]
        BM: gl.constexpr = acc.type.shape[1]
    else:
        BM: gl.constexpr = acc.type.shape[0]
        BN: gl.constexpr = acc.type.shape[1]
    pid_n, pid_m, kb = _unit(u, blocks, tiles_n)
    tile = u // blocks
    if SPLIT_K == 0:  # stream-K: the CTAs whose ranges meet the tile's, in order
        first = _first_cta(tile * blocks, units, ctas)
        rank = gl.program_id(0) - first
        parts = _first_cta(tile * blocks + blocks - 1, units, ctas) - first + 1
    else:
        rank = gl.program_id(1)
        parts = split_parts(blocks, SPLIT_K, SKEW)
    if TRANSPOSED:  # C from the tile's own first token (lo): the box's rows below it, if shifted, masked
        lo = pid_m * BM
        store_tile(acc, c_ptr + lo * stride_cm, pid_n * BN, token_origin(pid_m, BM, M) - lo, N, M - lo, stride_cn,
                   stride_cm, ws_ptr, lock_ptr, tile, rank, parts, MAX_PARTS, PAIRED_ROWS, OWNER_FIRST)
    else:
        store_tile(acc, c_ptr, pid_m * BM, pid_n * BN, M, N, stride_cm, stride_cn, ws_ptr, lock_ptr, tile, rank,
                   parts, MAX_PARTS, False, OWNER_FIRST)


@gluon.jit
def split_parts(blocks, SPLIT_K: gl.constexpr, SKEW: gl.constexpr):
    """How many of a tile's SPLIT_K splits have blocks: all of them with rsmma's skew (SKEW > 0 leaves
    each at least one), else those the even division of the tile's ``blocks`` reaches."""
    if SKEW > 0:
        # SPLIT_K (blocks >= 2 SPLIT_K there) as a runtime value: as a constant it left store_tile a dead
        # branch that Triton 3.6 failed to lower (an LLVM assertion)
        parts = gl.minimum(blocks, SPLIT_K)
    else:
        per_split = (blocks + SPLIT_K - 1) // SPLIT_K
        parts = (blocks + per_split - 1) // per_split
    return parts


@gluon.jit
def stream_k_segments(u0, n_units, blocks):
    """Stream-K (also rsmma's): how many tiles a CTA's units [u0, u0 + n_units) touch, 0 for none."""
    return ((u0 + n_units - 1) // blocks - u0 // blocks + 1) * (n_units > 0)


@gluon.jit
def stream_k_segment(seg, u0, n_units, blocks):
    """Stream-K: the CTA's blocks [begin, end) of its ``seg``-th tile, counted from its first unit u0."""
    tile = u0 // blocks + seg
    return gl.maximum(tile * blocks, u0) - u0, gl.minimum(tile * blocks + blocks, u0 + n_units) - u0


@gluon.jit
def store_tile(acc, c_ptr, row0, col0, n_rows, n_cols, stride_row, stride_col, ws_ptr, lock_ptr, tile, rank, parts,
               MAX_PARTS: gl.constexpr, PAIRED_ROWS: gl.constexpr, OWNER_FIRST: gl.constexpr = False):
    """C's tile from ``acc`` (also rsmma's): its rows at ``row0`` + r of the ``n_rows`` along ``stride_row``
    (C's M for dqmma; its N for rsmma, whose C^T tile is transposed), its columns likewise, the rest
    masked. PAIRED_ROWS: acc's row 16w + 8h + g holds row 16w + 2g + h (rsmma's fragment order).
    fp16 straight to C when one CTA computed all of it, else the deterministic reduction: each of the
    ``parts`` contributors stores its fp32 partial in the tile's workspace slot of its ``rank`` (MAX_PARTS
    slots a tile, tile-local offsets: no mask needed), and the last to arrive sums the slots in rank order
    and re-arms the tile's counter (OWNER_FIRST: ``split_arrive``)."""
    ROWS: gl.constexpr = acc.type.shape[0]
    COLS: gl.constexpr = acc.type.shape[1]
    SIZE: gl.constexpr = ROWS * COLS
    LAYOUT: gl.constexpr = acc.type.layout
    rows = gl.arange(0, ROWS, layout=gl.SliceLayout(1, LAYOUT))
    cols = gl.arange(0, COLS, layout=gl.SliceLayout(0, LAYOUT))
    if PAIRED_ROWS:
        row = gl.expand_dims(row0 + rows // 16 * 16 + rows % 8 * 2 + rows // 8 % 2, 1)
    else:
        row = gl.expand_dims(row0 + rows, 1)
    col = gl.expand_dims(col0 + cols, 0)
    # C's and the slots' addresses are formed where they are stored or read, from these row and column
    # vectors: a 2-D tensor of 64-bit pointers held across the reduction's atomic is two registers a value,
    # which spilled at 128- and 256-token tiles (NOTES.md row 82)
    if MAX_PARTS == 1:  # no tile is split (ws_ptr and lock_ptr are placeholders)
        _store_c(acc, c_ptr, row, col, n_rows, n_cols, stride_row, stride_col)
    elif parts == 1:
        _store_c(acc, c_ptr, row, col, n_rows, n_cols, stride_row, stride_col)
    else:
        ws_tile = ws_ptr + tile * (MAX_PARTS * SIZE)  # a scalar: the slot offsets are added at each access
        if split_arrive(acc, ws_tile, lock_ptr + tile, rank, parts, OWNER_FIRST):
            slot = slot_offsets(acc)
            if rank == 0:  # its own partial is the sum's first term: from registers
                total = gl.zeros_like(acc) + acc
                for r in range(1, parts):
                    total += gl.load(ws_tile + r * SIZE + slot, cache_modifier=".cg")
            else:
                total = gl.zeros_like(acc)
                for r in range(parts):
                    total += gl.load(ws_tile + r * SIZE + slot, cache_modifier=".cg")
            _store_c(total, c_ptr, row, col, n_rows, n_cols, stride_row, stride_col)
            gl.atomic_xchg(lock_ptr + tile, 0, sem="relaxed")


@gluon.jit
def _store_c(values, c_ptr, row, col, n_rows, n_cols, stride_row, stride_col):
    """``values`` (fp32) into C as fp16 at rows ``row`` and columns ``col`` (broadcast), the rest masked
    (negative columns too: rsmma's shifted token tile, ``token_origin``)."""
    gl.store(c_ptr + row * stride_row + col * stride_col, values.to(gl.float16),
             mask=(row < n_rows) & (col >= 0) & (col < n_cols))


@gluon.jit
def slot_offsets(acc):
    """Where each value of ``acc`` [R, C] lies in its fp32 workspace slot (row-major, acc's row order)."""
    LAYOUT: gl.constexpr = acc.type.layout
    rows = gl.arange(0, acc.type.shape[0], layout=gl.SliceLayout(1, LAYOUT))
    cols = gl.arange(0, acc.type.shape[1], layout=gl.SliceLayout(0, LAYOUT))
    return gl.expand_dims(rows, 1) * acc.type.shape[1] + gl.expand_dims(cols, 0)


@gluon.jit
def split_arrive(acc, ws_tile, lock, rank, parts, OWNER_FIRST: gl.constexpr):
    """Whether this part of a split tile sums it (also rsmma's): it stores its fp32 partial in the tile's
    slot of its ``rank`` and counts, and the last of the ``parts`` to arrive sums the slots in rank order.
    OWNER_FIRST: rank 0 first reads the counter, and if every other part is in (rsmma's skewed splits end
    the others early) it sums, with no store, fence or count of its own (adding its partial from registers
    in the same order: the same bits)."""
    SIZE: gl.constexpr = acc.type.shape[0] * acc.type.shape[1]
    sums = False
    if OWNER_FIRST:
        others_in = 0
        if rank == 0:  # the owner: the others' partials may all be in
            others_in = gl.atomic_add(lock, 0, sem="acquire")
        sums = others_in == parts - 1
    if not sums:
        gl.store(ws_tile + rank * SIZE + slot_offsets(acc), acc)
        gl.thread_barrier()  # every thread's partial is written before the release below
        sums = gl.atomic_add(lock, 1, sem="acq_rel") == parts - 1
    return sums


@gluon.jit
def _mma_blocks(acc, begin, end, PARTS: gl.constexpr, MMA_LOADS: gl.constexpr, a_desc, p_desc, s_desc, a_smem,
                p_smem, s_smem, w_smem, ready, a_empty, p_empty, w_ready, w_empty, n_units, blocks, tiles_n, group,
                rn, rm, rkb):
    """acc += the CTA's blocks [begin, end), the last wgmma waited for; (rn, rm, rkb) is the next unit
    to load under MMA_LOADS, returned advanced."""
    STAGES: gl.constexpr = a_smem.type.shape[0]
    WB: gl.constexpr = w_smem.type.shape[0]
    for i in range(begin, end):
        mbarrier.wait(ready.index(i % STAGES), (i // STAGES) & 1)
        mbarrier.wait(w_ready.index(i % WB), (i // WB) & 1)
        if PARTS & 2:  # (anatomy only: without it C stays 0)
            acc = warpgroup_mma(a_smem.index(i % STAGES), w_smem.index(i % WB), acc, is_async=True)
            acc = warpgroup_mma_wait(num_outstanding=1, deps=(acc,))
        # block i-1's MMA is done: its A slot and its W buffer may be refilled
        mbarrier.arrive(w_empty.index((i + WB - 1) % WB), pred=i > 0)
        if MMA_LOADS:
            refill = i - 1 + STAGES  # into block i-1's slot, once the unpack has read its packed half
            if (i > 0) & (refill < n_units):
                mbarrier.wait(p_empty.index((i - 1) % STAGES), ((i - 1) // STAGES) & 1)
                _issue_block(a_desc, p_desc, s_desc, a_smem, p_smem, s_smem, ready, refill, rn, rm, rkb, group)
                rn, rm, rkb = _next_unit(rn, rm, rkb, blocks, tiles_n)
        else:
            mbarrier.arrive(a_empty.index((i + STAGES - 1) % STAGES), pred=i > 0)
    return warpgroup_mma_wait(num_outstanding=0, deps=(acc,)), rn, rm, rkb


@gluon.jit
def _mma_partition(BM: gl.constexpr, BN: gl.constexpr, num_warps: gl.constexpr, SPLIT_K: gl.constexpr,
                   MAX_PARTS: gl.constexpr, PARTS: gl.constexpr, MMA_LOADS: gl.constexpr, a_desc, p_desc, s_desc,
                   a_smem, p_smem, s_smem, w_smem, ready, a_empty, p_empty, w_ready, w_empty, u0, n_units, blocks,
                   tiles_n, group, c_ptr, ws_ptr, lock_ptr, M, N, stride_cm, stride_cn, units, ctas):
    STAGES: gl.constexpr = a_smem.type.shape[0]
    ACC: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[num_warps, 1],
                                                  instr_shape=[16, BN, 16])
    rn, rm, rkb = _unit(u0, blocks, tiles_n)
    if MMA_LOADS:  # no loader partition: these warps fill the ring, first all of it
        for j in gl.static_range(STAGES):
            if j < n_units:
                _issue_block(a_desc, p_desc, s_desc, a_smem, p_smem, s_smem, ready, j, rn, rm, rkb, group)
                rn, rm, rkb = _next_unit(rn, rm, rkb, blocks, tiles_n)
    acc = gl.zeros([BM, BN], gl.float32, ACC)
    if SPLIT_K == 0:
        # stream-K: one loop per tile segment, each written as it ends. A branch for the segment's end
        # inside the block loop made the compiler wait for every wgmma where the branch joins (row 49:
        # MMA-only 25.7 -> 35.1 us)
        for seg in range(stream_k_segments(u0, n_units, blocks)):
            begin, end = stream_k_segment(seg, u0, n_units, blocks)
            acc, rn, rm, rkb = _mma_blocks(gl.zeros([BM, BN], gl.float32, ACC), begin, end, PARTS, MMA_LOADS,
                                           a_desc, p_desc, s_desc, a_smem, p_smem, s_smem, w_smem, ready, a_empty,
                                           p_empty, w_ready, w_empty, n_units, blocks, tiles_n, group, rn, rm, rkb)
            _tile_epilogue(acc, u0 + end - 1, c_ptr, ws_ptr, lock_ptr, M, N, stride_cm, stride_cn, blocks, tiles_n,
                           units, ctas, SPLIT_K, MAX_PARTS)
    else:
        # one segment, written after the partitions join as before stream-K (the sweeps timed the two
        # placements alike, row 49)
        acc, rn, rm, rkb = _mma_blocks(acc, 0, n_units, PARTS, MMA_LOADS, a_desc, p_desc, s_desc, a_smem, p_smem,
                                       s_smem, w_smem, ready, a_empty, p_empty, w_ready, w_empty, n_units, blocks,
                                       tiles_n, group, rn, rm, rkb)
    return (acc,)  # the default partition's results come back as a tuple


# The worker partitions share one signature; their tile sizes come from the buffers' shapes.
@gluon.jit
def _load_partition(a_desc, p_desc, s_desc, a_smem, p_smem, s_smem, w_smem, ready, a_empty, p_empty, w_ready,
                    w_empty, u0, n_units, blocks, tiles_n, group, parts):
    STAGES: gl.constexpr = a_smem.type.shape[0]
    pid_n, pid_m, kb = _unit(u0, blocks, tiles_n)
    for i in range(n_units):
        phase = (i // STAGES) & 1
        mbarrier.wait(a_empty.index(i % STAGES), phase ^ 1)  # a fresh barrier counts as freed: the first round passes
        mbarrier.wait(p_empty.index(i % STAGES), phase ^ 1)
        _issue_block(a_desc, p_desc, s_desc, a_smem, p_smem, s_smem, ready, i, pid_n, pid_m, kb, group)
        pid_n, pid_m, kb = _next_unit(pid_n, pid_m, kb, blocks, tiles_n)


@gluon.jit
def _unpack_body(p_smem, s_smem, w_smem, ready, p_empty, w_ready, w_empty, n_units, parts, UW: gl.constexpr):
    STAGES: gl.constexpr = p_smem.type.shape[0]
    WB: gl.constexpr = w_smem.type.shape[0]
    BN: gl.constexpr = w_smem.type.shape[2]
    # the packed block [BK/8, BN]: 4 words along n per thread, all eight nibbles of a word in its thread
    TN: gl.constexpr = 32 if BN >= 128 else BN // 4
    LP: gl.constexpr = gl.BlockedLayout([1, 4], [32 // TN, TN], [UW, 1], [1, 0])
    for i in range(n_units):
        s = i % STAGES
        mbarrier.wait(ready.index(s), (i // STAGES) & 1)
        packed = p_smem.index(s).load(LP)
        scale = gl.reshape(s_smem.index(s).load(LP), [BN])  # [1, BN] -> [BN]
        fence_async_shared()  # these reads, ordered before the loader's next TMA write into the slot
        mbarrier.arrive(p_empty.index(s))
        b = i % WB
        mbarrier.wait(w_empty.index(b), ((i // WB) & 1) ^ 1)
        if parts % 2 == 1:  # (anatomy only: without it the MMA reads whatever the buffer holds)
            w_smem.index(b).store(_unpack_scaled_ptx(packed, gl.convert_layout(scale, gl.SliceLayout(0, LP))))
        fence_async_shared()  # the stores, visible to the tensor cores' proxy
        mbarrier.arrive(w_ready.index(b))


# One wrapper per unpack warp count: the layout needs the count as a constant, and a worker's
# constexpr arguments arrive as values when its argument tuple is a variable (row 47).
@gluon.jit
def _unpack4_partition(a_desc, p_desc, s_desc, a_smem, p_smem, s_smem, w_smem, ready, a_empty, p_empty, w_ready,
                       w_empty, u0, n_units, blocks, tiles_n, group, parts):
    _unpack_body(p_smem, s_smem, w_smem, ready, p_empty, w_ready, w_empty, n_units, parts, 4)


@gluon.jit
def _unpack8_partition(a_desc, p_desc, s_desc, a_smem, p_smem, s_smem, w_smem, ready, a_empty, p_empty, w_ready,
                       w_empty, u0, n_units, blocks, tiles_n, group, parts):
    _unpack_body(p_smem, s_smem, w_smem, ready, p_empty, w_ready, w_empty, n_units, parts, 8)


@gluon.jit
def dqmma_kernel(a_desc, p_desc, s_desc, c_ptr, ws_ptr, lock_ptr, M, N, K, stride_cm, stride_cn,
                 GROUP: gl.constexpr, BM: gl.constexpr, BN: gl.constexpr, BK: gl.constexpr,
                 SPLIT_K: gl.constexpr, STAGES: gl.constexpr, num_warps: gl.constexpr,
                 W_BUFFERS: gl.constexpr = W_BUFFERS, UNPACK_WARPS: gl.constexpr = UNPACK_WARPS,
                 UNPACK_REGS: gl.constexpr = UNPACK_REGS, MMA_LOADS: gl.constexpr = False,
                 MAX_PARTS: gl.constexpr = 1, PARTS: gl.constexpr = 3):
    gl.static_assert(BM == 16 * num_warps, "16 rows of the wgmma M per warp")
    gl.static_assert(GROUP % BK == 0, "a block lies in one scale group")
    blocks = K // BK
    tiles_n = gl.cdiv(N, BN)
    units = blocks * tiles_n * gl.cdiv(M, BM)
    if SPLIT_K == 0:  # stream-K: a grid of CTAs splitting all tiles' blocks evenly
        ctas = gl.num_programs(0)
        u0 = gl.program_id(0) * units // ctas
        n_units = (gl.program_id(0) + 1) * units // ctas - u0
    else:  # one tile per CTA, its K range split SPLIT_K ways
        ctas = 1
        per_split = (blocks + SPLIT_K - 1) // SPLIT_K
        first_block = gl.program_id(1) * per_split
        u0 = (gl.program_id(2) * tiles_n + gl.program_id(0)) * blocks + first_block
        n_units = gl.maximum(gl.minimum(blocks - first_block, per_split), 0)

    a_smem = gl.allocate_shared_memory(gl.float16, [STAGES, BM, BK], a_desc.layout)
    p_smem = gl.allocate_shared_memory(gl.int32, [STAGES, BK // 8, BN], p_desc.layout)
    s_smem = gl.allocate_shared_memory(gl.float16, [STAGES, 1, BN], s_desc.layout)
    w_smem = gl.allocate_shared_memory(gl.float16, [W_BUFFERS, BK, BN],
                                       gl.NVMMASharedLayout.get_default_for([BK, BN], gl.float16))
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    a_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    p_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    w_ready = gl.allocate_shared_memory(gl.int64, [W_BUFFERS, 1], mbarrier.MBarrierLayout())
    w_empty = gl.allocate_shared_memory(gl.int64, [W_BUFFERS, 1], mbarrier.MBarrierLayout())
    for j in gl.static_range(STAGES):
        mbarrier.init(ready.index(j), count=1)
        mbarrier.init(a_empty.index(j), count=1)
        mbarrier.init(p_empty.index(j), count=1)
    for j in gl.static_range(W_BUFFERS):
        mbarrier.init(w_ready.index(j), count=1)
        mbarrier.init(w_empty.index(j), count=1)

    # with stream-K the MMA warps write C, tile by tile (a CTA ends several tiles' segments). Their argument
    # tuple is written out in each call: held in a variable, its constexprs would arrive as values (row 47)
    worker_args = (a_desc, p_desc, s_desc, a_smem, p_smem, s_smem, w_smem, ready, a_empty, p_empty, w_ready,
                   w_empty, u0, n_units, blocks, tiles_n, GROUP, PARTS)
    if MMA_LOADS:  # 4 warps fewer (the loader is padded to a warp group): more registers for all at launch
        (acc,) = gl.warp_specialize([
            (_mma_partition, (BM, BN, num_warps, SPLIT_K, MAX_PARTS, PARTS, MMA_LOADS, a_desc, p_desc, s_desc, a_smem,
                              p_smem, s_smem, w_smem, ready, a_empty, p_empty, w_ready, w_empty, u0, n_units, blocks,
                              tiles_n, GROUP, c_ptr, ws_ptr, lock_ptr, M, N, stride_cm, stride_cn, units, ctas)),
            (_unpack8_partition if UNPACK_WARPS == 8 else _unpack4_partition, worker_args),
        ], [UNPACK_WARPS], [UNPACK_REGS])
    else:
        (acc,) = gl.warp_specialize([
            (_mma_partition, (BM, BN, num_warps, SPLIT_K, MAX_PARTS, PARTS, MMA_LOADS, a_desc, p_desc, s_desc, a_smem,
                              p_smem, s_smem, w_smem, ready, a_empty, p_empty, w_ready, w_empty, u0, n_units, blocks,
                              tiles_n, GROUP, c_ptr, ws_ptr, lock_ptr, M, N, stride_cm, stride_cn, units, ctas)),
            (_load_partition, worker_args),
            (_unpack8_partition if UNPACK_WARPS == 8 else _unpack4_partition, worker_args),
        ], [LOAD_WARPS, UNPACK_WARPS], [LOAD_REGS, UNPACK_REGS])
    if SPLIT_K != 0:
        if n_units > 0:  # (an empty split adds nothing: the reduction counts the others)
            _tile_epilogue(acc, u0 + n_units - 1, c_ptr, ws_ptr, lock_ptr, M, N, stride_cm, stride_cn, blocks,
                           tiles_n, units, ctas, SPLIT_K, MAX_PARTS)


def shared_layouts(BM: int, BN: int, BK: int):
    """Shared layouts of the three TMA boxes: A [BM, BK] swizzled for wgmma; packed W [BK/8, BN] and the
    scale row [1, BN] plain (a 512-byte row is wider than any swizzle span; the unpack reads 16 bytes per
    thread along it)."""
    p = gl.NVMMASharedLayout(swizzle_byte_width=0, element_bitwidth=32, rank=2)
    s = gl.NVMMASharedLayout(swizzle_byte_width=0, element_bitwidth=16, rank=2)
    return a_shared_layout(BM, BK), p, s


def a_shared_layout(BM: int, BK: int):
    """A's box [BM, BK] in shared memory, swizzled for wgmma."""
    return gl.NVMMASharedLayout.get_default_for([BM, BK], gl.float16)


def launch_registers(BM: int, unpack_warps: int = UNPACK_WARPS, mma_loads: bool = False) -> int:
    """maxnreg at launch. Every warp starts with it, so all of the CTA's warps (BM/16 for the MMA, the
    loader padded to a warp group of 4 unless the MMA warps issue the loads, the unpackers) must fit an
    SM's 64K registers at that count; the partitions then hand the loader's and unpackers' spare
    registers to the MMA warps. ptxas holds every partition's code to it: a wgmma of N=256 needs 154."""
    warps = BM // 16 + (0 if mma_loads else 4) + unpack_warps
    return min(168 if mma_loads else 128, 65536 // (32 * warps) // 8 * 8)


def descriptors(a, packed, scales, BM: int, BN: int, BK: int):
    """TMA descriptors of A, packed W and the scales for one launch (they hold the base addresses)."""
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

    a_layout, p_layout, s_layout = shared_layouts(BM, BN, BK)
    return (TensorDescriptor.from_tensor(a, [BM, BK], a_layout),
            TensorDescriptor.from_tensor(packed, [BK // 8, BN], p_layout),
            TensorDescriptor.from_tensor(scales, [1, BN], s_layout))
