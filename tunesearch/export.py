"""Export the store's best variant per (GPU, N, K, G, M bucket) as a dispatch table."""
from __future__ import annotations

import json
import math
import os
import tempfile
from datetime import datetime, timezone
from pathlib import Path

from tunesearch.db import Key, Store

from .shapes import bucket_edge, edge_keys

SCHEMA = "tunesearch.dispatch/2"  # /2: each shape names the layout its weights are kept in
READABLE_SCHEMAS = ("tunesearch.dispatch/1", SCHEMA)  # /1 tables hold base-layout shapes only


def current_code(family: str, layout: str = "base") -> str:
    """The kernel code of ``family`` reading ``layout`` in this tree (what a trial must have been timed
    with to count as a measurement of the kernels this tunesearch would launch)."""
    from .search import code_version, family_code

    return family_code(family, code_version(), layout)


def stale_buckets(table: dict) -> list[str]:
    """'GPU KxN M=m variant (code)' for each bucket timed with other kernel code than this tree's."""
    return [f"{name} {shape} M={b['m_max']} {b['variant']['id']} ({b.get('code')})"
            for name, entry in table["gpus"].items() for shape, v in entry["shapes"].items()
            for b in v["buckets"] if b.get("code") != current_code(b["variant"]["family"], v.get("layout", "base"))]


def unweighed_buckets(table: dict) -> list[str]:
    """'GPU KxN M=lo..hi: ...' for each bucket whose smallest M the table times (an edge key, a bucket of
    its own) but whose pick was not weighed there: no variant of the pick's family was timed at both M
    (``edge_aware_picks`` weighs an edge only where it holds the bucket's fastest family), so the
    bucket is picked at its largest M alone and the runtime cannot weigh a split inside it
    (``_ShapeTable.whole_us``): 4096^2 bucket 1280's dequantize route, untimed at 1025, ran M=1100 whole
    at 63.4 us where two launches took 57.5 (NOTES.md row 106)."""
    out = []
    for name, entry in table["gpus"].items():
        for shape, v in entry["shapes"].items():
            ms = [b["m_max"] for b in v["buckets"]]
            for i, b in enumerate(v["buckets"]):
                edge = bucket_edge(ms, i)
                if edge is not None and "edge" not in b:
                    family = b["variant"]["family"]
                    # --more, not --trials: the edge key may hold enough trials already, of other variants;
                    # its search then times the bucket's fastest first (search.key_seeds)
                    out.append(f"{name} {shape} M={edge}..{b['m_max']}: no {family} variant timed at both M, "
                               f"so the bucket is picked at M={b['m_max']} alone (sweep --shapes {shape} "
                               f"--m {edge} --families {family} --more 4)")
    return out


def uncompared_layouts(table: dict) -> list[str]:
    """'GPU KxN: LAYOUT lacks M=...' for each layout a shape was timed in but not at every M bucket its kept
    layout has (``choose_layout`` compares only layouts timed at all of them): a sweep whose budget ran out,
    or a kernel change that left a layout's buckets without a current trial, silently keeps the shape's
    weights in another layout, which may be much slower (NOTES.md row 83: 4096x22016 would have gone to
    base, 1.4-2.4x slower at every M)."""
    out = []
    for name, entry in table["gpus"].items():
        for shape, v in entry["shapes"].items():
            kept = {b["m_max"] for b in v["buckets"]}
            kept -= edge_keys(kept)
            for layout, by_m in v.get("other_layouts", {}).items():
                missing = sorted(kept - {int(m) for m in by_m})
                if missing:
                    out.append(f"{name} {shape}: {layout} lacks M={','.join(map(str, missing))}, so the "
                               f"shape keeps {v.get('layout', 'base')} without comparing it")
    return out


def choose_layout(times: dict[str, dict[int, float]]) -> str:
    """The layout a shape's weights are kept in, from its best time per M bucket in each layout (one copy
    of the weights serves every M): of the layouts timed at every M bucket any layout was, the one whose
    times have the lowest geometric mean over them, so that each M counts the same (a microsecond at M=1
    weighs as much as 10% at M=4096); base where none covers them all."""
    every_m = set().union(*(set(by_m) for by_m in times.values()))
    covering = [layout for layout, by_m in times.items() if set(by_m) == every_m]
    if not covering:
        return "base" if "base" in times else max(times, key=lambda layout: len(times[layout]))
    return min(covering, key=lambda layout: (sum(math.log(times[layout][m]) for m in every_m), layout != "base"))


def _fastest_by_variant(store: Store, key, code_of) -> dict:
    """variant id -> the key's fastest ok trial of it (of its family's current code, with ``code_of``)."""
    out = {}
    for t in store.trials(key, status="ok"):
        if code_of is not None and t.code_version != code_of(t.family, t.layout):
            continue
        if t.variant_id not in out or t.us < out[t.variant_id].us:
            out[t.variant_id] = t
    return out


# The runtime runs M as two or three launches, full buckets below M and the rest (dispatch._ShapeTable.
# launches), only where the table predicts each launch more this much faster than the plan without it:
# its ramp and the prediction's error come off it (measured / predicted 0.966-1.016 at 47 split rows,
# NOTES.md row 95)
SPLIT_GAIN = 0.98


def two_launches_win(two_us: float, whole_us: float) -> bool:
    """Whether launches taking ``two_us`` in all beat, by ``SPLIT_GAIN``, one launch fewer: M's own pick
    taken to cost ``whole_us`` there (``dispatch._ShapeTable.whole_us``), or a plan of one launch less."""
    return two_us < SPLIT_GAIN * whole_us


def edge_aware_picks(store: Store, best: list, code_of=None) -> tuple[list, dict]:
    """``best`` (the fastest trial per key) with each bucket whose smallest M the store also times
    (``bucket_edge``) picked for the whole bucket: of the variants timed at both M, the one whose worse
    slowdown against the fastest at either is least (ties: the faster at the bucket's M). A bucket's pick
    serves every M down to the bucket below; timed at the largest only, it can be the fastest there and
    far slower at the smallest, where its token tile's rows past M cost time (NOTES.md row 85: M=64's pick
    on 4096x11008 took 17.3 us at M=64, 28.1 at 33). Where the runtime would run the smallest M as two
    launches instead (the bucket below's pick and the first bucket's: ``two_launches_win``), that sum is the
    time there to weigh. Returns the trials and, per key given a choice, (edge M, the pick's time there)."""
    by_shape: dict[tuple, dict[int, object]] = {}
    for t in best:
        by_shape.setdefault((t.gpu_name, t.n, t.k, t.group_size, t.layout), {})[t.m] = t
    edges = {}
    for (gpu, n, k, group_size, layout), by_m in by_shape.items():
        ms = sorted(by_m)
        for i, m in enumerate(ms):  # ascending: the bucket below and the first are picked before
            edge = bucket_edge(ms, i)
            if edge is None:
                continue
            at_m = _fastest_by_variant(store, Key(gpu, m, n, k, group_size, layout), code_of)
            at_edge = _fastest_by_variant(store, Key(gpu, edge, n, k, group_size, layout), code_of)
            both = [vid for vid in at_m if vid in at_edge]
            # an edge timed with none of the bucket's fastest family says nothing about that family's tiles
            # there: its variants (another family's, whose code did not change when this one's did) would
            # win the bucket by default (4096^2 bucket 1792 after the _s53 re-sweep: the dequantize route
            # at 98.9 us over rsmma's 87.4, 1537 holding the route's trials alone)
            if by_m[m].family not in {at_m[vid].family for vid in both}:
                continue
            below = by_m.get(edge - 1)
            split = below.us + by_m[ms[0]].us if below is not None else None

            def at_smallest(edge_us, m_us):  # M just past the bucket below, with a pick taking these at both
                # the lesser of the two: a token tile costs a step function of M, and below the tile's own
                # rows the smallest M can be the slower
                return split if split is not None and two_launches_win(split, min(edge_us, m_us)) else edge_us

            fastest_m = by_m[m].us
            fastest_edge = at_smallest(by_m[edge].us, by_m[edge].us)
            pick = min(both, key=lambda vid: (max(at_m[vid].us / fastest_m,
                                                  at_smallest(at_edge[vid].us, at_m[vid].us) / fastest_edge),
                                              at_m[vid].us, vid))
            by_m[m] = at_m[pick]
            edges[(gpu, n, k, group_size, layout, m)] = (edge, at_edge[pick].us)
    return [t for by_m in by_shape.values() for t in by_m.values()], edges


def build_table(store: Store, gpu: str | None = None, current_code_only: bool = False) -> dict:
    code_of = current_code if current_code_only else None
    best, edges = edge_aware_picks(store, store.best_trials(gpu, code_of=code_of), code_of)
    best.sort(key=lambda t: (t.gpu_name, t.n, t.k, t.group_size, t.layout, t.m))
    per_shape: dict[tuple, dict[str, dict[int, float]]] = {}
    for t in best:
        per_shape.setdefault((t.gpu_name, t.n, t.k, t.group_size), {}).setdefault(t.layout, {})[t.m] = t.us
    for times in per_shape.values():  # the layout choice weighs the buckets, not the keys at their edges
        for layout, by_m in times.items():
            at_edges = edge_keys(by_m)
            times[layout] = {m: us for m, us in by_m.items() if m not in at_edges}
    kept = {shape: choose_layout(times) for shape, times in per_shape.items()}
    gpus: dict[str, dict] = {}
    known = {g.name: g for g in store.gpus()}  # newest environment per name wins (ordered)
    for t in best:
        if t.layout != kept[(t.gpu_name, t.n, t.k, t.group_size)]:
            continue
        g = known.get(t.gpu_name)
        entry = gpus.setdefault(t.gpu_name, {
            "name": t.gpu_name,
            "capability": g.capability if g else None,
            "copy_bandwidth": g.copy_bandwidth if g else None,
            "datasheet_bandwidth": g.datasheet_bandwidth if g else None,
            "sm_count": g.sm_count if g else None,
            "versions": {**{k: t.versions.get(k) for k in ("driver", "torch", "triton", "tunesearch", "code")},
                         **{k: v for k, v in t.versions.items() if k.startswith("code_")}},
            "shapes": {},
        })
        shape = entry["shapes"].setdefault(f"{t.k}x{t.n}", {
            "n": t.n, "k": t.k, "group_size": t.group_size, "layout": t.layout, "buckets": []})
        shape["buckets"].append({
            "m_max": t.m, "variant": {"family": t.family, "params": t.params, "id": t.variant_id},
            "code": t.code_version,  # the kernel code this bucket's time was measured with
            "us": round(t.us, 3), "roofline_frac": round(t.roofline_frac or 0, 4),
            "speedup_fp16": round(t.speedup_fp16, 3) if t.speedup_fp16 else None,
        })
        edge = edges.get((t.gpu_name, t.n, t.k, t.group_size, t.layout, t.m))
        if edge is not None:  # picked for the whole bucket: its time at the bucket's smallest M
            shape["buckets"][-1]["edge"] = {"m": edge[0], "us": round(edge[1], 3)}
    for (name, n, k, group_size), times in per_shape.items():
        others = {layout: by_m for layout, by_m in times.items() if layout != kept[(name, n, k, group_size)]}
        if name in gpus and others:  # what the choice was made against, per M bucket
            gpus[name]["shapes"][f"{k}x{n}"]["other_layouts"] = {
                layout: {str(m): round(us, 3) for m, us in sorted(by_m.items())} for layout, by_m in others.items()}
    for entry in gpus.values():
        for shape in entry["shapes"].values():
            shape["buckets"].sort(key=lambda b: b["m_max"])
    return {"schema": SCHEMA, "created": datetime.now(timezone.utc).isoformat(timespec="seconds"), "gpus": gpus}


def merge_tables(old: dict, new: dict) -> dict:
    merged = json.loads(json.dumps(old))
    for name, entry in new["gpus"].items():
        target = merged["gpus"].setdefault(name, entry)
        if target is entry:
            continue
        target.update({k: v for k, v in entry.items() if k != "shapes"})
        target["shapes"].update(entry["shapes"])
    merged["created"] = new["created"]
    merged["schema"] = SCHEMA  # a /1 table's shapes are base-layout ones, which /2 describes too
    return merged


def write_atomic(path: str | os.PathLike, data: dict) -> None:
    """Write to a temporary file beside ``path``, then rename: never a half file."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent or ".", prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, indent=1, sort_keys=False)
            f.write("\n")
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def for_gpu(store: Store, gpu: str | None) -> str:
    """`` for GPU 'X'`` and the GPUs the store holds trials of (a typo, or another machine's name), or ''."""
    if not gpu:
        return ""
    names = sorted({t.gpu_name for t in store.best_trials()})
    return f" for GPU {gpu!r}" + (f" (it holds {', '.join(map(repr, names))})" if names else "")


def export(store: Store, path, gpu: str | None = None, merge: bool = False,
           current_code_only: bool = False, progress=None) -> dict:
    """Write the store's table to ``path`` with its side-by-side plans (``overlap.add_side_by_side_plans``,
    told ``progress``)."""
    from .overlap import add_side_by_side_plans  # it reads the dispatch, which reads this module

    table = build_table(store, gpu, current_code_only)
    if not table["gpus"]:
        raise ValueError(f"the store {store.url} has no successful trials" + for_gpu(store, gpu))
    add_side_by_side_plans(table, progress)
    if merge and Path(path).exists():
        from .dispatch import read_table

        table = merge_tables(read_table(path), table)
    write_atomic(path, table)
    return table
