"""EXPERIMENT: rsmma at M < BM without the TMA's zero fill of A's rows past M (NOTES.md row 104).

    python benchmarks/experiments/rsmma_row_box.py OUT_DIR      (on an sm_90 GPU: check, then time)
    python benchmarks/experiments/rsmma_row_box.py --compile    (offline: the kernel's TMA loads and schedule)

On 4096x22016 the M=1..4 picks run 0.5-0.7 us slower than the same variant at M=8 in every bench since
_s31 (17.1-17.4 against 16.6-16.8 us), though M=1 reads less of A: an 8-token tile's A box has 8 rows and
the TMA zero-fills those past M, which is slow (row 86; twotile's `_token_rows` avoids it); the bare
ring (`layout_ring.py`'s frag_row1) ran 0.86 us faster there with token 0's row alone. The packaged
table shows the same at the first M of each larger tile: 4096x22016 M=17 (bm32, 15 rows zero-filled)
24.3 us against 18.8 at M=32, M=49 (bm64) 32.1 against 26.2 at 64; 11008x4096 M=33 (bm64) 20.4 against
16.9. Here A's box has R < BM rows ([R, 64] in the slot's own swizzled layout, one per 128-byte column
chunk of the slot); the slot's other rows keep what they held, and their tokens' columns of C are masked
at every store. The kernel is the family's, its load partition replaced by ``rows_load_partition`` (only
A's copy differs) before anything compiles. Each form is checked against A @ dequantize(W), then timed
beside the same kernel with the family's box. (The first form, A's slots unswizzled with an M-row box
into their first rows, compiled but faulted on the GPU: an illegal address,
`rsmma_row_box_unswizzled_…_s51.log`.)

Forms (``ROW_BOX_FORMS``, comma-separated; all three by default), A's box's rows R by ``a_descriptor``:
``zero_fill`` (the whole [BM, BK] box, the family's until _s53); ``row_box`` (the family's rule since
_s53, `rsmma.a_rows_box`: R is M's next power of two, so M=3 still zero-fills one row and M=5..7 at BM=8
the whole box); ``two_box`` (R is M's last power
of two: the first R rows, then, where M > R, A's last R rows, which overlap them, at the slot's rows
M-R..M-1: no row past A at any M < BM). The second box starts a multiple of 128 B past a 1024-byte swizzle
atom's start where M-R is no multiple of 8: the TMA swizzles by the shared address, and its rows land as
the slot holds them (checked right at 15 keys in _s53); run two_box alone (``ROW_BOX_FORMS=two_box
ROW_BOX_TAG=_two_box``) so that a fault loses nothing else.
"""
import json
import os
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # so that it runs as a script from anywhere

from triton.experimental import gluon  # noqa: E402
from triton.experimental.gluon import language as gl  # noqa: E402
from triton.experimental.gluon.language.nvidia.hopper import mbarrier, tma  # noqa: E402

from tunesearch.variants import rsmma  # noqa: E402
from tunesearch.variants.dqmma import _next_unit, _unit, token_origin  # noqa: E402

# a view of a slot's 128-byte column chunks as plain rows [BK/64 x BM, 64] (or [BK/64 x BM, 1, 64], whose
# `.index(row)` takes a runtime row: Gluon refuses a rank-3 layout there), which Gluon slices below the 8-row
# atom of a 128-byte swizzle; the TMA swizzles what it writes there by the shared address (the descriptor's
# mode), so the rows land as the slot's layout holds them
UNSWIZZLED = gl.NVMMASharedLayout(swizzle_byte_width=0, element_bitwidth=16, rank=2)


@gluon.jit
def rows_load_partition(a_desc, p_desc, s_desc, a_smem, p_smem, s_smem, ready, empty, u0, n_units, blocks, tiles_n,
                        group, PARTS: gl.constexpr, A_TAIL: gl.constexpr):
    """rsmma's `_load_partition`, but A's box may have fewer rows R than the slot (M < BM): it fills the
    slot's first rows, and where M > R a second box of A's last R rows fills the slot's rows M - R..M-1
    (overlapping the first: the same values written twice), predicated on M at run time (the forms' boxes
    are not the launch's: A_TAIL, the family's constexpr for its own box, is not read)."""
    STAGES: gl.constexpr = a_smem.type.shape[0]
    BM: gl.constexpr = a_smem.type.shape[1]
    BK: gl.constexpr = a_smem.type.shape[2]
    BN: gl.constexpr = s_smem.type.shape[2]
    A_ROWS: gl.constexpr = a_desc.block_type.shape[0]
    A_BYTES: gl.constexpr = a_desc.block_type.nbytes * (BK // 64 if A_ROWS < BM else 1)
    BASE: gl.constexpr = p_smem.type.shape[1] == BK // 8
    P_BYTES: gl.constexpr = p_desc.block_type.nbytes * (1 if BASE else BN // 64)
    pid_n, pid_m, kb = _unit(u0, blocks, tiles_n)
    for i in range(n_units):
        s = i % STAGES
        mbarrier.wait(empty.index(s), ((i // STAGES) & 1) ^ 1)
        bar = ready.index(s)
        k = kb * BK
        if PARTS & rsmma.A_COPY:
            M = a_desc.shape[0]
            REST: gl.constexpr = P_BYTES + s_desc.block_type.nbytes
            if A_ROWS < BM:  # M < BM: A's rows alone, a [A_ROWS, 64] box into each 128-byte column chunk's first rows
                # one expect a phase (it arrives): one box's bytes, or both boxes' where M > A_ROWS
                mbarrier.expect(bar, A_BYTES + REST, pred=M <= A_ROWS)
                mbarrier.expect(bar, 2 * A_BYTES + REST, pred=M > A_ROWS)
                chunks = a_smem.index(s)._reinterpret(gl.float16, [BK // 64 * BM, 64], UNSWIZZLED)
                rows = a_smem.index(s)._reinterpret(gl.float16, [BK // 64 * BM, 1, 64], UNSWIZZLED)
                for c in gl.static_range(BK // 64):
                    tma.async_copy_global_to_shared(a_desc, [0, k + 64 * c], bar, chunks.slice(c * BM, A_ROWS))
                    # rows A_ROWS..M-1 (M < 2 A_ROWS): the box of A's last rows, written from the slot's row
                    # M - A_ROWS (Gluon slices at multiples of a slice's length only, and at constants; the
                    # TMA writes the descriptor's box from the address given)
                    tma.async_copy_global_to_shared(a_desc, [M - A_ROWS, k + 64 * c], bar,
                                                    rows.index(c * BM + M - A_ROWS), pred=M > A_ROWS)
            else:
                mbarrier.expect(bar, A_BYTES + REST)
                tma.async_copy_global_to_shared(a_desc, [token_origin(pid_m, BM, M), k], bar, a_smem.index(s))
        else:
            mbarrier.expect(bar, P_BYTES + s_desc.block_type.nbytes)
        copy_weights(p_desc, s_desc, p_smem.index(s), s_smem.index(s), bar, k, pid_n, group, BASE, BN, BK)
        pid_n, pid_m, kb = _next_unit(pid_n, pid_m, kb, blocks, tiles_n)


@gluon.jit
def copy_weights(p_desc, s_desc, p_slot, s_slot, bar, k, pid_n, group, BASE: gl.constexpr, BN: gl.constexpr,
                 BK: gl.constexpr):
    """A block's packed weights and scale row into a ring slot, as rsmma's ``_load_partition`` copies them:
    the experiments' loaders (this one, loader_ab.py's) differ from the family's in A's copy only."""
    if BASE:  # the base layout's box [BK/8, BN]
        tma.async_copy_global_to_shared(p_desc, [k // 8, pid_n * BN], bar, p_slot)
    else:  # frag32's rows [K/32, 4N]: a box of whole chunks [BK/32, 256] per 64 columns
        for j in gl.static_range(BN // 64):
            tma.async_copy_global_to_shared(p_desc, [k // 32, (pid_n * BN + 64 * j) * 4], bar,
                                            p_slot.slice(j * (BK // 32), BK // 32))
    tma.async_copy_global_to_shared(s_desc, [k // group, pid_n * BN], bar, s_slot)


def use_rows_partition():
    """The family's kernel with ``rows_load_partition``: set before anything compiles (Triton's JIT looks
    a kernel's callees up in its module when it compiles, and refuses a global that changed since)."""
    rsmma._load_partition = rows_load_partition


FORMS = ("zero_fill", "row_box", "two_box")


def a_descriptor(family_desc, BM: int, BK: int, form: str):
    """A's TMA descriptor for ``form``, from the one the family's launch made (``family_desc``, by
    `rsmma.a_rows_box`): row_box that one itself, so that the form is the tree's rule whatever it becomes;
    zero_fill the whole [BM, BK] box; two_box [R, 64], R being M's last power of two, below BM."""
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

    if form == "row_box":
        return family_desc
    M = family_desc.shape[0]
    rows = BM if form == "zero_fill" or M >= BM else 1 << (M.bit_length() - 1)
    box = [rows, 64] if rows < BM else [BM, BK]
    return TensorDescriptor.from_tensor(family_desc.base, box, family_desc.layout)


def row_box_launch(variant, form: str, record: dict):
    """gluon_checks' launch of ``variant`` (the family's call) with A's descriptor for ``form``
    (``a_descriptor``), whose box rows it writes into ``record``; the same kernel source every form."""
    from tunesearch.variants.api import _rsmma_call

    def launch(a, packed, scales, out):
        kernel, grid, args, meta = _rsmma_call(variant.params, a, packed, scales, out, 128)
        a_desc = a_descriptor(args[0], variant.params["BM"], variant.params["BK"], form)
        record[f"{form}_box_rows"] = a_desc.block_shape[0]
        args = (a_desc, *args[1:])
        return lambda: kernel[grid](*args, **meta)
    return launch


# (form, M, A's box rows) compiled offline: the family's box, then boxes of 1, 2, 4 rows (the second box's
# copy is there, predicated, at any M below BM; M=3 and 7 issue it)
COMPILED = [("rows8", 8, 8), ("rows1", 1, 1), ("rows2", 2, 2), ("rows4", 4, 4), ("two_box2", 3, 2),
            ("two_box4", 7, 4)]


def compile_forms() -> dict:
    """The M=1 pick of 4096x22016 compiled offline with A's box of ``COMPILED``'s rows, through
    ``rows_load_partition``: TMA loads, wgmma and their waits, registers, spills."""
    from benchmarks.experiments import gluon_checks
    from benchmarks.sass_stats import disassemble, resources, wgmma_waits
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

    from tunesearch.variants import Variant
    from tunesearch.variants.api import _rsmma_call
    from tunesearch.variants.layout import pack_frag32

    use_rows_partition()
    variant = Variant.from_id("rsmma.bm8.bn64.bk128.sk1.w4.s6.c3")
    got = {}
    for name, M, rows in COMPILED:
        a = torch.empty(M, 4096, dtype=torch.float16)
        packed = pack_frag32(torch.zeros(512, 22016, dtype=torch.int32))
        scales = torch.empty(32, 22016, dtype=torch.float16)
        out = torch.empty(M, 22016, dtype=torch.float16)
        _, _, args, meta = _rsmma_call(variant.params, a, packed, scales, out, 128)
        if rows < 8:
            args = (TensorDescriptor.from_tensor(a, [rows, 64], args[0].layout), *args[1:])
        consts = {k: v for k, v in meta.items() if k != "maxnreg"}
        compiled = gluon_checks.compile_tma_kernel(rsmma.rsmma_kernel, args[:3], consts, meta["num_warps"],
                                                   meta["maxnreg"])
        sass = disassemble(compiled)
        got[name] = dict(tma_loads=sum(op.startswith("UTMALDG") for _, op, _ in sass),
                         wgmma=sum(op.startswith("HGMMA") for _, op, _ in sass), waits=wgmma_waits(sass),
                         **resources(compiled))
    return got


# (M, K, N): M=1 on the five shapes, and 4096x22016's M=8 (the same pick, A's box full)
KEYS = [(1, 4096, 22016), (8, 4096, 22016), (1, 4096, 11008), (1, 11008, 4096), (1, 4096, 12288), (1, 4096, 4096)]


def main(out_dir):
    from benchmarks.experiments import gluon_checks
    from tunesearch.bench import CheckInputs, Operands, kernel_bytes
    from tunesearch.dispatch import Dispatcher, read_table
    from tunesearch.gpu import gpu_info, stream_read_floor

    forms = os.environ.get("ROW_BOX_FORMS", ",".join(FORMS)).split(",")
    if unknown := set(forms) - set(FORMS):
        raise SystemExit(f"ROW_BOX_FORMS: no form {sorted(unknown)}; the forms are {', '.join(FORMS)}")
    path = f"{out_dir}/rsmma_row_box{os.environ.get('ROW_BOX_TAG', '')}.json"
    use_rows_partition()
    info = gpu_info(0)
    table = Dispatcher(read_table(ROOT / "tunesearch" / "tables" / "h200.json"), strict=True)
    rows = []
    for M, K, N in gluon_checks.env_keys("ROW_BOX_KEYS", KEYS):  # "M,K,N;...": those keys instead
        variant = table.resolve(M, N, K, torch.device("cuda"))
        row = dict(M=M, K=K, N=N, variant=variant.id,
                   floor=stream_read_floor(kernel_bytes(1, N, K, 128), info.l2_bytes, info.sm_count, replays=20).us)
        inputs = CheckInputs(M, N, K, 128, "cuda", layout="frag32")
        ops = Operands(M, N, K, 128, info.l2_bytes, layout="frag32")
        copies = ops.copies
        for form in forms:
            launch = row_box_launch(variant, form, row)
            gluon_checks.time_form(row, form, launch, inputs, copies)
        rows.append(row)
        print(f"M={M} {K}x{N} {variant.id}: " + " ".join(f"{form} {row[form]}" for form in forms)
              + f" floor {row['floor']:.2f}", flush=True)
        with open(path, "w") as f:
            json.dump(dict(gpu=info.to_dict(), forms=forms, rows=rows), f, indent=1)
        del ops, copies, inputs
    print(f"{'key':>17} {'variant':>40} " + " ".join(f"{form:>10}" for form in forms) + f" {'floor':>8}")
    for r in rows:
        f = lambda x: f"{x:10.2f}" if isinstance(x, float) else "      fail"  # noqa: E731
        print(f"{'M=%d %dx%d' % (r['M'], r['K'], r['N']):>17} {r['variant']:>40} "
              + " ".join(f(r[form]) for form in forms) + f" {r['floor']:8.2f}")


if __name__ == "__main__":
    if sys.argv[1] == "--compile":
        print(json.dumps(compile_forms()))
    else:
        main(sys.argv[1])
