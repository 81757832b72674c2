"""A sweep: every (shape, M bucket) key searched on one or more GPUs into the store."""
from __future__ import annotations

import functools
import logging
import multiprocessing
import time
from dataclasses import dataclass, field

from tunesearch.db import Key, Store
from tunesearch.db.store import create_in_turn
from tunesearch.variants import FAMILIES, DeviceLimits, spread_variants

from .search import (EDGE_SEEDS, FAMILY_SOURCES, LAYOUT_SOURCES, KeySearch, code_version, delete_studies,
                     family_code, initial_queue, key_seeds, key_space)
from .shapes import bucket_edges

log = logging.getLogger("tunesearch")

EDGE_TRIALS = EDGE_SEEDS  # a bucket's smallest M (edges): its seeds, all timed (search.initial_queue)


@dataclass
class SweepSettings:
    shapes: list[tuple[int, int]]  # (K, N)
    ms: list[int]
    group_size: int = 128
    trials: int = 40
    time_budget: float | None = None  # seconds for the whole sweep
    fresh: bool = False
    workers: int | None = None  # compile workers
    seed: int = 0
    interpret_test: bool = False  # TEST ONLY: interpreter 'timings'
    trial_timeout: float = 300.0  # seconds before a hung trial's worker is killed
    part: tuple[int, int] = (0, 1)  # this worker's share of the keys (index, count)
    families: tuple[str, ...] | None = None  # search only these (None: every family the device runs)
    # weight layouts to time each key in (None: base, and frag32 where its families run: an sm_90 GPU);
    # the export then keeps one layout per shape (export.choose_layout)
    layouts: tuple[str, ...] | None = None
    # after every bucket, each bucket's smallest M as a key of its own (shapes.bucket_edges), with at most
    # EDGE_TRIALS trials: the export then picks per bucket what holds over all of it (edge_aware_picks)
    edges: bool = False
    # > 0: each key gets this many trials more than it has measured when the sweep reaches it, instead of
    # ``trials`` in all (a parameter added to a family: its twins of the former winners, search.key_seeds),
    # after its RETIME fastest stored variants are timed again in this run (KeySearch.retime)
    more: int = 0

    def __post_init__(self):
        from tunesearch.variants.layout import LAYOUTS

        if self.layouts is not None:
            unknown = sorted(set(self.layouts) - set(LAYOUTS))
            if unknown or not self.layouts:
                raise ValueError(f"unknown layouts {', '.join(unknown) or '(none given)'}; "
                                 f"choose from {', '.join(LAYOUTS)}")
        if self.families is not None:
            unknown = sorted(set(self.families) - set(FAMILIES))
            if unknown or not self.families:
                raise ValueError(f"unknown families {', '.join(unknown) or '(none given)'}; "
                                 f"choose from {', '.join(FAMILIES)}")
            if self.fresh:  # it would forget every family's trials of the key, not only these
                raise ValueError("--fresh forgets a key's trials of every family: not with --families")

    def to_dict(self) -> dict:
        return dict(shapes=[list(s) for s in self.shapes], ms=self.ms, group_size=self.group_size,
                    trials=self.trials, time_budget=self.time_budget, fresh=self.fresh,
                    seed=self.seed, interpret_test=self.interpret_test, part=list(self.part),
                    trial_timeout=self.trial_timeout, families=list(self.families or []) or None,
                    layouts=list(self.layouts or []) or None, edges=self.edges, more=self.more)

    @property
    def edge_ms(self) -> list[int]:
        """The buckets' smallest M this sweep adds after them (``edges``), those not buckets already and
        above M=2 (shapes.edge_keys: 2 is a bucket's M)."""
        return [m for m in bucket_edges(self.ms) if m not in self.ms and m > 2] if self.edges else []

    @property
    def all_ms(self) -> list[int]:
        """Every M this sweep times: the buckets, then their smallest M (``edge_ms``)."""
        return list(self.ms) + self.edge_ms

    def key_trials(self, m: int, measured: int = 0) -> int:
        """Trials for a key at M=``m`` that has ``measured`` already: ``more`` beyond those where it is set;
        else ``trials``, or at most EDGE_TRIALS at a bucket's smallest M. Its seeds (the bucket's and the
        bucket below's fastest, search.key_seeds) are what the export chooses among; more trials there
        find variants the bucket never timed."""
        if self.more:
            return measured + self.more
        return min(self.trials, EDGE_TRIALS) if m in self.edge_ms else self.trials


# The stored variants a ``more`` sweep times again at each key before its new ones: the best, and those
# close enough behind it to take its place if its new timing comes out slower (the H200's run-to-run
# drift, 2-5%, is as large as a new parameter's gain: NOTES.md row 89).
RETIME = 3


@dataclass
class SweepResult:
    gpu: str
    wall_s: float
    trials_run: int
    keys: int
    status: str
    best: list = field(default_factory=list)
    worker_restarts: int = 0
    retimed: int = 0  # stored trials timed again (``more`` sweeps)
    untimed: list = field(default_factory=list)  # keys left with no trial of this code (``untimed_keys``)
    # keys of this worker's static share that the time budget ran out before (never started); a ``more``
    # sweep cannot simply be run again to reach them, since it adds its trials again at every key it reaches
    unreached: list = field(default_factory=list)


def optuna_storage(store: Store, attempts: int = 5):
    """Optuna's storage in the store's database. Two workers starting on a fresh database race to
    create Optuna's schema: on PostgreSQL they take turns under the store's schema lock; on SQLite
    the loser gets an IntegrityError on alembic_version (seen in the concurrency test), retries
    and finds the schema in place (``create_in_turn``)."""
    import optuna

    kwargs = {"connect_args": {"timeout": 60}} if store.url.startswith("sqlite") else {}
    return create_in_turn(store.engine, lambda last: optuna.storages.RDBStorage(
        store.url, engine_kwargs=kwargs, heartbeat_interval=None), attempts, 0.5)


def _versions(info, code: str) -> dict:
    """The environment of a sweep; ``code`` is the Triton families' kernel hash, ``code_<family>`` that
    of each family with sources of its own."""
    return dict(driver=info.driver, torch=info.torch_version, triton=info.triton_version,
                tunesearch=info.tunesearch_version, code=code,
                **{f"code_{family}": code_version(family) for family in FAMILY_SOURCES},
                **{f"code_{family}@{layout}": family_code(family, code, layout) for family, layout in LAYOUT_SOURCES})


def _measured(store: Store, key: Key, code: str, families=None) -> int:
    """The key's trials timed with this tree's kernel code (of ``families``, None: any)."""
    return sum(1 for t in store.trials(key) if t.code_version == family_code(t.family, code, t.layout)
               and (families is None or t.family in families))


def _key_done(store: Store, key: Key, trials: int, code: str, space_size, families=None) -> bool:
    """Already measured as many variants (of ``families``, None: any) as this sweep would (resume
    without GPU setup). ``space_size(key)``, the size of the key's space, is asked only where fewer than
    ``trials`` are measured."""
    measured = _measured(store, key, code, families)
    return measured >= trials or measured >= space_size(key)


def sweep_keys(settings: SweepSettings, gpu: str, layouts) -> list[Key]:
    """The keys a sweep times on ``gpu``, in order: every shape's buckets, then their smallest M."""
    return [Key(gpu, m, n, k, settings.group_size, layout)
            for ms in (settings.ms, settings.edge_ms) for k, n in settings.shapes for m in ms for layout in layouts]


def untimed_keys(store: Store, settings: SweepSettings, gpu: str, layouts) -> list[Key]:
    """The sweep's keys that hold no trial of this tree's code (of its families): a budget that ran out
    before them. `export --current-code-only` leaves them out, so a summary that showed their stored best
    of an older code hid them (NOTES.md row 107: 4096x22016 M=4096 got no trial and its bucket went to
    another family)."""
    code = code_version()
    return [key for key in sweep_keys(settings, gpu, layouts) if not _measured(store, key, code, settings.families)]


def describe_keys(keys: list[Key]) -> str:
    """``keys`` by shape and layout, e.g. "4096x22016 M=3073,4096 (frag32)"."""
    groups: dict[tuple, list[int]] = {}
    for key in keys:
        groups.setdefault((key.k, key.n, key.layout), []).append(key.m)
    return "; ".join(f"{k}x{n} M={','.join(map(str, ms))} ({layout})" for (k, n, layout), ms in groups.items())


def is_current(trial) -> bool:
    """Whether ``trial`` was timed with this tree's code of its family and layout."""
    return trial.code_version == family_code(trial.family, code_version(), trial.layout)


def key_deadline(now: float, deadline: float, keys_left: int) -> float:
    """When this key's search stops: an equal share of what is left of the sweep's budget for each key
    still to search, this one included. A key that ends early (its trials done) leaves its time to the
    rest. With one deadline for all, a budget too short for every key's trials went to the first keys and
    left the last shapes untimed (NOTES.md rows 85 and 87: 4096x22016, the preset's last shape, needed a
    call of its own twice)."""
    if deadline == float("inf"):
        return deadline
    return now + max(0.0, deadline - now) / max(1, keys_left)


def _queued_keys_left(key_queue, workers: int) -> int:
    """This worker's expected count of keys still to search where the GPUs pull keys from one queue
    (``run_sweep_all``): the queue's keys, this one included, over the workers; 1 (the whole remaining
    budget) where the platform cannot count a queue."""
    try:
        left = key_queue.qsize() - workers + 1  # its stop sentinels are in it too
    except NotImplementedError:  # macOS
        return 1
    return max(1, -(-left // workers))


def _make_measurer(store: Store, device: int | None, settings: SweepSettings):
    """The trial runner (a worker process, restarted after fatal faults) and the compile pool."""
    from .worker import IsolatedMeasurer

    if settings.interpret_test:
        from .measure import InterpreterMeasurer

        return IsolatedMeasurer("interpret", InterpreterMeasurer.test_info(), 1e9,
                                trial_timeout=settings.trial_timeout), None
    from .compile import Compiler
    from .gpu import gpu_info, measure_copy_bandwidth

    info = gpu_info(device)
    known = store.find_gpu(info.name)
    if known is not None and not settings.fresh and known.driver == info.driver:
        bandwidth = known.copy_bandwidth
    else:
        bandwidth = measure_copy_bandwidth(device)
    return (IsolatedMeasurer("gpu", info, bandwidth, device=device, trial_timeout=settings.trial_timeout),
            Compiler(device, settings.workers))


def _dealt_keys(keys: list, settings: SweepSettings, key_queue):
    """This worker's keys: its static share (``part``), or indices pulled from ``key_queue`` until
    its None sentinel, so that each GPU takes the next key as soon as it is free."""
    if key_queue is None:
        index, count = settings.part
        yield from keys[index::count]
        return
    for i in iter(key_queue.get, None):
        yield keys[i]


def sweep_layouts(settings: SweepSettings, limits) -> tuple[str, ...]:
    """The layouts a sweep times each key in: as asked, or base and, where a family reading frag32 runs
    (rsmma: a Gluon-capable sm_90 GPU), frag32."""
    if settings.layouts is not None:
        return settings.layouts
    from tunesearch.variants.space import GLUON_FAMILIES, LAYOUT_FAMILIES

    frag32 = limits is not None and limits.gluon and any(f in GLUON_FAMILIES for f in LAYOUT_FAMILIES["frag32"])
    return ("base", "frag32") if frag32 else ("base",)


def run_sweep(store: Store, settings: SweepSettings, device: int | None = None,
              progress=None, key_queue=None) -> SweepResult:
    """Search every key of ``settings`` on ``device``; resumable, committed trial by trial.
    With ``key_queue`` (``run_sweep_all``) the keys are pulled from it by index instead."""
    t0 = time.time()
    measurer, compiler = _make_measurer(store, device, settings)
    info = measurer.info
    code = code_version()
    gpu_row = store.upsert_gpu(info.to_dict(), measurer.copy_bandwidth)
    sweep = store.start_sweep(gpu_row, settings.to_dict(), _versions(info, code))
    storage = optuna_storage(store)
    deadline = t0 + settings.time_budget if settings.time_budget else float("inf")
    limits = DeviceLimits.of(device) if device is not None and not settings.interpret_test else None
    layouts = sweep_layouts(settings, limits)
    # every shape's buckets first, then their smallest M, whose searches start from the buckets' winners
    keys = sweep_keys(settings, info.name, layouts)
    trials_run, status, keys_seen, short, retimed = 0, "done", 0, False, 0
    dropped = []  # the key pulled from a shared queue when the budget had run out: no other worker takes it
    # each key's space size, counted once a sweep: a count enumerates and checks the whole space (~0.2 s a
    # key on sm_90), and a sweep with a time budget asks for each key up to three times
    space_size = functools.cache(lambda key: len(key_space(key, limits, settings.families)))
    pending = None  # keys of this worker's static share still to search (the time budget's shares)
    if key_queue is None and deadline != float("inf"):
        pending = sum(1 for key in _dealt_keys(keys, settings, None) if settings.fresh or settings.more
                      or not _key_done(store, key, settings.key_trials(key.m), code, space_size, settings.families))
    try:
        for key in _dealt_keys(keys, settings, key_queue):
            if time.time() >= deadline:
                status = "budget"
                if key_queue is not None:
                    dropped.append(key)
                break
            keys_seen += 1  # reached within the budget (the summary's "over N keys")
            if settings.fresh:
                store.delete_trials(key)
                delete_studies(key, storage)
            if progress:
                progress.start_key(key)
            measured = _measured(store, key, code, settings.families) if settings.more else 0
            trials = settings.key_trials(key.m, measured)
            if not settings.fresh and _key_done(store, key, trials, code, space_size, settings.families):
                if progress:
                    progress.end_key(key)
                continue
            measurer.prepare(key.m, key.n, key.k, key.group_size, key.layout)
            fp16 = store.baseline(key.gpu, key.m, key.n, key.k)
            if fp16 is None or settings.fresh:
                fp16 = measurer.fp16_us(key.m, key.n, key.k)
                store.set_baseline(key.gpu, key.m, key.n, key.k, fp16)
            search = KeySearch(store, measurer, key, code=code, gpu_id=gpu_row.id, sweep_id=sweep.id,
                               versions=_versions(info, code), seed=settings.seed, storage=storage,
                               limits=limits, families=settings.families)
            search.fp16_us = fp16
            if settings.more and measured:  # its fastest timed again first: the new ones race this run's
                retimed += search.retime(RETIME, compiler)
            seeds, at_edge = key_seeds(store, key, settings.ms, search)
            search.enqueue(initial_queue(seeds, spread_variants(key.m, key.n, key.k, key.group_size, limits,
                                                                layout=key.layout),
                                         trials, len(search.space), least=EDGE_SEEDS if at_edge else 0))
            keys_left = pending if pending is not None else (
                _queued_keys_left(key_queue, settings.part[1]) if key_queue is not None else 1)
            until = key_deadline(time.time(), deadline, keys_left)
            trials_run += search.run(trials, until, compiler,
                                     on_trial=progress.trial if progress else None)
            if pending is not None:
                pending = max(1, pending - 1)
            if time.time() >= until and not _key_done(store, key, trials, code, space_size, settings.families):
                short = True  # its share ran out before its trials
            measurer.release()
            if progress:
                progress.end_key(key)
    except KeyboardInterrupt:
        status = "interrupted"
        raise
    except BaseException:
        status = "crashed"
        raise
    finally:
        if status == "done" and short:
            status = "budget"
        store.finish_sweep(sweep, status, trials_run)
        measurer.close()
        if compiler:
            compiler.close()
    best = [t for t in store.best_trials(info.name)
            if (t.k, t.n) in set(settings.shapes) and t.m in settings.all_ms and t.group_size == settings.group_size]
    share = list(_dealt_keys(keys, settings, None)) if key_queue is None else keys
    mine = set(share)
    untimed = [key for key in untimed_keys(store, settings, info.name, layouts) if key in mine]
    # the static share is taken in order and left only at the deadline: what follows the reached ones (a
    # shared queue's other keys left are the parent's to name: run_sweep_all)
    unreached = share[keys_seen:] if key_queue is None else dropped
    return SweepResult(info.name, time.time() - t0, trials_run, keys_seen, status, best,
                       worker_restarts=measurer.restarts, retimed=retimed, untimed=untimed, unreached=unreached)


class _ForwardedProgress:
    """A worker process's progress calls, sent to the parent (which draws one display)."""

    def __init__(self, queue, device):
        self.queue, self.device = queue, device

    def start_key(self, key):
        self.queue.put(("start_key", self.device, key))

    def trial(self, record):
        self.queue.put(("trial", self.device, None))

    def end_key(self, key):
        self.queue.put(("end_key", self.device, key))


def _worker(url, settings, device, queue, key_queue):
    import os

    from .worker import _faults

    if _faults().get(f"sweep-worker-{device}") == "exit":  # TEST ONLY: die without a word
        os._exit(137)
    try:
        result = run_sweep(Store(url), settings, device, progress=_ForwardedProgress(queue, device),
                           key_queue=key_queue)
        queue.put(("result", device, result.trials_run, result.status, None, result.unreached))
    except BaseException as exc:  # report, do not hang the parent
        queue.put(("result", device, 0, "crashed", f"{type(exc).__name__}: {exc}", []))


def run_sweep_all(url: str, settings: SweepSettings, devices: list[int], progress=None):
    """One worker process per GPU, one store and one set of studies. The keys are dealt from a
    shared queue, each GPU taking the next as soon as it is free: a static round-robin share left
    the H200 pair's two sweeps at 52.8 and 44.1 s for the same number of keys.

    Returns (device, trials run, status, error) per worker, where a worker that dies without reporting
    (killed, out of memory) is 'crashed' with its exit code and the others carry on, and the keys a time
    budget left, in the sweep's order (each worker's key pulled at its deadline and those still queued).
    ``progress`` (start_key / trial / end_key) receives every worker's progress."""
    import queue as queue_module

    if settings.layouts is None and not settings.interpret_test:  # the workers must deal the same keys
        layouts = sweep_layouts(settings, DeviceLimits.of(devices[0]))
        settings = SweepSettings(**{**settings.__dict__, "layouts": layouts})
    ctx = multiprocessing.get_context("spawn")
    events, key_queue = ctx.Queue(), ctx.Queue()
    for i in range(len(settings.shapes) * len(settings.all_ms) * len(settings.layouts or ("base",))):
        key_queue.put(i)
    for _ in devices:
        key_queue.put(None)  # one stop sentinel per worker
    procs = {}
    for i, dev in enumerate(devices):
        s = SweepSettings(**{**settings.__dict__, "part": (i, len(devices))})
        p = ctx.Process(target=_worker, args=(url, s, dev, events, key_queue))
        p.start()
        procs[dev] = p
    results, unreached = {}, []
    while len(results) < len(procs):
        try:
            kind, dev, *rest = events.get(timeout=1.0)
        except queue_module.Empty:
            for dev, p in procs.items():
                if dev not in results and not p.is_alive():
                    try:  # its last words may still be in the pipe
                        while True:
                            kind, d, *rest = events.get(timeout=1.0)
                            _handle(kind, d, rest, results, progress, unreached)
                    except queue_module.Empty:
                        pass
                    if dev not in results:
                        results[dev] = (dev, 0, "crashed", f"worker process died (exit code {p.exitcode})")
            continue
        _handle(kind, dev, rest, results, progress, unreached)
    for p in procs.values():
        p.join()
    if unreached:  # a worker stopped at its deadline: what it left in the queue was reached by none
        gpu = unreached[0].gpu
        keys = sweep_keys(settings, gpu, settings.layouts or ("base",))
        queued = _drain(key_queue)
        unreached = sorted(unreached + [keys[i] for i in queued], key=keys.index)
    return [results[dev] for dev in devices], unreached


def _drain(key_queue) -> list[int]:
    """The key indices still in ``key_queue`` (its stop sentinels dropped), once no worker reads it."""
    import queue as queue_module

    left = []
    try:
        while True:
            item = key_queue.get(timeout=0.2)  # a put by a finished process may still be in its feeder
            if item is not None:
                left.append(item)
    except queue_module.Empty:
        return left


def _handle(kind, dev, rest, results, progress, unreached):
    if kind == "result":
        *result, left = rest
        results[dev] = (dev, *result)
        unreached.extend(left)
    elif progress is not None:
        getattr(progress, kind)(rest[0])
