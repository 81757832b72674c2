"""EXPERIMENT: a W4A16 tensor-core GEMM written in Gluon, so the tensor cores never wait on the unpack.

    python benchmarks/experiments/gluon_dqmma.py OUT_DIR [first|deep|m128]   (on the GPU: check, then time)
    python benchmarks/experiments/gluon_dqmma.py --schedule 64,128,64,2,4[,1]   (offline: its SASS schedule)
The kernel (below) is the one the dqmma family first shipped (rows 39-43; the family now runs the
warp-specialized form, rows 44-48), one schedule in every warp, with forms no family searches: SWAP
(tokens as the wgmma N, for decode M), the unpack in plain Gluon ops (PTX=False) and the anatomy switch
PARTS (the unpack without the MMA, the MMA without the unpack: wrong results, timing only), as rows 21
and 28 did for the Triton kernels. Gluon has no CPU
interpreter: CI compiles the kernel for sm_90 and checks its schedule and shared memory
(`--schedule`, tests/test_experiments.py); on the GPU the probe checks every config against
A @ dequantize(W) before timing it, beside the packaged table's choice and cuBLAS fp16.

SASS (sm_90, offline, 64x128x64, split 2, 4 stages): one `wait <= 1` per K block, 4 HGMMA, 250 loop
instructions for the 64 weights a thread unpacks (3.9 per weight; 338 with the plain unpack), 136
registers, 96 KB of shared memory.

Timed on the H200 (NOTES.md rows 39-41): correct in every config; slower than the packaged table at
M <= 64 and on the N=4096 shapes, 0.80-0.82x the table at M=128 on the N >= 11008 shapes (bm128.bn128,
one split, 8 stages). The MMA-only form alone takes ~1.6x a program's tensor work: the serial step per
block, not the unpack, is what a next form (warp-specialized) has to remove.
"""
import json
import sys
from pathlib import Path

import torch
import triton

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # so that it runs as a script from anywhere

from triton.experimental import gluon  # noqa: E402
from triton.experimental.gluon import language as gl  # noqa: E402
from triton.experimental.gluon.language.nvidia.ampere import async_copy  # noqa: E402
from triton.experimental.gluon.language.nvidia.hopper import (fence_async_shared, warpgroup_mma,  # noqa: E402
                                                              warpgroup_mma_wait)

from tunesearch.variants.dqmma import _unpack_scaled_ptx  # noqa: E402  (the family's PTX unpack)


# The kernel as the dqmma family first shipped it (rows 39-43), kept here as timed: one schedule in
# every warp (cp.async ring, unpack, barrier, wgmma with one left in flight). The family's kernel is now
# the warp-specialized form (variants/dqmma.py, rows 44-48); this one shares its PTX unpack.
W_BUFFERS = gl.constexpr(3)  # a W buffer is rewritten two blocks after its MMA was issued


@gluon.constexpr_function
def _threads_along(n_vectors):
    """Threads of a warp along a dimension holding ``n_vectors`` vectors (the rest go along the other)."""
    return min(32, n_vectors)


@gluon.jit
def _unpack_scaled(packed, s, L3: gl.constexpr):
    """fp16 (q - 8) * s of a packed block [BK/8, BN] -> [BK, BN] in k order (row 8 k8 + j is nibble j)."""
    j = gl.arange(0, 8, layout=gl.SliceLayout(0, gl.SliceLayout(2, L3)))
    shifts = gl.expand_dims(gl.expand_dims(j * 4, 0), 2)  # [1, 8, 1]
    codes = (gl.expand_dims(packed, 1) >> shifts) & 0xF  # mask after the shift: nibble 7 holds the sign bit
    # 0x6400 | q is the fp16 1024 + q: an exact conversion without I2F; minus 1032 leaves q - 8
    w = (codes | 0x6400).to(gl.int16).to(gl.float16, bitcast=True) - 1032.0
    w = w * gl.expand_dims(gl.expand_dims(s, 0), 0)
    return gl.reshape(w, [w.shape[0] * 8, w.shape[2]])


@gluon.jit
def dqmma_kernel(
    a_ptr, b_ptr, s_ptr, c_ptr, ws_ptr, lock_ptr, M, N, K,
    stride_am, stride_ak, stride_bk, stride_bn, stride_sg, stride_sn, stride_cm, stride_cn,
    GROUP: gl.constexpr, BM: gl.constexpr, BN: gl.constexpr, BK: gl.constexpr, SPLIT_K: gl.constexpr,
    STAGES: gl.constexpr, PTX: gl.constexpr, SWAP: gl.constexpr, num_warps: gl.constexpr,
    PARTS: gl.constexpr = 3,
):
    BK8: gl.constexpr = BK // 8
    # the wgmma M (16 rows per warp) is the tokens, or with SWAP the weights' columns
    gl.static_assert((BN if SWAP else BM) == 16 * num_warps, "16 rows of the wgmma M per warp")
    gl.static_assert(BM % 8 == 0 and BM <= 256, "BM is a wgmma N with SWAP: a multiple of 8")
    gl.static_assert(GROUP % BK == 0, "a block lies in one scale group")
    gl.static_assert(STAGES >= 3, "the A slot refilled in block i is block i-2's")
    pid_n = gl.program_id(0)
    pid_k = gl.program_id(1)
    pid_m = gl.program_id(2)

    # layouts: A copied 16 bytes per thread along k; packed W 16 bytes per thread along n, all eight
    # nibbles of a word in the thread that loaded it; the accumulator in wgmma's layout
    TK: gl.constexpr = _threads_along(BK // 8)
    LA: gl.constexpr = gl.BlockedLayout([1, 8], [32 // TK, TK], [num_warps, 1], [1, 0])
    TN: gl.constexpr = _threads_along(BN // 4)
    L3: gl.constexpr = gl.BlockedLayout([1, 8, 4], [32 // TN, 1, TN], [num_warps, 1, 1], [2, 1, 0])
    LP: gl.constexpr = gl.SliceLayout(1, L3)  # the packed block [BK/8, BN]
    LS: gl.constexpr = gl.SliceLayout(0, gl.SliceLayout(0, L3))  # the scales [BN]
    ACC: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[num_warps, 1],
                                                  instr_shape=[16, BM if SWAP else BN, 16])
    a_smem = gl.allocate_shared_memory(gl.float16, [STAGES, BM, BK],
                                       gl.NVMMASharedLayout.get_default_for([BM, BK], gl.float16))
    # the packed blocks are copied and read back in the same layout, so each thread reads only the
    # words it copied itself: no barrier between its wait for the copy and its read
    p_smem = gl.allocate_shared_memory(gl.int32, [STAGES, BK8, BN],
                                       gl.SwizzledSharedLayout(vec=1, per_phase=1, max_phase=1, order=[1, 0]))
    w_smem = gl.allocate_shared_memory(gl.float16, [W_BUFFERS, BK, BN],
                                       gl.NVMMASharedLayout.get_default_for([BK, BN], gl.float16))

    # this split's blocks: whole BK blocks, the last split possibly shorter or empty
    blocks_per_split = (K // BK + SPLIT_K - 1) // SPLIT_K
    first_block = pid_k * blocks_per_split
    n_blocks = gl.maximum(gl.minimum(K // BK - first_block, blocks_per_split), 0)
    k_begin = first_block * BK

    offs_am = pid_m * BM + gl.arange(0, BM, layout=gl.SliceLayout(1, LA))
    offs_ak = gl.arange(0, BK, layout=gl.SliceLayout(0, LA))
    a_ptrs = a_ptr + gl.expand_dims(offs_am, 1) * stride_am + gl.expand_dims(k_begin + offs_ak, 0)
    a_rows = gl.expand_dims(offs_am < M, 1)
    offs_pk = gl.arange(0, BK8, layout=gl.SliceLayout(1, LP))
    offs_pn = pid_n * BN + gl.arange(0, BN, layout=gl.SliceLayout(0, LP))
    b_ptrs = b_ptr + gl.expand_dims(k_begin // 8 + offs_pk, 1) * stride_bk + gl.expand_dims(offs_pn, 0)
    b_cols = gl.expand_dims(offs_pn < N, 0)
    offs_sn = pid_n * BN + gl.arange(0, BN, layout=LS)
    s_cols = offs_sn < N

    # prologue: blocks 0 .. STAGES-3 (A and packed W) in flight, block 0's scales in registers
    for p in gl.static_range(STAGES - 2):
        async_copy.async_copy_global_to_shared(a_smem.index(p), a_ptrs + p * BK, mask=a_rows & (p < n_blocks))
        async_copy.async_copy_global_to_shared(p_smem.index(p), b_ptrs + p * BK8 * stride_bk,
                                               mask=b_cols & (p < n_blocks))
        async_copy.commit_group()
    s = gl.load(s_ptr + (k_begin // GROUP) * stride_sg + offs_sn, mask=s_cols & (n_blocks > 0), other=0.0)

    acc = gl.full([BN, BM] if SWAP else [BM, BN], 0.0, gl.float32, layout=ACC)
    for i in range(n_blocks):
        # the next block's scales: in flight while this block is unpacked and multiplied
        k_next = k_begin + (i + 1) * BK
        s_next = gl.load(s_ptr + (k_next // GROUP) * stride_sg + offs_sn, mask=s_cols & (i + 1 < n_blocks),
                         other=0.0)
        async_copy.wait_group(STAGES - 3)  # this thread's copies of block i have landed
        w_buf = w_smem.index(i % W_BUFFERS)
        if PARTS & 1:  # (timing anatomy only: without it the MMA reads whatever the buffer holds)
            packed = p_smem.index(i % STAGES).load(LP)
            if PTX:
                w_buf.store(_unpack_scaled_ptx(packed, gl.convert_layout(s, gl.SliceLayout(0, LP))))
            else:
                w_buf.store(_unpack_scaled(packed, s, L3))
        fence_async_shared()  # the stores and copies above, visible to the tensor cores' proxy
        gl.thread_barrier()  # ... from every thread
        if PARTS & 2:  # (timing anatomy only: without it C stays 0)
            if SWAP:  # C^T [BN, BM] = W^T [BN, BK] x A^T [BK, BM]: transposed views of the same buffers
                acc = warpgroup_mma(w_buf.permute((1, 0)), a_smem.index(i % STAGES).permute((1, 0)), acc,
                                    is_async=True)
            else:
                acc = warpgroup_mma(a_smem.index(i % STAGES), w_buf, acc, is_async=True)
            acc = warpgroup_mma_wait(num_outstanding=1, deps=(acc,))  # block i-1's MMA is done

        # refill the slots of block i-2: every warp waited for its MMA and read its packed words
        # before this block's barrier
        refill = i + STAGES - 2
        async_copy.async_copy_global_to_shared(a_smem.index(refill % STAGES), a_ptrs + refill * BK,
                                               mask=a_rows & (refill < n_blocks))
        async_copy.async_copy_global_to_shared(p_smem.index(refill % STAGES), b_ptrs + refill * BK8 * stride_bk,
                                               mask=b_cols & (refill < n_blocks))
        async_copy.commit_group()
        s = s_next
    acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc,))
    async_copy.wait_group(0)

    # epilogue: fp16 C tile, or the deterministic split-K reduction of the shipped kernels
    # (with SWAP the accumulator's rows are C's columns)
    offs_cm = pid_m * BM + gl.arange(0, BM, layout=gl.SliceLayout(0 if SWAP else 1, ACC))
    offs_cn = pid_n * BN + gl.arange(0, BN, layout=gl.SliceLayout(1 if SWAP else 0, ACC))
    cm = gl.expand_dims(offs_cm, 0 if SWAP else 1)
    cn = gl.expand_dims(offs_cn, 1 if SWAP else 0)
    mask = (cm < M) & (cn < N)
    c_ptrs = c_ptr + cm * stride_cm + cn * stride_cn
    if SPLIT_K == 1:
        gl.store(c_ptrs, acc.to(gl.float16), mask=mask)
    else:
        ws_ptrs = ws_ptr + cm * N + cn
        gl.store(ws_ptrs + pid_k * M * N, acc, mask=mask)
        gl.thread_barrier()  # every thread's partial is written before the release below
        tile_id = pid_m * gl.num_programs(0) + pid_n
        arrived = gl.atomic_add(lock_ptr + tile_id, 1, sem="acq_rel")
        if arrived == SPLIT_K - 1:
            total = gl.full([BN, BM] if SWAP else [BM, BN], 0.0, gl.float32, layout=ACC)
            for part in range(SPLIT_K):
                total += gl.load(ws_ptrs + part * M * N, mask=mask, other=0.0, cache_modifier=".cg")
            gl.store(c_ptrs, total.to(gl.float16), mask=mask)
            gl.atomic_xchg(lock_ptr + tile_id, 0, sem="relaxed")


def warps(BM, BN, SWAP):
    """16 rows of the wgmma M per warp: the tokens (BM), or with SWAP the weights' columns (BN)."""
    return (BN if SWAP else BM) // 16


def dqmma_launcher(a, packed, scales, out, BM, BN, BK, SPLIT_K, STAGES, PTX=True, SWAP=False, PARTS=3,
                   group_size=128):
    """A no-argument callable running the kernel on these operands (for graph capture)."""
    M, K = a.shape
    N = packed.shape[1]
    assert a.stride(1) == 1 and packed.stride(1) == 1 and scales.stride(1) == 1 and out.stride(1) == 1
    assert K % BK == 0 and group_size % BK == 0 and BM % 8 == 0
    tiles_m, tiles_n = triton.cdiv(M, BM), triton.cdiv(N, BN)
    ws = torch.empty(SPLIT_K * M * N if SPLIT_K > 1 else 1, dtype=torch.float32, device=a.device)  # unread at 1
    locks = torch.zeros(tiles_m * tiles_n, dtype=torch.int32, device=a.device)
    args = (a, packed, scales, out, ws, locks, M, N, K, *a.stride(), *packed.stride(), *scales.stride(), *out.stride())
    meta = dict(GROUP=group_size, BM=BM, BN=BN, BK=BK, SPLIT_K=SPLIT_K, STAGES=STAGES, PTX=PTX, SWAP=SWAP,
                PARTS=PARTS, num_warps=warps(BM, BN, SWAP))
    return lambda: dqmma_kernel[(tiles_n, SPLIT_K, tiles_m)](*args, **meta)


def compile_offline(BM, BN, BK, SPLIT_K, STAGES, PTX=True, SWAP=False, PARTS=3, group_size=128):
    """The kernel compiled for sm_90 without a GPU (pointers, N, K and row strides marked divisible by
    16, as a launch at llama shapes specializes them): for reading its SASS on the development machine."""
    from triton.backends.compiler import GPUTarget
    from triton.experimental.gluon._runtime import GluonASTSource

    names = ["a_ptr", "b_ptr", "s_ptr", "c_ptr", "ws_ptr", "lock_ptr", "M", "N", "K", "stride_am", "stride_bk",
             "stride_sg", "stride_cm"]
    types = ["*fp16", "*i32", "*fp16", "*fp16", "*fp32", "*i32"] + ["i32"] * 7
    # the unit column strides: a launch specializes an int equal to 1 as a constant
    consts = dict(stride_ak=1, stride_bn=1, stride_sn=1, stride_cn=1, GROUP=group_size, BM=BM, BN=BN, BK=BK,
                  SPLIT_K=SPLIT_K, STAGES=STAGES, PTX=PTX, SWAP=SWAP, PARTS=PARTS, num_warps=warps(BM, BN, SWAP))
    signature = {**dict(zip(names, types)), **{name: "constexpr" for name in consts}}
    order = list(dqmma_kernel.arg_names)
    signature = {name: signature[name] for name in order}
    divisible = [order.index(name) for name in names if name != "M"]
    src = GluonASTSource(dqmma_kernel, signature, constexprs=consts,
                         attrs={(i,): [["tt.divisibility", 16]] for i in divisible})
    return triton.compile(src, target=GPUTarget("cuda", 90, 32), options=dict(num_warps=warps(BM, BN, SWAP)))


def schedule(BM, BN, BK, SPLIT_K, STAGES, PTX=True, SWAP=False) -> dict:
    """What the K loop's SASS does per block: its wgmma waits, wgmma and async copies; and spills and
    shared memory."""
    from benchmarks.sass_stats import loop_body, resources, wgmma_waits

    compiled = compile_offline(BM, BN, BK, SPLIT_K, STAGES, PTX, SWAP)
    body = loop_body(compiled, containing="HGMMA")
    return dict(waits=wgmma_waits(body),
                wgmma=sum(op.startswith("HGMMA") for _, op, _ in body),
                async_copies=sum(op.startswith("LDGSTS") for _, op, _ in body),
                instructions=len(body), shared=compiled.metadata.shared,
                buffers=STAGES * (BM * BK * 2 + BK // 8 * BN * 4) + 3 * BK * BN * 2, **resources(compiled))


# (M, K, N) and, per M, (BM, BN, BK, SPLIT_K, STAGES, SWAP): the wgmma M is 16 rows per warp, 64 or 128
# (BM, or with SWAP BN); split-K so that the 86 (N=11008) or 32 (N=4096) column tiles fill 132 SMs
KEYS = [(1, 4096, 11008), (16, 4096, 11008), (32, 4096, 11008), (64, 4096, 11008), (128, 4096, 11008),
        (256, 4096, 11008), (64, 4096, 4096), (128, 4096, 4096), (64, 11008, 4096), (128, 11008, 4096)]
_DECODE = [(16, 64, 64, 4, 4, True), (16, 64, 64, 8, 4, True), (16, 128, 64, 4, 4, True), (16, 128, 128, 4, 4, True),
           (16, 64, 128, 8, 4, True), (64, 128, 64, 4, 4, False)]  # BK=128: ~4.0 instead of ~5.3 instructions/weight
CONFIGS = {1: _DECODE, 16: _DECODE,
           32: [(32, 64, 64, 4, 4, True), (32, 128, 64, 4, 4, True), (32, 64, 64, 8, 4, True), (32, 64, 128, 4, 4, True),
                (64, 128, 64, 4, 4, False), (64, 128, 64, 2, 4, False)],
           64: [(64, 128, 64, 2, 4, False), (64, 128, 64, 4, 4, False), (64, 64, 64, 4, 6, False),
                (64, 128, 128, 4, 3, False), (64, 128, 64, 2, 4, True), (64, 64, 64, 4, 4, True)],
           128: [(128, 128, 64, 1, 4, False), (128, 128, 64, 2, 4, False), (128, 128, 64, 4, 4, False),
                 (64, 128, 64, 2, 4, False), (128, 256, 64, 1, 3, False), (128, 64, 64, 2, 4, False)],
           256: [(128, 128, 64, 1, 4, False), (128, 128, 64, 2, 4, False), (128, 256, 64, 1, 3, False),
                 (128, 64, 64, 1, 4, False)]}


# Second run (after the first one's timings, NOTES.md row 39): the ring above keeps only STAGES-2 blocks
# of packed W in flight per program (2 blocks, 4-8 KB, at STAGES=4), ~1-2 MB over the GPU where the HBM
# needs several MB in flight; every form, the MMA-only one included, ran far under the bandwidth. Small
# A tiles (swapped, decode M) make deep rings cheap: 16 stages of a 16x64 A and 8x64 packed W is 64 KB.
DEEP_KEYS = [(1, 4096, 11008), (16, 4096, 11008), (32, 4096, 11008), (64, 4096, 11008), (128, 4096, 11008),
             (16, 4096, 4096), (64, 4096, 4096), (16, 11008, 4096), (64, 11008, 4096), (128, 11008, 4096)]
_DEEP_DECODE = [(16, 64, 64, 4, 16, True), (16, 64, 64, 8, 16, True), (16, 128, 64, 4, 12, True),
                (16, 64, 128, 4, 8, True), (16, 128, 64, 2, 16, True), (16, 64, 64, 4, 8, True)]
DEEP_CONFIGS = {1: _DEEP_DECODE, 16: _DEEP_DECODE,
                32: [(32, 64, 64, 4, 12, True), (32, 64, 64, 8, 12, True), (32, 128, 64, 4, 10, True),
                     (32, 64, 64, 4, 16, True)],
                64: [(64, 128, 64, 2, 12, False), (64, 128, 64, 2, 8, False), (64, 128, 64, 4, 12, False),
                     (64, 64, 64, 4, 12, True), (64, 64, 64, 2, 12, True)],
                128: [(128, 128, 64, 1, 8, False), (128, 64, 64, 2, 8, True), (128, 128, 64, 2, 8, False),
                      (64, 128, 64, 2, 12, False)]}


# Third run: the only key where a form won is M=128 on 4096x11008 (bm128.bn128, one split: 48.5 us at 4
# stages, 43.2 at 8, against the table's 53.9): the same tiles at M=96..192 on every llama-7b shape, to
# see where a `dqmma` family would take buckets from swapab and the dequantize route.
_WIDE = [(128, 128, 64, 1, 8, False), (128, 128, 64, 1, 6, False), (128, 128, 64, 1, 4, False),
         (128, 64, 64, 1, 8, False)]
M128_KEYS = [(M, K, N) for M in (96, 128, 192)
             for K, N in ((4096, 11008), (4096, 12288), (4096, 22016), (11008, 4096), (4096, 4096))]
M128_CONFIGS = {96: _WIDE, 128: _WIDE, 192: _WIDE}
RUNS = {"first": (KEYS, CONFIGS), "deep": (DEEP_KEYS, DEEP_CONFIGS), "m128": (M128_KEYS, M128_CONFIGS)}


def _timed(config, copies):
    """Graph-replayed µs of the kernel over the rotated operand copies, or why it could not run."""
    from tunesearch.bench import graph_time

    try:
        return graph_time([dqmma_launcher(*c, **config) for c in copies], replays=20).us
    except Exception as e:  # a config that does not compile or fit: say so, go on
        return f"{type(e).__name__}: {str(e)[:160]}"


def main(out_dir, keys=KEYS, configs=CONFIGS, name="gluon_dqmma"):
    from tunesearch.bench import REL_TOL, CheckInputs, Operands, relative_error, time_fp16, time_variant
    from tunesearch.dispatch import Dispatcher, read_table
    from tunesearch.gpu import gpu_info

    info = gpu_info(0)
    table = Dispatcher(read_table(ROOT / "tunesearch" / "tables" / "h200.json"), strict=True)
    rows = []
    for M, K, N in keys:
        ops = Operands(M, N, K, 128, info.l2_bytes)
        inputs = CheckInputs(M, N, K, 128, "cuda")
        shipped = table.resolve(M, N, K, torch.device("cuda"))  # strict: every key is a tuned llama-7b shape
        ref = dict(fp16=time_fp16(M, N, K, info.l2_bytes, replays=20).us,
                   table=time_variant(shipped, ops, replays=20).us, table_variant=shipped.id)
        print(f"M={M} {K}x{N}: fp16 {ref['fp16']:.2f} | table {ref['table']:.2f} ({shipped.id})", flush=True)

        def record(config, label, us, **extra):
            rows.append(dict(M=M, K=K, N=N, config=config, us=us, **extra, **ref))
            shown = us if isinstance(us, str) else f"{us:.2f}"
            print(f"  bm{config['BM']} bn{config['BN']} bk{config['BK']} sk{config['SPLIT_K']} s{config['STAGES']} "
                  f"{label}: {shown}", flush=True)

        for n, (BM, BN, BK, SK, st, swap) in enumerate(configs[M]):
            for ptx in ((True, False) if n == 0 else (True,)):  # the plain unpack once per key, for scale
                config = dict(BM=BM, BN=BN, BK=BK, SPLIT_K=SK, STAGES=st, PTX=ptx, SWAP=swap)
                # a wrong result is recorded as WRONG and not timed (this kernel's first GPU run checks
                # its two unpack forms separately, so one form's bug must not hide the other's result)
                try:
                    out = torch.full((M, N), float("nan"), dtype=torch.float16, device="cuda")
                    dqmma_launcher(inputs.a, inputs.packed, inputs.scales, out, **config)()
                    err = relative_error(out, inputs.ref)
                    us = _timed(config, ops.copies) if err < REL_TOL else f"WRONG: relative error {err:.3g}"
                except Exception as e:  # a config that does not compile or fit: say so, go on
                    us = f"{type(e).__name__}: {str(e)[:160]}"
                record(config, ("swap " if swap else "") + ("ptx" if ptx else "plain"), us)
            if n == 0:  # anatomy, timing only (wrong results): the unpack without the MMA, the MMA without it
                for parts, what in ((1, "unpack only"), (2, "mma only")):
                    config = dict(BM=BM, BN=BN, BK=BK, SPLIT_K=SK, STAGES=st, PTX=True, SWAP=swap, PARTS=parts)
                    record(config, what, _timed(config, ops.copies), anatomy=what)
        del ops, inputs
        with open(f"{out_dir}/{name}.json", "w") as f:
            json.dump(dict(gpu=info.to_dict(), rows=rows), f, indent=1)


if __name__ == "__main__":
    if sys.argv[1] == "--schedule":  # offline, no GPU: python ... --schedule BM,BN,BK,SPLIT_K,STAGES[,SWAP]
        BM, BN, BK, SPLIT_K, STAGES, *swap = map(int, sys.argv[2].split(","))
        print(json.dumps(schedule(BM, BN, BK, SPLIT_K, STAGES, SWAP=bool(swap and swap[0]))))
    else:  # OUT_DIR [first | deep | m128]: which run (RUNS)
        keys, configs = RUNS[sys.argv[2] if len(sys.argv) > 2 else "first"]
        main(sys.argv[1], keys, configs, name="gluon_dqmma" + ("" if len(sys.argv) < 3 else "_" + sys.argv[2]))
