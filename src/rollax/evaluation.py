"""``rollax eval``: evaluate the saved policies of a run folder with fresh keys."""

from __future__ import annotations

from pathlib import Path

import jax
import numpy as np

from rollax import checkpoint
from rollax.collect import collect
from rollax.exact import policy_return
from rollax.experiment import Runner, make_lanes, summarize
from rollax.policies import GreedyPolicy
from rollax.validate import check_count, check_seed


def evaluate_run(run_dir: Path, episodes: int, greedy: bool, seed: int) -> dict:
    """Mean return over ``episodes`` absorbing episodes per lane (greedy or sampled actions),
    keys ``split(jax.random.key(seed), lanes)``; tabular runs add each lane's exact return."""
    from rollax.training import build_algorithm, read_plan

    check_count("episodes", episodes)
    check_seed(seed)
    if not run_dir.is_dir():
        raise ValueError(f"{str(run_dir)!r} is not a folder")
    plan = read_plan(run_dir)
    algo = build_algorithm(plan.kind, plan.config)
    lanes = make_lanes(plan.seed, plan.seeds, plan.sweep)
    runner = Runner(algo, lanes, 1)
    update, state = checkpoint.load(checkpoint.latest(run_dir / "checkpoints"),
                                    runner.initial_state(), plan.identity())
    env, policy = algo.env, algo.policy
    actor = GreedyPolicy(policy) if greedy else policy

    def one(lane_state, key):
        params = algo.policy_params(lane_state)
        _, traj = collect(env, actor, params, key, episodes, env.horizon)
        returns = traj.reward.sum(axis=0)
        out = {"mean_return": returns.mean()}
        if plan.kind == "tabular":
            out["exact_return"] = policy_return(env.to_mdp(), policy, params)
        return out

    keys = jax.random.split(jax.random.key(seed), len(lanes))
    result = jax.device_get(jax.jit(jax.vmap(one))(state, keys))
    rows = []
    for i, label in enumerate(lanes.labels()):
        rows.append({**label, **{k: float(np.asarray(v)[i]) for k, v in result.items()}})
    return {"env": plan.config["env"], "update": update, "greedy": greedy,
            "episodes": episodes, "lanes": rows,
            "aggregate": summarize([r["mean_return"] for r in rows])}
