"""The search of one key with Optuna: family first, then that family's parameters.

Optuna proposes over each family's full parameter grid; the proposal is then snapped to the
nearest *valid* variant of that family (fewest log2 steps), which is what gets compiled and
timed, and its time is what Optuna is told. So nothing invalid is ever compiled or run, and the
sampler still sees an ordinal space it can model. A variant already measured for this key and
kernel code is answered from the store.
"""
from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import logging
import math
import os
import socket
import time
from datetime import datetime, timedelta
from pathlib import Path

import optuna

from tunesearch.db import Key, Store, Trial
from tunesearch.variants import Variant, variant_space
from tunesearch.variants.space import FAMILY_DEFAULTS, FAMILY_GRID, FAMILY_PARAMS, family_twins, param_steps

from .measure import metrics
from .shapes import is_edge_key

log = logging.getLogger("tunesearch")

# The sources that decide what a variant computes and how fast: a trial measured with other
# kernel code is not reused. The space rules and the launch plumbing are left out: they decide
# which variants exist and how they are called, not what one of them costs.
KERNEL_SOURCES = ("_common.py", "gemm.py", "gemv.py", "swapab.py", "dequant.py")
# Families with sources of their own: their trials are keyed by their own hash, so adding or changing
# one leaves the Triton families' stored trials valid, and the reverse.
# rsmma takes dqmma's descriptors and epilogue; rsmma_launch.py sizes its launch's registers; twotile is
# rsmma's kernel with two accumulators (its loader, fragment, staged store and dqmma's reduction)
FAMILY_SOURCES = {"dqmma": ("dqmma.py",), "rsmma": ("rsmma.py", "dqmma.py", "rsmma_launch.py"),
                  "twotile": ("twotile.py", "rsmma.py", "dqmma.py", "rsmma_launch.py"),
                  "rsmmapf": ("rsmmapf.py", "rsmma.py", "dqmma.py", "rsmma_launch.py")}
# A family that reads a second weight layout with a kernel of its own: its trials in that layout are keyed
# by that source too (rsmma reads frag32 with its own sources' fragment builder).
LAYOUT_SOURCES = {("dequant", "frag32"): ("dequant_frag32.py",)}


@functools.lru_cache(maxsize=None)
def code_version(family: str | None = None) -> str:
    """A hash of the kernel sources of ``family`` (None: the Triton families', KERNEL_SOURCES); read once
    per process (a sweep asks per key and per stored trial)."""
    return _sources_hash(FAMILY_SOURCES.get(family, KERNEL_SOURCES))


@functools.lru_cache(maxsize=None)
def _sources_hash(names: tuple[str, ...]) -> str:
    import tunesearch.variants as pkg

    root = Path(pkg.__file__).resolve().parent
    digest = hashlib.sha1()
    for name in names:
        digest.update(name.encode())
        digest.update((root / name).read_bytes())
    return digest.hexdigest()[:12]


def family_code(family: str, code: str, layout: str = "base") -> str:
    """The code version a trial of ``family`` on weights in ``layout`` is stored under, ``code`` being the
    Triton families'."""
    own = code_version(family) if family in FAMILY_SOURCES else code
    extra = LAYOUT_SOURCES.get((family, layout))
    return own if extra is None else f"{own}+{_sources_hash(extra)}"


OWNER = f"{socket.gethostname()}:{os.getpid()}"
STALE_AFTER = timedelta(hours=1)


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def fail_stale_trials(study: optuna.Study) -> None:
    """Mark RUNNING trials whose process is gone (killed mid-sweep) as FAIL, so none stays
    RUNNING forever: the owner's pid is checked on this host; elsewhere, after STALE_AFTER."""
    host = socket.gethostname()
    now = datetime.now()
    for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,)):
        owner = str(t.user_attrs.get("owner", ""))
        owner_host, _, pid = owner.rpartition(":")
        if owner == OWNER:
            continue
        if owner_host == host and pid.isdigit():
            stale = not _process_alive(int(pid))
        else:  # another host, or asked a moment ago and not yet stamped: only age tells
            stale = t.datetime_start is not None and now - t.datetime_start > STALE_AFTER
        if stale:
            # two workers that start on one key at once may both fail the same dead trial
            study.tell(t.number, state=optuna.trial.TrialState.FAIL, skip_if_finished=True)


def default_sampler(seed: int = 0) -> optuna.samplers.BaseSampler:
    """Independent TPE. Replayed on exhaustive H200 timings (benchmarks/search_quality.py),
    with the family dealt by KeySearch it reached 3% of the best on 6/6 seeds at M=1 and M=8;
    multivariate TPE with group=True on 1/6 and 6/6."""
    return optuna.samplers.TPESampler(seed=seed, n_startup_trials=8, constant_liar=True)


class _OneReadPerTrial:
    """The study's storage, answering the sampler's reads from one database read per trial.

    constant_liar TPE (the default sampler) cannot use Optuna's trial cache, so it reads every trial
    of the study from the database for each parameter it suggests: on a resumed 40-trial key of the
    H200 store, 595 reads (4.1 of 8.1 s on a 2-core CPU) for 61 asks. While KeySearch suggests one
    trial's parameters, what the sampler reads does not change: the only writes are that trial's own
    parameters, and the sampler filters that trial out (a key has one worker; a second process on the
    same study would be seen a few milliseconds later, as if read just before its write). So inside
    ``one_read()`` the first read serves the rest of that trial; outside it every call goes to the
    storage. Proposals are identical (tests/test_search.py); a resumed key took 2.5 s instead of 4.1.
    """

    def __init__(self, storage):
        self._storage = storage
        self._reads: dict | None = None

    @contextlib.contextmanager
    def one_read(self):
        self._reads = {}
        try:
            yield
        finally:
            self._reads = None

    def get_all_trials(self, study_id, deepcopy=True, states=None):
        if self._reads is None or deepcopy:
            return self._storage.get_all_trials(study_id, deepcopy=deepcopy, states=states)
        key = (study_id, None if states is None else tuple(states))
        if key not in self._reads:
            self._reads[key] = self._storage.get_all_trials(study_id, deepcopy=False, states=states)
        return self._reads[key]

    def __getattr__(self, name):
        return getattr(self._storage, name)


def key_space(key: Key, limits=None, families=None) -> list[Variant]:
    """The variants a search of ``key`` draws from: the device's space, of ``families`` only (None: all)."""
    return [v for v in variant_space(key.m, key.n, key.k, key.group_size, limits, key.layout)
            if families is None or v.family in families]


def optuna_params(variant: Variant) -> dict:
    return {"family": variant.family, **{f"{variant.family}.{k}": v for k, v in variant.params.items()}}


def _distance(a: Variant, params: dict) -> float:
    return sum(abs(param_steps(a[name]) - param_steps(params[name])) for name in params)


class KeySearch:
    """Search one key; every finished trial is committed to the store as it ends."""

    def __init__(self, store: Store, measurer, key: Key, *, code: str, gpu_id: int, sweep_id: int | None,
                 versions: dict, limits=None, seed: int = 0, storage=None, sampler=None, families=None):
        self.store, self.measurer, self.key = store, measurer, key
        self.code, self.gpu_id, self.sweep_id, self.versions = code, gpu_id, sweep_id, versions
        self.space = key_space(key, limits, families)
        self.by_family: dict[str, list[Variant]] = {}
        for v in self.space:
            self.by_family.setdefault(v.family, []).append(v)
        self.codes = {family: family_code(family, code, key.layout) for family in self.by_family}
        self.valid = set(self.space)
        sampler = sampler or default_sampler(seed)
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self.study = optuna.create_study(study_name=study_name(key, self.by_family), storage=storage,
                                         sampler=sampler, direction="minimize", load_if_exists=True)
        self.reads = _OneReadPerTrial(self.study._storage)
        if self.ONE_READ_PER_TRIAL:
            self.study._storage = self.reads  # before any ask: each trial keeps the study's storage
        self.fp16_us = None
        fail_stale_trials(self.study)

    # -- proposals ---------------------------------------------------------------------------
    ONE_READ_PER_TRIAL = True  # False: the sampler reads the database per parameter (the reference)

    def _suggest(self, trial: optuna.trial.Trial) -> Variant:
        with self.reads.one_read():
            family = trial.suggest_categorical("family", sorted(self.by_family))
            params = {name: trial.suggest_categorical(f"{family}.{name}", list(FAMILY_GRID[family][name]))
                      for name, _ in FAMILY_PARAMS[family]}
        proposed = Variant(family, params)
        if proposed in self.valid:
            return proposed
        return self._nearest(family, params)

    def _nearest(self, family: str, params: dict, exclude=frozenset()) -> Variant | None:
        """The valid variant of ``family`` fewest log2 steps from ``params`` (ties by id), skipping
        the ids in ``exclude``; None if the family has no other."""
        pool = [v for v in self.by_family[family] if v.id not in exclude]
        return min(pool, key=lambda v: (_distance(v, params), v.id)) if pool else None

    @classmethod
    def _contenders(cls, known: dict) -> list[str]:
        """The families whose best time so far is within CONTENDER of the best family's."""
        best: dict[str, float] = {}
        for t in known.values():
            if t.status == "ok":
                best[t.family] = min(best.get(t.family, math.inf), t.us)
        if not best:
            return []
        top = min(best.values())
        return sorted(f for f, us in best.items() if us <= cls.CONTENDER * top)

    def _queued(self) -> bool:
        waiting = self.study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.WAITING,))
        return bool(waiting)

    def enqueue(self, variants) -> int:
        n = 0
        for v in variants:
            if v in self.valid:
                self.study.enqueue_trial(optuna_params(v), skip_if_exists=True)
                n += 1
        return n

    # -- the loop ----------------------------------------------------------------------------
    def measured(self) -> dict[str, Trial]:
        return {t.variant_id: t for t in self.store.trials(self.key) if t.code_version == self.codes.get(t.family)}

    def fastest(self, count: int) -> list[Trial]:
        """The key's ``count`` fastest ok trials of this code, fastest first."""
        return sorted((t for t in self.measured().values() if t.status == "ok"), key=lambda t: t.us)[:count]

    # The family is chosen by us, the parameters by the sampler: round-robin for the first
    # EXPLORE share of the budget, then round-robin over the families whose best time is within
    # CONTENDER of the best. Left to TPE, a family whose typical variant is slow but whose best is
    # fastest (gemv at M=1 on the H200: median 3x the splitk median, best 13% under it) is
    # abandoned early; given only to the leading family, the rest of the budget never found the
    # swapab variant 9% under the gemv at M=1 on 11008x4096 (45 gemv trials, 6 swapab).
    EXPLORE = 0.4
    CONTENDER = 1.10

    def run(self, trials: int, deadline: float, compiler=None, batch: int = 16, on_trial=None) -> int:
        """Measure up to ``trials`` new variants (fewer if the space runs out or the deadline
        passes). Returns how many were measured now.

        The deadline is checked before each batch, and before each measurement only where nothing
        compiles ahead (no ``compiler``) and the key has a new trial: a batch measures all that the
        compile pool built for it, whose cost is paid (a measurement takes a fraction of a second), and
        a key measures at least one variant. A sweep's time budget shared over many keys can give a key
        less than one compile round: the first key of a default sweep on a cold cache (36 keys in 100 s)
        compiled its batch and measured none of it."""
        known = self.measured()
        total = min(trials, len(self.space))
        budget = total - len(known)
        families = sorted(self.by_family)
        new = asks = 0
        while budget - new > 0 and time.time() < deadline and asks < 4 * trials:
            size = min(batch, budget - new)
            pending = []
            for i in range(size):
                done = len(known) + i
                if not self._queued():
                    if done < self.EXPLORE * total:
                        family = families[done % len(families)]
                    else:
                        contenders = self._contenders(known) or families
                        family = contenders[done % len(contenders)]
                    self.study.enqueue_trial({"family": family})
                trial = self.study.ask()
                try:
                    trial.set_user_attr("owner", OWNER)
                except optuna.exceptions.UpdateFinishedTrialError:  # taken and told by another worker
                    continue  # (see _proposal)
                pending.append(trial)
            asks += size
            proposals = [(t, v) for t in pending if (v := self._proposal(t)) is not None]
            variants = [v for _, v in proposals]
            fresh = [v for v in dict.fromkeys(variants) if v.id not in known]
            if not fresh:  # stuck on what is measured: measure its neighbours next
                self._enqueue_neighbours_of_repeats(variants, known)
            compile_errors = compiler.compile([v.id for v in fresh], self.key.m, self.key.n, self.key.k,
                                              self.key.group_size, self.key.layout) if compiler and fresh else {}
            for trial, variant in proposals:
                record = known.get(variant.id)
                if record is None:
                    if time.time() >= deadline and new and not compiler:
                        self.study.tell(trial, state=optuna.trial.TrialState.FAIL, skip_if_finished=True)
                        continue
                    record = self._measure(variant, compile_errors.get(variant.id))
                    known[variant.id] = record
                    # counted only if this sweep's row went in (another worker may have won)
                    new += record.sweep_id == self.sweep_id
                    if on_trial:
                        on_trial(record)
                self._tell(trial, variant, record)
        return new

    def retime(self, count: int, compiler=None) -> int:
        """Measure the key's ``count`` fastest ok variants of this code again, in this run, and store their
        new timings (``Store.retime_trial`` keeps the former ones): the variants measured next are then
        compared with timings of the same run. Returns how many were re-timed; one that does not measure
        ok now keeps its stored timing (a warning says so)."""
        stored = self.fastest(count)
        if not stored:
            return 0
        errors = compiler.compile([t.variant_id for t in stored], self.key.m, self.key.n, self.key.k,
                                  self.key.group_size, self.key.layout) if compiler else {}
        done = 0
        for old in stored:
            row = self._measurement(Variant.from_id(old.variant_id), errors.get(old.variant_id))
            if row.status != "ok":
                log.warning("tunesearch: %s at %s measured %s on re-timing (%s); its stored %.2f us stands",
                            old.variant_id, self.key, row.status, row.error, old.us)
                continue
            self.store.retime_trial(old.id, self.sweep_id, {name: getattr(row, name) for name in
                                                            Store.RETIMED_FIELDS} | {"versions": self.versions})
            done += 1
        return done

    def _proposal(self, trial) -> Variant | None:
        """The variant ``trial`` proposes; None when another worker has finished the trial meanwhile.
        On SQLite two workers can pop the same queued trial (Optuna's row lock is a no-op there), and
        one that answers it from the store tells it at once, so the other's next write to it raises."""
        try:
            return self._suggest(trial)
        except optuna.exceptions.UpdateFinishedTrialError:
            log.warning("tunesearch: Optuna trial %d was taken and finished by another worker", trial.number)
            return None

    def _enqueue_neighbours_of_repeats(self, variants: list[Variant], known: dict) -> None:
        """Queue, for each proposal of a batch that proposed only measured variants, the nearest
        unmeasured variant of its family for the next asks; the repeats themselves are told their
        stored times.

        TPE on a resumed key can keep proposing what it has measured: on a copy of the H200 store,
        4096x4096 at M=16 got 2 new variants in 208 asks (13 s) before the ask cap; with this, 12 of 12
        in 1.3 s. Only when a batch is all repeats, so a search that still proposes new variants is
        unchanged: the exhaustive-timing replay (benchmarks/search_quality.py) gives the same
        trials-to-3% on its 3 keys x 5 seeds."""
        taken = set(known)
        for v in variants:
            neighbour = self._nearest(v.family, v.params, exclude=taken)
            if neighbour is not None:
                taken.add(neighbour.id)
                self.study.enqueue_trial(optuna_params(neighbour), skip_if_exists=True)

    def _tell(self, trial, variant: Variant, record: Trial):
        try:
            trial.set_user_attr("variant_id", variant.id)
            # skip_if_finished: another worker may finish the trial between the stamp above and the
            # tell, and Optuna then raises ValueError ("Cannot tell a COMPLETE trial"), not
            # UpdateFinishedTrialError; this crashed one of two sweeps sharing a SQLite store (CI, stop 70)
            if record.status == "ok":
                self.study.tell(trial, record.us, skip_if_finished=True)
            else:
                trial.set_user_attr("error", (record.error or "")[:500])
                self.study.tell(trial, state=optuna.trial.TrialState.FAIL, skip_if_finished=True)
        except optuna.exceptions.UpdateFinishedTrialError:
            # a worker that took this trial (or took it for a dead one's) finished it; the measurement
            # itself is in the store, which is what resumes and exports read
            log.warning("tunesearch: Optuna trial %d was finished by another worker", trial.number)

    def _measure(self, variant: Variant, compile_error: str | None) -> Trial:
        return self.store.add_trial(self._measurement(variant, compile_error))

    def _measurement(self, variant: Variant, compile_error: str | None) -> Trial:
        """``variant`` measured at this key now, as an unsaved trial row."""
        k = self.key
        if compile_error:
            from .measure import Result

            result = Result("failed", compile_error)
        else:
            result = self.measurer.measure(variant)
        row = Trial(sweep_id=self.sweep_id, gpu_id=self.gpu_id, gpu_name=k.gpu, m=k.m, n=k.n, k=k.k,
                    group_size=k.group_size, layout=k.layout, variant_id=variant.id,
                    family=variant.family, params=variant.params, code_version=self.codes[variant.family],
                    status=result.status, error=result.error, us=result.us, spread=result.spread,
                    rel_error=result.rel_error, fp16_us=self.fp16_us, versions=self.versions)
        if result.status == "ok":
            for name, value in metrics(k.m, k.n, k.k, k.group_size, result.us,
                                       self.measurer.copy_bandwidth, self.fp16_us).items():
                setattr(row, name, value)
        return row


def study_name(key: Key, families) -> str:
    """The key's Optuna study for this search space. Optuna refuses to go on with a study whose
    categorical choices changed ("CategoricalDistribution does not support dynamic value space"),
    so a space that changed (a family added to the key, a wider grid) starts a study of its own,
    named by a fingerprint of its choices; the variants already measured are still answered from
    the store."""
    grids = {family: FAMILY_GRID[family] for family in sorted(families)}
    tag = hashlib.sha1(json.dumps(grids, sort_keys=True).encode()).hexdigest()[:8]
    return f"{key.study_name}|space-{tag}"


def delete_studies(key: Key, storage) -> int:
    """Delete every Optuna study of ``key`` (any search space, and the untagged name of older
    versions). Returns how many were deleted."""
    names = [n for n in optuna.study.get_all_study_names(storage)
             if n == key.study_name or n.startswith(key.study_name + "|space-")]
    for name in names:
        optuna.delete_study(study_name=name, storage=storage)
    return len(names)


# Seeds (neighbours' winners, then every family's heuristic and corners) may fill at most this share
# of a key's budget; the rest is the guided search. Without the cap a 20-trial key at M >= 32 (five
# families x four spread points, plus six neighbours) never reached the guided search at all, and the
# H200 sweep of 2026-11-30 (_s7) then missed M=64 variants 10-20% faster that the _s5 sweep had found.
SEED_SHARE = 0.5


def initial_queue(neighbours: list[Variant], spread: list[Variant], trials: int, space_size: int,
                  least: int = 0) -> list[Variant]:
    """What a key's search measures first: neighbours' winners, then the spread points (round by
    round over the families), together at most SEED_SHARE of the key's budget, or ``least`` of them where
    that is more (a bucket's smallest M: EDGE_SEEDS), repeats dropped."""
    quota = max(1, math.ceil(SEED_SHARE * min(trials, space_size)), min(least, trials, space_size))
    return list(dict.fromkeys(neighbours + spread))[:quota]


def _distinct_variants(variant_ids, limit: int) -> list[Variant]:
    """The first ``limit`` distinct variants of ``variant_ids`` (in their order), skipping ids this
    tunesearch no longer parses."""
    seeds: list[Variant] = []
    for vid in variant_ids:
        try:
            v = Variant.from_id(vid)
        except ValueError:
            continue
        if v not in seeds:
            seeds.append(v)
            if len(seeds) >= limit:
                break
    return seeds[:limit]


def former_winners(store: Store, key: Key, codes: dict[str, str], limit: int = 4) -> list[Variant]:
    """The key's fastest variants timed with other code of their family (``codes``: family -> this
    code), for the families searched now: a kernel change is usually small, so its former winners are
    worth timing first. (The _s25 -> _s26 rsmma re-sweep, 30 trials a key from scratch, missed two of
    them by 6-13%: 11008x4096 M=192 40.8 -> 46.2 us, 4096^2 M=96 14.6 -> 16.3.)"""
    former = [t for t in store.trials(key, status="ok")
              if t.family in codes and t.code_version != codes[t.family]]
    return _distinct_variants((t.variant_id for t in sorted(former, key=lambda t: t.us)), limit)


def later_parameter_twins(winners: list[Variant], space) -> list[Variant]:
    """``winners`` (a key's former winners, best first) with, after the best, its twins in a family whose
    kernel is its own with more parameters (space.family_twins: a split rsmma launch as rsmmapf), then its
    twins along each parameter added to its family after trials were stored (space.FAMILY_DEFAULTS, the newest
    first) where it has the default, those the key's ``space`` holds: no stored trial tried those, and a
    kernel change is usually small, so the best one's twins are the likeliest gain (rsmma's SKEW, NOTES.md
    row 82; rsmmapf, row 132)."""
    if not winners:
        return []
    best, held = winners[0], set(space)
    twins = family_twins(best) + [Variant(best.family, {**best.params, name: value})
                                  for name, default in reversed(FAMILY_DEFAULTS.get(best.family, {}).items())
                                  if best[name] == default
                                  for value in FAMILY_GRID[best.family][name] if value != default]
    return [best] + [twin for twin in twins if twin in held] + winners[1:]


def layout_twin_seeds(store: Store, key: Key, families, limit: int = 4) -> list[Variant]:
    """The same (GPU, shape, M) key's fastest variants on weights in the other layouts, of the families
    searched here (``families``): a layout changes how a kernel reads its words, rarely which tile wins
    (frag32 against base on the table's picks: 4-11% faster each, NOTES.md row 69)."""
    from tunesearch.variants.layout import LAYOUTS

    twins = [t for layout in LAYOUTS if layout != key.layout
             for t in store.trials(Key(key.gpu, key.m, key.n, key.k, key.group_size, layout), status="ok")
             if t.family in families]
    return _distinct_variants((t.variant_id for t in sorted(twins, key=lambda t: t.us)), limit)


def gpu_twin_seeds(store: Store, key: Key, codes: dict[str, str], limit: int = 4) -> list[Variant]:
    """The same (M, shape, layout) key's fastest variants timed on other GPUs, this code's first, of the
    families searched here (``codes``: family -> this code). A GPU new to the store has no winners of its
    own to start from, and the H200's picks were the H100's fastest too at every key searched on both
    (NOTES.md rows 123 (d), 125 (d)), so another GPU's winners are the likeliest ones here."""
    twins = [t for t in store.trials(key, status="ok", other_gpus=True) if t.family in codes]
    ranked = sorted(twins, key=lambda t: (t.code_version != codes[t.family], t.us))
    return _distinct_variants((t.variant_id for t in ranked), limit)


@functools.lru_cache(maxsize=1)
def _packaged_picks() -> dict:
    """(N, K, group size, layout) -> [(GPU, [(m_max, variant id), ...] by M)] of the tables shipped with
    tunesearch (``dispatch.packaged_tables``), read once."""
    from .dispatch import packaged_tables

    picks: dict[tuple, list] = {}
    for gpu, entry in packaged_tables()["gpus"].items():
        for shape in entry.get("shapes", {}).values():
            held = (int(shape["n"]), int(shape["k"]), int(shape["group_size"]), shape.get("layout", "base"))
            buckets = sorted((int(b["m_max"]), b["variant"]["id"]) for b in shape.get("buckets", []))
            picks.setdefault(held, []).append((gpu, buckets))
    return picks


def packaged_table_seeds(key: Key, families) -> list[Variant]:
    """What each table shipped with tunesearch runs at this key (its shape, group size and layout, at the
    bucket holding M, or the last), the key's own GPU's first, of the families searched here: a sweep in a
    store of its own (a user's GPU, or one the tables were swept on) starts from what won on the GPUs swept
    before (the H100's sweep took 246 of its 290 picks from the first four variants a key timed, at its buckets
    the H200's four fastest there: NOTES.md row 129)."""
    tables = sorted(_packaged_picks().get((key.n, key.k, key.group_size, key.layout), []),
                    key=lambda table: table[0] != key.gpu)
    ids = []
    for _, buckets in tables:
        if buckets:  # the bucket holding M runs it; past the last bucket, the last one's
            ids.append(next((vid for m_max, vid in buckets if m_max >= key.m), buckets[-1][1]))
    return [v for v in _distinct_variants(ids, len(ids)) if v.family in families]


EDGE_CANDIDATES = 5  # the bucket's fastest variants a sweep of its smallest M times first
EDGE_BELOW = 2  # then the bucket below's: their token tiles fit in the smallest M (see key_seeds)
# a bucket's smallest M times all its seeds (its best former winner, then those) whatever its share of
# trials: the export chooses the bucket's variant among those timed at both M (the _s41 edge sweep, 6
# trials a key, timed only the first 3 of them)
EDGE_SEEDS = 1 + EDGE_CANDIDATES + EDGE_BELOW


def covering_winners(store: Store, key: Key, families, limit: int = 2, best=None) -> list[Variant]:
    """The fastest variants stored at the next larger M of this key's shape, layout and GPU, of the
    families searched here (``families``). Any tile serves a smaller M, so that bucket's winners are
    strong candidates here: the _s38 re-sweep, 10 trials a key, left M=48 slower than M=64 on three shapes
    (4096x11008 18.3 against 17.2 us) without ever timing M=64's pick there. Not a bound, though: timed at
    M=48 in _s39 that pick took 20.2 us, since a token tile's rows past M cost time (NOTES.md row 85).
    ``best``: the store's ``best_trials()``, where the caller has it already (a scan of every trial)."""
    larger = sorted({t.m for t in (store.best_trials() if best is None else best)
                     if (t.gpu_name, t.n, t.k, t.group_size, t.layout)
                     == (key.gpu, key.n, key.k, key.group_size, key.layout) and t.m > key.m})
    if not larger:
        return []
    return winners_at(store, key, larger[0], families, limit)


def winners_at(store: Store, key: Key, m: int, families, limit: int) -> list[Variant]:
    """The ``limit`` fastest distinct variants stored at M=``m`` of this key's shape, layout and GPU, of
    the families searched here."""
    at = Key(key.gpu, m, key.n, key.k, key.group_size, key.layout)
    timed = [t for t in store.trials(at, status="ok") if t.family in families]
    return _distinct_variants((t.variant_id for t in sorted(timed, key=lambda t: t.us)), limit)


def key_seeds(store: Store, key: Key, buckets: list[int], search: "KeySearch") -> tuple[list[Variant], bool]:
    """What a key's search times first, in order, those its space holds: the best former winner (a kernel change
    is usually small), the next larger M's winners (``covering_winners``), the former winner's twins along later
    parameters and the other former winners, other GPUs' winners at this key (``gpu_twin_seeds``), the packaged
    tables' picks there, the other layouts' winners, then the neighbouring keys' winners; on a key resumed in
    this code (not a bucket's smallest M), its best variant's twins first, then the rest in that order.
    ``initial_queue`` cuts this to the seed share of the budget, so what comes first is what a small budget
    still times. Also returns whether the key times a bucket's smallest M (``shapes.is_edge_key``), whose seeds
    are all timed (``initial_queue``'s ``least``)."""
    # the twins along later parameters of the key's best variant: of this code where it has one (a parameter
    # added without a kernel change, rsmma's CLUSTER: NOTES.md row 89), else of its best former winner
    current = search.fastest(1)
    former = later_parameter_twins([Variant.from_id(t.variant_id) for t in current]
                                   + former_winners(store, key, search.codes), search.space)
    best = store.best_trials()  # one scan of the store for both
    # a bucket's smallest M (shapes.is_edge_key, as the export reads it): the bucket's fastest few first,
    # since the export picks for the bucket among the variants timed at both
    stored = {t.m for t in best if (t.gpu_name, t.n, t.k, t.group_size, t.layout)
              == (key.gpu, key.n, key.k, key.group_size, key.layout)}
    edge = is_edge_key(key.m, stored)
    covering = covering_winners(store, key, search.by_family, limit=EDGE_CANDIDATES if edge else 2, best=best)
    if edge:  # and the bucket below's fastest: their token tiles are at most that M, so where the bucket's
        # larger tiles leave rows past M (below BM rsmma's box still has them: NOTES.md row 87; 4096x22016
        # M=33 took 46.8 us with bucket 48's 64-token tiles, 18.9 at M=32) these have none
        covering += winners_at(store, key, key.m - 1, search.by_family, EDGE_BELOW)
    # after a kernel change the next larger M's winners come before the former winner's twins (NOTES.md row
    # 85); a key resumed in this code has those timed already, and its best's twins are what is new, but
    # at a bucket's smallest M the bucket's fastest come first still (the export picks among those)
    ahead = former if current and not edge else former[:1] + covering
    # then other GPUs' winners at this key and what the packaged tables run there: on a GPU new to the store
    # (no winners of its own here, the next larger M not yet swept) they come first
    seeds = (ahead + [v for v in covering + former if v not in ahead] + gpu_twin_seeds(store, key, search.codes)
             + packaged_table_seeds(key, search.by_family)
             + layout_twin_seeds(store, key, search.by_family) + neighbour_seeds(store, key, buckets, best=best))
    return [v for v in dict.fromkeys(seeds) if v in search.valid], edge


def neighbour_seeds(store: Store, key: Key, buckets: list[int], limit: int = 4, best=None) -> list[Variant]:
    """Winners stored for neighbouring keys: adjacent M buckets of this shape, this M on other
    shapes, this key on another GPU (``best``: as ``covering_winners``)."""
    best = store.best_trials() if best is None else best
    idx = buckets.index(key.m) if key.m in buckets else None
    adjacent = set() if idx is None else {buckets[i] for i in (idx - 1, idx + 1) if 0 <= i < len(buckets)}
    ranked = []
    for t in best:
        if t.group_size != key.group_size or t.layout != key.layout:
            continue
        same_shape = (t.n, t.k) == (key.n, key.k)
        if t.gpu_name == key.gpu and same_shape and t.m in adjacent:
            ranked.append((0, t.variant_id))
        elif t.gpu_name == key.gpu and t.m == key.m and not same_shape:
            ranked.append((1, t.variant_id))
        elif t.gpu_name != key.gpu and same_shape and t.m == key.m:
            ranked.append((2, t.variant_id))
    return _distinct_variants((vid for _, vid in sorted(ranked)), limit)
