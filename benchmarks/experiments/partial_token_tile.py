"""Does a token tile that M fills only in part cost more than a full one? The _s39 re-sweep timed M=64's
pick (bm32, one split) at M=48 at 20.2 us against 17.2 at M=64 on 4096x11008: the same grid and blocks,
only rows 48..63 of the second token tile past A's and C's edge. Times fixed launches over M on the
sweep's harness (frag32 weights, rotation past L2, CUDA-graph replay, median of 3 runs). The s4 against
s8 rings of one bm32 launch ask whether the cost is the zero-filled rows as such or the latency of a box
that carries them (a deeper ring would hide latency, not extra work).

    python benchmarks/experiments/partial_token_tile.py OUT_DIR [TAG]   # writes partial_token_tile[TAG].json
"""
import json
import statistics
import sys

import torch

from tunesearch.bench import Operands, time_variant
from tunesearch.gpu import gpu_info
from tunesearch.variants import Variant

CASES = [  # (K, N, variant, Ms)
    (4096, 11008, "rsmma.bm32.bn64.bk128.sk1.w4.s4.c3", [33, 40, 47, 48, 49, 56, 63, 64]),
    (4096, 11008, "rsmma.bm64.bn64.bk128.sk1.w4.s4.c2", [40, 48, 64]),
    (4096, 12288, "rsmma.bm32.bn64.bk128.sk1.w4.s4.c3", [48, 64]),
    (4096, 11008, "rsmma.bm16.bn64.bk128.sk2.w4.s5.c3", [9, 16]),
    (4096, 11008, "rsmma.bm8.bn64.bk128.sk2.w4.s6.c3", [1, 8]),
    (4096, 11008, "rsmma.bm32.bn64.bk128.sk1.w4.s4.c2", [33, 48, 64]),
    (4096, 11008, "rsmma.bm32.bn64.bk128.sk1.w4.s8.c2", [33, 48, 64]),
    (4096, 11008, "rsmma.bm32.bn64.bk128.sk2.w4.s4.c3", [17, 24, 32]),
    # the larger tiles of the M=96 and 192 buckets' _s39 picks (row 86: 8-row boxes lost there)
    (4096, 11008, "rsmma.bm64.bn64.bk128.sk1.w4.s6", [65, 80, 96, 128]),
    (4096, 11008, "rsmma.bm128.bn128.bk64.sk1.w8.s8", [65, 96, 128]),
    (4096, 11008, "rsmma.bm256.bn128.bk64.sk1.w8.s4", [129, 192, 256]),
]


def main(out_dir, tag=""):
    info = gpu_info(0)
    rows = []
    for K, N, vid, ms in CASES:
        v = Variant.from_id(vid)
        for M in ms:
            ops = Operands(M, N, K, 128, info.l2_bytes, layout="frag32")
            us = statistics.median(time_variant(v, ops).us for _ in range(3))
            rows.append(dict(K=K, N=N, M=M, variant=vid, us=us))
            print(f"{K}x{N} M={M:3d} {vid:40s} {us:7.2f} us", flush=True)
            del ops
            torch.cuda.empty_cache()
    json.dump(dict(gpu=info.name, rows=rows), open(f"{out_dir}/partial_token_tile{tag}.json", "w"), indent=1)


if __name__ == "__main__":
    main(*sys.argv[1:3])
