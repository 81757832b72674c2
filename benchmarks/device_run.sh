#!/usr/bin/env bash
# The H200 run behind the README's figures, in one device call (nvidia-h200-x2), ~5 minutes:
#   sweep llama-7b on every GPU into one store -> export the packaged table -> GPU tests ->
#   decode benchmark. The bench on the new table is its own call (~8 minutes with every peer):
#   tunesearch bench --dispatch tunesearch/tables/h200.json (after copying $OUT/h200.json there).
#   The 1-GPU vs 2-GPU wall-time ratio: benchmarks/device_ratio.sh.
# Source benchmarks/device_setup.sh first; everything lands in $OUT.
# Resume instead of a fresh store: STORE=.store/sweep_s12.db (carried; copied, never written in place),
# and MS=64,96,128,192 for some M buckets only (default: all 21); FAMILIES=dqmma to re-tune one family
# (its GPU tests run first, and a failure stops the call before the sweep); DECODE=0 skips the decode run;
# EXPORT_ARGS=--current-code-only leaves out the trials of kernel code other than this tree's.
set -uo pipefail
day=$(date -u +%F)
now() { python3 -c 'import time; print(f"{time.time():.1f}")'; }
step() { echo "== $1 ($(date -u +%T))"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader

if [ -n "${FAMILIES:-}" ]; then
  step "GPU tests of the kernels about to be swept"
  timeout 180 python -m pytest -q -p no:warnings tests/test_gpu_kernels.py -k gluon 2>&1 | tail -3
  [ "${PIPESTATUS[0]}" = 0 ] || { echo "kernel tests failed: no sweep"; exit 1; }
fi

step "sweep llama-7b, --gpu all${STORE:+ (resuming $STORE)}${FAMILIES:+, only $FAMILIES}"
rm -f /tmp/sweep.db
if [ -n "${STORE:-}" ]; then cp "$STORE" /tmp/sweep.db && chmod u+w /tmp/sweep.db || exit 1; fi
t0=$(now)
timeout ${SWEEP_S:-300} tunesearch sweep --gpu all --shapes llama-7b ${MS:+--m $MS} --trials ${TRIALS:-20} ${FAMILIES:+--families $FAMILIES} \
  --time-budget ${BUDGET:-270} --db sqlite:////tmp/sweep.db > /tmp/sweep.log 2>&1
echo "sweep rc=$? wall_s=$(python3 -c "print(round($(now) - $t0))")"
grep -v "━" /tmp/sweep.log | tail -104
tunesearch export $OUT/h200.json --db sqlite:////tmp/sweep.db ${EXPORT_ARGS:-} 2>&1 | tail -4
gzip -c /tmp/sweep.db > $OUT/sweep.db.gz  # compressed: a grown store is over the 16 MiB a file can bring back

step "GPU tests: dispatch on the new table, the PTX blocks, unaligned activations"
TUNESEARCH_DISPATCH=$OUT/h200.json timeout 120 python -m pytest -q -p no:warnings tests/test_gpu_dispatch.py \
  tests/test_gpu_kernels.py tests/test_kernels.py -k "dispatch or ptx or pairs or gluon" 2>&1 | tail -3

[ "${DECODE:-1}" = 0 ] && { step done; exit 0; }
step "decode benchmark (8 blocks of 7B shapes, a CUDA graph per step)"
timeout 100 tunesearch decode-bench --dispatch $OUT/h200.json --layers 8 --batch 1,4,16 --tokens 64 \
  --out $OUT/decode_h200_$day.json 2>&1 | tail -6

step done
