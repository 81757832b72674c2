"""EXPERIMENT: the dqmma kernel before stream-K (commit d89ec6a) against this tree's, on one GPU, in turn.

    git show d89ec6a:variants/dqmma.py > benchmarks/experiments/_dqmma_d89ec6a.py
    python benchmarks/experiments/dqmma_ab.py OUT_DIR

Row 49: the re-sweeps after stream-K timed the same split-K variants 2-5% slower than the `_s16` sweep
did, on other machines. Both kernels here run the same configs on the same operands, alternating, so
the machine is the same for both: the difference left is the code's.
"""
import json
import sys
from pathlib import Path

import torch
import triton

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import _dqmma_d89ec6a as old  # noqa: E402  (written from git by the command above)

# (M, K, N, variant id): the packaged table's split-K picks at M=64..256, and a stream-K one
CASES = [(128, 4096, 11008, "dqmma.bm128.bn128.bk128.sk1.w8.s4"), (128, 4096, 12288, "dqmma.bm128.bn128.bk128.sk1.w8.s4"),
         (64, 4096, 11008, "dqmma.bm64.bn128.bk128.sk1.w4.s6"), (128, 11008, 4096, "dqmma.bm128.bn64.bk128.sk2.w8.s4"),
         (128, 4096, 22016, "dqmma.bm128.bn256.bk64.sk1.w8.s4"), (256, 4096, 4096, "dqmma.bm128.bn64.bk128.sk1.w8.s4")]


def old_launcher(a, packed, scales, out, p, group_size=128):
    M, K = a.shape
    N = packed.shape[1]
    bm, bn, bk, sk = p["BM"], p["BN"], p["BK"], p["SPLIT_K"]
    ws = torch.empty(sk * M * N if sk > 1 else 1, dtype=torch.float32, device=a.device)
    locks = torch.zeros(triton.cdiv(M, bm) * triton.cdiv(N, bn), dtype=torch.int32, device=a.device)
    args = (*old.descriptors(a, packed, scales, bm, bn, bk), out, ws, locks, M, N, K, *out.stride())
    loads = bn == 256
    meta = dict(GROUP=group_size, BM=bm, BN=bn, BK=bk, SPLIT_K=sk, STAGES=p["num_stages"], num_warps=p["num_warps"],
                MMA_LOADS=loads, maxnreg=old.launch_registers(bm, mma_loads=loads))
    grid = (triton.cdiv(N, bn), sk, triton.cdiv(M, bm))
    return lambda: old.dqmma_kernel[grid](*args, **meta)


def main(out_dir):
    from tunesearch.bench import REL_TOL, CheckInputs, Operands, graph_time, relative_error, time_variant
    from tunesearch.gpu import gpu_info
    from tunesearch.variants import Variant

    info = gpu_info(0)
    rows = []
    for M, K, N, vid in CASES:
        variant = Variant.from_id(vid)
        inputs = CheckInputs(M, N, K, 128, "cuda")
        out = torch.full((M, N), float("nan"), dtype=torch.float16, device="cuda")
        old_launcher(inputs.a, inputs.packed, inputs.scales, out, variant.params)()
        torch.cuda.synchronize()
        assert relative_error(out, inputs.ref) < REL_TOL, f"old kernel wrong at {vid}"
        ops = Operands(M, N, K, 128, info.l2_bytes)
        times = {"old": [], "new": []}
        for _ in range(3):  # alternating, so that drift in the clocks falls on both
            times["old"].append(graph_time([old_launcher(c[0], c[1], c[2], c[3], variant.params)
                                            for c in ops.copies], replays=20).us)
            times["new"].append(time_variant(variant, ops, replays=20).us)
        row = dict(M=M, K=K, N=N, variant=vid, old=min(times["old"]), new=min(times["new"]), runs=times)
        rows.append(row)
        print(f"M={M} {K}x{N} {vid}: d89ec6a {row['old']:.2f} us, this tree {row['new']:.2f} us "
              f"({row['new'] / row['old']:.3f})", flush=True)
        del ops, inputs
    with open(f"{out_dir}/dqmma_ab.json", "w") as f:
        json.dump(dict(gpu=info.to_dict(), rows=rows), f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
