#!/usr/bin/env bash
# The whole GPU suite on the device in less wall time. The kernel tests check correctness only and spend
# most of their time compiling Gluon and Triton kernels on the CPU (the whole suite took 430 s serially,
# NOTES.md row 85), so they run spread over JOBS pytest-xdist workers sharing the one GPU; the dispatch and
# fault tests then run one at a time. Needs pytest-xdist and execnet among the carried wheels
# (`bash ../shared/device/wheels.sh pytest-xdist execnet`); without them everything runs serially.
# Source benchmarks/device_setup.sh first. Arguments go to both pytest runs (e.g. -k rsmma).
# Env: JOBS (workers, default 8); KERNELS_REQUIRED=1 fails when the kernel run selects no test (pytest's
# rc 5), for a caller whose -k names a family that must have tests (device_next.sh stops before its sweep).
set -uo pipefail
JOBS=${JOBS:-8}
parallel=()
if python -c "import xdist" 2>/dev/null; then
  parallel=(-n "$JOBS")
else
  echo "pytest-xdist not installed: the kernel tests run serially"
fi
python -m pytest -q -p no:warnings -m gpu "${parallel[@]}" tests/test_gpu_kernels.py "$@"
kernels=$?
python -m pytest -q -p no:warnings -m gpu tests/test_gpu_dispatch.py tests/test_gpu_faults.py "$@"
rest=$?
# 5: no test selected (a -k that matches only one of the two runs)
if [ "${KERNELS_REQUIRED:-0}" = 1 ] && [ "$kernels" = 5 ]; then
  echo "no kernel test selected by: $*"; exit 5
fi
for rc in $kernels $rest; do
  [ "$rc" = 0 ] || [ "$rc" = 5 ] || exit "$rc"
done
