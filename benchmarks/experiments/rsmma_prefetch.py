"""EXPERIMENT: the owner's loader warp fetches the other splits' partials while its MMA warps finish (M <= 32).

    python benchmarks/experiments/rsmma_prefetch.py OUT_DIR [TABLE]       (sm_90 GPU: check, then time)
    python benchmarks/experiments/rsmma_prefetch.py --smoke VARIANT_ID    (sm_90 GPU: the mask edges)
    python benchmarks/experiments/rsmma_prefetch.py --smoke-many ID,ID,...  (each smoke in a child process)
    python benchmarks/experiments/rsmma_prefetch.py --compile VARIANT_ID  (offline: shared bytes, registers)
    python benchmarks/experiments/rsmma_prefetch.py --compile-family VARIANT_ID  (the same of rsmma_kernel)
    python benchmarks/experiments/rsmma_prefetch.py --compile-ring VARIANT_ID    (the same, partials in the ring)
    python benchmarks/experiments/rsmma_prefetch.py --compile-variant VARIANT_ID (an rsmma or rsmmapf variant as
                                                                               its family launches it)

Where a pick splits K (M <= 32 on every llama-7b shape but 4096x22016), the split's tail is what keeps M=1
over the floor (NOTES.md rows 66, 82: 1.3-1.7 us with no reduction at all). With SKEW the other splits
end first and the owner (split 0) sums their partials itself when its loop ends (OWNER_FIRST): one L2
round trip to read the counter, then one to bring the partials in, both after its last wgmma, so on the
critical path. The owner's loader warp is idle from its last TMA on (STAGES blocks before the end). Here
it spends that time: it polls the tile's counter (acquire loads, at most POLLS), and once every other
split is in it copies their slots into shared memory of its own (async copies), then tells the MMA warps
through an mbarrier and a flag word. The MMA warps, their loop done, wait on that barrier (normally
already passed), add the slots in rank order to their own partial (the family's order: the same bits)
and store C through the drained ring; the counter is re-armed. If the loader gave up (the others not in
after POLLS loads: a grid of more than one wave could otherwise wait on CTAs not yet resident), the
owner takes the family's path. The other splits are unchanged. Untried before: row 67's flagged tail
spun in the MMA warps after the loop, OWNER_FIRST reads the counter after it.

Forms per key (the table's split picks at M = 1, 2, 4, 8, 16, 32, PREFETCH_MS to change), each checked
against A @ dequantize(W) first, then timed best of three graph timings with rotation: ``family`` (the pick
as the family launches it), ``prefetch`` (this kernel, the pick's parameters, the partials in a buffer of
their own: 2-32 KB of shared memory more, which costs a CTA an SM at some picks), ``ring`` (the same with
the partials in the A stages of the ring that the MMA warps free last: 144 bytes more; PREFETCH_KINDS
names which of the two), and for each SKEW in PREFETCH_SKEWS (default 2,4) that differs from the pick's,
``family_skewS`` and each kind's ``_skewS``.
PREFETCH_ORDER=reverse times them in the opposite order (the pick last).
Each process compiles its own kernels; a hang (a barrier waited on with the wrong phase) is caught by the
smoke runs in child processes first.
"""
import json
import os
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # so that it runs as a script from anywhere

from tunesearch.variants import rsmma  # noqa: E402
# the kernel is the rsmmapf family's since _s76 (variants/rsmmapf.py); this times it against rsmma's forms
from tunesearch.variants.rsmmapf import POLLS, rsmmapf_kernel as rsmma_prefetch_kernel  # noqa: E402

def launch_args(variant, prefetch: bool, polls: int = POLLS, in_ring: bool = False):
    """(a, packed, scales, out) -> (kernel, grid, args, meta, cluster) of ``variant``'s launch on frag32
    weights, the family's arguments, with this kernel (its loader giving up after ``polls`` loads of the
    counter, the partials in the ring's A stages if ``in_ring``) where ``prefetch``."""
    from tunesearch.variants.api import _rsmma_call

    def make(a, packed, scales, out):
        kernel, grid, args, meta = _rsmma_call(variant.params, a, packed, scales, out, 128)
        if prefetch:
            kernel = rsmma_prefetch_kernel
            meta = dict(meta, POLLS_=polls, IN_RING=in_ring)
        return kernel, grid, args, meta, variant.params.get("CLUSTER", 1)
    return make


def kernel_launch(variant, prefetch: bool, polls: int = POLLS, in_ring: bool = False):
    """gluon_checks' launch form: (a, packed, scales, out) -> a no-argument launch returning out."""
    from tunesearch.variants.api import launch_kernel

    make = launch_args(variant, prefetch, polls, in_ring)

    def launch(a, packed, scales, out):
        kernel, grid, args, meta, cluster = make(a, packed, scales, out)

        def run():
            launch_kernel(kernel, grid, args, meta, cluster)
            return out
        return run
    return launch


def with_skew(variant, skew: int):
    """``variant`` with its splits skewed by ``skew`` blocks (rsmma's SKEW)."""
    from tunesearch.variants import Variant

    return Variant(variant.family, {**variant.params, "SKEW": skew})


SMOKE_SHAPES = [(1, 1024, 64), (3, 1024, 200), (8, 2048, 128), (13, 1024, 136), (16, 4096, 256), (31, 1024, 72)]


def smoke(variant_id: str) -> str | None:
    """The prefetch launch of ``variant_id`` at mask edges (and 4096x4096), on frag32 weights: the shapes the
    variant can run (``space.variant_error``)."""
    from benchmarks.experiments import gluon_checks
    from tunesearch.variants import Variant
    from tunesearch.variants.space import variant_error

    variant = Variant.from_id(variant_id)
    shapes = [(m, k, n) for m, k, n in SMOKE_SHAPES + [(1, 4096, 4096), (5, 4096, 4096)]
              if variant_error(variant, m, n, k, device=torch.device("cuda"), layout="frag32") is None]
    if not shapes:
        return "no shape to smoke"
    # POLLS_=1: the loader mostly gives up before the others are in, so the family's path runs after it
    return (gluon_checks.frag32_smoke(kernel_launch(variant, True), shapes)
            or gluon_checks.frag32_smoke(kernel_launch(variant, True, 1), shapes)
            or gluon_checks.frag32_smoke(kernel_launch(variant, True, in_ring=True), shapes)
            or gluon_checks.frag32_smoke(kernel_launch(variant, True, 1, in_ring=True), shapes))


def smoke_many(variant_ids) -> dict:
    """``smoke`` of each id in a child process of its own (a hang costs that id, not the call)."""
    from benchmarks.experiments import gluon_checks

    return gluon_checks.smoke_all(__file__, ["id"], [dict(id=v) for v in variant_ids], lambda c: c["id"])


def compile_offline(variant_id: str, family: bool = False, in_ring: bool = False) -> dict:
    """The prefetch kernel for ``variant_id`` (rsmma_kernel itself if ``family``; the partials in the ring if
    ``in_ring``) at M=1 on 4096x4096, compiled for sm_90 without a GPU: shared bytes, the wgmma waits,
    registers, spills."""
    from tunesearch.variants import Variant

    variant = Variant.from_id(variant_id)

    def args_of(a, packed, scales, out):
        _, grid, args, meta, _ = launch_args(variant, not family, in_ring=in_ring)(a, packed, scales, out)
        return grid, args, meta
    return _offline_stats(rsmma.rsmma_kernel if family else rsmma_prefetch_kernel, args_of)


def compile_variant_offline(variant_id: str) -> dict:
    """An rsmma or rsmmapf variant as its family launches it (``api._kernel_call``) at M=1 on 4096x4096,
    compiled for sm_90 without a GPU: as ``compile_offline``."""
    from benchmarks.experiments import gluon_checks
    from tunesearch.variants import Variant
    from tunesearch.variants.api import _kernel_call

    variant = Variant.from_id(variant_id)

    def args_of(a, packed, scales, out):
        _, grid, args, meta = _kernel_call(variant, a, packed, scales, out, 128)
        return grid, args, meta
    return _offline_stats(_kernel_call(variant, *gluon_checks.frag32_operands(1, 4096, 4096), 128)[0], args_of)


def _offline_stats(kernel, args_of) -> dict:
    """``kernel`` launched as ``args_of`` (a, packed, scales, out) -> (grid, args, meta) gives, at M=1 on
    4096x4096, compiled for sm_90 without a GPU: shared bytes, the wgmma waits, registers, spills."""
    from benchmarks.experiments import gluon_checks
    from benchmarks.sass_stats import disassemble, resources, wgmma_waits

    compiled = gluon_checks.compile_frag32_offline(kernel, args_of, 1, 4096, 4096)
    return dict(shared=compiled.metadata.shared, waits=wgmma_waits(disassemble(compiled)), **resources(compiled))


def main(out_dir: str, table_path: str):
    from benchmarks.experiments import gluon_checks
    from tunesearch.bench import CheckInputs, Operands, best_of, kernel_bytes
    from tunesearch.dispatch import Dispatcher, read_table
    from tunesearch.gpu import gpu_info, stream_read_floor
    from tunesearch.shapes import parse_shapes

    info = gpu_info(0)
    table = Dispatcher(read_table(table_path), strict=True)
    ms = [int(m) for m in os.environ.get("PREFETCH_MS", "1,2,4,8,16,32").split(",")]
    skews = [int(s) for s in os.environ.get("PREFETCH_SKEWS", "2,4").split(",") if s]
    rows = []
    cuda = torch.device("cuda")
    with best_of(3):
        for K, N in parse_shapes("llama-7b"):
            floor = None
            for M in ms:
                pick = table.resolve(M, N, K, cuda)
                if pick is None or pick.family != "rsmma" or pick.params["SPLIT_K"] < 2:
                    continue
                if floor is None:
                    floor = stream_read_floor(kernel_bytes(1, N, K, 128), info.l2_bytes, info.sm_count).us
                inputs = CheckInputs(M, N, K, 128, "cuda", layout="frag32")
                copies = Operands(M, N, K, 128, info.l2_bytes, layout="frag32").copies
                row = dict(M=M, K=K, N=N, variant=pick.id, floor=floor)
                kinds = [k for k in os.environ.get("PREFETCH_KINDS", "prefetch,ring").split(",") if k]
                forms = [("family", pick)] + [(k, pick) for k in kinds]
                for s in skews:
                    blocks_ok = (K // pick.params["BK"]) // pick.params["SPLIT_K"] - s >= 1
                    if s != pick.params["SKEW"] and blocks_ok:
                        forms += [(f"{k}_skew{s}", with_skew(pick, s)) for k in ["family"] + kinds]
                if os.environ.get("PREFETCH_ORDER") == "reverse":  # prefetch forms first, the pick last
                    forms = forms[::-1]
                for form, variant in forms:
                    launch = kernel_launch(variant, not form.startswith("family"), in_ring=form.startswith("ring"))
                    gluon_checks.time_form(row, form, launch, inputs, copies)
                rows.append(row)
                print(json.dumps(row), flush=True)
                del inputs, copies
                torch.cuda.empty_cache()
    Path(out_dir, "rsmma_prefetch.json").write_text(json.dumps(dict(gpu=info.to_dict(), rows=rows), indent=1))
    summary(rows)


def summary(rows):
    """Per key: the pick as the family launches it, the fastest family form, and each prefetch kind's fastest
    form over it (us; ratios to the fastest family form)."""
    def best(r, kind):  # the kind's forms: the pick's parameters, and each _skewS
        forms = {k: v for k, v in r.items() if (k == kind or k.startswith(kind + "_skew"))
                 and not k.endswith("rel_error") and isinstance(v, float)}
        return min(forms.items(), key=lambda kv: kv[1]) if forms else None

    kinds = [k for k in ("prefetch", "ring") if any(best(r, k) for r in rows)]
    print(f"{'key':>17} {'pick':>44} {'pick us':>7} {'best family':>20}"
          + "".join(f" {'best ' + k:>21} {k + '/fam':>12}" for k in kinds) + f" {'x floor':>7}")
    for r in rows:
        fam = best(r, "family")
        if fam is None or not isinstance(r.get("family"), float):
            continue
        key = "M=%d %dx%d" % (r["M"], r["K"], r["N"])
        line = f"{key:>17} {r['variant']:>44} {r['family']:7.2f} {fam[0]:>13} {fam[1]:6.2f}"
        fastest = fam[1]
        for k in kinds:
            b = best(r, k)
            line += f" {b[0]:>14} {b[1]:6.2f} {b[1] / fam[1]:12.3f}" if b else f" {'-':>21} {'-':>12}"
            fastest = min(fastest, b[1]) if b else fastest
        print(line + f" {fastest / r['floor']:7.3f}")


if __name__ == "__main__":
    if sys.argv[1] == "--smoke":
        problem = smoke(sys.argv[2])
        print(problem or "ok")
        sys.exit(1 if problem else 0)
    elif sys.argv[1] == "--smoke-many":
        sys.exit(1 if smoke_many(sys.argv[2].split(",")) else 0)
    elif sys.argv[1] == "--compile-variant":
        print(json.dumps(compile_variant_offline(sys.argv[2])))
    elif sys.argv[1] in ("--compile", "--compile-family", "--compile-ring"):
        print(json.dumps(compile_offline(sys.argv[2], family=sys.argv[1] == "--compile-family",
                                         in_ring=sys.argv[1] == "--compile-ring")))
    else:
        main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else str(ROOT / "tunesearch" / "tables" / "h100.json"))
