"""Trials as JSON lines: a store dumped to a file, and files loaded into a store.

A store is a working database (SQLite beside the sweep, or PostgreSQL shared by many machines); a dump is
what travels and what is kept: one trial a line, its GPU's row inside it, gzipped when the name ends in
``.gz``. Loading merges: a trial already in the store (same key, variant and kernel code) is kept as it
is, so loading the same file twice, or the dumps of several machines, is safe.

Lines written before dumps carried their GPU (the sweeps' logs in benchmarks/results/) name only the GPU;
their GPU's row is then ``gpu_fallback`` (the GPU this machine sees, when its name matches), and a line
with neither is refused, naming its GPU.
"""
from __future__ import annotations

import gzip
import json
from datetime import datetime, timezone
from pathlib import Path

from sqlalchemy import select

from .models import GPU, GPU_IDENTITY, TRIAL_KEY, Trial
from .store import GPU_INFO_FIELDS, Store, StoreError, gpu_row

GPU_FIELDS = (*GPU_INFO_FIELDS, "copy_bandwidth")
TRIAL_FIELDS = ("gpu_name", "m", "n", "k", "group_size", "layout", "variant_id", "family", "params",
                "code_version", "status", "error", "us", "spread", "gbps", "roofline_frac", "tflops",
                "rel_error", "fp16_us", "speedup_fp16", "versions", "created_at")


def _open(path: Path, mode: str):
    return gzip.open(path, mode + "t") if path.suffix == ".gz" else open(path, mode)


def dump_trials(store: Store, path: str | Path, gpu: str | None = None) -> int:
    """Write every trial of the store (of GPU ``gpu`` only, if given) to ``path``, oldest first; returns
    how many. Written to a temporary name, then renamed: never a half file."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp{path.suffix}")
    count = 0
    try:
        with store.session() as s, _open(tmp, "w") as f:
            gpus = {g.id: {name: getattr(g, name) for name in GPU_FIELDS} for g in s.scalars(select(GPU))}
            q = select(Trial).order_by(Trial.id)
            if gpu:
                q = q.filter_by(gpu_name=gpu)
            for t in s.scalars(q):
                row = {name: getattr(t, name) for name in TRIAL_FIELDS}
                row["created_at"] = t.created_at.isoformat() if t.created_at else None
                row["gpu"] = gpus[t.gpu_id]
                f.write(json.dumps(row) + "\n")
                count += 1
        tmp.replace(path)
    except BaseException:  # a failed dump leaves neither a half file nor its temporary one
        tmp.unlink(missing_ok=True)
        raise
    return count


def _gpu_key(fields: dict) -> tuple:
    return tuple(fields[name] for name in GPU_IDENTITY)


def _legacy_gpu(row: dict, fallback: dict | None) -> dict:
    """The GPU row of a line without one: the fallback's fields (same GPU name), in the line's software
    environment, its copy bandwidth the one the line's roofline fraction was taken against."""
    if fallback is None or fallback["name"] != row["gpu_name"]:
        raise StoreError(f"a trial of GPU {row['gpu_name']!r} names no GPU row (a line older than dumps "
                         "with GPUs): load it on a machine that has that GPU")
    versions = row["versions"] or {}
    fields = {name: fallback.get(name) for name in GPU_FIELDS}
    fields.update(driver=versions.get("driver", fallback["driver"]),
                  torch_version=versions.get("torch", fallback["torch_version"]),
                  triton_version=versions.get("triton", fallback["triton_version"]))
    if row.get("gbps") and row.get("roofline_frac"):
        fields["copy_bandwidth"] = row["gbps"] * 1e9 / row["roofline_frac"]
    return fields


def _aware(when: datetime) -> datetime:
    """SQLite hands back naive datetimes; the store writes UTC."""
    return when if when.tzinfo else when.replace(tzinfo=timezone.utc)


def _time(text: str | None) -> datetime | None:
    return _aware(datetime.fromisoformat(text)) if text else None


def _parse(text: str, where: str) -> dict:
    try:
        row = json.loads(text)
        missing = [name for name in TRIAL_FIELDS if name not in row and name != "created_at"]
    except (json.JSONDecodeError, TypeError) as exc:
        raise StoreError(f"{where}: not a trial line ({exc})") from None
    if missing:
        raise StoreError(f"{where}: not a trial line (missing {', '.join(missing)})")
    try:
        for name in ("params", "versions"):  # the sweeps' logs hold these as JSON text
            if isinstance(row[name], str):
                row[name] = json.loads(row[name])
        _time(row.get("created_at"))
    except (json.JSONDecodeError, TypeError, ValueError) as exc:
        raise StoreError(f"{where}: not a trial line ({exc})") from None
    return row


def load_trials(store: Store, paths, gpu_fallback: dict | None = None) -> tuple[int, int]:
    """Merge the trials of the files ``paths`` into the store; returns (added, already there). Each file
    is checked whole before any of it is written, and written in one transaction."""
    added = present = 0
    for path in map(Path, paths):
        try:
            with _open(path, "r") as f:
                rows = [_parse(line, f"{path}:{i}") for i, line in enumerate(f, 1) if line.strip()]
        except (OSError, EOFError, UnicodeDecodeError) as exc:  # missing, truncated, not text
            raise StoreError(f"{path}: cannot read it ({exc})") from None
        gpu_rows = {}
        newest = {}
        for row in rows:
            fields = row.get("gpu") or _legacy_gpu(row, gpu_fallback)
            key = _gpu_key(fields)
            # a log's lines carry the copy bandwidth of their own sweep: the newest measured one stands
            when = (fields.get("copy_bandwidth") is not None, row.get("created_at") or "")
            if key not in gpu_rows or when > newest[key]:
                gpu_rows[key], newest[key] = fields, when
            row["_gpu"] = key
        unknown = [key[0] for key, fields in gpu_rows.items() if fields.get("copy_bandwidth") is None]
        if unknown:
            raise StoreError(f"{path}: no copy bandwidth for GPU {unknown[0]!r} (no successful trial of it)")
        with store.session() as s:
            ids = {}
            for key, fields in gpu_rows.items():
                measured = _time(newest[key][1])
                found = s.scalars(gpu_row(fields)).first()
                if found is None:
                    found = GPU(**{name: fields.get(name) for name in GPU_FIELDS})
                    if measured:
                        found.measured_at = measured
                    s.add(found)
                    s.flush()
                elif measured and measured > _aware(found.measured_at):  # a newer measurement of that GPU
                    found.copy_bandwidth, found.measured_at = fields["copy_bandwidth"], measured
                ids[key] = found.id
            # the store's trial keys only (not whole rows): a shared store may hold many machines' trials
            seen = set(map(tuple, s.execute(select(*(getattr(Trial, name) for name in TRIAL_KEY)))))
            for row in rows:
                ident = tuple(row[name] for name in TRIAL_KEY)
                if ident in seen:
                    present += 1
                    continue
                seen.add(ident)
                fields = {name: row.get(name) for name in TRIAL_FIELDS}
                created = _time(fields.pop("created_at"))
                trial = Trial(**fields, gpu_id=ids[row["_gpu"]], sweep_id=None)
                if created:
                    trial.created_at = created
                s.add(trial)
                added += 1
            s.commit()
    return added, present
