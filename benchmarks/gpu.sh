#!/usr/bin/env bash
# GPU sizes of the throughput and seeds rows, in one call (target: under 8 minutes).
# On a machine with no package index: put gymnax's wheel in .whl/ beforehand (see NOTES.md),
# carry it, and this script installs it beside the image's JAX, flax and chex.
set -uo pipefail
cd "$(dirname "$0")/.."
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl && export PYTHONPATH="/tmp/site:${PYTHONPATH:-}"
fi
export PYTHONPATH="$PWD/src:${PYTHONPATH:-}" PYTHONUNBUFFERED=1
out="${OUT:-/tmp}"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
timeout 200 python3 benchmarks/throughput.py --sizes 1024 16384 262144 1048576 --steps 1000 \
  --repeats 3 --corridor 1048576 8388608 --json "$out/throughput.json" 2>&1 | tee "$out/throughput.md"
timeout 200 python3 benchmarks/seeds.py --seeds 1 64 1024 --total-steps 500000 2>&1 \
  | tee "$out/seeds.md"
