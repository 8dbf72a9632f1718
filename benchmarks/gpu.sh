#!/usr/bin/env bash
# Every JAX benchmark row at GPU sizes, in one call of under 8 minutes (each row has its own
# time limit, 440 s in all, plus the wheel installs); prints the tables and
# leaves JSON under $OUT (default /tmp/gpu-bench).
#
#   bash benchmarks/gpu.sh            (on a machine with a GPU and JAX installed)
#
# Such a machine may have no package index. Download the wheels beforehand into the ignored
# .whl/ folder (Python 3.12, manylinux x86_64; the commands are in benchmarks/NOTES.md) and
# carry it: .whl/anchors (gymnax 1.x and gymnasium, for the throughput row) and .whl/rejax
# (rejax with the gymnax 0.0.9 it supports, distrax, tfp-nightly and their small needs). Each
# set goes into its own --target folder beside the machine's JAX, so both gymnax versions live
# side by side, one per process. SB3's row stays on the CPU machine (torch is not a JAX anchor).
set -uo pipefail
cd "$(dirname "$0")/.."
out="${OUT:-/tmp/gpu-bench}"
mkdir -p "$out"
export PYTHONUNBUFFERED=1
install() {  # install() NAME: .whl/NAME/*.whl into /tmp/site-NAME
  if ls ".whl/$1"/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
      --target "/tmp/site-$1" ".whl/$1"/*.whl || echo "could not install .whl/$1"
  fi
}
install anchors
install rejax
anchors="$PWD/src:/tmp/site-anchors"
rejax="/tmp/site-rejax"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
python3 -c "import jax; print('jax', jax.__version__, jax.devices())"

row() {  # row LIMIT_S PYTHONPATH SCRIPT ARGS...: one row with a time limit
  local limit=$1 path=$2; shift 2
  echo; echo "=== $*"
  PYTHONPATH="$path" timeout "$limit" python3 "benchmarks/$@" 2>&1 | grep -v "^WARNING"
}
# environment throughput up to 1M CartPoles (target >= 1.5e10 env steps/s at 1M)
row 100 "$anchors" throughput.py --sizes 1024 16384 262144 1048576 --steps 1000 --repeats 3 \
  --corridor --json "$out/throughput.json"
# corridor absorbing collector at 1M and 8M environments (target >= 1e11 env steps/s at 8M):
# the scan loop as written, then fully unrolled (one fused kernel per slice, no per-step keys
# or state going back to memory); both give the same records
row 50 "$anchors" throughput.py --sizes --corridor 1048576 8388608 --repeats 3 \
  --json "$out/corridor.json"
row 70 "$anchors" throughput.py --sizes --corridor 1048576 8388608 --repeats 3 --unroll all \
  --json "$out/corridor-unrolled.json"
# seeds in one program (target >= 6e7 env steps/s for 1024 PPO seeds)
row 120 "$anchors" seeds.py --seeds 1 64 1024 --total-steps 100000 --repeats 1 \
  --json "$out/seeds.json"
# PPO at equal hyperparameters, rollax and rejax (one process each)
row 50 "$anchors" ppo_rollax.py --repeats 2 --json "$out/ppo-rollax.json"
row 50 "$rejax" ppo_rejax.py --repeats 2 --json "$out/ppo-rejax.json"
# the same at 1,024 environments, where the SGD update dominates
row 60 "$anchors" ppo_rollax.py --num-envs 1024 --total-steps 2097152 --repeats 2 \
  --json "$out/ppo-rollax-1024.json"
row 60 "$rejax" ppo_rejax.py --num-envs 1024 --total-steps 2097152 --repeats 2 \
  --json "$out/ppo-rejax-1024.json"
echo; echo "JSON in $out"
