"""The rsmmapf family: rsmma's split launch whose owner's loader warp fetches the other splits' partials
while its MMA warps finish (Gluon, Hopper, frag32 weights, M <= 64 where tiles are split).

Where a launch splits K (rsmma's SPLIT_K 2 or 4: M <= 32 on every llama-7b shape but 4096x22016), the split's
tail keeps M=1 over the floor (NOTES.md rows 66, 82: 1.3-1.7 us with no reduction at all). With SKEW the
other splits end first and the owner (split 0) sums their partials itself when its loop ends: one L2 round
trip to read the counter, one to bring the partials in, both after its last wgmma, on the critical path.
The owner's loader warp is idle from its last TMA on (STAGES blocks before the end). Here it spends that
time: it polls the tile's counter (acquire loads, at most POLLS), and once every other split is in it
copies their slots into shared memory (async copies), into a buffer of its own (RING=0: 2-32 KB more,
which may cost a CTA an SM) or into the A stages of the ring the MMA warps free last (RING=1: BN fp32
partial rows take an A stage's bytes where BK = 2 BN), then tells the MMA warps through an mbarrier and a
flag word. The MMA warps, their loop done, wait on that barrier (normally passed already), add the slots
in rank order to their own partial (the family's order: rsmma's bits) and store C through the drained
ring; the counter is re-armed. If the loader gave up (the others not in after POLLS loads: a grid of more
than one wave could otherwise wait on CTAs not yet resident), the owner takes rsmma's path. The other
splits run rsmma's code unchanged.

Measured on an H100 before it was a family (benchmarks/experiments/rsmma_prefetch.py, NOTES.md row 132):
0.963-0.991 of the best rsmma form at every two-split pick with the partials in the ring (4096x11008 and
4096x12288 at M <= 32, 4096x4096 M=32), level with four splits (a buffer of their own 0.984-1.011).

A module of its own, hashed with rsmma's sources (tunesearch.search.FAMILY_SOURCES): rsmma's stored trials,
and the packaged tables picked from them, stay those of its unchanged code; the sweep times this family
beside rsmma (its twins of a split rsmma best first: ``space.family_twins``). Gluon has no CPU interpreter:
CI compiles it for sm_90 and checks its schedule against rsmma's (tests/test_experiments.py), the GPU tests
its results at the mask edges and with a loader that gives up at once (POLLS=1).
"""
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.ampere import async_copy
from triton.experimental.gluon.language.nvidia.hopper import mbarrier

from . import rsmma
from .dqmma import _unit, split_arrive, split_parts, token_origin

POLLS = 64  # acquire loads of the counter before the loader gives up (~0.5-1 us each)


@triton.constexpr_function
def _pow2(n):
    return 1 << (n - 1).bit_length()


@triton.constexpr_function
def _one_warp():
    return gl.BlockedLayout([1], [32], [1], [0])


@gluon.jit
def _load_acquire(ptrs):
    """The 32-bit words at ``ptrs`` read with acquire semantics at GPU scope (each lane its own load)."""
    return gl.inline_asm_elementwise(
        asm="ld.acquire.gpu.global.b32 $0, [$1];", constraints="=r,l", args=[ptrs], dtype=gl.int32,
        is_pure=False, pack=1)


@gluon.jit
def _part_slot(j, a_smem, buf, n_units, BN: gl.constexpr, BM: gl.constexpr, IN_RING: gl.constexpr):
    """Part j's (1..) fp32 slot [BN, BM] in shared memory: rows (j - 1) BN of the buffer of its own, or
    (IN_RING) the A stage the loader would fill next after its last block, then the one after (block
    n_units + j - 1's stage)."""
    if IN_RING:
        STAGES: gl.constexpr = a_smem.type.shape[0]
        return a_smem.index((n_units + j - 1) % STAGES)._reinterpret(gl.float32, [BN, BM],
                                                                       rsmma._partials_layout(BM))
    else:
        return buf.slice((j - 1) * BN, BN)


@gluon.jit
def _prefetch_partials(ws_ptr, lock_ptr, a_smem, buf, got_smem, pre_bar, empty, tile, parts, owner, n_units,
                       MAX_PARTS: gl.constexpr, POLLS_: gl.constexpr, IN_RING: gl.constexpr):
    """The owner's loader warp: wait (at most POLLS_ loads) for the tile's other parts to count in, then copy
    their slots 1..MAX_PARTS-1 (+0.0 past ``parts``) into ``_part_slot``'s (with IN_RING the ring's A
    stages, each taken as the loader would take it for a block after its last: once the MMA warps free it);
    the flag (1 if copied) into ``got_smem``; then one arrival on ``pre_bar``."""
    BM: gl.constexpr = a_smem.type.shape[1]
    BN: gl.constexpr = a_smem.type.shape[2] // 2 if IN_RING else buf.type.shape[0] // _pow2(MAX_PARTS - 1)
    STAGES: gl.constexpr = empty.type.shape[0]
    SIZE: gl.constexpr = BN * BM
    lanes = gl.arange(0, 32, layout=_one_warp())
    lock = lock_ptr + tile + lanes * 0
    seen = 0
    polls = 0
    while owner & (seen < parts - 1) & (polls < POLLS_):
        seen = gl.min(_load_acquire(lock), axis=0)
        polls += 1
    got = owner & (seen == parts - 1)
    if got:
        CHUNK: gl.constexpr = min(BN, 16 * 32 // BM)
        COPY: gl.constexpr = rsmma._copy_layout(CHUNK, BM, 1)
        crow = gl.arange(0, CHUNK, layout=gl.SliceLayout(1, COPY))
        ccol = gl.arange(0, BM, layout=gl.SliceLayout(0, COPY))
        chunk = gl.expand_dims(crow, 1) * BM + gl.expand_dims(ccol, 0)
        ws_tile = ws_ptr + tile * (MAX_PARTS * SIZE)
        for j in gl.static_range(1, MAX_PARTS):
            if IN_RING:  # as for a block v after the last: its stage's former block freed (one no block used is)
                v = n_units + j - 1
                mbarrier.wait(empty.index(v % STAGES), ((v // STAGES) & 1) ^ 1)
            slot = _part_slot(j, a_smem, buf, n_units, BN, BM, IN_RING)
            for c in gl.static_range(BN // CHUNK):
                async_copy.async_copy_global_to_shared(
                    slot.slice(c * CHUNK, CHUNK), ws_tile + j * SIZE + c * CHUNK * BM + chunk, mask=j < parts,
                    cache_modifier=".cg")
        async_copy.commit_group()
        async_copy.wait_group(0)
    got_smem.store(gl.zeros([32], gl.int32, _one_warp()) + got.to(gl.int32))
    gl.thread_barrier()  # every lane's copies and the flag are in before the one arrival below
    mbarrier.arrive(pre_bar)


@gluon.jit
def _load_partition_prefetch(a_desc, p_desc, s_desc, a_smem, p_smem, s_smem, ready, empty, u0, n_units, blocks,
                             tiles_n, group, PARTS: gl.constexpr, A_TAIL: gl.constexpr, ws_ptr, lock_ptr, buf,
                             got_smem, pre_bar, parts, MAX_PARTS: gl.constexpr, POLLS_: gl.constexpr,
                             IN_RING: gl.constexpr):
    """rsmma's loader, then ``_prefetch_partials`` (the owner alone fetches; every CTA gives the flag, so that
    the MMA warps wait on it unconditioned)."""
    rsmma._load_partition(a_desc, p_desc, s_desc, a_smem, p_smem, s_smem, ready, empty, u0, n_units, blocks,
                          tiles_n, group, PARTS, A_TAIL)
    _prefetch_partials(ws_ptr, lock_ptr, a_smem, buf, got_smem, pre_bar, empty, u0 // blocks, parts,
                       gl.program_id(1) == 0, n_units, MAX_PARTS, POLLS_, IN_RING)


@gluon.jit
def _reduce_prefetched(acc, ring, buf, got_smem, pre_bar, c_ptr, ws_ptr, lock_ptr, tile, rank, parts, n_units,
                       row0, col0, M, N, stride_cm, stride_cn, MAX_PARTS: gl.constexpr, PAIRED_ROWS: gl.constexpr,
                       OWNER_FIRST: gl.constexpr, IN_RING: gl.constexpr):
    """rsmma._reduce_staged, but where the loader says it brought the others' slots in (the flag), the owner
    adds them from ``_part_slot``'s with no store, count or reads of its own. One call of _store_tile_staged and
    one read of acc: two of either (one a path) made ptxas serialize every wgmma of the loop (C7514)."""
    BN: gl.constexpr = acc.type.shape[0]
    BM: gl.constexpr = acc.type.shape[1]
    SIZE: gl.constexpr = BN * BM
    WARPS: gl.constexpr = BN // 16
    RING_FLOATS: gl.constexpr = ring.type.shape[0] * ring.type.shape[1] * ring.type.shape[2] // 2
    GROUP: gl.constexpr = rsmma._pass_slots(MAX_PARTS, RING_FLOATS // SIZE)
    slots = ring._reinterpret(gl.float32, [GROUP * BN, BM], rsmma._partials_layout(BM))
    lock = lock_ptr + tile
    ws_tile = ws_ptr + tile * (MAX_PARTS * SIZE)
    own = gl.zeros_like(acc) + acc  # rank 0's first term of the sum, as the family adds it (the same bits)
    mbarrier.wait(pre_bar, 0)
    got = gl.max(got_smem.load(gl.BlockedLayout([1], [32], [WARPS], [0])), axis=0) == 1
    sums = got
    if not got:
        sums = split_arrive(own, ws_tile, lock, rank, parts, OWNER_FIRST)
    if sums:
        if got:  # the others' slots are in shared memory: added in rank order after rank 0's own
            total = own
            for j in gl.static_range(1, MAX_PARTS):
                total += _part_slot(j, ring, buf, n_units, BN, BM, IN_RING).load(acc.type.layout)
            gl.thread_barrier()  # every slot read before C's staging writes the ring (IN_RING: over them)
        elif rank == 0:
            total = rsmma._add_slots(own, slots, ws_tile, parts, 1, MAX_PARTS)
        else:
            total = rsmma._add_slots(gl.zeros_like(acc), slots, ws_tile, parts, 0, MAX_PARTS)
        rsmma._store_tile_staged(total, ring, c_ptr, row0, col0, M, N, stride_cm, stride_cn, PAIRED_ROWS)
        gl.atomic_xchg(lock, 0, sem="relaxed")


@gluon.jit
def rsmmapf_kernel(a_desc, p_desc, s_desc, c_ptr, ws_ptr, lock_ptr, M, N, K, stride_cm, stride_cn,
                   GROUP: gl.constexpr, BM: gl.constexpr, BK: gl.constexpr, SPLIT_K: gl.constexpr,
                   STAGES: gl.constexpr, WORDS: gl.constexpr, FRAGMENT: gl.constexpr,
                   PAIRED_ROWS: gl.constexpr, PARTS: gl.constexpr, SCALE_AFTER: gl.constexpr,
                   num_warps: gl.constexpr, MAX_PARTS: gl.constexpr = 1, STAGED_C: gl.constexpr = True,
                   SKEW: gl.constexpr = 0, OWNER_FIRST: gl.constexpr = False,
                   STAGED_SPLIT: gl.constexpr = False, A_TAIL: gl.constexpr = False,
                   POLLS_: gl.constexpr = POLLS, IN_RING: gl.constexpr = False):
    """rsmma_kernel's split path (SPLIT_K > 1, STAGED_SPLIT) with the owner's partials prefetched by its
    loader warp (module docstring), into a buffer of their own or (IN_RING) into the A stages of
    the ring the MMA warps free last (BN fp32 partial rows take an A stage's bytes where BN = BK / 2).
    Everything else as rsmma_kernel has it."""
    BN: gl.constexpr = 16 * num_warps
    gl.static_assert(SPLIT_K > 1, "a split launch")
    gl.static_assert(STAGED_SPLIT, "the family's staged reduction (rsmma_launch.staged_split)")
    blocks = K // BK
    tiles_n = gl.cdiv(N, BN)
    # the split units as rsmma_kernel computes them inline (copied: moving them into a helper of rsmma.py
    # would re-hash the family and with it both packaged tables)
    if SKEW > 0:
        helper = blocks // SPLIT_K - SKEW
        owner = blocks - (SPLIT_K - 1) * helper
        rank = gl.program_id(1)
        first_block = (rank > 0) * (owner + (rank - 1) * helper)
        u0 = (gl.program_id(2) * tiles_n + gl.program_id(0)) * blocks + first_block
        n_units = owner + (rank > 0) * (helper - owner)
    else:
        per_split = (blocks + SPLIT_K - 1) // SPLIT_K
        first_block = gl.program_id(1) * per_split
        u0 = (gl.program_id(2) * tiles_n + gl.program_id(0)) * blocks + first_block
        n_units = gl.maximum(gl.minimum(blocks - first_block, per_split), 0)
    parts = split_parts(blocks, SPLIT_K, SKEW)
    a_smem = gl.allocate_shared_memory(gl.float16, [STAGES, BM, BK], a_desc.layout)
    p_smem = gl.allocate_shared_memory(gl.int32, [STAGES, BN // 64 * (BK // 32), 256], p_desc.layout)
    s_smem = gl.allocate_shared_memory(gl.float16, [STAGES, 1, BN], s_desc.layout)
    if IN_RING:  # the A stages as fp32 [BN, BM] slots (``_part_slot``)
        gl.static_assert(BK == 2 * BN, "an A stage holds one fp32 partial")
        gl.static_assert(MAX_PARTS - 1 <= STAGES, "a stage for each other part")
        buf = a_smem
    else:  # a buffer of their own, rows (j - 1) BN for part j (a power of two of them: Gluon's shapes need one)
        buf = gl.allocate_shared_memory(gl.float32, [_pow2(MAX_PARTS - 1) * BN, BM], rsmma._partials_layout(BM))
    got_smem = gl.allocate_shared_memory(gl.int32, [32], gl.SwizzledSharedLayout(1, 1, 1, [0]))
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    pre_bar = gl.allocate_shared_memory(gl.int64, [1, 1], mbarrier.MBarrierLayout())
    for j in gl.static_range(STAGES):
        mbarrier.init(ready.index(j), count=1)
        mbarrier.init(empty.index(j), count=1)
    mbarrier.init(pre_bar.index(0), count=1)
    (acc,) = gl.warp_specialize([
        (rsmma._mma_partition, (BM, BN, num_warps, FRAGMENT, WORDS, PARTS, SCALE_AFTER, PAIRED_ROWS, SPLIT_K,
                                MAX_PARTS, a_smem, p_smem, s_smem, ready, empty, u0, n_units, blocks, tiles_n, 1, 1,
                                c_ptr, ws_ptr, lock_ptr, M, N, stride_cm, stride_cn)),
        (_load_partition_prefetch, (a_desc, p_desc, s_desc, a_smem, p_smem, s_smem, ready, empty, u0, n_units, blocks,
                                    tiles_n, GROUP, PARTS, A_TAIL, ws_ptr, lock_ptr, buf, got_smem,
                                    pre_bar.index(0), parts, MAX_PARTS, POLLS_, IN_RING)),
    ], [1], [rsmma.LOAD_REGS])
    if n_units > 0:
        pid_n, pid_m, _ = _unit(u0, blocks, tiles_n)
        lo = pid_m * BM
        tile = u0 // blocks
        _reduce_prefetched(acc, a_smem, buf, got_smem, pre_bar.index(0), c_ptr + lo * stride_cm, ws_ptr,
                           lock_ptr, tile, gl.program_id(1), parts, n_units, token_origin(pid_m, BM, M) - lo,
                           pid_n * BN, M - lo, N, stride_cm, stride_cn, MAX_PARTS, PAIRED_ROWS, OWNER_FIRST, IN_RING)
