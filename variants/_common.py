"""Triton helpers shared by the kernel families."""
import triton
import triton.language as tl


@triton.jit
def split_k_range(pid_k, K, BK: tl.constexpr, SPLIT_K: tl.constexpr):
    """[k_begin, k_end) of split ``pid_k``: whole BK blocks, the last split possibly shorter.

    K only has to be a multiple of BK (not of BK * SPLIT_K), so K = 11008 = 86 * 128 can be cut
    in any number of splits; a split left empty still takes part in the split-K reduction.
    """
    blocks_per_split = tl.cdiv(K // BK, SPLIT_K)
    k_begin = pid_k * blocks_per_split * BK
    k_end = tl.minimum(K, k_begin + blocks_per_split * BK)
    return k_begin, k_end


@triton.jit
def store_or_reduce_splitk(
    acc, c_ptr, ws_ptr, lock_ptr,
    tile_id, pid_k, offs_m, offs_n, M, N, stride_cm, stride_cn,
    SPLIT_K: tl.constexpr,
):
    """Store an fp32 tile to the fp16 output, reducing SPLIT_K partial tiles first.

    Split-K without fp16 atomics: each split writes its fp32 partial to ``ws`` [SPLIT_K, M, N];
    the last split to arrive at the tile (counted in ``lock[tile_id]``) sums the partials in a
    fixed order (so the result is deterministic), writes the output once, and re-arms the
    counter to 0 for the next launch. One launch, no memset, no extra reduction kernel.

    The re-arm is relaxed: nothing in this launch reads the counter after the last split, and the
    next launch sees it through the kernel boundary. The fenced form cost ~0.3 us per launch on the
    H200 (benchmarks/experiments/gemv_anatomy.py, NOTES.md row 21).
    """
    mask = (offs_m < M)[:, None] & (offs_n < N)[None, :]
    c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
    if SPLIT_K == 1:
        tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=mask)
    else:
        ws_ptrs = ws_ptr + offs_m[:, None] * N + offs_n[None, :]
        tl.store(ws_ptrs + pid_k * M * N, acc, mask=mask)
        tl.debug_barrier()  # every thread's partial is written before the release below
        arrived = tl.atomic_add(lock_ptr + tile_id, 1, sem="acq_rel")
        if arrived == SPLIT_K - 1:
            total = tl.zeros_like(acc)
            for i in range(SPLIT_K):
                # .cg: read at L2, where the other SMs' partials are, not a stale L1 line
                total += tl.load(ws_ptrs + i * M * N, mask=mask, other=0.0, cache_modifier=".cg")
            tl.store(c_ptrs, total.to(c_ptr.dtype.element_ty), mask=mask)
            tl.atomic_xchg(lock_ptr + tile_id, 0, sem="relaxed")
