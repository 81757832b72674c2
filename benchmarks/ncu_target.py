"""A process for Nsight Compute to profile: one variant launched a few times on one key.

    ncu --clock-control none -k regex:swapab --launch-skip 3 --launch-count 1 --section ... \\
        python3 benchmarks/ncu_target.py VARIANT_ID MxKxN [k16|k32|frag32]
With k16 or k32 a swapab variant runs as the layout experiment's kernel on weights repacked to that
layout (benchmarks/experiments/layout_k16.py); with frag32 an rsmma variant on weights repacked to frag32
(benchmarks/experiments/frag32.py). ncu flushes the caches before each profiled launch
(its default --cache-control all), so the weights come from HBM as they do in the rotated timing.
"""
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tunesearch.bench import CheckInputs  # noqa: E402
from tunesearch.variants import Variant, matmul  # noqa: E402


def main(vid, key, layout=None):
    M, K, N = (int(x) for x in key.split("x"))
    variant = Variant.from_id(vid)
    inputs = CheckInputs(M, N, K, 128, "cuda")
    if layout == "frag32":  # an rsmma variant on weights repacked to frag32 (benchmarks/experiments/frag32.py)
        from benchmarks.experiments.frag32 import frag32_launch

        launch = frag32_launch(variant)(inputs.a, inputs.packed, inputs.scales, inputs.out)
    elif layout:
        from benchmarks.experiments.layout_k16 import planes_launcher, repack_planes

        plane = {"k16": 16, "k32": 32}[layout]
        p = variant.params
        launch = planes_launcher(inputs.a, repack_planes(inputs.packed, plane), inputs.scales, inputs.out, BM=p["BM"],
                              BN=p["BN"], SPLIT_K=p["SPLIT_K"], num_warps=p["num_warps"],
                              num_stages=p["num_stages"], plane=plane)
    else:
        def launch():
            matmul(inputs.a, inputs.packed, inputs.scales, variant, 128, out=inputs.out)
    for _ in range(6):
        launch()
    torch.cuda.synchronize()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], *sys.argv[3:4])
