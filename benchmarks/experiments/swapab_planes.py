"""EXPERIMENT (not a tunesearch variant yet): swapab over a nibble-plane weight layout.

Layout 'planes16': within each 128-row K block, nibble j of packed row r holds k = 16 j + r, so the
activations each nibble plane multiplies, A_j, are 16 consecutive k instead of every 8th k. Compiled
for sm_90 with the row stride of A specialized (as it is at llama shapes), Triton then stages A_j with
cp.async (LDGSTS) in its software pipeline, where the base layout loads A_j to registers and stores
it. Not yet timed on a GPU: run benchmarks/planes_probe.py. PLANES=0 is the shipped swapab kernel.
"""
import triton
import triton.language as tl

from tunesearch.variants._common import split_k_range, store_or_reduce_splitk
from tunesearch.variants.swapab import _nibble_plane  # the shipped unpack, PTX and interpreter forms


@triton.jit
def swapab_planes_kernel(
    # pointers
    a_ptr, b_ptr, s_ptr, c_ptr, ws_ptr, lock_ptr,
    # dimensions
    M, N, K,
    # strides
    stride_am, stride_ak, stride_bk, stride_bn, stride_sg, stride_sn, stride_cm, stride_cn,
    # meta-parameters
    GROUP: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
    SPLIT_K: tl.constexpr, PTX: tl.constexpr, PLANES: tl.constexpr,
):
    BK8: tl.constexpr = BK // 8
    # 1. program id -> (pid_n, pid_k, pid_m)
    pid_n = tl.program_id(0)
    pid_k = tl.program_id(1)
    pid_m = tl.program_id(2)

    # 2. pointers: the packed block [BN, BK/8] (W^T) and A_0^T [BK/8, BM] (A_j is j further on)
    offs_m = pid_m * BM + tl.arange(0, BM)
    offs_n = pid_n * BN + tl.arange(0, BN)
    offs_k8 = tl.arange(0, BK8)
    mask_m = offs_m < M
    mask_n = offs_n < N
    k_begin, k_end = split_k_range(pid_k, K, BK, SPLIT_K)
    b_ptrs = b_ptr + offs_n[:, None] * stride_bn + (k_begin // 8 + offs_k8)[None, :] * stride_bk
    A_STRIDE: tl.constexpr = 8 if PLANES == 0 else 1
    J_STRIDE: tl.constexpr = 1 if PLANES == 0 else BK8
    a_ptrs = a_ptr + offs_m[None, :] * stride_am + (k_begin + A_STRIDE * offs_k8)[:, None] * stride_ak

    # 3. the K loop: eight nibble-plane dots per block, then the block's scale in fp32
    acc = tl.zeros([BN, BM], dtype=tl.float32)
    for k in range(k_begin, k_end, BK):
        packed = tl.load(b_ptrs, mask=mask_n[:, None], other=0)
        block = tl.zeros([BN, BM], dtype=tl.float32)
        for j in tl.static_range(8):
            a_j = tl.load(a_ptrs + J_STRIDE * j * stride_ak, mask=mask_m[None, :], other=0.0)
            block = tl.dot(_nibble_plane(packed, j, PTX), a_j, block)
        s = tl.load(s_ptr + (k // GROUP) * stride_sg + offs_n * stride_sn, mask=mask_n, other=0.0)
        acc += block * s.to(tl.float32)[:, None]
        a_ptrs += BK * stride_ak
        b_ptrs += BK8 * stride_bk

    # 4. store C = acc^T (or reduce the split-K partials in fp32, then store)
    tile_id = pid_m * tl.num_programs(0) + pid_n
    store_or_reduce_splitk(tl.trans(acc), c_ptr, ws_ptr, lock_ptr, tile_id, pid_k, offs_m, offs_n,
                           M, N, stride_cm, stride_cn, SPLIT_K)
