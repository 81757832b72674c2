"""`tunesearch bench`: the dispatch table's choice beside the peers, on the same harness."""
from __future__ import annotations

import time
from datetime import datetime, timezone

import torch

from . import bench
from .bench import CheckInputs, Operands, graph_time, kernel_bytes, relative_error, time_fp16
from .export import write_atomic
from .gpu import gpu_info, measure_copy_bandwidth, stream_read_floor
from .peers import time_gemlite, time_naive_triton, time_tinygemm


PEERS = ("tinygemm_us", "naive_triton_us", "gemlite_us")  # timed when --peers (gemlite if installed)


def python_overhead_us(mm, K: int, N: int, calls: int = 2000, M: int = 1) -> dict:
    """Host time per call (M = 1 unless given): the dispatcher, against Triton's own launch of the
    same variant (``kernel[grid](...)``, what a hand-written caller does)."""
    from tunesearch.variants.api import launch

    a = torch.randn(M, K, device="cuda", dtype=torch.float16)
    scales = torch.full((K // mm.group_size, N), 0.01, dtype=torch.float16, device="cuda")
    packed = mm.prepare(torch.randint(-2**31, 2**31 - 1, (K // 8, N), dtype=torch.int32, device="cuda"), scales)
    variant = mm.resolve(M, N, K, a.device)
    out = torch.empty(M, N, dtype=torch.float16, device="cuda")
    result = {}
    for name, call in (("triton_launch", lambda: launch(variant, a, packed, scales, out, mm.group_size)),
                       ("dispatch", lambda: mm(a, packed, scales))):
        for _ in range(50):
            call()
        torch.cuda.synchronize()
        t = time.perf_counter()
        for _ in range(calls):
            call()
        host = (time.perf_counter() - t) / calls * 1e6
        torch.cuda.synchronize()
        result[name] = host
    result["overhead"] = result["dispatch"] - result["triton_launch"]
    return result


def plan_label(parts, side_by_side: bool = False) -> str:
    """The variant a row ran, or each launch's rows and variant where M ran as several (side by side: on
    streams of their own, ``Dispatcher.side_by_side``)."""
    ids = [v.id if v else "reference" for _, v in parts]
    if len(parts) == 1:
        return ids[0]
    label = " + ".join(f"{rows}: {i}" for (rows, _), i in zip(parts, ids))
    return label + " (side by side)" if side_by_side else label


# The bench keeps the least of this many graph timings of each timed thing (bench.best_of, NOTES.md row 131).
BENCH_TIMINGS = 3


def _check(mm, M: int, N: int, K: int, group_size: int, layout: str):
    """The dispatched call's relative error on this key against dequantize-then-matmul, and its plan."""
    chk = CheckInputs(M, N, K, group_size, "cuda", layout=layout)
    err = relative_error(mm(chk.a, chk.packed, chk.scales), chk.ref)
    return err, mm.plan(M, N, K, chk.a.device, layout)  # one launch, or more where M is just past a bucket


def measure_row(mm, K: int, N: int, M: int, group_size: int, peers: bool, replays: int,
                l2_bytes: int, bw: float, floor_us: float) -> dict:
    """One (shape, M) row: correctness of the dispatched kernel, its time, fp16 and the peers."""
    layout = mm.layout_for(N, K, torch.device("cuda"))  # the weights as the table keeps them, repacked once
    # correctness first, its temporaries' GBs handed back before anything is timed: a kernel timed just
    # after they were mapped ran 6-13% slow at 4096x22016 on the H100 (NOTES.md rows 130-131)
    err, parts = _check(mm, M, N, K, group_size, layout)
    torch.cuda.empty_cache()
    ops = Operands(M, N, K, group_size, l2_bytes, layout=layout)
    ours = graph_time([lambda c=c: mm(c[0], c[1], c[2]) for c in ops.copies], replays)
    del ops
    side_by_side = mm.side_by_side(M, N, K, torch.device("cuda"), layout)
    row = dict(K=K, N=N, M=M, variant=plan_label(parts, side_by_side), layout=layout, side_by_side=side_by_side,
               rel_error=err, tunesearch_us=ours.us, tunesearch_spread=ours.spread,
               table_us=mm.table_us(M, N, K, torch.device("cuda"), layout),
               stream_floor_us=floor_us if M == 1 else None,
               roofline_us=kernel_bytes(M, N, K, group_size) / bw * 1e6,
               fp16_us=time_fp16(M, N, K, l2_bytes, replays).us)
    if peers:
        for name, timer in (("tinygemm", time_tinygemm), ("naive_triton", time_naive_triton),
                            ("gemlite", time_gemlite)):
            try:
                timing = timer(M, N, K, group_size, l2_bytes, replays)
            except Exception as exc:  # a peer that cannot run this shape is reported, not fatal
                row[f"{name}_error"] = f"{type(exc).__name__}: {exc}"[:200]
            else:
                if timing is not None:  # None: not installed (gemlite)
                    row[f"{name}_us"] = timing.us
    row["gbps"] = kernel_bytes(M, N, K, group_size) / (ours.us * 1e-6) / 1e9
    row["copy_bw_frac"] = row["gbps"] * 1e9 / bw
    row["speedup_fp16"] = row["fp16_us"] / ours.us
    peer_times = [row[k] for k in PEERS if k in row]
    row["speedup_best_peer"] = min(peer_times + [row["fp16_us"]]) / ours.us
    return row


def run_bench(mm, shapes, ms, group_size: int = 128, peers: bool = True, replays: int = 20,
              log=print, checkpoint=None) -> dict:
    """Every (shape, M) row; ``checkpoint(result)`` after each one, with ``complete`` False until
    the last row (and the host-time measurement) is in, so an interrupted run keeps its rows."""
    info = gpu_info(torch.cuda.current_device())
    bw = measure_copy_bandwidth(info.index)
    result = dict(gpu=info.to_dict(), copy_bandwidth=bw,
                  date=datetime.now(timezone.utc).isoformat(timespec="seconds"), group_size=group_size,
                  dispatch_source=mm.source, timings=BENCH_TIMINGS, complete=False,
                  stream_floors={}, rows=[])
    with bench.best_of(BENCH_TIMINGS):
        for K, N in shapes:
            floor = stream_read_floor(kernel_bytes(1, N, K, group_size), info.l2_bytes, info.sm_count, replays).us
            result["stream_floors"][f"{K}x{N}"] = floor
            for M in ms:
                row = measure_row(mm, K, N, M, group_size, peers, replays, info.l2_bytes, bw, floor)
                result["rows"].append(row)
                torch.cuda.empty_cache()
                log(row)
                if checkpoint:
                    checkpoint(result)
    result["python_overhead_us"] = python_overhead_us(mm, *shapes[0])
    result["complete"] = True
    return result


def markdown_table(result: dict) -> str:
    peers = [p for p in PEERS if any(p in r for r in result["rows"])]
    names = {"tinygemm_us": "tinygemm µs", "naive_triton_us": "naive Triton µs", "gemlite_us": "gemlite µs"}
    # "table µs": what the dispatch table predicts for the launches that ran (Dispatcher.table_us)
    lines = ["| K×N | M | tunesearch µs | table µs | variant | % copy BW | floor µs | fp16 µs | "
             + "".join(f"{names[p]} | " for p in peers) + "×fp16 | ×best peer |",
             "|---|---|---|---|---|---|---|---|" + "---|" * len(peers) + "---|---|"]
    for r in result["rows"]:
        floor = f"{r['stream_floor_us']:.1f}" if r.get("stream_floor_us") else ""
        table = f"{r['table_us']:.1f}" if r.get("table_us") is not None else ""
        times = "".join((f"{r[p]:.1f} | " if p in r else "- | ") for p in peers)
        lines.append(f"| {r['K']}×{r['N']} | {r['M']} | {r['tunesearch_us']:.1f} | {table} | `{r['variant']}` | "
                     f"{100 * r['copy_bw_frac']:.0f}% | {floor} | {r['fp16_us']:.1f} | {times}"
                     f"{r['speedup_fp16']:.2f} | {r['speedup_best_peer']:.2f} |")
    return "\n".join(lines)


def write_results(result: dict, json_path: str, plot_path: str | None = None) -> None:
    """The JSON (atomically: a run killed mid-write leaves the previous checkpoint, never a
    truncated file), and the plot."""
    write_atomic(json_path, result)
    if plot_path:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        shapes = sorted({(r["K"], r["N"]) for r in result["rows"]})
        fig, axes = plt.subplots(1, len(shapes), figsize=(4.2 * len(shapes), 3.8), squeeze=False)
        for ax, (k, n) in zip(axes[0], shapes):
            rows = [r for r in result["rows"] if (r["K"], r["N"]) == (k, n)]
            for key, label in (("tunesearch_us", "tunesearch"), ("fp16_us", "cuBLAS fp16"),
                               ("tinygemm_us", "tinygemm"), ("naive_triton_us", "naive Triton"),
                               ("gemlite_us", "gemlite"),
                               ("roofline_us", "int4 roofline (copy BW)")):
                pts = [(r["M"], r[key]) for r in rows if r.get(key)]
                if pts:
                    ax.plot([p[0] for p in pts], [p[1] for p in pts], ":" if "roofline" in key else "o-",
                            label=label)
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_title(f"K={k} N={n}")
            ax.set_xlabel("M")
            ax.set_ylabel("µs")
            ax.grid(True, which="both", alpha=0.3)
        axes[0][0].legend(fontsize=7)
        fig.suptitle(f"{result['gpu']['name']} {result['date']}")
        fig.tight_layout()
        fig.savefig(plot_path, dpi=110)
        plt.close(fig)
