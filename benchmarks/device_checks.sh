#!/usr/bin/env bash
# One device call (nvidia-h200-x2): GPU tests, the 1-GPU vs 2-GPU sweep wall-time ratio, the 7B-shaped
# logit check and the decode benchmark. Logs and JSON go to $OUT. Source benchmarks/device_setup.sh first.
set -uo pipefail
day=$(date -u +%F)
step() { echo "== $1 ($(date -u +%T))"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/gpus.txt

step "gpu tests: kernels on llama shapes, a real illegal address mid-sweep"
timeout 200 python -m pytest -q -s -p no:warnings -m gpu tests/test_gpu_kernels.py tests/test_gpu_faults.py \
  2>&1 | tail -25 | tee $OUT/gpu_tests.log

step "sweep wall time: one GPU, then --gpu all (fresh stores, same keys)"
keys=(--shapes 4096x11008,11008x4096 --m 1,4,16,64 --trials 16)
for gpu in 0 all; do
  t0=$(date +%s.%N)
  timeout 240 tunesearch sweep --gpu $gpu "${keys[@]}" --db sqlite:////tmp/ratio_$gpu.db > $OUT/ratio_$gpu.log 2>&1
  echo "gpu=$gpu rc=$? wall_s=$(echo "$(date +%s.%N) - $t0" | bc)" | tee -a $OUT/ratio.txt
  tail -12 $OUT/ratio_$gpu.log
done

step "logit check at 7B layer shapes (2 blocks)"
timeout 120 tunesearch check-model --hidden 4096 --intermediate 11008 --layers 2 --heads 32 --vocab 32000 \
  --tokens 32 2>&1 | tail -3 | tee $OUT/logit_check_7b.json

step "decode benchmark: 8 blocks of 7B shapes, CUDA graph per step"
timeout 200 tunesearch decode-bench --layers 8 --batch 1,4,16 --tokens 64 --out $OUT/decode_h200_$day.json \
  2>&1 | tail -8 | tee $OUT/decode.log
step done
