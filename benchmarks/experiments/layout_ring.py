"""EXPERIMENT: does the weights' layout hold rsmma's ring over the streaming floor at small M (NOTES.md row 66)?

    python benchmarks/experiments/layout_ring.py OUT_DIR [FORM,...]   (on an sm_90 GPU: all forms or those named)
    RING_KEYS="M,K,N;..." python benchmarks/experiments/layout_ring.py OUT_DIR [FORM,...]  (at those keys)
    python benchmarks/experiments/layout_ring.py --compile      (offline: the probe ring compiles for sm_90)

The _s29 anatomy: at M <= 32 the TMA ring alone (no MMA) runs 1.5-3 us over the floor on 4096x11008,
11008x4096 and 4096^2, with or without splits, and stream-K, which scatters the CTAs over K, made it
slower still. The base layout's box is BK/8 rows of 256 bytes (BN=64 columns of int32), N * 4 bytes
apart. Each key's table pick (base layout) is timed whole and as the ring alone, then:
- frag32, ring_frag32: the same launch (tile, stages, splits, the registers of its CTAs an SM) on a
  frag32 copy of the weights (dqmma_rs.py's launcher, the fragment scaled before the wgmma), whole
  (checked against A @ dequantize(W)) and as the ring alone. In row 66 its TMA box was 3-D with a
  16-byte inner dimension (17.41 vs 13.31 us at M=16); since row 69 frag32 is [K/32, 4N] in 1 KB boxes
  (variants/layout.py), and the table's weights are kept in it;
- probe_tail: the bare ring (base layout, scales per block) followed by the family's split reduction of
  a zero tile (`store_tile`): what the tail costs in the ring (row 66: 1.3-2.6 us in the family). (A
  form with the counter taken first, the last split keeping its partial in registers and waiting on the
  others' flags, lost to it at 6 of 7 keys in the _s30 run, row 67, and was removed);
- probe_sliced_tail: the same ring with sliced K instead of half the splits: half as many CTAs along K,
  each with two consumer warp groups taking its blocks in turn and summing their partials through shared
  memory (no global round trip), then the family's tail over the CTAs left (none where the pick had two
  splits; the ring rounded up to an even number of stages, so that each slot serves one slice): whether a
  split inside the CTA costs less than one across CTAs;
- probe_base, probe_panel: a ring of this file's own (`ring_kernel`: a loader warp, consumer warps that
  only wait and free, A's tile and the packed block per stage, no scales), the same grid, stages and
  registers, reading the packed words as the base layout's 2-D box, or from a column-panel copy
  (int32 [N/64 * K/8, 64]: each 64-column tile's K/8 rows contiguous, so a block is one 4 KB run) with
  the same box shape: the DRAM access pattern alone changes;
- frag_bk64, frag_bk128, frag_bk256 (and _noa, without A's tile; NOTES.md row 103): the bare ring on
  frag32's boxes (the table's layout) with the family's epilogue, a token tile per BM rows, at the pick's
  tile, splits and registers, the ring's bytes kept (twice or half the pick's stages at BK=64 or 256, two
  scale rows a block at 256): whether fewer, larger blocks (a barrier round and a scale copy per 256 of K)
  take the ring nearer the floor at M=32 and 64 before rsmma is changed for them.
"""
import json
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # so that it runs as a script from anywhere

from triton.experimental import gluon  # noqa: E402
from triton.experimental.gluon import language as gl  # noqa: E402
from triton.experimental.gluon.language.nvidia.hopper import mbarrier, tma  # noqa: E402

from benchmarks.experiments import gluon_checks  # noqa: E402
from benchmarks.experiments.dqmma_rs import family_launch, launcher  # noqa: E402
from tunesearch.variants.layout import pack_frag32  # noqa: E402
from tunesearch.variants.dqmma import store_tile  # noqa: E402


@gluon.jit
def _consume(a_smem, ready, empty, s_bar, n_blocks, SCALES: gl.constexpr, FIRST: gl.constexpr = 0,
             STEP: gl.constexpr = 1):
    """Wait for blocks FIRST, FIRST + STEP, ... of the CTA's n_blocks and free their slots (a sliced-K
    consumer takes every other block)."""
    STAGES: gl.constexpr = a_smem.type.shape[0]
    if SCALES == 2:  # the CTA's scale rows, loaded once
        mbarrier.wait(s_bar.index(0), 0)
    for i in range(FIRST, n_blocks, STEP):
        mbarrier.wait(ready.index(i % STAGES), (i // STAGES) & 1)
        mbarrier.arrive(empty.index(i % STAGES))


@gluon.jit
def _slice_acc(BN: gl.constexpr, BM: gl.constexpr):
    """A slice's (zero) partial tile [BN, BM] in a warp group's wgmma accumulator layout, as rsmma's."""
    return gl.zeros([BN, BM], gl.float32, gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                                    instr_shape=[16, BM, 16]))


@gluon.jit
def _consume_first_slice(a_smem, p_smem, ready, empty, s_bar, red_smem, red_bar, n_blocks, SCALES: gl.constexpr):
    """Sliced K, the first of two consumer warp groups: the CTA's even blocks, then the second slice's
    partial from shared memory added to its own; returns the CTA's tile."""
    _consume(a_smem, ready, empty, s_bar, n_blocks, SCALES, 0, 2)
    acc = _slice_acc(p_smem.type.shape[2], a_smem.type.shape[1])
    mbarrier.wait(red_bar.index(0), 0)
    return (acc + red_smem.load(acc.type.layout),)


@gluon.jit
def _consume_second_slice(a_smem, p_smem, ready, empty, s_bar, red_smem, red_bar, n_blocks, SCALES: gl.constexpr):
    """Sliced K, the second consumer warp group: the CTA's odd blocks, then its partial into shared memory
    for the first (no global round trip)."""
    _consume(a_smem, ready, empty, s_bar, n_blocks, SCALES, 1, 2)
    red_smem.store(_slice_acc(p_smem.type.shape[2], a_smem.type.shape[1]))
    mbarrier.arrive(red_bar.index(0))


@gluon.jit
def _load(a_desc, p_desc, s_desc, a_smem, p_smem, s_smem, ready, empty, s_bar, pid_n, pid_m, first_block, n_blocks, K,
          PANEL: gl.constexpr, SCALES: gl.constexpr, FRAG: gl.constexpr, A_TILES: gl.constexpr):
    STAGES: gl.constexpr = a_smem.type.shape[0]
    BM: gl.constexpr = a_smem.type.shape[1]
    BK: gl.constexpr = a_smem.type.shape[2]
    BN: gl.constexpr = s_desc.block_type.shape[1]
    A_ROWS: gl.constexpr = a_desc.block_type.shape[0]  # BM, or 1 at M=1: no rows past A to zero-fill
    A_BYTES: gl.constexpr = (a_desc.block_type.nbytes * (BK // 64 if A_ROWS < BM else 1)) if A_TILES else 0
    if SCALES == 2:  # all the CTA's scale rows (one a block: BK = the group size) in one box, first
        mbarrier.expect(s_bar.index(0), s_desc.block_type.nbytes)
        tma.async_copy_global_to_shared(s_desc, [first_block, pid_n * BN], s_bar.index(0), s_smem)
    for i in range(n_blocks):
        s = i % STAGES
        mbarrier.wait(empty.index(s), ((i // STAGES) & 1) ^ 1)
        bar = ready.index(s)
        kb = first_block + i
        if SCALES == 1:
            mbarrier.expect(bar, A_BYTES + p_desc.block_type.nbytes + s_desc.block_type.nbytes)
        else:
            mbarrier.expect(bar, A_BYTES + p_desc.block_type.nbytes)
        if A_TILES and A_ROWS < BM:
            # M=1: token 0's row alone, one unswizzled [1, 64] box into each 128-byte column chunk of the slot
            # (rows of a 128-byte swizzle XOR their 16-byte units with the row index: row 0 is the identity;
            # Gluon does not slice a swizzled slot below its 8-row atom). The other rows keep what they held:
            # their tokens' columns of C are masked at the store
            gl.static_assert(A_ROWS == 1, "a box of one row only")
            chunks = a_smem.index(s)._reinterpret(gl.float16, [BK // 64 * BM, 64], a_desc.layout)
            for c in gl.static_range(BK // 64):
                tma.async_copy_global_to_shared(a_desc, [pid_m * BM, kb * BK + 64 * c], bar,
                                                chunks.slice(c * BM, 1))
        elif A_TILES:
            tma.async_copy_global_to_shared(a_desc, [pid_m * BM, kb * BK], bar, a_smem.index(s))
        if FRAG:  # frag32's rows [K/32, 4N]: the block's BK/32 rows of the tile's 4 BN words (1 KB at BN=64)
            tma.async_copy_global_to_shared(p_desc, [kb * (BK // 32), pid_n * 4 * BN], bar, p_smem.index(s))
        elif PANEL:  # column tile pid_n's K/8 rows of BN words, one after another
            tma.async_copy_global_to_shared(p_desc, [pid_n * (K // 8) + kb * (BK // 8), 0], bar, p_smem.index(s))
        else:
            tma.async_copy_global_to_shared(p_desc, [kb * (BK // 8), pid_n * BN], bar, p_smem.index(s))
        if SCALES == 1:  # the block's scale row with it, as the family does (BK/128 rows at BK > 128)
            tma.async_copy_global_to_shared(s_desc, [kb * BK // 128, pid_n * BN], bar, s_smem.index(s))


@gluon.jit
def ring_kernel(a_desc, p_desc, s_desc, c_ptr, ws_ptr, lock_ptr, M, N, K, stride_cm, stride_cn,
                BM: gl.constexpr, BN: gl.constexpr, BK: gl.constexpr, SPLIT_K: gl.constexpr,
                STAGES: gl.constexpr, PANEL: gl.constexpr, SCALES: gl.constexpr, num_warps: gl.constexpr,
                EPILOGUE: gl.constexpr = 0, SLICES: gl.constexpr = 1, FRAG: gl.constexpr = False,
                A_TILES: gl.constexpr = True):
    """The TMA ring of rsmma's split-K grid (column tile, split) alone: A's [BM, BK] tile and the packed
    block [BK/8, BN] per stage; its consumers only wait for each slot and free it. SCALES: 0 none, 1 the
    block's scale row [1, BN] in each stage (the family's way), 2 the CTA's rows in one [S, BN] box
    first (``s_desc``'s box). EPILOGUE, what a zero tile then goes through: 0 nothing, 1 the family's
    split reduction (`store_tile`: each split's fp32 partial stored, a counter, the last reads them all).
    SLICES=2: sliced K, two consumer warp groups taking the CTA's blocks in turn and summing their
    partials through shared memory, then the epilogue over the SPLIT_K CTAs a tile as before.
    FRAG: the packed words as frag32's rows (the table's layout), a box [BK/32, 4 BN]; A_TILES=False: no A
    tile in the ring. The grid's third axis is the token tile (A's rows from pid_m BM).
    (The Gluon families' signature, so that gluon_checks compiles it offline.)"""
    pid_n = gl.program_id(0)
    pid_m = gl.program_id(2)
    blocks = K // BK
    per_split = (blocks + SPLIT_K - 1) // SPLIT_K
    first_block = gl.program_id(1) * per_split
    n_blocks = gl.maximum(gl.minimum(blocks - first_block, per_split), 0)
    a_smem = gl.allocate_shared_memory(gl.float16, [STAGES, BM, BK], a_desc.layout)
    if FRAG:
        p_smem = gl.allocate_shared_memory(gl.int32, [STAGES, BK // 32, 4 * BN], p_desc.layout)
    else:
        p_smem = gl.allocate_shared_memory(gl.int32, [STAGES, BK // 8, BN], p_desc.layout)
    if SCALES == 2:
        s_smem = gl.allocate_shared_memory(gl.float16, s_desc.block_type.shape, s_desc.layout)
    else:
        s_smem = gl.allocate_shared_memory(gl.float16, [STAGES, s_desc.block_type.shape[0], BN], s_desc.layout)
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    s_bar = gl.allocate_shared_memory(gl.int64, [1, 1], mbarrier.MBarrierLayout())
    for j in gl.static_range(STAGES):
        mbarrier.init(ready.index(j), count=1)
        mbarrier.init(empty.index(j), count=1)
    mbarrier.init(s_bar.index(0), count=1)
    if SLICES == 1:
        gl.warp_specialize([(_consume, (a_smem, ready, empty, s_bar, n_blocks, SCALES)),
                            (_load, (a_desc, p_desc, s_desc, a_smem, p_smem, s_smem, ready, empty, s_bar, pid_n,
                                     pid_m, first_block, n_blocks, K, PANEL, SCALES, FRAG, A_TILES))], [1], [24])
        ACC: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[num_warps, 1],
                                                      instr_shape=[16, BM, 16])
        acc = gl.zeros([BN, BM], gl.float32, ACC)
    else:
        gl.static_assert(SLICES == 2 and num_warps == 4, "sliced K: two warp groups, the first the default partition")
        # each slot serves one slice: with an odd ring a slice would wait on a slot's phase parity two uses
        # ahead of it, which a pending use satisfies (a launch of 5 stages faulted on the H200)
        gl.static_assert(STAGES % 2 == 0, "sliced K needs an even number of stages")
        red_smem = gl.allocate_shared_memory(gl.float32, [BN, BM], gl.SwizzledSharedLayout(1, 1, 1, [1, 0]))
        red_bar = gl.allocate_shared_memory(gl.int64, [1, 1], mbarrier.MBarrierLayout())
        mbarrier.init(red_bar.index(0), count=1)
        (acc,) = gl.warp_specialize([
            (_consume_first_slice, (a_smem, p_smem, ready, empty, s_bar, red_smem, red_bar, n_blocks, SCALES)),
            (_consume_second_slice, (a_smem, p_smem, ready, empty, s_bar, red_smem, red_bar, n_blocks, SCALES)),
            (_load, (a_desc, p_desc, s_desc, a_smem, p_smem, s_smem, ready, empty, s_bar, pid_n, pid_m, first_block,
                     n_blocks, K, PANEL, SCALES, FRAG, A_TILES))], [4, 1], [48, 24])
    if EPILOGUE > 0:  # as rsmma's split-K launch writes its C^T tile [BN, BM]
        parts = (blocks + per_split - 1) // per_split
        store_tile(acc, c_ptr, pid_n * BN, pid_m * BM, N, M, stride_cn, stride_cm, ws_ptr, lock_ptr,
                   pid_m * gl.num_programs(0) + pid_n, gl.program_id(1), parts, SPLIT_K, True)


def panel_copy(packed: torch.Tensor, BN: int = 64) -> torch.Tensor:
    """The packed words [K/8, N] as column panels [N/BN * K/8, BN]: panel n holds columns n BN.. of every row."""
    KW, N = packed.shape
    return packed.view(KW, N // BN, BN).permute(1, 0, 2).contiguous().view(N // BN * KW, BN)


def probe_descriptors(a, packed, scales, BM: int, BK: int, panel: bool, scale_rows: int, BN: int = 64,
                      frag: bool = False, a_rows: int | None = None):
    """ring_kernel's descriptors: A's tile, the packed box [BK/8, BN] over the base or the panel copy (or
    [BK/32, 4 BN] over the words viewed as frag32's rows [K/32, 4N]: the same bytes, frag32's boxes), and
    the scales' box of ``scale_rows`` rows. ``a_rows=1``: A's row alone, in unswizzled [1, 64] boxes."""
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

    from tunesearch.variants.dqmma import shared_layouts

    a_layout, p_layout, s_layout = shared_layouts(BM, BN, BK)
    if frag:
        words, box = packed.view(packed.shape[0] // 4, 4 * packed.shape[1]), [BK // 32, 4 * BN]
    else:
        words, box = panel_copy(packed, BN) if panel else packed, [BK // 8, BN]
    if a_rows:  # M=1: one row's unswizzled 128-byte boxes (ring_kernel's A_ROWS)
        assert a_rows == 1, "a box of one row only"
        a_box = TensorDescriptor.from_tensor(a, [1, 64], gl.NVMMASharedLayout(swizzle_byte_width=0, element_bitwidth=16,
                                                                             rank=2))
    else:
        a_box = TensorDescriptor.from_tensor(a, [BM, BK], a_layout)
    return (a_box,
            TensorDescriptor.from_tensor(words, box, p_layout),
            TensorDescriptor.from_tensor(scales, [scale_rows, BN], s_layout))


def probe_launch(a, packed, scales, out, BM, BK, STAGES, SPLIT_K, maxnreg, panel: bool, SCALES: int = 0,
                 EPILOGUE: int = 0, BN: int = 64, SLICES: int = 1, FRAG: bool = False, A_TILES: bool = True,
                 A_ROWS: int | None = None):
    """A no-argument launch of ring_kernel over these operands (the panel copy made here, once); SPLIT_K is
    the CTAs a tile (SLICES warp groups each), one row of them per BM tokens."""
    M, K = a.shape
    N = packed.shape[1]
    per_split = -(-(K // BK) // SPLIT_K)
    # SCALES=2: a power of two (zero-filled past K/G); else a block's rows, BK/128 at BK > 128
    rows = 1 << (per_split - 1).bit_length() if SCALES == 2 else max(1, BK // 128)
    descs = probe_descriptors(a, packed, scales, BM, BK, panel, rows, BN, FRAG, A_ROWS)
    tiles, tiles_m = N // BN, -(-M // BM)
    ws = torch.empty(tiles * tiles_m * SPLIT_K * BN * BM, dtype=torch.float32, device=a.device)
    locks = torch.zeros(tiles * tiles_m, dtype=torch.int32, device=a.device)
    meta = dict(BM=BM, BN=BN, BK=BK, SPLIT_K=SPLIT_K, STAGES=STAGES, PANEL=panel, SCALES=SCALES, EPILOGUE=EPILOGUE,
                SLICES=SLICES, FRAG=FRAG, A_TILES=A_TILES, num_warps=4, maxnreg=maxnreg)
    grid = (tiles, SPLIT_K, tiles_m)
    return lambda: ring_kernel[grid](*descs, out, ws, locks, M, N, K, out.stride(0), out.stride(1), **meta)


def compile_probe(panel: bool):
    """ring_kernel compiled for sm_90 offline (CPU stand-ins for a 4096x11008 layer): its TMA loads and registers."""
    a = torch.empty(16, 4096, dtype=torch.float16)
    packed = torch.empty(512, 11008, dtype=torch.int32)
    scales = torch.empty(32, 11008, dtype=torch.float16)
    got = {}
    for scales_form, epilogue, slices in ((0, 0, 1), (1, 0, 1), (2, 0, 1), (1, 1, 1), (1, 1, 2)):
        descs = probe_descriptors(a, packed, scales, 16, 128, panel, 16 if scales_form == 2 else 1)
        consts = dict(BM=16, BN=64, BK=128, SPLIT_K=2 // slices, STAGES=6, PANEL=panel, SCALES=scales_form,
                      EPILOGUE=epilogue, SLICES=slices, FRAG=False, A_TILES=True, num_warps=4)
        compiled = gluon_checks.compile_tma_kernel(ring_kernel, descs, consts, 4, 80)
        got[f"{scales_form}{epilogue}" + ("s" if slices == 2 else "")] = _schedule(compiled)
    return got


def _schedule(compiled) -> dict:
    from benchmarks.sass_stats import disassemble, resources

    sass = disassemble(compiled)
    return dict(tma_loads=sum(op.startswith("UTMALDG") for _, op, _ in sass),
                atomics=sum(op.startswith(("ATOMG", "RED")) for _, op, _ in sass),
                shared_stores=sum(op.startswith("STS") for _, op, _ in sass), **resources(compiled))


def compile_frag_probe():
    """The frag32 ring (the family's epilogue) compiled offline at BK = 64, 128 and 256, with A's tile and
    without, on 32-token tiles, and with A's one row into an 8-token tile's slot (M=1): what a block's
    stage moves."""
    a = torch.empty(32, 4096, dtype=torch.float16)
    packed = torch.empty(512, 11008, dtype=torch.int32)
    scales = torch.empty(32, 11008, dtype=torch.float16)
    got = {}
    for bk in (64, 128, 256):
        for a_tiles in (True, False):
            descs = probe_descriptors(a, packed, scales, 32, bk, False, max(1, bk // 128), frag=True)
            consts = dict(BM=32, BN=64, BK=bk, SPLIT_K=2, STAGES=3, PANEL=False, SCALES=1, EPILOGUE=1, SLICES=1,
                          FRAG=True, A_TILES=a_tiles, num_warps=4)
            compiled = gluon_checks.compile_tma_kernel(ring_kernel, descs, consts, 4, 80)
            got[f"bk{bk}" + ("" if a_tiles else "_noa")] = _schedule(compiled)
    # an 8-token tile's slot given token 0's row alone (M=1)
    descs = probe_descriptors(a[:1], packed, scales, 8, 128, False, 1, frag=True, a_rows=1)
    consts = dict(BM=8, BN=64, BK=128, SPLIT_K=1, STAGES=6, PANEL=False, SCALES=1, EPILOGUE=1, SLICES=1,
                  FRAG=True, A_TILES=True, num_warps=4)
    got["bm8_row1"] = _schedule(gluon_checks.compile_tma_kernel(ring_kernel, descs, consts, 4, 80))
    return got

# (M, K, N): the keys whose ring ran over the floor in the _s29 anatomy, and 4096x22016 (at the floor);
# RING_KEYS="M,K,N;..." names others
KEYS = [(1, 4096, 11008), (16, 4096, 11008), (16, 11008, 4096), (16, 4096, 4096), (16, 4096, 22016),
        (32, 4096, 11008), (32, 11008, 4096)]


def block_forms(probe: dict, copies) -> list:
    """The bare frag32 ring with the family's epilogue (the pick's tile, splits and registers) at the pick's
    BK, and at 64 and 256 with the ring's bytes kept (twice or half the stages, rounded up): whether fewer,
    larger blocks a byte (one barrier round and one scale copy per 2 groups at BK=256) stream faster; each
    with and without A's tile."""
    forms = []
    for bk in (64, 128, 256):
        stages = max(2, -(-probe["STAGES"] * probe["BK"] // bk))
        config = {**probe, "BK": bk, "STAGES": stages}
        for a_tiles in (True, False):
            name = f"frag_bk{bk}" + ("" if a_tiles else "_noa")
            forms.append((name, [probe_launch(*c, **config, panel=False, SCALES=1, EPILOGUE=1, FRAG=True,
                                              A_TILES=a_tiles) for c in copies]))
    # M=1: A's one row in 128-byte boxes instead of BM rows of which TMA zero-fills those past M
    if copies[0][0].shape[0] == 1:
        forms.append(("frag_row1", [probe_launch(*c, **probe, panel=False, SCALES=1, EPILOGUE=1, FRAG=True,
                                                 A_ROWS=1) for c in copies]))
    return forms


def main(out_dir, only=None):
    from tunesearch.bench import REL_TOL, CheckInputs, Operands, graph_time, kernel_bytes
    from tunesearch.dispatch import Dispatcher, read_table
    from tunesearch.gpu import gpu_info, stream_read_floor
    from tunesearch.variants import Variant
    from tunesearch.variants.rsmma import A_COPY
    from tunesearch.variants.rsmma_launch import launch_registers

    info = gpu_info(0)
    table = Dispatcher(read_table(ROOT / "tunesearch" / "tables" / "h200.json"), strict=True)
    rows = []
    for M, K, N in gluon_checks.env_keys("RING_KEYS", KEYS):
        variant = table.resolve(M, N, K, torch.device("cuda"))
        if variant.family != "rsmma":  # M=1 where the gemv holds the bucket: its rsmma seed instead
            variant = Variant.from_id("rsmma.bm16.bn64.bk128.sk2.w4.s6.c3")
        p = variant.params
        config = dict(BM=p["BM"], BK=p["BK"], WG=p["BN"] // 64, STAGES=p["num_stages"], SPLIT_K=p["SPLIT_K"],
                      maxnreg=launch_registers(p["num_warps"], p["CTAS"]))
        row = dict(M=M, K=K, N=N, variant=variant.id,
                   floor=stream_read_floor(kernel_bytes(1, N, K, 128), info.l2_bytes, info.sm_count, replays=20).us)
        inputs = CheckInputs(M, N, K, 128, "cuda")
        ops = Operands(M, N, K, 128, info.l2_bytes)
        wanted = lambda form: only is None or form in only  # noqa: E731
        frag = ([(c[0], pack_frag32(c[1]), c[2], c[3]) for c in ops.copies]
                if wanted("frag32") or wanted("ring_frag32") else [])

        def frag32(a, packed, scales, out, **overrides):
            return launcher(a, pack_frag32(packed), scales, out, **config, **overrides)

        checks = {"base": gluon_checks.relative_error_of(family_launch(variant), inputs)}
        if wanted("frag32"):
            checks["frag32"] = gluon_checks.relative_error_of(frag32, inputs)
        row.update({f"{name}_rel_error": err for name, err in checks.items()})
        probe = dict(BM=p["BM"], BK=p["BK"], STAGES=p["num_stages"], SPLIT_K=p["SPLIT_K"], maxnreg=config["maxnreg"])
        # half the CTAs along K, an even ring (a stage more where the pick's is odd)
        sliced = {**probe, "SPLIT_K": max(1, p["SPLIT_K"] // 2), "STAGES": p["num_stages"] + p["num_stages"] % 2}
        forms = (("base", [family_launch(variant)(*c) for c in ops.copies]),
                 ("ring_base", [family_launch(variant, PARTS=A_COPY.value)(*c) for c in ops.copies]),
                 ("frag32", [launcher(*c, **config) for c in frag]),
                 ("ring_frag32", [launcher(*c, **config, PARTS=A_COPY.value) for c in frag]),
                 ("probe_base", [probe_launch(*c, **probe, panel=False) for c in ops.copies]),
                 ("probe_panel", [probe_launch(*c, **probe, panel=True) for c in ops.copies]),
                 ("probe_scales", [probe_launch(*c, **probe, panel=False, SCALES=1) for c in ops.copies]),
                 ("probe_scale_box", [probe_launch(*c, **probe, panel=False, SCALES=2) for c in ops.copies]),
                 ("probe_tail", [probe_launch(*c, **probe, panel=False, SCALES=1, EPILOGUE=1) for c in ops.copies]),
                 ("probe_sliced_tail", [probe_launch(*c, **sliced, panel=False, SCALES=1, EPILOGUE=1, SLICES=2)
                                        for c in ops.copies]),
                 *block_forms(probe, ops.copies))
        forms = tuple((form, launches) for form, launches in forms if wanted(form))
        for form, launches in forms:
            try:
                if form in checks and not checks[form] < REL_TOL:
                    raise AssertionError(f"WRONG: relative error {checks[form]:.3g}")
                row[form] = graph_time(launches, replays=20).us
            except Exception as e:
                row[form] = f"{type(e).__name__}: {str(e)[:200]}"
        rows.append(row)
        print(f"M={M} {K}x{N} {variant.id}: " + " ".join(f"{name} {row[name]}" for name, _ in forms)
              + f" floor {row['floor']:.2f}", flush=True)
        del ops, frag, inputs
        with open(f"{out_dir}/layout_ring.json", "w") as f:
            json.dump(dict(gpu=info.to_dict(), rows=rows), f, indent=1)
    names = [name for name, _ in forms] + ["floor"]
    print(f"{'key':>17} {'variant':>36} " + " ".join(f"{n:>11}" for n in names))
    for r in rows:
        f = lambda x: f"{x:11.2f}" if isinstance(x, float) else "       fail"  # noqa: E731
        print(f"{'M=%d %dx%d' % (r['M'], r['K'], r['N']):>17} {r['variant']:>36} "
              + " ".join(f(r.get(n)) for n in names))


if __name__ == "__main__":
    if sys.argv[1] == "--compile":
        print(json.dumps({"base": compile_probe(False), "panel": compile_probe(True), "frag": compile_frag_probe()}))
    else:
        main(sys.argv[1], *(set(forms.split(",")) for forms in sys.argv[2:3]))
