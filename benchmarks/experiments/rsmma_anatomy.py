"""EXPERIMENT: what holds the rsmma family: under cuBLAS fp16 at M=96..256 (NOTES.md row 59) and over the
streaming floor at M<=32 (row 63).

    python benchmarks/experiments/rsmma_anatomy.py OUT_DIR [MAX_M [FORM,... [MIN_M]]]  (on an sm_90 GPU: time,
                                                  keys from MIN_M up to MAX_M, all forms or those named)
    python benchmarks/experiments/rsmma_anatomy.py --compile VARIANT_ID [LAYOUT] (offline: the MMA-only
                                                  schedule, on the base layout or LAYOUT)

Each key's table pick is timed as launched, then the same launch without a part:
- mma_only: the fragment builder swapped (rsmma_kernel's FRAGMENT) for one that reads no packed word and
  unpacks nothing, a constant fragment times the block's scale row;
- no_a: PARTS without A_COPY, the activations' TMA not issued (the wgmma reads a stale slot): what A's
  re-reads through L2 cost (row 62's hypothesis);
- ring: PARTS without MMA, the MMA warps only wait for each slot and free it: the TMA ring streaming the
  operands, with the split-K reduction of a zero tile;
- ring_no_a: the ring with the packed weights and scales alone;
- scaled_fragment: with SCALE_AFTER off, each block's fragment scaled before its wgmma (the family's form
  but where rsmma_launch.scale_after gives a launch the registers for the partials: row 64's A/B);
- one_split, ring_one_split: the variant with SPLIT_K=1 (no reduction at the end, half or a quarter the
  CTAs, each over all of K), whole and as the ring alone: what the splits' reduction and their extra CTAs
  are worth where the ring runs over the floor (row 64: 2.3-2.5 us with 2 or 4 splits, ~0 with one);
- stream_k, ring_stream_k: the variant with SPLIT_K=0, stream-K (row 65: CTAS an SM, each an equal run of
  all tiles' blocks), whole (checked like the full form) and as the ring alone;
- no_reduction, ring_no_reduction: the launch with MAX_PARTS=1, so that each split writes its own fp16
  partial into C (a wrong result by design) instead of the reduction's store, fence, counter and reads
  at the end of every CTA: what that tail costs (row 66), whole and as the ring alone;
- stream_k_no_reduction, ring_stream_k_no_reduction: stream-K with MAX_PARTS=1 (each tile segment stored
  as fp16 into C, wrong by design): what stream-K's partial tiles cost where it evens the waves but loses
  (row 75: M=256 4096x11008, stream-K 52.2 against the pick's 45.8 us);
- stream_k_no_a, ring_stream_k_no_a: stream-K without A's TMA copy, whole and as the ring alone: whether
  stream-K's ring runs slower than the split grid's for A's reads through L2 (row 77: its ring 44.6 against
  32.5 us at M=256 4096x11008, 41.0 with no reduction at all);
- stream_k_store_all, ring_stream_k_store_all (with stream_k_owner.patch applied, whose launch sets
  OWNER_LAST): stream-K whose every part stores its partial and counts, the last summing the slots (the
  family's reduction before the patch), against stream_k / ring_stream_k, where a tile's rank 0 adds the
  others' slots in registers when they are in (row 79: the reduction cost 36 us at M=1024 4096x11008);
- unstaged: a one-split launch with STAGED_C off, C's tile stored straight from the accumulator's layout
  (2 bytes a store) instead of through the drained ring in 16-byte rows (row 80);
- register_split (a split launch): the split reduction's slots read back into the accumulator's registers
  (dqmma.store_tile) instead of through the drained ring by async copies (STAGED_SPLIT, row 84);
- bm8, ring_bm8 (M <= 8): the variant with token tiles of 8, so that A's TMA box has fewer rows past M
  (row 66: the TMA zero-fills them slowly), whole (checked) and as the ring alone; bm8_after: bm8 with
  each block's partial scaled after its wgmma (4 FFMA a block instead of 32 HMUL2; checked), whatever
  rsmma_launch.scale_after gives its launch;
- owner, skew1, skew2, skew3, skew4, skew2_store_all (a split pick): the reduction with OWNER_FIRST (split 0
  reads the counter first and, where the others are all in, sums their partials with its own from
  registers), alone and with SKEW = 1..4 (each other split SKEW blocks shorter than an even share, split 0
  that much longer, so that they end first), and SKEW=2 without OWNER_FIRST (row 82), each checked;
beside the streaming-read floor of the packed weights and scales and cuBLAS fp16. Every form runs on the
layout the table keeps the shape's weights in (frag32 on every llama-7b shape since row 69; the base
layout before row 82). The full form is checked
against A @ dequantize(W) first; the others compute something else by design.
ANATOMY_PICKS="M,K,N=VARIANT_ID|VARIANT_ID;..." times those variants instead of the table's picks, at those keys too
(row 80: stream-K on 256x128 tiles where the table picks 64-column ones, or routes the key to cuBLAS);
with ANATOMY_PICKS_ONLY=1, at those keys only.
Reading: ring ~ full -> the skeleton's streaming (ring depth, TMA boxes, CTAs) is the limit; ring << full
and mma_only ~ full -> the wgmma chain; mma_only << full -> the unpack; no_a << full -> A's traffic.
"""
import json
import os
import sys
from pathlib import Path

import torch
from triton.experimental import gluon
from triton.experimental.gluon import language as gl

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # so that it runs as a script from anywhere

from benchmarks.experiments import gluon_checks  # noqa: E402
from benchmarks.experiments.dqmma_rs import compile_family_offline, family_launch  # noqa: E402

# (M, K, N): the small-M rows over the floor, then the rows under fp16 (row 59's keys)
KEYS = [(1, 11008, 4096), (1, 4096, 22016), (2, 4096, 11008), (4, 4096, 12288), (8, 11008, 4096),
        (16, 4096, 11008), (16, 4096, 22016), (16, 4096, 4096), (32, 4096, 11008), (32, 4096, 22016), (32, 11008, 4096), (64, 11008, 4096),
        (128, 4096, 11008), (256, 4096, 11008), (256, 4096, 22016), (256, 4096, 4096),
        (1024, 4096, 11008), (1024, 4096, 22016)]  # rsmma above M=256 (row 77): its waves


@gluon.jit
def mma_only_fragment(p_tile, s_tile, WORDS: gl.constexpr, FRAG: gl.constexpr, SCALED: gl.constexpr):
    """A constant fragment (times the block's scale row if SCALED): no packed word read, nothing unpacked."""
    BN: gl.constexpr = s_tile.type.shape[1]
    # the base layout's tile is [BK/8, BN]; frag32's [BN/64 x BK/32 chunks, 256] (rsmma.frag32_fragment)
    BK: gl.constexpr = p_tile.type.shape[0] * 8 if p_tile.type.shape[1] == BN else \
        p_tile.type.shape[0] // (BN // 64) * 32
    w = gl.full([BN, BK], 1.0, gl.float16, FRAG)
    if SCALED:
        w = w * gl.expand_dims(s_tile.reshape([BN]).load(gl.SliceLayout(1, FRAG)), 1)
    return w


def compile_mma_only(variant_id: str, layout: str = "base") -> dict:
    """The MMA-only form of ``variant_id`` compiled for sm_90 offline: its wgmma waits, registers, spills,
    the loop's shared loads and, apart, the epilogue's 16-byte read-back of C's staged tile (the split
    reduction's read-back of the partials left out)."""
    from benchmarks.sass_stats import before_split_readback, disassemble, resources, staged_epilogue_loads, wgmma_waits

    compiled = compile_family_offline(variant_id, layout=layout, FRAGMENT=mma_only_fragment)
    sass = disassemble(compiled)
    staged = staged_epilogue_loads(sass)
    loads = before_split_readback(sass)
    return dict(wgmma=sum(op.startswith("HGMMA") for _, op, _ in sass), waits=wgmma_waits(sass),
                shared_loads=sum(op.startswith("LDS") for _, op, _ in loads) - staged_epilogue_loads(loads),
                staged_loads=staged,
                **resources(compiled))


def main(out_dir, max_m=4096, only=None, min_m=1):
    from tunesearch.bench import REL_TOL, CheckInputs, Operands, graph_time, kernel_bytes, time_fp16
    from tunesearch.dispatch import Dispatcher, read_table
    from tunesearch.gpu import gpu_info, stream_read_floor
    from tunesearch.variants import Variant
    from tunesearch.variants.rsmma import A_COPY, MMA

    info = gpu_info(0)
    table = Dispatcher(read_table(ROOT / "tunesearch" / "tables" / "h200.json"), strict=True)
    picks = {tuple(map(int, key.split(","))): [Variant.from_id(v) for v in ids.split("|")] for key, ids in
             (item.split("=") for item in os.environ.get("ANATOMY_PICKS", "").split(";") if item)}
    rows = []
    named = set(picks) if os.environ.get("ANATOMY_PICKS_ONLY") else set(KEYS) | set(picks)
    keys = [(M, K, N) for M, K, N in sorted(named) if min_m <= M <= max_m]
    wanted = lambda form: only is None or form in only  # noqa: E731
    for M, K, N, variant in [(M, K, N, variant) for M, K, N in keys
                             for variant in picks.get((M, K, N)) or [table.resolve(M, N, K, torch.device("cuda"))]]:
        layout = table.layout_for(N, K, torch.device("cuda"))
        row = dict(M=M, K=K, N=N, layout=layout, variant=variant.id,
                   fp16=time_fp16(M, N, K, info.l2_bytes, replays=20).us,
                   floor=stream_read_floor(kernel_bytes(1, N, K, 128), info.l2_bytes, info.sm_count, replays=20).us)
        check = CheckInputs(M, N, K, 128, "cuda", layout=layout)
        err = gluon_checks.relative_error_of(family_launch(variant), check)
        row["rel_error"] = err
        ops = Operands(M, N, K, 128, info.l2_bytes, layout=layout)
        split = variant.params["SPLIT_K"]
        blocks = K // variant.params["BK"]
        skews = {f"skew{s}": dict(SKEW=s, OWNER_FIRST=True) for s in (1, 2, 3, 4)}
        skews |= {"owner": dict(OWNER_FIRST=True), "skew2_store_all": dict(SKEW=2)}
        skews = {name: meta for name, meta in skews.items()
                 if split > 1 and blocks // split - meta.get("SKEW", 0) >= 1}
        for name, meta in skews.items():
            row[f"{name}_rel_error"] = gluon_checks.relative_error_of(family_launch(variant, **meta), check) \
                if wanted(name) else None
        one_split = Variant(variant.family, {**variant.params, "SPLIT_K": 1})
        stream_k = Variant(variant.family, {**variant.params, "SPLIT_K": 0})
        bm8 = Variant(variant.family, {**variant.params, "BM": 8}) if M <= 8 else None
        row["bm8_rel_error"] = gluon_checks.relative_error_of(family_launch(bm8), check) \
            if bm8 and wanted("bm8") else None
        row["stream_k_rel_error"] = gluon_checks.relative_error_of(family_launch(stream_k), check) \
            if wanted("stream_k") else None
        row["bm8_after_rel_error"] = gluon_checks.relative_error_of(family_launch(bm8, SCALE_AFTER=True),
                                                                    check) if bm8 and wanted("bm8_after") else None
        forms = (("full", variant, {}), ("mma_only", variant, {"FRAGMENT": mma_only_fragment}),
                 ("no_a", variant, {"PARTS": MMA.value}), ("ring", variant, {"PARTS": A_COPY.value}),
                 ("ring_no_a", variant, {"PARTS": 0}), ("scaled_fragment", variant, {"SCALE_AFTER": False}),
                 ("one_split", one_split, {}), ("ring_one_split", one_split, {"PARTS": A_COPY.value}),
                 ("stream_k", stream_k, {}), ("ring_stream_k", stream_k, {"PARTS": A_COPY.value}),
                 ("stream_k_no_a", stream_k, {"PARTS": MMA.value}), ("ring_stream_k_no_a", stream_k, {"PARTS": 0}),
                 ("stream_k_store_all", stream_k, {"OWNER_LAST": False}),
                 ("ring_stream_k_store_all", stream_k, {"PARTS": A_COPY.value, "OWNER_LAST": False}),
                 ("no_reduction", variant, {"MAX_PARTS": 1}),
                 ("ring_no_reduction", variant, {"PARTS": A_COPY.value, "MAX_PARTS": 1}),
                 ("stream_k_no_reduction", stream_k, {"MAX_PARTS": 1}),
                 ("ring_stream_k_no_reduction", stream_k, {"PARTS": A_COPY.value, "MAX_PARTS": 1}),
                 ("unstaged", variant, {"STAGED_C": False}),
                 ("register_split", variant if split > 1 else None, {"STAGED_SPLIT": False}),
                 ("bm8", bm8, {}), ("ring_bm8", bm8, {"PARTS": A_COPY.value}),
                 ("bm8_after", bm8, {"SCALE_AFTER": True}))
        forms += tuple((name, variant if name in skews else None, skews.get(name, {}))
                       for name in ("owner", "skew1", "skew2", "skew3", "skew4", "skew2_store_all"))
        forms = tuple(form for form in forms if only is None or form[0] in only)
        for form, launched, overrides in forms:
            try:
                if launched is None:  # a form that does not apply at this M
                    row[form] = None
                    continue
                checked = {"full": err, "stream_k": row["stream_k_rel_error"], "bm8": row["bm8_rel_error"],
                           "bm8_after": row["bm8_after_rel_error"]} | {name: row[f"{name}_rel_error"] for name in skews}
                if form in checked and not checked[form] < REL_TOL:
                    raise AssertionError(f"WRONG: relative error {checked[form]:.3g}")
                launch = family_launch(launched, **overrides)
                row[form] = graph_time([launch(*c) for c in ops.copies], replays=20).us
            except Exception as e:
                row[form] = f"{type(e).__name__}: {str(e)[:200]}"
        flops = 2 * M * N * K
        row["tflops_full"] = flops / row["full"] / 1e6 if isinstance(row["full"], float) else None
        row["tflops_fp16"] = flops / row["fp16"] / 1e6
        rows.append(row)
        print(f"M={M} {K}x{N} {variant.id}: " + " ".join(f"{name} {row[name]}" for name, _, _ in forms)
              + f" floor {row['floor']:.2f} fp16 {row['fp16']:.2f}", flush=True)
        del ops
        with open(f"{out_dir}/rsmma_anatomy.json", "w") as f:
            json.dump(dict(gpu=info.to_dict(), rows=rows), f, indent=1)
    names = [name for name, _, _ in forms] + ["floor", "fp16"]
    print(f"{'key':>17} {'variant':>36} " + " ".join(f"{n:>9}" for n in names) + f" {'TF full':>7} {'TF fp16':>7}")
    for r in rows:
        f = lambda x: f"{x:9.2f}" if isinstance(x, float) else "        -" if x is None else "     fail"  # noqa: E731
        print(f"{'M=%d %dx%d' % (r['M'], r['K'], r['N']):>17} {r['variant']:>36} " + " ".join(f(r[n]) for n in names)
              + f" {r['tflops_full'] or 0:7.0f} {r['tflops_fp16']:7.0f}")


if __name__ == "__main__":
    if sys.argv[1] == "--compile":
        print(json.dumps(compile_mma_only(*sys.argv[2:4])))
    else:
        main(sys.argv[1], *map(int, sys.argv[2:3]), *(set(forms.split(",")) for forms in sys.argv[3:4]),
             *map(int, sys.argv[4:5]))
