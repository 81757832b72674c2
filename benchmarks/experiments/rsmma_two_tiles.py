"""EXPERIMENT: one rsmma token tile of HI + LO tokens as two accumulators on one weight fragment (M = 129..192,
and 65..96).

    python benchmarks/experiments/rsmma_two_tiles.py OUT_DIR     (on an sm_90 GPU: checked against
                                                                  A @ dequantize(W), timed beside the
                                                                  table's pick and cuBLAS fp16; env
                                                                  TWO_TILES_SHAPES "KxN,...",
                                                                  TWO_TILES_MS "129,136",
                                                                  TWO_TILES_CONFIGS "config;config")
    python benchmarks/experiments/rsmma_two_tiles.py --compile CONFIG   (offline, sm_90: registers, spills,
                                                                         the wgmmas left in flight)

Why (NOTES.md row 88, the `_s42` session plan): past 128 tokens every variant of the space takes a third
64-token tile or a second 128-token one over all the weights, so the bucket M=129..192 costs what M=256
costs (43 us on 4096x12288 wherever M falls, cuBLAS fp16 29.4 us at M=129, 31.9 at 160, 47.5 at 192).
The wgmma's N (here the token count) may be any multiple of 8 up to 256, but Triton's tensors need
power-of-two shapes, so a 136-, 144-, 160- or 192-token tile is two accumulators: [BN, HI] and [BN, LO]
(HI = 128; LO = 8, 16, 32 or 64), both fed from the one unpacked weight fragment of a block. The unpack
(the MMA warps' chain, row 78) is paid once for HI + LO tokens instead of once per token tile. The same
with HI = 64 and LO = 8..32 for M = 65..96, which the family runs as a 128-token tile or two 64-token ones.

The kernel is rsmma's (variants/rsmma.py), cut down to what the experiment needs: frag32 weights, the
scaled fragment (the family's form above 32 tokens), tiles of HI + LO tokens (any M: a bucket's variant
runs at every M of the bucket). The ring's A slot is two TMA boxes of the same activations, kept inside
A as the family's shifted last tile is (`dqmma.token_origin`; `_token_rows`): for M in (HI, HI + LO]
rows [0, HI) and [M - LO, M), the LO accumulator's rows below HI repeating the HI one's, masked at the
store. One tile a CTA: both accumulators leave through the drained ring as the family's staged store does
(`rsmma._store_tile_staged`), HI through the HI boxes' ring and LO through the LO boxes'.

A config: "BN,HI,LO,BK,STAGES,CTAS,STREAM", e.g. "64,128,64,64,4,2,1": BN/16 MMA warps, CTAS CTAs
an SM (the launch's registers, `rsmma_launch.launch_registers`), a CTA per column tile (STREAM=0) or
stream-K over CTAS x the SMs (STREAM=1: each CTA an equal run of all the column tiles' blocks, each
segment stored as it ends through the family's split reduction, `dqmma.store_tile`, the LO accumulators'
workspace slots and counters after the HI ones'). Past 128 tokens the grids are few and large: 192 CTAs of
BN=64 on 4096x12288 leave 60 of the 132 SMs with two, so the wave lasts what two CTAs on one SM take;
stream-K evens that out (the family's M=128 pick, 384 CTAs three an SM, fills its wave).
"""
import json
import os
import sys
from pathlib import Path

import torch
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import mbarrier, tma, warpgroup_mma, warpgroup_mma_wait

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # so that it runs as a script from anywhere

from tunesearch.variants.dqmma import (_first_cta, _next_unit, _unit, store_tile, stream_k_segment,  # noqa: E402
                                       stream_k_segments, token_origin)
from tunesearch.variants.rsmma import LOAD_REGS, _store_tile_staged  # noqa: E402

@gluon.jit
def _token_rows(pid_m, HI: gl.constexpr, LO: gl.constexpr, M):
    """Token tile pid_m's A boxes and the C rows each accumulator stores: (the HI box's first row, the LO
    box's, the first row the HI accumulator stores, the LO one's). The boxes stay inside A where M allows
    (the TMA's zero fill of rows past A is slow, ``dqmma.token_origin``): a last tile that M fills in part
    starts at M - (HI + LO), and the LO box at M - LO where that is below HI rows on; the rows a box
    repeats (its neighbour's, or the HI box's) are computed again and not stored. Where M <= HI the LO
    box stores nothing."""
    own = pid_m * (HI + LO)
    hi_row = token_origin(pid_m, HI + LO, M)
    lo_row = gl.maximum(gl.minimum(hi_row + HI, M - LO), 0)
    return hi_row, lo_row, own, gl.maximum(own, hi_row + HI)


@gluon.jit
def _two_tile_block(i, first, acc_hi, acc_lo, a_hi, a_lo, p_smem, s_smem, ready, empty, FRAGMENT: gl.constexpr,
                    WORDS: gl.constexpr, FRAG: gl.constexpr, FRAG_LO: gl.constexpr):
    """Block i of a segment that began at block ``first``: unpack its fragment once, issue both wgmmas on
    it, wait for block i-1's two and free that slot (rsmma._mma_block with a second accumulator)."""
    STAGES: gl.constexpr = a_hi.type.shape[0]
    s = i % STAGES
    mbarrier.wait(ready.index(s), (i // STAGES) & 1)
    w = FRAGMENT(p_smem.index(s), s_smem.index(s), WORDS, FRAG, True)
    acc_hi = warpgroup_mma(w, a_hi.index(s).permute((1, 0)), acc_hi, is_async=True)
    # the same registers seen with the LO accumulator as parent: an A operand's layout depends on the MMA's
    # rows and depth only, so the conversion moves nothing
    w_lo = gl.convert_layout(w, FRAG_LO, assert_trivial=True)
    acc_lo = warpgroup_mma(w_lo, a_lo.index(s).permute((1, 0)), acc_lo, is_async=True)
    acc_hi, acc_lo = warpgroup_mma_wait(num_outstanding=2, deps=(acc_hi, acc_lo))
    mbarrier.arrive(empty.index((i + STAGES - 1) % STAGES), pred=i > first)
    return acc_hi, acc_lo


@gluon.jit
def _two_tile_segment(acc_hi, acc_lo, begin, end, a_hi, a_lo, p_smem, s_smem, ready, empty, FRAGMENT: gl.constexpr,
                      WORDS: gl.constexpr, FRAG: gl.constexpr, FRAG_LO: gl.constexpr):
    """Both accumulators += the CTA's ring blocks [begin, end) (one column tile's), the last wgmmas waited for
    and every slot freed (rsmma._mma_segment's scaled-fragment form)."""
    STAGES: gl.constexpr = a_hi.type.shape[0]
    n_blocks = end - begin
    # two blocks a trip, so that each block's fragment has registers of its own (rsmma._mma_segment, C7515)
    for j in range(n_blocks // 2):
        acc_hi, acc_lo = _two_tile_block(begin + 2 * j, begin, acc_hi, acc_lo, a_hi, a_lo, p_smem, s_smem, ready,
                                         empty, FRAGMENT, WORDS, FRAG, FRAG_LO)
        acc_hi, acc_lo = _two_tile_block(begin + 2 * j + 1, begin, acc_hi, acc_lo, a_hi, a_lo, p_smem, s_smem, ready,
                                         empty, FRAGMENT, WORDS, FRAG, FRAG_LO)
    if n_blocks % 2 == 1:
        acc_hi, acc_lo = _two_tile_block(end - 1, begin, acc_hi, acc_lo, a_hi, a_lo, p_smem, s_smem, ready, empty,
                                         FRAGMENT, WORDS, FRAG, FRAG_LO)
    acc_hi, acc_lo = warpgroup_mma_wait(num_outstanding=0, deps=(acc_hi, acc_lo))
    mbarrier.arrive(empty.index((end - 1) % STAGES), pred=end > begin)  # the segment's last slot
    return acc_hi, acc_lo


@gluon.jit
def _two_tile_mma(BN: gl.constexpr, LO: gl.constexpr, num_warps: gl.constexpr, FRAGMENT: gl.constexpr,
                  WORDS: gl.constexpr, MAX_PARTS: gl.constexpr, a_hi, a_lo, p_smem, s_smem, ready, empty, u0,
                  n_units, blocks, tiles_n, units, ctas, c_ptr, ws_ptr, lock_ptr, M, N, stride_cm, stride_cn):
    """The MMA warps. One tile a CTA (MAX_PARTS = 1): its two accumulators, stored after the join.
    Stream-K: a segment a tile that the CTA's units touch, each stored as it ends through the family's
    reduction (``dqmma.store_tile``), the LO accumulators' slots and counters after the HI ones'."""
    HI_ROWS: gl.constexpr = a_hi.type.shape[1]
    HI_ACC: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[num_warps, 1],
                                                     instr_shape=[16, HI_ROWS, 16])
    LO_ACC: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[num_warps, 1],
                                                     instr_shape=[16, LO, 16])
    FRAG: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=HI_ACC, k_width=2)
    FRAG_LO: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=LO_ACC, k_width=2)
    acc_hi = gl.zeros([BN, HI_ROWS], gl.float32, HI_ACC)
    acc_lo = gl.zeros([BN, LO], gl.float32, LO_ACC)
    if MAX_PARTS == 1:
        acc_hi, acc_lo = _two_tile_segment(acc_hi, acc_lo, 0, n_units, a_hi, a_lo, p_smem, s_smem, ready, empty,
                                           FRAGMENT, WORDS, FRAG, FRAG_LO)
    else:
        tiles = units // blocks
        ws_lo = ws_ptr + tiles * (MAX_PARTS * BN * HI_ROWS)
        for seg in range(stream_k_segments(u0, n_units, blocks)):
            begin, end = stream_k_segment(seg, u0, n_units, blocks)
            hi, lo = _two_tile_segment(gl.zeros([BN, HI_ROWS], gl.float32, HI_ACC), gl.zeros([BN, LO], gl.float32,
                                                                                            LO_ACC),
                                       begin, end, a_hi, a_lo, p_smem, s_smem, ready, empty, FRAGMENT, WORDS, FRAG,
                                       FRAG_LO)
            pid_n, pid_m, _ = _unit(u0 + end - 1, blocks, tiles_n)
            tile = (u0 + end - 1) // blocks
            first = _first_cta(tile * blocks, units, ctas)
            rank = gl.program_id(0) - first
            parts = _first_cta(tile * blocks + blocks - 1, units, ctas) - first + 1
            hi_row, lo_row, hi_own, lo_own = _token_rows(pid_m, HI_ROWS, LO, M)
            # C from each accumulator's first own row: the rows a shifted box repeats, at negative offsets, masked
            store_tile(hi, c_ptr + hi_own * stride_cm, pid_n * BN, hi_row - hi_own, N, M - hi_own, stride_cn,
                       stride_cm, ws_ptr, lock_ptr, tile, rank, parts, MAX_PARTS, True)
            store_tile(lo, c_ptr + lo_own * stride_cm, pid_n * BN, lo_row - lo_own, N, M - lo_own, stride_cn,
                       stride_cm, ws_lo, lock_ptr + tiles, tile, rank, parts, MAX_PARTS, True)
    return acc_hi, acc_lo


@gluon.jit
def _two_tile_load(a_hi_desc, a_lo_desc, p_desc, s_desc, a_hi, a_lo, p_smem, s_smem, ready, empty, u0, n_units,
                   blocks, tiles_n, M, group):
    """rsmma's loader (frag32 boxes) over the CTA's units in order, each slot's A as the two boxes."""
    STAGES: gl.constexpr = a_hi.type.shape[0]
    HI_ROWS: gl.constexpr = a_hi.type.shape[1]
    LO: gl.constexpr = a_lo.type.shape[1]
    BK: gl.constexpr = a_hi.type.shape[2]
    BN: gl.constexpr = s_smem.type.shape[2]
    BYTES: gl.constexpr = (a_hi_desc.block_type.nbytes + a_lo_desc.block_type.nbytes
                           + p_desc.block_type.nbytes * (BN // 64) + s_desc.block_type.nbytes)
    pid_n, pid_m, kb = _unit(u0, blocks, tiles_n)
    for i in range(n_units):
        s = i % STAGES
        mbarrier.wait(empty.index(s), ((i // STAGES) & 1) ^ 1)  # a fresh barrier counts as freed
        bar = ready.index(s)
        k = kb * BK
        col = pid_n * BN
        hi_row, lo_row, _, _ = _token_rows(pid_m, HI_ROWS, LO, M)
        mbarrier.expect(bar, BYTES)
        tma.async_copy_global_to_shared(a_hi_desc, [hi_row, k], bar, a_hi.index(s))
        tma.async_copy_global_to_shared(a_lo_desc, [lo_row, k], bar, a_lo.index(s))
        for j in gl.static_range(BN // 64):  # frag32: a box of whole chunks [BK/32, 256] per 64 columns
            tma.async_copy_global_to_shared(p_desc, [k // 32, (col + 64 * j) * 4], bar,
                                            p_smem.index(s).slice(j * (BK // 32), BK // 32))
        tma.async_copy_global_to_shared(s_desc, [k // group, col], bar, s_smem.index(s))
        pid_n, pid_m, kb = _next_unit(pid_n, pid_m, kb, blocks, tiles_n)


@gluon.jit
def two_tile_kernel(a_hi_desc, a_lo_desc, p_desc, s_desc, c_ptr, ws_ptr, lock_ptr, M, N, K, stride_cm, stride_cn,
                    GROUP: gl.constexpr, LO: gl.constexpr, BK: gl.constexpr, STAGES: gl.constexpr,
                    WORDS: gl.constexpr, FRAGMENT: gl.constexpr, MAX_PARTS: gl.constexpr, num_warps: gl.constexpr):
    """C [M, N] in tiles of HI + LO tokens (HI: a_hi_desc's box rows, ``_token_rows``) and BN = 16 x
    num_warps columns of frag32 weights: a CTA a tile (MAX_PARTS = 1), or stream-K over the grid's CTAs
    (MAX_PARTS, the most CTAs a tile meets: ``space.gluon_grid``)."""
    BN: gl.constexpr = 16 * num_warps
    HI_ROWS: gl.constexpr = a_hi_desc.block_type.shape[0]
    gl.static_assert(GROUP % BK == 0, "a block lies in one scale group")
    gl.static_assert(STAGES * BK >= BN, "the ring holds C's tiles for the staged store")
    blocks = K // BK
    tiles_n = gl.cdiv(N, BN)
    units = blocks * tiles_n * gl.cdiv(M, HI_ROWS + LO)
    ctas = gl.num_programs(0)  # a tile each: u0 = the tile's first unit, n_units = blocks
    u0 = gl.program_id(0) * units // ctas
    n_units = (gl.program_id(0) + 1) * units // ctas - u0
    a_hi = gl.allocate_shared_memory(gl.float16, [STAGES, HI_ROWS, BK], a_hi_desc.layout)
    a_lo = gl.allocate_shared_memory(gl.float16, [STAGES, LO, BK], a_lo_desc.layout)
    p_smem = gl.allocate_shared_memory(gl.int32, [STAGES, BN // 64 * (BK // 32), 256], p_desc.layout)
    s_smem = gl.allocate_shared_memory(gl.float16, [STAGES, 1, BN], s_desc.layout)
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for j in gl.static_range(STAGES):
        mbarrier.init(ready.index(j), count=1)
        mbarrier.init(empty.index(j), count=1)
    acc_hi, acc_lo = gl.warp_specialize([
        (_two_tile_mma, (BN, LO, num_warps, FRAGMENT, WORDS, MAX_PARTS, a_hi, a_lo, p_smem, s_smem, ready, empty, u0,
                         n_units, blocks, tiles_n, units, ctas, c_ptr, ws_ptr, lock_ptr, M, N, stride_cm, stride_cn)),
        (_two_tile_load, (a_hi_desc, a_lo_desc, p_desc, s_desc, a_hi, a_lo, p_smem, s_smem, ready, empty, u0, n_units,
                          blocks, tiles_n, M, GROUP)),
    ], [1], [LOAD_REGS])
    if MAX_PARTS == 1:  # the whole tile here, the ring drained: both accumulators staged through it
        pid_n, pid_m, _ = _unit(u0, blocks, tiles_n)
        hi_row, lo_row, hi_own, lo_own = _token_rows(pid_m, HI_ROWS, LO, M)
        # C from each accumulator's first own row: the rows a shifted box repeats, at negative offsets, masked
        _store_tile_staged(acc_hi, a_hi, c_ptr + hi_own * stride_cm, hi_row - hi_own, pid_n * BN, M - hi_own, N,
                           stride_cm, stride_cn, True)
        _store_tile_staged(acc_lo, a_lo, c_ptr + lo_own * stride_cm, lo_row - lo_own, pid_n * BN, M - lo_own, N,
                           stride_cm, stride_cn, True)


def parse_config(text: str) -> dict:
    bn, hi, lo, bk, stages, ctas, stream = (int(x) for x in text.split(","))
    return dict(BN=bn, HI=hi, LO=lo, BK=bk, STAGES=stages, CTAS=ctas, STREAM=stream)


def config_id(c: dict) -> str:
    return f"hi{c['HI']}.lo{c['LO']}.bn{c['BN']}.bk{c['BK']}.s{c['STAGES']}.c{c['CTAS']}" + (".sk0" if c["STREAM"] else "")


def launch_args(config: dict, a, packed_f, scales, out, sm_count: int):
    """(grid, args, meta) of two_tile_kernel for frag32 weights ``packed_f`` [K/32, 4N]: a CTA per tile of
    HI + LO tokens and BN columns, or (STREAM) CTAS x ``sm_count`` stream-K CTAs with a workspace of fp32
    slots [BN, HI] and [BN, LO] for each part of each tile, and their counters (``api._gluon_args``' for the
    family)."""
    from tunesearch.variants.api import _locks
    from tunesearch.variants.rsmma import frag32_descriptors, frag32_fragment, frag32_word_layout
    from tunesearch.variants.rsmma_launch import launch_registers
    from tunesearch.variants.space import STREAM_K, gluon_grid

    M, K = a.shape
    N = scales.shape[1]
    bn, hi, lo, bk = config["BN"], config["HI"], config["LO"], config["BK"]
    tiles = triton.cdiv(N, bn) * triton.cdiv(M, hi + lo)
    if config["STREAM"]:
        grid, parts = gluon_grid(M, N, K, hi + lo, bn, bk, STREAM_K, config["CTAS"] * sm_count)
    else:
        grid, parts = (tiles,), 1  # the kernel's unit ranges: one tile a CTA
    if parts > 1:
        workspace = torch.empty(tiles * parts * bn * (hi + lo), dtype=torch.float32, device=a.device)
        locks = _locks(a.device, 2 * tiles)
    else:
        workspace = locks = out  # unused when no tile is split
    a_hi, p_desc, s_desc = frag32_descriptors(a, packed_f, scales, hi, bn, bk)
    a_lo = frag32_descriptors(a, packed_f, scales, lo, bn, bk)[0]
    warps = bn // 16
    args = (a_hi, a_lo, p_desc, s_desc, out, workspace, locks, M, N, K, out.stride(0), out.stride(1))
    meta = dict(GROUP=128, LO=lo, BK=bk, STAGES=config["STAGES"], WORDS=frag32_word_layout(bk, warps),
                FRAGMENT=frag32_fragment, MAX_PARTS=parts, num_warps=warps,
                maxnreg=launch_registers(warps, config["CTAS"]))
    return grid, args, meta


def two_tile_launch(config: dict):
    """gluon_checks' launch form: (a, packed, scales, out) -> a no-argument launch."""
    from tunesearch.variants.api import _sm_count

    def launch(a, packed, scales, out):
        grid, args, meta = launch_args(config, a, packed, scales, out, _sm_count(a.device))

        def run():
            two_tile_kernel[grid](*args, **meta)
            return out
        return run
    return launch


FIELDS = ("BN", "HI", "LO", "BK", "STAGES", "CTAS", "STREAM")  # a config's order on the command line


def smoke_shapes(config: dict):
    """Mask edges (M, K, N): M at HI + 1 and HI + LO (one tile, the LO box shifted), past it (a second tile,
    shifted, and a third) and below HI; N no multiple of BN (but of 16, as every llama N is: the binaries
    ``warm`` compiled serve, where N = 200 would make each child compile its own); K of two blocks to eight."""
    hi, tile = config["HI"], config["HI"] + config["LO"]
    return [(hi + 1, 256, 208), (tile, 1024, 528), (tile + 3, 512, 272), (2 * tile + 5, 256, 208), (5, 256, 272)]


def smoke(config: dict) -> str | None:
    """``config`` on its smoke shapes against A @ dequantize(W) (the weights packed in the base layout and
    repacked to frag32, as dqmma_rs.py does); None, or what went wrong."""
    from benchmarks.experiments import gluon_checks
    from tunesearch.variants.layout import to_layout

    launch = two_tile_launch(config)
    return gluon_checks.smoke(lambda a, packed, scales, out: launch(a, to_layout(packed, "frag32"), scales, out),
                              smoke_shapes(config))


def smoke_all(configs, workers: int = 8, timeout_s: float = 120) -> dict:
    """Each config's smoke run in a child process of its own (a barrier waited on with the wrong phase
    hangs rather than fails: a hang must cost one config, not the device call), ``workers`` at a time."""
    from concurrent.futures import ThreadPoolExecutor

    from benchmarks.experiments import gluon_checks

    def one(config):
        return gluon_checks.smoke_in_child(__file__, FIELDS, config, timeout_s)
    with ThreadPoolExecutor(workers) as pool:
        problems = dict(zip((config_id(c) for c in configs), pool.map(one, configs)))
    bad = {k: v for k, v in problems.items() if v}
    print(f"smoke: {len(configs) - len(bad)} of {len(configs)} configs right on the mask edges"
          + "".join(f"\n  {k}: {v}" for k, v in bad.items()), flush=True)
    return bad


def compile_offline(config: dict, N: int = 12288, K: int = 4096):
    """The kernel for ``config`` compiled for sm_90 without a GPU (CPU tensors for the descriptors), at
    M = HI + LO."""
    from benchmarks.experiments import gluon_checks

    M = config["HI"] + config["LO"]
    a = torch.empty(M, K, dtype=torch.float16)
    packed = torch.empty(K // 32, 4 * N, dtype=torch.int32)
    scales = torch.empty(K // 128, N, dtype=torch.float16)
    out = torch.empty(M, N, dtype=torch.float16)
    _, args, meta = launch_args(config, a, packed, scales, out, sm_count=132)
    consts = {name: meta[name] for name in two_tile_kernel.arg_names if name in meta}
    return gluon_checks.compile_tma_kernel(two_tile_kernel, args[:4], consts, meta["num_warps"], meta["maxnreg"])


# (BN, HI, LO, BK, STAGES, CTAS, STREAM): 64-column tiles three (HI=64), two or one CTA an SM, 128-column
# tiles one, the deepest ring that fits the SM's 227 KB at that count; a CTA per column tile (192 CTAs of
# BN=64 on 4096x12288: 132 SMs hold 60 of them twice, so the wave lasts as long as two CTAs on one SM take)
# or stream-K over CTAS x the SMs (each an equal run of the blocks, the family's reduction where a tile is
# split). Offline, all 50 compile for sm_90 with 2 wgmmas in flight; stream-K spills 8 and 16 bytes at
# 128 + 32 and 128 + 64 tokens, BK=128, two CTAs an SM (timed all the same); 64 + LO tokens at BK=128 three
# CTAs an SM waits for every wgmma (left out).
CONFIGS = [dict(BN=bn, HI=128, LO=lo, BK=bk, STAGES=stages, CTAS=ctas, STREAM=stream)
           for lo in (8, 16, 32, 64) for bn, bk, stages, ctas in ((64, 64, 4, 2), (64, 128, 2, 2), (64, 64, 6, 1),
                                                                 (128, 64, 4, 1))
           for stream in (0, 1)]
CONFIGS += [dict(BN=bn, HI=64, LO=lo, BK=64, STAGES=stages, CTAS=ctas, STREAM=stream)
            for lo in (8, 16, 32) for bn, stages, ctas in ((64, 4, 3), (64, 6, 2), (128, 4, 1)) for stream in (0, 1)]
MS = (65, 72, 80, 96, 129, 136, 160, 192)


def timed_at(config: dict, M: int) -> bool:
    """Whether ``config`` is timed at M: within the bucket it is meant for (65..96 for HI=64, 129..192 for
    HI=128), where M past HI + LO takes a second tile, as a bucket's variant would at its other end."""
    return config["HI"] < M <= config["HI"] * 3 // 2


def _warm_one(config: dict, M: int, K: int, N: int) -> str | None:
    """Compile ``config`` for the real call's arguments on the GPU (``tunesearch.compile``'s way: the binary
    lands in Triton's disk cache under the key the timed launch looks up); None or the error."""
    from tunesearch.variants.api import _sm_count

    try:
        cuda = torch.device("cuda")
        a = torch.empty(M, K, dtype=torch.float16, device=cuda)
        packed = torch.empty(K // 32, 4 * N, dtype=torch.int32, device=cuda)
        scales = torch.empty(K // 128, N, dtype=torch.float16, device=cuda)
        out = torch.empty(M, N, dtype=torch.float16, device=cuda)
        grid, args, meta = launch_args(config, a, packed, scales, out, _sm_count(cuda))
        two_tile_kernel.warmup(*args, grid=grid, **meta)
        return None
    except Exception as e:
        return f"{type(e).__name__}: {str(e)[:300]}"


def warm(configs, keys):
    """Every config's compile for each (M, K, N) of ``keys`` that it fits, over the host's cores: compiles
    (seconds each, ~100 of them) would otherwise take most of a device call."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    # one job per (config, M's divisibility by 16): every llama shape's N and K are multiples of 16, and
    # Triton specializes integer arguments on that alone, so the other keys find the same binary (were
    # that wrong, a timed launch would compile for itself: slower, not wrong)
    jobs = list({(config_id(c), M % 16 == 0): (c, M, K, N) for c in configs for M, K, N in keys
                 if timed_at(c, M)}.values())
    workers = max(1, min(16, (os.cpu_count() or 2) - 1))
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        errors = [e for e in pool.map(_warm_one, *zip(*jobs)) if e]
    print(f"compiled {len(jobs)} (config, key) pairs on {workers} processes; {len(errors)} failed"
          + (f", the first: {errors[0]}" if errors else ""), flush=True)


def main(out_dir):
    from benchmarks.experiments import gluon_checks
    from tunesearch.bench import REL_TOL, CheckInputs, Operands, graph_time, time_fp16, time_variant
    from tunesearch.dispatch import Dispatcher, read_table
    from tunesearch.gpu import gpu_info

    info = gpu_info(0)
    table = Dispatcher(read_table(ROOT / "tunesearch" / "tables" / "h200.json"), strict=True)
    shapes = [(4096, 12288), (4096, 22016), (4096, 11008), (11008, 4096), (4096, 4096)]
    only = os.environ.get("TWO_TILES_SHAPES")  # "KxN,..."
    if only:
        shapes = [tuple(int(x) for x in s.split("x")) for s in only.split(",")]
    configs = [parse_config(c) for c in os.environ["TWO_TILES_CONFIGS"].split(";")] if os.environ.get(
        "TWO_TILES_CONFIGS") else CONFIGS
    ms = [int(m) for m in os.environ["TWO_TILES_MS"].split(",")] if os.environ.get("TWO_TILES_MS") else MS
    warm(configs, [(M, K, N) for K, N in shapes for M in ms])
    unsound = smoke_all(configs)
    configs = [c for c in configs if config_id(c) not in unsound]
    rows = []
    for K, N in shapes:
        layout = table.layout_for(N, K, torch.device("cuda"))
        if layout != "frag32":
            print(f"{K}x{N}: the table keeps layout {layout}; the experiment reads frag32 only", flush=True)
            continue
        for M in ms:
            pick = table.resolve(M, N, K, torch.device("cuda"))
            check = CheckInputs(M, N, K, 128, "cuda", layout=layout)
            ops = Operands(M, N, K, 128, info.l2_bytes, layout=layout)
            fp16 = time_fp16(M, N, K, info.l2_bytes, replays=20).us
            # as the bench times it (CLUSTER launches too); None: the table dequantizes for cuBLAS there
            picked = time_variant(pick, ops, replays=20).us if pick is not None else None
            row = dict(M=M, K=K, N=N, fp16=fp16, pick=pick.id if pick is not None else "dequant+cuBLAS",
                       pick_us=picked, configs={})
            for config in configs:
                if not timed_at(config, M):
                    continue
                try:
                    err = gluon_checks.relative_error_of(two_tile_launch(config), check)
                    if not err < REL_TOL:
                        raise AssertionError(f"WRONG: relative error {err:.3g}")
                    us = graph_time([two_tile_launch(config)(*c) for c in ops.copies], replays=20).us
                    row["configs"][config_id(config)] = dict(us=us, rel_error=err)
                except Exception as e:  # one config's failure is a result, not the run's end
                    row["configs"][config_id(config)] = dict(error=f"{type(e).__name__}: {str(e)[:300]}")
            rows.append(row)
            print(json.dumps(row), flush=True)
            del ops
            with open(f"{out_dir}/rsmma_two_tiles.json", "w") as f:
                json.dump(dict(gpu=info.to_dict(), smoke_failures=unsound, rows=rows), f, indent=1)
    print_table(rows)


def print_table(rows):
    """A line a key: cuBLAS fp16, the table's pick and the fastest two-tile config (µs), and that config."""
    nan = float("nan")
    print(f"{'key':>16} {'fp16':>7} {'pick':>7} {'2-tile':>7} config")
    for r in rows:
        timed = {c: v["us"] for c, v in r["configs"].items() if "us" in v}
        best = min(timed, key=timed.get) if timed else None
        print(f"{'M=%d %dx%d' % (r['M'], r['K'], r['N']):>16} {r['fp16']:7.2f} {r['pick_us'] or nan:7.2f} "
              f"{timed[best] if best else nan:7.2f} {best or '-'}")


if __name__ == "__main__":
    if sys.argv[1] == "--smoke":
        problem = smoke(parse_config(sys.argv[2]))
        print(problem or "ok")
        sys.exit(1 if problem else 0)
    elif sys.argv[1] == "--compile":
        from benchmarks.sass_stats import disassemble, resources, wgmma_waits

        compiled = compile_offline(parse_config(sys.argv[2]))
        print(json.dumps(dict(shared=compiled.metadata.shared, waits=wgmma_waits(disassemble(compiled)),
                              **resources(compiled))))
    else:
        main(sys.argv[1])
