"""EXPERIMENT: rsmma with a data-parallel wave of whole tiles and the rest stream-K (NOTES.md row 118).

    python benchmarks/experiments/rsmma_hybrid.py OUT_DIR          (on an sm_90 GPU: every config checked on
                                                                    mask edges, then at each key against
                                                                    A @ dequantize(W), timed beside the
                                                                    table's pick; env HYBRID_KEYS
                                                                    "M,K,N;...")
    python benchmarks/experiments/rsmma_hybrid.py --compile CONFIG (offline, sm_90: registers, spills, waits)

Why: at M=64 on 4096x11008 the pick (32-token tiles, 172 column tiles x 2 token tiles = 344 CTAs, three an
SM) puts 3 on 80 SMs and 2 on 52 (NOTES.md row 100 (c)), and the ring alone runs 3 us over the streaming
floor even without A (row 103); stream-K, which evens the CTAs, splits every tile and lost on its
reduction (rows 65, 75). Here P = CTAS x the SMs CTAs run at once: the first D = T // P waves of the T
tiles are whole tiles, one a CTA (tile c + w P for CTA c), stored straight from registers; only the R = T
- D P tiles left are split, evenly over all P CTAs (rsmma's stream-K over their units, its deterministic
reduction: CUTLASS's data-parallel + stream-K). At M=64 with two CTAs an SM: 264 whole tiles and 80 split
2-3 ways, every SM 2.6 tiles' work where the pick's busiest take 3.

The kernel is rsmma's (``rsmma._mma_segment``, frag32 weights, the family's loader steps): the loader and
the MMA warps walk the CTA's whole tiles, then its stream-K range, one ring position after another.

A config: "BM,BK,STAGES,CTAS", e.g. "32,128,4,2" (BN=64: one warp group).

RESULT (H200, 2026-12-04, benchmarks/results/rsmma_hybrid_h200_2026-12-04_s60.*, NOTES.md row 118): right
everywhere (after the first run's fault: a split tile's reduction counted CTAs with no unit), far slower:
us, fp16 / pick / best hybrid: M=64 4096x11008 25.29 / 17.28 / 23.11, M=48 27.02 / 17.32 / 22.71, M=32
26.79 / 13.10 / 15.77; M=64 4096x12288 29.53 / 17.45 / 24.09, 11008x4096 30.86 / 17.05 / 22.83. A whole
wave needs fewer CTAs than tiles, so two CTAs an SM where the picks run three: the store holds the pick's
own tile at two an SM at 22.2 us (M=64 4096x11008), so what three CTAs an SM hide (the unpack and the
wgmma chain's latency, row 53) weighs far more than their uneven spread.
"""
import json
import sys
from pathlib import Path

import torch
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import mbarrier, tma

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # so that it runs as a script from anywhere

from tunesearch.variants.dqmma import (_first_cta, _next_unit, _unit, store_tile, stream_k_segment,  # noqa: E402
                                       stream_k_segments, token_origin)
from tunesearch.variants.rsmma import ALL_PARTS, CHUNK_ROWS, LOAD_REGS, _mma_segment  # noqa: E402

FIELDS = ("BM", "BK", "STAGES", "CTAS")  # a config's order on the command line
BN = gl.constexpr(64)
EVERY_PART = gl.constexpr(ALL_PARTS)


@gluon.jit
def _ranges(T, blocks, P):
    """(whole tiles a CTA: D, the first split unit: D P blocks, the split units, the Q CTAs that share them,
    this CTA's split units [u0, u0 + n)). Q = min(P, units): stream-K's reduction counts every CTA between
    a tile's first and last, so none of them may hold no unit (a split tile of 4 blocks over 264 CTAs
    would wait for 12 arrivals and get 4: the smoke run's unwritten C)."""
    D = T // P
    first = D * P * blocks
    units = (T - D * P) * blocks
    Q = gl.maximum(gl.minimum(P, units), 1)
    c = gl.minimum(gl.program_id(0), Q)  # CTAs from Q on: an empty range
    u0 = first + c * units // Q
    return D, first, units, Q, u0, first + gl.minimum(c + 1, Q) * units // Q - u0


@gluon.jit
def _load_block(a_desc, p_desc, s_desc, a_smem, p_smem, s_smem, ready, empty, i, pid_n, pid_m, kb, M, group):
    """rsmma's loader step for ring position i (frag32 boxes; A's rows below BM as rsmma copies them)."""
    STAGES: gl.constexpr = a_smem.type.shape[0]
    BM: gl.constexpr = a_smem.type.shape[1]
    BK: gl.constexpr = a_smem.type.shape[2]
    COLS: gl.constexpr = s_smem.type.shape[2]
    A_ROWS: gl.constexpr = a_desc.block_type.shape[0]
    A_BYTES: gl.constexpr = a_desc.block_type.nbytes * (BK // 64 if A_ROWS < BM else 1)
    REST: gl.constexpr = p_desc.block_type.nbytes * (COLS // 64) + s_desc.block_type.nbytes
    s = i % STAGES
    mbarrier.wait(empty.index(s), ((i // STAGES) & 1) ^ 1)  # a fresh barrier counts as freed
    bar = ready.index(s)
    k = kb * BK
    mbarrier.expect(bar, A_BYTES + REST)
    if A_ROWS < BM:  # one token tile of fewer tokens (a power of two here): their rows in each column chunk
        chunks = a_smem.index(s)._reinterpret(gl.float16, [BK // 64 * BM, 64], CHUNK_ROWS)
        for c in gl.static_range(BK // 64):
            tma.async_copy_global_to_shared(a_desc, [0, k + 64 * c], bar, chunks.slice(c * BM, A_ROWS))
    else:
        tma.async_copy_global_to_shared(a_desc, [token_origin(pid_m, BM, M), k], bar, a_smem.index(s))
    for j in gl.static_range(COLS // 64):
        tma.async_copy_global_to_shared(p_desc, [k // 32, (pid_n * COLS + 64 * j) * 4], bar,
                                        p_smem.index(s).slice(j * (BK // 32), BK // 32))
    tma.async_copy_global_to_shared(s_desc, [k // group, pid_n * COLS], bar, s_smem.index(s))


@gluon.jit
def _hybrid_load(a_desc, p_desc, s_desc, a_smem, p_smem, s_smem, ready, empty, T, blocks, tiles_n, M, group):
    """The CTA's whole tiles' blocks, then its split units', into the ring in order."""
    P = gl.num_programs(0)
    D, first, units, Q, u0, n = _ranges(T, blocks, P)
    for w in range(D):
        pid_n, pid_m, kb = _unit((gl.program_id(0) + w * P) * blocks, blocks, tiles_n)
        for j in range(blocks):
            _load_block(a_desc, p_desc, s_desc, a_smem, p_smem, s_smem, ready, empty, w * blocks + j, pid_n, pid_m,
                        kb, M, group)
            pid_n, pid_m, kb = _next_unit(pid_n, pid_m, kb, blocks, tiles_n)
    pid_n, pid_m, kb = _unit(u0, blocks, tiles_n)
    for j in range(n):
        _load_block(a_desc, p_desc, s_desc, a_smem, p_smem, s_smem, ready, empty, D * blocks + j, pid_n, pid_m, kb,
                    M, group)
        pid_n, pid_m, kb = _next_unit(pid_n, pid_m, kb, blocks, tiles_n)


@gluon.jit
def _hybrid_mma(BM: gl.constexpr, FRAGMENT: gl.constexpr, WORDS: gl.constexpr, SCALE_AFTER: gl.constexpr,
                MAX_PARTS: gl.constexpr, a_smem, p_smem, s_smem, ready, empty, T, blocks, tiles_n, c_ptr, ws_ptr,
                lock_ptr, M, N, stride_cm, stride_cn):
    """Each whole tile's C^T [BN, BM] stored from registers as it ends; each split segment through the
    family's reduction over the split tiles' units (``store_tile``, slots and counters a split tile)."""
    ACC: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, BM, 16])
    FRAG: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=ACC, k_width=2)
    P = gl.num_programs(0)
    D, first, units, Q, u0, n = _ranges(T, blocks, P)
    for w in range(D):
        acc = _mma_segment(gl.zeros([BN, BM], gl.float32, ACC), w * blocks, (w + 1) * blocks, a_smem, p_smem,
                           s_smem, ready, empty, FRAGMENT, WORDS, FRAG, EVERY_PART, SCALE_AFTER, True)
        pid_n, pid_m, _ = _unit((gl.program_id(0) + w * P) * blocks, blocks, tiles_n)
        lo = pid_m * BM
        store_tile(acc, c_ptr + lo * stride_cm, pid_n * BN, token_origin(pid_m, BM, M) - lo, N, M - lo, stride_cn,
                   stride_cm, ws_ptr, lock_ptr, 0, 0, 1, 1, True)
    for seg in range(stream_k_segments(u0, n, blocks)):
        begin, end = stream_k_segment(seg, u0, n, blocks)
        acc = _mma_segment(gl.zeros([BN, BM], gl.float32, ACC), D * blocks + begin, D * blocks + end, a_smem, p_smem,
                           s_smem, ready, empty, FRAGMENT, WORDS, FRAG, EVERY_PART, SCALE_AFTER, True)
        tile = (u0 + end - 1) // blocks
        pid_n, pid_m, _ = _unit(tile * blocks, blocks, tiles_n)
        split = tile * blocks - first  # the tile's first unit among the split ones
        lead = _first_cta(split, units, Q)
        parts = _first_cta(split + blocks - 1, units, Q) - lead + 1
        lo = pid_m * BM
        store_tile(acc, c_ptr + lo * stride_cm, pid_n * BN, token_origin(pid_m, BM, M) - lo, N, M - lo, stride_cn,
                   stride_cm, ws_ptr, lock_ptr, tile - D * P, gl.program_id(0) - lead, parts, MAX_PARTS, True)


@gluon.jit
def hybrid_kernel(a_desc, p_desc, s_desc, c_ptr, ws_ptr, lock_ptr, M, N, K, stride_cm, stride_cn,
                  GROUP: gl.constexpr, BM: gl.constexpr, BK: gl.constexpr, STAGES: gl.constexpr,
                  WORDS: gl.constexpr, FRAGMENT: gl.constexpr, SCALE_AFTER: gl.constexpr, MAX_PARTS: gl.constexpr,
                  num_warps: gl.constexpr):
    """Grid: the CTAs that run at once (CTAS an SM), each its whole tiles, then its split units."""
    gl.static_assert(num_warps == 4, "BN = 64: one warp group")
    gl.static_assert(GROUP % BK == 0, "a block lies in one scale group")
    blocks = K // BK
    tiles_n = gl.cdiv(N, BN)
    T = tiles_n * gl.cdiv(M, BM)
    a_smem = gl.allocate_shared_memory(gl.float16, [STAGES, BM, BK], a_desc.layout)
    p_smem = gl.allocate_shared_memory(gl.int32, [STAGES, BN // 64 * (BK // 32), 256], p_desc.layout)
    s_smem = gl.allocate_shared_memory(gl.float16, [STAGES, 1, BN], s_desc.layout)
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for j in gl.static_range(STAGES):
        mbarrier.init(ready.index(j), count=1)
        mbarrier.init(empty.index(j), count=1)
    gl.warp_specialize([
        (_hybrid_mma, (BM, FRAGMENT, WORDS, SCALE_AFTER, MAX_PARTS, a_smem, p_smem, s_smem, ready, empty, T, blocks,
                       tiles_n, c_ptr, ws_ptr, lock_ptr, M, N, stride_cm, stride_cn)),
        (_hybrid_load, (a_desc, p_desc, s_desc, a_smem, p_smem, s_smem, ready, empty, T, blocks, tiles_n, M,
                        GROUP)),
    ], [1], [LOAD_REGS])


def parse_config(text: str) -> dict:
    return dict(zip(FIELDS, (int(x) for x in text.split(","))))


def config_id(c: dict) -> str:
    return f"hybrid.bm{c['BM']}.bk{c['BK']}.s{c['STAGES']}.c{c['CTAS']}"


def plan(M: int, N: int, K: int, config: dict, sms: int) -> tuple[int, int, int]:
    """(CTAs, whole-tile waves D, the most CTAs a split tile meets) of a launch."""
    from tunesearch.variants.space import cdiv

    T, blocks = cdiv(M, config["BM"]) * cdiv(N, BN.value), K // config["BK"]
    P = min(config["CTAS"] * sms, T * blocks)
    units = (T - T // P * P) * blocks
    Q = max(1, min(P, units))  # the CTAs that share the split units (``_ranges``)
    return P, T // P, cdiv(blocks - 1, units // Q) + 1 if units else 1  # stream-K's bound (space.gluon_grid)


def launch_args(config: dict, a, packed_f, scales, out, sms: int):
    """(grid, args, meta): the CTAs that run at once, frag32 weights ``packed_f`` [K/32, 4N]."""
    from tunesearch.variants import rsmma
    from tunesearch.variants.api import _gluon_args
    from tunesearch.variants.rsmma_launch import launch_registers, scale_after
    from tunesearch.variants.space import cdiv

    bm, bk = config["BM"], config["BK"]
    M, K = a.shape
    N = scales.shape[1]
    P, D, parts = plan(M, N, K, config, sms)
    split_tiles = cdiv(M, bm) * cdiv(N, BN.value) - D * P
    args = _gluon_args(rsmma.frag32_descriptors, a, packed_f, scales, out, bm, BN.value, bk, max(split_tiles, 1),
                       parts if split_tiles else 1)
    regs = launch_registers(4, config["CTAS"])
    meta = dict(GROUP=128, BM=bm, BK=bk, STAGES=config["STAGES"], WORDS=rsmma.frag32_word_layout(bk, 4),
                FRAGMENT=rsmma.frag32_fragment, SCALE_AFTER=scale_after(BN.value, bm, bk, regs),
                MAX_PARTS=parts if split_tiles else 1, num_warps=4, maxnreg=regs)
    return (P,), args, meta


def hybrid_launch(config: dict):
    """gluon_checks' launch form: (a, packed, scales, out) -> a no-argument launch, on the GPU's SMs."""
    from benchmarks.experiments import gluon_checks

    def args(a, *rest):
        return launch_args(config, a, *rest, torch.cuda.get_device_properties(a.device).multi_processor_count)
    return gluon_checks.kernel_launch(hybrid_kernel, args)


def smoke_shapes(config: dict):
    """Mask edges (M, K, N) on the GPU's P CTAs: tiles fewer than P (all split), a whole wave and a rest
    (N of 132 and more column tiles), a second token tile shifted, N no multiple of 64, K of a few blocks."""
    bm, bk = config["BM"], config["BK"]
    return [(bm, 2 * bk, 200), (2 * bm, 1024, 64 * 172), (bm + 3, 512, 64 * 140 + 8), (3 * bm + 1, 4 * bk, 64 * 300),
            (bm, 4096, 64 * 133)]


def smoke(config: dict) -> str | None:
    from benchmarks.experiments import gluon_checks

    return gluon_checks.frag32_smoke(hybrid_launch(config), smoke_shapes(config))


def compile_offline(config: dict, M: int = 64, N: int = 11008, K: int = 4096):
    """The kernel for ``config`` compiled for sm_90 without a GPU (132 SMs)."""
    from benchmarks.experiments import gluon_checks

    return gluon_checks.compile_frag32_offline(hybrid_kernel, lambda *operands: launch_args(config, *operands, 132),
                                               M, N, K)


# two CTAs an SM (at three, 396 CTAs hold M=64's 344 tiles: no whole wave); 64-token tiles, one CTA an SM,
# made ptxas wait for every wgmma (offline), so none here
CONFIGS = [dict(BM=32, BK=128, STAGES=4, CTAS=2), dict(BM=32, BK=128, STAGES=6, CTAS=2),
           dict(BM=32, BK=64, STAGES=8, CTAS=2), dict(BM=16, BK=128, STAGES=6, CTAS=2)]
# M=64 and 32 on 4096x11008 (the misses: 172 column tiles), M=48 there, and 4096x12288's M=64 (192)
KEYS = [(64, 4096, 11008), (48, 4096, 11008), (32, 4096, 11008), (64, 4096, 12288), (64, 11008, 4096)]


def main(out_dir):
    from benchmarks.experiments import gluon_checks
    from tunesearch.bench import CheckInputs, Operands, time_fp16, time_variant
    from tunesearch.dispatch import Dispatcher, read_table
    from tunesearch.gpu import gpu_info

    info = gpu_info(0)
    table = Dispatcher(read_table(ROOT / "tunesearch" / "tables" / "h200.json"), strict=True)
    keys = gluon_checks.env_keys("HYBRID_KEYS", KEYS)
    unsound = gluon_checks.smoke_all(__file__, FIELDS, CONFIGS, config_id, workers=len(CONFIGS), timeout_s=240)
    configs = [c for c in CONFIGS if config_id(c) not in unsound]
    rows = []
    for M, K, N in keys:
        pick = table.resolve(M, N, K, torch.device("cuda"))
        check = CheckInputs(M, N, K, 128, "cuda", layout="frag32")
        ops = Operands(M, N, K, 128, info.l2_bytes, layout="frag32")
        row = dict(M=M, K=K, N=N, fp16=time_fp16(M, N, K, info.l2_bytes, replays=20).us, pick=pick.id,
                   pick_us=time_variant(pick, ops, replays=20).us)
        for c in configs:
            if c["BM"] <= M:
                row[config_id(c) + "_plan"] = plan(M, N, K, c, info.sm_count)
                gluon_checks.time_form(row, config_id(c), hybrid_launch(c), check, ops.copies)
        rows.append(row)
        print(json.dumps(row), flush=True)
        del ops, check
        with open(f"{out_dir}/rsmma_hybrid.json", "w") as f:
            json.dump(dict(gpu=info.to_dict(), smoke_failures=unsound, rows=rows), f, indent=1)
    names = [config_id(c) for c in configs]
    print(f"{'key':>16} {'fp16':>7} {'pick':>7} " + " ".join(f"{n[7:]:>17}" for n in names))
    for r in rows:
        f = lambda x: f"{x:17.2f}" if isinstance(x, float) else f"{'fail':>17}" if x else f"{'-':>17}"  # noqa: E731
        print(f"{'M=%d %dx%d' % (r['M'], r['K'], r['N']):>16} {r['fp16']:7.2f} {r['pick_us']:7.2f} "
              + " ".join(f(r.get(n)) for n in names))


if __name__ == "__main__":
    from benchmarks.experiments import gluon_checks

    gluon_checks.config_cli(sys.argv, parse_config, smoke, compile_offline, main)
