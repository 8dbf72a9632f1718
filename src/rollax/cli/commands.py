"""``rollax eval``, ``plot``, ``rollout``, ``exact``, ``check-env`` and ``envs``."""

from __future__ import annotations

from pathlib import Path

from rollax.cli.flags import CheckEnv, Envs, Evaluate, Exact, Plot, Rollout
from rollax.cli.train import emit
from rollax.validate import check_count, check_seed


def run_eval(cmd: Evaluate) -> None:
    from rollax.run.training import evaluate_run

    result = evaluate_run(cmd.run_dir, cmd.episodes, not cmd.stochastic, cmd.seed)
    if cmd.json:
        emit(result)
        return
    mode = "greedy" if not cmd.stochastic else "stochastic"
    print(f"{result['env']}: {cmd.episodes} {mode} episodes per lane")
    for lane in result["lanes"]:
        extra = (f", exact {lane['exact_return']:.6f}" if "exact_return" in lane else "")
        label = ", ".join(f"{k}={v}" for k, v in lane.items()
                          if k not in ("mean_return", "exact_return"))
        print(f"  {label}: mean return {lane['mean_return']:.4f}{extra}")
    agg = result["aggregate"]
    print(f"mean {agg['mean']:.4f}, 95% CI [{agg['ci95'][0]:.4f}, {agg['ci95'][1]:.4f}], "
          f"IQM {agg['iqm']:.4f} over {agg['n']} lanes")


def _check_plot_input(run: Path) -> None:
    from rollax.run.folder import RunFolder
    from rollax.run.training import read_run

    folder = RunFolder(run)
    folder.check_exists()
    if folder.is_rollout:
        folder.read_rollout()
        return
    if not (run / "config.json").is_file():
        raise ValueError(f"{str(run)!r} is not a rollax run folder (no config.json)")
    read_run(folder)
    if not folder.read_metrics():
        raise ValueError(f"{str(run / 'metrics.jsonl')!r} holds no metrics yet")


def run_plot(cmd: Plot) -> None:
    from rollax.run.folder import check_creatable_folder
    from rollax.run.plots import plot_runs

    runs = [Path(r) for r in cmd.run_dirs]
    if not runs:
        raise ValueError("plot needs at least one run folder")
    for run in runs:
        _check_plot_input(run)
    if cmd.out is None and len(runs) > 1:
        raise ValueError("out is required when plotting several runs (--out DIR)")
    out = Path(cmd.out) if cmd.out is not None else runs[0] / "figures"
    check_creatable_folder(out)
    written = plot_runs(runs, out, cmd.x)
    if cmd.json:
        emit({"figures": [str(p) for p in written]})
        return
    for p in written:
        print(p)


def run_rollout(cmd: Rollout) -> None:
    import jax
    import numpy as np

    from rollax.collect import collect
    from rollax.envs.corridor import Corridor
    from rollax.policies import BernoulliPolicy
    from rollax.run.files import staged_folder
    from rollax.run.folder import RunFolder, check_new_run_dir
    from rollax.run.plots import plot_active

    check_seed(cmd.seed)
    check_count("batch_size", cmd.batch_size)
    env = Corridor(horizon=cmd.horizon)
    run_dir = check_new_run_dir(cmd.out, f"rollout-seed{cmd.seed}")
    policy = BernoulliPolicy(3)
    _, traj = collect(env, policy, policy.init(), jax.random.key(cmd.seed), cmd.batch_size,
                      cmd.horizon)
    active = [int(n) for n in np.asarray(traj.active.sum(axis=1))]
    mean_return = float(np.asarray(traj.reward.sum(axis=0)).mean())
    with staged_folder(run_dir) as staging:
        RunFolder(staging).write_rollout(
            {"seed": cmd.seed, "batch_size": cmd.batch_size, "horizon": cmd.horizon,
             "active_per_step": active, "mean_return": mean_return})
        plot_active(active, cmd.batch_size, staging / "active_per_step.png",
                    f"corridor, uniform policy, B={cmd.batch_size}, seed {cmd.seed}")
    if cmd.json:
        emit({"active_per_step": active, "mean_return": mean_return, "run_dir": str(run_dir)})
        return
    print(f"corridor rollout: B={cmd.batch_size}, T={cmd.horizon}, seed {cmd.seed}, uniform policy")
    print("active environments per transition: " + " ".join(map(str, active)))
    print(f"mean episode return: {mean_return:.6f}")
    print(f"figure: {run_dir / 'active_per_step.png'}")


def run_exact(cmd: Exact) -> None:
    from rollax.envs.corridor import Corridor
    from rollax.envs.registry import make
    from rollax.envs.tabular import TabularEnv
    from rollax.exact import expected_return, optimal_return, uniform_policy

    env = make(cmd.env) if cmd.horizon is None else make(cmd.env, horizon=cmd.horizon)
    assert isinstance(env, (Corridor, TabularEnv))  # --env offers finite tasks only
    mdp = env.to_mdp()
    uniform = float(expected_return(mdp, uniform_policy(mdp)))
    optimal = float(optimal_return(mdp))
    if cmd.json:
        emit({"uniform_return": uniform, "optimal_return": optimal, "horizon": mdp.horizon})
        return
    print(f"{cmd.env}, horizon {mdp.horizon}, {mdp.num_states} states x {mdp.num_actions} actions")
    print(f"uniform policy exact return: {uniform:.6f}")
    print(f"optimal exact return:        {optimal:.6f}")


def run_check_env(cmd: CheckEnv) -> int:
    from rollax.contracts import check_env
    from rollax.contracts.preflight import trace_once
    from rollax.envs.registry import make

    check_count("batch_size", cmd.batch_size)
    check_seed(cmd.seed)
    env = make(cmd.name)
    trace_once(env, cmd.name)  # one line for an environment that cannot even be traced
    report = check_env(env, batch_size=cmd.batch_size, seed=cmd.seed)
    if cmd.json:
        emit({"env": cmd.name, "ok": report.ok,
              "checks": [{"name": r.name, "status": r.status, "message": r.message,
                          "step": r.step, "env": r.env} for r in report.results]})
    else:
        print(f"{cmd.name}:")
        print(report)
    return 0 if report.ok else 1


def run_envs(cmd: Envs) -> None:
    from rollax.envs.registry import registered
    from rollax.envs.suites import suite_ids

    ids = [*registered(), *suite_ids()]
    if cmd.json:
        emit({"envs": ids})
        return
    for name in ids:
        print(name)


RUNNERS = {Evaluate: run_eval, Plot: run_plot, Rollout: run_rollout, Exact: run_exact,
           CheckEnv: run_check_env, Envs: run_envs}
"""What runs each command but ``train``."""

COMPILES = (Evaluate, Rollout, Exact, CheckEnv)
"""The commands besides ``train`` that compile programs (and use the compile cache)."""
