"""The peers a user would pick instead, timed with the same harness (CUDA graph, rotation)."""
from __future__ import annotations

import torch

from .bench import Timing, copies_to_defeat_l2, graph_time


def time_tinygemm(M: int, N: int, K: int, group_size: int, l2_bytes: int, replays: int = 20) -> Timing:
    """PyTorch's int4 tinygemm: bf16 activations, symmetric codes with zero points 0."""
    nbytes = K * N // 2 + (K // group_size) * N * 4 + M * K * 2 + M * N * 2
    copies = []
    for _ in range(copies_to_defeat_l2(nbytes, l2_bytes)):
        q = torch.randint(0, 16, (N, K), dtype=torch.int32, device="cuda")
        w_u8 = ((q[:, ::2] << 4) | q[:, 1::2]).to(torch.uint8)
        packed = torch.ops.aten._convert_weight_to_int4pack(w_u8, 8)
        sz = torch.zeros(K // group_size, N, 2, dtype=torch.bfloat16, device="cuda")
        sz[..., 0] = torch.rand(K // group_size, N, device="cuda") * 0.01
        a = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
        copies.append((a, packed, sz))
    return graph_time([lambda c=c: torch.ops.aten._weight_int4pack_mm(c[0], c[1], group_size, c[2])
                       for c in copies], replays)


def time_naive_triton(M: int, N: int, K: int, group_size: int, l2_bytes: int, replays: int = 20) -> Timing:
    """The naive autotuned Triton kernel (``tunesearch.naive``) on tunesearch's own layout."""
    from .bench import Operands
    from .naive import naive_matmul

    ops = Operands(M, N, K, group_size, l2_bytes)
    return graph_time([lambda c=c: naive_matmul(c[0], c[1], c[2], group_size, out=c[3]) for c in ops.copies],
                      replays)


def time_gemlite(M: int, N: int, K: int, group_size: int, l2_bytes: int, replays: int = 20) -> Timing | None:
    """gemlite's Triton W4A16 layer, when it is installed; None otherwise."""
    try:
        from gemlite.core import DType, GemLiteLinearTriton
    except ImportError:
        return None
    nbytes = K * N // 2 + M * K * 2 + M * N * 2
    layers = []
    for _ in range(copies_to_defeat_l2(nbytes, l2_bytes)):
        layer = GemLiteLinearTriton(W_nbits=4, group_size=group_size, in_features=K, out_features=N,
                                    input_dtype=DType.FP16, output_dtype=DType.FP16)
        w_q = torch.randint(0, 16, (N, K), dtype=torch.uint8, device="cuda")
        scales = (torch.rand(N, K // group_size, device="cuda") * 0.01).half()
        layer.pack(w_q, scales, 8, None)
        layers.append((layer, torch.randn(M, K, device="cuda", dtype=torch.float16)))
    return graph_time([lambda c=c: c[0](c[1]) for c in layers], replays)
