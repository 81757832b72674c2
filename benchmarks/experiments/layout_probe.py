"""EXPERIMENT: does swapab lose time to its weight access pattern or to its compute chain?

    git apply benchmarks/experiments/swapab_tiled_nodot.patch   # the TILED and NODOT forms
    python benchmarks/experiments/layout_probe.py OUT_DIR MxKxN,... VARIANT_ID,...
Results of the H200 run: benchmarks/results/layout_probe_h200_2026-11-30.{json,log}.
For each key and swapab variant, times (CUDA graph, operands rotated past L2):
  base      the shipped kernel on the base layout;
  tiled     the same kernel over a tile-contiguous repack: each [BN, BK/8] block of packed codes
            stored as one contiguous run (BN * BK/2 bytes) instead of BK/8 rows of BN * 4 bytes
            that lie N * 4 bytes apart;
  nodot     base layout, loads and pipeline kept, but one plane and one dot per block instead of
            eight (a wrong result, 1/8 of the unpack and tensor work);
  nodot_t   the same, tiled.
Correctness is checked for base and tiled. Writes OUT_DIR/layout_probe.json.
"""
import json
import sys

import torch

from tunesearch.bench import REL_TOL, CheckInputs, graph_time, relative_error, copies_to_defeat_l2, kernel_bytes
from tunesearch.gpu import gpu_info, stream_read_floor
from tunesearch.variants import Variant
from tunesearch.variants.api import _kernel_call
from tunesearch.variants.swapab import swapab_kernel

FORMS = {"base": (0, 0), "tiled": (1, 0), "nodot": (0, 1), "nodot_t": (1, 1)}


def to_tiles(packed: torch.Tensor, bn: int, bk8: int) -> torch.Tensor:
    """[K/8, N] -> [ceil(N/BN), K/8/BK8, BN, BK8] contiguous (columns past N padded with zeros)."""
    k8, n = packed.shape
    n_pad = -(-n // bn) * bn
    padded = torch.zeros(k8, n_pad, dtype=packed.dtype, device=packed.device)
    padded[:, :n] = packed
    return padded.view(k8 // bk8, bk8, n_pad // bn, bn).permute(2, 0, 3, 1).contiguous()


def launcher(variant, a, packed, scales, out, form):
    _, grid, args, meta = _kernel_call(variant, a, packed, scales, out, 128)
    tiled, nodot = FORMS[form]
    if tiled:
        args = list(args)
        args[1] = to_tiles(packed, variant["BN"], variant["BK"] // 8)
    meta = {**meta, "TILED": tiled, "NODOT": nodot}
    return lambda: swapab_kernel[grid](*args, **meta)


def main(out_dir, keys, vids):
    info = gpu_info(0)
    rows = []
    for M, K, N in keys:
        floor = stream_read_floor(kernel_bytes(1, N, K, 128), info.l2_bytes, info.sm_count).us
        inputs = CheckInputs(M, N, K, 128, "cuda")
        n_copies = copies_to_defeat_l2(kernel_bytes(M, N, K, 128), info.l2_bytes)
        copies = [CheckInputs(M, N, K, 128, "cuda") for _ in range(n_copies)]
        line = [f"M={M} {K}x{N} floor {floor:.2f}"]
        for vid in vids:
            v = Variant.from_id(vid)
            for form in FORMS:
                row = dict(M=M, K=K, N=N, id=vid, form=form, floor_us=floor)
                try:
                    out = torch.full((M, N), float("nan"), device="cuda", dtype=torch.float16)
                    launcher(v, inputs.a, inputs.packed, inputs.scales, out, form)()
                    if not FORMS[form][1]:
                        err = relative_error(out, inputs.ref)
                        assert err < REL_TOL, f"relative error {err:.3g}"
                    calls = []
                    for c in copies:
                        c.out = torch.empty(M, N, device="cuda", dtype=torch.float16)
                        calls.append(launcher(v, c.a, c.packed, c.scales, c.out, form))
                    row["us"] = graph_time(calls, replays=20).us
                except Exception as exc:
                    row["error"] = f"{type(exc).__name__}: {exc}"[:300]
                rows.append(row)
            got = {r["form"]: r.get("us") for r in rows if (r["M"], r["K"], r["N"], r["id"]) == (M, K, N, vid)}
            line.append(f"{vid.replace('swapab.', '')}: " + " ".join(
                f"{f} {got[f]:.2f}" if got[f] else f"{f} ERR" for f in FORMS))
        print(" | ".join(line), flush=True)
        bad = [r for r in rows if "error" in r]
        if bad:
            print("  errors:", bad[0]["error"][:200])
        del copies, inputs
        with open(f"{out_dir}/layout_probe.json", "w") as f:
            json.dump(dict(gpu=info.to_dict(), rows=rows), f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1], [tuple(int(x) for x in k.split("x")) for k in sys.argv[2].split(",")], sys.argv[3].split(","))
