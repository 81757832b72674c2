"""The experiment the next GPU run times (benchmarks/planes_probe.py) must compute A @ W in both
layouts, or its timings mean nothing."""
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.planes_probe import launcher, to_planes16  # noqa: E402
from tunesearch.variants import Variant, dequantize, quantize_pack, unpack  # noqa: E402


def test_planes16_repack_moves_each_code_where_the_layout_says():
    packed, _ = quantize_pack(torch.randn(256, 8, generator=torch.Generator().manual_seed(0)), 128)
    base, planes = unpack(packed), unpack(to_planes16(packed))  # planes: row 8r + j of unpack is nibble j of r
    for kb in (0, 128):
        for r in range(16):
            for j in range(8):
                assert torch.equal(planes[kb + 8 * r + j], base[kb + 16 * j + r])


def test_swapab_planes_experiment_matches_the_reference(kernel_device):
    gen = torch.Generator().manual_seed(1)
    M, N, K = 3, 72, 384
    packed, scales = quantize_pack(torch.randn(K, N, generator=gen), 128)
    a = torch.randn(M, K, generator=gen).half()
    ref = a.float() @ dequantize(packed, scales, 128).float()
    for layout, p in ((0, packed), (1, to_planes16(packed))):
        for vid in ("swapab.bm16.bn64.bk128.sk1.w4.s2", "swapab.bm16.bn64.bk128.sk2.w4.s2"):
            out = torch.empty(M, N, dtype=torch.float16, device=kernel_device)
            launcher(Variant.from_id(vid), a.to(kernel_device), p.to(kernel_device),
                     scales.to(kernel_device), out, layout)()
            err = (out.float().cpu() - ref).abs().max().item() / ref.abs().max().item()
            assert err < 2e-3, (vid, layout, err)
