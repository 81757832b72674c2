"""Swap-AB tensor-core GEMM for small M: computes C^T = W^T A^T.

At decode sizes (M <= 64) a [BM, BN] tile with BM = 16 can only use ``mma.sync``, and the
dequantized weights must be staged in shared memory as wgmma's B operand. Swapping the operands
makes the weights the *left* operand, [BN, BK] with BN >= 64: wgmma's M dimension is then the
layer's N, the activations become the small right operand [BK, BM], and the left operand may
come straight from registers. Codes enter the dot as exact small integers (q - 8, in fp16) and the
group's scale multiplies the [BN, BM] block product in fp32, once per block, instead of every
weight (BK <= G is required for that).
"""
import triton
import triton.language as tl

from ._common import split_k_range, store_or_reduce_splitk


@triton.jit
def swapab_kernel(
    # pointers
    a_ptr, b_ptr, s_ptr, c_ptr, ws_ptr, lock_ptr,
    # dimensions
    M, N, K,
    # strides
    stride_am, stride_ak, stride_bk, stride_bn, stride_sg, stride_sn, stride_cm, stride_cn,
    # meta-parameters
    GROUP: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
    SPLIT_K: tl.constexpr,
):
    # 1. program id -> (pid_n, pid_k, pid_m): the N tiles of one split are neighbours
    pid_n = tl.program_id(0)
    pid_k = tl.program_id(1)
    pid_m = tl.program_id(2)

    # 2. pointers: W^T [BN, BK] (each packed row addressed once per k it holds, as in gemm) and
    #    A^T [BK, BM]
    offs_m = pid_m * BM + tl.arange(0, BM)
    offs_n = pid_n * BN + tl.arange(0, BN)
    offs_k = tl.arange(0, BK)
    mask_m = offs_m < M
    mask_n = offs_n < N
    k_begin, k_end = split_k_range(pid_k, K, BK, SPLIT_K)
    offs_k8 = tl.arange(0, BK // 8)
    b_ptrs = b_ptr + offs_n[:, None] * stride_bn + (k_begin // 8 + offs_k8)[None, :] * stride_bk
    a_ptrs = a_ptr + offs_m[None, :] * stride_am + (k_begin + offs_k)[:, None] * stride_ak
    shifts = (tl.arange(0, 8) * 4)[None, None, :]

    # 3. the K loop: codes -> fp16 (q - 8) exactly, block product, scale in fp32
    acc = tl.zeros([BN, BM], dtype=tl.float32)
    for k in range(k_begin, k_end, BK):
        packed = tl.load(b_ptrs, mask=mask_n[:, None], other=0)
        a = tl.load(a_ptrs, mask=mask_m[None, :], other=0.0)
        # [BN, BK/8] -> [BN, BK/8, 8] -> [BN, BK]: nibble j of row k8 is k = 8 * k8 + j, so the
        # eight codes of one int32 end up side by side along K (a register-local reshape)
        codes = tl.reshape((packed[:, :, None] >> shifts) & 0xF, (BN, BK))
        # 0x6400 | q is the fp16 1024 + q (no I2F); one subtraction leaves q - 8
        w = ((codes | 0x6400).to(tl.int16).to(tl.float16, bitcast=True) - 1032.0).to(tl.float16)
        s = tl.load(s_ptr + (k // GROUP) * stride_sg + offs_n * stride_sn, mask=mask_n, other=0.0)
        acc += tl.dot(w, a) * s.to(tl.float32)[:, None]
        a_ptrs += BK * stride_ak
        b_ptrs += (BK // 8) * stride_bk

    # 4. store C = acc^T (or reduce the split-K partials in fp32, then store)
    tile_id = pid_m * tl.num_programs(0) + pid_n
    store_or_reduce_splitk(tl.trans(acc), c_ptr, ws_ptr, lock_ptr, tile_id, pid_k, offs_m, offs_n,
                           M, N, stride_cm, stride_cn, SPLIT_K)
