"""Trials dumped to JSON lines and loaded back: round trips, merges, old sweep logs, refusals, and the
packaged table rebuilt from the committed logs it was exported from."""
import gzip
import json
import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tunesearch.cli import app
from tunesearch.db import Store, StoreError, Trial
from tunesearch.db.transfer import TRIAL_FIELDS, dump_trials, load_trials
from tunesearch.export import build_table
from tunesearch.overlap import add_side_by_side_plans

ROOT = Path(__file__).resolve().parents[1]
GPU_ROW = dict(name="gpu-a", capability="9.0", sm_count=132, l2_bytes=50 << 20, memory_bytes=141 << 30,
               driver="580", torch_version="2.11", triton_version="3.6.0", datasheet_bandwidth=4.8e12)


def trial(gpu_id, gpu_name, m, variant_id, us, status="ok", code="c0", layout="base"):
    return Trial(gpu_id=gpu_id, gpu_name=gpu_name, m=m, n=64, k=256, group_size=64, layout=layout,
                 variant_id=variant_id, family=variant_id.split(".")[0], params={"BM": m}, code_version=code,
                 status=status, error=None if status == "ok" else "boom", us=us if status == "ok" else None,
                 gbps=100.0 if status == "ok" else None, roofline_frac=0.025 if status == "ok" else None,
                 versions={"driver": "580", "torch": "2.11", "triton": "3.6.0"})


@pytest.fixture
def store(tmp_path):
    s = Store(f"sqlite:///{tmp_path}/a.db")
    a = s.upsert_gpu(GPU_ROW, 4.0e12)
    b = s.upsert_gpu({**GPU_ROW, "name": "gpu-b", "sm_count": 78}, 3.0e12)
    s.add_trial(trial(a.id, "gpu-a", 1, "gemv.x", 10.0))
    s.add_trial(trial(a.id, "gpu-a", 1, "splitk.x", None, status="failed"))
    s.add_trial(trial(a.id, "gpu-a", 4, "rsmma.x", 12.5, code="r1", layout="frag32"))
    s.add_trial(trial(b.id, "gpu-b", 1, "gemv.x", 20.0))
    return s


def rows(store):
    return sorted(tuple((name, getattr(t, name)) for name in TRIAL_FIELDS if name != "created_at")
                  for t in store.trials())


def test_dump_then_load_gives_back_every_trial_and_gpu(store, tmp_path):
    path = tmp_path / "trials.jsonl.gz"
    assert dump_trials(store, path) == 4
    assert not list(tmp_path.glob(".trials*"))  # no temporary file left
    fresh = Store(f"sqlite:///{tmp_path}/b.db")
    assert load_trials(fresh, [path]) == (4, 0)
    assert rows(fresh) == rows(store)
    got = {g.name: (g.sm_count, g.copy_bandwidth, g.l2_bytes) for g in fresh.gpus()}
    assert got == {"gpu-a": (132, 4.0e12, 50 << 20), "gpu-b": (78, 3.0e12, 50 << 20)}
    assert [t.created_at for t in fresh.trials()] == [t.created_at for t in store.trials()]
    # a merge keeps what is there: the same file again adds nothing, another GPU's dump adds its own
    assert load_trials(fresh, [path]) == (0, 4)
    assert len(fresh.trials()) == 4 and len(fresh.gpus()) == 2


def test_a_failed_dump_leaves_no_file(store, tmp_path, monkeypatch):
    path = tmp_path / "t.jsonl"
    monkeypatch.setattr("tunesearch.db.transfer.json.dumps", lambda row: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        dump_trials(store, path)
    assert list(tmp_path.glob("*t.jsonl*")) == []


def test_dump_of_one_gpu(store, tmp_path):
    path = tmp_path / "b.jsonl"
    assert dump_trials(store, path, gpu="gpu-b") == 1
    line = json.loads(path.read_text())
    assert (line["gpu_name"], line["gpu"]["sm_count"], line["us"]) == ("gpu-b", 78, 20.0)


def sweep_log_line(**over):
    """A line as the sweeps' logs in benchmarks/results/ hold trials: no GPU row, params and versions as text."""
    line = dict(id=7, sweep_id=3, gpu_id=1, gpu_name="gpu-a", m=2, n=64, k=256, group_size=64, layout="base",
                variant_id="gemv.y", family="gemv", params='{"BM": 2}', code_version="c0", status="ok", error=None,
                us=5.0, spread=0.01, gbps=300.0, roofline_frac=0.1, tflops=1.0, rel_error=1e-4, fp16_us=9.0,
                speedup_fp16=1.8, versions='{"driver": "570", "torch": "2.10", "triton": "3.5.0"}',
                created_at="2026-11-30 12:00:00.5")
    return json.dumps({**line, **over})


def test_a_sweep_log_takes_its_gpu_row_from_the_gpu_at_hand(tmp_path):
    log = tmp_path / "log.jsonl.gz"
    with gzip.open(log, "wt") as f:
        f.write(sweep_log_line(variant_id="gemv.f", us=None, gbps=None, roofline_frac=None, status="failed",
                               created_at="2026-11-30 13:00:00") + "\n")
        f.write(sweep_log_line() + "\n")
        f.write(sweep_log_line(variant_id="gemv.z", gbps=400.0, roofline_frac=0.125,
                               created_at="2026-11-30 11:00:00") + "\n")
    s = Store(f"sqlite:///{tmp_path}/c.db")
    with pytest.raises(StoreError, match="gpu-a"):  # no row for its GPU and none at hand
        load_trials(s, [log])
    with pytest.raises(StoreError, match="gpu-a"):  # another GPU at hand is not that one
        load_trials(s, [log], gpu_fallback={**GPU_ROW, "name": "gpu-other"})
    assert s.trials() == []
    assert load_trials(s, [log], gpu_fallback=GPU_ROW) == (3, 0)
    (g,) = s.gpus()
    # the GPU at hand's make, the log's software, and the copy bandwidth its newest scored trial was scored
    # against (the failed trial after it has none)
    assert (g.sm_count, g.driver, g.torch_version, g.triton_version) == (132, "570", "2.10", "3.5.0")
    assert g.copy_bandwidth == pytest.approx(300.0e9 / 0.1)
    t = s.trials()[1]
    assert (t.params, t.versions["triton"], t.sweep_id) == ({"BM": 2}, "3.5.0", None)


def test_a_newer_log_updates_the_gpus_copy_bandwidth(tmp_path):
    old, new = tmp_path / "old.jsonl", tmp_path / "new.jsonl"
    old.write_text(sweep_log_line() + "\n")
    new.write_text(sweep_log_line(variant_id="gemv.n", gbps=400.0, roofline_frac=0.1,
                                  created_at="2026-12-01 00:00:00") + "\n")
    s = Store(f"sqlite:///{tmp_path}/d.db")
    load_trials(s, [new, old], gpu_fallback=GPU_ROW)  # the older file last: the newer figure stands
    (g,) = s.gpus()
    assert g.copy_bandwidth == pytest.approx(4.0e12)


@pytest.mark.parametrize("bad, message", [("{not json", "x.jsonl:2: not a trial line"),
                                          (json.dumps({"gpu_name": "gpu-a"}), "x.jsonl:2: not a trial line"),
                                          (sweep_log_line(created_at="yesterday"), "x.jsonl:2: not a trial line")])
def test_a_bad_line_is_refused_before_anything_is_written(tmp_path, bad, message):
    path = tmp_path / "x.jsonl"
    path.write_text(sweep_log_line() + "\n" + bad + "\n")
    s = Store(f"sqlite:///{tmp_path}/e.db")
    with pytest.raises(StoreError, match=message):
        load_trials(s, [path], gpu_fallback=GPU_ROW)
    assert s.trials() == [] and s.gpus() == []


def test_an_unreadable_file_is_named(tmp_path):
    s = Store(f"sqlite:///{tmp_path}/g.db")
    cut = tmp_path / "cut.jsonl.gz"
    with gzip.open(cut, "wt") as f:
        f.write(sweep_log_line() + "\n")
    cut.write_bytes(cut.read_bytes()[:-12])  # a transfer broken off
    for path in (cut, tmp_path / "missing.jsonl"):
        with pytest.raises(StoreError, match=f"{path.name}: cannot read it"):
            load_trials(s, [path], gpu_fallback=GPU_ROW)
    assert s.trials() == []


def test_cli_dump_and_load(store, tmp_path):
    runner = CliRunner()
    path = tmp_path / "t.jsonl.gz"
    r = runner.invoke(app, ["dump", str(path), "--db", store.url])
    assert r.exit_code == 0, r.output
    assert "4 trials" in r.output
    db = f"sqlite:///{tmp_path}/f.db"
    r = runner.invoke(app, ["load", str(path), str(path), "--db", db])
    assert r.exit_code == 0, r.output
    assert "loaded 4 trials" in r.output and "4 already" in r.output
    r = runner.invoke(app, ["load", str(tmp_path / "missing.jsonl"), "--db", db])
    assert r.exit_code != 0 and "missing.jsonl" in r.output


@pytest.mark.parametrize("command", [["export", "t.json"], ["show", "--plot", ""], ["dump", "t.jsonl"]])
def test_commands_that_read_the_store_make_none(tmp_path, monkeypatch, command):
    # a mistyped --db (or a run from the wrong folder) is an error naming the file, not an empty store
    monkeypatch.chdir(tmp_path)
    r = CliRunner().invoke(app, [*command, "--db", f"sqlite:///{tmp_path}/typo.db"], env={"COLUMNS": "300"})
    assert r.exit_code != 0 and "typo.db does not exist" in r.output, r.output
    r = CliRunner().invoke(app, command, env={"COLUMNS": "300", "TUNESEARCH_DB": ""})  # the default, ./tunesearch.db
    assert r.exit_code != 0 and "tunesearch.db does not exist" in r.output, r.output
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_a_database_without_a_store_is_refused_by_readers_and_left_alone(tmp_path):
    from sqlalchemy import create_engine, inspect, text

    url = f"sqlite:///{tmp_path}/other.db"
    with create_engine(url).begin() as conn:  # someone else's database
        conn.execute(text("CREATE TABLE notes (x INTEGER)"))
    with pytest.raises(StoreError, match="holds no tunesearch tables"):
        Store(url, create=False)
    assert inspect(create_engine(url)).get_table_names() == ["notes"]
    assert Store(url).trials() == []  # a sweep's store is made there


# each packaged table, the GPU it was swept on and the dump of the store it was exported from
PACKAGED = {"h200": ("NVIDIA H200", "trials_resume_h200_2026-12-04_s59.jsonl.gz"),
            "h100": ("NVIDIA H100 80GB HBM3", "trials_more_h100_2026-12-07_s84.jsonl.gz")}


@pytest.mark.parametrize("table_name", sorted(PACKAGED))
def test_the_packaged_table_is_rebuilt_from_its_committed_dump(tmp_path, table_name):
    # tunesearch/tables/h200.json is `export --current-code-only` of the store whose dump is committed
    # beside the bench (the Triton families' sweeps to _s12 and the layout sweep of _s31, loaded from their
    # logs, the _s32 sweeps resumed on them, rsmma above M=256 in _s35, rsmma re-swept at every M in _s36
    # after its staged C store, in _s37 with its skewed splits and in _s38 with its split reduction read back
    # through the ring, the twotile family at M=65..192 in _s45 and its split-K in _s46, the buckets between
    # 256 and 4096 in _s47, 4096x4096 at M=1025..1792 and M=1, 2, 32 on four shapes searched deeper in
    # _s49, twotile at 4096x22016 M=161 and 192 in _s50, rsmma and twotile re-swept in _s53 after A's row
    # box, the edges above 257 in _s54, rsmma and twotile re-swept with two_box in _s56-_s57 and with a_tail
    # in _s58-_s59): loaded into an empty store, it gives the same table, field for field, with the
    # side-by-side plans the export makes from it (tunesearch/overlap.py, about 45 s here).
    # A kernel edit without a re-sweep, or a table not exported from the dumped trials, fails here; so does
    # an edit of the split rule or the scheduler model without the plans made again (the table's own
    # buckets: ``python -m tunesearch.overlap tunesearch/tables/h200.json``).
    # tunesearch/tables/h100.json is the same of the H100's sweep (_s71: every key seeded with the H200's
    # fastest there, benchmarks/device_new_gpu.sh; _s83: `--more 3` with rsmma and rsmmapf at the split keys
    # M <= 32 of four shapes, benchmarks/device_next.sh; _s84: `--more 5` there again, reaching 4096x11008
    # and 4096x12288 M=1, 3, 5; its dump holds the H100's trials alone).
    # The plans take most of the time (a shape's thousands of M, ~15 s each here), so the shapes' are made
    # side by side in fresh processes, whose dispatch settings are the defaults this test checks against.
    gpu, dump = PACKAGED[table_name]
    table = json.loads((ROOT / f"tunesearch/tables/{table_name}.json").read_text())
    store = Store(f"sqlite:///{tmp_path}/{table_name}.db")
    load_trials(store, [ROOT / "benchmarks/results" / dump])
    with ProcessPoolExecutor(os.cpu_count() or 1, mp_context=multiprocessing.get_context("spawn")) as pool:
        rebuilt = add_side_by_side_plans(build_table(store, current_code_only=True), map_shapes=pool.map)
    assert [g.name for g in store.gpus()] == [gpu]  # one GPU row: one environment throughout
    for t in (table, rebuilt):
        t.pop("created")
    assert rebuilt == table


def test_show_written_to_a_pipe_keeps_whole_variant_ids(store, tmp_path, monkeypatch):
    # not a terminal: rich would fit the table to 80 columns, cutting the shape, M and times short ("409…")
    long_id = "rsmma.bm256.bn128.bk64.sk1.w8.s3.c2.skew4.cl2"
    store.add_trial(trial(store.find_gpu("gpu-a").id, "gpu-a", 64, long_id, 30.0, layout="frag32"))
    monkeypatch.chdir(tmp_path)
    r = CliRunner().invoke(app, ["show", "--db", store.url, "--plot", ""], env={"COLUMNS": None})
    assert r.exit_code == 0, r.output
    row = next(line for line in r.output.splitlines() if long_id in line)
    assert "256x64" in row and "30.00" in row and " 64 " in row, r.output
