#!/usr/bin/env bash
# loader_ab.py's rounds on the device (NOTES.md rows 108-109): each loader of LOADERS (default "tree
# predicated one_box") in a process of its own, the order rotated each round, then the per-key medians.
# Source benchmarks/device_setup.sh first; LOADER_ROUNDS (default 3), LOADER_KEYS as loader_ab.py reads it.
set -uo pipefail
read -r -a loaders <<< "${LOADERS:-tree predicated one_box}"
n=${#loaders[@]}
for round in $(seq 1 "${LOADER_ROUNDS:-3}"); do
  for i in $(seq 0 $((n - 1))); do
    loader=${loaders[$(( (i + round - 1) % n ))]}
    timeout 150 python benchmarks/experiments/loader_ab.py "$OUT" "$loader" "$round" \
      >> "$OUT/loader_ab.log" 2>&1 || echo "round $round $loader: rc=$?" | tee -a "$OUT/loader_ab.log"
  done
done
python benchmarks/experiments/loader_ab.py --summary "$OUT" | tee "$OUT/loader_ab_summary.txt"
