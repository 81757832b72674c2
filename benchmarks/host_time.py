"""Host time per call of the dispatcher against Triton's own launch of the same variant, at M=1 (and any
M given), for the packaged table's picks: `python benchmarks/host_time.py OUT_DIR [M,...]` on a GPU.
The bench measures the same for its first shape (`python_overhead_us`); this one covers every llama-7b
shape, so the Gluon launcher's path (NOTES.md row 69) is seen on each family and layout the table uses.
"""
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tunesearch import load_dispatch  # noqa: E402
from tunesearch.benchmark import python_overhead_us  # noqa: E402
from tunesearch.gpu import gpu_info  # noqa: E402
from tunesearch.shapes import parse_shapes  # noqa: E402


def main(out_dir, ms=(1,)):
    mm = load_dispatch()
    rows = []
    for K, N in parse_shapes("llama-7b"):
        for M in ms:
            variant = mm.resolve(M, N, K, torch.device("cuda"))
            row = dict(K=K, N=N, M=M, variant=variant.id, **python_overhead_us(mm, K, N, M=M))
            rows.append(row)
            print(f"{K}x{N} M={M} {variant.id}: mm {row['dispatch']:.1f} us, Triton's launch "
                  f"{row['triton_launch']:.1f} us", flush=True)
    with open(f"{out_dir}/host_time.json", "w") as f:
        json.dump(dict(gpu=gpu_info(0).to_dict(), rows=rows), f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1], tuple(int(m) for m in sys.argv[2].split(",")) if len(sys.argv) > 2 else (1,))
