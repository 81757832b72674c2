"""How long a launch's last, partly filled wave takes (NOTES.md row 125): the scheduler model gives every
wave of a launch its bucket time over its waves, but at 4096x12288 the M=384 pick (576 CTAs, two an SM:
waves of 264, 264 and 48) took 66.7 us alone where M=450 on the same variant (768 CTAs: 264, 264, 240) took
77.8, so its last wave, one CTA an SM on 48 SMs, ran in about 15 us against about 26 for a full one.

    python benchmarks/experiments/wave_times.py OUT [K,N,VARIANT,M:M:... ...]   # default: CASES

Times fixed launches (the first launches of the side-by-side plans the model missed) over M, one token tile
more each step, on the sweep's harness (frag32 weights, rotation past L2, CUDA-graph replay, least of
three medians); prints each with its CTAs, waves and last wave's CTAs. Writes OUT/wave_times.json."""
import json
import sys

import torch

from tunesearch.bench import Operands, time_variant
from tunesearch.gpu import gpu_info
from tunesearch.variants import Variant
from tunesearch.variants.space import launch_waves

CASES = [  # (K, N, variant, Ms): token tiles 1, 2, ... of the variant's BM
    (4096, 12288, "rsmma.bm128.bn64.bk128.sk1.w4.s3.c2", [128, 256, 384, 450, 512, 640]),
    (4096, 11008, "rsmma.bm128.bn64.bk64.sk1.w4.s4.c2", [128, 256, 384, 512]),
    (4096, 22016, "rsmma.bm256.bn128.bk64.sk1.w8.s5", [256, 512, 768, 1024, 1280]),
    (4096, 4096, "rsmma.bm256.bn128.bk64.sk1.w8.s5", [768, 1024, 1280, 1536, 2048, 2304]),
]


def main(out, cases=CASES):
    info = gpu_info(0)
    rows = []
    for K, N, vid, ms in cases:
        v = Variant.from_id(vid)
        for M in ms:
            ctas, at_once = launch_waves(v.family, v.params, M, N, K, info.sm_count)
            waves = -(-ctas // at_once)
            ops = Operands(M, N, K, 128, info.l2_bytes, layout="frag32")
            us = min(time_variant(v, ops).us for _ in range(3))
            rows.append(dict(K=K, N=N, M=M, variant=vid, ctas=ctas, at_once=at_once, us=us))
            print(f"{K}x{N} M={M:5d} {vid:36s} {ctas:5d} CTAs, {waves} waves, last {ctas - (waves - 1) * at_once:4d}"
                  f": {us:8.2f} us", flush=True)
            del ops
            torch.cuda.empty_cache()
    json.dump(dict(gpu=info.name, torch=torch.__version__, rows=rows), open(f"{out}/wave_times.json", "w"), indent=1)


def case(arg):
    K, N, vid, ms = arg.split(",")
    return int(K), int(N), vid, [int(m) for m in ms.split(":")]


if __name__ == "__main__":
    main(sys.argv[1], [case(arg) for arg in sys.argv[2:]] or CASES)
