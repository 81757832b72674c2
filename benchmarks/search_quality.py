"""Search quality: does the Optuna search find the exhaustive best with a fraction of the trials?

    python benchmarks/search_quality.py EXHAUSTIVE.json [OUT.json]

EXHAUSTIVE.json is `benchmarks/probe.py` run with a cap above the space size on the GPU: every
variant of a key timed once. Here the search (the sweep's own KeySearch: heuristic seeds, then
TPE over family -> params, proposals snapped to valid variants) is replayed against those
recorded timings, for several seeds, with a budget of 20% of the space. Runs on the CPU.
"""
import json
import sys
import tempfile
import time

from tunesearch.db import Key, Store
from tunesearch.measure import Result
from tunesearch.search import KeySearch
from tunesearch.variants import Variant, spread_variants
from tunesearch.variants.space import FAMILY_GRID

BUDGET_FRACTION = 0.20
WITHIN = 1.03
SEEDS = range(5)


class RecordedMeasurer:
    copy_bandwidth = 4.2e12

    def __init__(self, timings: dict[str, float | None]):
        self.timings = timings

    def measure(self, variant: Variant) -> Result:
        us = self.timings.get(variant.id)
        return Result("ok", None, us, 0.0, 0.0) if us else Result("failed", "failed in the recording")


def in_grid(variant: Variant) -> bool:
    """Recorded with an older grid? Keep only variants today's grid can propose."""
    return all(value in FAMILY_GRID[variant.family][name] for name, value in variant.params.items())


def replay(key_rows, M, K, N, seed, db_url, sampler=None):
    timings = {r["id"]: r.get("us") for r in key_rows if in_grid(Variant.from_id(r["id"]))}
    best = min(u for u in timings.values() if u)
    store = Store(db_url)
    key = Key("replay", M, N, K, 128)
    search = KeySearch(store, RecordedMeasurer(timings), key, code=f"replay{seed}", gpu_id=1,
                       sweep_id=None, versions={}, seed=seed, storage=None,
                       sampler=sampler(seed) if sampler else None)
    recorded = [Variant.from_id(vid) for vid in timings]
    search.space, search.valid = recorded, set(recorded)
    search.by_family = {}
    for v in recorded:
        search.by_family.setdefault(v.family, []).append(v)
    search.enqueue(spread_variants(M, N, K, 128))
    budget = int(BUDGET_FRACTION * len(recorded))
    search.run(budget, deadline=time.time() + 600)
    trials = sorted(search.measured().values(), key=lambda t: t.id)
    running, reached = float("inf"), None
    for i, t in enumerate(trials, 1):
        if t.us:
            running = min(running, t.us)
        if reached is None and running <= best * WITHIN:
            reached = i
    return dict(M=M, K=K, N=N, seed=seed, space=len(recorded), budget=budget, trials=len(trials),
                exhaustive_best_us=best, found_us=running, ratio=running / best, trials_to_3pct=reached)


def main(path, out=None):
    data = json.load(open(path))
    rows = [r for r in data["rows"] if r["id"] != "cublas_fp16"]
    keys = sorted({(r["M"], r["K"], r["N"]) for r in rows})
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for M, K, N in keys:
            key_rows = [r for r in rows if (r["M"], r["K"], r["N"]) == (M, K, N)]
            for seed in SEEDS:
                results.append(replay(key_rows, M, K, N, seed, f"sqlite:///{tmp}/r{M}-{seed}.db"))
    print("| M | K×N | space | budget (20%) | exhaustive best µs | found µs (median of seeds) | worst ratio | trials to ≤3% (per seed) |")
    print("|---|---|---|---|---|---|---|---|")
    for M, K, N in keys:
        rs = [r for r in results if (r["M"], r["K"], r["N"]) == (M, K, N)]
        found = sorted(r["found_us"] for r in rs)[len(rs) // 2]
        print(f"| {M} | {K}×{N} | {rs[0]['space']} | {rs[0]['budget']} | {rs[0]['exhaustive_best_us']:.2f} | "
              f"{found:.2f} | {max(r['ratio'] for r in rs):.3f} | {', '.join(str(r['trials_to_3pct']) for r in rs)} |")
    if out:
        json.dump(dict(source=path, gpu=data["gpu"]["name"], budget_fraction=BUDGET_FRACTION,
                       within=WITHIN, results=results), open(out, "w"), indent=1)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else None)
