"""Dequantize weights stored in layout frag32 (layout.py) into an fp16 workspace: the dequant family's
first pass for a shape whose table keeps its weights in frag32 (above the crossover, cuBLAS then
multiplies, as for the base layout). Its own source, so its trials are keyed apart from the Triton
families' (tunesearch.search.LAYOUT_SOURCES).
"""
import triton
import triton.language as tl


@triton.jit
def dequant_frag32_kernel(
    # pointers: frag32 int32 [K/32, 4N], scales fp16 [K/G, N], W fp16 [K, N]
    b_ptr, s_ptr, w_ptr,
    N,
    stride_bc, stride_sg, stride_sn, stride_wk, stride_wn,
    GROUP: tl.constexpr, BK: tl.constexpr, BN: tl.constexpr,
):
    pid_k = tl.program_id(0)
    pid_n = tl.program_id(1)
    C: tl.constexpr = BK // 32
    offs_c = pid_k * C + tl.arange(0, C)
    offs_w = pid_n * 4 * BN + tl.arange(0, 4 * BN)  # the tile's words: 4 per column
    words = tl.load(b_ptr + offs_c[:, None] * stride_bc + offs_w[None, :], mask=offs_w[None, :] < 4 * N, other=0)
    codes = (words[:, :, None] >> (tl.arange(0, 8) * 4)[None, None, :]) & 0xF  # [C, 4BN, nibble]
    # word 8p + 2t + h is column 2p + h, thread t; nibble i0 + 2 i1 + 4e is k = 16 i1 + 8 i0 + 2t + e
    codes = tl.reshape(codes, (C, BN // 2, 4, 2, 2, 2, 2))  # [c, p, t, h, e, i1, i0]
    codes = tl.permute(codes, (0, 5, 6, 2, 4, 1, 3))  # [c, i1, i0, t, e, p, h]
    w = tl.reshape((codes - 8).to(tl.float16), (BK, BN))
    offs_k = pid_k * BK + tl.arange(0, BK)
    offs_n = pid_n * BN + tl.arange(0, BN)
    mask_n = offs_n < N
    s = tl.load(s_ptr + (offs_k // GROUP)[:, None] * stride_sg + offs_n[None, :] * stride_sn,
                mask=mask_n[None, :], other=0.0)
    tl.store(w_ptr + offs_k[:, None] * stride_wk + offs_n[None, :] * stride_wn, w * s, mask=mask_n[None, :])
