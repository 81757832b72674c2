"""Does the mapped-memory state that slows 4096x22016's pick (NOTES.md row 130) change which variant is
fastest? For a few keys, the H100 sweep's fastest current variants (its dump), each timed over one
Operands in two states, alternated, two rounds: "light" (the Operands alone, the caching allocator emptied
first) and "mapped" (3 GB more allocated and freed after the Operands, as a CheckInputs' temporaries leave
it: the state the bench times in).

    python benchmarks/experiments/state_ranking.py OUT [TOP]"""
import gzip
import json
import statistics
import sys

from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # so that it runs as a script from anywhere

from benchmarks.experiments.placement_probe import map_gb  # noqa: E402
from tunesearch.bench import Operands, time_variant  # noqa: E402
from tunesearch.gpu import gpu_info  # noqa: E402
from tunesearch.sweep import is_current  # noqa: E402
from tunesearch.variants.space import Variant  # noqa: E402

DUMP = Path(__file__).resolve().parents[2] / "benchmarks/results/trials_h100_2026-12-06_s71.jsonl.gz"
KEYS = [(4096, 22016, 1), (4096, 22016, 16), (4096, 22016, 64), (4096, 12288, 1)]
G = 128


class _Row:  # is_current reads a trial's attributes
    def __init__(self, d):
        self.__dict__.update(d)


def top(rows, K, N, M, n):
    best = {}
    for r in rows:
        if (r["k"], r["n"], r["m"]) == (K, N, M) and r["status"] == "ok" and is_current(_Row(r)):
            if r["variant_id"] not in best or r["us"] < best[r["variant_id"]]["us"]:
                best[r["variant_id"]] = r
    return sorted(best.values(), key=lambda r: r["us"])[:n]


def main(out, n=8):
    info = gpu_info(0)
    rows = [json.loads(line) for line in gzip.open(DUMP)]
    report = []
    for K, N, M in KEYS:
        cands = top(rows, K, N, M, n)
        layout = cands[0]["layout"]
        times = {c["variant_id"]: {"light": [], "mapped": [], "sweep": c["us"]} for c in cands}
        for _ in range(2):
            for state in ("light", "mapped"):
                torch.cuda.empty_cache()
                ops = Operands(M, N, K, G, info.l2_bytes, layout=layout)
                if state == "mapped":
                    map_gb()
                for c in cands:
                    times[c["variant_id"]][state].append(time_variant(Variant.from_id(c["variant_id"]), ops, 20).us)
                del ops
        print(f"{K}x{N} M={M}  (sweep, light, mapped)")
        for vid, t in sorted(times.items(), key=lambda kv: statistics.mean(kv[1]["mapped"])):
            light, mapped = statistics.mean(t["light"]), statistics.mean(t["mapped"])
            print(f"  {vid:48s} {t['sweep']:6.1f} {light:6.1f} {mapped:6.1f}", flush=True)
        report.append(dict(K=K, N=N, M=M, times=times))
    json.dump(dict(gpu=info.to_dict(), keys=report), open(f"{out}/state_ranking.json", "w"), indent=1)


if __name__ == "__main__":
    main(sys.argv[1], *map(int, sys.argv[2:]))
