#!/usr/bin/env bash
# One device call (nvidia-h200-x2): re-sweep llama-7b on every GPU into one store, export the
# packaged table and run the benchmark on it. Source benchmarks/device_setup.sh first.
set -uo pipefail
day=$(date -u +%F)
step() { echo "== $1 ($(date -u +%T))"; }
step "sweep llama-7b, --gpu all"
t0=$(date +%s)
timeout ${SWEEP_S:-330} tunesearch sweep --gpu all --shapes llama-7b --trials ${TRIALS:-20} \
  --time-budget ${BUDGET:-300} --db sqlite:////tmp/sweep.db > $OUT/sweep.log 2>&1
echo "sweep rc=$? wall_s=$(( $(date +%s) - t0 ))" | tee -a $OUT/sweep.log
tail -5 $OUT/sweep.log
tunesearch export $OUT/h200.json --db sqlite:////tmp/sweep.db 2>&1 | tail -3
cp /tmp/sweep.db $OUT/sweep.db 2>/dev/null
step "bench"
timeout ${BENCH_S:-170} tunesearch bench --dispatch $OUT/h200.json --m ${BENCH_M:-1,4,16,32,64,256,1024,4096} --out $OUT/bench_llama7b_h200_$day.json \
  --plot $OUT/bench_llama7b_h200_$day.png 2>&1 | tail -70 > $OUT/bench.log
tail -62 $OUT/bench.log
step done
