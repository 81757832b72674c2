#!/usr/bin/env bash
# Create .venv (if missing) and install tunesearch into it, editable, with its test extras.
# Without a CUDA GPU it installs PyTorch's CPU build (torch==2.13.0, no multi-GB CUDA download)
# and pins triton 3.6.0 (the version the H200 tables were tuned with) with numpy < 2.3, which
# that triton's interpreter needs.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
. .venv/bin/activate
python -m pip install -q --upgrade pip
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  python -m pip install -q torch triton
else
  python -m pip install -q "torch==2.13.0" "triton==3.6.0" "numpy<2.3"
fi
python -m pip install -q -e ".[test,plot,postgresql]"
