"""EXPERIMENT: where do the M = 1 gemv's microseconds go? (Some forms are wrong by design: timing only.)

    python benchmarks/experiments/gemv_anatomy.py OUT_DIR
The shipped gemv (variants/gemv.py) takes ~13.8 us on 4096x11008 at M = 1 against an 8.3 us
streaming-read floor. This copy of its kernel has two switches:
* COMPUTE=False: the unpack and FMAs are replaced by one XOR per packed int32 (the loads, the scale
  loads and the grid stay), so what remains is the kernel's structure;
* HANDSHAKE: 1 the shipped split-K tail (partial to its slot, fence, counter, the last split sums
  the slots in order, re-arms the counter; unfenced since the 7th run, row 26); 2 the same with the
  re-arm fenced (the shipped form of runs s5/s6: the logs' "h2" then was the unfenced one);
  3 fp32 reductions into one zeroed tile in L2 (sum order not fixed), the last split converts that
  tile and zeroes it; 0 none: each split stores its partial to its own slot and ends (wrong result).
The probe times every combination for a few (BN, SPLIT_K) grids beside the floor, with the sweep's
harness (CUDA graph, operands rotated past L2), after checking the three correct forms against
A @ dequantize(W). Writes OUT_DIR/gemv_anatomy.json; prints one line per (shape, config).
Runs: benchmarks/results/gemv_anatomy_h200_2026-11-30_s5{,b,c}.log (the first with HANDSHAKE 1 and 0
only, the third with the wider-split configs and 11008x4096); NOTES.md row 21.
"""
import json
import sys
from pathlib import Path

import torch
import triton
import triton.language as tl

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # so that it runs as a script from anywhere

from tunesearch.variants._common import split_k_range, store_or_reduce_splitk  # noqa: E402
from tunesearch.variants.api import interpreting  # noqa: E402
from tunesearch.variants.gemv import _exponent_fields, _fp16_pair_to_f32  # noqa: E402


@triton.jit
def split_k_tail(out, c_ptr, ws_ptr, lock_ptr, tile_id, pid_k, offs_m, offs_n, M, N, stride_cm, stride_cn,
                 SPLIT_K: tl.constexpr, HANDSHAKE: tl.constexpr):
    """The split-K tail of the shipped kernels (HANDSHAKE=1) and its variants (the module's docstring)."""
    mask = (offs_m < M)[:, None] & (offs_n < N)[None, :]
    ws_ptrs = ws_ptr + offs_m[:, None] * N + offs_n[None, :]
    c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
    if HANDSHAKE == 1:  # the shipped one
        store_or_reduce_splitk(out, c_ptr, ws_ptr, lock_ptr, tile_id, pid_k, offs_m, offs_n, M, N,
                               stride_cm, stride_cn, SPLIT_K)
    elif HANDSHAKE == 2:  # the shipped one, the counter re-armed with a fence (shipped until row 26)
        tl.store(ws_ptrs + pid_k * M * N, out, mask=mask)
        tl.debug_barrier()
        arrived = tl.atomic_add(lock_ptr + tile_id, 1, sem="acq_rel")
        if arrived == SPLIT_K - 1:
            total = tl.zeros_like(out)
            for i in range(SPLIT_K):
                total += tl.load(ws_ptrs + i * M * N, mask=mask, other=0.0, cache_modifier=".cg")
            tl.store(c_ptrs, total.to(c_ptr.dtype.element_ty), mask=mask)
            tl.atomic_xchg(lock_ptr + tile_id, 0)
    elif HANDSHAKE == 3:  # fp32 reductions in L2 (order not fixed), the last converts one tile
        tl.atomic_add(ws_ptrs, out, mask=mask, sem="relaxed")
        tl.debug_barrier()
        arrived = tl.atomic_add(lock_ptr + tile_id, 1, sem="acq_rel")
        if arrived == SPLIT_K - 1:
            total = tl.load(ws_ptrs, mask=mask, other=0.0, cache_modifier=".cg")
            tl.store(c_ptrs, total.to(c_ptr.dtype.element_ty), mask=mask)
            tl.store(ws_ptrs, tl.zeros_like(total), mask=mask)
            tl.atomic_xchg(lock_ptr + tile_id, 0, sem="relaxed")
    else:  # none: each split's partial to its own slot (wrong result, timing only)
        tl.store(ws_ptrs + pid_k * M * N, out, mask=mask)



@triton.jit
def gemv_anatomy_kernel(
    a_ptr, b_ptr, s_ptr, c_ptr, ws_ptr, lock_ptr, M, N, K,
    stride_am, stride_ak, stride_bk, stride_bn, stride_sg, stride_sn, stride_cm, stride_cn,
    GROUP: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
    SPLIT_K: tl.constexpr, STAGES: tl.constexpr, COMPUTE: tl.constexpr, HANDSHAKE: tl.constexpr,
    PTX: tl.constexpr,
):
    BK8: tl.constexpr = BK // 8
    pid_n = tl.program_id(0)
    pid_k = tl.program_id(1)
    pid_m = tl.program_id(2)
    offs_m = pid_m * BM + tl.arange(0, BM)
    offs_n = pid_n * BN + tl.arange(0, BN)
    m3 = offs_m[:, None, None]
    k3 = tl.arange(0, BK8)[None, :, None]
    n3 = offs_n[None, None, :]
    mask_m3 = m3 < M
    mask_n3 = n3 < N
    k_begin, k_end = split_k_range(pid_k, K, BK, SPLIT_K)
    b_ptrs = b_ptr + (k_begin // 8 + k3) * stride_bk + n3 * stride_bn
    a_ptrs = a_ptr + m3 * stride_am + (k_begin + k3 * 8) * stride_ak

    acc = tl.zeros([BM, BK8, BN], dtype=tl.float32)
    bits = tl.zeros([BM, BK8, BN], dtype=tl.int32)
    if STAGES > 1:
        ahead = tl.load(b_ptrs, mask=mask_n3 & (k_begin < k_end), other=0)
    for k in range(k_begin, k_end, BK):
        if STAGES > 1:
            packed = ahead
            ahead = tl.load(b_ptrs + BK8 * stride_bk, mask=mask_n3 & (k + BK < k_end), other=0)
        else:
            packed = tl.load(b_ptrs, mask=mask_n3, other=0)
        if BK <= GROUP:
            s = tl.load(s_ptr + (k // GROUP) * stride_sg + n3 * stride_sn, mask=mask_n3, other=0.0)
        else:
            s = tl.load(s_ptr + ((k + k3 * 8) // GROUP) * stride_sg + n3 * stride_sn, mask=mask_n3, other=0.0)
        if COMPUTE:
            fields = _exponent_fields(packed, PTX)
            block = tl.zeros([BM, BK8, BN], dtype=tl.float32)
            for p in tl.static_range(4):
                pair = tl.load(a_ptrs.to(tl.pointer_type(tl.int32), bitcast=True) + p, mask=mask_m3, other=0)
                a_even, a_odd = _fp16_pair_to_f32(pair, PTX)
                block += a_even * (fields[2 * p] - ((1 << (23 - 4 * ((2 * p) % 4))) + 8.0))
                block += a_odd * (fields[2 * p + 1] - ((1 << (23 - 4 * ((2 * p + 1) % 4))) + 8.0))
            acc += block * s.to(tl.float32)
        else:
            bits ^= packed
            acc += s.to(tl.float32)
        a_ptrs += BK * stride_ak
        b_ptrs += BK8 * stride_bk

    out = tl.sum(acc + bits.to(tl.float32), axis=1)
    split_k_tail(out, c_ptr, ws_ptr, lock_ptr, pid_m * tl.num_programs(0) + pid_n, pid_k, offs_m, offs_n,
                 M, N, stride_cm, stride_cn, SPLIT_K, HANDSHAKE)

def anatomy_launcher(a, packed, scales, out, BN, BK, SPLIT_K, num_warps, STAGES, COMPUTE, HANDSHAKE):
    M, K = a.shape
    N = packed.shape[1]
    ws = torch.zeros(SPLIT_K, M, N, dtype=torch.float32, device=a.device)  # mode 3 needs zeros
    locks = torch.zeros(M * triton.cdiv(N, BN), dtype=torch.int32, device=a.device)  # a tile per (row, BN)
    grid = (triton.cdiv(N, BN), SPLIT_K, M)
    args = (a, packed, scales, out, ws, locks, M, N, K, a.stride(0), a.stride(1), packed.stride(0),
            packed.stride(1), scales.stride(0), scales.stride(1), out.stride(0), out.stride(1))
    meta = dict(GROUP=128, BM=1, BN=BN, BK=BK, SPLIT_K=SPLIT_K, STAGES=STAGES, COMPUTE=COMPUTE,
                HANDSHAKE=HANDSHAKE, PTX=not interpreting(), num_warps=num_warps, num_stages=1)
    return lambda: gemv_anatomy_kernel[grid](*args, **meta)


CONFIGS = [dict(BN=256, BK=64, SPLIT_K=32, num_warps=2, STAGES=2), dict(BN=64, BK=64, SPLIT_K=32, num_warps=2, STAGES=2),
           dict(BN=256, BK=64, SPLIT_K=8, num_warps=2, STAGES=2), dict(BN=512, BK=64, SPLIT_K=16, num_warps=4, STAGES=2),
           # fewer, wider splits: the warps along K inside the program (NOTES.md, M=1 item 2)
           dict(BN=256, BK=256, SPLIT_K=8, num_warps=8, STAGES=2), dict(BN=512, BK=128, SPLIT_K=8, num_warps=8, STAGES=2),
           dict(BN=128, BK=256, SPLIT_K=8, num_warps=4, STAGES=2)]
SHAPES = [(4096, 11008), (11008, 4096), (4096, 4096)]  # (K, N)


def main(out_dir):
    from tunesearch.bench import REL_TOL, CheckInputs, Operands, graph_time, kernel_bytes, relative_error
    from tunesearch.gpu import gpu_info, stream_read_floor

    info = gpu_info(0)
    rows = []
    for K, N in SHAPES:
        ops = Operands(1, N, K, 128, info.l2_bytes)
        inputs = CheckInputs(1, N, K, 128, "cuda")
        floor = stream_read_floor(kernel_bytes(1, N, K, 128), info.l2_bytes, info.sm_count).us
        rows.append(dict(K=K, N=N, floor_us=floor))
        for config in CONFIGS:
            times = {}
            for handshake in (1, 2, 3):  # the full forms compute A @ W: check each
                out = torch.full((1, N), float("nan"), dtype=torch.float16, device="cuda")
                anatomy_launcher(inputs.a, inputs.packed, inputs.scales, out, **config, COMPUTE=True,
                                 HANDSHAKE=handshake)()
                err = relative_error(out, inputs.ref)
                assert err < REL_TOL, f"{config} handshake {handshake}: relative error {err:.3g}"
            for compute in (True, False):
                for handshake in (1, 2, 3, 0):
                    label = ("compute" if compute else "xor") + f"+h{handshake}"
                    times[label] = graph_time([anatomy_launcher(*c, **config, COMPUTE=compute, HANDSHAKE=handshake)
                                               for c in ops.copies], replays=20).us
            rows.append(dict(K=K, N=N, config=config, us=times))
            print(f"{K}x{N} floor {floor:.2f} | bn{config['BN']} bk{config['BK']} sk{config['SPLIT_K']} "
                  f"w{config['num_warps']}: " + " | ".join(f"{k} {v:.2f}" for k, v in times.items()), flush=True)
        del ops, inputs
        with open(f"{out_dir}/gemv_anatomy.json", "w") as f:
            json.dump(dict(gpu=info.to_dict(), rows=rows), f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
