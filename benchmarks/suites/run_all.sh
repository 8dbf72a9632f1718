#!/usr/bin/env bash
# Every suite's throughput table (benchmarks/suites/run.py) in one go, in a venv with the
# suites' extras (pip install ".[brax,playground,jumanji,pgx,craftax,xminigrid,gymnax]"):
#   bash benchmarks/suites/run_all.sh [SUITE ...]
# writes benchmarks/suites/results/<suite>.json and prints benchmarks/SUITES.md's table.
set -euo pipefail
cd "$(dirname "$0")"
suites=("$@")
[ ${#suites[@]} -eq 0 ] && suites=(gymnax brax playground jumanji pgx craftax xminigrid)
mkdir -p results
for suite in "${suites[@]}"; do
    python run.py "$suite" --sizes 64 1024 --steps 100 --repeats 3 --json "results/$suite.json"
done
python - <<'PY'
import json, pathlib
rows = []
for path in sorted(pathlib.Path("results").glob("*.json")):
    data = json.loads(path.read_text())
    rows += data["rows"]
print(f"device: {data['device']}\n")
print("| suite | env | B | rollax steps/s | suite's own loop steps/s | ratio | compile rollax / suite (s) |")
print("|---|---|---|---|---|---|---|")
for r in rows:
    print(f"| {r['suite']} | {r['env']} | {r['batch']} | {r['rollax_steps_per_s']:,.0f} | "
          f"{r['suite_steps_per_s']:,.0f} | {r['rollax_steps_per_s'] / r['suite_steps_per_s']:.2f} | "
          f"{r['rollax_compile_s']:.1f} / {r['suite_compile_s']:.1f} |")
PY
