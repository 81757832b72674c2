"""The store: every GPU, sweep and trial, in any SQLAlchemy database (SQLite by default).

SQLite runs in WAL mode with a busy timeout, so several worker processes can write at once;
every trial is committed as it finishes, so a crash loses at most the trial in flight.
"""
from __future__ import annotations

import os
import socket
import time
from contextlib import contextmanager
from dataclasses import dataclass

from sqlalchemy import create_engine, event, inspect, make_url, select, text
from sqlalchemy.exc import ArgumentError, IntegrityError, OperationalError
from sqlalchemy.orm import Session, sessionmaker

from .models import GPU, GPU_IDENTITY, SCHEMA_VERSION, Base, Baseline, Meta, Sweep, Trial, utcnow

DEFAULT_URL = "sqlite:///tunesearch.db"


class StoreError(RuntimeError):
    pass


class _SchemaBeingCreated(Exception):
    """Another worker has created some tunesearch tables but not yet ts_meta."""


def resolve_url(url: str | None) -> str:
    return url or os.environ.get("TUNESEARCH_DB") or DEFAULT_URL


# Any fixed 64-bit number: the advisory lock that workers on one PostgreSQL database take in turn
# while they create the schema.
_SCHEMA_LOCK_ID = 0x7475_6E65_7365_6172  # "tunesear"


@contextmanager
def schema_lock(engine):
    """Hold, on PostgreSQL, a lock every tunesearch worker takes to create tables (ours or Optuna's).
    Two workers starting on a fresh database otherwise both see no table, both run CREATE TABLE,
    and the loser fails with DuplicateTable (seen in CI's two-worker test). Elsewhere (SQLite) the
    check-then-create is no more atomic, but the loser's error says what happened, and it looks
    again (``create_in_turn``)."""
    if engine.dialect.name != "postgresql":
        yield
        return
    try:
        conn = engine.connect()
    except Exception as exc:  # an unreachable server or a wrong URL: one clear line, no retries
        raise StoreError(f"cannot open database {engine.url.render_as_string(hide_password=True)!r}: {exc}") from None
    with conn:
        conn.execute(text("SELECT pg_advisory_lock(:id)"), {"id": _SCHEMA_LOCK_ID})
        try:
            yield
        finally:
            conn.execute(text("SELECT pg_advisory_unlock(:id)"), {"id": _SCHEMA_LOCK_ID})
            conn.commit()


def create_in_turn(engine, create, attempts: int, pause_s: float, retry=(OperationalError, IntegrityError)):
    """``create(last)`` under ``schema_lock``, tried again after ``pause_s`` x the attempt's number while it
    raises one of ``retry`` (another worker creating the same schema; ``last`` says no retry is left), at
    most ``attempts`` times; the last attempt's error propagates. Ours (``Store._init_schema``) and
    Optuna's (``sweep.optuna_storage``) are created this way."""
    for attempt in range(attempts):
        last = attempt == attempts - 1
        try:
            with schema_lock(engine):
                return create(last)
        except retry:
            if last:
                raise
            time.sleep(pause_s * (attempt + 1))


@dataclass(frozen=True)
class Key:
    """What one search optimizes: a GPU model, a shape, an M bucket, a group size, a layout."""
    gpu: str
    m: int
    n: int
    k: int
    group_size: int = 128
    layout: str = "base"

    @property
    def study_name(self) -> str:
        return f"{self.gpu}|m{self.m}|n{self.n}|k{self.k}|g{self.group_size}|{self.layout}"


# A GPU row's fields but its measured copy bandwidth; one row per GPU model and software environment.
GPU_INFO_FIELDS = ("name", "capability", "sm_count", "l2_bytes", "memory_bytes", "driver", "torch_version",
                   "triton_version", "datasheet_bandwidth")


def gpu_row(fields: dict):
    """The query for the GPU row of ``fields``' model and software environment."""
    return select(GPU).filter_by(**{name: fields[name] for name in GPU_IDENTITY})


def missing_sqlite_file(url: str) -> str | None:
    """The file a SQLite URL names, where it does not exist yet (None for other databases, memory)."""
    try:
        parsed = make_url(url)
    except (ArgumentError, ValueError):
        return None  # Store reports the bad URL
    path = parsed.database
    if parsed.get_backend_name() != "sqlite" or not path or path == ":memory:" or path.startswith("file:"):
        return None
    return None if os.path.exists(path) else path


class Store:
    def __init__(self, url: str | None = None, *, create: bool = True):
        """Open the store at ``url`` (``TUNESEARCH_DB``, else ./tunesearch.db), creating its schema if it has
        none, or with ``create=False`` (the commands that only read) failing on a database that holds no
        store, without making a file or tables there."""
        self.url = resolve_url(url)
        missing = None if create else missing_sqlite_file(self.url)
        if missing:
            raise StoreError(f"no store at {self.url}: {missing} does not exist (run "
                             "`tunesearch sweep` first, or name the store with --db or TUNESEARCH_DB)")
        self.create = create
        try:
            kwargs = {}
            if self.url.startswith("sqlite"):
                kwargs["connect_args"] = {"timeout": 60}
            self.engine = create_engine(self.url, **kwargs)
        except (ArgumentError, ValueError) as exc:
            raise StoreError(f"invalid database URL {self.url!r}: {exc}") from None
        except ModuleNotFoundError as exc:
            raise StoreError(f"database URL {self.url!r} needs a driver that is not installed: {exc.name}") from None
        if self.engine.dialect.name == "sqlite":
            @event.listens_for(self.engine, "connect")
            def _sqlite_pragmas(dbapi_conn, _record):
                cur = dbapi_conn.cursor()
                cur.execute("PRAGMA journal_mode=WAL")
                cur.execute("PRAGMA busy_timeout=60000")
                cur.close()
        self._session = sessionmaker(self.engine, expire_on_commit=False)
        self._init_schema()

    def _init_schema(self, attempts: int = 10):
        """Check a found schema's version, or create the schema. Workers starting together on a fresh
        database race to create it: on PostgreSQL they take turns under ``schema_lock``; on SQLite the
        loser's CREATE TABLE fails ("already exists") and it looks again; tables found without their
        version row it completes (``create_all`` skips those that exist), since the worker that began them
        may have lost the same race."""
        retry = (OperationalError, IntegrityError, _SchemaBeingCreated)
        try:
            create_in_turn(self.engine, self._check_or_create_schema, attempts, 0.1, retry)
        except retry as exc:
            raise StoreError(f"cannot create the tunesearch schema in {self.url!r}: {exc}") from None

    def _check_or_create_schema(self, last: bool):
        try:
            tables = set(inspect(self.engine).get_table_names())
        except OperationalError as exc:
            if "is locked" in str(exc) and not last:
                # SQLite: another worker holds the fresh file while it sets it up (WAL, tables), and that
                # can answer "database is locked" at once, past the busy timeout: look again
                raise
            raise StoreError(f"cannot open database {self.url!r}: {exc}") from None
        except Exception as exc:
            raise StoreError(f"cannot open database {self.url!r}: {exc}") from None
        if "ts_meta" in tables:
            with self._session() as s:
                row = s.get(Meta, "schema_version")
            if row is not None:
                found = int(row.value) if row.value.isdigit() else None
                if found != SCHEMA_VERSION:
                    raise StoreError(
                        f"database {self.url!r} has tunesearch schema {found or 'unknown'}, this version "
                        f"reads schema {SCHEMA_VERSION}; use another --db or a matching tunesearch")
                return
            # ts_meta with no version row: a creation in progress, or one whose worker lost a race (its
            # CREATE TABLE or its row's commit failed and it then found ts_meta, as every worker would,
            # and waited for a row none was left to write): complete it below, create_all skipping what exists
        elif tables & {"ts_trials", "ts_gpus"}:
            if not last:  # another worker between its first tables and ts_meta (created in name order)
                raise _SchemaBeingCreated
            raise StoreError(f"database {self.url!r} has tunesearch tables but no schema version")
        elif not self.create:
            raise StoreError(f"no store in {self.url}: it holds no tunesearch tables (run `tunesearch sweep` "
                             "first, or name the store with --db or TUNESEARCH_DB)")
        Base.metadata.create_all(self.engine)
        with self._session() as s:
            if s.get(Meta, "schema_version") is None:
                s.add(Meta(key="schema_version", value=str(SCHEMA_VERSION)))
                try:
                    s.commit()
                except IntegrityError:  # another worker created it first
                    s.rollback()

    def session(self) -> Session:
        return self._session()

    # -- GPUs and sweeps -------------------------------------------------------------------
    def upsert_gpu(self, info: dict, copy_bandwidth: float) -> GPU:
        fields = {k: info[k] for k in GPU_INFO_FIELDS}
        ident = gpu_row(fields)
        for _ in range(2):  # a second worker may insert the same GPU between our read and write
            with self.session() as s:
                row = s.scalars(ident).first()
                if row is None:
                    row = GPU(**fields, copy_bandwidth=copy_bandwidth)
                    s.add(row)
                else:
                    row.copy_bandwidth = copy_bandwidth
                    row.measured_at = utcnow()
                try:
                    s.commit()
                    return row
                except IntegrityError:
                    s.rollback()
        raise StoreError(f"could not record GPU {fields['name']!r} in {self.url}")

    def find_gpu(self, name: str) -> GPU | None:
        with self.session() as s:
            return s.scalars(select(GPU).filter_by(name=name).order_by(GPU.measured_at.desc())).first()

    def gpus(self) -> list[GPU]:
        with self.session() as s:
            return list(s.scalars(select(GPU).order_by(GPU.name, GPU.measured_at)))

    def start_sweep(self, gpu: GPU, settings: dict, versions: dict) -> Sweep:
        with self.session() as s:
            row = Sweep(gpu_id=gpu.id, settings=settings, versions=versions, host=socket.gethostname())
            s.add(row)
            s.commit()
            return row

    def finish_sweep(self, sweep: Sweep, status: str, trials_run: int):
        with self.session() as s:
            row = s.get(Sweep, sweep.id)
            row.status, row.finished_at, row.trials_run = status, utcnow(), trials_run
            s.commit()

    # -- trials ----------------------------------------------------------------------------
    def find_trial(self, key: Key, variant_id: str, code_version: str) -> Trial | None:
        with self.session() as s:
            return s.scalars(select(Trial).filter_by(
                gpu_name=key.gpu, m=key.m, n=key.n, k=key.k, group_size=key.group_size,
                layout=key.layout, variant_id=variant_id, code_version=code_version)).first()

    def add_trial(self, trial: Trial) -> Trial:
        """Insert a trial; if another worker measured the same one first, keep theirs."""
        with self.session() as s:
            s.add(trial)
            try:
                s.commit()
                return trial
            except IntegrityError:
                s.rollback()
        existing = self.find_trial(Key(trial.gpu_name, trial.m, trial.n, trial.k, trial.group_size,
                                       trial.layout), trial.variant_id, trial.code_version)
        return existing

    RETIMED_FIELDS = ("us", "spread", "rel_error", "gbps", "roofline_frac", "tflops", "fp16_us", "speedup_fp16")

    def retime_trial(self, trial_id: int, sweep_id: int | None, timing: dict) -> Trial:
        """Replace an ok trial's timing (``timing``: RETIMED_FIELDS and ``versions``) with one measured again
        in sweep ``sweep_id``; the former one is kept in its ``versions["previous"]`` (a list, oldest
        first), with the sweep that measured it. A GPU's timings drift between runs by as much as a new
        parameter gains (2-5% on the H200, NOTES.md row 89), so a resumed sweep times the key's fastest
        again before comparing new variants with them."""
        with self.session() as s:
            row = s.get(Trial, trial_id)
            if row is None or row.status != "ok":
                raise StoreError(f"trial {trial_id} is not an ok trial of this store: nothing to re-time")
            previous = list((row.versions or {}).get("previous", []))
            previous.append({"us": row.us, "spread": row.spread, "sweep_id": row.sweep_id,
                             "measured_at": (row.created_at.isoformat() if row.created_at else None)})
            for name in self.RETIMED_FIELDS:
                setattr(row, name, timing.get(name))
            row.versions = {**timing.get("versions", row.versions or {}), "previous": previous}
            row.sweep_id, row.created_at = sweep_id, utcnow()
            s.commit()
            return row

    def delete_trials(self, key: Key) -> int:
        with self.session() as s:
            rows = s.scalars(select(Trial).filter_by(gpu_name=key.gpu, m=key.m, n=key.n, k=key.k,
                                                     group_size=key.group_size, layout=key.layout)).all()
            for row in rows:
                s.delete(row)
            s.commit()
            return len(rows)

    def trials(self, key: Key | None = None, status: str | None = None, *, other_gpus: bool = False) -> list[Trial]:
        """The trials of ``key`` (all, where None); with ``other_gpus``, those of its M, shape, group size and
        layout timed on any GPU but ``key.gpu``."""
        with self.session() as s:
            q = select(Trial)
            if key is not None:
                q = q.filter_by(m=key.m, n=key.n, k=key.k, group_size=key.group_size, layout=key.layout)
                q = q.filter(Trial.gpu_name != key.gpu) if other_gpus else q.filter_by(gpu_name=key.gpu)
            if status:
                q = q.filter_by(status=status)
            return list(s.scalars(q.order_by(Trial.id)))

    def best_trials(self, gpu: str | None = None, code_of=None) -> list[Trial]:
        """The fastest ok trial per (GPU, N, K, G, layout, M): of any code version, or with ``code_of``
        ((family, layout) -> kernel code) only those measured with their family's code."""
        best: dict[tuple, Trial] = {}
        with self.session() as s:
            q = select(Trial).filter_by(status="ok")
            if gpu:
                q = q.filter_by(gpu_name=gpu)
            for t in s.scalars(q):
                if code_of is not None and t.code_version != code_of(t.family, t.layout):
                    continue
                key = (t.gpu_name, t.n, t.k, t.group_size, t.layout, t.m)
                if key not in best or t.us < best[key].us:
                    best[key] = t
        return [best[k] for k in sorted(best)]

    # -- baselines -------------------------------------------------------------------------
    def baseline(self, gpu: str, m: int, n: int, k: int, kind: str = "cublas_fp16") -> float | None:
        with self.session() as s:
            row = s.scalars(select(Baseline).filter_by(gpu_name=gpu, m=m, n=n, k=k, kind=kind)).first()
            return row.us if row else None

    def set_baseline(self, gpu: str, m: int, n: int, k: int, us: float, kind: str = "cublas_fp16"):
        with self.session() as s:
            row = s.scalars(select(Baseline).filter_by(gpu_name=gpu, m=m, n=n, k=k, kind=kind)).first()
            if row is None:
                s.add(Baseline(gpu_name=gpu, m=m, n=n, k=k, kind=kind, us=us))
            else:
                row.us, row.created_at = us, utcnow()
            try:
                s.commit()
            except IntegrityError:
                s.rollback()
