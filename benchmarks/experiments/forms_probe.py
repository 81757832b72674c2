"""Time the swapab experiments against the shipped swapab on the GPU.

    python benchmarks/experiments/forms_probe.py OUT_DIR [MxKxN,...]
Forms: `planes` (the shipped kernel), `cat` (swapab_cat.py: one K=BK dot per block) and, at M <= 64,
`streamk` (swapab_streamk.py: a persistent grid of P = 132, 264 or 396 programs walking the flattened
tiles x K blocks, BN 64 and 128).
Per key, a handful of swapab configurations (the sweep's fastest for the nearest M where the family
ran, and a small grid around the shapes each form favours, BM up to 128 for M >= 128, where the
shipped swapab is not in the space and the table routes to dequantize-then-cuBLAS) are checked
against A @ dequantize(W), then timed in both forms with the sweep's harness (CUDA graph, operands
rotated past L2). cuBLAS fp16 and the packaged table's own choice are timed beside them. Writes
OUT_DIR/forms_probe.json; prints one line per key.
"""
import glob
import gzip
import json
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # so that it runs as a script from anywhere

from benchmarks.experiments.swapab_cat import swapab_cat_kernel  # noqa: E402
from benchmarks.experiments.swapab_streamk import streamk_launcher  # noqa: E402
from tunesearch.bench import REL_TOL, CheckInputs, Operands, graph_time, relative_error, time_fp16  # noqa: E402
from tunesearch.dispatch import load_dispatch  # noqa: E402
from tunesearch.gpu import gpu_info  # noqa: E402
from tunesearch.variants import Variant  # noqa: E402
from tunesearch.variants.api import _kernel_call  # noqa: E402
from tunesearch.variants.swapab import swapab_kernel  # noqa: E402

KEYS = [(1, 4096, 11008), (4, 4096, 11008), (16, 4096, 11008), (32, 4096, 11008), (64, 4096, 11008),
        (128, 4096, 11008), (256, 4096, 11008), (16, 11008, 4096), (64, 11008, 4096), (128, 11008, 4096)]
KERNELS = {"planes": swapab_kernel, "cat": swapab_cat_kernel}


def swept(M, N, K, top=3):
    path = sorted(glob.glob(str(ROOT / "benchmarks/results/trials_llama7b_*.jsonl.gz")))[-1]
    with gzip.open(path, "rt") as f:
        rows = [json.loads(line) for line in f]
    rows = [r for r in rows if r["family"] == "swapab" and (r["n"], r["k"]) == (N, K) and r["status"] == "ok"]
    if not rows:
        return []
    m = min({r["m"] for r in rows}, key=lambda x: (abs(x - M), x))
    return [r["variant_id"] for r in sorted((r for r in rows if r["m"] == m), key=lambda r: r["us"])][:top]


def candidates(M, N, K):
    bms = [bm for bm in (16, 32, 64, 128) if bm <= max(16, M)][-2:]
    grid = [f"swapab.bm{bm}.bn{bn}.bk128.sk{sk}.w4.s3" for bm in bms for bn in (64, 128)
            for sk in ((1, 2) if M >= 128 else (2, 4, 8))]
    return list(dict.fromkeys(swept(M, N, K) + grid))


def streamk_forms(M):
    """(label, launcher config) of the stream-K runs at this M."""
    if M > 64:
        return []
    bm = min(64, max(16, 1 << (M - 1).bit_length()))
    return [(f"bm{bm}.bn{bn}.w4.s3.p{p}", dict(BM=bm, BN=bn, programs=p, num_warps=4, num_stages=3))
            for bn in (64, 128) for p in (132, 264, 396)]


def launcher(kernel, variant, copy):
    a, packed, scales, out = copy
    _, grid, args, meta = _kernel_call(variant, a, packed, scales, out, 128)
    return lambda: kernel[grid](*args, **meta)


def main(out_dir, keys=KEYS):
    info = gpu_info(0)
    mm = load_dispatch()
    rows = []
    for M, K, N in keys:
        ops = Operands(M, N, K, 128, info.l2_bytes)
        inputs = CheckInputs(M, N, K, 128, "cuda")
        fp16 = time_fp16(M, N, K, info.l2_bytes).us
        table = graph_time([lambda c=c: mm(c[0], c[1], c[2]) for c in ops.copies], replays=20).us
        best = {}
        for vid in candidates(M, N, K):
            v = Variant.from_id(vid)
            for form, kernel in KERNELS.items():
                row = dict(M=M, K=K, N=N, id=vid, form=form)
                try:
                    out = torch.full((M, N), float("nan"), device="cuda", dtype=torch.float16)
                    launcher(kernel, v, (inputs.a, inputs.packed, inputs.scales, out))()
                    err = relative_error(out, inputs.ref)
                    assert err < REL_TOL, f"relative error {err:.3g}"
                    row["us"] = graph_time([launcher(kernel, v, c) for c in ops.copies], replays=20).us
                    if row["us"] < best.get(form, (float("inf"),))[0]:
                        best[form] = (row["us"], vid)
                except Exception as exc:  # a config that fails to compile or run is a result too
                    row["error"] = f"{type(exc).__name__}: {exc}"[:300]
                rows.append(row)
        for label, config in streamk_forms(M):
            row = dict(M=M, K=K, N=N, id=label, form="streamk")
            try:
                out = torch.full((M, N), float("nan"), device="cuda", dtype=torch.float16)
                streamk_launcher(inputs.a, inputs.packed, inputs.scales, out, **config)()
                err = relative_error(out, inputs.ref)
                assert err < REL_TOL, f"relative error {err:.3g}"
                row["us"] = graph_time([streamk_launcher(*c, **config) for c in ops.copies], replays=20).us
                if row["us"] < best.get("streamk", (float("inf"),))[0]:
                    best["streamk"] = (row["us"], label)
            except Exception as exc:
                row["error"] = f"{type(exc).__name__}: {exc}"[:300]
            rows.append(row)
        rows.append(dict(M=M, K=K, N=N, fp16_us=fp16, table_us=table))
        del ops, inputs
        fails = sum(1 for r in rows if (r["M"], r["K"], r["N"]) == (M, K, N) and "error" in r)
        print(f"M={M:4d} {K}x{N}: fp16 {fp16:.1f} table {table:.1f} | "
              + " | ".join(f"{form} {us:.1f} ({vid.replace('swapab.', '')})" for form, (us, vid) in best.items())
              + (f" | {fails} failed" if fails else ""), flush=True)
        with open(f"{out_dir}/forms_probe.json", "w") as f:
            json.dump(dict(gpu=info.to_dict(), rows=rows), f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1], [tuple(int(x) for x in k.split("x")) for k in sys.argv[2].split(",")] if len(sys.argv) > 2 else KEYS)
