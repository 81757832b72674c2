"""EXPERIMENT: does two_box's loader cost the launches it adds no box to? (NOTES.md rows 108-109)

    python benchmarks/experiments/loader_ab.py OUT_DIR LOADER ROUND      (on an sm_90 GPU)
    python benchmarks/experiments/loader_ab.py --compile LOADER [M]       (offline: TMA loads, registers)
    bash benchmarks/experiments/loader_ab.sh                              (on the device: rounds of each)

two_box (``_s57``, c8a9bfa) made rsmma's loader, below a token tile, set one of two predicated expects and
issue a second, predicated copy of A's last rows each 128-byte column chunk a stage, M read at run time;
where M is a power of two (M=1, 2, 4 on the 8-token picks) the box holds every row and that copy is never
issued. The default bench after it ran M=1..4 1.2-2.9% slower than ``_s54``'s on every shape, the same
picks included, while tinygemm moved +0.3%; ``_s53``'s A/B of the forms could not tell, since both of its
forms ran the two-box loader. LOADER: ``predicated`` (c8a9bfa's: rsmma_row_box.py's ``rows_load_partition``),
``one_box`` (``_s53`` to ``_s56``'s: one box a chunk, one expect, ``one_box_load_partition``; right only
where M is a power of two below the tile) or ``tree`` (the tree's own: since row 109 the second box is
the constexpr A_TAIL, ``rsmma.a_tail``). Processes alternate (Triton refuses a kernel's callee changed
after it compiled), at the packaged table's picks, each launch checked against A @ dequantize(W) first.
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

from benchmarks.experiments.rsmma_row_box import copy_weights, rows_load_partition  # noqa: E402
from tunesearch.variants import rsmma  # noqa: E402
from tunesearch.variants.dqmma import _next_unit, _unit, token_origin  # noqa: E402

# M a power of two below the 8-token tile, on the five llama-7b shapes: the launches where c8a9bfa's second
# copy is predicated off; and M=3, where it is issued (one_box skips it: its one box would leave a row out)
KEYS = [(M, K, N) for K, N in ((4096, 22016), (4096, 11008), (11008, 4096), (4096, 12288), (4096, 4096))
        for M in (1, 2, 3, 4)]


@gluon.jit
def one_box_load_partition(a_desc, p_desc, s_desc, a_smem, p_smem, s_smem, ready, empty, u0, n_units, blocks,
                           tiles_n, group, PARTS: gl.constexpr, A_TAIL: gl.constexpr):
    """rsmma's ``_load_partition`` as it was from ``_s53`` to ``_s56`` (3ef3d26): below a token tile one
    box of A's rows a column chunk and one expect, nothing predicated (A_TAIL not read)."""
    STAGES: gl.constexpr = a_smem.type.shape[0]
    BM: gl.constexpr = a_smem.type.shape[1]
    BK: gl.constexpr = a_smem.type.shape[2]
    BN: gl.constexpr = s_smem.type.shape[2]
    BASE: gl.constexpr = p_smem.type.shape[1] == BK // 8
    P_BYTES: gl.constexpr = p_desc.block_type.nbytes * (1 if BASE else BN // 64)
    A_ROWS: gl.constexpr = a_desc.block_type.shape[0]
    A_BYTES: gl.constexpr = a_desc.block_type.nbytes * (BK // 64 if A_ROWS < BM else 1)
    pid_n, pid_m, kb = _unit(u0, blocks, tiles_n)
    for i in range(n_units):
        s = i % STAGES
        mbarrier.wait(empty.index(s), ((i // STAGES) & 1) ^ 1)
        bar = ready.index(s)
        k = kb * BK
        if PARTS & rsmma.A_COPY:
            mbarrier.expect(bar, A_BYTES + P_BYTES + s_desc.block_type.nbytes)
            if A_ROWS < BM:
                chunks = a_smem.index(s)._reinterpret(gl.float16, [BK // 64 * BM, 64], rsmma.CHUNK_ROWS)
                for c in gl.static_range(BK // 64):
                    tma.async_copy_global_to_shared(a_desc, [0, k + 64 * c], bar, chunks.slice(c * BM, A_ROWS))
            else:
                tma.async_copy_global_to_shared(a_desc, [token_origin(pid_m, BM, a_desc.shape[0]), k], bar,
                                                a_smem.index(s))
        else:
            mbarrier.expect(bar, P_BYTES + s_desc.block_type.nbytes)
        copy_weights(p_desc, s_desc, p_smem.index(s), s_smem.index(s), bar, k, pid_n, group, BASE, BN, BK)
        pid_n, pid_m, kb = _next_unit(pid_n, pid_m, kb, blocks, tiles_n)


# predicated: c8a9bfa's loader, which rsmma_row_box.py's rows loader has been since two_box (second box and
# expect predicated on M at run time)
LOADERS = {"tree": None, "one_box": one_box_load_partition, "predicated": rows_load_partition}


def use_loader(loader: str):
    """rsmma's kernel with ``loader``'s partition: set before anything compiles."""
    if loader not in LOADERS:
        raise SystemExit(f"loader: one of {', '.join(LOADERS)}, not {loader!r}")
    if LOADERS[loader] is not None:
        rsmma._load_partition = LOADERS[loader]


def main(out_dir: str, loader: str, round_: str):
    from benchmarks.experiments import gluon_checks
    from tunesearch.bench import REL_TOL, CheckInputs, Operands, kernel_bytes, time_variant
    from tunesearch.dispatch import Dispatcher, read_table
    from tunesearch.gpu import gpu_info, stream_read_floor

    use_loader(loader)
    info = gpu_info(0)
    table = Dispatcher(read_table(ROOT / "tunesearch" / "tables" / "h200.json"), strict=True)
    rows = []
    for M, K, N in gluon_checks.env_keys("LOADER_KEYS", KEYS):
        variant = table.resolve(M, N, K, torch.device("cuda"))
        row = dict(M=M, K=K, N=N, variant=variant.id, loader=loader, round=int(round_))
        if variant.family != "rsmma" or variant.params["BM"] <= M:
            row["skipped"] = "not an rsmma launch below its token tile"
        elif loader == "one_box" and M & (M - 1):
            row["skipped"] = "one box: right only where M is a power of two"
        else:
            err = CheckInputs(M, N, K, 128, "cuda", layout="frag32").check(variant)
            row["rel_error"] = err
            if not err < REL_TOL:
                row["us"] = f"WRONG: relative error {err:.3g}"
            else:
                row["us"] = time_variant(variant, Operands(M, N, K, 128, info.l2_bytes, layout="frag32")).us
            if M == 1:  # the same-process streaming floor, for M=1's target (within 1.15x of it)
                row["floor"] = stream_read_floor(kernel_bytes(1, N, K, 128), info.l2_bytes, info.sm_count).us
        rows.append(row)
        print(json.dumps(row), flush=True)
    Path(out_dir, f"loader_ab_{loader}_{round_}.json").write_text(json.dumps(dict(gpu=info.to_dict(), rows=rows),
                                                                               indent=1))


def compile_loader(loader: str, M: int = 1) -> dict:
    """4096x22016's M=1 pick compiled offline for sm_90 with ``loader``'s partition at M tokens, A's box as
    the launch makes it: TMA loads in the SASS, wgmma and their waits, registers, spills."""
    from benchmarks.experiments import gluon_checks
    from benchmarks.sass_stats import disassemble, resources, wgmma_waits
    from tunesearch.variants import Variant
    from tunesearch.variants.api import _rsmma_call
    from tunesearch.variants.layout import pack_frag32

    use_loader(loader)
    variant = Variant.from_id("rsmma.bm8.bn64.bk128.sk1.w4.s6.c3")
    a = torch.empty(M, 4096, dtype=torch.float16)
    packed = pack_frag32(torch.zeros(512, 22016, dtype=torch.int32))
    scales = torch.empty(32, 22016, dtype=torch.float16)
    _, _, args, meta = _rsmma_call(variant.params, a, packed, scales, torch.empty(M, 22016, dtype=torch.float16), 128)
    consts = {k: v for k, v in meta.items() if k != "maxnreg"}
    compiled = gluon_checks.compile_tma_kernel(rsmma.rsmma_kernel, args[:3], consts, meta["num_warps"], meta["maxnreg"])
    sass = disassemble(compiled)
    return dict(a_rows=args[0].block_shape[0], tma_loads=sum(op.startswith("UTMALDG") for _, op, _ in sass),
                wgmma=sum(op.startswith("HGMMA") for _, op, _ in sass), waits=wgmma_waits(sass), **resources(compiled))


def summary(out_dir: str):
    """Per key the median over rounds of each loader, and each one's over the tree's."""
    import statistics

    times, floors = {}, {}
    for path in sorted(Path(out_dir).glob("loader_ab_*_*.json")):
        for r in json.loads(path.read_text())["rows"]:
            if isinstance(r.get("us"), float):
                times.setdefault((r["M"], r["K"], r["N"], r["variant"]), {}).setdefault(r["loader"], []).append(r["us"])
            if "floor" in r:
                floors.setdefault((r["K"], r["N"]), []).append(r["floor"])
    loaders = [x for x in LOADERS if any(x in by for by in times.values())]
    print(f"{'key':>17} {'variant':>42} " + " ".join(f"{x:>10}" for x in loaders)
          + " " + " ".join(f"{x + '/tree':>15}" for x in loaders if x != "tree") + " rounds")
    ratios = {x: [] for x in loaders if x != "tree"}
    for (M, K, N, vid), by in times.items():
        med = {x: statistics.median(by.get(x, [float("nan")])) for x in loaders}
        for x in ratios:
            ratios[x].append(med[x] / med["tree"])
        print(f"{'M=%d %dx%d' % (M, K, N):>17} {vid:>42} " + " ".join(f"{med[x]:10.2f}" for x in loaders)
              + " " + " ".join(f"{med[x] / med['tree']:15.3f}" for x in ratios)
              + " " + "/".join(str(len(by.get(x, []))) for x in loaders))
    for (K, N), us in floors.items():
        by = times.get(next(k for k in times if k[:3] == (1, K, N)), {})
        print(f"M=1 {K}x{N}: floor median {statistics.median(us):.2f} us over {len(us)}; x floor: "
              + ", ".join(f"{x} {statistics.median(by[x]) / statistics.median(us):.3f}" for x in by))
    for x, r in ratios.items():
        if r:
            print(f"median {x}/tree {statistics.median(r):.3f} (min {min(r):.3f}, max {max(r):.3f})")


if __name__ == "__main__":
    if sys.argv[1] == "--summary":
        summary(sys.argv[2])
    elif sys.argv[1] == "--compile":
        print(json.dumps(compile_loader(sys.argv[2], *map(int, sys.argv[3:4]))))
    else:
        main(*sys.argv[1:4])
