"""Faults survived: crashing, context-poisoning and hanging variants; kill -9 mid-sweep; two
sweeps writing one SQLite store at once. CPU, interpreter measurer, the real sweep code."""
import os
import signal
import sqlite3
import subprocess
import sys
import time

import optuna
import pytest

from tunesearch.db import Store, Sweep
from tunesearch.sweep import SweepSettings, run_sweep
from tunesearch.variants import spread_variants
from tunesearch.worker import FAULTS_ENV


@pytest.fixture(autouse=True)
def interpreter_only(kernel_device):
    if kernel_device != "cpu":
        pytest.skip("these tests drive the interpreter sweep")


def settings(**kw):
    base = dict(shapes=[(256, 72)], ms=[1], group_size=64, trials=8, interpret_test=True)
    return SweepSettings(**{**base, **kw})


def test_crashing_variants_are_failed_trials_and_the_sweep_goes_on(tmp_path, monkeypatch):
    seeds = spread_variants(1, 72, 256, 64)  # a fresh 8-trial key measures the first 4 first
    crash, poison, hang = seeds[0].id, seeds[1].id, seeds[3].id
    monkeypatch.setenv(FAULTS_ENV, f"{crash}:exit,{poison}:cuda,{hang}:hang")
    store = Store(f"sqlite:///{tmp_path}/f.db")
    result = run_sweep(store, settings(trial_timeout=8))
    assert result.status == "done" and result.worker_restarts == 3
    trials = {t.variant_id: t for t in store.trials()}
    assert len(trials) == 8
    assert trials[crash].status == "failed" and "died (exit code 134)" in trials[crash].error
    assert trials[poison].status == "failed" and "CUDA context lost" in trials[poison].error
    assert trials[hang].status == "failed" and "timed out" in trials[hang].error
    others = [t for vid, t in trials.items() if vid not in (crash, poison, hang)]
    assert len(others) == 5 and all(t.status == "ok" and t.us > 0 for t in others)


def count_trials(db):
    try:
        with sqlite3.connect(db, timeout=10) as c:
            return c.execute("select count(*) from ts_trials").fetchone()[0]
    except sqlite3.OperationalError:
        return 0


def sweep_cmd(db, trials, ms="1,3,5"):
    return [sys.executable, "-m", "tunesearch", "sweep", "--interpret-test", "--shapes", "256x72",
            "--m", ms, "--group-size", "64", "--trials", str(trials), "--db", f"sqlite:///{db}"]


def test_kill_9_mid_sweep_loses_nothing_and_resumes(tmp_path):
    db = tmp_path / "k.db"
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    proc = subprocess.Popen(sweep_cmd(db, 10), env=env, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while count_trials(db) < 6 and time.time() < deadline and proc.poll() is None:
        time.sleep(0.1)
    assert proc.poll() is None, "the sweep ended before it could be killed"
    os.killpg(proc.pid, signal.SIGKILL)  # the driver and its trial worker
    proc.wait()
    killed_at = count_trials(db)
    assert killed_at >= 6
    store = Store(f"sqlite:///{db}")
    assert all(t.status == "ok" and t.us is not None for t in store.trials())  # only whole rows
    result = run_sweep(store, SweepSettings(shapes=[(256, 72)], ms=[1, 3, 5], group_size=64, trials=10,
                                            interpret_test=True))
    trials = store.trials()
    assert result.trials_run == 30 - killed_at and len(trials) == 30
    assert len({(t.m, t.variant_id) for t in trials}) == 30
    running = [t for name in optuna.get_all_study_names(f"sqlite:///{db}")
               for t in optuna.load_study(study_name=name, storage=f"sqlite:///{db}").get_trials(
                   states=(optuna.trial.TrialState.RUNNING,))]
    assert running == []  # the killed sweep's in-flight trials were failed on resume


def fresh_postgres_url(base: str) -> str:
    """A new, empty database on the server of ``base`` (TUNESEARCH_TEST_PG)."""
    import uuid

    from sqlalchemy import create_engine, make_url

    name = f"ts_{uuid.uuid4().hex[:12]}"
    admin = create_engine(make_url(base).set(database="postgres"), isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.exec_driver_sql(f"CREATE DATABASE {name}")
    admin.dispose()
    return make_url(base).set(database=name).render_as_string(hide_password=False)


@pytest.fixture(params=["sqlite", "postgresql"])
def shared_db(request, tmp_path):
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/c.db"
    base = os.environ.get("TUNESEARCH_TEST_PG")
    if not base:
        pytest.skip("set TUNESEARCH_TEST_PG (bash scripts/postgres.sh starts a server; CI does)")
    return fresh_postgres_url(base)


def test_two_sweeps_write_one_store_at_once(shared_db):
    Store(shared_db)  # create the schema once, as a first run would
    # (a plain traceback, not typer's boxed one, in case a sweep fails: its last line names the error)
    env = {**os.environ, "TRITON_INTERPRET": "1", "TYPER_STANDARD_TRACEBACK": "1"}
    cmd = [sys.executable, "-m", "tunesearch", "sweep", "--interpret-test", "--shapes", "256x72",
           "--m", "1,3", "--group-size", "64", "--trials", "6", "--db", shared_db]
    procs = [subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for _ in range(2)]
    outs = [p.communicate(timeout=300)[0] for p in procs]
    # a failing sweep's whole output (its traceback), which pytest's repr of ``outs`` would cut short
    failed = [f"sweep {i} exited {p.returncode}:\n{out}" for i, (p, out) in enumerate(zip(procs, outs)) if p.returncode]
    assert not failed, "\n\n".join(failed)
    assert not any("locked" in out for out in outs)
    reported = sum(int(out.split(" new trials")[0].split()[-1]) for out in outs)
    rows = Store(shared_db).trials()
    assert len({(t.m, t.variant_id) for t in rows}) == len(rows)  # none duplicated
    assert reported == len(rows)  # none lost: every trial a worker counted is in the store
    assert len(rows) >= 12  # each key got at least its budget


OPEN_AT_ONCE = """
import os, sys, time
from tunesearch.db import Store
from tunesearch.sweep import optuna_storage
print("ready", flush=True)
while not os.path.exists(sys.argv[2]):  # start together, to race on creating the schema
    time.sleep(0.001)
optuna_storage(Store(sys.argv[1]))
"""


def test_workers_starting_on_a_fresh_database_create_its_schema_once(shared_db, tmp_path):
    go = tmp_path / "go"
    procs = [subprocess.Popen([sys.executable, "-c", OPEN_AT_ONCE, shared_db, str(go)],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for _ in range(6)]
    assert [p.stdout.readline() for p in procs] == ["ready\n"] * 6  # past the imports
    go.touch()
    outs = [p.communicate(timeout=120)[0] for p in procs]
    failed = [out for p, out in zip(procs, outs) if p.returncode]
    assert not failed, "\n\n".join(failed)
    assert Store(shared_db).trials() == []
    assert optuna.get_all_study_names(shared_db) == []  # Optuna's schema is in place, and empty


def test_one_process_per_gpu_deals_the_keys_and_shares_the_store(tmp_path):
    """--gpu all: one worker process per device pulls keys from a shared queue, one store. (The
    interpreter measurer ignores the device index, so two 'devices' run on the CPU here.)"""
    from tunesearch.sweep import run_sweep_all

    url = f"sqlite:///{tmp_path}/all.db"
    Store(url)
    s = SweepSettings(shapes=[(256, 72)], ms=[1, 3, 5, 8], group_size=64, trials=4, interpret_test=True)
    results, unreached = run_sweep_all(url, s, devices=[0, 1])
    assert unreached == []
    assert sorted(r[0] for r in results) == [0, 1]
    assert all(status == "done" and err is None for _, _, status, err in results)
    assert sum(n for _, n, _, _ in results) == 16
    rows = Store(url).trials()
    assert len(rows) == 16 and {t.m for t in rows} == {1, 3, 5, 8}
    assert all(sum(t.m == m for t in rows) == 4 for m in (1, 3, 5, 8))  # each key once, by one worker
    with Store(url).session() as session:
        parts = sorted(tuple(sw.settings["part"]) for sw in session.query(Sweep))
        workers_per_key = {m: {t.sweep_id for t in rows if t.m == m} for m in (1, 3, 5, 8)}
    assert parts == [(0, 2), (1, 2)]
    assert all(len(sweeps) == 1 for sweeps in workers_per_key.values())


def test_gpu_workers_stopped_by_the_budget_name_every_key_they_left_in_order(tmp_path):
    """--gpu all --more with a time budget: each worker's key pulled at its deadline and the keys still
    queued are named, in the sweep's order, so that the CLI can warn of them as it does for one GPU."""
    from tunesearch.sweep import run_sweep_all

    url = f"sqlite:///{tmp_path}/budget.db"
    Store(url)
    s = SweepSettings(shapes=[(256, 72)], ms=[1, 3, 5, 8], group_size=64, trials=4, interpret_test=True)
    assert sum(n for _, n, _, _ in run_sweep_all(url, s, devices=[0, 1])[0]) == 16
    more = SweepSettings(**{**s.__dict__, "more": 1, "time_budget": 1e-6})  # past its deadline at once
    results, unreached = run_sweep_all(url, more, devices=[0, 1])
    assert [status for _, _, status, _ in results] == ["budget", "budget"]
    assert [(k.m, k.n, k.k, k.layout) for k in unreached] == [(m, 72, 256, "base") for m in (1, 3, 5, 8)]
    assert len(Store(url).trials()) == 16  # nothing added


class Events:
    def __init__(self):
        self.calls = []

    def __getattr__(self, name):
        return lambda arg: self.calls.append(name)


def test_a_gpu_worker_that_dies_is_reported_and_the_other_takes_its_keys(tmp_path, monkeypatch):
    """--gpu all: a worker process killed outright (no word sent) must not hang the parent; the
    surviving worker pulls every key from the shared queue. Progress of all workers reaches the
    parent's display."""
    from tunesearch.sweep import run_sweep_all

    monkeypatch.setenv(FAULTS_ENV, "sweep-worker-1:exit")
    url = f"sqlite:///{tmp_path}/dead.db"
    Store(url)
    s = SweepSettings(shapes=[(256, 72)], ms=[1, 3, 5, 8], group_size=64, trials=4, interpret_test=True)
    events = Events()
    results, unreached = run_sweep_all(url, s, devices=[0, 1], progress=events)
    assert unreached == []  # the survivor reached every key: none was left by a budget
    assert results[0][1:3] == (16, "done")
    assert results[1][2] == "crashed" and "exit code 137" in results[1][3]
    assert len(Store(url).trials()) == 16
    assert events.calls.count("start_key") == 4 and events.calls.count("end_key") == 4
    assert events.calls.count("trial") == 16


def test_a_failing_setup_step_raises_with_its_error():
    from tunesearch.measure import InterpreterMeasurer
    from tunesearch.worker import IsolatedMeasurer, WorkerError

    measurer = IsolatedMeasurer("interpret", InterpreterMeasurer.test_info(), 1e9)
    try:
        with pytest.raises(WorkerError, match="prepare .* multiple of group_size"):
            measurer.prepare(1, 72, 200, 64)  # K=200 is no multiple of G=64
        measurer.prepare(1, 72, 256, 64)  # the same worker goes on
        assert measurer.fp16_us(1, 72, 256) > 0
    finally:
        measurer.close()
