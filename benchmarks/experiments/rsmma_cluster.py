"""EXPERIMENT: rsmma's split-K reduction through distributed shared memory (a thread-block cluster).

    python benchmarks/experiments/rsmma_cluster.py OUT_DIR [MAX_M]   (sm_90 GPU: check and time)
    python benchmarks/experiments/rsmma_cluster.py --compile VARIANT_ID  (offline: compiles, registers)

The table's picks at M = 1, 16, 32, 64 (128, 256 up to MAX_M) on the llama-7b shapes, and each one-split
pick's twin with two splits (CLUSTER_TWINS=0: none), in the forms CLUSTER_FORMS names (default
family,cluster; see ALL_FORMS and rsmma_cluster_kernel's EXCHANGE); CLUSTER_ONLY="M,K,N;..." those keys
alone, CLUSTER_PICKS="M,K,N=ID|ID;..." more variants there. NOTES.md row 89 has the runs.

The family's split tail (NOTES.md rows 66, 68, 84): every split but the summing one stores its fp32
partial [BN, BM] to a global workspace, fences and counts; the one that sums reads them back from L2.
Row 68's bare ring took 2.4 us off M=32 4096x11008 (12.69 -> 10.29) with the reduction kept on chip.
Here the SPLIT_K CTAs of a tile are launched as one cluster (the launch's cluster dimension: Triton's
launcher does it for `num_ctas`, which is only passed at launch, the kernel compiled for one CTA, so no
layout changes; CTA x is rank x % SPLIT_K of column tile x // SPLIT_K). Rank r >= 1, its loop done and
its ring drained, stores its fp32 partial into its own shared memory from offset 0 (the first ring
buffer: the launch checks the partial fits it) and arrives on rank 0's mbarrier
(`mbarrier.arrive.release.cluster` at a `mapa` address); rank 0 waits on it, reads each partial from its
rank's shared memory (`ld.shared::cluster`), adds them in rank order (the family's bits), arrives on
each rank's own mbarrier (a CTA's shared memory goes when it exits, so each waits for that), and stores
C through its drained ring as the one-split launch does. No global workspace, fence or counter on the
summing CTA's path, and 16 bytes more shared memory a CTA (the CTAs an SM stay the family's).

Gluon (Triton 3.6) gives no shared-memory address, so the mbarriers lie past Triton's allocation: the
kernel is compiled once to learn its shared size S, again with REGION = S rounded up to 16 (a constexpr
only the inline PTX reads: the same allocation, checked), and launched with REGION + 16 bytes of dynamic
shared memory: [REGION, +8) rank 0's mbarrier, [REGION + 8, +8) each other rank's.

Rank 0's mbarrier must be initialised before the others arrive on it. A cluster barrier cannot say so:
`barrier.cluster.wait` waits for every thread of the cluster, and the warp-specialized kernel's idle
padding warps never run code of ours. So rank 0's initialising thread publishes it through the tile's
split counter in global memory (`fence.mbarrier_init`, then `st.release.gpu` of 1), and the other
ranks' threads acquire-poll that word before arriving; rank 0 re-arms it to 0 after its wait (every poll
has then succeeded). The poll is off the critical path: the others end first (SKEW) and the word was set
at rank 0's start. Each other rank's own mbarrier is initialised before its arrival on rank 0's, which
rank 0 acquires before arriving on it.
"""
import json
import os
import sys
from pathlib import Path

import torch
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import mbarrier

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # so that it runs as a script from anywhere

from tunesearch.variants import rsmma  # noqa: E402
from tunesearch.variants.dqmma import _unit, split_parts, token_origin  # noqa: E402


@gluon.jit
def _thread_ids(WARPS: gl.constexpr):
    """One element a thread of the MMA warps (a tensor to hang per-thread PTX on)."""
    return gl.arange(0, 32 * WARPS, layout=gl.BlockedLayout([1], [32], [WARPS], [0]))


@gluon.jit
def _smem_addr(offset):
    """The CTA's shared address global_smem + offset (Triton's dynamic shared memory symbol)."""
    return gl.inline_asm_elementwise(
        asm="{ .reg .u32 b; mov.u32 b, global_smem; add.u32 $0, b, $1; }",
        constraints="=r,r", args=[offset], dtype=gl.int32, is_pure=True, pack=1)


@gluon.jit
def _init_barrier(flag_ptr, OFFSET: gl.constexpr, count, PUBLISH: gl.constexpr, WARPS: gl.constexpr):
    """Thread 0 initialises the mbarrier at shared OFFSET for ``count`` arrivals, fenced for the cluster; with
    PUBLISH it then sets the tile's flag (release), for the other ranks to poll before arriving on it."""
    t = _thread_ids(WARPS)
    bar = _smem_addr(gl.zeros_like(t) + OFFSET)
    flag = flag_ptr + gl.zeros_like(t)
    gl.inline_asm_elementwise(
        asm=f"""{{ .reg .pred p; setp.eq.u32 p, $1, 0;
        @p mbarrier.init.shared::cta.b64 [$2], $4;
        @p fence.mbarrier_init.release.cluster;
        {"@p st.release.gpu.global.u32 [$3], 1;" if PUBLISH else ""}
        mov.u32 $0, 0; }}""",
        constraints="=r,r,r,l,r", args=[t, bar, flag, gl.zeros_like(t) + count], dtype=gl.int32, is_pure=False,
        pack=1)


@gluon.jit
def _wait_barrier(OFFSET: gl.constexpr, WARPS: gl.constexpr):
    """Every thread waits for phase 0 of the mbarrier at shared OFFSET (acquire, cluster scope)."""
    bar = _smem_addr(gl.zeros_like(_thread_ids(WARPS)) + OFFSET)
    gl.inline_asm_elementwise(
        asm="""{ .reg .pred p;
        WAIT: mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [$1], 0; @!p bra WAIT;
        mov.u32 $0, 0; }""",
        constraints="=r,r", args=[bar], dtype=gl.int32, is_pure=False, pack=1)


@gluon.jit
def _arrive_remote(OFFSET: gl.constexpr, rank, WARPS: gl.constexpr):
    """Every thread arrives (release, cluster scope) on the mbarrier at shared OFFSET of CTA ``rank``."""
    bar = _smem_addr(gl.zeros_like(_thread_ids(WARPS)) + OFFSET)
    gl.inline_asm_elementwise(
        asm="""{ .reg .u32 ra; mapa.shared::cluster.u32 ra, $1, $2;
        mbarrier.arrive.release.cluster.shared::cluster.b64 _, [ra];
        mov.u32 $0, 0; }""",
        constraints="=r,r,r", args=[bar, rank], dtype=gl.int32, is_pure=False, pack=1)


@gluon.jit
def _slot_offsets(acc):
    """Each accumulator element's byte offset in a partial slot at shared offset 0: (row BM + col) 4."""
    BN: gl.constexpr = acc.type.shape[0]
    BM: gl.constexpr = acc.type.shape[1]
    rows = gl.arange(0, BN, layout=gl.SliceLayout(1, acc.type.layout))
    cols = gl.arange(0, BM, layout=gl.SliceLayout(0, acc.type.layout))
    return (gl.expand_dims(rows, 1) * BM + gl.expand_dims(cols, 0)) * 4


@gluon.jit
def _send_partial(acc, flag_ptr, REGION: gl.constexpr, WARPS: gl.constexpr):
    """Rank r >= 1, its ring drained: acc into its own shared memory from offset 0 (a ring buffer's), then,
    once rank 0's mbarrier is published, one arrival a thread there, and wait until rank 0 has read it
    (its arrivals on this CTA's second mbarrier): a CTA's shared memory goes when it exits."""
    t = _thread_ids(WARPS)
    gl.inline_asm_elementwise(
        asm="st.shared.f32 [$1], $2; mov.u32 $0, 0;",
        constraints="=r,r,f", args=[_smem_addr(_slot_offsets(acc)), acc], dtype=gl.int32, is_pure=False, pack=1)
    gl.inline_asm_elementwise(  # rank 0's mbarrier initialised (set at its start: off the critical path)
        asm="""{ .reg .pred p; .reg .u32 v;
        POLL: ld.acquire.gpu.global.u32 v, [$1]; setp.eq.u32 p, v, 0; @p bra POLL;
        mov.u32 $0, 0; }""",
        constraints="=r,l", args=[flag_ptr + gl.zeros_like(t)], dtype=gl.int32, is_pure=False, pack=1)
    _arrive_remote(REGION, 0, WARPS)
    _wait_barrier(REGION + 8, WARPS)


@gluon.jit
def _push_partial(acc, flag_ptr, rank, REGION: gl.constexpr, WARPS: gl.constexpr):
    """EXCHANGE=3, rank r >= 1: acc straight into rank 0's slot r - 1 past its allocation (REGION + 16 on,
    remote stores), then, rank 0's mbarrier published, one arrival a thread there (release: the stores
    are in first). Nothing of this CTA's is read after, so it exits."""
    BN: gl.constexpr = acc.type.shape[0]
    BM: gl.constexpr = acc.type.shape[1]
    t = _thread_ids(WARPS)
    gl.inline_asm_elementwise(
        asm="""{ .reg .pred p; .reg .u32 v;
        POLL: ld.acquire.gpu.global.u32 v, [$1]; setp.eq.u32 p, v, 0; @p bra POLL;
        mov.u32 $0, 0; }""",
        constraints="=r,l", args=[flag_ptr + gl.zeros_like(t)], dtype=gl.int32, is_pure=False, pack=1)
    addr = _smem_addr(_slot_offsets(acc) + (REGION + 16 + (rank - 1) * (BN * BM * 4)))
    gl.inline_asm_elementwise(
        asm="""{ .reg .u32 ra; mapa.shared::cluster.u32 ra, $1, 0; st.shared::cluster.f32 [ra], $2;
        mov.u32 $0, 0; }""",
        constraints="=r,r,f", args=[addr, acc], dtype=gl.int32, is_pure=False, pack=1)
    _arrive_remote(REGION, 0, WARPS)


@gluon.jit
def _sum_pushed(acc, flag_ptr, parts, REGION: gl.constexpr, MAX_PARTS: gl.constexpr, WARPS: gl.constexpr):
    """EXCHANGE=3, rank 0: wait for the others' arrivals, re-arm the flag, sum zeros + acc + the slots they
    pushed (its own shared memory) in rank order."""
    BN: gl.constexpr = acc.type.shape[0]
    BM: gl.constexpr = acc.type.shape[1]
    _wait_barrier(REGION, WARPS)
    t = _thread_ids(WARPS)
    gl.inline_asm_elementwise(
        asm="""{ .reg .pred q; setp.eq.u32 q, $1, 0; @q st.relaxed.gpu.global.u32 [$2], 0; mov.u32 $0, 0; }""",
        constraints="=r,r,l", args=[t, flag_ptr + gl.zeros_like(t)], dtype=gl.int32, is_pure=False, pack=1)
    offsets = _slot_offsets(acc)
    total = gl.zeros_like(acc) + acc
    for j in gl.static_range(1, MAX_PARTS):
        if j < parts:
            total += gl.inline_asm_elementwise(
                asm="ld.shared.f32 $0, [$1];", constraints="=f,r",
                args=[_smem_addr(offsets + (REGION + 16 + (j - 1) * (BN * BM * 4)))], dtype=gl.float32,
                is_pure=False, pack=1)
    return total


@gluon.jit
def _gather_partials(acc, flag_ptr, parts, REGION: gl.constexpr, MAX_PARTS: gl.constexpr, WARPS: gl.constexpr):
    """Rank 0: wait for the others' arrivals, re-arm the flag, sum zeros + acc + their partials in rank order
    (read from their shared memory), and tell each it may go."""
    _wait_barrier(REGION, WARPS)
    t = _thread_ids(WARPS)
    gl.inline_asm_elementwise(  # every poll has succeeded: the flag back to 0 for the next launch
        asm="""{ .reg .pred q; setp.eq.u32 q, $1, 0; @q st.relaxed.gpu.global.u32 [$2], 0; mov.u32 $0, 0; }""",
        constraints="=r,r,l", args=[t, flag_ptr + gl.zeros_like(t)], dtype=gl.int32, is_pure=False, pack=1)
    local = _smem_addr(_slot_offsets(acc))
    total = gl.zeros_like(acc) + acc
    for j in gl.static_range(1, MAX_PARTS):
        if j < parts:
            total += gl.inline_asm_elementwise(
                asm="{ .reg .u32 ra; mapa.shared::cluster.u32 ra, $1, $2; ld.shared::cluster.f32 $0, [ra]; }",
                constraints="=f,r,r", args=[local, gl.zeros_like(local) + j], dtype=gl.float32, is_pure=False,
                pack=1)
    for j in gl.static_range(1, MAX_PARTS):
        if j < parts:
            _arrive_remote(REGION + 8, j, WARPS)
    return total


@gluon.jit
def rsmma_cluster_kernel(a_desc, p_desc, s_desc, c_ptr, ws_ptr, lock_ptr, M, N, K, stride_cm, stride_cn,
                         GROUP: gl.constexpr, BM: gl.constexpr, BK: gl.constexpr, SPLIT_K: gl.constexpr,
                         STAGES: gl.constexpr, WORDS: gl.constexpr, FRAGMENT: gl.constexpr,
                         PAIRED_ROWS: gl.constexpr, PARTS: gl.constexpr, SCALE_AFTER: gl.constexpr,
                         num_warps: gl.constexpr, MAX_PARTS: gl.constexpr = 1, STAGED_C: gl.constexpr = True,
                         SKEW: gl.constexpr = 0, OWNER_FIRST: gl.constexpr = False,
                         STAGED_SPLIT: gl.constexpr = False, REGION: gl.constexpr = 0,
                         EXCHANGE: gl.constexpr = 2, A_TAIL: gl.constexpr = False):
    """rsmma_kernel's split path (SPLIT_K > 1, SKEW as there) with the SPLIT_K CTAs of a tile one cluster
    along x: CTA x is rank x % SPLIT_K of column tile x // SPLIT_K. OWNER_FIRST and STAGED_SPLIT are the
    family's meta-parameters, unused here (rank 0 always sums). EXCHANGE (anatomy, wrong results below 2):
    2 the reduction; 1 the handshake without rank 0's reads of the partials; 0 none (each rank's loop
    alone, rank 0 storing its own partial); 3 each other rank pushes its partial into rank 0's shared
    memory past its allocation (SPLIT_K - 1 slots more a CTA) as soon as its loop ends."""
    BN: gl.constexpr = 16 * num_warps
    gl.static_assert(SPLIT_K > 1, "a cluster of the splits")
    blocks = K // BK
    tiles_n = gl.cdiv(N, BN)
    rank = gl.program_id(0) % SPLIT_K
    pid_x = gl.program_id(0) // SPLIT_K
    if SKEW > 0:
        helper = blocks // SPLIT_K - SKEW
        owner = blocks - (SPLIT_K - 1) * helper
        first_block = (rank > 0) * (owner + (rank - 1) * helper)
        n_units = owner + (rank > 0) * (helper - owner)
    else:
        per_split = (blocks + SPLIT_K - 1) // SPLIT_K
        first_block = rank * per_split
        n_units = gl.maximum(gl.minimum(blocks - first_block, per_split), 0)
    tile = gl.program_id(2) * tiles_n + pid_x
    u0 = tile * blocks + first_block
    parts = split_parts(blocks, SPLIT_K, SKEW)
    a_smem = gl.allocate_shared_memory(gl.float16, [STAGES, BM, BK], a_desc.layout)
    if p_desc.block_type.shape[0] == BK // 8:
        p_smem = gl.allocate_shared_memory(gl.int32, [STAGES, BK // 8, BN], p_desc.layout)
    else:
        p_smem = gl.allocate_shared_memory(gl.int32, [STAGES, BN // 64 * (BK // 32), 256], p_desc.layout)
    s_smem = gl.allocate_shared_memory(gl.float16, [STAGES, 1, BN], s_desc.layout)
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for j in gl.static_range(STAGES):
        mbarrier.init(ready.index(j), count=1)
        mbarrier.init(empty.index(j), count=1)
    flag_ptr = lock_ptr + tile
    if rank == 0:  # the others' arrivals when their partials are in (those with blocks: ``parts``)
        _init_barrier(flag_ptr, REGION, (parts - 1) * 32 * num_warps, True, num_warps)
    elif EXCHANGE != 3:  # rank 0's arrivals when it has read this one's partial
        _init_barrier(flag_ptr, REGION + 8, 32 * num_warps, False, num_warps)
    (acc,) = gl.warp_specialize([
        (rsmma._mma_partition, (BM, BN, num_warps, FRAGMENT, WORDS, PARTS, SCALE_AFTER, PAIRED_ROWS, 1, 1,
                                a_smem, p_smem, s_smem, ready, empty, u0, n_units, blocks, tiles_n, 0, 1, c_ptr,
                                ws_ptr, lock_ptr, M, N, stride_cm, stride_cn)),
        (rsmma._load_partition, (a_desc, p_desc, s_desc, a_smem, p_smem, s_smem, ready, empty, u0, n_units, blocks,
                                 tiles_n, GROUP, PARTS, A_TAIL)),
    ], [1], [rsmma.LOAD_REGS])
    if rank == 0:
        if EXCHANGE == 3:
            total = _sum_pushed(acc, flag_ptr, parts, REGION, MAX_PARTS, num_warps)
        elif EXCHANGE == 2:
            total = _gather_partials(acc, flag_ptr, parts, REGION, MAX_PARTS, num_warps)
        elif EXCHANGE == 1:
            total = _gather_partials(acc, flag_ptr, parts, REGION, 1, num_warps)
            for j in gl.static_range(1, MAX_PARTS):
                if j < parts:
                    _arrive_remote(REGION + 8, j, num_warps)
        else:
            total = acc
        pid_n, pid_m, _ = _unit(u0, blocks, tiles_n)
        lo = pid_m * BM
        rsmma._store_tile_staged(total, a_smem, c_ptr + lo * stride_cm, token_origin(pid_m, BM, M) - lo,
                                 pid_n * BN, M - lo, N, stride_cm, stride_cn, PAIRED_ROWS)
    elif n_units > 0 and EXCHANGE == 3:
        _push_partial(acc, flag_ptr, rank, REGION, num_warps)
    elif n_units > 0 and EXCHANGE > 0:
        _send_partial(acc, flag_ptr, REGION, num_warps)


REGION_BYTES = 16  # past Triton's allocation: rank 0's mbarrier, then the other ranks' own


def first_buffer_bytes(compiled) -> int:
    """The bytes from shared offset 0 to the kernel's next buffer (its LLVM IR's smallest nonzero offset
    from global_smem): a ring buffer, drained when the partial goes there."""
    import re

    return min(int(x) for x in re.findall(r"@global_smem, i(?:32|64) (\d+)", compiled.asm["llir"]) if int(x))


def cluster_launch(variant, **meta_overrides):
    """gluon_checks' launch form: (a, packed, scales, out) -> a no-argument callable running ``variant`` with
    the cluster reduction (SPLIT_K > 1). Compiled twice (REGION learnt from the first), launched through
    the compiled kernel's own launcher with num_ctas = SPLIT_K and the larger shared size."""
    from tunesearch.variants.api import _constexpr_values, _rsmma_call

    def launch(a, packed, scales, out):
        _, grid, args, meta = _rsmma_call(variant.params, a, packed, scales, out, 128)
        meta = meta | meta_overrides
        split_k = meta["SPLIT_K"]
        bm, bn = meta["BM"], 16 * meta["num_warps"]
        first = rsmma_cluster_kernel.warmup(*args, grid=grid, **meta)
        region = (first.metadata.shared + 15) // 16 * 16
        compiled = rsmma_cluster_kernel.warmup(*args, grid=grid, **(meta | dict(REGION=region)))
        shared = region + REGION_BYTES + (bn * bm * 4 * (split_k - 1) if meta.get("EXCHANGE") == 3 else 0)
        if compiled.module is None:  # first launch: its launch's shared size set once
            assert compiled.metadata.shared == first.metadata.shared, "REGION changed the allocation"
            assert first_buffer_bytes(compiled) >= bn * bm * 4, "a partial fits the first ring buffer"
            compiled.metadata = compiled.metadata._replace(shared=shared)
            compiled._init_handles()
        packed_meta = (compiled.metadata.num_warps, split_k, shared)
        kernel = rsmma_cluster_kernel
        consts = list(_constexpr_values(kernel, meta | dict(REGION=region)))
        g0, g1, g2 = grid[0], 1, grid[2]  # x: column tiles (each a cluster of SPLIT_K CTAs)
        locks = torch.zeros(g0 * g2, dtype=torch.int32, device=a.device)  # each tile's flag, re-armed
        rest = list(args[:5]) + [locks] + list(args[6:]) + consts
        device = a.get_device()
        current_stream = triton.runtime.driver.active.get_current_stream

        def run():
            compiled.run(g0, g1, g2, current_stream(device), compiled.function, packed_meta, None, None, None, *rest)
            return out
        run.locks = locks
        return run
    return launch


def family_cluster_launch(variant, size: int | None = None):
    """The family's own launch of ``variant`` (its global split reduction) but in clusters of ``size`` CTAs
    (SPLIT_K if None) along x, neighbouring column tiles (``api._launch_clustered``, which CLUSTER=2
    launches through): what the cluster launch alone costs or gives."""
    from tunesearch.variants.api import _launch_clustered, _rsmma_call

    def launch(a, packed, scales, out):
        kernel, grid, args, meta = _rsmma_call(variant.params, a, packed, scales, out, 128)
        ctas = size or meta["SPLIT_K"]
        assert grid[0] % ctas == 0, "whole clusters along x"

        def run():
            _launch_clustered(kernel, grid, args, meta, ctas)
            return out
        return run
    return launch


def compile_offline(variant_id: str, M: int = 32, N: int = 11008, K: int = 4096):
    """The cluster kernel for ``variant_id`` compiled for sm_90 without a GPU (frag32 operands)."""
    from benchmarks.experiments import gluon_checks
    from tunesearch.variants.api import _rsmma_call
    from tunesearch.variants.space import Variant

    a = torch.empty(M, K, dtype=torch.float16)
    packed = torch.empty(K // 32, 4 * N, dtype=torch.int32)
    scales = torch.empty(K // 128, N, dtype=torch.float16)
    out = torch.empty(M, N, dtype=torch.float16)
    _, _, args, meta = _rsmma_call(Variant.from_id(variant_id).params, a, packed, scales, out, 128)
    consts = {name: meta[name] for name in rsmma_cluster_kernel.arg_names if name in meta}
    consts |= dict(REGION=0, EXCHANGE=2)
    first = gluon_checks.compile_tma_kernel(rsmma_cluster_kernel, args[:3], consts, meta["num_warps"], meta["maxnreg"])
    consts["REGION"] = (first.metadata.shared + 15) // 16 * 16
    return gluon_checks.compile_tma_kernel(rsmma_cluster_kernel, args[:3], consts, meta["num_warps"], meta["maxnreg"])


ALL_FORMS = ("family", "cluster", "push", "family_in_clusters", "family_pairs", "no_reads", "no_exchange")
FORMS = os.environ.get("CLUSTER_FORMS", "family,cluster").split(",")


def main(out_dir, max_m=64):
    from benchmarks.experiments import gluon_checks
    from benchmarks.experiments.dqmma_rs import family_launch
    from tunesearch.bench import CheckInputs, Operands, kernel_bytes, time_fp16
    from tunesearch.dispatch import Dispatcher, read_table
    from tunesearch.gpu import gpu_info, stream_read_floor
    from tunesearch.variants import Variant

    info = gpu_info(0)
    table = Dispatcher(read_table(ROOT / "tunesearch" / "tables" / "h200.json"), strict=True)
    shapes = [(4096, 11008), (11008, 4096), (4096, 12288), (4096, 4096), (4096, 22016)]
    ms = [m for m in (1, 16, 32, 64, 128, 256) if m <= max_m]
    extra = {tuple(map(int, key.split(","))): [Variant.from_id(v) for v in ids.split("|")] for key, ids in
             (item.split("=") for item in os.environ.get("CLUSTER_PICKS", "").split(";") if item)}
    only = os.environ.get("CLUSTER_ONLY")  # "M,K,N;...": those keys alone
    keys = [tuple(map(int, k.split(","))) for k in only.split(";")] if only else [(m, K, N) for K, N in shapes
                                                                                 for m in ms]
    rows = []
    for M, K, N in keys:
        pick = table.resolve(M, N, K, torch.device("cuda"))
        variants = [pick] + extra.get((M, K, N), [])
        if pick.params["SPLIT_K"] == 1 and os.environ.get("CLUSTER_TWINS", "1") == "1":  # its twin with two splits
            variants.append(Variant(pick.family, {**pick.params, "SPLIT_K": 2}))
        layout = table.layout_for(N, K, torch.device("cuda"))
        fp16 = time_fp16(M, N, K, info.l2_bytes, replays=20).us
        floor = stream_read_floor(kernel_bytes(1, N, K, 128), info.l2_bytes, info.sm_count, replays=20).us
        check = CheckInputs(M, N, K, 128, "cuda", layout=layout)
        ops = Operands(M, N, K, 128, info.l2_bytes, layout=layout)
        for variant in variants:
            row = dict(M=M, K=K, N=N, variant=variant.id, pick=variant is pick, fp16=fp16, floor=floor)
            forms = (("family", family_launch(variant)), ("cluster", cluster_launch(variant)),
                     ("push", cluster_launch(variant, EXCHANGE=3)),
                     ("family_in_clusters", family_cluster_launch(variant)),
                     ("family_pairs", family_cluster_launch(variant, 2)),
                     ("no_reads", cluster_launch(variant, EXCHANGE=1)),
                     ("no_exchange", cluster_launch(variant, EXCHANGE=0)))
            forms = [(name, launch) for name, launch in forms if name in FORMS]
            for form, launch in forms:
                if form not in ("family", "family_pairs") and variant.params["SPLIT_K"] < 2:
                    row[form] = None
                    continue
                # the anatomy's forms compute something else by design
                gluon_checks.time_form(row, form, launch, check, ops.copies,
                                       must_be_right=form not in ("no_reads", "no_exchange"))
            rows.append(row)
            print(json.dumps(row), flush=True)
        del ops
        with open(f"{out_dir}/rsmma_cluster.json", "w") as f:
            json.dump(dict(gpu=info.to_dict(), rows=rows), f, indent=1)
    f = lambda x: f"{x:8.2f}" if isinstance(x, float) else "       -" if x is None else "    fail"  # noqa: E731
    names = [name for name in ALL_FORMS if name in FORMS] + ["floor", "fp16"]
    print(f"{'key':>17} {'variant':>44} " + " ".join(f"{n[:8]:>8}" for n in names))
    for r in rows:
        print(f"{'M=%d %dx%d' % (r['M'], r['K'], r['N']):>17} {r['variant'] + (' *' if r['pick'] else ''):>44} "
              + " ".join(f(r.get(n)) for n in names))


if __name__ == "__main__":
    if sys.argv[1] == "--compile":
        from benchmarks.sass_stats import disassemble, resources, wgmma_waits

        compiled = compile_offline(sys.argv[2])
        sass = disassemble(compiled)
        print(json.dumps(dict(shared=compiled.metadata.shared, waits=wgmma_waits(sass),
                              first_buffer=first_buffer_bytes(compiled), **resources(compiled))))
    else:
        main(sys.argv[1], *(int(x) for x in sys.argv[2:3]))
