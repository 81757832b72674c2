#!/usr/bin/env bash
# Sweep a dispatch table for the GPU this runs on, one that is not in the packaged table's store (the H100),
# seeded from that store: each key times first the packaged GPU's fastest variants there
# (search.gpu_twin_seeds), then the guided search. No store is carried: the packaged table's dump and this
# GPU's trials of earlier calls (LOGS) are loaded, so a call resumes where the last one ran out (--trials
# counts the trials a key has). Leaves in $OUT this GPU's trials, all calls' (trials.jsonl.gz: commit it, CI
# rebuilds the table from it) and, with EXPORT=1, its table (table.json, `export --current-code-only`).
# Env: STAGES ("buckets edges": the 30 default buckets, then each one's smallest M; "m=LIST": those M alone,
# e.g. "m=1,2,4 m=3": a bucket's edge after the bucket, whose new fastest its edge then times first), TRIALS
# (8 a key: half of them seeds), MORE (instead of TRIALS: `--more`, that many trials a key beyond those it
# has, after its 3 fastest are timed again, so its best's SKEW twins are timed: NOTES.md plan item 1b),
# SHAPES (default llama-7b), FAMILIES (default the packaged tables': rsmma,rsmmapf,twotile,dequant), SWEEP_S (each
# stage's seconds), LOGS, EXPORT. Source benchmarks/device_setup.sh first.
set -uo pipefail
step() { echo "== $1 ($(date -u +%T))"; }
DB=sqlite:////tmp/s.db
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
echo "$GPU, driver $(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -1)"
# the families and layout the packaged table picks from (every shape keeps frag32)
SEARCH="--shapes ${SHAPES:-llama-7b} --families ${FAMILIES:-rsmma,rsmmapf,twotile,dequant} --layouts frag32"
SEARCH+=" $([ -n "${MORE:-}" ] && echo "--more $MORE" || echo "--trials ${TRIALS:-8}")"

step "load the packaged table's store${LOGS:+ and $LOGS}"
tunesearch load benchmarks/results/trials_resume_h200_2026-12-04_s59.jsonl.gz ${LOGS:-} --db $DB 2>&1 | tail -1
for stage in ${STAGES:-buckets edges}; do
  case $stage in
    buckets) which="--no-edges" ;;
    edges) which="--m edges" ;;
    m=*) which="--m ${stage#m=}" ;;
    *) echo "unknown stage $stage"; exit 2 ;;
  esac
  step "sweep the $stage on $GPU"
  timeout $(( ${SWEEP_S:-450} + 60 )) tunesearch sweep --gpu 0 $SEARCH $which --time-budget ${SWEEP_S:-450} \
    --db $DB 2>&1 | grep -v "━" | tail -12
done
step "dump this GPU's trials"
tunesearch dump $OUT/trials.jsonl.gz --db $DB --gpu "$GPU" 2>&1 | tail -1
DB=$DB GPU="$GPU" python3 - <<'PY'
import os
from tunesearch.db import Store
from tunesearch.sweep import is_current
trials = [t for t in Store(os.environ["DB"]).trials() if t.gpu_name == os.environ["GPU"]]
keys = {(t.k, t.n, t.m) for t in trials if t.status == "ok" and is_current(t)}
print(f"{len(trials)} trials on this GPU, {sum(t.status != 'ok' for t in trials)} not ok; "
      f"{len(keys)} keys with a current trial (290 make the table)")
PY
if [ "${EXPORT:-0}" = 1 ]; then
  step "export"
  tunesearch export $OUT/table.json --db $DB --gpu "$GPU" --current-code-only 2>&1 | tail -8
  python3 benchmarks/changed_picks.py $OUT/table.json  # against this GPU's packaged table, if it has one
fi
step done
