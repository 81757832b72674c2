#!/usr/bin/env bash
# loader_ab.py's rounds on the device (NOTES.md row 108): the tree's loader and the one-box loader in
# alternating processes, the order swapped each round, then the per-key medians. Source
# benchmarks/device_setup.sh first; LOADER_ROUNDS (default 3), LOADER_KEYS as loader_ab.py reads it.
set -uo pipefail
for round in $(seq 1 "${LOADER_ROUNDS:-3}"); do
  if [ $((round % 2)) = 1 ]; then order="tree one_box"; else order="one_box tree"; fi
  for loader in $order; do
    timeout 150 python benchmarks/experiments/loader_ab.py "$OUT" "$loader" "$round" \
      >> "$OUT/loader_ab.log" 2>&1 || echo "round $round $loader: rc=$?" | tee -a "$OUT/loader_ab.log"
  done
done
python benchmarks/experiments/loader_ab.py --summary "$OUT" | tee "$OUT/loader_ab_summary.txt"
