#!/usr/bin/env bash
# The GPU check (benchmarks/gpu_check.py): a short generation + GRPO loop through the GPU engines on
# one machine, killed after 8 minutes at the latest. Installs nothing: it runs with $PYTHON, else the
# project's .venv, else python3, which must have PyTorch (and vLLM, if it is to be measured).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${PYTHON:-}" ]; then
    if [ -x .venv/bin/python ]; then PYTHON=.venv/bin/python; else PYTHON=python3; fi
fi
exec timeout 480 "$PYTHON" benchmarks/gpu_check.py "$@"
