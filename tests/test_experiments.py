"""The experiments the next GPU run times (benchmarks/experiments/forms_probe.py) must compute A @ W,
or their timings mean nothing: each on the interpreter, with the masking and partition edges."""
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.experiments import gemv_probe  # noqa: E402
from benchmarks.experiments.forms_probe import launcher  # noqa: E402
from benchmarks.experiments.swapab_cat import swapab_cat_kernel  # noqa: E402
from benchmarks.experiments.swapab_streamk import max_slots, streamk_matmul  # noqa: E402
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


@pytest.mark.parametrize("M,K,N,BN,programs", [
    (3, 384, 200, 64, 5),     # 4 tiles x 3 blocks in 5 ranges: tiles shared by 2 programs
    (17, 1280, 130, 64, 9),   # 3 tiles x 10 blocks, two M tiles, N tail
    (5, 384, 256, 128, 11),   # more programs than iterations: one per iteration, 3 per tile
    (2, 512, 64, 64, 1),      # one program walks everything: no tile shared
])
def test_streamk_swapab_matches_the_reference(M, K, N, BN, programs, kernel_device):
    inputs = CheckInputs(M, N, K, 128, "cpu", seed=K + N)
    args = [t.to(kernel_device) for t in (inputs.a, inputs.packed, inputs.scales)]
    out = torch.full((M, N), float("nan"), dtype=torch.float16, device=kernel_device)
    streamk_matmul(*args, out=out, BN=BN, programs=programs)
    assert relative_error(out.cpu(), inputs.ref) < 2e-3


def test_streamk_slots_cover_the_most_programs_on_one_tile():
    assert max_slots(tiles=4, blocks=3, programs=5) == 2
    assert max_slots(tiles=1, blocks=8, programs=8) == 8
    assert max_slots(tiles=3, blocks=10, programs=1) == 1


@pytest.mark.parametrize("form", ["fields", "pairs"])
@pytest.mark.parametrize("M,K,N,vid", [
    (1, 384, 200, "gemv.bm1.bn64.bk64.sk4.w4.s2"),     # N tail, 6 blocks in 4 ragged splits
    (3, 256, 72, "gemv.bm2.bn64.bk128.sk1.w4.s1"),     # two M tiles, the second half empty
    (5, 512, 64, "gemv.bm4.bn64.bk256.sk2.w4.s2"),     # BK > G: one scale row per k8 row
])
def test_gemv_fields_matches_the_reference(form, M, K, N, vid, kernel_device):
    inputs = CheckInputs(M, N, K, 128, "cpu", seed=M + K)
    args = [t.to(kernel_device) for t in (inputs.a, inputs.packed, inputs.scales)]
    out = torch.full((M, N), float("nan"), dtype=torch.float16, device=kernel_device)
    gemv_probe.launcher(form, Variant.from_id(vid), (*args, out))()
    assert relative_error(out.cpu(), inputs.ref) < 2e-3
