"""Does the SM clock fall when a side-by-side plan fills the SMs its largest launch's last wave leaves idle
(NOTES.md row 125 (f))? 11008x4096 M=3150 as 768 + 96 + 2286 ran 45 us over the 2286 rows alone, where the
scheduler model hides the others in the 108 SMs that launch's last wave leaves idle, no SM shared.

    [ROUNDS=3] python benchmarks/experiments/side_by_side_clocks.py OUT [K,N,M ...]

For each key: the largest launch alone, each other launch alone, the plan one launch after another and side
by side (as ``side_by_side_parts.py``), each a CUDA graph of the rotated copies replayed for about a second
while ``nvidia-smi`` samples the SM clock, the power, the temperature and the clock-event reasons every
20 ms; prints each one's time a call, its clock, power and temperature (medians of the samples inside the
replay) and the reasons seen. With ROUNDS > 1, only the largest launch alone and the plan side by side, in
turn ROUNDS times (heat and order then fall on both). Writes OUT/side_by_side_clocks.json."""
import json
import os
import statistics
import subprocess
import sys
import time
from datetime import datetime
from functools import cache
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # so that it runs as a script from anywhere

from benchmarks.experiments.side_by_side_parts import plan_parts  # noqa: E402
from tunesearch import dispatch, load_dispatch  # noqa: E402
from tunesearch.gpu import gpu_info  # noqa: E402

KEYS = [(11008, 4096, 3150), (4096, 22016, 1120), (4096, 4096, 784)]


@cache  # one probe a process, not one a replay
def reasons_field() -> str:
    """nvidia-smi's name for the clock-event reasons (``clocks_throttle_reasons`` before the rename)."""
    probe = subprocess.run(["nvidia-smi", "--query-gpu=clocks_event_reasons.active", "--format=csv"],
                           capture_output=True, text=True)
    return "clocks_event_reasons.active" if probe.returncode == 0 else "clocks_throttle_reasons.active"


def replayed(fn, ops, seconds=1.0):
    """(us a call, median SM MHz, median W, median C, the clock-event reasons seen) of ``fn`` over the copies,
    replayed in one graph for ``seconds``."""
    graph = torch.cuda.CUDAGraph()
    for c in ops.copies:  # warm: compiles, first-call plans
        fn(*c[:3])
    torch.cuda.synchronize()
    with torch.cuda.graph(graph):
        for c in ops.copies:
            fn(*c[:3])
    graph.replay()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    graph.replay()
    torch.cuda.synchronize()
    replays = max(3, int(seconds / (time.perf_counter() - t0)))
    smi = subprocess.Popen(["nvidia-smi", f"--query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,{reasons_field()}",
                            "--format=csv,noheader,nounits", "-lms", "20"],
                           stdout=subprocess.PIPE, text=True)
    time.sleep(0.3)
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    began = datetime.now()
    start.record()
    for _ in range(replays):
        graph.replay()
    end.record()
    torch.cuda.synchronize()
    ended = datetime.now()
    time.sleep(0.1)
    smi.terminate()
    samples = [line.split(", ") for line in smi.communicate()[0].splitlines()]
    # the samples taken while the replays ran (nvidia-smi's timestamps are local time, as datetime.now())
    inside = [s for s in samples if began <= datetime.strptime(s[0], "%Y/%m/%d %H:%M:%S.%f") <= ended] or samples
    mhz = statistics.median(float(s[1]) for s in inside)
    watts = statistics.median(float(s[2]) for s in inside)
    celsius = statistics.median(float(s[3]) for s in inside)
    reasons = sorted({s[4] for s in inside})
    return start.elapsed_time(end) * 1e3 / (replays * len(ops.copies)), mhz, watts, celsius, reasons


def main(out, keys=KEYS):
    l2 = gpu_info(0).l2_bytes
    whole = load_dispatch(split=False)
    rows = []
    for K, N, M in keys:
        _, plan, runs, ops = plan_parts(M, N, K, whole, l2)
        if runs is None:
            print(f"{K}x{N} M={M} {plan}: not side by side, skipped")
            continue
        rounds = int(os.environ.get("ROUNDS", "1"))
        if rounds > 1:
            largest = f"{max(plan)} alone"
            order = [(f"{name} #{i}", runs[name]) for i in range(rounds) for name in (largest, "side by side")]
        else:
            order = list(runs.items())
        result = {name: replayed(fn, ops) for name, fn in order}
        dispatch.OVERLAP_PRICE = None
        rows.append(dict(K=K, N=N, M=M, plan=plan, runs={k: dict(us=v[0], mhz=v[1], watts=v[2], celsius=v[3],
                                                                   reasons=v[4]) for k, v in result.items()}))
        print(f"{K}x{N} M={M} {plan}:")
        for name, (us, mhz, watts, celsius, reasons) in result.items():
            print(f"   {name:>16} {us:8.1f} us  {mhz:6.0f} MHz  {watts:5.0f} W  {celsius:3.0f} C  {' '.join(reasons)}",
                  flush=True)
        del ops
        torch.cuda.empty_cache()
    json.dump(dict(gpu=torch.cuda.get_device_name(), rows=rows), open(f"{out}/side_by_side_clocks.json", "w"), indent=1)


if __name__ == "__main__":
    main(sys.argv[1], [tuple(int(x) for x in key.split(",")) for key in sys.argv[2:]] or KEYS)
