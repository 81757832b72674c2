#!/usr/bin/env bash
# The short form of device_next.sh, for a call with only ~250 s of device time (written in _s77, whose
# budget went on failed starts before a machine came): the rsmmapf family's GPU tests, then row 132's
# experiment on the GPU's own packaged table at M=1 and 16 (each split pick as rsmma launches it, with the
# partials prefetched into a buffer, and into the ring; best of three graph timings), so that a session
# with little device time still learns whether the family is right and wins on this GPU. Source
# benchmarks/device_setup.sh first; carry .whl (pytest-xdist and execnet among its wheels).
# Env: MS (the experiment's M list, default 1,16), TEST_S (the tests' limit, default 140), EXP_S (the
# experiment's, default 95). Leaves $OUT/tests.log, $OUT/prefetch.log and $OUT/rsmma_prefetch.json (when
# the experiment ends within its limit; the log has a JSON row a key as each is timed).
set -uo pipefail
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
case "$GPU" in *H200*) table=tunesearch/tables/h200.json ;; *) table=tunesearch/tables/h100.json ;; esac
KERNELS_REQUIRED=1 timeout "${TEST_S:-140}" bash benchmarks/device_gpu_tests.sh -k rsmmapf > "$OUT/tests.log" 2>&1
echo "rsmmapf GPU tests: rc=$? after ${SECONDS} s"; tail -4 "$OUT/tests.log"
PREFETCH_MS=${MS:-1,16} PREFETCH_SKEWS= timeout "${EXP_S:-95}" \
  python benchmarks/experiments/rsmma_prefetch.py "$OUT" "$table" > "$OUT/prefetch.log" 2>&1
echo "prefetch experiment on $table: rc=$? after ${SECONDS} s"; tail -12 "$OUT/prefetch.log" | cut -c1-300
