"""Time the nibble-plane layout experiment against the shipped swapab on the GPU.

    python benchmarks/planes_probe.py OUT_DIR MxKxN,...
Checks both layouts against A @ dequantize(W) (the base packing is the specification; the planes
packing is derived from it), then times every swapab variant with BK=128 of each key in both, with
the sweep's harness (CUDA graph, operands rotated past L2). Writes OUT_DIR/planes_probe.json.
"""
import json
import sys

import torch
import triton

from benchmarks.experiments.swapab_planes import swapab_planes_kernel
from tunesearch.bench import REL_TOL, Operands, graph_time, relative_error
from tunesearch.gpu import gpu_info
from tunesearch.variants import dequantize, quantize_pack, variant_space
from tunesearch.variants.api import _kernel_call
from tunesearch.variants.layout import PACK, unpack


def to_planes16(packed: torch.Tensor) -> torch.Tensor:
    """Repack base-layout codes so that nibble j of row r of each 128-row block holds k = 16 j + r."""
    codes = unpack(packed)
    K, N = codes.shape
    planes = codes.reshape(K // 128, 8, 16, N).permute(0, 2, 1, 3).reshape(K // PACK, PACK, N)
    shifts = torch.arange(PACK, device=packed.device, dtype=torch.int64) * 4
    p64 = (planes.to(torch.int64) << shifts[None, :, None]).sum(dim=1)
    return torch.where(p64 >= 2**31, p64 - 2**32, p64).to(torch.int32).contiguous()


def launcher(variant, a, packed, scales, out, planes: int):
    _, grid, args, meta = _kernel_call(variant, a, packed, scales, out, 128)
    meta = {**meta, "PLANES": planes}
    return lambda: swapab_planes_kernel[grid](*args, **meta)


def main(out_dir, keys):
    info = gpu_info(0)
    rows = []
    for M, K, N in keys:
        packed, scales = quantize_pack(torch.randn(K, N, device="cuda"), 128)
        planes = to_planes16(packed)
        a = torch.randn(M, K, device="cuda").half()
        ref = a.float() @ dequantize(packed, scales, 128).float()
        ops = Operands(M, N, K, 128, info.l2_bytes)
        best = {}
        for v in (v for v in variant_space(M, N, K, 128, device=0) if v.family == "swapab" and v["BK"] == 128):
            for layout, p in ((0, packed), (1, planes)):
                out = torch.empty(M, N, device="cuda", dtype=torch.float16)
                try:
                    launcher(v, a, p, scales, out, layout)()
                    err = relative_error(out, ref)
                    assert err < REL_TOL, f"relative error {err:.3g}"
                    us = graph_time([launcher(v, *c, layout) for c in ops.copies], replays=20).us
                except (AssertionError, RuntimeError, triton.CompilationError) as exc:
                    rows.append(dict(M=M, K=K, N=N, id=v.id, planes=layout, error=str(exc)[:200]))
                    continue
                rows.append(dict(M=M, K=K, N=N, id=v.id, planes=layout, us=us))
                if us < best.get(layout, (float("inf"),))[0]:
                    best[layout] = (us, v.id)
        print(f"M={M} K={K} N={N}: base {best.get(0)}  planes16 {best.get(1)}", flush=True)
        del ops
    with open(f"{out_dir}/planes_probe.json", "w") as f:
        json.dump(dict(gpu=info.to_dict(), rows=rows), f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1], [tuple(int(x) for x in k.split("x")) for k in sys.argv[2].split(",")])
