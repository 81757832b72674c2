"""EXPERIMENT (done; results in benchmarks/results/swapab_probe_h200_2026-11-30.json): time swapab's
unpack and activation-staging forms against each other on the GPU.

    python benchmarks/experiments/swapab_probe.py OUT_DIR MxKxN,... [TOP]
It ran against a working tree whose swapab_kernel took two constexpr flags, JOINT and A_BLOCK, the
forms below; form (0, 0) is the kernel of commit 0df0946, form (1, 1) the one shipped since 915879b,
which dropped the flags, so this script no longer runs against the shipped kernel.
For each key, the TOP (default 5) fastest swapab variants of the committed H200 sweep
(benchmarks/results/trials_llama7b_*.jsonl.gz, nearest M) are checked against A @ dequantize(W) and timed
with the sweep's harness (CUDA graph, operands rotated past L2) in each form (all four for the two
fastest, old and new for the rest):
JOINT (eight planes unpacked by one PTX block, 1.25 instr/weight, vs one plane at a time, 2)
and A_BLOCK (activations loaded as one contiguous [BM, BK] block and split into planes in
registers, which Triton stages with cp.async, vs eight strided loads per block).
Four hand-picked BM=16 variants join them at M <= 16, and the best gemv of the key is timed beside them. Writes OUT_DIR/swapab_probe.json.
"""
import glob
import gzip
import itertools
import json
import sys

import torch

from tunesearch.bench import REL_TOL, CheckInputs, Operands, graph_time, relative_error, time_variant
from tunesearch.gpu import gpu_info
from tunesearch.variants import Variant
from tunesearch.variants.api import _kernel_call
from tunesearch.variants.swapab import swapab_kernel

FORMS = list(itertools.product((0, 1), (0, 1)))  # (JOINT, A_BLOCK)


def committed_trials():
    path = sorted(glob.glob("benchmarks/results/trials_llama7b_*.jsonl.gz"))[-1]
    with gzip.open(path, "rt") as f:
        return [json.loads(line) for line in f]


def best_of(trials, family, M, N, K, top):
    rows = [t for t in trials if t["family"] == family and t["n"] == N and t["k"] == K and t["status"] == "ok"]
    m = min({t["m"] for t in rows}, key=lambda x: (abs(x - M), x))
    ranked = sorted((t for t in rows if t["m"] == m), key=lambda t: t["us"])
    return list(dict.fromkeys(t["variant_id"] for t in ranked))[:top]


def launcher(variant, copy, form):
    a, packed, scales, out = copy
    _, grid, args, meta = _kernel_call(variant, a, packed, scales, out, 128)
    meta = {**meta, "JOINT": form[0], "A_BLOCK": form[1]}
    return lambda: swapab_kernel[grid](*args, **meta)


def main(out_dir, keys, top=5):
    info = gpu_info(0)
    trials = committed_trials()
    rows = []
    for M, K, N in keys:
        ops = Operands(M, N, K, 128, info.l2_bytes)
        inputs = CheckInputs(M, N, K, 128, "cuda")
        gemv = best_of(trials, "gemv", M, N, K, 1)
        if gemv and M <= 16:
            v = Variant.from_id(gemv[0])
            rows.append(dict(M=M, K=K, N=N, id=v.id, form=None, us=time_variant(v, ops, replays=20).us))
        hand = [f"swapab.bm16.bn{bn}.bk128.sk{sk}.w{w}.s3" for bn, w, sk in ((64, 2, 8), (64, 2, 16), (128, 4, 4), (128, 4, 8))]
        for rank, vid in enumerate(dict.fromkeys(best_of(trials, "swapab", M, N, K, top) + (hand if M <= 16 else []))):
            v = Variant.from_id(vid)
            for form in FORMS if rank < 2 else [(0, 0), (1, 1)]:
                row = dict(M=M, K=K, N=N, id=vid, form=list(form))
                try:
                    out = torch.full((M, N), float("nan"), device="cuda", dtype=torch.float16)
                    launcher(v, (inputs.a, inputs.packed, inputs.scales, out), form)()
                    err = relative_error(out, inputs.ref)
                    assert err < REL_TOL, f"relative error {err:.3g}"
                    row["rel_error"] = err
                    row["us"] = graph_time([launcher(v, c, form) for c in ops.copies], replays=20).us
                except Exception as exc:  # a failed form is a result too
                    row["error"] = f"{type(exc).__name__}: {exc}"[:300]
                rows.append(row)
        del ops, inputs
        mine = [r for r in rows if (r["M"], r["K"], r["N"]) == (M, K, N) and "us" in r]
        summary = []
        for form in [None] + [list(f) for f in FORMS]:
            best = min((r for r in mine if r["form"] == form), key=lambda r: r["us"], default=None)
            if best:
                summary.append(f"{'gemv' if form is None else 'j%d a%d' % tuple(form)} {best['us']:.2f}")
        failed = [r for r in rows if (r["M"], r["K"], r["N"]) == (M, K, N) and "error" in r]
        print(f"M={M:3d} {K}x{N}: " + " | ".join(summary) + (f" | {len(failed)} failed: {failed[0]['error'][:120]}" if failed else ""),
              flush=True)
        with open(f"{out_dir}/swapab_probe.json", "w") as f:
            json.dump(dict(gpu=info.to_dict(), rows=rows), f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1], [tuple(int(x) for x in k.split("x")) for k in sys.argv[2].split(",")],
         int(sys.argv[3]) if len(sys.argv) > 3 else 5)
