"""Side-by-side plans against the serial rule's, interleaved key by key (NOTES.md row 128).

    [TRIPLES=10] [COOL=0] python benchmarks/experiments/ab_interleaved.py OUT [K,N,M ...]

``device_dispatch_ab.sh`` times every key under one setting, then every key under the other, a run each:
minutes apart, each key a burst of a few milliseconds after the others. Here each key is timed in triples,
the serial rule's plan (``OVERLAP_PRICE = None``), the side-by-side plan (the dispatch's own factor: the
packaged table's plans), the serial plan again, graph medians with rotation as the bench takes them, back to
back; the ratio of a triple is the side-by-side time over the mean of its two serial times, so that a
clock drifting within the triple cancels. With COOL > 0 the GPU idles that many seconds before each
triple (a cool start, as a bench's first rows), else the triples run back to back and the GPU heats (the
driver's power cap lowers the SM clock within a second of tensor-core work, NOTES.md row 125 (f)).
Default keys: the plans the H200 A/B of ``_s70`` changed, and M=449..500 of 4096x12288 (128 + the rest, then
384 + the rest). Prints each key's plans and the median and quartiles of its ratios; writes
OUT/ab_interleaved.json."""
import json
import os
import statistics
import sys
import time

import torch

from tunesearch import dispatch, load_dispatch
from tunesearch.bench import Operands, graph_time
from tunesearch.gpu import gpu_info

KEYS = [(4096, 4096, 780), (4096, 11008, 270), (4096, 11008, 1040), (4096, 11008, 2720), (11008, 4096, 780),
        (11008, 4096, 1840), (4096, 12288, 450), (4096, 12288, 780), (4096, 12288, 1620), (4096, 22016, 168),
        (4096, 22016, 1170), (4096, 22016, 1940), (4096, 22016, 2720), (4096, 12288, 449), (4096, 12288, 460),
        (4096, 12288, 480), (4096, 12288, 500)]


def timed(mm, ops) -> float:
    return graph_time([lambda c=c: mm(c[0], c[1], c[2]) for c in ops.copies]).us


def main(out, keys=KEYS):
    triples, cool = int(os.environ.get("TRIPLES", "10")), float(os.environ.get("COOL", "0"))
    price = dispatch.OVERLAP_PRICE
    l2 = gpu_info(0).l2_bytes
    cuda = torch.device("cuda")
    rows = []
    for K, N, M in keys:
        # a fresh dispatcher per setting and key: a key's plan is made at its first call, with the setting then
        dispatch.OVERLAP_PRICE = None
        serial = load_dispatch()
        serial_plan = [r for r, _ in serial.plan(M, N, K, cuda)]
        ops = Operands(M, N, K, 128, l2, layout=serial.layout_for(N, K, cuda))
        timed(serial, ops)
        dispatch.OVERLAP_PRICE = price
        side = load_dispatch()
        side_plan = [r for r, _ in side.plan(M, N, K, cuda)]
        timed(side, ops)
        ratios, times = [], []
        for _ in range(triples):
            if cool:
                time.sleep(cool)
            a, b, a2 = timed(serial, ops), timed(side, ops), timed(serial, ops)
            ratios.append(2 * b / (a + a2))
            times.append((a, b, a2))
        q = statistics.quantiles(ratios, n=4)
        rows.append(dict(K=K, N=N, M=M, serial=serial_plan, side_by_side=side_plan, ratios=ratios, us=times))
        print(f"{K}x{N} M={M} {serial_plan} -> {side_plan}: side by side / serial {statistics.median(ratios):.3f}"
              f" (quartiles {q[0]:.3f}-{q[2]:.3f}; µs, last triple {times[-1][0]:.1f} {times[-1][1]:.1f}"
              f" {times[-1][2]:.1f})", flush=True)
    json.dump(dict(gpu=torch.cuda.get_device_name(), torch=torch.__version__, overlap_price=price, triples=triples,
                   cool_s=cool, rows=rows), open(f"{out}/ab_interleaved.json", "w"), indent=1)


if __name__ == "__main__":
    main(sys.argv[1], [tuple(int(x) for x in key.split(",")) for key in sys.argv[2:]] or KEYS)
