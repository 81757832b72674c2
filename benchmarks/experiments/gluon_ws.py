"""EXPERIMENT: the dqmma GEMM warp-specialized, so no warp waits for another kind of work.

    python benchmarks/experiments/gluon_ws.py OUT_DIR          (on an sm_90 GPU: check, then time)
    python benchmarks/experiments/gluon_ws.py --compile BM,BN,BK,SPLIT_K,STAGES,W_BUFFERS   (offline)

Why: the dqmma family (variants/dqmma.py) runs one schedule in every warp: wait for the copies, unpack,
store, barrier, issue the MMA, wait for the previous one, copy. Its MMA-only form already takes ~1.6x a
program's tensor work (NOTES.md rows 39-41): the step is serial, so the tensor cores idle while the
warps wait, and the unpack does not overlap the MMA as much as the schedule says. Here each kind of work
has warps of its own, handing buffers over through mbarriers:

    load (1 warp):    wait until slot s is free -> TMA A [BM, BK] and packed W [BK/8, BN] into it
    unpack (4 warps): wait for slot s -> packed W to registers -> free it for the loader -> unpack and
                      scale -> wait for W buffer b to be free -> store fp16 W -> fence -> mark b ready
    mma (default, BM/16 warps): wait for slot s and W buffer b -> wgmma async -> wait for the previous
                      wgmma -> free its A slot and W buffer; then the epilogue (split-K as dqmma's)

so the loader keeps STAGES blocks in flight without a thread of the unpack waiting on them, the unpack
runs ahead of the MMA by up to W_BUFFERS blocks, and the tensor cores are fed as soon as both halves of
a block are ready. TMA zero-fills rows past M and columns past N.

Timed on the H200 (NOTES.md row 45). The probe first
runs each config on small mask-edge shapes in a child process with a timeout (a wrong barrier phase
hangs rather than fails: that config is then recorded HANG and skipped), checks it at the key against
A @ dequantize(W), and only then times it, beside the dqmma family and the packaged table; for each
key's first config also two anatomy forms (PARTS: 1 no MMA, 2 no unpack).
"""
import json
import sys
from pathlib import Path

import torch
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (fence_async_shared, mbarrier, tma, warpgroup_mma,
                                                              warpgroup_mma_wait)

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # so that it runs as a script from anywhere

from tunesearch.variants.dqmma import _unpack_scaled_ptx  # noqa: E402  (dqmma's unpack, PTX)

LOAD_WARPS = gl.constexpr(1)


@gluon.jit
def _mma_partition(a_smem, w_smem, ready, a_empty, w_ready, w_empty, n_blocks,
                   BM: gl.constexpr, BN: gl.constexpr, num_warps: gl.constexpr, PARTS: gl.constexpr):
    STAGES: gl.constexpr = a_smem.type.shape[0]
    WB: gl.constexpr = w_smem.type.shape[0]
    ACC: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[num_warps, 1],
                                                  instr_shape=[16, BN, 16])
    acc = gl.zeros([BM, BN], gl.float32, ACC)
    for i in range(n_blocks):
        mbarrier.wait(ready.index(i % STAGES), (i // STAGES) & 1)
        mbarrier.wait(w_ready.index(i % WB), (i // WB) & 1)
        if PARTS & 2:  # (anatomy only: without it C stays 0)
            acc = warpgroup_mma(a_smem.index(i % STAGES), w_smem.index(i % WB), acc, is_async=True)
            acc = warpgroup_mma_wait(num_outstanding=1, deps=(acc,))
        # block i-1's MMA is done: its A slot and its W buffer may be refilled
        mbarrier.arrive(a_empty.index((i + STAGES - 1) % STAGES), pred=i > 0)
        mbarrier.arrive(w_empty.index((i + WB - 1) % WB), pred=i > 0)
    acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc,))
    return (acc,)  # the default partition's results come back as a tuple


# The worker partitions share one signature. Triton 3.6 hands a worker its constexpr arguments as int32
# scalars, so the tile sizes come from the buffers' shapes and the group size and PARTS arrive as values.
@gluon.jit
def _load_partition(a_desc, p_desc, s_desc, a_smem, p_smem, s_smem, w_smem, ready, a_empty, p_empty, w_ready,
                    w_empty, pid_n, pid_m, k_begin, n_blocks, group, parts):
    STAGES: gl.constexpr = a_smem.type.shape[0]
    BM: gl.constexpr = a_smem.type.shape[1]
    BK: gl.constexpr = a_smem.type.shape[2]
    BN: gl.constexpr = p_smem.type.shape[2]
    for i in range(n_blocks):
        s = i % STAGES
        phase = (i // STAGES) & 1
        mbarrier.wait(a_empty.index(s), phase ^ 1)  # a fresh barrier counts as freed: the first round passes
        mbarrier.wait(p_empty.index(s), phase ^ 1)
        bar = ready.index(s)
        mbarrier.expect(bar, a_desc.block_type.nbytes + p_desc.block_type.nbytes + s_desc.block_type.nbytes)
        k = k_begin + i * BK
        tma.async_copy_global_to_shared(a_desc, [pid_m * BM, k], bar, a_smem.index(s))
        tma.async_copy_global_to_shared(p_desc, [k // 8, pid_n * BN], bar, p_smem.index(s))
        # the block's scale row rides with its weights (row 45: a global load of it in the unpack warps,
        # even one block ahead, left every block waiting on an L2 round trip)
        tma.async_copy_global_to_shared(s_desc, [k // group, pid_n * BN], bar, s_smem.index(s))


@gluon.jit
def _unpack_body(p_smem, s_smem, w_smem, ready, p_empty, w_ready, w_empty, n_blocks, parts, UW: gl.constexpr):
    STAGES: gl.constexpr = p_smem.type.shape[0]
    WB: gl.constexpr = w_smem.type.shape[0]
    BN: gl.constexpr = w_smem.type.shape[2]
    # the packed block [BK/8, BN]: 4 words along n per thread, all eight nibbles of a word in its thread
    TN: gl.constexpr = 32 if BN >= 128 else BN // 4
    LP: gl.constexpr = gl.BlockedLayout([1, 4], [32 // TN, TN], [UW, 1], [1, 0])
    for i in range(n_blocks):
        s = i % STAGES
        mbarrier.wait(ready.index(s), (i // STAGES) & 1)
        packed = p_smem.index(s).load(LP)
        scale = gl.reshape(s_smem.index(s).load(LP), [BN])  # [1, BN] -> [BN]
        fence_async_shared()  # these reads, ordered before the loader's next TMA write into the slot
        mbarrier.arrive(p_empty.index(s))
        b = i % WB
        mbarrier.wait(w_empty.index(b), ((i // WB) & 1) ^ 1)
        if parts % 2 == 1:  # (anatomy only: without it the MMA reads whatever the buffer holds)
            w_smem.index(b).store(_unpack_scaled_ptx(packed, gl.convert_layout(scale, gl.SliceLayout(0, LP))))
        fence_async_shared()  # the stores, visible to the tensor cores' proxy
        mbarrier.arrive(w_ready.index(b))


# One wrapper per unpack warp count: the layout needs the count as a constant, and a worker's own
# constexpr arguments arrive as values.
@gluon.jit
def _unpack4_partition(a_desc, p_desc, s_desc, a_smem, p_smem, s_smem, w_smem, ready, a_empty, p_empty, w_ready,
                       w_empty, pid_n, pid_m, k_begin, n_blocks, group, parts):
    _unpack_body(p_smem, s_smem, w_smem, ready, p_empty, w_ready, w_empty, n_blocks, parts, 4)


@gluon.jit
def _unpack8_partition(a_desc, p_desc, s_desc, a_smem, p_smem, s_smem, w_smem, ready, a_empty, p_empty, w_ready,
                       w_empty, pid_n, pid_m, k_begin, n_blocks, group, parts):
    _unpack_body(p_smem, s_smem, w_smem, ready, p_empty, w_ready, w_empty, n_blocks, parts, 8)


@gluon.jit
def ws_kernel(a_desc, p_desc, s_desc, c_ptr, ws_ptr, lock_ptr, M, N, K, stride_cm,
              GROUP: gl.constexpr, BM: gl.constexpr, BN: gl.constexpr, BK: gl.constexpr,
              SPLIT_K: gl.constexpr, STAGES: gl.constexpr, W_BUFFERS: gl.constexpr, num_warps: gl.constexpr,
              PARTS: gl.constexpr = 3, UNPACK_WARPS: gl.constexpr = 4, UNPACK_REGS: gl.constexpr = 128):
    gl.static_assert(BM == 16 * num_warps, "16 rows of the wgmma M per warp")
    gl.static_assert(GROUP % BK == 0, "a block lies in one scale group")
    pid_n = gl.program_id(0)
    pid_k = gl.program_id(1)
    pid_m = gl.program_id(2)
    blocks_per_split = (K // BK + SPLIT_K - 1) // SPLIT_K
    first_block = pid_k * blocks_per_split
    n_blocks = gl.maximum(gl.minimum(K // BK - first_block, blocks_per_split), 0)
    k_begin = first_block * BK

    a_smem = gl.allocate_shared_memory(gl.float16, [STAGES, BM, BK], a_desc.layout)
    p_smem = gl.allocate_shared_memory(gl.int32, [STAGES, BK // 8, BN], p_desc.layout)
    s_smem = gl.allocate_shared_memory(gl.float16, [STAGES, 1, BN], s_desc.layout)
    w_smem = gl.allocate_shared_memory(gl.float16, [W_BUFFERS, BK, BN],
                                       gl.NVMMASharedLayout.get_default_for([BK, BN], gl.float16))
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    a_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    p_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    w_ready = gl.allocate_shared_memory(gl.int64, [W_BUFFERS, 1], mbarrier.MBarrierLayout())
    w_empty = gl.allocate_shared_memory(gl.int64, [W_BUFFERS, 1], mbarrier.MBarrierLayout())
    for j in gl.static_range(STAGES):
        mbarrier.init(ready.index(j), count=1)
        mbarrier.init(a_empty.index(j), count=1)
        mbarrier.init(p_empty.index(j), count=1)
    for j in gl.static_range(W_BUFFERS):
        mbarrier.init(w_ready.index(j), count=1)
        mbarrier.init(w_empty.index(j), count=1)

    worker_args = (a_desc, p_desc, s_desc, a_smem, p_smem, s_smem, w_smem, ready, a_empty, p_empty, w_ready,
                   w_empty, pid_n, pid_m, k_begin, n_blocks, GROUP, PARTS)
    (acc,) = gl.warp_specialize([
        (_mma_partition, (a_smem, w_smem, ready, a_empty, w_ready, w_empty, n_blocks, BM, BN, num_warps, PARTS)),
        (_load_partition, worker_args),
        (_unpack8_partition if UNPACK_WARPS == 8 else _unpack4_partition, worker_args),
    ], [LOAD_WARPS, UNPACK_WARPS], [24, UNPACK_REGS])

    # epilogue: fp16 C, or dqmma's deterministic split-K reduction
    ACC: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[num_warps, 1],
                                                  instr_shape=[16, BN, 16])
    offs_cm = pid_m * BM + gl.arange(0, BM, layout=gl.SliceLayout(1, ACC))
    offs_cn = pid_n * BN + gl.arange(0, BN, layout=gl.SliceLayout(0, ACC))
    cm = gl.expand_dims(offs_cm, 1)
    cn = gl.expand_dims(offs_cn, 0)
    mask = (cm < M) & (cn < N)
    c_ptrs = c_ptr + cm * stride_cm + cn
    if SPLIT_K == 1:
        gl.store(c_ptrs, acc.to(gl.float16), mask=mask)
    else:
        ws_ptrs = ws_ptr + cm * N + cn
        gl.store(ws_ptrs + pid_k * M * N, acc, mask=mask)
        gl.thread_barrier()
        tile_id = pid_m * gl.num_programs(0) + pid_n
        arrived = gl.atomic_add(lock_ptr + tile_id, 1, sem="acq_rel")
        if arrived == SPLIT_K - 1:
            total = gl.zeros([BM, BN], gl.float32, ACC)
            for part in range(SPLIT_K):
                total += gl.load(ws_ptrs + part * M * N, mask=mask, other=0.0, cache_modifier=".cg")
            gl.store(c_ptrs, total.to(gl.float16), mask=mask)
            gl.atomic_xchg(lock_ptr + tile_id, 0, sem="relaxed")


def layouts(BM, BN, BK):
    """Shared layouts of the three TMA boxes: A [BM, BK] swizzled for wgmma; packed W [BK/8, BN] and the
    scale row [1, BN] plain (a 512-byte row is wider than any swizzle span; the unpack reads 16 bytes per
    thread along it)."""
    a = gl.NVMMASharedLayout.get_default_for([BM, BK], gl.float16)
    p = gl.NVMMASharedLayout(swizzle_byte_width=0, element_bitwidth=32, rank=2)
    s = gl.NVMMASharedLayout(swizzle_byte_width=0, element_bitwidth=16, rank=2)
    return a, p, s


def registers(BM, UNPACK_WARPS):
    """(maxnreg at launch, the unpack warps' registers): every warp starts with maxnreg, so the CTA's
    warps (MMA BM/16, load 1, unpack) must fit the 64K registers of an SM at that count; the partitions
    then move registers to the MMA warps (accumulator) from the load and unpack warps."""
    warps = BM // 16 + 1 + UNPACK_WARPS
    return min(128, 65536 // (32 * warps) // 8 * 8), 128 if UNPACK_WARPS == 4 else 96


def ws_launcher(a, packed, scales, out, BM, BN, BK, SPLIT_K, STAGES, W_BUFFERS, PARTS=3, UNPACK_WARPS=4,
                group_size=128):
    """A no-argument callable running the kernel on these operands (for graph capture)."""
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

    M, K = a.shape
    N = packed.shape[1]
    maxnreg, unpack_regs = registers(BM, UNPACK_WARPS)
    a_layout, p_layout, s_layout = layouts(BM, BN, BK)
    a_desc = TensorDescriptor.from_tensor(a, [BM, BK], a_layout)
    p_desc = TensorDescriptor.from_tensor(packed, [BK // 8, BN], p_layout)
    s_desc = TensorDescriptor.from_tensor(scales, [1, BN], s_layout)
    tiles_m, tiles_n = triton.cdiv(M, BM), triton.cdiv(N, BN)
    ws = torch.empty(SPLIT_K * M * N if SPLIT_K > 1 else 1, dtype=torch.float32, device=a.device)
    locks = torch.zeros(tiles_m * tiles_n, dtype=torch.int32, device=a.device)
    args = (a_desc, p_desc, s_desc, out, ws, locks, M, N, K, out.stride(0))
    meta = dict(GROUP=group_size, BM=BM, BN=BN, BK=BK, SPLIT_K=SPLIT_K, STAGES=STAGES, W_BUFFERS=W_BUFFERS,
                PARTS=PARTS, UNPACK_WARPS=UNPACK_WARPS, UNPACK_REGS=unpack_regs, num_warps=BM // 16, maxnreg=maxnreg)
    return lambda: ws_kernel[(tiles_n, SPLIT_K, tiles_m)](*args, **meta)


def compile_offline(BM, BN, BK, SPLIT_K, STAGES, W_BUFFERS, UNPACK_WARPS=4, PARTS=3, group_size=128):
    """The kernel compiled for sm_90 without a GPU (descriptors of a 4096-deep layer's operands)."""
    from triton.backends.compiler import GPUTarget
    from triton.experimental.gluon._runtime import GluonASTSource
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor
    from triton.runtime.jit import mangle_type

    maxnreg, unpack_regs = registers(BM, UNPACK_WARPS)
    a_layout, p_layout, s_layout = layouts(BM, BN, BK)
    a_desc = TensorDescriptor.from_tensor(torch.empty(BM, 4096, dtype=torch.float16), [BM, BK], a_layout)
    p_desc = TensorDescriptor.from_tensor(torch.empty(512, 11008, dtype=torch.int32), [BK // 8, BN], p_layout)
    s_desc = TensorDescriptor.from_tensor(torch.empty(32, 11008, dtype=torch.float16), [1, BN], s_layout)
    consts = dict(GROUP=group_size, BM=BM, BN=BN, BK=BK, SPLIT_K=SPLIT_K, STAGES=STAGES, W_BUFFERS=W_BUFFERS,
                  PARTS=PARTS, UNPACK_WARPS=UNPACK_WARPS, UNPACK_REGS=unpack_regs, num_warps=BM // 16)
    types = dict(a_desc=mangle_type(a_desc), p_desc=mangle_type(p_desc), s_desc=mangle_type(s_desc),
                 c_ptr="*fp16", ws_ptr="*fp32", lock_ptr="*i32", M="i32", N="i32", K="i32", stride_cm="i32")
    signature = {name: types.get(name, "constexpr") for name in ws_kernel.arg_names}
    divisible = [ws_kernel.arg_names.index(n) for n in ("c_ptr", "ws_ptr", "lock_ptr", "N", "K", "stride_cm")]
    src = GluonASTSource(ws_kernel, signature, constexprs=consts,
                         attrs={(i,): [["tt.divisibility", 16]] for i in divisible})
    return triton.compile(src, target=GPUTarget("cuda", 90, 32),
                          options=dict(num_warps=BM // 16, maxnreg=maxnreg))


def shared_bytes(BM, BN, BK, STAGES, W_BUFFERS):
    """The buffers' shared memory (the compiled kernel adds its 8-byte mbarriers and alignment)."""
    return STAGES * (BM * BK * 2 + BK // 8 * BN * 4 + BN * 2) + W_BUFFERS * BK * BN * 2


def schedule(BM, BN, BK, SPLIT_K, STAGES, W_BUFFERS, UNPACK_WARPS=4) -> dict:
    """What the compiled kernel holds (sm_90, offline): wgmma and their waits, TMA loads, the partitions'
    register moves, shared memory, registers and spills."""
    from benchmarks.sass_stats import disassemble, resources

    compiled = compile_offline(BM, BN, BK, SPLIT_K, STAGES, W_BUFFERS, UNPACK_WARPS)
    sass = disassemble(compiled)
    return dict(wgmma=sum(op.startswith("HGMMA") for _, op, _ in sass),
                waits=[rest.split(";")[0].strip() for _, op, rest in sass if op.startswith("WARPGROUP.DEPBAR")],
                tma_loads=sum(op.startswith("UTMALDG") for _, op, _ in sass),
                setmaxreg=sum("SETMAXREG" in op for _, op, _ in sass),
                shared=compiled.metadata.shared, buffers=shared_bytes(BM, BN, BK, STAGES, W_BUFFERS),
                **resources(compiled))


# (M, K, N) and per M the configs (BM, BN, BK, SPLIT_K, STAGES, W_BUFFERS, UNPACK_WARPS); the first of
# each is the dqmma family's packaged pick at M=128 (bm128.bn128.bk64, one split), rebuilt warp-specialized
KEYS = [(64, 4096, 11008), (128, 4096, 11008), (128, 4096, 12288), (128, 4096, 22016), (128, 4096, 4096),
        (128, 11008, 4096), (256, 4096, 11008)]
# (BN=256 does not fit: 16 warps at maxnreg 128, and its accumulator needs ~154 registers a thread.)
CONFIGS = {64: [(64, 128, 64, 1, 6, 3, 4), (64, 128, 128, 1, 4, 2, 4), (64, 128, 128, 1, 4, 2, 8),
                (64, 128, 128, 1, 5, 2, 4)],
           128: [(128, 128, 64, 1, 6, 3, 4), (128, 128, 128, 1, 3, 2, 4), (128, 128, 128, 1, 4, 2, 4),
                 (128, 128, 64, 4, 6, 3, 4), (128, 128, 128, 2, 3, 2, 4), (64, 128, 128, 2, 4, 2, 8)],
           256: [(128, 128, 64, 1, 6, 3, 4), (128, 128, 128, 1, 3, 2, 4), (128, 128, 128, 1, 4, 2, 4)]}
# (UNPACK_WARPS=8 beside BM=128 does not launch: worker partitions are padded to warp groups, and 8 MMA
# + 4 + 8 warps exceed 512 threads at 128 registers.)
FIELDS = ("BM", "BN", "BK", "SPLIT_K", "STAGES", "W_BUFFERS", "UNPACK_WARPS")


# Mask edges for the smoke check: M across the row tiles (65, 130), N no multiple of BN (200), K of one
# block per split (256 in two splits of 64-deep blocks is 2 each) and of several (1024).
SMOKE_SHAPES = [(65, 256, 200), (130, 1024, 520), (128, 4096, 4096)]


def smoke(config) -> str | None:
    """Run ``config`` on the smoke shapes against A @ dequantize(W); None, or what went wrong."""
    from tunesearch.bench import REL_TOL, CheckInputs, relative_error

    for M, K, N in SMOKE_SHAPES:
        inputs = CheckInputs(M, N, K, 128, "cuda", seed=M + K + N)
        out = torch.full((M, N), float("nan"), dtype=torch.float16, device="cuda")
        ws_launcher(inputs.a, inputs.packed, inputs.scales, out, **config)()
        torch.cuda.synchronize()
        err = relative_error(out, inputs.ref)
        if not err < REL_TOL:
            return f"WRONG at M={M} K={K} N={N}: relative error {err:.3g}"
    return None


def smoke_in_child(config, timeout_s=90) -> str | None:
    """``smoke`` in a process of its own, so that a hang (a barrier waited on with the wrong phase never
    completes) costs this config its timeout instead of the whole probe."""
    import subprocess

    arg = ",".join(str(config[k]) for k in FIELDS)
    try:
        run = subprocess.run([sys.executable, __file__, "--smoke", arg], capture_output=True, text=True,
                             timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return f"HANG: no result in {timeout_s} s"
    if run.returncode != 0:
        return (run.stdout.strip().splitlines() or run.stderr.strip().splitlines() or ["failed"])[-1][:200]
    return None


def main(out_dir):
    from tunesearch.bench import REL_TOL, CheckInputs, Operands, graph_time, relative_error, time_fp16, time_variant
    from tunesearch.dispatch import Dispatcher, read_table
    from tunesearch.gpu import gpu_info
    from tunesearch.variants import Variant

    info = gpu_info(0)
    table = Dispatcher(read_table(ROOT / "tunesearch" / "tables" / "h200.json"), strict=True)
    dqmma = Variant.from_id("dqmma.bm128.bn128.bk64.sk1.w8.s8")
    rows, smoked = [], {}
    for M, K, N in KEYS:
        ops = Operands(M, N, K, 128, info.l2_bytes)
        inputs = CheckInputs(M, N, K, 128, "cuda")
        shipped = table.resolve(M, N, K, torch.device("cuda"))
        ref = dict(fp16=time_fp16(M, N, K, info.l2_bytes, replays=20).us,
                   table=time_variant(shipped, ops, replays=20).us, table_variant=shipped.id,
                   dqmma=time_variant(dqmma, ops, replays=20).us)
        print(f"M={M} {K}x{N}: fp16 {ref['fp16']:.2f} | table {ref['table']:.2f} ({shipped.id}) | "
              f"dqmma {ref['dqmma']:.2f}", flush=True)
        for n, key in enumerate(CONFIGS[M]):
            forms = [(3, "ws")] + ([(1, "unpack only"), (2, "mma only")] if n < 2 else [])
            if key not in smoked:  # once per config, in a child process: a hang must not stop the probe
                smoked[key] = smoke_in_child(dict(zip(FIELDS, key)))
            for parts, label in forms:
                config = dict(zip(FIELDS, key), PARTS=parts)
                try:
                    if smoked[key]:
                        raise RuntimeError(smoked[key])
                    if parts == 3:  # checked first; a wrong result is recorded and not timed
                        out = torch.full((M, N), float("nan"), dtype=torch.float16, device="cuda")
                        ws_launcher(inputs.a, inputs.packed, inputs.scales, out, **config)()
                        torch.cuda.synchronize()
                        err = relative_error(out, inputs.ref)
                        if not err < REL_TOL:
                            raise AssertionError(f"WRONG: relative error {err:.3g}")
                    us = graph_time([ws_launcher(*c, **config) for c in ops.copies], replays=20).us
                except Exception as e:  # a config that does not compile, fit or compute right: say so
                    us = f"{type(e).__name__}: {str(e)[:160]}"
                rows.append(dict(M=M, K=K, N=N, config=config, form=label, us=us, **ref))
                shown = us if isinstance(us, str) else f"{us:.2f}"
                print("  bm{} bn{} bk{} sk{} s{} wb{} uw{} ".format(*key) + f"{label}: {shown}", flush=True)
        del ops, inputs
        with open(f"{out_dir}/gluon_ws.json", "w") as f:
            json.dump(dict(gpu=info.to_dict(), rows=rows), f, indent=1)


if __name__ == "__main__":
    if sys.argv[1] == "--compile":  # offline, no GPU: python ... --compile BM,BN,BK,SPLIT_K,STAGES,W_BUFFERS[,UW]
        print(json.dumps(schedule(*map(int, sys.argv[2].split(",")))))
    elif sys.argv[1] == "--smoke":  # on the GPU, one config: python ... --smoke BM,BN,BK,SPLIT_K,STAGES,W_BUFFERS,UW
        problem = smoke(dict(zip(FIELDS, map(int, sys.argv[2].split(",")))))
        print(problem or "ok")
        sys.exit(1 if problem else 0)
    else:
        main(sys.argv[1])
