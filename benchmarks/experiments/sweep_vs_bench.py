"""Why the sweep and the bench time one kernel differently at 4096x22016 (NOTES.md row 130).

    python benchmarks/experiments/sweep_vs_bench.py OUT

On the H100 the sweep stored 19.5 us for 4096x22016 M=1's pick (the same-run streaming floor of the bench is
19.5) and cuBLAS fp16 70.4 us, where the bench, same harness functions, times the pick at 22.0 and fp16 at
61.0; at the other shapes the two agree within 2%. 4096x22016's weights (45 MB) are 0.9 of the H100's L2
(50 MB), so 3x the L2 is 4 copies. Each key is timed here, in one process, the ways that differ:
  sweep    the sweep's measurer (CheckInputs and Operands alive, the check run first), then fp16
  ops      a fresh Operands, time_variant (no check, no CheckInputs)
  mm       the bench's path: the dispatcher's call over a fresh Operands
  ops x3   time_variant over 3x the copies (9x the L2)
  floor    the streaming read of one copy's bytes
each three times in turn. Writes OUT/sweep_vs_bench.json; prints a table."""
import json
import sys

import torch

from tunesearch import load_dispatch
from tunesearch.bench import Operands, copies_to_defeat_l2, graph_time, kernel_bytes, time_fp16, time_variant
from tunesearch.gpu import gpu_info, measure_copy_bandwidth, stream_read_floor
from tunesearch.measure import GPUMeasurer

KEYS = [(4096, 22016, 1), (4096, 22016, 8), (4096, 22016, 64), (4096, 12288, 1), (4096, 11008, 1)]
G = 128


def main(out):
    info = gpu_info(0)
    bw = measure_copy_bandwidth(0)
    mm = load_dispatch()
    dev = torch.device("cuda")
    rows = []
    for K, N, M in KEYS:
        layout = mm.layout_for(N, K, dev)
        (_, variant), = mm.plan(M, N, K, dev, layout)
        row = dict(K=K, N=N, M=M, variant=variant.id, **{k: [] for k in ("sweep", "sweep_fp16", "ops", "mm",
                                                                          "ops_x3", "bench_fp16", "floor")})
        for _ in range(3):
            meas = GPUMeasurer(0, info, bw)
            meas.prepare(M, N, K, G, layout)
            row["sweep"].append(meas.measure(variant).us)
            row["sweep_fp16"].append(meas.fp16_us(M, N, K))
            meas.release()
            ops = Operands(M, N, K, G, info.l2_bytes, layout=layout)
            row["ops"].append(time_variant(variant, ops, 20).us)
            row["mm"].append(graph_time([lambda c=c: mm(c[0], c[1], c[2]) for c in ops.copies], 20).us)
            del ops
            ops = Operands(M, N, K, G, 3 * info.l2_bytes, layout=layout)
            row["ops_x3"].append(time_variant(variant, ops, 20).us)
            del ops
            torch.cuda.empty_cache()
            row["bench_fp16"].append(time_fp16(M, N, K, info.l2_bytes, 20).us)
            row["floor"].append(stream_read_floor(kernel_bytes(1, N, K, G), info.l2_bytes, info.sm_count, 20).us)
        row["copies"] = copies_to_defeat_l2(kernel_bytes(M, N, K, G), info.l2_bytes)
        rows.append(row)
        print(f"{K}x{N} M={M} {variant.id}: " + "  ".join(
            f"{k} {' '.join(f'{v:.1f}' for v in row[k])}" for k in ("sweep", "ops", "mm", "ops_x3", "floor",
                                                                   "sweep_fp16", "bench_fp16")), flush=True)
    json.dump(dict(gpu=info.to_dict(), copy_bandwidth=bw, rows=rows), open(f"{out}/sweep_vs_bench.json", "w"),
              indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
