#!/usr/bin/env bash
# Set up (scripts/setup.sh), then run the main job: tune llama-7b on this GPU and export the table.
#     bash scripts/sweep.sh [sweep flags...]      e.g. --shapes 4096x11008 --m 1,16
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
. .venv/bin/activate
tunesearch sweep --gpu auto --shapes llama-7b "$@"
tunesearch export dispatch.json
