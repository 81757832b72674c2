"""Export the store's best variant per (GPU, N, K, G, M bucket) as a dispatch table."""
from __future__ import annotations

import json
import os
import tempfile
from datetime import datetime, timezone
from pathlib import Path

from tunesearch.db import Store

SCHEMA = "tunesearch.dispatch/1"


def current_code(family: str) -> str:
    """The kernel code of ``family`` in this tree (what a trial must have been timed with to count
    as a measurement of the kernels this tunesearch would launch)."""
    from .search import code_version, family_code

    return family_code(family, code_version())


def stale_buckets(table: dict) -> list[str]:
    """'GPU KxN M=m variant (code)' for each bucket timed with other kernel code than this tree's."""
    return [f"{name} {shape} M={b['m_max']} {b['variant']['id']} ({b.get('code')})"
            for name, entry in table["gpus"].items() for shape, v in entry["shapes"].items()
            for b in v["buckets"] if b.get("code") != current_code(b["variant"]["family"])]


def build_table(store: Store, gpu: str | None = None, current_code_only: bool = False) -> dict:
    gpus: dict[str, dict] = {}
    known = {g.name: g for g in store.gpus()}  # newest environment per name wins (ordered)
    for t in store.best_trials(gpu, code_of=current_code if current_code_only else None):
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
    for entry in gpus.values():
        for shape in entry["shapes"].values():
            shape["buckets"].sort(key=lambda b: b["m_max"])
    return {"schema": SCHEMA, "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "layout": "base", "gpus": gpus}


def merge_tables(old: dict, new: dict) -> dict:
    merged = json.loads(json.dumps(old))
    for name, entry in new["gpus"].items():
        target = merged["gpus"].setdefault(name, entry)
        if target is entry:
            continue
        target.update({k: v for k, v in entry.items() if k != "shapes"})
        target["shapes"].update(entry["shapes"])
    merged["created"] = new["created"]
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


def export(store: Store, path, gpu: str | None = None, merge: bool = False,
           current_code_only: bool = False) -> dict:
    table = build_table(store, gpu, current_code_only)
    if not table["gpus"]:
        raise ValueError(f"the store {store.url} has no successful trials"
                         + (f" for GPU {gpu!r}" if gpu else ""))
    if merge and Path(path).exists():
        from .dispatch import read_table

        table = merge_tables(read_table(path), table)
    write_atomic(path, table)
    return table
