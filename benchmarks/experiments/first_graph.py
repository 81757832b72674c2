"""Is it the first graph timed after new memory is mapped that runs slow? (NOTES.md row 130)

    python benchmarks/experiments/first_graph.py OUT

state_ranking.py: after 3 GB are allocated and freed (cudaMalloc'd, kept by the caching allocator) the
first variant timed over an unchanged Operands ran 8-13% slow and every later one at its usual time. Here,
4096x22016 M=1's pick over one Operands, in that state, three ways (each after its own 3 GB): the same
graph timing three times in a row; 200 eager calls first; a graph of another kernel timed first. Prints
each timing's median and its first and last replays (us a call); writes OUT/first_graph.json."""
import json
import statistics
import sys

import torch

from tunesearch import load_dispatch
from tunesearch.bench import Operands
from tunesearch.gpu import gpu_info
from tunesearch.variants import matmul

K, N, M, G = 4096, 22016, 1, 128


def replays(calls, n=30):
    """graph_time's steps, every replay's time kept (us a call)."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):
            for call in calls:
                call()
    torch.cuda.current_stream().wait_stream(stream)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for call in calls:
            call()
    graph.replay()
    torch.cuda.synchronize()
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(n)]
    for start, end in events:
        start.record()
        graph.replay()
        end.record()
    torch.cuda.synchronize()
    return [s.elapsed_time(e) * 1e3 / len(calls) for s, e in events]


def mapped():
    torch.cuda.empty_cache()  # so that the 3 GB are mapped anew each time, not taken from the cache
    blocks = [torch.empty(s << 20, dtype=torch.uint8, device="cuda") for s in (360, 720, 720, 720, 360)]
    del blocks
    torch.cuda.synchronize()


def main(out):
    info = gpu_info(0)
    mm = load_dispatch()
    dev = torch.device("cuda")
    layout = mm.layout_for(N, K, dev)
    (_, variant), = mm.plan(M, N, K, dev, layout)
    ops = Operands(M, N, K, G, info.l2_bytes, layout=layout)
    ours = [lambda c=c: matmul(c[0], c[1], c[2], variant, G, out=c[3]) for c in ops.copies]
    other = [lambda c=c: c[3].copy_(c[0][:, :N] if c[0].shape[1] >= N else c[3]) for c in ops.copies]
    report = {}

    def show(name, times):
        report[name] = times
        print(f"{name:>28}: median {statistics.median(times):5.1f}  first {' '.join(f'{t:.1f}' for t in times[:5])}"
              f"  last {' '.join(f'{t:.1f}' for t in times[-5:])}", flush=True)

    for rnd in range(2):
        torch.cuda.empty_cache()
        show(f"{rnd} light", replays(ours))
        mapped()
        for i in range(3):
            show(f"{rnd} mapped, timing {i + 1}", replays(ours))
        mapped()
        for _ in range(200):
            ours[0]()
        show(f"{rnd} mapped, 200 eager first", replays(ours))
        mapped()
        show(f"{rnd} mapped, other graph", replays(other))
        show(f"{rnd} mapped, then ours", replays(ours))
    json.dump(dict(gpu=info.to_dict(), variant=variant.id, replays=report), open(f"{out}/first_graph.json", "w"))


if __name__ == "__main__":
    main(sys.argv[1])
