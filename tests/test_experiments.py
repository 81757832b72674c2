"""The GPU diagnostics' correct forms must compute A @ W, or their timings mean nothing: each on the
interpreter, with split-K tails shared by several splits and the masking edges."""
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.experiments import gemv_anatomy, swapab_anatomy  # noqa: E402
from tunesearch.bench import CheckInputs, relative_error  # noqa: E402


@pytest.mark.parametrize("handshake", [1, 2, 3])
def test_gemv_anatomy_tails_compute_a_times_w(handshake, kernel_device):
    M, K, N = 2, 384, 200  # N tail; 6 blocks of 64 in 4 ragged splits
    inputs = CheckInputs(M, N, K, 128, "cpu", seed=handshake)
    args = [t.to(kernel_device) for t in (inputs.a, inputs.packed, inputs.scales)]
    out = torch.full((M, N), float("nan"), dtype=torch.float16, device=kernel_device)
    gemv_anatomy.anatomy_launcher(*args, out, BN=64, BK=64, SPLIT_K=4, num_warps=2, STAGES=2, COMPUTE=True,
                                  HANDSHAKE=handshake)()
    assert relative_error(out.cpu(), inputs.ref) < 2e-3


@pytest.mark.parametrize("handshake", [1, 2, 3])
def test_swapab_anatomy_tails_compute_a_times_w(handshake, kernel_device):
    M, K, N = 17, 640, 72  # two M tiles, N tail, 5 blocks in 2, 2, 1 and an empty split
    inputs = CheckInputs(M, N, K, 128, "cpu", seed=10 + handshake)
    args = [t.to(kernel_device) for t in (inputs.a, inputs.packed, inputs.scales)]
    out = torch.full((M, N), float("nan"), dtype=torch.float16, device=kernel_device)
    swapab_anatomy.anatomy_launcher(*args, out, BM=16, BN=64, SPLIT_K=4, num_warps=4, num_stages=3, PLANES=8,
                                    HANDSHAKE=handshake)()
    assert relative_error(out.cpu(), inputs.ref) < 2e-3


def test_the_timing_only_forms_are_wrong_so_they_are_never_shipped(kernel_device):
    # one plane of eight, or no split-K reduction, cannot compute A @ W: the probe's check would say so
    M, K, N = 3, 256, 64
    inputs = CheckInputs(M, N, K, 128, "cpu", seed=5)
    args = [t.to(kernel_device) for t in (inputs.a, inputs.packed, inputs.scales)]
    for planes, handshake in ((1, 1), (8, 0)):
        out = torch.zeros((M, N), dtype=torch.float16, device=kernel_device)
        swapab_anatomy.anatomy_launcher(*args, out, BM=16, BN=64, SPLIT_K=2, num_warps=4, num_stages=3,
                                        PLANES=planes, HANDSHAKE=handshake)()
        assert relative_error(out.cpu(), inputs.ref) > 0.1
