#!/usr/bin/env bash
# Run every benchmark row and write benchmarks/RESULTS.md (see benchmarks/run_all.py):
#
#     bash benchmarks/run.sh [--quick] [--only throughput|ppo|solve|seeds|cnn|user ...] [--out DIR]
#
# Rows: throughput; ppo (rollax vs rejax at 4, 64 and 1,024 environments: jobs ppo-rollax,
# ppo-rejax, ppo-rollax-64, ppo-rejax-64, ppo-rollax-1024, ppo-rejax-1024); solve (rollax cold,
# then rollax with a warm compile cache: solve-rollaxwarm-fill fills a fresh temporary cache,
# solve-rollaxwarm loads from it; then SB3); seeds; cnn (one MinAtar PPO update: rollax's CNN
# beside its MLP and the plain update); user (benchmarks/user_speed.py: the command line's fixed
# costs, to_gymnasium and act, an earlier commit beside this checkout). --only ROW re-runs every
# job of ROW.
#
# Creates the two benchmark environments when missing: .bench/anchors (rollax editable with
# gymnax 1.x, torch CPU, Stable-Baselines3) and .bench/rejax (rejax with the gymnax it supports).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}

# (re)installed when new or when pyproject.toml changed since, so its pins apply here too
if [ ! -x .bench/anchors/bin/python ] || [ pyproject.toml -nt .bench/anchors/.installed ]; then
    [ -x .bench/anchors/bin/python ] || "$PYTHON" -m venv .bench/anchors
    .bench/anchors/bin/python -m pip install -e ".[gymnax]" -r benchmarks/requirements-anchors.txt
    touch .bench/anchors/.installed
fi
if [ ! -x .bench/rejax/bin/python ]; then
    "$PYTHON" -m venv .bench/rejax
    .bench/rejax/bin/python -m pip install -r benchmarks/requirements-rejax.txt
fi
exec .bench/anchors/bin/python benchmarks/run_all.py "$@"
