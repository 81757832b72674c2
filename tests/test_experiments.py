"""The experiment the next GPU run times (benchmarks/experiments/cat_probe.py) must compute A @ W, or
its timings mean nothing: the one-dot swapab on the interpreter, with every masking edge."""
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.experiments.cat_probe import launcher  # noqa: E402
from benchmarks.experiments.swapab_cat import swapab_cat_kernel  # noqa: E402
from tunesearch.bench import CheckInputs, relative_error  # noqa: E402
from tunesearch.variants import Variant  # noqa: E402


@pytest.mark.parametrize("M,K,N,vid", [
    (3, 384, 200, "swapab.bm16.bn64.bk128.sk2.w4.s3"),    # M and N tails, 3 blocks in 2 splits
    (40, 256, 128, "swapab.bm32.bn64.bk128.sk1.w4.s3"),   # two M tiles, the second partial
    (17, 640, 72, "swapab.bm16.bn64.bk128.sk4.w4.s3"),    # 5 blocks in 2, 2, 1 and an empty split
])
def test_one_dot_swapab_matches_the_reference(M, K, N, vid, kernel_device):
    inputs = CheckInputs(M, N, K, 128, "cpu", seed=M)
    args = [t.to(kernel_device) for t in (inputs.a, inputs.packed, inputs.scales)]
    out = torch.full((M, N), float("nan"), dtype=torch.float16, device=kernel_device)
    launcher(swapab_cat_kernel, Variant.from_id(vid), (*args, out))()
    assert relative_error(out.cpu(), inputs.ref) < 2e-3
