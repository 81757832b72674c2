#!/usr/bin/env bash
# On the device (after `. benchmarks/device_setup.sh`): the first GPU run of what `_s62` wrote without one
# (NOTES.md, the session plan written in `_s62`), in one call of ~400 s on a fresh machine:
#   1. the GPU tests of those changes: side by side's bits (test_gpu_dispatch.py, at three keys),
#      OVERLAP_PRICE's capture and eager plans at 4096x11008 M=257, and graphs captured in turn
#      on a new stream replayed in any order (test_gpu_kernels.py, the split-K counters zeroed ahead), and
#      M=0 on the GPU (test_kernels.py); and `_s63`'s: the activations' gradient (eager, op, compiled; a split
#      plan), an adapter trained through a W4A16 layer (test_nn.py) and grouped-query decoding captured in a
#      graph (test_decode.py), a GPTQ checkpoint loaded and run on the kernels (test_gptq.py);
#   2. side_by_side_eager.py: host and eager-wall us a call, side by side / serial / auto;
#   3. the OVERLAP_PRICE A/B (device_dispatch_ab.sh, A=1.05 B=None; 1.06 in `_s65`, its first form) at the
#      M the offline count predicts 5%+ faster; HELD_OUT=1 runs the held-out M instead.
# Writes $OUT/gpu_offline_checks.log, side_by_side_eager.{json,log}, bench_overlap_price*_*.{json,log}.
set -uo pipefail
: "${OUT:?}"
python -m pytest -q -p no:warnings -m gpu tests/test_gpu_dispatch.py tests/test_gpu_kernels.py \
  -k "concurrent or auto_runs or overlap_pricing or any_order or gradient" > "$OUT/gpu_offline_checks.log" 2>&1
python -m pytest -q -p no:warnings tests/test_kernels.py tests/test_nn.py tests/test_decode.py tests/test_gptq.py -k "no_rows or without_a_table or adapter or captured_step or gptq" >> "$OUT/gpu_offline_checks.log" 2>&1
echo "GPU tests: $(grep -E '(passed|failed|error)' "$OUT/gpu_offline_checks.log" | tail -2 | tr '\n' ' ')"
python benchmarks/experiments/side_by_side_eager.py "$OUT" > "$OUT/side_by_side_eager.log" 2>&1
tail -4 "$OUT/side_by_side_eager.log"
if [ "${HELD_OUT:-0}" = 1 ]; then
  M=170,175,270,285,430,445,800,850,890 TAG=overlap_price_held_out
else
  M=161,165,257,260,420,770,790 TAG=overlap_price
fi
KNOB=OVERLAP_PRICE A=1.05 B=None TAG=$TAG M=$M bash benchmarks/device_dispatch_ab.sh
