"""The naive Triton peer computes the right answer (else the bench would compare against a wrong
kernel), and the bench table shows exactly the peers that were timed."""
import pytest
import torch

from tunesearch.benchmark import markdown_table
from tunesearch.naive import naive_matmul
from tunesearch.variants import dequantize, quantize_pack


def test_naive_peer_matches_the_dequantized_reference(kernel_device):
    gen = torch.Generator().manual_seed(4)
    M, N, K, G = 5, 72, 256, 64
    packed, scales = quantize_pack(torch.randn(K, N, generator=gen), G)
    a = torch.randn(M, K, generator=gen).half()
    ref = a.float() @ dequantize(packed, scales, G).float()
    config = dict(BM=16, BN=32, BK=64, num_warps=4, num_stages=2)
    for cfg in ([config, None] if kernel_device == "cuda" else [config]):  # None: the autotuner
        out = naive_matmul(a.to(kernel_device), packed.to(kernel_device), scales.to(kernel_device), G,
                           config=cfg).float().cpu()
        assert (out - ref).abs().max().item() / ref.abs().max().item() < 2e-3


def row(**peers):
    base = dict(K=4096, N=4096, M=1, tunesearch_us=8.0, variant="gemv.x", copy_bw_frac=0.25,
                stream_floor_us=4.6, fp16_us=14.0, speedup_fp16=1.75, speedup_best_peer=0.9)
    return {**base, **peers}


def test_bench_table_lists_the_timed_peers_only():
    table = markdown_table(dict(rows=[row(tinygemm_us=7.1, naive_triton_us=70.0), row(M=4, tinygemm_us=9.0)]))
    header, _, first, second = table.splitlines()
    assert "tinygemm µs" in header and "naive Triton µs" in header and "gemlite" not in header
    assert "| 7.1 | 70.0 |" in first and "| 9.0 | - |" in second
    assert header.count("|") == first.count("|") == second.count("|")


def test_bench_checkpoints_every_row_so_an_interrupted_run_keeps_them(tmp_path, monkeypatch):
    """`tunesearch bench` rewrites its JSON after each row; a run that dies on row 3 leaves rows 1-2
    on disk, marked incomplete, and a finished run is marked complete."""
    import json
    import types

    from tunesearch import benchmark

    info = types.SimpleNamespace(index=0, l2_bytes=1 << 20, sm_count=4, to_dict=lambda: {"name": "fake"})
    monkeypatch.setattr(benchmark, "gpu_info", lambda index: info)
    monkeypatch.setattr(benchmark.torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(benchmark.torch.cuda, "empty_cache", lambda: None)
    monkeypatch.setattr(benchmark, "measure_copy_bandwidth", lambda index: 4e12)
    monkeypatch.setattr(benchmark, "stream_read_floor", lambda *a: types.SimpleNamespace(us=8.0))
    monkeypatch.setattr(benchmark, "python_overhead_us", lambda mm, K, N: {"dispatch": 1.0})

    def fake_row(mm, K, N, M, *rest, fail_at=None):
        if M == fail_at:
            raise RuntimeError("device lost")
        return dict(K=K, N=N, M=M, tunesearch_us=10.0 + M)

    mm = types.SimpleNamespace(source="test")
    out = tmp_path / "bench.json"
    save = lambda result: benchmark.write_results(result, str(out))  # noqa: E731

    monkeypatch.setattr(benchmark, "measure_row", lambda *a: fake_row(*a, fail_at=4))
    try:
        benchmark.run_bench(mm, [(64, 32)], [1, 2, 4, 8], log=lambda r: None, checkpoint=save)
    except RuntimeError:
        pass
    kept = json.loads(out.read_text())
    assert [r["M"] for r in kept["rows"]] == [1, 2] and kept["complete"] is False
    assert kept["stream_floors"] == {"64x32": 8.0}
    assert [p.name for p in tmp_path.iterdir()] == ["bench.json"]  # no temporary file left

    monkeypatch.setattr(benchmark, "measure_row", lambda *a: fake_row(*a))
    done = benchmark.run_bench(mm, [(64, 32)], [1, 2, 4, 8], log=lambda r: None, checkpoint=save)
    assert done["complete"] is True and done["python_overhead_us"] == {"dispatch": 1.0}
    assert [r["M"] for r in json.loads(out.read_text())["rows"]] == [1, 2, 4, 8]


def test_an_interrupted_bench_prints_the_table_of_its_rows(tmp_path, monkeypatch):
    """`timeout` stops a bench with SIGTERM: the command prints the table of the rows it measured (its
    JSON has them, complete: false) and exits 130; `tunesearch bench-table` prints the same from the JSON."""
    import json
    import os
    import signal

    from typer.testing import CliRunner

    from tunesearch import benchmark, dispatch, gpu
    from tunesearch.cli import app

    monkeypatch.setattr(gpu, "require_cuda", lambda: None)
    monkeypatch.setattr(dispatch, "load_dispatch", lambda *a, **kw: None)

    def run_bench(mm, shapes, ms, group_size, peers, checkpoint, log):
        partial = dict(rows=[row(tinygemm_us=7.1)], complete=False)
        checkpoint(partial)
        os.kill(os.getpid(), signal.SIGTERM)  # as `timeout` does, mid-row
        raise AssertionError("SIGTERM did not interrupt the bench")

    monkeypatch.setattr(benchmark, "run_bench", run_bench)
    out = tmp_path / "b.json"
    result = CliRunner().invoke(app, ["bench", "--out", str(out), "--plot", ""])
    assert result.exit_code == 130, result.output
    assert "interrupted after 1 rows" in result.output and "| 4096×4096 | 1 | 8.0 |" in result.output
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # the handler is put back
    assert json.loads(out.read_text())["complete"] is False

    table = CliRunner().invoke(app, ["bench-table", str(out), str(out)])
    assert table.exit_code == 0, table.output
    assert "an interrupted run (1 rows)" in table.output
    assert table.output.count("| 4096×4096 | 1 | 8.0 |") == 2 and "tinygemm µs" in table.output
    bad = CliRunner().invoke(app, ["bench-table", str(tmp_path / "none.json")])
    assert bad.exit_code == 2 and "not a bench result" in bad.output


@pytest.mark.parametrize("plot_arg, expect", [(None, "b.png"), ("", None), ("elsewhere/p.png", "elsewhere/p.png")])
def test_the_bench_plot_goes_beside_its_json_unless_named(tmp_path, monkeypatch, plot_arg, expect):
    """`tunesearch bench --out DIR/b.json` writes DIR/b.png, not a bench.png in the working directory
    (a device run's plot was left behind there); --plot names another path, '' none."""
    from typer.testing import CliRunner

    from tunesearch import benchmark, dispatch, gpu
    from tunesearch.cli import app

    monkeypatch.setattr(gpu, "require_cuda", lambda: None)
    monkeypatch.setattr(dispatch, "load_dispatch", lambda *a, **kw: None)
    result = dict(rows=[row(M=m, tunesearch_us=8.0 + m) for m in (1, 4)], gpu={"name": "fake"},
                  date="2026-12-06", complete=True,
                  python_overhead_us={"dispatch": 17.0, "triton_launch": 140.0, "overhead": -123.0})
    monkeypatch.setattr(benchmark, "run_bench", lambda *a, **kw: result)
    run_dir, out_dir = tmp_path / "cwd", tmp_path / "results"
    run_dir.mkdir(), out_dir.mkdir()
    monkeypatch.chdir(run_dir)
    args = ["bench", "--out", str(out_dir / "b.json")] + ([] if plot_arg is None else ["--plot", plot_arg])
    if plot_arg:
        (run_dir / "elsewhere").mkdir()
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 0, r.output
    written = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file())
    wanted = {None: [], "b.png": ["results/b.png"], "elsewhere/p.png": ["cwd/elsewhere/p.png"]}[expect]
    assert written == sorted(["results/b.json"] + wanted), written
    assert "wrote" in r.output and ("b.png" in r.output or "p.png" in r.output) == (expect is not None)
