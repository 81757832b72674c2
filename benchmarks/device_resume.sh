#!/usr/bin/env bash
# Resume the packaged table's sweep on one GPU with no store carried (NOTES.md row 70): the store is
# rebuilt from the committed sweep logs the table was exported from (`tunesearch load`), its export is
# checked against tunesearch/tables/h200.json, then the GPU tests of the launcher and the dispatch, the
# host time, a sweep of some keys with more trials, the new export and a dump of the whole store, and the
# dispatch GPU tests on the new table. Leaves $OUT/h200.json and $OUT/trials.jsonl.gz.
# Env: LOGS (dumps or logs to load; default the packaged table's store), MS, TRIALS (MORE: `--more` instead,
# that many trials a key beyond those it has, and a report of the stored fastest it timed again), FAMILIES, LAYOUTS,
# SWEEP_S (the sweep's seconds), SHAPES (default llama-7b), PLAN (several sweeps: below), TESTS=0 (no GPU tests, no host time; the new
# table's dispatch tests still run unless AFTER=0). Source
# benchmarks/device_setup.sh first.
set -uo pipefail
step() { echo "== $1 ($(date -u +%T))"; }
DB=sqlite:////tmp/s.db
LOGS=${LOGS:-benchmarks/results/trials_resume_h200_2026-12-04_s59.jsonl.gz}  # the packaged table's store
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader

step "rebuild the store from the logs"
tunesearch load $LOGS --db $DB 2>&1 | tail -2
tunesearch export /tmp/before.json --db $DB --current-code-only 2>&1 | tail -1
python3 - <<'PY'
import json
a, b = (json.load(open(p)) for p in ("tunesearch/tables/h200.json", "/tmp/before.json"))
for t in (a, b):
    t.pop("created")
print("packaged table reproduced:", a == b)
PY

if [ "${TESTS:-1}" = 1 ]; then  # TESTS=0: a later call on the same tree skips them and the host time
  step "GPU tests: the Gluon launcher (rsmma on frag32) and the dispatch"
  timeout 200 python -m pytest -q -p no:warnings tests/test_gpu_kernels.py tests/test_gpu_dispatch.py \
    -k "(gluon and rsmma and frag32) or dispatch" 2>&1 | tail -3
  [ "${PIPESTATUS[0]}" = 0 ] || { echo "GPU tests failed: no sweep"; exit 1; }
  step "host time"
  timeout 60 python benchmarks/host_time.py $OUT 1,16 2>&1 | tail -10
fi

# PLAN: sweeps one after another, each "MS/TRIALS/SECONDS[/SHAPES]" (e.g. "1,2,4/10/200 128,256/14/60"):
# more trials where a target is close. Without it, one sweep of MS, TRIALS, SWEEP_S and SHAPES.
PLAN=${PLAN:-"${MS:-}/${TRIALS:-30}/${SWEEP_S:-200}/${SHAPES:-llama-7b}"}
export SWEEPS_FROM=$(date -u +%FT%T)  # the re-timing report counts what this call timed again
for item in $PLAN; do
  IFS=/ read -r ms trials secs shapes <<< "$item"
  step "sweep${ms:+ M=$ms}, ${shapes:-llama-7b}, ${trials} trials, ${FAMILIES:-every family}, ${LAYOUTS:-every layout}"
  timeout $(( secs + 30 )) tunesearch sweep --gpu 0 --shapes ${shapes:-llama-7b} ${ms:+--m $ms} \
    ${FAMILIES:+--families $FAMILIES} ${LAYOUTS:+--layouts $LAYOUTS} --trials $trials ${MORE:+--more $MORE} \
    --time-budget $secs --db $DB 2>&1 | grep -v "━" | tail -40
done
if [ -n "${MORE:-}" ]; then  # what --more's re-timing did: the stored fastest timed again, same run
  step "re-timed trials: this run's time against the stored one"
  DB=$DB python3 - <<'PY'
import os, statistics
from datetime import datetime, timezone
from tunesearch.db import Store
since = datetime.fromisoformat(os.environ["SWEEPS_FROM"]).replace(tzinfo=timezone.utc)
timed = [t for t in Store(os.environ["DB"]).trials() if (t.versions or {}).get("previous")
         and t.created_at.replace(tzinfo=t.created_at.tzinfo or timezone.utc) >= since]
ratios = [t.us / t.versions["previous"][-1]["us"] for t in timed]
if ratios:
    print(f"{len(timed)} re-timed; this run / stored: median {statistics.median(ratios):.3f}, "
          f"range {min(ratios):.3f}-{max(ratios):.3f}")
for t in sorted(timed, key=lambda t: (t.n, t.k, t.m))[:60]:
    print(f"  {t.k}x{t.n} M={t.m:<5} {t.variant_id:<48} {t.versions['previous'][-1]['us']:8.2f} -> {t.us:8.2f}")
PY
fi
tunesearch export $OUT/h200.json --db $DB --current-code-only 2>&1 | tail -12  # with its warnings
tunesearch dump $OUT/trials.jsonl.gz --db $DB 2>&1 | tail -1
python3 benchmarks/changed_picks.py $OUT/h200.json  # the picks that changed

if [ "${AFTER:-1}" = 1 ]; then
  step "dispatch GPU tests on the new table"
  TUNESEARCH_DISPATCH=$OUT/h200.json timeout 150 python -m pytest -q -p no:warnings tests/test_gpu_dispatch.py 2>&1 | tail -3
fi
step done
