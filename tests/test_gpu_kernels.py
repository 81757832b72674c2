"""The kernel families on a CUDA GPU, at llama shapes, over a sample of each variant space."""
import random

import pytest

from tunesearch.bench import check_variant
from tunesearch.variants import FAMILIES, heuristic_variants, variant_space

SHAPES = [(1, 4096, 4096), (7, 4096, 11008), (33, 11008, 4096), (512, 4096, 4096), (1, 4096, 4160),
          (1, 4096, 12288), (4, 4096, 22016), (16, 11008, 4096), (64, 4096, 11008)]
PER_FAMILY = 5


@pytest.fixture(scope="module")
def compiler():
    from tunesearch.compile import Compiler

    with Compiler(0) as pool:
        yield pool


@pytest.mark.gpu
@pytest.mark.parametrize("M,K,N", SHAPES)
def test_families_on_gpu(M, K, N, compiler):
    rng = random.Random(f"{M}-{K}-{N}")
    space = variant_space(M, N, K, 128, device=0)
    checked = list(heuristic_variants(M, N, K, 128, device=0))
    for family in FAMILIES:
        members = [v for v in space if v.family == family]
        checked += rng.sample(members, min(PER_FAMILY, len(members)))
    checked = list(dict.fromkeys(checked))
    compile_errors = compiler.compile([v.id for v in checked], M, N, K, 128)
    failures = [f"{vid}: {err}" for vid, err in compile_errors.items() if err]
    for variant in checked:
        try:
            check_variant(variant, M, N, K, 128, seed=rng.randrange(2**31))
        except AssertionError as exc:
            failures.append(str(exc))
    print(f"M={M} K={K} N={N}: {len(checked)} variants checked")
    assert not failures, "\n".join(failures)
