"""Dequantize-then-cuBLAS, the route above the crossover.

At large M the layer is compute-bound and cuBLAS's fp16 GEMM is hard to beat; one pass that
expands the int4 weights into an fp16 workspace costs K*N*(0.5 + 2) bytes, small beside the
matmul there. The search picks this family only where it wins.
"""
import triton
import triton.language as tl


@triton.jit
def dequant_kernel(
    # pointers
    b_ptr, s_ptr, w_ptr,
    # dimensions
    N,
    # strides
    stride_bk, stride_bn, stride_sg, stride_sn, stride_wk, stride_wn,
    # meta-parameters
    GROUP: tl.constexpr, BK: tl.constexpr, BN: tl.constexpr,
):
    pid_k = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_k8 = pid_k * (BK // 8) + tl.arange(0, BK // 8)
    offs_k = pid_k * BK + tl.arange(0, BK)
    offs_n = pid_n * BN + tl.arange(0, BN)
    mask_n = offs_n < N
    packed = tl.load(b_ptr + offs_k8[:, None] * stride_bk + offs_n[None, :] * stride_bn,
                     mask=mask_n[None, :], other=0)
    codes = (packed[:, None, :] >> (tl.arange(0, 8) * 4)[None, :, None]) & 0xF
    w = tl.reshape((codes - 8).to(tl.float16), (BK, BN))
    s = tl.load(s_ptr + (offs_k // GROUP)[:, None] * stride_sg + offs_n[None, :] * stride_sn,
                mask=mask_n[None, :], other=0.0)
    tl.store(w_ptr + offs_k[:, None] * stride_wk + offs_n[None, :] * stride_wn, w * s,
             mask=mask_n[None, :])
