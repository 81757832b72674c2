"""The timing harness's best-of rule (``bench.TIMINGS``, ``bench.best_of``, NOTES.md row 131), without a GPU:
how many timings are taken, which one is kept, and that the bench (not the sweep) takes several. The CUDA
graph timing itself runs only on the device."""
from types import SimpleNamespace

import pytest

from tunesearch import bench, benchmark


def fake_timer(monkeypatch, times):
    """Each timing returns the next of ``times`` (us) and records the calls it was given."""
    taken = []

    def timed(calls, replays, warmup):
        taken.append(calls)
        return bench.Timing(us=times[len(taken) - 1], spread=0.01 * len(taken), copies=len(calls), replays=replays)

    monkeypatch.setattr(bench, "_graph_time", timed)
    return taken


def test_by_default_each_timing_is_taken_once_as_the_sweep_stores_them(monkeypatch):
    taken = fake_timer(monkeypatch, [22.0, 19.5])
    assert bench.TIMINGS == 1
    assert bench.graph_time(["a"]).us == 22.0 and taken == [["a"]]


def test_best_of_keeps_the_least_median_whole_and_takes_each_from_the_same_calls(monkeypatch):
    taken = fake_timer(monkeypatch, [22.0, 19.4, 19.6, 30.0, 12.0, 12.5])
    with bench.best_of(3):
        kept = bench.graph_time(["a", "b"])
        assert kept.us == 19.4 and kept.spread == pytest.approx(0.02)  # the kept timing's own spread
        assert taken == [["a", "b"]] * 3
        assert bench.graph_time(["c"]).us == 12.0 and len(taken) == 6  # a slow first timing is not kept
    assert bench.TIMINGS == 1


def test_best_of_restores_the_setting_when_the_timed_work_fails():
    with pytest.raises(RuntimeError):
        with bench.best_of(4):
            assert bench.TIMINGS == 4
            raise RuntimeError("a peer that cannot run")
    assert bench.TIMINGS == 1


@pytest.mark.parametrize("timings", [0, -2])
def test_best_of_refuses_fewer_than_one_timing(timings):
    with pytest.raises(ValueError, match="at least one timing"):
        with bench.best_of(timings):
            pass
    assert bench.TIMINGS == 1


def test_run_bench_times_the_floor_and_every_row_best_of_bench_timings(monkeypatch):
    seen = []
    info = SimpleNamespace(index=0, l2_bytes=50 << 20, sm_count=132, to_dict=lambda: {"name": "fake"})
    monkeypatch.setattr(benchmark, "gpu_info", lambda device: info)
    monkeypatch.setattr(benchmark.torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(benchmark.torch.cuda, "empty_cache", lambda: None)
    monkeypatch.setattr(benchmark, "measure_copy_bandwidth", lambda device: 3e12)
    monkeypatch.setattr(benchmark, "stream_read_floor",
                        lambda *args: seen.append(("floor", bench.TIMINGS)) or SimpleNamespace(us=19.5))
    monkeypatch.setattr(benchmark, "measure_row",
                        lambda mm, K, N, M, *args: seen.append((M, bench.TIMINGS)) or dict(K=K, N=N, M=M))
    monkeypatch.setattr(benchmark, "python_overhead_us", lambda mm, K, N: {})
    result = benchmark.run_bench(SimpleNamespace(source="fake"), [(4096, 22016)], [1, 2], log=lambda row: None)
    assert seen == [("floor", 3), (1, 3), (2, 3)] and benchmark.BENCH_TIMINGS == 3
    assert result["timings"] == 3 and result["complete"] and bench.TIMINGS == 1
