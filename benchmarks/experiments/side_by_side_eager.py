"""Host and eager time of a split call with its launches side by side or one after another (NOTES.md row 121).

    python benchmarks/experiments/side_by_side_eager.py OUT

The bench times graphs; a model run eagerly pays the fork and join (two event records and waits a side
stream) on the host. For each key: host µs a call (the loop's enqueue time, no sync) and wall µs a call
over 200 eager calls ended by one sync, each setting of ``dispatch.CONCURRENT`` (True, False, "auto")
alternated three times, the least of the three kept."""
import json
import sys
import time

import torch

from tunesearch import dispatch, load_dispatch
from tunesearch.variants import quantize_pack

KEYS = [(4096, 12288, 257), (4096, 22016, 520), (4096, 11008, 1028), (4096, 12288, 1300)]


def per_call(mm, a, packed, scales, calls=200):
    for _ in range(20):
        mm(a, packed, scales)
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(calls):
        mm(a, packed, scales)
    host = (time.perf_counter() - start) / calls * 1e6
    torch.cuda.synchronize()
    return host, (time.perf_counter() - start) / calls * 1e6


def main(out):
    mm = load_dispatch()
    rows = []
    for K, N, M in KEYS:
        packed, scales = quantize_pack(torch.randn(K, N, device="cuda"), 128)
        packed = mm.prepare(packed, scales)
        a = torch.randn(M, K, device="cuda").half()
        assert mm.side_by_side(M, N, K, a.device), (K, N, M)
        settings = {"side": True, "serial": False, "auto": "auto"}
        times = {name: [] for name in settings}
        for _ in range(3):
            for name, setting in settings.items():
                dispatch.CONCURRENT = setting
                times[name].append(per_call(mm, a, packed, scales))
        dispatch.CONCURRENT = "auto"
        row = dict(K=K, N=N, M=M, **{f"{name}_{what}_us": min(t[i] for t in times[name])
                                     for name in settings for i, what in enumerate(("host", "wall"))})
        rows.append(row)
        print(f"{K}x{N} M={M}: host", " / ".join(f"{row[f'{name}_host_us']:.1f}" for name in settings),
              "us a call, eager wall", " / ".join(f"{row[f'{name}_wall_us']:.1f}" for name in settings),
              "(" + " / ".join(settings) + ")")
    json.dump(dict(gpu=torch.cuda.get_device_name(), torch=torch.__version__, rows=rows),
              open(f"{out}/side_by_side_eager.json", "w"), indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
