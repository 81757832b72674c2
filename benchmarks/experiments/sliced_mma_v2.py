"""EXPERIMENT: sliced K on mma.sync, the split-K tail kept inside the CTA without wgmma (NOTES.md row 111).

    python benchmarks/experiments/sliced_mma_v2.py OUT_DIR     (on an sm_90 GPU: checked, then timed beside
                                                                 the table's picks and the streaming floor)
    python benchmarks/experiments/sliced_mma_v2.py --compile   (offline: registers, spills, barriers)

Row 66: where the pick splits K, every CTA of the one wave ends on the split reduction's tail (its fp32
partial stored, a fence, the counter, the last CTA reading the partials back): 1.3-2.6 us of a 7-17 us
kernel at M <= 64. Row 68's bare ring took most of it out where one CTA held both halves of K in two
consumer warp groups summing through shared memory (M=16 4096x11008 10.62 -> 9.45 us, floor 8.3), but
the family's own form of it (`rsmma_sliced.py`) never ran: with a second wgmma partition ptxas serialized
every wgmma (C7512). At M <= 16 the tensor cores idle anyway (row 67), so here each slice multiplies with
mma.sync (Gluon's ``mma_v2``), which has no asynchronous accumulator for ptxas to serialize: the same
unpacked fragment (its per-warp registers are the wgmma register operand's), A's block read from the slot
by ldmatrix.

Status (row 111, `sliced_mma_v2_…_s59.*`, two runs within 1%): every form right, **neither mma.sync form
pays**. The second run, us (pick / v2_split / v2_sliced / v2_sliced_half / floor): M=8 4096x11008 12.20 /
13.38 / 15.05 / 14.90 / 8.31; M=16 4096x11008 12.81 / 14.39 / 16.37 / 16.27 / 8.44; M=8 4096x12288 12.38 /
13.46 / 15.13 / 15.10 / 8.96; M=8 4096^2 7.62 / 7.84 / 8.07 / 7.99 / 4.67; M=8 4096x22016 18.55 / 20.16 /
22.07 / 20.96 / 14.72. One mma.sync slice runs 3-13% behind the family's wgmma kernel (on the same layout),
and two slices a CTA behind one: 1.5-2.0 us where they take the global split away (4096x11008, x12288),
0.15-0.23 us at 4096^2 (four CTAs along K to two), 0.8 us (half the stages) to 1.9 us even where the CTAs
along K are the same (4096x22016, the pick unsplit). Halving each ring's stages (v2_sliced_half: the pick's
shared memory a CTA) moved none of it by more than 1.1 us.

Forms, each checked against A @ dequantize(W) before it is timed, on the base layout (A's whole box, so
only at M equal to the token tile, where no row is zero-filled; the family's kernel on the same layout
beside them):
  pick       the family's kernel of the table's pick (wgmma, the pick's SPLIT_K CTAs along K);
  v2_split   one mma.sync slice a CTA, the pick's SPLIT_K: what mma.sync costs against wgmma;
  v2_sliced  two mma.sync slices a CTA over two rings one loader warp fills, SPLIT_K / 2 CTAs along K
             (no global reduction where the pick splits two ways): slice 0 stores its tile in shared
             memory, slice 1 adds it and runs the family's epilogue; each ring the pick's stages
             (twice the pick's shared memory a CTA), or half of them (v2_sliced_half: the pick's).
"""
import json
import sys
from pathlib import Path

import torch
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.ampere import mma_v2
from triton.experimental.gluon.language.nvidia.hopper import mbarrier

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # so that it runs as a script from anywhere

from benchmarks.experiments import gluon_checks  # noqa: E402
from benchmarks.experiments.rsmma_sliced import LOAD_REGS, _load_two_rings, _ring  # noqa: E402
from tunesearch.variants.dqmma import _tile_epilogue  # noqa: E402

BN = gl.constexpr(64)  # one slice: 4 warps of 16 fragment rows, as one wgmma warp group holds them
MAXNREG = 80  # two CTAs of 12 warps an SM at the sliced form, three of 8 at the other (rsmma_sliced's)


@gluon.jit
def _slice_acc(BM: gl.constexpr, a_smem, p_smem, s_smem, ready, empty, n_blocks, FRAGMENT: gl.constexpr,
               WORDS: gl.constexpr):
    """One slice's C^T tile [BN, BM] (rows in the paired order) over its ring's n_blocks blocks, by mma.sync."""
    ACC: gl.constexpr = gl.NVMMADistributedLayout(version=[2, 0], warps_per_cta=[4, 1], instr_shape=[16, 8])
    FRAG: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=ACC, k_width=2)
    TOKENS: gl.constexpr = gl.DotOperandLayout(operand_index=1, parent=ACC, k_width=2)
    STAGES: gl.constexpr = a_smem.type.shape[0]
    acc = gl.zeros([BN, BM], gl.float32, ACC)
    for i in range(n_blocks):
        s = i % STAGES
        mbarrier.wait(ready.index(s), (i // STAGES) & 1)
        w = FRAGMENT(p_smem.index(s), s_smem.index(s), WORDS, FRAG, True)
        x = a_smem.index(s).permute((1, 0)).load(TOKENS)
        # the arrive is one thread's: every warp's reads of the slot are done before it is freed
        gl.thread_barrier()
        mbarrier.arrive(empty.index(s))
        acc = mma_v2(w, x, acc)
    return acc


@gluon.jit
def _epilogue(acc, n_units, u_last, c_ptr, ws_ptr, lock_ptr, M, N, stride_cm, stride_cn, blocks, tiles_n, units,
              SPLIT_K: gl.constexpr, MAX_PARTS: gl.constexpr):
    if n_units > 0:  # C^T's tile [BN, BM] into C [M, N]: fp16, or the reduction over the CTAs along K
        _tile_epilogue(acc, u_last, c_ptr, ws_ptr, lock_ptr, M, N, stride_cm, stride_cn, blocks, tiles_n, units, 1,
                       SPLIT_K, MAX_PARTS, True, True)


@gluon.jit
def _only_slice(BM: gl.constexpr, a_smem, p_smem, s_smem, ready, empty, FRAGMENT: gl.constexpr, WORDS: gl.constexpr,
                c_ptr, ws_ptr, lock_ptr, M, N, stride_cm, stride_cn, u0, n_units, blocks, tiles_n, units,
                SPLIT_K: gl.constexpr, MAX_PARTS: gl.constexpr):
    acc = _slice_acc(BM, a_smem, p_smem, s_smem, ready, empty, n_units, FRAGMENT, WORDS)
    _epilogue(acc, n_units, u0 + n_units - 1, c_ptr, ws_ptr, lock_ptr, M, N, stride_cm, stride_cn, blocks, tiles_n,
              units, SPLIT_K, MAX_PARTS)


@gluon.jit
def _first_slice(BM: gl.constexpr, a_smem, p_smem, s_smem, ready, empty, n_blocks, red_smem, red_bar,
                 FRAGMENT: gl.constexpr, WORDS: gl.constexpr):
    """Slice 0: its tile into shared memory for slice 1."""
    red_smem.store(_slice_acc(BM, a_smem, p_smem, s_smem, ready, empty, n_blocks, FRAGMENT, WORDS))
    gl.thread_barrier()  # every warp's part of the tile stored before the one thread's arrive
    mbarrier.arrive(red_bar.index(0))


@gluon.jit
def _second_slice(BM: gl.constexpr, a_smem, p_smem, s_smem, ready, empty, n_blocks, red_smem, red_bar,
                  FRAGMENT: gl.constexpr, WORDS: gl.constexpr, c_ptr, ws_ptr, lock_ptr, M, N, stride_cm, stride_cn,
                  u_last, n_units, blocks, tiles_n, units, SPLIT_K: gl.constexpr, MAX_PARTS: gl.constexpr):
    """Slice 1: its tile plus slice 0's, once that is in shared memory, into C through the family's epilogue."""
    acc = _slice_acc(BM, a_smem, p_smem, s_smem, ready, empty, n_blocks, FRAGMENT, WORDS)
    mbarrier.wait(red_bar.index(0), 0)
    acc += red_smem.load(acc.type.layout)
    _epilogue(acc, n_units, u_last, c_ptr, ws_ptr, lock_ptr, M, N, stride_cm, stride_cn, blocks, tiles_n, units,
              SPLIT_K, MAX_PARTS)


@gluon.jit
def sliced_v2_kernel(a_desc, p_desc, s_desc, c_ptr, ws_ptr, lock_ptr, M, N, K, stride_cm, stride_cn,
                     GROUP: gl.constexpr, BM: gl.constexpr, BK: gl.constexpr, SPLIT_K: gl.constexpr,
                     STAGES: gl.constexpr, WORDS: gl.constexpr, FRAGMENT: gl.constexpr, SLICES: gl.constexpr,
                     MMA_REGS: gl.constexpr, num_warps: gl.constexpr, MAX_PARTS: gl.constexpr = 1):
    """SLICES (1 or 2) mma.sync slices a CTA (grid: 64-column tiles, SPLIT_K CTAs along K, token tiles); with
    two, slice 0 takes the first half of the CTA's blocks and slice 1 the rest, each over a ring of its own."""
    gl.static_assert(num_warps == 4, "one slice: 4 warps, BN = 64")
    gl.static_assert(GROUP % BK == 0, "a block lies in one scale group")
    blocks = K // BK
    tiles_n = gl.cdiv(N, BN)
    units = blocks * tiles_n * gl.cdiv(M, BM)
    per_split = (blocks + SPLIT_K - 1) // SPLIT_K
    first_block = gl.program_id(1) * per_split
    u0 = (gl.program_id(2) * tiles_n + gl.program_id(0)) * blocks + first_block
    n_units = gl.maximum(gl.minimum(blocks - first_block, per_split), 0)
    a0, p0, s0, ready0, empty0 = _ring(a_desc, p_desc, s_desc, STAGES, BM, BK, BN)
    if SLICES == 1:
        gl.warp_specialize([
            (_only_slice, (BM, a0, p0, s0, ready0, empty0, FRAGMENT, WORDS, c_ptr, ws_ptr, lock_ptr, M, N, stride_cm,
                           stride_cn, u0, n_units, blocks, tiles_n, units, SPLIT_K, MAX_PARTS)),
            (_load_two_rings, (a_desc, p_desc, s_desc, a0, p0, s0, ready0, empty0, a0, p0, s0, ready0, empty0, u0,
                               n_units, 0, blocks, tiles_n, GROUP)),
        ], [1], [LOAD_REGS])
    else:
        n0 = (n_units + 1) // 2
        a1, p1, s1, ready1, empty1 = _ring(a_desc, p_desc, s_desc, STAGES, BM, BK, BN)
        red_smem = gl.allocate_shared_memory(gl.float32, [BN, BM], gl.SwizzledSharedLayout(1, 1, 1, [1, 0]))
        red_bar = gl.allocate_shared_memory(gl.int64, [1, 1], mbarrier.MBarrierLayout())
        mbarrier.init(red_bar.index(0), count=1)
        gl.warp_specialize([
            (_first_slice, (BM, a0, p0, s0, ready0, empty0, n0, red_smem, red_bar, FRAGMENT, WORDS)),
            (_second_slice, (BM, a1, p1, s1, ready1, empty1, n_units - n0, red_smem, red_bar, FRAGMENT, WORDS,
                             c_ptr, ws_ptr, lock_ptr, M, N, stride_cm, stride_cn, u0 + n_units - 1, n_units, blocks,
                             tiles_n, units, SPLIT_K, MAX_PARTS)),
            (_load_two_rings, (a_desc, p_desc, s_desc, a0, p0, s0, ready0, empty0, a1, p1, s1, ready1, empty1, u0,
                               n0, n_units - n0, blocks, tiles_n, GROUP)),
        ], [4, 1], [MMA_REGS, LOAD_REGS])


def v2_call(p: dict, slices: int, a, packed, scales, out, maxnreg: int = MAXNREG, group_size: int = 128):
    """The mma.sync kernel for rsmma variant parameters ``p`` (BN=64) on the base layout: ``slices`` slices a
    CTA, SPLIT_K / slices CTAs along K (at least one); its kernel, grid, arguments and meta."""
    from tunesearch.variants.api import _gluon_args
    from tunesearch.variants.dqmma import descriptors
    from tunesearch.variants.rsmma import fragment, word_layout

    assert p["BN"] == 64 and slices in (1, 2), (p, slices)
    M, K = a.shape
    N = packed.shape[1]
    bm, bk, split_k = p["BM"], p["BK"], max(1, max(1, p["SPLIT_K"]) // slices)
    tiles_m, tiles_n = triton.cdiv(M, bm), triton.cdiv(N, 64)
    args = _gluon_args(descriptors, a, packed, scales, out, bm, 64, bk, tiles_m * tiles_n, split_k)
    meta = dict(GROUP=group_size, BM=bm, BK=bk, SPLIT_K=split_k, MAX_PARTS=split_k, STAGES=p["num_stages"],
                WORDS=word_layout(bk, 4), FRAGMENT=fragment, SLICES=slices, MMA_REGS=maxnreg, num_warps=4,
                maxnreg=maxnreg)
    return sliced_v2_kernel, (tiles_n, split_k, tiles_m), args, meta


def form_launch(p: dict, slices: int):
    """gluon_checks' form of a launch: (a, packed, scales, out) -> a no-argument launch."""
    def launch(a, packed, scales, out):
        kernel, grid, args, meta = v2_call(p, slices, a, packed, scales, out)
        return lambda: kernel[grid](*args, **meta)
    return launch


def compile_form(variant_id: str, slices: int, M: int = 8, N: int = 11008, K: int = 4096) -> dict:
    """The kernel for ``variant_id`` compiled for sm_90 offline: its registers, spills, barriers and MMAs."""
    from benchmarks.sass_stats import disassemble, resources
    from tunesearch.variants import Variant

    a = torch.empty(M, K, dtype=torch.float16)
    packed = torch.empty(K // 8, N, dtype=torch.int32)
    scales = torch.empty(K // 128, N, dtype=torch.float16)
    out = torch.empty(M, N, dtype=torch.float16)
    kernel, _, args, meta = v2_call(Variant.from_id(variant_id).params, slices, a, packed, scales, out)
    consts = {name: meta[name] for name in kernel.arg_names if name in meta}
    compiled = gluon_checks.compile_tma_kernel(kernel, args[:3], consts, meta["num_warps"], meta["maxnreg"])
    sass = disassemble(compiled)
    count = lambda prefix: sum(op.startswith(prefix) for _, op, _ in sass)  # noqa: E731
    return dict(slices=slices, hmma=count("HMMA"), wgmma=count("HGMMA"), tma_loads=count("UTMALDG"),
                atomics=count(("ATOMG", "RED")), **resources(compiled))


# (M, K, N): the token tile's own M (no row of A's box zero-filled on the base layout), the picks splitting
# K two ways (the 11008- and 12288-wide layers), four ways (the 4096-wide ones) or not at all (4096x22016)
KEYS = [(8, 4096, 11008), (16, 4096, 11008), (8, 4096, 12288), (8, 4096, 4096), (8, 4096, 22016)]


def main(out_dir):
    from benchmarks.experiments.dqmma_rs import family_launch
    from tunesearch.bench import CheckInputs, Operands, kernel_bytes
    from tunesearch.dispatch import Dispatcher, read_table
    from tunesearch.gpu import gpu_info, stream_read_floor

    info = gpu_info(0)
    table = Dispatcher(read_table(ROOT / "tunesearch" / "tables" / "h200.json"), strict=True)
    rows = []
    for M, K, N in KEYS:
        variant = table.resolve(M, N, K, torch.device("cuda"))
        row = dict(M=M, K=K, N=N, variant=variant.id,
                   floor=stream_read_floor(kernel_bytes(M, N, K, 128), info.l2_bytes, info.sm_count, replays=20).us)
        inputs = CheckInputs(M, N, K, 128, "cuda")
        half = {**variant.params, "num_stages": (variant.params["num_stages"] + 1) // 2}
        launches = {"pick": family_launch(variant), "v2_split": form_launch(variant.params, 1),
                    "v2_sliced": form_launch(variant.params, 2), "v2_sliced_half": form_launch(half, 2)}
        ops = Operands(M, N, K, 128, info.l2_bytes)
        for form, launch in launches.items():
            gluon_checks.time_form(row, form, launch, inputs, ops.copies)
        rows.append(row)
        print(json.dumps(row), flush=True)
        del ops, inputs
        with open(f"{out_dir}/sliced_mma_v2.json", "w") as f:
            json.dump(dict(gpu=info.to_dict(), maxnreg=MAXNREG, rows=rows), f, indent=1)
    print(f"{'key':>15} {'pick':>36} {'pick':>7} {'v2_split':>8} {'v2_sliced':>9} {'half':>8} {'floor':>6}")
    for r in rows:
        f = lambda x: f"{x:8.2f}" if isinstance(x, float) else "    fail"  # noqa: E731
        print(f"{'M=%d %dx%d' % (r['M'], r['K'], r['N']):>15} {r['variant']:>36} {f(r['pick'])} {f(r['v2_split'])} "
              f"{f(r['v2_sliced'])} {f(r['v2_sliced_half'])} {r['floor']:6.2f}")


if __name__ == "__main__":
    if sys.argv[1] == "--compile":
        print(json.dumps({f"{v} slices={s}": compile_form(v, s) for v in ("rsmma.bm8.bn64.bk128.sk2.w4.s6.c3",
                                                                            "rsmma.bm16.bn64.bk128.sk4.w4.s8.c3")
                          for s in (1, 2)}))
    else:
        main(sys.argv[1])
