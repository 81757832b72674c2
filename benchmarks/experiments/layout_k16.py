"""EXPERIMENT: a weight layout that lets swapab read its activations straight into the dot.

    python benchmarks/experiments/layout_k16.py OUT_DIR [main|small|split|k32|bm32|tma|async]
swapab multiplies nibble plane j of a packed block (W_j[n, k8] = w[k0 + 8 k8 + j, n]) by the
activations at k = k0 + 8 k8 + j: a stride-8 slice of A, which the shipped kernel gets by loading
[BM, BK] into registers, splitting it eight ways and storing each plane to shared memory for the
dot (65 STS per loop at BM=64, 128 at BM=128; 228-255 registers at BM=64-128).

Layout "k16" (chosen once per (N, K), repacked at load): in each block of 128 k (one scale group),
word k8 = 0..15 holds, as nibble j, row k0 + 16 j + k8. Plane j then multiplies A[:, k0 + 16 j :
k0 + 16 j + 16], a contiguous slice that Triton's pipeliner can copy from global memory to shared
memory itself (cp.async) in the dot's operand layout: no register split, no STS. The nibble unpack
is unchanged (the same eight planes of each int32).

Layout "k32" (``plane=32``): the same with 256-blocks, plane j covering 32 k (64-byte activation rows);
a block holds two scale groups, planes 0-3 and 4-7.

``repack_planes`` / ``unpack_planes`` are the layouts' specification (tested on the CPU: the documented
permutation, the pair a bijection, and the kernel on repacked weights equal to A @ dequantize(base) in
fp32). The probe times the kernel on each layout against the shipped swapab (base layout) on the same
configs, after checking each layout form against A @ dequantize(W) (a wrong result stops the run; a
config that does not compile or fit is printed and skipped). Key sets: main, small, split, k32, bm32, tma, async
(comments below). Runs: benchmarks/results/layout_{k16,k16_small,k16_split,k32,bm32,tma}_h200_2026-11-30_s7
.{json,log}, layout_async_h200_2026-11-30_s9.{json,log}; NOTES.md rows 29-33 and 35.
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
from tunesearch.variants.layout import PACK, unpack  # noqa: E402
from tunesearch.variants.swapab import _nibble_planes  # noqa: E402

BLOCK = 128  # k per layout block: one scale group, swapab's BK
PLANE = BLOCK // PACK  # 16 words per block; plane j covers k0 + 16 j .. + 15


def _plane_order(k: int, plane: int, device) -> torch.Tensor:
    """Base-order row r (= 8 * word + nibble) -> the k it holds in layout k<plane>: in each block of
    8 * plane k, word w holds, as nibble j, row plane * j + w."""
    block_k = PACK * plane
    r = torch.arange(k, device=device)
    block, inner = r // block_k, r % block_k
    word, nibble = inner // PACK, inner % PACK
    return block * block_k + nibble * plane + word


def _pack_codes(codes: torch.Tensor) -> torch.Tensor:
    k, n = codes.shape
    shifts = (torch.arange(PACK, device=codes.device, dtype=torch.int64) * 4)[None, :, None]
    packed64 = (codes.to(torch.int64).reshape(k // PACK, PACK, n) << shifts).sum(dim=1)
    return torch.where(packed64 >= 2**31, packed64 - 2**32, packed64).to(torch.int32).contiguous()


def repack_planes(packed: torch.Tensor, plane: int = PLANE) -> torch.Tensor:
    """Base layout -> k<plane> (16: one 128-block per scale group; 32: 256-blocks, two groups each).
    Scales are unchanged: each plane's k lie in one group."""
    k = packed.shape[0] * PACK
    if k % (PACK * plane):
        raise ValueError(f"layout k{plane} needs K % {PACK * plane} == 0, got K={k}")
    return _pack_codes(unpack(packed)[_plane_order(k, plane, packed.device)])


def unpack_planes(packed_k16: torch.Tensor, plane: int = PLANE) -> torch.Tensor:
    """The codes (0..15) as int32 [K, N] in k order: the inverse of repack_planes' permutation."""
    k = packed_k16.shape[0] * PACK
    codes = torch.empty_like(unpack(packed_k16))
    codes[_plane_order(k, plane, packed_k16.device)] = unpack(packed_k16)
    return codes


@triton.jit
def _k16_activation_planes(a_ptr, offs_m, mask_m, k, stride_am, stride_ak, BM: tl.constexpr, BK: tl.constexpr):
    """A_j^T [BK/8, BM], j = 0..7, of layout k16 (k = k0 + 16 j + k8) from one contiguous [BM, BK] load."""
    offs_k = k + tl.arange(0, BK)
    a = tl.load(a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak, mask=mask_m[:, None], other=0.0)
    a = tl.permute(tl.reshape(a, [BM, 2, 2, 2, BK // 8]), (0, 4, 1, 2, 3))  # [BM, k8, j2, j1, j0]
    e, o = tl.split(a)  # j0
    ee, eo = tl.split(e)  # j1
    oe, oo = tl.split(o)
    a0, a4 = tl.split(ee)  # j2
    a2, a6 = tl.split(eo)
    a1, a5 = tl.split(oe)
    a3, a7 = tl.split(oo)
    return (tl.trans(a0), tl.trans(a1), tl.trans(a2), tl.trans(a3),
            tl.trans(a4), tl.trans(a5), tl.trans(a6), tl.trans(a7))


@triton.jit
def _async_planes(a_ptrs, b_ptrs, s_ptr, offs_n, mask_m, mask_n, k_begin, k_end, stride_ak, stride_bk, stride_sg,
                  stride_sn, GROUP: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                  PTX: tl.constexpr):
    """The K loop with dots Triton can leave in flight (form ASYNC, layout k16, BK = GROUP).

    Triton keeps a wgmma "properly async" (no wait for it to finish before the next is issued) only if
    its result feeds nothing in the loop but the loop's own accumulator, and its shared-memory operand
    is one the pipeliner multi-buffers. The other forms chain the eight plane dots through one block
    accumulator and scale it in fp32 per block, so each dot waits for the previous one (pendings=0 after
    every wgmma). Here plane j accumulates into acc_j alone, and the group's scale multiplies the fp16
    weights before the dot, which is exactly dequantize's w = (q - 8) * s in fp16. The eight partial
    sums are added once, after the loop. Costs 8x the accumulator registers: small BM x BN only.
    """
    BK8: tl.constexpr = BK // 8
    acc0 = tl.zeros([BN, BM], dtype=tl.float32)
    acc1 = tl.zeros([BN, BM], dtype=tl.float32)
    acc2 = tl.zeros([BN, BM], dtype=tl.float32)
    acc3 = tl.zeros([BN, BM], dtype=tl.float32)
    acc4 = tl.zeros([BN, BM], dtype=tl.float32)
    acc5 = tl.zeros([BN, BM], dtype=tl.float32)
    acc6 = tl.zeros([BN, BM], dtype=tl.float32)
    acc7 = tl.zeros([BN, BM], dtype=tl.float32)
    for k in range(k_begin, k_end, BK):
        packed = tl.load(b_ptrs, mask=mask_n[:, None], other=0)
        s = tl.load(s_ptr + (k // GROUP) * stride_sg + offs_n * stride_sn, mask=mask_n, other=0.0)[:, None]
        w = _nibble_planes(packed, PTX)
        acc0 = tl.dot(w[0] * s, tl.load(a_ptrs + (0 * BK8) * stride_ak, mask=mask_m[None, :], other=0.0), acc0)
        acc1 = tl.dot(w[1] * s, tl.load(a_ptrs + (1 * BK8) * stride_ak, mask=mask_m[None, :], other=0.0), acc1)
        acc2 = tl.dot(w[2] * s, tl.load(a_ptrs + (2 * BK8) * stride_ak, mask=mask_m[None, :], other=0.0), acc2)
        acc3 = tl.dot(w[3] * s, tl.load(a_ptrs + (3 * BK8) * stride_ak, mask=mask_m[None, :], other=0.0), acc3)
        acc4 = tl.dot(w[4] * s, tl.load(a_ptrs + (4 * BK8) * stride_ak, mask=mask_m[None, :], other=0.0), acc4)
        acc5 = tl.dot(w[5] * s, tl.load(a_ptrs + (5 * BK8) * stride_ak, mask=mask_m[None, :], other=0.0), acc5)
        acc6 = tl.dot(w[6] * s, tl.load(a_ptrs + (6 * BK8) * stride_ak, mask=mask_m[None, :], other=0.0), acc6)
        acc7 = tl.dot(w[7] * s, tl.load(a_ptrs + (7 * BK8) * stride_ak, mask=mask_m[None, :], other=0.0), acc7)
        b_ptrs += BK8 * stride_bk
        a_ptrs += BK * stride_ak
    return ((acc0 + acc1) + (acc2 + acc3)) + ((acc4 + acc5) + (acc6 + acc7))


@triton.jit
def swapab_planes_kernel(
    a_ptr, b_ptr, s_ptr, c_ptr, ws_ptr, lock_ptr, M, N, K,
    stride_am, stride_ak, stride_bk, stride_bn, stride_sg, stride_sn, stride_cm, stride_cn,
    GROUP: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
    SPLIT_K: tl.constexpr, PTX: tl.constexpr, A_DIRECT: tl.constexpr = True, A_TMA: tl.constexpr = False,
    ASYNC: tl.constexpr = False,
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
    # plane j's activations, transposed: A[m, k + BK8 j + k8] as [BK8, BM]
    a_ptrs = a_ptr + offs_m[None, :] * stride_am + (k_begin + offs_k8)[:, None] * stride_ak

    if A_TMA:  # each plane's [BM, BK8] box by the tensor-memory accelerator (rows past M read as 0)
        a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[stride_am, 1], block_shape=[BM, BK8])

    acc = tl.zeros([BN, BM], dtype=tl.float32)
    if ASYNC:  # one accumulator per plane, the scale folded into the fp16 weights (see _async_planes)
        acc = _async_planes(a_ptrs, b_ptrs, s_ptr, offs_n, mask_m, mask_n, k_begin, k_end, stride_ak, stride_bk,
                            stride_sg, stride_sn, GROUP, BM, BN, BK, PTX)
    else:  # the eight plane dots chained through one block accumulator, scaled per block in fp32
        for k in range(k_begin, k_end, BK):
            packed = tl.load(b_ptrs, mask=mask_n[:, None], other=0)
            w_planes = _nibble_planes(packed, PTX)
            block = tl.zeros([BN, BM], dtype=tl.float32)
            if A_TMA:
                for j in tl.static_range(8):
                    a_j = a_desc.load([pid_m * BM, k + BK8 * j])
                    block = tl.dot(w_planes[j], tl.trans(a_j), block)
            elif A_DIRECT and BK > GROUP:  # layout k32: planes 0-3 in group k // G, 4-7 in the next
                for j in tl.static_range(4):
                    a_j = tl.load(a_ptrs + (BK8 * j) * stride_ak, mask=mask_m[None, :], other=0.0)
                    block = tl.dot(w_planes[j], a_j, block)
                s_lo = tl.load(s_ptr + (k // GROUP) * stride_sg + offs_n * stride_sn, mask=mask_n, other=0.0)
                acc += block * s_lo.to(tl.float32)[:, None]
                block = tl.zeros([BN, BM], dtype=tl.float32)
                for j in tl.static_range(4, 8):
                    a_j = tl.load(a_ptrs + (BK8 * j) * stride_ak, mask=mask_m[None, :], other=0.0)
                    block = tl.dot(w_planes[j], a_j, block)
            elif A_DIRECT:  # each plane's [BK8, BM] slice straight from global memory into the dot
                for j in tl.static_range(8):
                    a_j = tl.load(a_ptrs + (BK8 * j) * stride_ak, mask=mask_m[None, :], other=0.0)
                    block = tl.dot(w_planes[j], a_j, block)
            else:  # one [BM, BK] load split in registers (as the shipped kernel does), k = BK8 j + k8
                a_planes = _k16_activation_planes(a_ptr, offs_m, mask_m, k, stride_am, stride_ak, BM, BK)
                for j in tl.static_range(8):
                    block = tl.dot(w_planes[j], a_planes[j], block)
            s = tl.load(s_ptr + ((k + BK) // GROUP - 1) * stride_sg + offs_n * stride_sn, mask=mask_n, other=0.0)
            acc += block * s.to(tl.float32)[:, None]  # the block's last group (its only one when BK = G)
            b_ptrs += BK8 * stride_bk
            a_ptrs += BK * stride_ak

    store_or_reduce_splitk(tl.trans(acc), c_ptr, ws_ptr, lock_ptr, pid_m * tl.num_programs(0) + pid_n,
                           pid_k, offs_m, offs_n, M, N, stride_cm, stride_cn, SPLIT_K)


def planes_launcher(a, packed_k16, scales, out, BM, BN, SPLIT_K, num_warps, num_stages, A_DIRECT=True, plane=PLANE,
                    A_TMA=False, ASYNC=False):
    M, K = a.shape
    N = packed_k16.shape[1]
    tiles_m, tiles_n = triton.cdiv(M, BM), triton.cdiv(N, BN)
    ws = torch.empty(SPLIT_K, M, N, dtype=torch.float32, device=a.device)
    locks = torch.zeros(tiles_m * tiles_n, dtype=torch.int32, device=a.device)
    args = (a, packed_k16, scales, out, ws, locks, M, N, K, a.stride(0), a.stride(1), packed_k16.stride(0),
            packed_k16.stride(1), scales.stride(0), scales.stride(1), out.stride(0), out.stride(1))
    assert plane == PLANE or (A_DIRECT and not A_TMA and not ASYNC), "the forms besides A_DIRECT are k16 only"
    assert not ASYNC or (A_DIRECT and not A_TMA), "ASYNC loads each plane directly"
    if A_TMA:  # device-side descriptors need a scratch allocation per launch
        triton.set_allocator(lambda size, align, stream: torch.empty(size, dtype=torch.int8, device=a.device))
    meta = dict(GROUP=BLOCK, BM=BM, BN=BN, BK=PACK * plane, SPLIT_K=SPLIT_K, PTX=not interpreting(),
                A_DIRECT=A_DIRECT, A_TMA=A_TMA, ASYNC=ASYNC, num_warps=num_warps, num_stages=num_stages)
    return lambda: swapab_planes_kernel[(tiles_n, SPLIT_K, tiles_m)](*args, **meta)


# (M, K, N) and swapab configs around the packaged table's choices (2026-11-30 _s7), plus BM=128
KEYS = [(1, 4096, 11008), (16, 4096, 11008), (32, 4096, 11008), (64, 4096, 11008), (128, 4096, 11008),
        (16, 11008, 4096), (64, 11008, 4096), (128, 11008, 4096)]
CONFIGS = {
    1: [(16, 64, 4, 2, 4), (16, 128, 4, 4, 3)],
    16: [(16, 64, 4, 2, 4), (16, 128, 4, 4, 3), (16, 64, 8, 2, 4), (16, 128, 8, 4, 3)],
    32: [(32, 128, 4, 4, 3), (32, 64, 4, 2, 4), (32, 128, 8, 4, 3)],
    64: [(64, 128, 4, 4, 3), (64, 128, 8, 4, 3), (64, 64, 4, 4, 4), (64, 128, 2, 8, 3)],
    128: [(64, 128, 4, 4, 3), (128, 128, 4, 8, 3), (128, 64, 4, 4, 3), (128, 128, 2, 8, 3)],
}  # (BM, BN, SPLIT_K, num_warps, num_stages)
# second run ("small"): the decode range, where the first run had k16 ahead at M=1 and behind at M=16
SMALL_KEYS = [(1, 4096, 11008), (2, 4096, 11008), (4, 4096, 11008), (8, 4096, 11008), (16, 4096, 11008),
              (1, 4096, 4096), (4, 4096, 4096), (16, 4096, 4096), (1, 11008, 4096), (4, 11008, 4096)]
SMALL_CONFIGS = [(16, 64, 4, 2, 4), (16, 64, 4, 2, 2), (16, 128, 4, 4, 3), (16, 128, 4, 4, 2), (16, 64, 8, 2, 4),
                 (16, 128, 8, 4, 3), (16, 256, 4, 4, 3), (16, 64, 16, 2, 3)]


# third run ("split"): where direct plane loads lost (M=16..32), the k16 kernel splitting one [BM, BK]
# load in registers as the shipped kernel does (A_DIRECT=False) beside the other two
SPLIT_KEYS = [(8, 4096, 11008), (16, 4096, 11008), (32, 4096, 11008), (16, 4096, 4096), (16, 11008, 4096),
              (32, 11008, 4096)]
SPLIT_CONFIGS = {8: SMALL_CONFIGS[:6], 16: SMALL_CONFIGS[:6], 32: CONFIGS[32]}
# fourth run ("k32"): planes of 32 k (256-blocks of two scale groups), 64-byte activation rows per plane
K32_KEYS = [(1, 4096, 11008), (4, 4096, 11008), (8, 4096, 11008), (16, 4096, 11008), (32, 4096, 11008),
            (64, 4096, 11008), (128, 4096, 11008), (16, 4096, 4096), (16, 11008, 4096), (64, 11008, 4096)]
K32_CONFIGS = {1: SMALL_CONFIGS[:6], 4: SMALL_CONFIGS[:6], 8: SMALL_CONFIGS[:6], 16: SMALL_CONFIGS[:6],
               32: CONFIGS[32], 64: CONFIGS[64], 128: CONFIGS[128][:1] + [(64, 128, 2, 8, 3), (64, 64, 4, 4, 3)]}

# fifth run ("bm32"): k16's plane loads are 8-byte (2 warps) or 4-byte (4 warps) cp.async through L1 at BM=16
# (512 bytes per plane over the CTA's threads; the shipped kernel's are 16-byte, bypassing L1); with BM=32
# a plane is 1 KB, so M=16 gets 16-byte copies with half the rows masked (cheap at M <= 8)
BM32_KEYS = [(16, 4096, 11008), (16, 4096, 4096), (16, 11008, 4096), (8, 4096, 11008)]
BM32_CONFIGS = [(16, 64, 4, 2, 4), (16, 64, 8, 2, 4), (32, 64, 4, 2, 4), (32, 64, 8, 2, 4), (32, 64, 4, 2, 3),
                (32, 128, 4, 4, 3), (32, 128, 8, 4, 3), (32, 64, 8, 4, 3)]
# sixth run ("tma"): each plane's [BM, 16] activation box by TMA (one copy per box, rows past M zero-filled)
# instead of per-thread cp.async of 32-byte row pieces
TMA_KEYS = [(1, 4096, 11008), (8, 4096, 11008), (16, 4096, 11008), (32, 4096, 11008), (64, 4096, 11008),
            (16, 4096, 4096), (16, 11008, 4096)]
TMA_CONFIGS = {1: SMALL_CONFIGS[:6], 8: SMALL_CONFIGS[:6], 16: SMALL_CONFIGS[:6], 32: CONFIGS[32], 64: CONFIGS[64]}

# seventh run ("async"): form ASYNC (one accumulator per plane, scale folded into the weights), whose wgmmas
# Triton leaves in flight (pendings=7) and ptxas keeps unserialized only at these tiles (sm_90 SASS, offline):
# bm16.bn128.w8, bm32.bn64.w4, bm32.bn128.w8; bm16 with 4 warps and bm64 are serialized (C7515/C7512)
ASYNC_KEYS = [(1, 4096, 11008), (8, 4096, 11008), (16, 4096, 11008), (32, 4096, 11008), (64, 4096, 11008),
              (128, 4096, 11008), (16, 11008, 4096), (32, 11008, 4096), (64, 11008, 4096), (128, 11008, 4096),
              (32, 4096, 4096), (64, 4096, 4096), (128, 4096, 4096)]
_ASYNC_SMALL = [(16, 128, 4, 8, 3), (16, 128, 8, 8, 3), (16, 128, 4, 8, 4), (32, 64, 4, 4, 3)]
ASYNC_CONFIGS = {1: _ASYNC_SMALL, 8: _ASYNC_SMALL, 16: _ASYNC_SMALL,
                 32: [(32, 64, 4, 4, 3), (32, 64, 8, 4, 3), (32, 64, 4, 4, 4), (32, 128, 4, 8, 3), (32, 128, 2, 8, 3)],
                 64: [(32, 64, 4, 4, 3), (32, 64, 2, 4, 3), (32, 128, 4, 8, 3), (32, 128, 2, 8, 3)],
                 128: [(32, 64, 2, 4, 3), (32, 64, 1, 4, 3), (32, 128, 2, 8, 3), (32, 128, 1, 8, 3)]}

# per run: its keys, its configs (one list for every M, or per M) and the forms timed beside k16 and base
RUNS = {
    "main": (KEYS, CONFIGS, {}),
    "small": (SMALL_KEYS, SMALL_CONFIGS, {}),
    "split": (SPLIT_KEYS, SPLIT_CONFIGS, {"k16split": dict(A_DIRECT=False, plane=16)}),
    "k32": (K32_KEYS, K32_CONFIGS, {"k32": dict(A_DIRECT=True, plane=32)}),
    "bm32": (BM32_KEYS, BM32_CONFIGS, {}),
    "tma": (TMA_KEYS, TMA_CONFIGS, {"k16tma": dict(A_TMA=True, plane=16)}),
    "async": (ASYNC_KEYS, ASYNC_CONFIGS, {"k16async": dict(ASYNC=True, plane=16)}),
}


def main(out_dir, which="main"):
    keys, configs, extra_forms = RUNS[which]
    forms = {"k16": dict(A_DIRECT=True, plane=16), **extra_forms}
    planes = sorted({f["plane"] for f in forms.values()})
    from tunesearch.bench import REL_TOL, CheckInputs, Operands, graph_time, relative_error
    from tunesearch.gpu import gpu_info
    from tunesearch.variants import Variant, matmul

    info = gpu_info(0)
    rows = []
    for M, K, N in keys:
        ops = Operands(M, N, K, BLOCK, info.l2_bytes)
        copies = {pl: [(a, repack_planes(p, pl), s, o) for a, p, s, o in ops.copies] for pl in planes}
        inputs = CheckInputs(M, N, K, BLOCK, "cuda")
        packed = {pl: repack_planes(inputs.packed, pl) for pl in planes}
        for BM, BN, SK, w, st in (configs[M] if isinstance(configs, dict) else configs):
            config = dict(BM=BM, BN=BN, SPLIT_K=SK, num_warps=w, num_stages=st)
            variant = Variant("swapab", dict(BM=BM, BN=BN, BK=BLOCK, SPLIT_K=SK, num_warps=w, num_stages=st))
            times = {}
            for form, opts in forms.items():
                try:
                    out = torch.full((M, N), float("nan"), dtype=torch.float16, device="cuda")
                    planes_launcher(inputs.a, packed[opts["plane"]], inputs.scales, out, **config, **opts)()
                    err = relative_error(out, inputs.ref)
                    assert err < REL_TOL, f"{form} {config}: relative error {err:.3g}"
                    times[form] = graph_time([planes_launcher(*c, **config, **opts) for c in copies[opts["plane"]]],
                                             replays=20).us
                except AssertionError:
                    raise
                except Exception as e:  # a config that does not compile or fit: say so, go on
                    times[form] = f"{type(e).__name__}: {str(e)[:120]}"
            try:
                times["base"] = graph_time([lambda c=c: matmul(c[0], c[1], c[2], variant, BLOCK, out=c[3])
                                            for c in ops.copies], replays=20).us
            except Exception as e:
                times["base"] = f"{type(e).__name__}: {str(e)[:120]}"
            rows.append(dict(M=M, K=K, N=N, config=config, us=times))
            fmt = lambda v: f"{v:.2f}" if isinstance(v, float) else v  # noqa: E731
            print(f"M={M} {K}x{N} bm{BM} bn{BN} sk{SK} w{w} s{st}: "
                  + " | ".join(f"{name} {fmt(v)}" for name, v in times.items()), flush=True)
        del ops, copies, inputs
        with open(f"{out_dir}/layout_k16_{which}.json", "w") as f:
            json.dump(dict(gpu=info.to_dict(), rows=rows), f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1], *sys.argv[2:3])
