"""KeySearch against a synthetic landscape: valid-only proposals, store-answered repeats."""
import time
import zlib

import optuna
import pytest

from tunesearch.db import Key, Store
from tunesearch.measure import Result
from tunesearch.search import KeySearch
from tunesearch.variants import Variant, spread_variants, variant_error


class Landscape:
    """A made-up timing per variant with one clear optimum; counts every measurement."""
    copy_bandwidth = 1e12

    def __init__(self, best_id):
        self.best_id, self.calls = best_id, []

    def measure(self, variant):
        self.calls.append(variant.id)
        us = 5.0 if variant.id == self.best_id else 20.0 + zlib.crc32(variant.id.encode()) % 1000 / 100
        return Result("ok", None, us, 0.0, 0.0)


def search(tmp_path, measurer, trials, M=1, N=4096, K=4096):
    key = Key("synthetic", M, N, K, 128)
    s = KeySearch(Store(f"sqlite:///{tmp_path}/s.db"), measurer, key, code="c", gpu_id=1,
                  sweep_id=None, versions={}, seed=0)
    s.enqueue(spread_variants(M, N, K, 128))
    s.run(trials, deadline=time.time() + 120)
    return s


def test_only_valid_variants_run_and_none_twice(tmp_path):
    m = Landscape("gemv.bm1.bn64.bk32.sk16.w8.s1")
    s = search(tmp_path, m, trials=40)
    # at most the budget of new measurements (a sampler that keeps re-proposing measured
    # variants is answered from the store and stopped after 4x the budget in asks)
    assert 30 <= len(m.calls) <= 40 and len(m.calls) == len(set(m.calls))
    assert all(variant_error(__import__("tunesearch").variants.Variant.from_id(v), 1, 4096, 4096) is None
               for v in m.calls)
    assert {v.split(".")[0] for v in m.calls} == {"gemm", "splitk", "gemv", "swapab"}
    # resuming with a larger budget measures only the difference
    m2 = Landscape(m.best_id)
    s2 = KeySearch(s.store, m2, s.key, code="c", gpu_id=1, sweep_id=None, versions={}, seed=1)
    s2.run(50, deadline=time.time() + 120)
    assert 1 <= len(m2.calls) <= 50 - len(m.calls) and not set(m2.calls) & set(m.calls)


def test_after_exploring_every_family_within_10_percent_of_the_best_shares_the_trials(tmp_path):
    """Two families whose bests are 4% apart both keep being searched; one 2x slower drops out.
    (Given to the leading family alone, the H200 sweep never found the swapab variant 9% under the
    gemv at M=1 on 11008x4096.)"""
    from types import SimpleNamespace

    def trial(family, us, status="ok"):
        return SimpleNamespace(family=family, us=us, status=status)

    known = {"a": trial("gemv", 15.5), "b": trial("gemv", 30.0), "c": trial("swapab", 16.2),
             "d": trial("splitk", 31.0), "e": trial("gemm", None, "failed")}
    assert KeySearch._contenders(known) == ["gemv", "swapab"]
    assert KeySearch._contenders({"a": trial("gemv", 15.5)}) == ["gemv"]
    assert KeySearch._contenders({"e": trial("gemm", None, "failed")}) == []


def test_seeds_leave_half_of_a_small_budget_to_the_guided_search():
    """At 20 trials and M=64 the five families' spread points (20) plus neighbours used to fill the
    whole budget: the H200 sweep's M=64 keys never reached the guided search (_s7)."""
    from tunesearch.search import initial_queue
    from tunesearch.variants import Variant, variant_space

    M, N, K = 64, 4096, 4096
    spread = spread_variants(M, N, K, 128)
    families = [v.family for v in spread[:5]]
    assert len(spread) == 20 and len(set(families)) == 5  # round by round: every family's seed first
    neighbour = Variant.from_id("swapab.bm32.bn64.bk128.sk2.w2.s4")
    queue = initial_queue([neighbour, spread[0]], spread, trials=20, space_size=len(variant_space(M, N, K)))
    assert len(queue) == 10 and queue[0] == neighbour and len(set(queue)) == 10
    assert {v.family for v in queue} == set(families)  # every family still started
    assert len(initial_queue([], spread, trials=40, space_size=12)) == 6  # the space caps the budget


class StuckSampler:
    """Proposes the first value of every parameter, always: a search that keeps returning to what it
    has already measured (TPE does this on a resumed key: 2 new variants in 208 asks on a copy of the
    H200 store, 4096x4096 at M=16)."""

    def __new__(cls):
        import optuna

        class _Stuck(optuna.samplers.BaseSampler):
            def infer_relative_search_space(self, study, trial):
                return {}

            def sample_relative(self, study, trial, search_space):
                return {}

            def sample_independent(self, study, trial, name, distribution):
                return distribution.choices[0]

        return _Stuck()


def test_a_search_stuck_on_measured_variants_measures_their_neighbours(tmp_path):
    m = Landscape("gemv.bm1.bn64.bk32.sk16.w8.s1")
    s = KeySearch(Store(f"sqlite:///{tmp_path}/s.db"), m, Key("synthetic", 1, 4096, 4096, 128), code="c",
                  gpu_id=1, sweep_id=None, versions={}, sampler=StuckSampler())
    new = s.run(24, deadline=time.time() + 120)
    # one proposal per family, then only repeats: each batch of repeats queues their nearest
    # unmeasured variants, so the budget is measured (without that: 4 new, then asks until the cap)
    assert new == 24 and len(m.calls) == 24 and len(set(m.calls)) == 24


def test_one_read_per_trial_proposes_what_a_read_per_parameter_proposes(tmp_path, monkeypatch):
    import optuna

    reads = {"n": 0}
    real = optuna.storages._CachedStorage.get_all_trials

    def counted(self, *args, **kwargs):
        reads["n"] += 1
        return real(self, *args, **kwargs)

    monkeypatch.setattr(optuna.storages._CachedStorage, "get_all_trials", counted)
    calls, counts = {}, {}
    for one in (False, True):
        monkeypatch.setattr(KeySearch, "ONE_READ_PER_TRIAL", one)
        reads["n"] = 0
        m = Landscape("gemv.bm1.bn64.bk32.sk16.w8.s1")
        s = KeySearch(Store(f"sqlite:///{tmp_path}/s{one}.db"), m, Key("synthetic", 1, 4096, 4096, 128), code="c",
                      gpu_id=1, sweep_id=None, versions={}, seed=0, storage=f"sqlite:///{tmp_path}/o{one}.db")
        s.enqueue(spread_variants(1, 4096, 4096, 128))
        s.run(30, deadline=time.time() + 120)
        calls[one], counts[one] = m.calls, reads["n"]
    assert len(calls[True]) >= 25 and calls[True] == calls[False]
    assert counts[True] < 0.6 * counts[False]


class Drifted(Landscape):
    """The same landscape on a day the GPU runs ``factor`` slower (the H200 drifted 2-5% between runs)."""

    def __init__(self, best_id, factor, failing=()):
        super().__init__(best_id)
        self.factor, self.failing = factor, set(failing)

    def measure(self, variant):
        r = super().measure(variant)
        if variant.id in self.failing:
            return Result("failed", "RuntimeError: gone", None, None, None)
        return Result(r.status, r.error, r.us * self.factor, r.spread, r.rel_error)


def test_retime_times_the_fastest_again_and_keeps_their_former_timings(tmp_path):
    """A resumed key's fastest stored variants timed again in this run replace their stored timings (the
    former ones kept in the trial's versions), so that what the run measures next races same-run times."""
    key = Key("synthetic", 1, 4096, 4096, 128)
    store = Store(f"sqlite:///{tmp_path}/s.db")
    spread = spread_variants(1, 4096, 4096, 128)
    first = KeySearch(store, Landscape(spread[2].id), key, code="c", gpu_id=1, sweep_id=None,
                      versions={"run": 1}, seed=0)
    first.enqueue(spread)
    first.run(12, deadline=time.time() + 120)
    before = {t.variant_id: t for t in store.trials(key)}
    fastest = [t.variant_id for t in sorted(before.values(), key=lambda t: t.us)[:3]]
    slower = Drifted(spread[2].id, 1.05, failing=fastest[2:])
    later = KeySearch(store, slower, key, code="c", gpu_id=1, sweep_id=None, versions={"run": 2}, seed=1)
    assert later.retime(3) == 2 and slower.calls == fastest
    after = {t.variant_id: t for t in store.trials(key)}
    for vid in fastest[:2]:
        assert after[vid].us == pytest.approx(1.05 * before[vid].us)
        assert after[vid].versions["run"] == 2
        assert [p["us"] for p in after[vid].versions["previous"]] == [before[vid].us]
    # one that does not measure ok now keeps what it had, as does every other trial
    for vid in set(before) - set(fastest[:2]):
        assert (after[vid].us, after[vid].versions) == (before[vid].us, before[vid].versions)
    assert len(after) == len(before)  # timed again, not added
    again = KeySearch(store, Drifted(spread[2].id, 1.1), key, code="c", gpu_id=1, sweep_id=None, versions={},
                      seed=2)
    assert again.retime(1) == 1
    best = min(store.trials(key), key=lambda t: t.us)
    assert [p["us"] for p in best.versions["previous"]] == [before[best.variant_id].us,
                                                            pytest.approx(1.05 * before[best.variant_id].us)]


def test_a_key_resumed_in_this_code_times_its_bests_twins_first(tmp_path):
    """A parameter added without a kernel change (rsmma's CLUSTER) leaves a key's stored trials current:
    its best variant's twins along the new parameter lead the seeds, ahead of the next larger M's winners
    (which a resumed key has timed already)."""
    from tunesearch.search import key_seeds
    from tunesearch.variants import DeviceLimits, Variant

    limits = DeviceLimits(gluon=True)
    key = Key("synthetic", 1, 11008, 4096, 128)
    store = Store(f"sqlite:///{tmp_path}/s.db")
    pick = Variant.from_id("rsmma.bm8.bn64.bk128.sk2.w4.s6.c3")
    first = KeySearch(store, Landscape(pick.id), key, code="c", gpu_id=1, sweep_id=None, versions={},
                      limits=limits, seed=0)
    first.enqueue([pick] + spread_variants(1, 11008, 4096, 128, limits))
    first.run(6, deadline=time.time() + 120)
    later = KeySearch(store, Landscape(pick.id), key, code="c", gpu_id=1, sweep_id=None, versions={},
                      limits=limits, seed=1)
    seeds, edge = key_seeds(store, key, [1, 2, 4], later)
    assert not edge and seeds[:2] == [pick, Variant.from_id(pick.id + ".cl2")]


def test_a_resumed_split_key_times_its_rsmma_best_as_rsmmapf_before_anything_else(tmp_path):
    """`sweep --more` on a frag32 key whose best is a split rsmma launch (benchmarks/device_next.sh): its first
    new trials are that launch as rsmmapf, in the ring first, ahead of its CLUSTER twin in the seeds."""
    from tunesearch.search import initial_queue, key_seeds
    from tunesearch.variants import DeviceLimits, Variant

    limits, families = DeviceLimits(gluon=True), {"rsmma", "rsmmapf"}
    key = Key("synthetic", 1, 11008, 4096, 128, "frag32")
    store = Store(f"sqlite:///{tmp_path}/s.db")
    pick = Variant.from_id("rsmma.bm8.bn64.bk128.sk2.w4.s6.c3")
    first = KeySearch(store, Landscape(pick.id), key, code="c", gpu_id=1, sweep_id=None, versions={},
                      limits=limits, seed=0, families=families)
    first.enqueue([pick, Variant.from_id("rsmma.bm8.bn64.bk128.sk4.w4.s6.c3")])
    first.run(2, deadline=time.time() + 120)
    measurer = Landscape(pick.id)
    later = KeySearch(store, measurer, key, code="c", gpu_id=1, sweep_id=None, versions={}, limits=limits,
                      seed=1, families=families)
    seeds, _ = key_seeds(store, key, [1, 2, 4], later)
    twins = [f"rsmmapf{pick.id[len('rsmma'):]}.ring1", f"rsmmapf{pick.id[len('rsmma'):]}"]
    assert [v.id for v in seeds[:4]] == [pick.id, *twins, f"{pick.id}.cl2"]
    later.enqueue(initial_queue(seeds, spread_variants(1, 11008, 4096, 128, limits, layout="frag32"), 5,
                                len(later.space)))
    later.run(5, deadline=time.time() + 120)  # two stored, three more: the twins, then the guided search's
    assert measurer.calls[:2] == twins and len(measurer.calls) == 3


def test_gluon_family_trials_are_keyed_by_their_own_code(tmp_path):
    """A Gluon family's trial (dqmma, rsmma) is stored under its sources' hash and a Triton family's under
    the search's code, so a change to either kernel source re-measures only its own family on a resumed
    key."""
    from tunesearch.search import FAMILY_SOURCES, code_version
    from tunesearch.variants import DeviceLimits

    key = Key("synthetic", 128, 4096, 4096, 128)
    limits = DeviceLimits(gluon=True)  # as on an H200; the Landscape never launches a kernel
    m = Landscape("dqmma.bm128.bn128.bk64.sk1.w8.s8")
    s = KeySearch(Store(f"sqlite:///{tmp_path}/s.db"), m, key, code="c", gpu_id=1, sweep_id=None,
                  versions={}, limits=limits, seed=0)
    s.enqueue(spread_variants(128, 4096, 4096, 128, limits))
    s.run(30, deadline=time.time() + 120)
    stored = {t.variant_id: t.code_version for t in s.store.trials(key)}
    families = {vid.split(".")[0] for vid in stored}
    assert {"dqmma", "rsmma"} <= families and len(families) > 2
    assert code_version("dqmma") != code_version("rsmma")
    for vid, code in stored.items():
        family = vid.split(".")[0]
        assert code == (code_version(family) if family in FAMILY_SOURCES else "c"), vid
    # the Triton families' code changed: their trials are measured again, the Gluon ones' answered from
    # the store
    m2 = Landscape(m.best_id)
    s2 = KeySearch(s.store, m2, key, code="c2", gpu_id=1, sweep_id=None, versions={}, limits=limits, seed=1)
    assert set(s2.measured()) == {vid for vid in stored if vid.split(".")[0] in FAMILY_SOURCES}


def test_a_changed_kernel_times_its_former_winners_first(tmp_path):
    """After a kernel change a key is searched again from scratch; the variants that won it with the
    former code are the likeliest winners still, so they lead the queue, fastest first (of the
    families searched now, measured ok, not yet timed with this code)."""
    from tunesearch.search import former_winners

    key = Key("synthetic", 1, 4096, 4096, 128)
    store = Store(f"sqlite:///{tmp_path}/s.db")
    spread = spread_variants(1, 4096, 4096, 128)
    winner = spread[2]
    old = KeySearch(store, Landscape(winner.id), key, code="old", gpu_id=1, sweep_id=None, versions={}, seed=0)
    old.enqueue(spread)
    old.run(12, deadline=time.time() + 120)
    timed = sorted((t for t in store.trials(key) if t.status == "ok"), key=lambda t: t.us)
    new = KeySearch(store, Landscape(winner.id), key, code="new", gpu_id=1, sweep_id=None, versions={}, seed=1)
    seeds = former_winners(store, key, new.codes, limit=3)
    assert [v.id for v in seeds] == [t.variant_id for t in timed[:3]]
    assert seeds[0] == winner and len(seeds) == 3
    assert former_winners(store, key, old.codes) == []  # nothing older than the code that timed them
    only_swapab = {f: c for f, c in new.codes.items() if f == "swapab"}
    assert {v.family for v in former_winners(store, key, only_swapab, limit=10)} <= {"swapab"}


def test_the_best_former_winner_is_followed_by_its_twins_along_later_parameters():
    """A parameter added after trials were stored (rsmma's CTAS, then SKEW, then CLUSTER) was never tried
    by them: the best former winner's twins along it (the newest parameter first, where the winner has its
    default and the key's space holds the twin) come right after it, before the other former winners."""
    from tunesearch.search import key_space, later_parameter_twins
    from tunesearch.variants import DeviceLimits, Variant

    hopper = DeviceLimits(gluon=True)
    key = Key("synthetic", 1, 11008, 4096, 128)
    space = key_space(key, hopper)
    split, other = (Variant.from_id(v) for v in ("rsmma.bm8.bn64.bk128.sk2.w4.s6.c3", "gemv.bm1.bn256.bk64.sk32.w2.s2"))
    queue = later_parameter_twins([split, other], space)
    assert [v.id for v in queue] == ([split.id, f"{split.id}.cl2"] + [f"{split.id}.skew{s}" for s in (2, 3, 4, 6)]
                                     + [other.id])
    one = Variant.from_id("rsmma.bm8.bn64.bk128.sk1.w4.s6")  # no split to skew; c1: its CTAS twins that fit
    twins = later_parameter_twins([one], space)[1:]
    assert twins[0].id == f"{one.id}.cl2"
    assert twins[1:] and all(t.params == {**one.params, "CTAS": t["CTAS"]} and t in space for t in twins[1:])
    # N=8256: 129 column tiles of 64, no pairs of them, so no CLUSTER twin
    odd = key_space(Key("synthetic", 1, 8256, 4096, 128), hopper)
    assert all(t["CLUSTER"] == 1 for t in later_parameter_twins([one], odd)[1:])
    assert later_parameter_twins([other, split], space) == [other, split] and later_parameter_twins([], space) == []


def test_a_split_rsmma_best_is_timed_as_rsmmapf_first_where_the_search_holds_that_family():
    """rsmmapf is rsmma's split launch with the owner's partials prefetched (1-4% at two splits on the H100,
    NOTES.md row 132): a key's best split rsmma variant is timed in that family right after it, the partials
    in the ring first, then its parameter twins; not where the search leaves the family out."""
    from tunesearch.search import key_space, later_parameter_twins
    from tunesearch.variants import DeviceLimits, Variant

    hopper = DeviceLimits(gluon=True)
    key = Key("synthetic", 1, 11008, 4096, 128, "frag32")
    split = Variant.from_id("rsmma.bm8.bn64.bk128.sk2.w4.s6.c3")
    queue = [v.id for v in later_parameter_twins([split], key_space(key, hopper))]
    assert queue[:4] == [split.id, f"rsmmapf{split.id[5:]}.ring1", f"rsmmapf{split.id[5:]}", f"{split.id}.cl2"]
    alone = [v.id for v in later_parameter_twins([split], key_space(key, hopper, families={"rsmma"}))]
    assert alone[1] == f"{split.id}.cl2" and not any(v.startswith("rsmmapf") for v in alone)
    # an rsmmapf best's own twins: the other RING first (its newest parameter)
    best = Variant.from_id("rsmmapf.bm8.bn64.bk128.sk2.w4.s6.c3")
    assert [v.id for v in later_parameter_twins([best], key_space(key, hopper))][1] == f"{best.id}.ring1"


def test_a_sweep_records_every_kernel_hash():
    from types import SimpleNamespace

    from tunesearch.search import code_version
    from tunesearch.sweep import _versions

    info = SimpleNamespace(driver="d", torch_version="t", triton_version="3.6.0", tunesearch_version="0")
    versions = _versions(info, code_version())
    assert versions["code"] == code_version() and versions["code_dqmma"] == code_version("dqmma")
    assert versions["code_rsmma"] == code_version("rsmma")
    assert versions["code_rsmmapf"] == code_version("rsmmapf") != code_version("rsmma")


def test_a_trial_another_worker_took_and_finished_is_skipped(tmp_path):
    """On SQLite two workers can pop the same queued trial (Optuna's row lock is a no-op there), and one
    that answers it from the store tells it at once. The other worker must drop it, whether the trial is
    finished before its owner stamp, before its proposal or just before its own tell (Optuna raises
    ValueError there, which crashed one of two sweeps on one store in CI), and go on searching, not crash."""
    m = Landscape("gemv.bm1.bn64.bk32.sk16.w8.s1")
    key = Key("synthetic", 1, 4096, 4096, 128)
    s = KeySearch(Store(f"sqlite:///{tmp_path}/s.db"), m, key, code="c", gpu_id=1, sweep_id=None,
                  versions={}, seed=0)
    s.enqueue(spread_variants(1, 4096, 4096, 128))
    ask, suggest, tell, taken = s.study.ask, s._suggest, s.study.tell, []

    def finish(trial):  # what the other worker does
        tell(trial.number, state=optuna.trial.TrialState.FAIL)
        taken.append(trial.number)

    def ask_then_taken(*args, **kwargs):
        trial = ask(*args, **kwargs)
        if trial.number % 3 == 0:  # before this worker's owner stamp
            finish(trial)
        return trial

    def taken_then_suggest(trial):
        if trial.number % 3 == 1:  # after the stamp, before the proposal
            finish(trial)
        return suggest(trial)

    def taken_then_tell(trial, *args, **kwargs):
        if trial.number % 3 == 2:  # after the proposal and the measurement, before this worker's tell
            finish(trial)
        return tell(trial, *args, **kwargs)

    s.study.ask, s._suggest, s.study.tell = ask_then_taken, taken_then_suggest, taken_then_tell
    s.run(20, deadline=time.time() + 120)
    assert all(any(n % 3 == r for n in taken) for r in range(3))
    assert len(m.calls) >= 10 and len(m.calls) == len(set(m.calls))  # it went on; nothing measured twice


def test_the_next_larger_buckets_winners_are_timed_right_after_the_former_best(tmp_path):
    """Any tile serves a smaller M, so the next larger bucket's winner is a strong candidate for a key; it
    comes right after the key's best former winner, inside even a small budget's seed share (the _s38
    re-sweep never timed M=64's pick at M=48, whose own pick then ran 6% slower than M=64's)."""
    from tunesearch.search import covering_winners, initial_queue, key_seeds

    store = Store(f"sqlite:///{tmp_path}/s.db")
    N, K = 11008, 4096
    k48, k64 = (Key("synthetic", m, N, K, 128) for m in (48, 64))
    spread = spread_variants(48, N, K, 128)
    cover, former_best = spread[3], spread[1]
    assert variant_error(cover, 64, N, K, 128) is None
    at64 = KeySearch(store, Landscape(cover.id), k64, code="old", gpu_id=1, sweep_id=None, versions={}, seed=0)
    at64.enqueue([cover, spread[0]])
    at64.run(4, deadline=time.time() + 120)
    # another shape's M=64 winner is no bound for this one
    other = KeySearch(store, Landscape(spread[5].id), Key("synthetic", 64, 4096, 4096, 128), code="old",
                      gpu_id=1, sweep_id=None, versions={}, seed=0)
    other.enqueue([spread[5]])
    other.run(2, deadline=time.time() + 120)
    old = KeySearch(store, Landscape(former_best.id), k48, code="old", gpu_id=1, sweep_id=None, versions={}, seed=0)
    old.enqueue([former_best] + spread[4:10])
    old.run(8, deadline=time.time() + 120)
    assert cover.id not in {t.variant_id for t in store.trials(k48)}

    new = KeySearch(store, Landscape(former_best.id), k48, code="new", gpu_id=1, sweep_id=None, versions={}, seed=1)
    assert covering_winners(store, k48, new.by_family, limit=1) == [cover]
    assert covering_winners(store, k64, new.by_family) == []  # no larger bucket stored
    seeds, at_edge = key_seeds(store, k48, [48, 64], new)
    assert not at_edge and seeds[:2] == [former_best, cover] and len(seeds) == len(set(seeds))
    assert spread[5] not in seeds[:3]
    assert initial_queue(seeds, spread, trials=10, space_size=len(new.space))[:2] == [former_best, cover]


def test_a_buckets_smallest_m_times_the_buckets_fastest_few_first(tmp_path):
    """A key one past a stored key is a bucket's smallest M (``--m edges``): the export picks for the bucket
    among the variants timed at both, so its search starts with the bucket's EDGE_CANDIDATES fastest, where
    an ordinary key takes the next larger bucket's two; then the bucket below's fastest."""
    from tunesearch.search import EDGE_CANDIDATES, EDGE_SEEDS, initial_queue, key_seeds

    store = Store(f"sqlite:///{tmp_path}/s.db")
    N, K = 11008, 4096
    k48, k49, k64 = (Key("synthetic", m, N, K, 128) for m in (48, 49, 64))
    spread = [v for v in spread_variants(49, N, K, 128) if variant_error(v, 64, N, K, 128) is None]
    at64 = KeySearch(store, Landscape(spread[0].id), k64, code="c", gpu_id=1, sweep_id=None, versions={}, seed=0)
    at64.enqueue(spread[:8])
    at64.run(8, deadline=time.time() + 120)
    fastest = [Variant.from_id(t.variant_id) for t in sorted(store.trials(k64, status="ok"), key=lambda t: t.us)]
    edge = KeySearch(store, Landscape(spread[0].id), k49, code="c", gpu_id=1, sweep_id=None, versions={}, seed=0)
    seeds, at_edge = key_seeds(store, k49, [49, 64], edge)
    assert not at_edge and seeds[:2] == fastest[:2]  # no key at 48 yet: an ordinary key
    at48 = KeySearch(store, Landscape(spread[0].id), k48, code="c", gpu_id=1, sweep_id=None, versions={}, seed=0)
    below = next(v for v in spread[8:] if v in edge.valid)  # not timed at 64
    at48.enqueue([below])
    at48.run(1, deadline=time.time() + 120)
    seeds, at_edge = key_seeds(store, k49, [33, 49], edge)  # `--m edges` sweeps the edges alone: 48 is no neighbour
    assert at_edge
    want = [v for v in fastest if v in edge.valid][:EDGE_CANDIDATES]
    assert len(want) == EDGE_CANDIDATES and seeds[:EDGE_CANDIDATES] == want
    assert seeds[EDGE_CANDIDATES] == below
    # all of them are timed, whatever the key's trials (at 6 a key, half of them went to only 3 seeds)
    assert initial_queue(seeds, [], trials=6, space_size=len(edge.space), least=EDGE_SEEDS) == seeds[:6]
    assert initial_queue(seeds, [], trials=10, space_size=len(edge.space), least=EDGE_SEEDS) == seeds[:EDGE_SEEDS]
    assert len(initial_queue(seeds, [], trials=6, space_size=len(edge.space))) == 3  # an ordinary key: half


def test_a_gpu_new_to_the_store_times_another_gpus_fastest_at_the_key_first(tmp_path):
    """A GPU with no trials of its own starts each key from what won it on the GPUs already swept, fastest
    first, those of this code before those of an older one; a key of another M, shape or layout lends
    nothing, and a GPU's own winners come before another's."""
    from tunesearch.search import gpu_twin_seeds, initial_queue, key_seeds

    store = Store(f"sqlite:///{tmp_path}/s.db")
    N, K = 11008, 4096
    spread = spread_variants(16, N, K, 128)
    done = Key("gpu-a", 16, N, K, 128)
    fast = spread[5]
    swept = KeySearch(store, Landscape(fast.id), done, code="c", gpu_id=1, sweep_id=None, versions={}, seed=0)
    swept.enqueue(spread[:8])
    swept.run(8, deadline=time.time() + 120)
    ranked = [Variant.from_id(t.variant_id) for t in sorted(store.trials(done, status="ok"), key=lambda t: t.us)]
    class Fastest(Landscape):
        def measure(self, variant):
            return Result("ok", None, 1.0, 0.0, 0.0)

    old = KeySearch(store, Fastest(spread[9].id), done, code="older", gpu_id=1, sweep_id=None, versions={},
                    seed=0)
    old.enqueue([spread[9]])  # the fastest time of all, but of an older code
    old.run(1, deadline=time.time() + 120)
    assert min(store.trials(done), key=lambda t: t.us).variant_id == spread[9].id
    elsewhere = KeySearch(store, Landscape(spread[10].id), Key("gpu-a", 32, N, K, 128), code="c", gpu_id=1,
                          sweep_id=None, versions={}, seed=0)
    elsewhere.enqueue([spread[10]])
    elsewhere.run(1, deadline=time.time() + 120)

    new_key = Key("gpu-b", 16, N, K, 128)
    new = KeySearch(store, Landscape(fast.id), new_key, code="c", gpu_id=2, sweep_id=None, versions={}, seed=0)
    twins = gpu_twin_seeds(store, new_key, new.codes, limit=10)
    assert twins[0] == fast and twins[:8] == ranked and twins[8] == spread[9] and spread[10] not in twins
    assert gpu_twin_seeds(store, Key("gpu-b", 16, N, K, 128, "frag32"), new.codes) == []
    assert gpu_twin_seeds(store, done, swept.codes) == []  # a GPU is no twin of itself
    seeds, at_edge = key_seeds(store, new_key, [16, 32], new)
    assert not at_edge and seeds[:4] == ranked[:4]
    assert initial_queue(seeds, spread, trials=8, space_size=len(new.space)) == ranked[:4]
    # once gpu-b has its own winner at the next larger M, that comes first
    mine = KeySearch(store, Landscape(spread[11].id), Key("gpu-b", 32, N, K, 128), code="c", gpu_id=2,
                     sweep_id=None, versions={}, seed=0)
    mine.enqueue([spread[11]])
    mine.run(1, deadline=time.time() + 120)
    seeds, _ = key_seeds(store, new_key, [16, 32], new)
    assert seeds[0] == spread[11] and seeds[1:5] == ranked[:4]


def test_a_store_of_its_own_starts_each_key_from_the_packaged_tables_picks(tmp_path):
    """A sweep in an empty store (a user's GPU, one that no table was swept on) times first what each
    packaged table runs at the key, the key's own GPU's first: the pick of the bucket holding M, or the last
    bucket's past it; a layout or shape no table keeps lends nothing."""
    import json
    from pathlib import Path

    from tunesearch.search import initial_queue, key_seeds, packaged_table_seeds
    from tunesearch.variants import DeviceLimits

    tables = Path(__file__).resolve().parents[1] / "tunesearch" / "tables"
    def pick(name, m):  # what the table named runs at M on 11008x4096 (K=4096, N=11008)
        gpu = next(iter(json.loads((tables / f"{name}.json").read_text())["gpus"].values()))
        buckets = gpu["shapes"]["4096x11008"]["buckets"]
        return Variant.from_id(next((b for b in buckets if b["m_max"] >= m), buckets[-1])["variant"]["id"])

    everything = {"rsmma", "rsmmapf", "twotile", "dequant"}
    for m in (1, 3, 40, 4096, 5000):
        key = Key("NVIDIA H200", m, 11008, 4096, 128, "frag32")
        want = list(dict.fromkeys([pick("h200", m), pick("h100", m)]))
        assert packaged_table_seeds(key, everything) == want, m
    # a pick of a family the sweep leaves out is no seed: the H100's M=1 pick is rsmmapf (_s83), the H200's rsmma
    assert pick("h100", 1).family == "rsmmapf" and pick("h200", 1).family == "rsmma"
    m1 = Key("NVIDIA H200", 1, 11008, 4096, 128, "frag32")
    assert packaged_table_seeds(m1, everything - {"rsmmapf"}) == [pick("h200", 1)]
    assert pick("h200", 40) == pick("h200", 48) != pick("h200", 49)  # the bucket 33..48 holds M=40
    new_gpu = Key("gpu-new", 16, 11008, 4096, 128, "frag32")
    assert packaged_table_seeds(new_gpu, everything) == list(dict.fromkeys([pick("h100", 16), pick("h200", 16)]))
    assert packaged_table_seeds(new_gpu, {"twotile"}) == []
    assert packaged_table_seeds(Key("gpu-new", 16, 11008, 4096, 128, "base"), everything) == []
    assert packaged_table_seeds(Key("gpu-new", 16, 4096, 8192, 128, "frag32"), everything) == []

    store = Store(f"sqlite:///{tmp_path}/s.db")
    search = KeySearch(store, Landscape("none"), new_gpu, code="c", gpu_id=1, sweep_id=None, versions={},
                       limits=DeviceLimits(gluon=True), seed=0)
    seeds, _ = key_seeds(store, new_gpu, [16, 32], search)
    first = packaged_table_seeds(new_gpu, search.by_family)
    assert first and seeds[:len(first)] == first
    assert initial_queue(seeds, [], trials=8, space_size=len(search.space))[:len(first)] == first


class SlowCompiler:
    """A compile pool whose round takes past the key's deadline (the clock below jumps)."""

    def __init__(self, clock):
        self.clock, self.rounds, self.layouts = clock, [], []

    def compile(self, variant_ids, M, N, K, group_size, layout="base"):
        self.rounds.append(list(variant_ids))
        self.layouts.append(layout)
        self.clock.now += 10.0
        return {vid: None for vid in variant_ids}


class Clock:
    """search.time as the search reads it: the time stands still unless a test moves it."""

    def __init__(self):
        self.now = 1000.0

    def time(self):
        return self.now


def key_search(tmp_path, measurer):
    s = KeySearch(Store(f"sqlite:///{tmp_path}/s.db"), measurer, Key("synthetic", 1, 4096, 4096, 128),
                  code="c", gpu_id=1, sweep_id=None, versions={}, seed=0)
    s.enqueue(spread_variants(1, 4096, 4096, 128))
    return s


def test_past_the_deadline_a_batch_measures_what_was_compiled_for_it(tmp_path, monkeypatch):
    """A key whose share of a sweep's budget is shorter than one compile round still measures that
    round (the default sweep on a cold cache left its first key with no trial), and no further round
    starts."""
    clock = Clock()
    monkeypatch.setattr("tunesearch.search.time", clock)
    m, compiler = Landscape("gemv.bm1.bn64.bk32.sk16.w8.s1"), SlowCompiler(clock)
    s = key_search(tmp_path, m)
    assert s.run(12, deadline=clock.now + 1.0, compiler=compiler, batch=4) == 4
    assert len(compiler.rounds) == 1 and sorted(m.calls) == sorted(compiler.rounds[0])


def test_a_frag32_key_compiles_ahead_on_frag32_weights(tmp_path, monkeypatch):
    """The compile pool builds a key's variants for the weights it times them on: a frag32 key's rounds, its
    new trials' and its stored bests' retimes, ask for frag32 (_s81: the pool built every variant for base
    weights, so rsmmapf, which reads frag32 only, failed to compile at every trial of the sweep)."""
    from tunesearch.variants import DeviceLimits

    clock = Clock()
    monkeypatch.setattr("tunesearch.search.time", clock)
    limits, families = DeviceLimits(gluon=True), {"rsmma", "rsmmapf"}
    key = Key("synthetic", 1, 11008, 4096, 128, "frag32")
    m, compiler = Landscape("rsmma.bm8.bn64.bk128.sk2.w4.s6.c3"), SlowCompiler(clock)
    s = KeySearch(Store(f"sqlite:///{tmp_path}/s.db"), m, key, code="c", gpu_id=1, sweep_id=None, versions={},
                  limits=limits, seed=0, families=families)
    s.enqueue(spread_variants(1, 11008, 4096, 128, limits, layout="frag32"))
    assert s.run(4, deadline=clock.now + 1.0, compiler=compiler, batch=4) == 4
    assert s.retime(2, compiler) == 2
    assert len(compiler.layouts) == 2 and set(compiler.layouts) == {"frag32"}


def test_past_the_deadline_without_a_compile_pool_a_key_measures_one_variant(tmp_path, monkeypatch):
    """Where each measurement compiles its own kernel, a key past its deadline before its first
    measurement measures one variant, and then stops."""
    clock = Clock()
    monkeypatch.setattr("tunesearch.search.time", clock)
    m = Landscape("gemv.bm1.bn64.bk32.sk16.w8.s1")
    s = key_search(tmp_path, m)
    real_proposal = s._proposal

    def slow_proposal(trial):  # the batch's asks take past the deadline
        clock.now += 10.0
        return real_proposal(trial)

    monkeypatch.setattr(s, "_proposal", slow_proposal)
    assert s.run(12, deadline=clock.now + 1.0, batch=4) == 1 and len(m.calls) == 1
