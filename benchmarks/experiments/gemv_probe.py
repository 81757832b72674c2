"""Time the gemv experiment (gemv_fields.py) against the shipped gemv on the GPU.

    python benchmarks/experiments/gemv_probe.py OUT_DIR
Forms: `shipped` (variants/gemv.py), `fields` (one LOP3 per weight, no activation rescaling) and
`pairs` (fields + activations read as fp16 pairs). Per key, the sweep's five fastest gemv configs
for that key and a small grid of longer and wider programs are checked against A @ dequantize(W),
then timed in every form with the sweep's harness (CUDA graph, operands rotated past L2). Writes
OUT_DIR/gemv_probe.json; prints one line per key (each form's best), then the streaming floor.
"""
import gzip
import json
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # so that it runs as a script from anywhere

from benchmarks.experiments.gemv_fields import a_pairs_ok, gemv_fields_kernel  # noqa: E402
from tunesearch.bench import REL_TOL, CheckInputs, Operands, graph_time, relative_error  # noqa: E402
from tunesearch.gpu import gpu_info, stream_read_floor  # noqa: E402
from tunesearch.bench import kernel_bytes  # noqa: E402
from tunesearch.variants import Variant  # noqa: E402
from tunesearch.variants.api import _kernel_call, interpreting  # noqa: E402

KEYS = [(1, 4096, 4096), (1, 4096, 11008), (1, 11008, 4096), (1, 4096, 22016), (4, 4096, 11008)]
GRID = [f"gemv.bm{{bm}}.bn{bn}.bk{bk}.sk{sk}.w{w}.s2" for bn, w in ((256, 4), (512, 4), (1024, 8))
        for bk in (32, 64) for sk in (8, 16)]


def swept(M, N, K, top=5):
    path = sorted((ROOT / "benchmarks/results").glob("trials_llama7b_*.jsonl.gz"))[-1]
    with gzip.open(path, "rt") as f:
        rows = [json.loads(line) for line in f]
    rows = [r for r in rows if r["family"] == "gemv" and (r["m"], r["n"], r["k"]) == (M, N, K)
            and r["status"] == "ok"]
    return [r["variant_id"] for r in sorted(rows, key=lambda r: r["us"])][:top]


def launcher(form, variant, copy):
    a, packed, scales, out = copy
    kernel, grid, args, meta = _kernel_call(variant, a, packed, scales, out, 128)
    if form != "shipped":
        kernel = gemv_fields_kernel
        meta = dict(meta, A_PAIRS=form == "pairs" and a_pairs_ok(a), PTX=not interpreting())
    return lambda: kernel[grid](*args, **meta)


def main(out_dir, keys=KEYS):
    info = gpu_info(0)
    rows = []
    for M, K, N in keys:
        ops = Operands(M, N, K, 128, info.l2_bytes)
        inputs = CheckInputs(M, N, K, 128, "cuda")
        floor = stream_read_floor(kernel_bytes(1, N, K, 128), info.l2_bytes, info.sm_count).us
        best = {}
        bm = 1 << (M - 1).bit_length()
        for vid in dict.fromkeys(swept(M, N, K) + [g.format(bm=bm) for g in GRID]):
            v = Variant.from_id(vid)
            for form in ("shipped", "fields", "pairs"):
                row = dict(M=M, K=K, N=N, id=vid, form=form)
                try:
                    out = torch.full((M, N), float("nan"), device="cuda", dtype=torch.float16)
                    launcher(form, v, (inputs.a, inputs.packed, inputs.scales, out))()
                    err = relative_error(out, inputs.ref)
                    assert err < REL_TOL, f"relative error {err:.3g}"
                    row["us"] = graph_time([launcher(form, v, c) for c in ops.copies], replays=20).us
                    if row["us"] < best.get(form, (float("inf"),))[0]:
                        best[form] = (row["us"], vid)
                except Exception as exc:  # a config that fails to compile or run is a result too
                    row["error"] = f"{type(exc).__name__}: {exc}"[:300]
                rows.append(row)
        rows.append(dict(M=M, K=K, N=N, floor_us=floor))
        del ops, inputs
        print(f"M={M} {K}x{N}: floor {floor:.1f} | "
              + " | ".join(f"{form} {us:.2f} ({vid.replace('gemv.', '')})" for form, (us, vid) in best.items()),
              flush=True)
        with open(f"{out_dir}/gemv_probe.json", "w") as f:
            json.dump(dict(gpu=info.to_dict(), rows=rows), f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
