"""The whole pipeline on CPU: a tiny sweep under TRITON_INTERPRET=1 with the test-only
interpreter measurer (its 'timings' are interpreter wall times, meaningless as speed)."""
import time

import optuna
import pytest
from typer.testing import CliRunner

from tunesearch.cli import app
from tunesearch.db import Key, Store, StoreError
from tunesearch.sweep import SweepSettings, run_sweep



@pytest.fixture
def interp(kernel_device):
    if kernel_device != "cpu":
        pytest.skip("the interpreter sweep runs with TRITON_INTERPRET=1")


def tiny(trials=4, **kw):
    return SweepSettings(shapes=[(256, 72)], ms=[1, 3], group_size=64, trials=trials,
                         interpret_test=True, **kw)


def test_sweep_stores_trials_and_resumes(tmp_path, interp):
    url = f"sqlite:///{tmp_path}/ts.db"
    store = Store(url)
    first = run_sweep(store, tiny())
    assert first.status == "done" and first.trials_run == 8
    trials = store.trials()
    assert len(trials) == 8
    assert len({(t.m, t.variant_id) for t in trials}) == 8  # no duplicates
    assert all(t.status == "ok" and t.us > 0 for t in trials)
    assert {t.m for t in first.best} == {1, 3}
    # Optuna's studies live in the same database
    names = optuna.get_all_study_names(storage=url)
    key1 = Key("interpreter-test", 1, 72, 256, 64).study_name
    assert sum(n.startswith(key1 + "|space-") for n in names) == 1

    again = run_sweep(Store(url), tiny())
    assert again.trials_run == 0  # nothing measured twice
    more = run_sweep(Store(url), tiny(trials=6))
    assert more.trials_run == 4  # only the 2 missing per key
    assert len(Store(url).trials()) == 12

    fresh = run_sweep(Store(url), tiny(fresh=True))
    assert fresh.trials_run == 8
    assert len(optuna.get_all_study_names(storage=url)) == 2  # one per key: fresh deleted the old ones
    assert len(Store(url).trials()) == 8


def test_more_gives_each_key_that_many_trials_beyond_those_it_has(tmp_path, interp):
    # a parameter added to a family: every key gets a few more trials (its best's twins first) whatever it
    # had, where --trials would have to exceed the most any key had
    url = f"sqlite:///{tmp_path}/ts.db"
    run_sweep(Store(url), tiny(trials=4))
    run_sweep(Store(url), SweepSettings(shapes=[(256, 72)], ms=[3], group_size=64, trials=6, interpret_test=True))
    counts = lambda: sorted((m, sum(t.m == m for t in Store(url).trials())) for m in (1, 3))  # noqa: E731
    assert counts() == [(1, 4), (3, 6)]
    more = run_sweep(Store(url), tiny(more=2))
    assert more.status == "done" and more.trials_run == 4 and counts() == [(1, 6), (3, 8)]
    # each key's 3 fastest were timed again in this sweep before the new ones (their former timings kept)
    retimed = [t for t in Store(url).trials() if t.versions.get("previous")]
    assert more.retimed == 6 and len(retimed) == 6 and sorted(t.m for t in retimed) == [1, 1, 1, 3, 3, 3]
    assert all(len(t.versions["previous"]) == 1 and t.sweep_id != t.versions["previous"][0]["sweep_id"]
               for t in retimed)
    assert run_sweep(Store(url), tiny(more=1)).trials_run == 2 and counts() == [(1, 7), (3, 9)]
    assert run_sweep(Store(url), tiny(trials=9)).retimed == 0  # --trials alone times nothing again


def test_a_changed_search_space_resumes_in_a_study_of_its_own(tmp_path, interp, monkeypatch):
    # Optuna refuses categorical choices that change within a study; a tunesearch upgrade that adds
    # a family or widens a grid must resume an existing store, not crash in it
    from tunesearch.variants import space

    url = f"sqlite:///{tmp_path}/ts.db"
    assert run_sweep(Store(url), tiny()).trials_run == 8
    grid = dict(space.FAMILY_GRID["gemv"], num_warps=(1, 2, 4, 8))  # a wider grid
    monkeypatch.setitem(space.FAMILY_GRID, "gemv", grid)
    more = run_sweep(Store(url), tiny(trials=6))
    assert more.status == "done" and more.trials_run == 4  # the 8 measured are answered from the store
    assert len(optuna.get_all_study_names(storage=url)) == 4  # two spaces x two keys
    assert len(Store(url).trials()) == 12


def test_families_restricts_the_search_and_leaves_the_others(tmp_path, interp):
    # re-tuning one family (after a kernel change): only its variants are measured, its own stored
    # count is what --trials tops up, and the other families' trials stay in the store
    url = f"sqlite:///{tmp_path}/ts.db"
    assert run_sweep(Store(url), tiny()).trials_run == 8
    before = {(t.m, t.variant_id) for t in Store(url).trials()}
    had = {m: sum(1 for t in Store(url).trials() if t.m == m and t.family == "gemv") for m in (1, 3)}
    only = run_sweep(Store(url), tiny(trials=5, families=("gemv",)))
    trials = Store(url).trials()
    new = [t for t in trials if (t.m, t.variant_id) not in before]
    assert new and all(t.family == "gemv" for t in new)
    assert only.trials_run == len(new) == sum(5 - n for n in had.values())
    assert before <= {(t.m, t.variant_id) for t in trials}
    for bad in (dict(families=("gemm", "nope")), dict(families=()), dict(families=("gemv",), fresh=True)):
        with pytest.raises(ValueError):
            tiny(**bad)


def test_layouts_time_each_key_in_each_layout_with_the_families_that_read_it(tmp_path, interp):
    # frag32 is read by rsmma (not in the interpreter) and dequant (searched from M=32): its M=1 key has
    # nothing to time, its M=32 key only dequant; the export keeps base for the shape, the only layout
    # timed at every M
    from tunesearch.export import build_table

    url = f"sqlite:///{tmp_path}/ts.db"
    settings = SweepSettings(shapes=[(256, 72)], ms=[1, 32], group_size=64, trials=3, interpret_test=True,
                             layouts=("base", "frag32"))
    result = run_sweep(Store(url), settings)
    trials = Store(url).trials()
    frag32 = [t for t in trials if t.layout == "frag32"]
    assert result.status == "done" and len(frag32) == 3
    assert {(t.m, t.family) for t in frag32} == {(32, "dequant")}
    assert all(t.status == "ok" and t.code_version.count("+") == 1 for t in frag32)  # keyed with its dequantizer
    assert {t.layout for t in trials if t.m == 1} == {"base"}
    shape = build_table(Store(url))["gpus"]["interpreter-test"]["shapes"]["256x72"]
    assert shape["layout"] == "base" and set(shape["other_layouts"]) == {"frag32"}
    # a key's first trial in frag32 is the base key's fastest variant of the same family
    twin_url = f"sqlite:///{tmp_path}/twin.db"
    run_sweep(Store(twin_url), SweepSettings(shapes=[(256, 72)], ms=[32], group_size=64, trials=2,
                                             interpret_test=True, layouts=("base", "frag32"), families=("dequant",)))
    twin = Store(twin_url).trials()
    fastest_base = min((t for t in twin if t.layout == "base"), key=lambda t: t.us)
    assert [t for t in twin if t.layout == "frag32"][0].variant_id == fastest_base.variant_id
    with pytest.raises(ValueError, match="unknown layouts k16"):
        SweepSettings(shapes=[(256, 72)], ms=[1], layouts=("base", "k16"))


def test_time_budget_stops_the_sweep(tmp_path, interp):
    store = Store(f"sqlite:///{tmp_path}/ts.db")
    result = run_sweep(store, tiny(time_budget=1e-6))
    assert result.status == "budget" and result.trials_run == 0
    assert result.keys == 0  # the summary's "over N keys": none was reached within the budget


def test_a_sweep_returns_the_keys_it_left_without_a_trial_of_this_code(tmp_path, interp):
    store = Store(f"sqlite:///{tmp_path}/ts.db")
    cut = run_sweep(store, tiny(time_budget=1e-6))
    assert [(k.m, k.layout) for k in cut.untimed] == [(1, "base"), (3, "base")]  # none reached
    assert run_sweep(store, tiny()).untimed == []


def test_the_sweep_summary_marks_older_code_and_names_keys_left_untimed(tmp_path, interp, monkeypatch):
    # A budget that ran out before a key left it with no trial of this code, while the summary showed its
    # stored best of an older code as if timed; the export (--current-code-only) then left the key out and
    # its bucket went to another family unseen (NOTES.md row 107)
    from sqlalchemy import update

    from tunesearch.db.models import Trial

    monkeypatch.setenv("COLUMNS", "200")
    db = f"sqlite:///{tmp_path}/ts.db"
    run_sweep(Store(db), tiny(trials=2))
    with Store(db).session() as s:  # M=3's trials become an older code's, and slow
        s.execute(update(Trial).where(Trial.m == 3).values(code_version="0ld0ld0ld0ld", us=1e6))
        s.commit()
    args = ["sweep", "--interpret-test", "--shapes", "256x72", "--m", "1,3", "--group-size", "64", "--trials", "2",
            "--db", db]
    r = CliRunner().invoke(app, [*args, "--time-budget", "0.000001"])
    assert r.exit_code == 0, r.output
    text = " ".join(r.output.split())
    assert "warning: 1 key(s) hold no trial of this code" in text and "256x72 M=3 (base)" in text
    assert text.count("(older code)") == 1  # M=3's best; M=1's is of this code
    r = CliRunner().invoke(app, args)  # resumed: M=3 timed with this code, faster than the old ones
    assert r.exit_code == 0, r.output
    assert "2 new trials" in r.output and "warning" not in r.output and "(older code)" not in r.output


def test_a_time_budget_is_shared_out_over_the_keys_left(tmp_path, interp, monkeypatch):
    """Each key searches until an equal share of what is left of the budget (``key_deadline``), counting
    only keys a resumed sweep has still to search; a key that ends early leaves its time to the rest."""
    from tunesearch.search import KeySearch

    store = Store(f"sqlite:///{tmp_path}/ts.db")
    first = SweepSettings(shapes=[(256, 72)], ms=[1], group_size=64, trials=4, interpret_test=True)
    assert run_sweep(store, first).trials_run == 4  # M=1 done: a resume leaves it out
    until, began = [], []  # each key's deadline, and when its search was called (its share's "now")
    monkeypatch.setattr(KeySearch, "run", lambda self, trials, deadline, *a, **kw:
                        began.append(time.time()) or until.append(deadline) or 0)
    start = time.time()
    result = run_sweep(store, SweepSettings(shapes=[(256, 72)], ms=[1, 3, 5, 9], group_size=64, trials=4,
                                            interpret_test=True, time_budget=90))
    assert len(until) == 3  # M=3, 5 and 9
    end = until[-1]  # the last key's share is all that is left: the budget's end, 90 s after the sweep began
    assert 90 <= end - start < 95
    # Shares of what was left when each key began (measured, not assumed: a slow CI machine spends seconds
    # setting up a key in the interpreter, which the budget counts)
    assert abs((until[0] - began[0]) - (end - began[0]) / 3) < 0.05  # M=3 a third: M=1 is not counted
    assert abs((until[1] - began[1]) - (end - began[1]) / 2) < 0.05  # M=5 half of the rest (M=3 ended at once)
    assert result.status == "done"


def test_a_budgeted_sweep_counts_each_keys_space_once(tmp_path, interp, monkeypatch):
    """The checks of whether a key is done (the budget's count of keys left, before and after its search)
    count its space once a sweep: a count enumerates and checks the whole space, ~0.2 s a key on sm_90."""
    from tunesearch import sweep

    counted = []
    real = sweep.key_space
    monkeypatch.setattr(sweep, "key_space", lambda key, *a, **kw: counted.append(key) or real(key, *a, **kw))
    result = run_sweep(Store(f"sqlite:///{tmp_path}/ts.db"), tiny(time_budget=600))
    assert result.status == "done" and result.trials_run == 8
    assert sorted(k.m for k in counted) == [1, 3]


def test_key_deadline_and_the_queued_keys_left():
    import queue

    from tunesearch.sweep import _queued_keys_left, key_deadline

    assert key_deadline(100.0, 190.0, 3) == 130.0
    assert key_deadline(100.0, 90.0, 3) == 100.0  # past the budget: nothing left
    assert key_deadline(100.0, float("inf"), 3) == float("inf")
    q = queue.Queue()
    for item in [*range(7), None, None]:  # 7 keys and the two workers' stop sentinels
        q.put(item)
    assert _queued_keys_left(q, 2) == 4  # this key and 7 more over two GPUs, rounded up


def test_cli_sweep_show_export(tmp_path, interp, monkeypatch):
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    db = f"sqlite:///{tmp_path}/cli.db"
    r = runner.invoke(app, ["sweep", "--interpret-test", "--shapes", "256x72", "--m", "1,3",
                            "--group-size", "64", "--trials", "3", "--db", db])
    assert r.exit_code == 0, r.output
    assert "6 new trials" in r.output  # M=1 and 3: no edge (2 is a bucket's M)
    r = runner.invoke(app, ["show", "--db", db, "--plot", str(tmp_path / "roof.png")])
    assert r.exit_code == 0, r.output
    assert (tmp_path / "roof.png").stat().st_size > 1000
    r = runner.invoke(app, ["export", str(tmp_path / "d.json"), "--db", db])
    assert r.exit_code == 0, r.output
    assert "2 buckets" in r.output


def test_export_names_buckets_timed_with_other_kernel_code(tmp_path, interp):
    # after a kernel change the store still holds the old code's trials; an export that took one of
    # them unannounced would ship a time (and maybe a pick) this code never measured
    import json

    from sqlalchemy import update

    from tunesearch.db.models import Trial

    db = f"sqlite:///{tmp_path}/ts.db"
    store = Store(db)
    run_sweep(store, tiny())
    m1 = sorted((t for t in store.trials() if t.m == 1), key=lambda t: t.us)
    stale, runner_up = m1[-1], m1[0]  # the slowest, made the fastest and of another code
    with store.session() as s:
        s.execute(update(Trial).where(Trial.id == stale.id).values(code_version="0ld0ld0ld0ld", us=1e-3))
        s.commit()
    runner = CliRunner()
    r = runner.invoke(app, ["export", str(tmp_path / "any.json"), "--db", db])
    assert r.exit_code == 0, r.output
    assert "1 of 2 buckets were timed with other kernel code" in r.output and stale.variant_id in r.output
    bucket = json.loads((tmp_path / "any.json").read_text())["gpus"]["interpreter-test"]["shapes"]["256x72"]["buckets"][0]
    assert bucket["variant"]["id"] == stale.variant_id and bucket["code"] == "0ld0ld0ld0ld"
    r = runner.invoke(app, ["export", str(tmp_path / "cur.json"), "--db", db, "--current-code-only"])
    assert r.exit_code == 0, r.output
    assert "warning" not in r.output
    bucket = json.loads((tmp_path / "cur.json").read_text())["gpus"]["interpreter-test"]["shapes"]["256x72"]["buckets"][0]
    assert bucket["variant"]["id"] == runner_up.variant_id and bucket["code"] == runner_up.code_version


def test_sweep_without_gpu_fails_with_one_clear_line(tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    r = CliRunner().invoke(app, ["sweep", "--db", f"sqlite:///{tmp_path}/x.db"])
    assert r.exit_code == 1
    assert "no CUDA GPU" in r.output


@pytest.mark.parametrize("args, message", [
    (["--shapes", "4096x"], "bad shape"),
    (["--m", "0"], "--m"),
    (["--shapes", "4000x4096", "--group-size", "128"], "multiple of --group-size"),
    (["--time-budget", "soon"], "time-budget"),
    (["--db", "notaurl"], "invalid database URL"),
])
def test_cli_rejects_bad_flags(tmp_path, args, message):
    r = CliRunner().invoke(app, ["sweep", "--interpret-test", "--db", f"sqlite:///{tmp_path}/x.db", *args]
                           if "--db" not in args else ["sweep", "--interpret-test", *args])
    assert r.exit_code == 2, r.output
    assert message in r.output


def _store_altered(tmp_path, *statements) -> str:
    """The URL of a fresh SQLite store after ``statements`` ran on it (a schema another run left)."""
    url = f"sqlite:///{tmp_path}/s.db"
    with Store(url).engine.begin() as conn:
        for statement in statements:
            conn.exec_driver_sql(statement)
    return url


def test_store_refuses_an_unknown_schema(tmp_path):
    url = _store_altered(tmp_path, "UPDATE ts_meta SET value='99' WHERE key='schema_version'")
    with pytest.raises(StoreError, match="schema 99"):
        Store(url)


def test_store_completes_a_schema_whose_version_row_was_never_written(tmp_path):
    # Workers racing on a fresh SQLite file can all lose: the one whose CREATE TABLE or version row failed
    # looks again, finds ts_meta and no row, and (before this) waited for a row none of them was left to
    # write, until each gave up with "schema unknown" (seen once in `bash scripts/test.sh`'s six-worker
    # test, test_faults). Tables without their version row are a creation to complete, not a foreign schema.
    url = _store_altered(tmp_path, "DELETE FROM ts_meta", "DROP TABLE ts_sweeps")
    again = Store(url)
    assert again.trials() == []
    with again.engine.connect() as conn:
        assert conn.exec_driver_sql("SELECT value FROM ts_meta WHERE key='schema_version'").scalar() == "1"
        assert conn.exec_driver_sql("SELECT count(*) FROM ts_sweeps").scalar() == 0


def test_store_refuses_tunesearch_tables_without_ts_meta(tmp_path):
    url = _store_altered(tmp_path, "DROP TABLE ts_meta")
    with pytest.raises(StoreError, match="tunesearch tables but no schema version"):
        Store(url)


def test_store_on_an_unreachable_server_fails_with_one_clear_line():
    # the schema lock's connection is the first a PostgreSQL store makes: its failure is a StoreError
    # naming the database (password hidden), not a driver traceback
    pytest.importorskip("psycopg")
    with pytest.raises(StoreError, match=r"cannot open database 'postgresql://ts:\*\*\*@127.0.0.1:1/x'.*refused"):
        Store("postgresql://ts:secret@127.0.0.1:1/x")


def test_store_uses_wal_on_sqlite(tmp_path):
    store = Store(f"sqlite:///{tmp_path}/w.db")
    with store.engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"


def test_edges_sweep_each_buckets_smallest_m_with_few_trials():
    from tunesearch.shapes import DEFAULT_M_BUCKETS
    from tunesearch.sweep import EDGE_TRIALS

    default = SweepSettings(shapes=[(256, 72)], ms=list(DEFAULT_M_BUCKETS), edges=True)
    assert default.edge_ms == [3, 5, 9, 17, 25, 33, 49, 65, 97, 129, 145, 161, 193, 257, 321, 385, 449, 513, 641,
                               769, 897, 1025, 1281, 1537, 1793, 2049, 2561, 3073]
    assert default.key_trials(3) == EDGE_TRIALS < default.trials == default.key_trials(4)
    assert SweepSettings(shapes=[(256, 72)], ms=[1, 3, 5], edges=True).edge_ms == [4]  # 2 is a bucket's M
    assert SweepSettings(shapes=[(256, 72)], ms=[2, 8]).edge_ms == []  # edges=False: the library's default


@pytest.mark.parametrize("args, edge_ms", [
    ([], [3, 5, 9, 17, 25, 33, 49, 65, 97, 129, 145, 161, 193, 257, 321, 385, 449, 513, 641, 769, 897, 1025,
          1281, 1537, 1793, 2049, 2561, 3073]),  # the default buckets
    (["--no-edges"], []),
    (["--m", "2,8"], []),  # a list of M: as given (scripts sweep edges of their own)
    (["--m", "2,8", "--edges"], [3]),
    (["--m", "edges", "--edges"], []),  # the edges alone: no edges of edges
])
def test_cli_sweeps_the_buckets_smallest_m_by_default(tmp_path, monkeypatch, args, edge_ms):
    from tunesearch import sweep
    from tunesearch.sweep import SweepResult

    swept = []
    monkeypatch.setattr(sweep, "run_sweep", lambda store, settings, *a, **kw:
                        swept.append(settings) or SweepResult("fake", 0.0, 0, 0, "done"))
    r = CliRunner().invoke(app, ["sweep", "--interpret-test", "--db", f"sqlite:///{tmp_path}/x.db", *args])
    assert r.exit_code == 0, r.output
    assert swept[0].edge_ms == edge_ms


def test_a_sweep_of_the_buckets_smallest_m_gives_the_export_its_choice(tmp_path, interp):
    """The buckets, then (``edges``) a key at bucket 8's smallest M (3: one past bucket 2): that key times
    bucket 8's variants first, and the export picks bucket 8's variant among those timed at both and
    records its time at M=3."""
    from tunesearch.export import build_table
    from tunesearch.search import key_space

    url = f"sqlite:///{tmp_path}/ts.db"
    settings = SweepSettings(shapes=[(256, 72)], ms=[2, 8], group_size=64, trials=3, interpret_test=True,
                             edges=True)
    assert settings.all_ms == [2, 8, 3] and settings.key_trials(3) == 3  # min(trials, EDGE_TRIALS)
    assert run_sweep(Store(url), settings).status == "done"
    store = Store(url)
    at = {m: {t.variant_id: t.us for t in store.trials(Key("interpreter-test", m, 72, 256, 64), status="ok")}
          for m in (3, 8)}
    assert len(at[8]) == 3 and len(at[3]) == 3
    offered = {v.id for v in key_space(Key("interpreter-test", 3, 72, 256, 64))}
    assert {vid for vid in at[8] if vid in offered} <= set(at[3]) and set(at[8]) & set(at[3])
    buckets = {b["m_max"]: b for b in build_table(store)["gpus"]["interpreter-test"]["shapes"]["256x72"]["buckets"]}
    assert sorted(buckets) == [2, 3, 8] and "edge" not in buckets[2] and "edge" not in buckets[3]
    pick = buckets[8]["variant"]["id"]
    assert pick in at[3] and buckets[8]["edge"] == {"m": 3, "us": round(at[3][pick], 3)}


@pytest.mark.parametrize("command, args, message", [
    ("bench", ["--m", "1,x"], "--m"),
    ("bench", ["--shapes", "4096x"], "bad shape"),
    ("bench", ["--dispatch", "missing.json"], "does not exist"),
    ("decode-bench", ["--batch", "0"], "bad --batch '0'"),
    ("decode-bench", ["--batch", "edges"], "bad --batch 'edges'"),
    ("decode-bench", ["--heads", "32", "--kv-heads", "5"], "cannot share 5 k/v heads"),
    ("decode-bench", ["--config", "missing/config.json"], "missing/config.json"),
])
def test_bench_commands_report_a_bad_flag_before_a_missing_gpu(tmp_path, command, args, message):
    # a typo is what the user can fix first: reported on any machine, with or without a GPU
    r = CliRunner().invoke(app, [command, *args])
    assert r.exit_code == 2, r.output
    assert message in r.output


def test_a_more_sweep_cut_by_its_budget_names_the_keys_it_did_not_reach(tmp_path, interp, monkeypatch):
    # --more adds its trials again at every key it reaches, so running the same sweep again to reach the
    # keys a budget left would also add them again where they were added (_s75's H200 sweep reached 21 of
    # its 28 keys and said only "over 21 keys")
    from tunesearch.search import KeySearch

    monkeypatch.setenv("COLUMNS", "200")
    db = f"sqlite:///{tmp_path}/ts.db"
    run_sweep(Store(db), tiny(trials=2))
    with monkeypatch.context() as m:  # the first key's search outlasts the whole budget
        m.setattr(KeySearch, "run", lambda self, *a, **kw: time.sleep(3.5) or 0)
        result = run_sweep(Store(db), tiny(more=1, time_budget=3))
    assert result.status == "budget" and result.keys == 1
    assert [(k.m, k.layout) for k in result.unreached] == [(3, "base")] and result.untimed == []
    args = ["sweep", "--interpret-test", "--shapes", "256x72", "--m", "1,3", "--group-size", "64", "--db", db]
    r = CliRunner().invoke(app, [*args, "--more", "1", "--time-budget", "0.000001"])
    assert r.exit_code == 0, r.output
    text = " ".join(r.output.split())
    assert "the time budget ran out before 2 key(s): 256x72 M=1,3 (base)" in text, text
    r = CliRunner().invoke(app, [*args, "--trials", "2", "--time-budget", "0.000001"])
    assert r.exit_code == 0 and "ran out before" not in r.output  # --trials resumes: no such warning
    assert run_sweep(Store(db), tiny(more=1)).unreached == []
