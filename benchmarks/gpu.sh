#!/usr/bin/env bash
# The JAX benchmark rows at GPU sizes, one section per call (each under the device's 10-minute
# limit per command; each row has its own time limit); prints the tables and leaves JSON under
# $OUT (default /tmp/gpu-bench).
#
#   bash benchmarks/gpu.sh [SECTION]    (on a machine with a GPU and JAX installed)
#   DRY=1 bash benchmarks/gpu.sh SECTION  (anywhere: prints each row's command, runs nothing)
#
# SECTION (run `timing` first whenever a GPU is lent, then the next quality section not yet
# in benchmarks/QUALITY.md; a session's 15 device minutes hold timing and one quality section):
#   timing (default)  throughput, corridor, seeds, PPO against rejax: 440 s of limits
#   minatar-cnn       rollax's CNN preset, the four MinAtar games at 1e7 steps x 3 seeds
#   minatar-mlp       the same with gymnax-blines' MLP (2 x 256 relu), the network rejax and
#                     gymnax-blines train; compare with the rejax rows of minatar-rejax
#   minatar-rejax     rejax's own PPO, same settings and MLP, the four games
#   brax-rollax       rollax's PPO on Brax inverted_double_pendulum at Brax's budget (20M steps)
#   brax-brax         Brax's own trainer (brax.training.agents.ppo.train), same budget
# The quality sections write QUALITY.md's rows with benchmarks/minatar_compare.py and
# benchmarks/brax_ppo.py's tables (their JSON under $OUT).
#
# Estimates (written before any GPU run, from the CPU profile; no H200 number is in RESULTS.md
# yet). On a GPU these programs are bound by kernel launches, not FLOPs: one MinAtar PPO update
# (64 envs x 128 steps, 4 epochs x 8 minibatches) is 128 rollout steps of ~60 kernels (the
# compiled CPU update's rollout body has 76 top-level ops) and 32 SGD steps of ~150; at ~5 us a
# kernel that is ~40 + 25 = ~65 ms per update whatever the seed count (3 seeds vmapped add width,
# not kernels), so 1e7 steps (1,220 updates) ~80 s, 10 greedy evaluations of 1,000 steps ~3 s,
# compile ~40 s: ~2 min a game, ~8 min a section of four games (the CNN's convolution adds a few
# kernels; rejax's update is the same size). Limit per game 140 s. Brax inverted_double_pendulum
# at 20M steps (122 updates of 163,840; on this CPU one update is ~45-56 s, compile ~2 min): 80
# physics steps and 128 SGD steps of 1,024 per update, ~0.2 s, so ~25 s of training per seed,
# 20 evaluations of 1,000 steps ~10 s, compile ~1-2 min; Brax compiles once per seed (~6 min for
# 3), rollax once for its 3 lanes (~3 min). Limits 540 s and 300 s.
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
dry="${DRY:-}"
install() {  # install() NAME: .whl/NAME/*.whl into /tmp/site-NAME
  [ -n "$dry" ] && return 0
  if ls ".whl/$1"/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
      --target "/tmp/site-$1" ".whl/$1"/*.whl || echo "could not install .whl/$1"
  fi
}
install anchors
install rejax
anchors="$PWD/src:/tmp/site-anchors"
rejax="/tmp/site-rejax"
if [ -z "$dry" ]; then
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
  python3 -c "import jax; print('jax', jax.__version__, jax.devices())"
fi

row() {  # row LIMIT_S PYTHONPATH SCRIPT ARGS...: one row with a time limit
  local limit=$1 path=$2; shift 2
  echo; echo "=== $*"
  if [ -n "$dry" ]; then
    echo "PYTHONPATH=$path timeout $limit python3 benchmarks/$*"
    [ -f "benchmarks/$1" ] || { echo "missing benchmarks/$1"; exit 1; }
    return 0
  fi
  PYTHONPATH="$path" timeout "$limit" python3 "benchmarks/$@" 2>&1 | grep -v "^WARNING"
}
section="${1:-timing}"
games="${GAMES:-Breakout Asterix Freeway SpaceInvaders}"  # GAMES=... for fewer
minatar() {  # minatar PYTHONPATH SCRIPT NAME [ARGS...]: each game its own row and JSON
  local path=$1 script=$2 name=$3; shift 3
  for game in $games; do
    row 140 "$path" "$script" --games "$game" --total-steps 10000000 --seeds 3 "$@" \
      --json "$out/$name-$game.json"
  done
  [ -n "$dry" ] && return 0
  PYTHONPATH="$anchors" python3 benchmarks/minatar_compare.py "$out"/minatar-*.json \
    --out "$out/minatar.png" --md "$out/minatar.md" || true
}
case "$section" in
timing)
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
  ;;
minatar-cnn) minatar "$anchors" minatar_rollax.py minatar-rollax-cnn --network cnn ;;
minatar-mlp) minatar "$anchors" minatar_rollax.py minatar-rollax-mlp --network mlp ;;
minatar-rejax) minatar "$rejax" minatar_rejax.py minatar-rejax ;;
brax-rollax|brax-brax)  # needs .whl/brax: brax 0.14.2, mujoco, mujoco-mjx and their needs
  install brax
  row 540 "$PWD/src:/tmp/site-brax" brax_ppo.py --libs "${section#brax-}" \
    --total-steps 20000000 --seeds 3 --json "$out/$section.json" --plot "$out/$section.png" ;;
*) echo "unknown section '$section' (timing, minatar-cnn, minatar-mlp, minatar-rejax, brax-rollax, brax-brax)"; exit 2 ;;
esac
echo; echo "JSON in $out"
