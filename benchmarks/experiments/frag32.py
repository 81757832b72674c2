"""EXPERIMENT: layout frag32 against the base layout in the rsmma family's kernel, on the table's picks
(NOTES.md row 69).

    python benchmarks/experiments/frag32.py OUT_DIR [MAX_M]      (on an sm_90 GPU: base vs frag32, table picks)
    python benchmarks/experiments/frag32.py --compile VARIANT_ID  (offline: both layouts' schedule and unpack)

The family read only the base layout: per weight pair one PRMT (a thread's byte of a word its quad loads
four times over), one LOP3 and one HADD2. Layout frag32 (variants/layout.py) stores, per column and 32-deep
chunk, one word per thread of a quad holding exactly the 8 codes the register fragment wants, the column
pair's words adjacent: one SHF, four LOP3 and four HADD2 for 8 weights from a quarter of the shared-memory
words (offline, bm16.bn64.bk128.c3: 104 PRMT and 54 LDS -> 8 and 18 for three blocks; 1400 -> 1288
instructions in all). Row 51 measured an earlier frag32 3-10% under the base read at M=64..256; row 66
found it slower in the family's kernel (17.41 vs 13.31 us at M=16) with its TMA box 3-D and a 16-byte
inner dimension; here its rows [K/32, 4N] load as boxes [BK/32, 256] (1 KB, 64 columns' chunks).
Measured on the H200 (``frag32_h200_2026-12-01_s31.*``): 4-11% faster at 13 of 14 keys, level at one.
"""
import json
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # so that it runs as a script from anywhere

from benchmarks.experiments import gluon_checks  # noqa: E402
from tunesearch.variants.layout import to_layout  # noqa: E402


def frag32_launch(variant, **meta_overrides):
    """``variant``'s launch on frag32 weights as gluon_checks takes it (base-layout operands, repacked
    here: the check's weights come in the base layout); the family's launcher reads the layout from them."""
    from benchmarks.experiments.dqmma_rs import family_launch

    launch_base = family_launch(variant, **meta_overrides)
    return lambda a, packed, scales, out: launch_base(a, to_layout(packed, "frag32"), scales, out)


def schedule(variant_id: str) -> dict:
    """Offline (sm_90), the family's kernel of ``variant_id`` on each layout: wgmma waits, registers, spills,
    and the unpack's instructions by opcode (the whole kernel's: its loop is three copies, two blocks a
    trip and the odd tail, so a block's count is about a third). LDS counts the loop's shared loads; the
    epilogue's read-back of C's staged tile is ``staged_loads`` (``sass_stats.staged_epilogue_loads``), beside
    its 16-byte global stores ``staged_stores``, and a split reduction's read-back of the partials through
    the ring ``readback_loads`` (``sass_stats.split_readback_loads``)."""
    from benchmarks.experiments.dqmma_rs import compile_family_offline
    from benchmarks.sass_stats import disassemble, resources, split_readback_loads, staged_epilogue_loads, wgmma_waits

    out = {}
    for layout in ("base", "frag32"):
        sass = disassemble(compiled := compile_family_offline(variant_id, layout=layout))
        ops = [op.split(".")[0] for _, op, _ in sass]
        staged, readback = staged_epilogue_loads(sass), split_readback_loads(sass)
        out[layout] = dict(instructions=len(sass), waits=wgmma_waits(sass), wgmma=ops.count("HGMMA"),
                           **{op: ops.count(op) for op in ("PRMT", "LOP3", "SHF", "HADD2", "HMUL2")},
                           LDS=ops.count("LDS") - staged - readback, staged_loads=staged, readback_loads=readback,
                           staged_stores=sum(op == "STG.E.128" for _, op, _ in sass), **resources(compiled))
    return out


# (M, K, N): rsmma_anatomy's keys, decode first; each key's pick is the packaged table's (frag32's since row 69)
KEYS = [(1, 11008, 4096), (1, 4096, 22016), (1, 4096, 11008), (4, 4096, 12288), (8, 11008, 4096),
        (16, 4096, 11008), (16, 4096, 4096), (32, 4096, 11008), (32, 4096, 22016), (64, 4096, 11008),
        (128, 4096, 11008), (128, 4096, 4096), (256, 4096, 11008), (256, 4096, 22016)]
SMOKE_SHAPES = [(65, 512, 200), (130, 1024, 520), (5, 256, 264)]  # mask edges: M, N past a tile; one block a split


def main(out_dir, max_m=4096):
    from tunesearch.bench import REL_TOL, CheckInputs, Operands, graph_time, kernel_bytes
    from tunesearch.dispatch import Dispatcher, read_table
    from tunesearch.gpu import gpu_info, stream_read_floor
    from benchmarks.experiments.dqmma_rs import family_launch

    info = gpu_info(0)
    table = Dispatcher(read_table(ROOT / "tunesearch" / "tables" / "h200.json"), strict=True)
    rows = []
    for M, K, N in [key for key in KEYS if key[0] <= max_m]:
        variant = table.resolve(M, N, K, torch.device("cuda"))
        row = dict(M=M, K=K, N=N, variant=variant.id,
                   floor=stream_read_floor(kernel_bytes(1, N, K, 128), info.l2_bytes, info.sm_count, replays=20).us)
        ops = Operands(M, N, K, 128, info.l2_bytes)
        frag_ops = Operands(M, N, K, 128, info.l2_bytes, layout="frag32")
        inputs = CheckInputs(M, N, K, 128, "cuda")
        for form, launch in (("base", family_launch(variant)), ("frag32", frag32_launch(variant))):
            try:
                if form == "frag32":  # mask edges first (M and N past a tile, one block a split)
                    problem = gluon_checks.smoke(launch, SMOKE_SHAPES)
                    if problem:
                        raise AssertionError(problem)
                err = row[f"{form}_rel_error"] = gluon_checks.relative_error_of(launch, inputs)
                if not err < REL_TOL:
                    raise AssertionError(f"WRONG: relative error {err:.3g}")
                copies = ops.copies if form == "base" else frag_ops.copies  # repacked before the timing
                row[form] = graph_time([family_launch(variant)(*c) for c in copies], replays=20).us
            except Exception as e:
                row[form] = f"{type(e).__name__}: {str(e)[:200]}"
        rows.append(row)
        print(f"M={M} {K}x{N} {variant.id}: base {row['base']} frag32 {row['frag32']} floor {row['floor']:.2f}",
              flush=True)
        del ops, frag_ops, inputs
        with open(f"{out_dir}/frag32.json", "w") as f:
            json.dump(dict(gpu=info.to_dict(), rows=rows), f, indent=1)
    print(f"{'key':>17} {'variant':>36} {'base':>8} {'frag32':>8} {'ratio':>6} {'floor':>7}")
    for r in rows:
        ok = all(isinstance(r[f], float) for f in ("base", "frag32"))
        print(f"{'M=%d %dx%d' % (r['M'], r['K'], r['N']):>17} {r['variant']:>36} "
              + (f"{r['base']:8.2f} {r['frag32']:8.2f} {r['frag32'] / r['base']:6.3f}" if ok else "    fail") +
              f" {r['floor']:7.2f}")


if __name__ == "__main__":
    if sys.argv[1] == "--compile":
        print(json.dumps(schedule(sys.argv[2])))
    else:
        main(sys.argv[1], *map(int, sys.argv[2:3]))
