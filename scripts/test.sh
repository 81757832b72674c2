#!/usr/bin/env bash
# Set up (scripts/setup.sh) and run the tests. Without a GPU the kernels run in Triton's
# interpreter on the CPU (TRITON_INTERPRET=1) and the gpu-marked tests are skipped.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
. .venv/bin/activate
if ! python -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"; then
  export TRITON_INTERPRET=1
fi
python -m pytest -q -p no:cacheprovider "$@"
