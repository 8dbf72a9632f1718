#!/usr/bin/env bash
# Usage: bash tools/fingerprints.sh OUT (with rollax on the PATH); compare two OUT files with diff.
# A refactor that must not change trained results leaves the file unchanged.
# Fingerprints of trained results: params_sha256 and printed returns, one JSON line each.
set -u
out=${1:?out file}
tmp=$(mktemp -d)
: > "$out"
run() { name=$1; shift; echo "== $name" >> "$out"; rollax train --json --out "$tmp/$name" "$@" 2>>"$out.err" | tail -1 | python -c 'import json,sys; d=json.load(sys.stdin); d.pop("run_dir",None); d.pop("compile_cache",None); print(json.dumps(d, sort_keys=True))' >> "$out"; }
run tab-ppo
run tab-reinforce --algo reinforce --updates 20
run tab-frozen --env FrozenLake-v1 --updates 10 --seeds 2
run tab-sweep --updates 6 --seeds 2 --sweep lr=0.25,0.5 clip_eps=0.1,0.2
run tab-chunk --updates 12 --chunk-size 5 --checked
run ppo-cartpole --env CartPole-v1 --total-steps 4096 --seeds 2
run ppo-pendulum --env Pendulum-v1 --total-steps 8192 --num-envs 4 --minibatches 4
run ppo-mc-sweep --env MountainCar-v0 --total-steps 4096 --sweep lr=1e-3,3e-4 --chunk-size 2
run ppo-acro-checked --env Acrobot-v1 --total-steps 4096 --checked
run ppo-gymnax --env gymnax:CartPole-v1 --total-steps 2048 --num-envs 4
run a2c-cartpole --env CartPole-v1 --algo a2c --total-steps 2048 --seeds 2
run a2c-pendulum-gru --env Pendulum-v1 --algo a2c --total-steps 1024 --network gru --num-envs 4
run reinforce-loo --env CartPole-v1 --algo reinforce --updates 3 --batch-size 8 --group-size 4 --baseline loo --horizon 60
run reinforce-value --env Acrobot-v1 --algo reinforce --updates 2 --batch-size 4 --baseline value --horizon 40
run grpo-cartpole --env CartPole-v1 --algo grpo --updates 3 --batch-size 8 --group-size 4 --kl-coef 0.05 --scale-by-std --horizon 60
run grpo-lstm --env CartPole-v1 --algo grpo --updates 2 --batch-size 4 --group-size 2 --network lstm --horizon 30
# eval of a saved run
echo "== eval" >> "$out"
rollax eval "$tmp/tab-frozen" --json --episodes 50 | python -c 'import json,sys; d=json.load(sys.stdin); print(json.dumps(d, sort_keys=True))' >> "$out"
rollax eval "$tmp/ppo-cartpole" --json --episodes 5 | python -c 'import json,sys; d=json.load(sys.stdin); print(json.dumps(d, sort_keys=True))' >> "$out"
rollax eval "$tmp/a2c-cartpole" --json --episodes 5 | python -c 'import json,sys; d=json.load(sys.stdin); print(json.dumps(d, sort_keys=True))' >> "$out"
rollax eval "$tmp/grpo-cartpole" --json --episodes 5 | python -c 'import json,sys; d=json.load(sys.stdin); print(json.dumps(d, sort_keys=True))' >> "$out"
python - "$tmp" >> "$out" <<'PY'
import json, sys, pathlib
for run in sorted(pathlib.Path(sys.argv[1]).iterdir()):
    s = json.loads((run / "summary.json").read_text())
    print(run.name, json.dumps({k: s[k] for k in ("score", "params_sha256")} | {"lanes": [{k: v for k, v in l.items()} for l in s["lanes"]], "aggregate": s["aggregate"]}, sort_keys=True))
    rows = [json.loads(l) for l in (run / "metrics.jsonl").read_text().splitlines() if l.strip()]
    for r in rows: r.pop("env_steps_per_second", None)
    print(run.name, "metrics", __import__("hashlib").sha256(json.dumps(rows, sort_keys=True).encode()).hexdigest()[:16], len(rows))
PY
rm -rf "$tmp"
