#!/usr/bin/env bash
# The next device call of NOTES.md's plan (written in _s76, which had no device time): the rsmmapf family's
# GPU tests, then, on whichever GPU came, a `sweep --more` at the split keys of the four shapes whose picks
# split (M <= 32, the buckets then their edges) with rsmma and rsmmapf, so that each key's stored rsmma best
# is timed again and then as rsmmapf (its family twins, the partials in the ring first: search.
# later_parameter_twins), and the export with the picks that changed against the GPU's packaged table.
# H200: device_resume.sh on `_s75`'s store (the packaged table's and its --more trials), leaving
# $OUT/h200.json and the store's dump (its "packaged table reproduced" reads False there: that store's export
# has 9 picks within +-1% of the table's, NOTES.md row 133, which the changed picks list too); H100: device_new_gpu.sh on its own trials, leaving $OUT/table.json and
# its dump. Then, in a call of its own, the A/B of the new table against the packaged one on the same GPU
# (device_dispatch_ab.sh KNOB=table, M=1,2,4,8,16,32). Source benchmarks/device_setup.sh first; carry .whl
# (pytest-xdist and execnet among its wheels, for the tests' 8 workers).
# Env: MORE (trials a key beyond those it has, default 3: a split best's rsmmapf twins and its CLUSTER twin;
# 6 also reaches SKEW 2, 3 and 4, the H100 table's misses of row 132, plan item 1b), CALL_S (the call's
# limit, default 580: the sweeps get what the tests leave, less 150 s for loading, export and dump, two
# thirds to the buckets and a third to their edges), TESTS=0 (no GPU tests: a later call on the same tree),
# AB_S (seconds kept for the A/B of the new table against the packaged one at the split shapes, M <= 32, in
# this call, after the export: default 110; 0 leaves it to a call of its own, device_dispatch_ab.sh).
set -uo pipefail
step() { echo "== $1 ($(date -u +%T))"; }
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
# 4096x22016's picks do not split; a sweep takes its shapes in order, so those where row 132's ring form won
# most (two-split picks) come first, and a budget that runs short leaves 4096^2 (four splits: level there)
# (SPLIT from the environment: the shapes a call sweeps, in that order)
SPLIT=${SPLIT:-4096x11008,4096x12288,11008x4096,4096x4096}
if [ "${TESTS:-1}" = 1 ]; then
  step "rsmmapf GPU tests on $GPU"
  KERNELS_REQUIRED=1 timeout 300 bash benchmarks/device_gpu_tests.sh -k rsmmapf 2>&1 | tail -6
  [ "${PIPESTATUS[0]}" = 0 ] || { echo "rsmmapf GPU tests failed: no sweep"; exit 1; }
fi
AB_S=${AB_S:-110}
left=$(( ${CALL_S:-580} - SECONDS - 150 - AB_S ))
[ $left -ge 90 ] || { echo "${left} s left for the sweeps: run again with TESTS=0"; exit 3; }
S=$(( left * 2 / 3 ))  # the buckets' seconds; their edges get half as many
case "$GPU" in
  *H200*)
    LOGS=benchmarks/results/trials_more_h200_2026-12-06_s75.jsonl.gz TESTS=0 AFTER=0 MORE=${MORE:-3} \
      FAMILIES=rsmma,rsmmapf LAYOUTS=frag32 \
      PLAN="1,2,4,8,16,24,32/8/$S/$SPLIT 3,5,9,17,25/8/$(( S / 2 ))/$SPLIT" bash benchmarks/device_resume.sh
    new=$OUT/h200.json packaged=tunesearch/tables/h200.json ;;
  *H100*)
    STAGES="m=1,2,4,8,16,24,32 m=3,5,9,17,25" SHAPES=$SPLIT FAMILIES=rsmma,rsmmapf MORE=${MORE:-3} \
      SWEEP_S=$(( S * 3 / 4 )) LOGS=benchmarks/results/trials_more_h100_2026-12-08_s86.jsonl.gz EXPORT=1 \
      bash benchmarks/device_new_gpu.sh
    new=$OUT/table.json packaged=tunesearch/tables/h100.json ;;
  *) echo "$GPU: no plan for this GPU"; exit 2 ;;
esac
ab_left=$(( ${CALL_S:-580} - SECONDS + 10 ))  # the sweeps may overrun their budgets a little
if [ "$AB_S" -le 0 ] || [ ! -f "$new" ]; then
  :  # no A/B asked for, or no new table to weigh
elif [ $ab_left -lt 40 ]; then
  echo "${ab_left} s left: no A/B in this call (device_dispatch_ab.sh in a call of its own)"
else
  # three bench runs (new, packaged, new) make six files: they go back as one archive, a call returning 8 files
  step "A/B: the new table against $packaged, M=1..32 at the split shapes"
  mkdir -p /tmp/ab && OUT=/tmp/ab KNOB=table A=$new B=$packaged TAG=rsmmapf M=1,2,4,8,16,32 SHAPES=$SPLIT \
    timeout $ab_left bash benchmarks/device_dispatch_ab.sh | tee $OUT/ab_rsmmapf.txt
  tar czf $OUT/ab_rsmmapf_bench.tgz -C /tmp/ab .
fi
