"""Does where the rotated copies sit in memory move a kernel's time? (NOTES.md row 130)

    python benchmarks/experiments/placement_probe.py OUT

sweep_vs_bench.py found 4096x22016 M=1's pick at 19.5 us over a fresh Operands and 22.0 in the bench (every
run) and in the sweep's measurer (two of three): same kernel, same copies' count (4, 3x the H100's L2), the
difference being what was allocated and freed before. Here the four copies are placed four ways, each
timed by time_variant, three rounds alternated:
  fresh    empty_cache, then Operands: each tensor a cudaMalloc of its own
  carved   a 400 MB tensor allocated and freed first, so the copies are carved from one cached segment
  bench    Operands, then CheckInputs (as measure_row builds them), timed over the Operands
  slab     one int32 slab holding the four packed copies end to end (views), the rest fresh
  alive45  fresh, then a 45 MB int32 tensor kept alive while timing (CheckInputs' packed copy)
  alive360 fresh, then a 360 MB fp32 tensor kept alive (CheckInputs' fp32 weights, which it frees)
  freed720 fresh, then 720 MB allocated and freed (reserved by the caching allocator, unused)
  benchdel bench, the CheckInputs deleted before timing
and, after a fresh Operands, one step of CheckInputs at a time (BISECT=1: those modes alone, with fresh and
benchdel): qpack (randn weights, quantize_pack), deq (and dequantize), ref (and the fp32 reference matmul),
frag (qpack and the frag32 repack), check (a whole CheckInputs and the variant's check on it, as the sweep's
measurer does before each timing).
Prints each copy's packed address (MB, and mod 2 MB); writes OUT/placement_probe.json."""
import json
import os
import sys
import time

import torch

from tunesearch import load_dispatch
from tunesearch.bench import CheckInputs, Operands, kernel_bytes, time_fp16, time_variant
from tunesearch.gpu import gpu_info, stream_read_floor
from tunesearch.variants import dequantize, quantize_pack
from tunesearch.variants.layout import to_layout

K, N, M, G = 4096, 22016, 1, 128
VARIANT = [None]


def the_pick():
    """(GPU info, the packaged dispatch, 4096x22016's layout, its M=1 variant) on this GPU."""
    info, mm, dev = gpu_info(0), load_dispatch(), torch.device("cuda")
    layout = mm.layout_for(N, K, dev)
    (_, variant), = mm.plan(M, N, K, dev, layout)
    return info, mm, layout, variant


def map_gb(extra_mb=0):
    """About 2.9 GB newly allocated (in quantize_pack's temporaries' sizes) and freed to the caching
    allocator, which keeps them mapped."""
    blocks = [torch.empty(size << 20, dtype=torch.uint8, device="cuda")
              for size in (360, 720, 720, 720, 360) + ((extra_mb,) if extra_mb else ())]
    del blocks


def placed(how, info, layout):
    torch.cuda.empty_cache()
    keep = None
    if how == "carved":
        big = torch.empty(400 << 20, dtype=torch.uint8, device="cuda")
        del big
    ops = Operands(M, N, K, G, info.l2_bytes, layout=layout)
    if how == "bench":  # (benchdel: built and dropped below)
        keep = CheckInputs(M, N, K, G, "cuda", layout=layout)
    if how == "slab":
        shape = ops.copies[0][1].shape
        slab = torch.randint(-2**31, 2**31 - 1, (len(ops.copies) * shape[0], shape[1]), dtype=torch.int32,
                             device="cuda")
        ops.copies = [(a, slab[i * shape[0]:(i + 1) * shape[0]], s, o) for i, (a, _, s, o) in enumerate(ops.copies)]
    if how == "alive45":
        keep = torch.empty(K // 8, N, dtype=torch.int32, device="cuda")
    if how == "alive360":
        keep = torch.randn(K, N, device="cuda")
    if how == "freed720":
        big = torch.randn(2 * K, N, device="cuda")
        del big
    if how == "benchdel":
        CheckInputs(M, N, K, G, "cuda", layout=layout)
    if how in ("qpack", "qsleep01", "qsleep1"):  # a transient? the same work, then a pause before timing
        quantize_pack(torch.randn(K, N, device="cuda"), G)
        torch.cuda.synchronize()
        time.sleep(0.1 if how == "qsleep01" else 1.0 if how == "qsleep1" else 0)
    if how == "qempty":  # quantize_pack's freed blocks handed back to the driver before timing
        quantize_pack(torch.randn(K, N, device="cuda"), G)
        torch.cuda.empty_cache()
    if how in ("reserve3g", "reserve3g_empty"):  # 3 GB more mapped, in quantize_pack's sizes, then freed
        map_gb(extra_mb=45)
        if how == "reserve3g_empty":
            torch.cuda.empty_cache()
    if how == "heavy":  # any memory-heavy elementwise work, or quantize_pack's own?
        x = torch.randn(K, N, device="cuda")
        for _ in range(10):
            x = x * 2 + 1
        del x
    if how == "int64":
        torch.randint(0, 16, (K, N), dtype=torch.int64, device="cuda").sum()
    if how in ("deq", "ref", "frag"):
        packed, scales = quantize_pack(torch.randn(K, N, device="cuda"), G)
        if how in ("deq", "ref"):
            w16 = dequantize(packed, scales, G)
            if how == "ref":
                torch.randn(M, K, device="cuda").half().float() @ w16.float()
        if how == "frag":
            to_layout(packed, layout)
    if how == "check":
        CheckInputs(M, N, K, G, "cuda", layout=layout).check(VARIANT[0])
    torch.cuda.synchronize()
    return ops, keep


def main(out):
    info, _, layout, variant = the_pick()
    VARIANT[0] = variant
    modes = ("fresh", "carved", "bench", "slab", "alive45", "alive360", "freed720", "benchdel")
    if os.environ.get("BISECT"):
        modes = ("fresh", "benchdel", "qpack", "deq", "ref", "frag", "check")
    if os.environ.get("MODES"):
        modes = tuple(os.environ["MODES"].split(","))
    results = {h: [] for h in modes}
    for rnd in range(3):
        for how in results:
            ops, keep = placed(how, info, layout)
            us = time_variant(variant, ops, 20).us
            fp16 = time_fp16(M, N, K, info.l2_bytes, 20).us  # cuBLAS and a bare read, in the same state
            floor = stream_read_floor(kernel_bytes(1, N, K, G), info.l2_bytes, info.sm_count, 20).us
            ptrs = [c[1].data_ptr() for c in ops.copies]
            results[how].append(dict(us=us, fp16_us=fp16, floor_us=floor, packed_mb=[p / 2**20 for p in ptrs],
                                     scales_mb=[c[2].data_ptr() / 2**20 for c in ops.copies]))
            print(f"round {rnd} {how:>6}: {us:5.1f} us (fp16 {fp16:5.1f}, floor {floor:5.1f})  packed at " +
                  " ".join(f"{(p - ptrs[0]) / 2**20:+.1f}MB(%{p % (2 << 20) / 2**20:.2f})" for p in ptrs),
                  flush=True)
            del ops, keep
    print(variant.id, {h: [round(r["us"], 2) for r in v] for h, v in results.items()})
    json.dump(dict(gpu=info.to_dict(), variant=variant.id, results=results),
              open(f"{out}/placement_probe.json", "w"), indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
