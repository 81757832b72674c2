#!/usr/bin/env bash
# The frag32 re-sweep on one H200 (NOTES.md row 69), in two device calls (a call may run 600 s):
#   PHASE=1: rsmma's GPU tests on both layouts; rsmma's former winners re-timed on the base layout
#            (their kernel source changed: the loader's frag32 branch); rsmma on frag32 at M=1..256,
#            each key seeded with its base twin's winners. Leaves $OUT/sweep.db.gz.
#   PHASE=2: with FRAG_S, rsmma on the frag32 keys phase 1's budget left; dequant on frag32 at M=384..4096
#            (a frag32 shape must be timed at every M bucket),
#            export --current-code-only, the dispatch GPU tests on the new table. Leaves $OUT/h200.json.
# STORE: the gzipped store to resume (carried). Source benchmarks/device_setup.sh first.
set -uo pipefail
step() { echo "== $1 ($(date -u +%T))"; }
gunzip -c "$STORE" > /tmp/s.db || exit 1
sweep() { tunesearch sweep --gpu 0 --shapes llama-7b --db sqlite:////tmp/s.db "$@" 2>&1 | grep -v "━" | tail -4; }
if [ "$PHASE" = 1 ]; then
  step "rsmma GPU tests, base and frag32"
  timeout 240 python -m pytest -q -p no:warnings tests/test_gpu_kernels.py -k "gluon and rsmma" 2>&1 | tail -3
  [ "${PIPESTATUS[0]}" = 0 ] || { echo "kernel tests failed: no sweep"; exit 1; }
  MS=1,2,4,8,16,24,32,48,64,96,128,192,256
  step "rsmma on base: former winners"
  timeout ${BASE_S:-110} bash -c "$(declare -f sweep); sweep --m $MS --families rsmma --layouts base --trials ${BASE_TRIALS:-4} --time-budget $(( ${BASE_S:-110} - 10 ))"
  step "rsmma on frag32"
  timeout ${FRAG_S:-240} bash -c "$(declare -f sweep); sweep --m $MS --families rsmma --layouts frag32 --trials ${FRAG_TRIALS:-14} --time-budget $(( ${FRAG_S:-240} - 10 ))"
  gzip -c /tmp/s.db > $OUT/sweep.db.gz
else
  if [ -n "${FRAG_S:-}" ]; then  # the frag32 keys phase 1's budget left
    step "rsmma on frag32, the keys left"
    timeout $FRAG_S bash -c "$(declare -f sweep); sweep --m 1,2,4,8,16,24,32,48,64,96,128,192,256 --families rsmma --layouts frag32 --trials ${FRAG_TRIALS:-10} --time-budget $(( FRAG_S - 10 ))"
  fi
  step "dequant on frag32 above rsmma's range"
  timeout ${DQ_S:-150} bash -c "$(declare -f sweep); sweep --m 384,512,768,1024,2048,4096 --families dequant --layouts frag32 --trials ${DQ_TRIALS:-4} --time-budget $(( ${DQ_S:-150} - 10 ))"
  tunesearch export $OUT/h200.json --db sqlite:////tmp/s.db --current-code-only 2>&1 | tail -3
  gzip -c /tmp/s.db > $OUT/sweep.db.gz
  step "dispatch GPU tests on the new table"
  TUNESEARCH_DISPATCH=$OUT/h200.json timeout 150 python -m pytest -q -p no:warnings tests/test_gpu_dispatch.py 2>&1 | tail -3
fi
step done
