"""A process for Nsight Compute to profile: one variant launched a few times on one key.

    ncu --clock-control none -k regex:swapab --launch-skip 3 --launch-count 1 --section ... \\
        python3 benchmarks/ncu_target.py VARIANT_ID MxKxN [JOINT A_BLOCK]
ncu flushes the caches before each profiled launch (its default --cache-control all), so the
weights come from HBM as they do in the rotated timing.
"""
import sys

import torch

from tunesearch.bench import CheckInputs
from tunesearch.variants import Variant, matmul
from tunesearch.variants.api import _kernel_call
from tunesearch.variants.swapab import swapab_kernel


def main(vid, key, forms):
    M, K, N = (int(x) for x in key.split("x"))
    variant = Variant.from_id(vid)
    inputs = CheckInputs(M, N, K, 128, "cuda")
    for _ in range(6):
        if variant.family == "swapab" and forms:
            _, grid, args, meta = _kernel_call(variant, inputs.a, inputs.packed, inputs.scales, inputs.out, 128)
            swapab_kernel[grid](*args, **{**meta, "JOINT": int(forms[0]), "A_BLOCK": int(forms[1])})
        else:
            matmul(inputs.a, inputs.packed, inputs.scales, variant, 128, out=inputs.out)
    torch.cuda.synchronize()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3:])
