"""EXPERIMENT: where do swapab's microseconds go at M = 1..16? (Some forms are wrong by design.)

    python benchmarks/experiments/swapab_anatomy.py OUT_DIR
The gemv's anatomy (gemv_anatomy.py, NOTES.md row 21) split its M=1 excess over the streaming floor
into the split-K tail (~2.2 us) and compute (~3.5 us). swapab serves M=2..128 (~15.5 us at M <= 16 on
the 23 MB shapes, floor 8.3), and its tail is the same code. This copy of swapab_kernel has two
switches:
* PLANES: 8 is the shipped block product (eight nibble-plane dots); 1 unpacks and multiplies plane 0
  only (1/8 of the unpack and tensor work; the loop keeps one dot, so Triton still pipelines its loads;
  wrong result);
* HANDSHAKE: gemv_anatomy's split-K tails (1 shipped, 2 fenced re-arm, 3 fp32 reductions in L2,
  0 none: wrong result).
Each (shape, M) is timed with the table's variant and a few neighbours, every combination beside the
floor, with the sweep's harness, after checking the correct forms (PLANES=8 with HANDSHAKE 1, 2, 3)
against A @ dequantize(W). Writes OUT_DIR/swapab_anatomy.json; prints one line per (key, config).
Not yet run on a GPU (written after the session's device time was spent).
"""
import json
import sys
from pathlib import Path

import torch
import triton
import triton.language as tl

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # so that it runs as a script from anywhere

from benchmarks.experiments.gemv_anatomy import split_k_tail  # noqa: E402
from tunesearch.variants._common import split_k_range  # noqa: E402
from tunesearch.variants.api import interpreting  # noqa: E402
from tunesearch.variants.swapab import _activation_planes, _nibble_planes  # noqa: E402


@triton.jit
def swapab_anatomy_kernel(
    a_ptr, b_ptr, s_ptr, c_ptr, ws_ptr, lock_ptr, M, N, K,
    stride_am, stride_ak, stride_bk, stride_bn, stride_sg, stride_sn, stride_cm, stride_cn,
    GROUP: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
    SPLIT_K: tl.constexpr, PTX: tl.constexpr, PLANES: tl.constexpr, HANDSHAKE: tl.constexpr,
):
    BK8: tl.constexpr = BK // 8
    pid_n = tl.program_id(0)
    pid_k = tl.program_id(1)
    pid_m = tl.program_id(2)
    offs_m = pid_m * BM + tl.arange(0, BM)
    offs_n = pid_n * BN + tl.arange(0, BN)
    offs_k8 = tl.arange(0, BK8)
    mask_m = offs_m < M
    mask_n = offs_n < N
    k_begin, k_end = split_k_range(pid_k, K, BK, SPLIT_K)
    b_ptrs = b_ptr + offs_n[:, None] * stride_bn + (k_begin // 8 + offs_k8)[None, :] * stride_bk

    acc = tl.zeros([BN, BM], dtype=tl.float32)
    for k in range(k_begin, k_end, BK):
        packed = tl.load(b_ptrs, mask=mask_n[:, None], other=0)
        a_planes = _activation_planes(a_ptr, offs_m, mask_m, k, stride_am, stride_ak, BM, BK)
        w_planes = _nibble_planes(packed, PTX)
        block = tl.zeros([BN, BM], dtype=tl.float32)
        for j in tl.static_range(PLANES):
            block = tl.dot(w_planes[j], a_planes[j], block)
        s = tl.load(s_ptr + (k // GROUP) * stride_sg + offs_n * stride_sn, mask=mask_n, other=0.0)
        acc += block * s.to(tl.float32)[:, None]
        b_ptrs += BK8 * stride_bk

    split_k_tail(tl.trans(acc), c_ptr, ws_ptr, lock_ptr, pid_m * tl.num_programs(0) + pid_n, pid_k, offs_m,
                 offs_n, M, N, stride_cm, stride_cn, SPLIT_K, HANDSHAKE)


def anatomy_launcher(a, packed, scales, out, BM, BN, SPLIT_K, num_warps, num_stages, PLANES, HANDSHAKE):
    M, K = a.shape
    N = packed.shape[1]
    tiles_m, tiles_n = triton.cdiv(M, BM), triton.cdiv(N, BN)
    ws = torch.zeros(SPLIT_K, M, N, dtype=torch.float32, device=a.device)  # HANDSHAKE=3 needs zeros
    locks = torch.zeros(tiles_m * tiles_n, dtype=torch.int32, device=a.device)
    args = (a, packed, scales, out, ws, locks, M, N, K, a.stride(0), a.stride(1), packed.stride(0),
            packed.stride(1), scales.stride(0), scales.stride(1), out.stride(0), out.stride(1))
    meta = dict(GROUP=128, BM=BM, BN=BN, BK=128, SPLIT_K=SPLIT_K, PTX=not interpreting(), PLANES=PLANES,
                HANDSHAKE=HANDSHAKE, num_warps=num_warps, num_stages=num_stages)
    return lambda: swapab_anatomy_kernel[(tiles_n, SPLIT_K, tiles_m)](*args, **meta)


# (M, K, N) and configs around the packaged table's choice there (2026-11-30 _s5)
KEYS = [(1, 4096, 11008), (4, 4096, 11008), (16, 4096, 11008), (16, 11008, 4096), (4, 4096, 4096)]
CONFIGS = [dict(BM=16, BN=128, SPLIT_K=4, num_warps=4, num_stages=3), dict(BM=16, BN=128, SPLIT_K=8, num_warps=4, num_stages=3),
           dict(BM=16, BN=64, SPLIT_K=8, num_warps=2, num_stages=3), dict(BM=16, BN=64, SPLIT_K=4, num_warps=2, num_stages=4)]


def main(out_dir):
    from tunesearch.bench import REL_TOL, CheckInputs, Operands, graph_time, kernel_bytes, relative_error
    from tunesearch.gpu import gpu_info, stream_read_floor

    info = gpu_info(0)
    rows = []
    for M, K, N in KEYS:
        ops = Operands(M, N, K, 128, info.l2_bytes)
        inputs = CheckInputs(M, N, K, 128, "cuda")
        floor = stream_read_floor(kernel_bytes(1, N, K, 128), info.l2_bytes, info.sm_count).us
        rows.append(dict(M=M, K=K, N=N, floor_us=floor))
        for config in CONFIGS:
            for handshake in (1, 2, 3):  # the full forms compute A @ W: check each
                out = torch.full((M, N), float("nan"), dtype=torch.float16, device="cuda")
                anatomy_launcher(inputs.a, inputs.packed, inputs.scales, out, **config, PLANES=8,
                                 HANDSHAKE=handshake)()
                err = relative_error(out, inputs.ref)
                assert err < REL_TOL, f"{config} handshake {handshake}: relative error {err:.3g}"
            times = {}
            for planes in (8, 1):
                for handshake in (1, 2, 3, 0):
                    times[f"p{planes}+h{handshake}"] = graph_time(
                        [anatomy_launcher(*c, **config, PLANES=planes, HANDSHAKE=handshake) for c in ops.copies],
                        replays=20).us
            rows.append(dict(M=M, K=K, N=N, config=config, us=times))
            print(f"M={M} {K}x{N} floor {floor:.2f} | bm{config['BM']} bn{config['BN']} sk{config['SPLIT_K']} "
                  f"w{config['num_warps']} s{config['num_stages']}: "
                  + " | ".join(f"{k} {v:.2f}" for k, v in times.items()), flush=True)
        del ops, inputs
        with open(f"{out_dir}/swapab_anatomy.json", "w") as f:
            json.dump(dict(gpu=info.to_dict(), rows=rows), f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
