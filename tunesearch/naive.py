"""The naive peer: the Triton matmul tutorial with an int4 unpack in its K loop, tuned by
``@triton.autotune`` over the tutorial's kind of configs. What a user writes first; the bar the
brief measured at ~76 us for 4096x11008 at M=1 on the H200. Not one of tunesearch's variants:
``tunesearch bench`` times it beside them.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

CONFIGS = [triton.Config(dict(BM=bm, BN=bn, BK=bk), num_warps=w, num_stages=s)
           for bm, bn, bk, w, s in ((16, 64, 64, 4, 3), (32, 64, 64, 4, 3), (64, 64, 64, 4, 3),
                                    (64, 128, 64, 4, 3), (128, 128, 32, 8, 3), (128, 256, 64, 8, 3))]


@triton.jit
def naive_w4a16_kernel(a_ptr, b_ptr, s_ptr, c_ptr, M, N, K,
                       stride_am, stride_ak, stride_bk, stride_bn, stride_sg, stride_sn,
                       stride_cm, stride_cn,
                       GROUP: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BM + tl.arange(0, BM)
    offs_n = pid_n * BN + tl.arange(0, BN)
    offs_k = tl.arange(0, BK)
    acc = tl.zeros([BM, BN], dtype=tl.float32)
    for k in range(0, K, BK):
        kk = k + offs_k
        a = tl.load(a_ptr + offs_m[:, None] * stride_am + kk[None, :] * stride_ak,
                    mask=offs_m[:, None] < M, other=0.0)
        packed = tl.load(b_ptr + (kk // 8)[:, None] * stride_bk + offs_n[None, :] * stride_bn,
                         mask=offs_n[None, :] < N, other=0)
        q = (packed >> ((kk % 8) * 4)[:, None]) & 0xF
        s = tl.load(s_ptr + (kk // GROUP)[:, None] * stride_sg + offs_n[None, :] * stride_sn,
                    mask=offs_n[None, :] < N, other=0.0)
        acc = tl.dot(a, (q - 8).to(tl.float16) * s, acc)
    tl.store(c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn, acc.to(tl.float16),
             mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


naive_w4a16_autotuned = triton.autotune(configs=CONFIGS, key=["M", "N", "K"])(naive_w4a16_kernel)


def naive_matmul(a: torch.Tensor, packed: torch.Tensor, scales: torch.Tensor, group_size: int = 128,
                 out: torch.Tensor | None = None, config: dict | None = None) -> torch.Tensor:
    """C = a @ dequantize(packed, scales) by the naive kernel; ``config`` (BM, BN, BK, num_warps,
    num_stages) skips the autotuner (the interpreter cannot time configs). K must be a multiple of 64."""
    M, K = a.shape
    N = packed.shape[1]
    if out is None:
        out = torch.empty(M, N, dtype=torch.float16, device=a.device)
    args = (a, packed, scales, out, M, N, K, a.stride(0), a.stride(1), packed.stride(0), packed.stride(1),
            scales.stride(0), scales.stride(1), out.stride(0), out.stride(1))
    if config is None:
        grid = lambda meta: (triton.cdiv(M, meta["BM"]), triton.cdiv(N, meta["BN"]))  # noqa: E731
        naive_w4a16_autotuned[grid](*args, GROUP=group_size)
    else:
        grid = (triton.cdiv(M, config["BM"]), triton.cdiv(N, config["BN"]))
        naive_w4a16_kernel[grid](*args, GROUP=group_size, **config)
    return out
