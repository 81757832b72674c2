#!/usr/bin/env bash
# Sweep wall time on one GPU vs --gpu all on the 2-GPU kind, each from a fresh store and a cold
# Triton cache (so neither run compiles for the other). Source benchmarks/device_setup.sh first.
set -uo pipefail
now() { python3 -c 'import time; print(f"{time.time():.1f}")'; }
for gpu in ${RATIO_GPUS:-0 all}; do
  t0=$(now)
  TRITON_CACHE_DIR=/tmp/triton_cache_$gpu timeout 240 tunesearch sweep --gpu $gpu --shapes llama-7b \
    --m ${RATIO_M:-1,16,64,256} --trials ${RATIO_TRIALS:-20} --db sqlite:////tmp/ratio_$gpu.db > /tmp/ratio_$gpu.log 2>&1
  echo "ratio gpu=$gpu rc=$? wall_s=$(python3 -c "print(round($(now) - $t0, 1))")"
  grep -E "new trials|trials, " /tmp/ratio_$gpu.log
  python3 - "$gpu" <<'PY'
import sqlite3, sys
c = sqlite3.connect(f"/tmp/ratio_{sys.argv[1]}.db")
print("  trials by status:", c.execute("select status, count(*) from ts_trials group by status").fetchall(),
      "| sweeps (start, end):", c.execute("select started_at, finished_at from ts_sweeps").fetchall())
PY
done
