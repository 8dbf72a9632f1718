#!/usr/bin/env bash
# The JAX benchmark rows at accelerator sizes (a GPU or a TPU), one section per call (each under the
# device's 10-minute limit per command; each row has its own time limit); prints the tables and
# leaves JSON and logs under $OUT (default /tmp/accel-bench).
#
#   bash benchmarks/accel.sh [SECTION]      (on a machine with an accelerator and JAX installed)
#   DRY=1 bash benchmarks/accel.sh SECTION  (anywhere: prints each row's command, runs nothing)
#   WHEELS=.whl-tpu bash benchmarks/accel.sh SECTION   (the TPU v5e: Python 3.11 wheels)
#
# SECTION (run `timing` first whenever a machine is lent, then the next quality section not yet
# in benchmarks/QUALITY.md):
#   timing (default)  throughput, PPO against rejax at 4 and 1,024 envs
#   seeds             the corridor's absorbing collector and PPO seeds in one program
#   parts             PPO's update part by part (rollax, rejax); throughput with rbg keys
#   variants          rollax's minibatch steps at 1,024 envs under changes (clip, statistics)
#   shuffle           the one-gather shuffle at 1,024 seeds; seeds.py after it (SEEDS_K)
#   seeds-compile     compile time of K PPO seeds, part by part (SEEDS="64 256 1024")
#   profile           1,024 PPO seeds in one program under jax.profiler (the busiest device
#                     operations), then the same and PPO at 1,024 envs with rbg keys
#   resets            throughput at 262k and 1M envs with rbg keys, rollax resetting only the
#                     finished environments (the CPU's path) and then every one (the
#                     accelerators'), each traced: what bounds the step once the hash does not
#   actions           throughput at 262k and 1M envs with the harness drawing a step's actions
#                     from one key (--actions batched), threefry then rbg keys: the
#                     environments compared without the harness's per-environment splits;
#                     then rollax with rbg keys and its reset keys split as before
#                     rollax.keys.children (all-split)
#   many-seeds        PPO seeds in one program at SEEDS_K (default 4096), PRNG=rbg for the chip's
#                     own generator
#   ppo               PPO beside rejax at ENVS environments (default 64), PRNG=rbg for rollax's
#                     keys
#   command           rollax train --env CartPole-v1 cold and warm: the runtime's start, the
#                     import, the training and the rest, then a warm run profiled
#   phases            the runtime's start in phases (which let other Python threads run), and
#                     started in a thread beside rollax's import as the command starts it
#   warm-compile      rollax train --env CartPole-v1 cold, then warm twice: its compile path
#                     program by program (tracing, lowering, the cache key, the cache's read)
#   tests             the fast tests (not slow, not integration) in one process on the device,
#                     JUnit XML under $OUT
#   minatar-cnn       rollax's CNN preset, the four MinAtar games at 1e7 steps x 3 seeds
#   minatar-mlp       the same with gymnax-blines' MLP (2 x 256 relu), the network rejax and
#                     gymnax-blines train; compare with the rejax rows of minatar-rejax
#   minatar-rejax     rejax's own PPO, same settings and MLP, the four games
#   brax-rollax       rollax's PPO on Brax inverted_double_pendulum at Brax's budget (20M steps)
#   brax-brax         Brax's own trainer (brax.training.agents.ppo.train), same budget
# The quality sections write QUALITY.md's rows with benchmarks/minatar_compare.py and
# benchmarks/brax_ppo.py's tables (their JSON under $OUT).
#
# Time limits are sized for the slower of the two machines measured (GPU.md, TPU.md): a TPU v5e
# compiles PPO in ~30 s where the H200 took 10-15 s, and each process that opens the chip pays
# ~15 s for the runtime's start. Per game at 1e7 steps: 140 s on the H200, 200 s on the TPU.
#
# Such a machine may have no package index for rollax's needs. Download the wheels beforehand
# into an ignored folder (benchmarks/NOTES.md has the commands: .whl/ for the H200's Python 3.12,
# .whl-tpu/ for the TPU's 3.11) and carry it: WHEELS/anchors (rollax's pure-Python needs, gymnax
# 1.x and gymnasium, for the throughput row) and WHEELS/rejax (rejax with the gymnax 0.0.9 it
# supports, distrax, tfp-nightly and their small needs). Each set goes into its own --target
# folder beside the machine's JAX, so both gymnax versions live side by side, one per process.
# Where the machine has its own index (/opt/pypi/simple on the TPU), the compiled packages
# (matplotlib, PyYAML, flax, seaborn) come from it. The machine's PYTHONPATH (where its JAX
# lives) is kept first: the rows add to it, never replace it. SB3's row stays on the CPU machine
# (torch is not a JAX anchor).
set -uo pipefail
cd "$(dirname "$0")/.."
out="${OUT:-/tmp/accel-bench}"
wheels="${WHEELS:-.whl}"
mkdir -p "$out"
export PYTHONUNBUFFERED=1
dry="${DRY:-}"
pip_quiet() { PIP_CONFIG_FILE=/dev/null python3 -m pip install --isolated -q --no-compile \
  --no-cache-dir "$@"; }
install() {  # install() NAME: $wheels/NAME/*.whl into /tmp/site-NAME (once a machine)
  [ -n "$dry" ] && return 0
  [ -d "/tmp/site-$1" ] && return 0
  if ls "$wheels/$1"/*.whl >/dev/null 2>&1; then
    pip_quiet --no-index --no-deps --upgrade --target "/tmp/site-$1" "$wheels/$1"/*.whl \
      || echo "could not install $wheels/$1"
  fi
}
install anchors
install rejax
if [ -z "$dry" ] && [ -d /opt/pypi/simple ] && [ ! -d /tmp/site-index ]; then  # the machine's own index (TPU v5e)
  pip_quiet --only-binary=:all: --index-url file:///opt/pypi/simple --target /tmp/site-index \
    matplotlib pyyaml flax seaborn || echo "could not install from /opt/pypi/simple"
fi
if [ -z "$dry" ] && [ ! -f /tmp/.site-compiled ]; then  # bytecode once a machine, as pip would
  # (the TPU machine writes none on import: every process compiled 441 modules, ~1 s)
  python3 -m compileall -q -j 0 src /tmp/site-* >/dev/null 2>&1; touch /tmp/.site-compiled
fi
base="${PYTHONPATH:+$PYTHONPATH:}"  # the machine's JAX first
anchors="$base$PWD/src:/tmp/site-anchors:/tmp/site-index"
rejax="$base/tmp/site-rejax:/tmp/site-anchors:/tmp/site-index"
if [ -z "$dry" ]; then
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null || true
  PYTHONPATH="$anchors" python3 -c "import jax, platform; print('jax', jax.__version__, \
jax.devices(), 'python', platform.python_version(), platform.libc_ver())"
  git rev-parse --short HEAD 2>/dev/null || true
fi

row() {  # row LIMIT_S PYTHONPATH SCRIPT ARGS...: one row with a time limit
  local limit=$1 path=$2; shift 2
  echo; echo "=== $*"
  if [ -n "$dry" ]; then
    echo "PYTHONPATH=$path timeout $limit python3 benchmarks/$*"
    [ -f "benchmarks/$1" ] || { echo "missing benchmarks/$1"; exit 1; }
    return 0
  fi
  PYTHONPATH="$path" timeout "$limit" python3 "benchmarks/$@" 2>&1 | grep -v "^WARNING" \
    | tee -a "$out/log.txt"
}
section="${1:-timing}"
games="${GAMES:-Breakout Asterix Freeway SpaceInvaders}"  # GAMES=... for fewer
minatar() {  # minatar PYTHONPATH SCRIPT NAME [ARGS...]: each game its own row and JSON
  local path=$1 script=$2 name=$3; shift 3
  for game in $games; do
    row "${GAME_LIMIT:-200}" "$path" "$script" --games "$game" --total-steps 10000000 --seeds 3 "$@" \
      --json "$out/$name-$game.json"
  done
  [ -n "$dry" ] && return 0
  PYTHONPATH="$anchors" python3 benchmarks/minatar_compare.py "$out"/minatar-*.json \
    --out "$out/minatar.png" --md "$out/minatar.md" || true
}
case "$section" in
timing)
  # environment throughput up to 1M CartPoles (target >= 1.5e10 env steps/s at 1M on the H200;
  # >= 3x gymnax from 262k on the TPU)
  row 150 "$anchors" throughput.py --sizes 1024 16384 262144 1048576 --steps 1000 --repeats 3 \
    --corridor --json "$out/throughput.json"
  # PPO at equal hyperparameters, rollax and rejax (one process each)
  row 90 "$anchors" ppo_rollax.py --repeats 2 --json "$out/ppo-rollax.json"
  row 90 "$rejax" ppo_rejax.py --repeats 2 --json "$out/ppo-rejax.json"
  # the same at 1,024 environments, where the SGD update dominates
  row 90 "$anchors" ppo_rollax.py --num-envs 1024 --total-steps 2097152 --repeats 2 \
    --json "$out/ppo-rollax-1024.json"
  row 90 "$rejax" ppo_rejax.py --num-envs 1024 --total-steps 2097152 --repeats 2 \
    --json "$out/ppo-rejax-1024.json"
  ;;
seeds)
  # corridor absorbing collector at 1M and 8M environments (target >= 1e11 env steps/s at 8M):
  # the scan loop as written, then fully unrolled (one fused kernel per slice, no per-step keys
  # or state going back to memory); both give the same records
  row 60 "$anchors" throughput.py --sizes --corridor 1048576 8388608 --repeats 3 \
    --json "$out/corridor.json"
  row 90 "$anchors" throughput.py --sizes --corridor 1048576 8388608 --repeats 3 --unroll all \
    --json "$out/corridor-unrolled.json"
  # seeds in one program (targets: >= 6e7 env steps/s for 1024 PPO seeds on the H200, >= 1e7
  # on the TPU with compile <= 30 s)
  row 300 "$anchors" seeds.py --seeds 1 64 1024 --total-steps 100000 --repeats 1 \
    --json "$out/seeds.json"
  ;;
parts)
  # where PPO's update time goes at 4 and 1,024 envs (rollax, then rejax in its own process),
  # and the throughput rows with the chip's own random bit generator (rbg, unsafe_rbg)
  row 150 "$anchors" ppo_parts.py --lib rollax --num-envs 4 1024 --json "$out/parts-rollax.json"
  row 150 "$rejax" ppo_parts.py --lib rejax --num-envs 4 1024 --json "$out/parts-rejax.json"
  for impl in rbg unsafe_rbg; do
    row 120 "$anchors" throughput.py --sizes 262144 1048576 --steps 1000 --repeats 3 \
      --corridor --prng "$impl" --json "$out/throughput-$impl.json"
  done
  ;;
variants)
  # rollax's 16 minibatch steps at 1,024 envs under each change of ppo_parts.variants()
  row 240 "$anchors" ppo_parts.py --lib rollax --num-envs 1024 --variants \
    --json "$out/parts-variants.json"
  ;;
shuffle)
  # the minibatch shuffle under 1,024 vmapped seeds: the one-gather take_rows beside a gather per
  # field and no shuffle at all, then PPO seeds in one program (SEEDS_K, default 1024)
  row 270 "$anchors" ppo_parts.py --lib rollax --num-envs 8 --seeds 1024 --variants \
    --json "$out/parts-seeds-variants.json"
  for k in ${SEEDS_K:-1024}; do
    row "${SEED_LIMIT:-200}" "$anchors" seeds.py --seeds "$k" --total-steps 100000 --repeats 1 \
      --json "$out/seeds-$k.json"
  done
  ;;
seeds-compile)
  # the compile time of K PPO seeds in one program, part by part (K = 64, 256, 1,024)
  for k in ${SEEDS:-64 256 1024}; do
    row "${SEED_LIMIT:-150}" "$anchors" seeds_compile.py --seeds "$k" ${PRNG:+--prng $PRNG}
  done
  ;;
profile)
  # where the 1,024-seed program's time goes (the trace under $OUT/profile, its busiest device
  # operations printed), then the chip's own bit generator for the lanes' keys (--key-impl rbg)
  row 240 "$anchors" seeds.py --seeds 1024 --total-steps 100000 --repeats 1 \
    --profile "$out/profile" --json "$out/seeds-profile.json"
  row 150 "$anchors" seeds.py --seeds 1024 --total-steps 100000 --repeats 1 --key-impl rbg \
    --json "$out/seeds-rbg.json"
  row 90 "$anchors" ppo_rollax.py --num-envs 1024 --total-steps 2097152 --repeats 2 \
    --key-impl rbg --json "$out/ppo-rollax-1024-rbg.json"
  ;;
resets)
  for resets in finished all; do
    row 150 "$anchors" throughput.py --sizes 262144 1048576 --steps 1000 --repeats 3 --corridor \
      --prng rbg --resets "$resets" --profile "$out/profile-resets-$resets" \
      --json "$out/throughput-rbg-$resets.json"
  done
  ;;
actions)
  for prng in threefry2x32 rbg; do
    row 150 "$anchors" throughput.py --sizes 262144 1048576 --steps 1000 --repeats 3 --corridor \
      --prng "$prng" --actions batched --json "$out/throughput-batched-$prng.json"
  done
  # rollax alone with its reset keys split as before rollax.keys.children (all-split)
  row 120 "$anchors" throughput.py --sizes 262144 1048576 --steps 1000 --repeats 3 --corridor \
    --prng rbg --actions batched --resets all-split --no-gymnax \
    --json "$out/throughput-batched-rbg-split.json"
  ;;
many-seeds)
  for k in ${SEEDS_K:-4096}; do
    row "${SEED_LIMIT:-200}" "$anchors" seeds.py --seeds "$k" --total-steps 100000 --repeats 1 \
      ${PRNG:+--key-impl $PRNG} --json "$out/seeds-$k${PRNG:+-$PRNG}.json"
  done
  ;;
ppo)
  # PPO beside rejax at ENVS environments (default 64; STEPS total, default 2,097,152): the
  # sizes between timing's 4 and 1,024
  for n in ${ENVS:-64}; do
    row 120 "$anchors" ppo_rollax.py --num-envs "$n" --total-steps "${STEPS:-2097152}" --repeats 2 \
      ${PRNG:+--key-impl $PRNG} --json "$out/ppo-rollax-$n${PRNG:+-$PRNG}.json"
    row 120 "$rejax" ppo_rejax.py --num-envs "$n" --total-steps "${STEPS:-2097152}" --repeats 2 \
      --json "$out/ppo-rejax-$n.json"
  done
  ;;
command)
  # the runtime's start in phases (runtime_phases.py), then rollax train --env
  # CartPole-v1 cold and warm (its own compile cache; REPEATS warm runs, 3), the runtime's start
  # and the import apart, then a warm run under cProfile (issue 50's command row)
  row 60 "$anchors" runtime_phases.py --json "$out/runtime-phases.json"
  row 540 "$anchors" command_time.py --repeats "${REPEATS:-3}" --json "$out/command.json" \
    --profile "$out/command.prof"
  ;;
phases)
  # the runtime's start in phases, then started in a thread beside rollax's import (twice)
  row 60 "$anchors" runtime_phases.py --json "$out/runtime-phases.json"
  row 60 "$anchors" runtime_phases.py --beside --json "$out/runtime-beside-1.json"
  row 60 "$anchors" runtime_phases.py --beside --json "$out/runtime-beside-2.json"
  ;;
warm-compile)
  # the warm command's compile path in phases (warm_compile.py: one cold run, two warm)
  row 300 "$anchors" warm_compile.py --json "$out/warm-compile.json"
  ;;
tests)
  # the fast tests on the device, in one process (one program at a time may hold a TPU); at the
  # limit pytest is interrupted (SIGINT), so it still reports the failures it met, and killed 30 s on
  echo; echo "=== pytest -m 'not slow and not integration' ${TESTS:-tests}"
  [ -n "$dry" ] && { echo "PYTHONPATH=$anchors timeout -s INT -k 30 ${TEST_LIMIT:-540} python3 -m pytest"; exit 0; }
  # shellcheck disable=SC2086
  PYTHONPATH="$anchors" timeout -s INT -k 30 "${TEST_LIMIT:-540}" python3 -m pytest -p no:cacheprovider \
    -m "not slow and not integration" -v --tb=short --junitxml "$out/tests.xml" ${TESTS:-tests} 2>&1 \
    | tee "$out/tests.log" | grep -E "passed|failed|error|FAILED|ERROR" | tail -40
  ;;
minatar-cnn) minatar "$anchors" minatar_rollax.py minatar-rollax-cnn --network cnn ;;
minatar-mlp) minatar "$anchors" minatar_rollax.py minatar-rollax-mlp --network mlp ;;
minatar-rejax) minatar "$rejax" minatar_rejax.py minatar-rejax ;;
brax-rollax|brax-brax)  # needs .whl/brax: brax 0.14.2, mujoco, mujoco-mjx and their needs
  install brax
  row 540 "$base$PWD/src:/tmp/site-brax" brax_ppo.py --libs "${section#brax-}" \
    --total-steps 20000000 --seeds 3 --json "$out/$section.json" --plot "$out/$section.png" ;;
*) echo "unknown section '$section' (timing, ppo, parts, variants, shuffle, seeds-compile, profile, resets, actions, many-seeds, seeds, command, phases, warm-compile, tests, minatar-cnn, minatar-mlp, minatar-rejax, brax-rollax, brax-brax)"; exit 2 ;;
esac
echo; echo "JSON in $out"
