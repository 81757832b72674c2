"""Tiled tensor-core GEMM over the packed int4 weights; with SPLIT_K > 1 it is the split-K family.

Each program computes a [BM, BN] tile of C: it streams A [BM, BK] and the packed weights
[BK/8, BN], unpacks the nibbles in registers, scales them to fp16 and feeds ``tl.dot`` with an
fp32 accumulator. Programs are ordered in GROUP_M-row bands so neighbouring tiles share A and W
in L2 (the swizzle of Triton's matmul tutorial).
"""
import triton
import triton.language as tl

from ._common import split_k_range, store_or_reduce_splitk


@triton.jit
def gemm_kernel(
    # pointers
    a_ptr, b_ptr, s_ptr, c_ptr, ws_ptr, lock_ptr,
    # dimensions
    M, N, K,
    # strides
    stride_am, stride_ak, stride_bk, stride_bn, stride_sg, stride_sn, stride_cm, stride_cn,
    # meta-parameters
    GROUP: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
    GROUP_M: tl.constexpr, SPLIT_K: tl.constexpr,
):
    # 1. program id -> (pid_m, pid_n, pid_k), banded by GROUP_M
    pid = tl.program_id(0)
    pid_k = tl.program_id(1)
    num_pid_m = tl.cdiv(M, BM)
    num_pid_n = tl.cdiv(N, BN)
    num_pid_in_band = GROUP_M * num_pid_n
    first_pid_m = (pid // num_pid_in_band) * GROUP_M
    band_m = min(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + (pid % num_pid_in_band) % band_m
    pid_n = (pid % num_pid_in_band) // band_m

    # 2. pointers to the first K block of this split (the variant space guarantees
    #    K % BK == 0, so the K loop needs no mask)
    offs_m = pid_m * BM + tl.arange(0, BM)
    offs_n = pid_n * BN + tl.arange(0, BN)
    offs_k = tl.arange(0, BK)
    mask_m = offs_m < M
    mask_n = offs_n < N
    k_begin, k_end = split_k_range(pid_k, K, BK, SPLIT_K)
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + (k_begin + offs_k)[None, :] * stride_ak
    # Each packed row is addressed once per k it holds (8 times): the repeats are served from
    # L1/shared memory, and the block comes out [BK, BN] in k order with no reshape. (A
    # [BK/8, 8, BN] unpack + reshape compiled to one scalar shared-memory store per weight.)
    b_ptrs = b_ptr + ((k_begin + offs_k) // 8)[:, None] * stride_bk + offs_n[None, :] * stride_bn
    shifts = ((offs_k % 8) * 4)[:, None]

    # 3. the K loop: unpack [BK/8, BN] int32 -> [BK, BN] codes (row k8*8 + j is nibble j), scale, dot
    acc = tl.zeros([BM, BN], dtype=tl.float32)
    for k in range(k_begin, k_end, BK):
        a = tl.load(a_ptrs, mask=mask_m[:, None], other=0.0)
        packed = tl.load(b_ptrs, mask=mask_n[None, :], other=0)
        codes = (packed >> shifts) & 0xF  # mask after the shift: the top nibble sets the sign bit
        # 0x6400 | q is the fp16 1024 + q: an exact int->fp16 conversion without I2F (a slow
        # instruction, one per weight), then one fp16 subtraction leaves q - 8.
        w = ((codes | 0x6400).to(tl.int16).to(tl.float16, bitcast=True) - 1032.0).to(tl.float16)
        if BK <= GROUP:  # the whole block lies in one scale group
            s = tl.load(s_ptr + (k // GROUP) * stride_sg + offs_n * stride_sn, mask=mask_n, other=0.0)
            w = w * s[None, :]
        else:
            g = (k + offs_k) // GROUP
            s = tl.load(s_ptr + g[:, None] * stride_sg + offs_n[None, :] * stride_sn,
                        mask=mask_n[None, :], other=0.0)
            w = w * s
        acc = tl.dot(a, w, acc)
        a_ptrs += BK * stride_ak
        b_ptrs += (BK // 8) * stride_bk

    # 4. store (or reduce the split-K partials in fp32, then store)
    store_or_reduce_splitk(acc, c_ptr, ws_ptr, lock_ptr, pid, pid_k, offs_m, offs_n, M, N,
                           stride_cm, stride_cn, SPLIT_K)
