"""The fastest stored trials of one GPU's keys (`python store_top.py DB GPU_SUBSTRING [N]`): what a sweep on
a GPU the packaged table was not swept on found, key by key, beside what it seeded from."""
import collections
import sys

from tunesearch.db import Store

db, gpu = sys.argv[1], sys.argv[2]
shown = int(sys.argv[3]) if len(sys.argv) > 3 else 5
by_key = collections.defaultdict(list)
for t in Store(db).trials(status="ok"):
    if gpu in t.gpu_name:
        by_key[(t.k, t.n, t.m)].append(t)
for (k, n, m), trials in sorted(by_key.items()):
    trials.sort(key=lambda t: t.us)
    print(f"{k}x{n} M={m}: {len(trials)} trials")
    for t in trials[:shown]:
        print(f"   {t.us:7.2f} {t.layout:7} {t.variant_id}")
