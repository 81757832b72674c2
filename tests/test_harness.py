"""The timing harness's settling rule (``bench.SETTLE``, NOTES.md row 130), without a GPU: which timings are
taken twice and which one is kept. The CUDA graph timing itself runs only on the device."""
from tunesearch import bench


def fake_timer(monkeypatch, segments, maps_per_timing=0):
    """Each timing returns its own ordinal as its time and maps ``maps_per_timing`` segments (a graph pool)."""
    taken = []

    def timed(calls, replays, warmup):
        taken.append(calls)
        if maps_per_timing:
            segments[0] += maps_per_timing
        return bench.Timing(us=float(len(taken)), spread=0.0, copies=len(calls), replays=replays)

    monkeypatch.setattr(bench, "_graph_time", timed)
    monkeypatch.setattr(bench, "_mapped_segments", lambda: segments[0])
    monkeypatch.setattr(bench, "_segments_at_last_timing", [None])
    return taken


def test_a_timing_after_new_mappings_is_taken_twice_and_the_second_kept(monkeypatch):
    segments = [5]
    taken = fake_timer(monkeypatch, segments)
    monkeypatch.setattr(bench, "SETTLE", True)
    assert bench.graph_time(["a"]).us == 2.0 and taken == [["a"], ["a"]]  # a process's first timing
    assert bench.graph_time(["b"]).us == 3.0 and len(taken) == 3  # nothing mapped since: once
    segments[0] = 9  # the correctness inputs' temporaries mapped before the next timing
    assert bench.graph_time(["c"]).us == 5.0 and taken[3:] == [["c"], ["c"]]
    assert bench.graph_time(["d"]).us == 6.0 and len(taken) == 6


def test_memory_a_timing_maps_itself_does_not_settle_the_next(monkeypatch):
    segments = [5]
    taken = fake_timer(monkeypatch, segments, maps_per_timing=1)
    monkeypatch.setattr(bench, "SETTLE", True)
    bench.graph_time(["a"])
    assert bench.graph_time(["b"]).us == 3.0 and len(taken) == 3  # counted after the kept timing


def test_without_settle_every_timing_is_taken_once(monkeypatch):
    segments = [5]
    taken = fake_timer(monkeypatch, segments)
    monkeypatch.setattr(bench, "SETTLE", False)
    for grown in (0, 4, 4):
        segments[0] += grown
        bench.graph_time(["x"])
    assert len(taken) == 3


def test_an_allocator_that_does_not_count_segments_settles_every_timing(monkeypatch):
    segments = [None]  # e.g. PyTorch's cudaMallocAsync backend
    taken = fake_timer(monkeypatch, segments)
    monkeypatch.setattr(bench, "SETTLE", True)
    assert bench.graph_time(["a"]).us == 2.0 and bench.graph_time(["b"]).us == 4.0 and len(taken) == 4
