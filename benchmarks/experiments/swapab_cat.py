"""EXPERIMENT (not a tunesearch variant yet): swapab with one K = BK dot per block.

The shipped swapab (variants/swapab.py) runs eight K = BK/8 dots per block, one per nibble plane, and
Triton waits for each wgmma before the next (`warp_group_dot_wait pendings=0`: it pipelines only a
loop's single dot). Here the eight unpacked planes are joined back into one [BN, BK] tile in natural k
order (k = 8 k8 + j) and multiplied by the activations A^T [BK, BM] in a single dot, so the loop has one
dot that Triton pipelines. Compiled for sm_90 (benchmarks/sass_stats.py's helper), the join and reshape
become register permutes (PRMT 0.20 -> 0.63 per weight), not a trip through shared memory; one
`warp_group_dot_wait` per loop instead of eight; A^T is staged by cp.async and read by wgmma from shared
memory. With 2 warps (mma.sync) the same code is worse (4.5 vs 2.8 instructions per weight).
Not yet timed on a GPU: `python benchmarks/experiments/forms_probe.py OUT_DIR` is the next session's
first call. Same arguments and grid as the shipped swapab_kernel.
"""
import triton
import triton.language as tl

from tunesearch.variants._common import split_k_range, store_or_reduce_splitk
from tunesearch.variants.swapab import _nibble_planes


@triton.jit
def swapab_cat_kernel(
    # pointers
    a_ptr, b_ptr, s_ptr, c_ptr, ws_ptr, lock_ptr,
    # dimensions
    M, N, K,
    # strides
    stride_am, stride_ak, stride_bk, stride_bn, stride_sg, stride_sn, stride_cm, stride_cn,
    # meta-parameters
    GROUP: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
    SPLIT_K: tl.constexpr, PTX: tl.constexpr,
):
    BK8: tl.constexpr = BK // 8
    pid_n = tl.program_id(0)
    pid_k = tl.program_id(1)
    pid_m = tl.program_id(2)

    offs_m = pid_m * BM + tl.arange(0, BM)
    offs_n = pid_n * BN + tl.arange(0, BN)
    offs_k8 = tl.arange(0, BK8)
    mask_m = offs_m < M
    mask_n = offs_n < N
    k_begin, k_end = split_k_range(pid_k, K, BK, SPLIT_K)
    b_ptrs = b_ptr + offs_n[:, None] * stride_bn + (k_begin // 8 + offs_k8)[None, :] * stride_bk

    acc = tl.zeros([BN, BM], dtype=tl.float32)
    for k in range(k_begin, k_end, BK):
        packed = tl.load(b_ptrs, mask=mask_n[:, None], other=0)
        p = _nibble_planes(packed, PTX)
        # join so that the flattened last axes give j = 4 c2 + 2 c1 + c0 (c0 the last join's axis):
        # the [BN, BK] tile is then in natural k order and A needs no permutation
        w = tl.join(tl.join(tl.join(p[0], p[4]), tl.join(p[2], p[6])),
                    tl.join(tl.join(p[1], p[5]), tl.join(p[3], p[7])))
        w = tl.reshape(w, [BN, BK])
        offs_k = k + tl.arange(0, BK)
        a_t = tl.load(a_ptr + offs_m[None, :] * stride_am + offs_k[:, None] * stride_ak,
                      mask=mask_m[None, :], other=0.0)
        block = tl.dot(w, a_t)
        s = tl.load(s_ptr + (k // GROUP) * stride_sg + offs_n * stride_sn, mask=mask_n, other=0.0)
        acc += block * s.to(tl.float32)[:, None]
        b_ptrs += BK8 * stride_bk

    tile_id = pid_m * tl.num_programs(0) + pid_n
    store_or_reduce_splitk(tl.trans(acc), c_ptr, ws_ptr, lock_ptr, tile_id, pid_k, offs_m, offs_n,
                           M, N, stride_cm, stride_cn, SPLIT_K)
