"""The ``rollax`` command line: ``train``, ``rollout`` and ``exact``.

Every command takes ``--json`` and then prints exactly one JSON object on stdout. Bad input
prints one line ``rollax <command>: error: ...`` on stderr and exits with status 2, before
anything is compiled or written.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import re
import sys
import time
from typing import Literal

import tyro

from rollax.algos.tabular import TrainConfig, resolve_config

EXACT_ENVS = ("corridor", "FrozenLake-v1", "FrozenLake8x8-v1", "Taxi-v4", "CliffWalking-v1")


@dataclasses.dataclass(frozen=True)
class Train:
    """Train a policy. Finite tasks (corridor, toy-text) train a tabular policy with REINFORCE
    or PPO-clip and report the exact return per update; vector-observation tasks (CartPole-v1,
    Acrobot-v1, MountainCar-v0, Pendulum-v1, gymnax:<id>) train a neural actor-critic with PPO
    from the task's preset and report a greedy evaluation."""

    algo: Literal["ppo", "reinforce"] = "ppo"
    """Policy-gradient method (reinforce: tabular tasks only)."""
    env: str = "corridor"
    """Registered environment name."""
    seed: int = 0
    """Root key jax.random.key(seed); with --seeds K, seed k uses key(seed + k)."""
    seeds: int = 1
    """Independent seeds trained in one program (vmap)."""
    horizon: int | None = None
    """Episode time limit (default: the task's; for tabular tasks also the rollout length)."""
    lr: float | None = None
    """Learning rate (default: 0.5 tabular, the preset's for neural PPO)."""
    epochs: int | None = None
    """Gradient passes per batch (default: 3 tabular PPO, 1 REINFORCE, the preset's neural)."""
    clip_eps: float | None = None
    """PPO clip range in (0, 1) (default 0.2)."""
    updates: int | None = None
    """Tabular only: number of updates (default 40)."""
    batch_size: int | None = None
    """Tabular only: episodes per batch (default 256)."""
    total_steps: int | None = None
    """Neural only: environment steps in all, per seed (default: the preset's)."""
    num_envs: int | None = None
    """Neural only: parallel environments (default: the preset's)."""
    num_steps: int | None = None
    """Neural only: steps per environment per update (default: the preset's)."""
    minibatches: int | None = None
    """Neural only: minibatches per epoch (default: the preset's)."""
    out: str | None = None
    """Run folder to create (must not exist); default runs/<env>-<algo>-seed<S>-<time>."""
    json: bool = False
    """Print one JSON object instead of tables."""


@dataclasses.dataclass(frozen=True)
class Rollout:
    """Collect one absorbing corridor batch with the uniform (zero-logit) policy."""

    seed: int = 0
    """The collection key is jax.random.key(seed)."""
    batch_size: int = 256
    """Environments (episodes) in the batch, B."""
    horizon: int = 8
    """Episode time limit, also the number of steps T collected."""
    out: str | None = None
    """Folder to create for the figure (must not exist); default runs/rollout-seed<S>-<time>."""
    json: bool = False
    """Print one JSON object (active_per_step, mean_return, run_dir)."""


@dataclasses.dataclass(frozen=True)
class Exact:
    """Exact expected return of the uniform and of the optimal policy (dynamic programming)."""

    env: Literal[EXACT_ENVS] = "corridor"  # type: ignore[valid-type]
    """Finite task: the corridor or a Gymnasium toy-text environment."""
    horizon: int | None = None
    """Finite horizon (default: 8 for corridor, else the registered episode limit)."""
    json: bool = False
    """Print one JSON object (uniform_return, optimal_return, horizon)."""


COMMANDS = {"train": Train, "rollout": Rollout, "exact": Exact}


class UsageError(Exception):
    """A one-line error for the user."""


def _one_line(box: str) -> str:
    """Condense tyro's boxed parse error into its first message."""
    lines = []
    for raw in box.splitlines()[1:]:
        text = raw.strip().strip("│╭╮╰╯").strip()
        if not text or set(text) <= set("─"):
            if lines:
                break
            continue
        lines.append(text)
    message = " ".join(lines) or box.strip() or "invalid arguments"
    return re.sub(r"\s+", " ", message)


def _parse(argv: list[str]):
    buffer = io.StringIO()
    try:
        with contextlib.redirect_stderr(buffer):
            return tyro.extras.subcommand_cli_from_dict(COMMANDS, prog="rollax", args=argv)
    except SystemExit as exit_:
        if exit_.code in (0, None):
            raise
        command = argv[0] if argv and argv[0] in COMMANDS else None
        raise UsageError(_one_line(buffer.getvalue()), command) from None


def _emit(obj) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def _floats(x) -> list[float]:
    return [float(v) for v in x.reshape(-1)]


def _versions() -> dict:
    import jax

    import rollax

    return {
        "rollax": rollax.__version__,
        "jax": jax.__version__,
        "devices": [str(d) for d in jax.devices()],
    }


TABULAR_ONLY = ("updates", "batch_size")
NEURAL_ONLY = ("total_steps", "num_envs", "num_steps", "minibatches")


def _given(cmd: Train, names) -> list[str]:
    return ["--" + n.replace("_", "-") for n in names if getattr(cmd, n) is not None]


def _check_seeds(seed, seeds) -> None:
    from rollax.collect import _check_count

    _check_count("seeds", seeds)
    if not isinstance(seed, int) or not 0 <= seed < 2**63 - seeds:
        raise ValueError(f"seed must be an integer in [0, 2**63 - seeds), got {seed!r}")


def _is_tabular(env_name: str, horizon) -> bool:
    from rollax.envs.registry import make

    env = make(env_name) if horizon is None else make(env_name, horizon=horizon)
    return hasattr(env, "to_mdp")


def run_train(cmd: Train) -> None:
    _check_seeds(cmd.seed, cmd.seeds)
    if _is_tabular(cmd.env, cmd.horizon):
        if _given(cmd, NEURAL_ONLY):
            raise ValueError(f"{', '.join(_given(cmd, NEURAL_ONLY))} apply to neural tasks; "
                             f"{cmd.env} is tabular (use --updates and --batch-size)")
        given = {k: getattr(cmd, k) for k in ("updates", "batch_size", "horizon", "epochs", "lr",
                                              "clip_eps") if getattr(cmd, k) is not None}
        config = resolve_config(TrainConfig(algo=cmd.algo, env=cmd.env, seed=cmd.seed, **given))
        return _train_tabular(cmd, config)
    if cmd.algo != "ppo":
        raise ValueError(f"algo {cmd.algo} is only available for tabular tasks; "
                         f"{cmd.env} trains with --algo ppo")
    if _given(cmd, TABULAR_ONLY):
        raise ValueError(f"{', '.join(_given(cmd, TABULAR_ONLY))} apply to tabular tasks; "
                         f"{cmd.env} is neural (use --total-steps and --num-envs)")
    from rollax.algos import ppo

    given = {k: getattr(cmd, k) for k in ("horizon", "epochs", "lr", "clip_eps", *NEURAL_ONLY)
             if getattr(cmd, k) is not None}
    config = ppo.preset(cmd.env, seed=cmd.seed, **given)
    ppo.validate(config)
    return _train_ppo(cmd, config)


def _seed_keys(seed: int, seeds: int):
    """Seed k's root key is ``jax.random.key(seed + k)``."""
    import jax
    import jax.numpy as jnp

    return jnp.stack([jax.random.key(seed + k) for k in range(seeds)])


def _compile_and_run(train, keys):
    """Compile once (timed apart), then run; several seeds are one vmapped program. A single
    seed runs unbatched, exactly as ``train(jax.random.key(seed))``."""
    import jax

    single = keys.shape[0] == 1
    program = jax.jit(train) if single else jax.jit(jax.vmap(train))
    args = keys[0] if single else keys
    start = time.perf_counter()
    compiled = program.lower(args).compile()
    compile_s = time.perf_counter() - start
    start = time.perf_counter()
    result = jax.block_until_ready(compiled(args))
    run_s = time.perf_counter() - start
    if single:
        result = jax.tree_util.tree_map(lambda x: x[None], result)
    return result, compile_s, run_s


def _train_tabular(cmd: Train, config: TrainConfig) -> None:
    import numpy as np
    from rich.console import Console
    from rich.table import Table

    from rollax.algos.tabular import make_train
    from rollax.envs.registry import make
    from rollax.exact import optimal_return
    from rollax.plots import plot_exact_return
    from rollax.runs import check_new_run_dir, staged_run_dir, write_json, write_jsonl

    run_dir = check_new_run_dir(cmd.out, f"{config.env}-{config.algo}-seed{config.seed}")
    train = make_train(config)
    result, compile_s, run_s = _compile_and_run(train, _seed_keys(config.seed, cmd.seeds))
    history = np.asarray(result.exact_return, dtype=np.float64)  # (K, updates + 1)
    metrics = {k: np.asarray(v, dtype=np.float64) for k, v in result.metrics._asdict().items()}
    optimum = float(optimal_return(make(config.env, horizon=config.horizon).to_mdp()))
    params = np.asarray(result.params, dtype=np.float64)  # (K, ...)
    seeds = [config.seed + k for k in range(cmd.seeds)]

    with staged_run_dir(run_dir) as staging:
        write_json(staging / "config.json",
                   {**dataclasses.asdict(config), "seeds": cmd.seeds, **_versions()})
        write_jsonl(
            staging / "metrics.jsonl",
            (
                {"seed": s, "update": i + 1, **{k: float(v[j, i]) for k, v in metrics.items()}}
                for j, s in enumerate(seeds)
                for i in range(config.updates)
            ),
        )
        write_json(
            staging / "summary.json",
            {
                "seeds": seeds,
                "exact_return_initial": [float(h[0]) for h in history],
                "exact_return_final": [float(h[-1]) for h in history],
                "optimal_return": optimum,
                "exact_return": [_floats(h) for h in history],
                "params": [_floats(p) for p in params],
                "compile_time_s": compile_s,
                "run_time_s": run_s,
            },
        )
        plot_exact_return(
            history, staging / "exact_return.png",
            f"{config.algo} on {config.env} (B={config.batch_size}, "
            f"{cmd.seeds} seed{'s' if cmd.seeds > 1 else ''})", optimum,
        )

    if cmd.json:
        if cmd.seeds == 1:
            _emit({"exact_return": _floats(history[0]), "params": _floats(params[0]),
                   "run_dir": str(run_dir)})
        else:
            _emit({"exact_return": [_floats(h) for h in history],
                   "params": [_floats(p) for p in params], "seeds": seeds,
                   "run_dir": str(run_dir)})
        return
    console = Console(highlight=False)
    console.print(
        f"{config.algo} on {config.env}: {config.updates} updates x B={config.batch_size}, "
        f"horizon {config.horizon}, {config.epochs} epoch(s), lr {config.lr}, "
        f"seed{'s' if cmd.seeds > 1 else ''} {', '.join(map(str, seeds))}"
    )
    table = Table("update", "exact return", "batch return", "loss", "approx_kl", "clip frac",
                  title="mean over seeds" if cmd.seeds > 1 else None)
    every = max(1, config.updates // 20)
    for i in range(config.updates):
        if (i + 1) % every and i + 1 != config.updates:
            continue
        table.add_row(
            str(i + 1), f"{history[:, i + 1].mean():.4f}",
            f"{metrics['episode_return'][:, i].mean():.4f}",
            f"{metrics['loss'][:, i].mean():+.4f}", f"{metrics['approx_kl'][:, i].mean():.2e}",
            f"{metrics['clip_fraction'][:, i].mean():.3f}",
        )
    console.print(table)
    console.print(f"exact return before: {history[0, 0]:.6f}")
    after = ", ".join(f"{h:.6f}" for h in history[:, -1])
    console.print(f"exact return after:  {after}   (optimal {optimum:.6f})")
    if cmd.seeds == 1:
        console.print(f"params: {np.round(params[0], 4).tolist()}")
    console.print(f"compile {compile_s:.1f} s, run {run_s:.1f} s; run folder: {run_dir}")


def _train_ppo(cmd: Train, config) -> None:
    import equinox as eqx
    import numpy as np
    from rich.console import Console
    from rich.table import Table

    from rollax.algos import ppo
    from rollax.plots import plot_training_curves
    from rollax.runs import check_new_run_dir, staged_run_dir, write_json, write_jsonl

    run_dir = check_new_run_dir(cmd.out, f"{config.env.replace(':', '-')}-ppo-seed{config.seed}")
    train = ppo.make_train(config)
    result, compile_s, run_s = _compile_and_run(train, _seed_keys(config.seed, cmd.seeds))
    metrics = {k: np.asarray(v, dtype=np.float64) for k, v in result.metrics._asdict().items()}
    eval_return = np.asarray(result.eval_return, dtype=np.float64)
    seeds = [config.seed + k for k in range(cmd.seeds)]
    updates = ppo.num_updates(config)
    env_steps = metrics["env_steps"][0]
    steps_per_s = cmd.seeds * env_steps[-1] / run_s

    def clean(x):
        return None if not np.isfinite(x) else float(x)

    with staged_run_dir(run_dir) as staging:
        write_json(staging / "config.json", {**dataclasses.asdict(config), "seeds": cmd.seeds,
                                             "updates": updates, **_versions()})
        write_jsonl(
            staging / "metrics.jsonl",
            (
                {"seed": s, "update": i + 1, **{k: clean(v[j, i]) for k, v in metrics.items()}}
                for j, s in enumerate(seeds)
                for i in range(updates)
            ),
        )
        write_json(staging / "summary.json", {
            "seeds": seeds,
            "eval_return": _floats(eval_return),
            "eval_return_mean": float(eval_return.mean()),
            "eval_episodes": config.eval_episodes,
            "env_steps_per_seed": int(env_steps[-1]),
            "compile_time_s": compile_s,
            "run_time_s": run_s,
            "env_steps_per_second": steps_per_s,
        })
        eqx.tree_serialise_leaves(staging / "params.eqx", (result.params, result.obs_stats))
        plot_training_curves(env_steps, metrics["episode_return"], staging / "episode_return.png",
                             f"PPO on {config.env} ({cmd.seeds} seed{'s' * (cmd.seeds > 1)})")

    if cmd.json:
        _emit({"eval_return": _floats(eval_return), "eval_return_mean": float(eval_return.mean()),
               "seeds": seeds, "env_steps": int(env_steps[-1]), "run_dir": str(run_dir)})
        return
    console = Console(highlight=False)
    console.print(
        f"PPO on {config.env}: {updates} updates x {config.num_envs} envs x {config.num_steps} "
        f"steps, {config.epochs} epochs x {config.minibatches} minibatches, lr {config.lr}, "
        f"seed{'s' * (cmd.seeds > 1)} {', '.join(map(str, seeds))}"
    )
    table = Table("update", "env steps", "episode return", "approx_kl", "clip frac", "entropy",
                  "expl. var", title="mean over seeds" if cmd.seeds > 1 else None)
    every = max(1, updates // 20)
    with np.errstate(all="ignore"):
        for i in range(updates):
            if (i + 1) % every and i + 1 != updates:
                continue
            ret = np.nanmean(metrics["episode_return"][:, i]) if np.isfinite(
                metrics["episode_return"][:, i]).any() else float("nan")
            table.add_row(
                str(i + 1), f"{int(env_steps[i]):,}", f"{ret:.1f}",
                f"{metrics['approx_kl'][:, i].mean():.2e}",
                f"{metrics['clip_fraction'][:, i].mean():.3f}",
                f"{metrics['entropy'][:, i].mean():.3f}",
                f"{np.nanmean(metrics['explained_variance'][:, i]):.2f}",
            )
    console.print(table)
    console.print("greedy evaluation return per seed: "
                  + ", ".join(f"{r:.1f}" for r in eval_return)
                  + f"   mean {eval_return.mean():.1f} ({config.eval_episodes} episodes each)")
    console.print(f"compile {compile_s:.1f} s, run {run_s:.1f} s "
                  f"({steps_per_s:,.0f} env steps/s); run folder: {run_dir}")


def run_rollout(cmd: Rollout) -> None:
    import jax
    import numpy as np

    from rollax.collect import _check_count, collect
    from rollax.envs.corridor import Corridor
    from rollax.plots import plot_active
    from rollax.policies import BernoulliPolicy
    from rollax.runs import check_new_run_dir, staged_run_dir

    if not isinstance(cmd.seed, int) or not 0 <= cmd.seed < 2**63:
        raise ValueError(f"seed must be an integer in [0, 2**63), got {cmd.seed!r}")
    _check_count("batch_size", cmd.batch_size)
    env = Corridor(horizon=cmd.horizon)
    run_dir = check_new_run_dir(cmd.out, f"rollout-seed{cmd.seed}")
    policy = BernoulliPolicy(3)
    _, traj = collect(env, policy, policy.init(), jax.random.key(cmd.seed), cmd.batch_size,
                      cmd.horizon)
    active = [int(n) for n in np.asarray(traj.active.sum(axis=1))]
    mean_return = float(np.asarray(traj.reward.sum(axis=0)).mean())
    with staged_run_dir(run_dir) as staging:
        plot_active(active, cmd.batch_size, staging / "active_per_step.png",
                    f"corridor, uniform policy, B={cmd.batch_size}, seed {cmd.seed}")
    if cmd.json:
        _emit({"active_per_step": active, "mean_return": mean_return, "run_dir": str(run_dir)})
        return
    print(f"corridor rollout: B={cmd.batch_size}, T={cmd.horizon}, seed {cmd.seed}, uniform policy")
    print("active environments per transition: " + " ".join(map(str, active)))
    print(f"mean episode return: {mean_return:.6f}")
    print(f"figure: {run_dir / 'active_per_step.png'}")


def run_exact(cmd: Exact) -> None:
    from rollax.envs.registry import make
    from rollax.exact import expected_return, optimal_return, uniform_policy

    env = make(cmd.env) if cmd.horizon is None else make(cmd.env, horizon=cmd.horizon)
    mdp = env.to_mdp()
    uniform = float(expected_return(mdp, uniform_policy(mdp)))
    optimal = float(optimal_return(mdp))
    if cmd.json:
        _emit({"uniform_return": uniform, "optimal_return": optimal, "horizon": mdp.horizon})
        return
    print(f"{cmd.env}, horizon {mdp.horizon}, {mdp.num_states} states x {mdp.num_actions} actions")
    print(f"uniform policy exact return: {uniform:.6f}")
    print(f"optimal exact return:        {optimal:.6f}")


RUNNERS = {Train: run_train, Rollout: run_rollout, Exact: run_exact}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    name = argv[0] if argv and argv[0] in COMMANDS else None
    prefix = f"rollax {name}" if name else "rollax"
    try:
        cmd = _parse(argv)
        RUNNERS[type(cmd)](cmd)
    except UsageError as err:
        print(f"{prefix}: error: {err.args[0]}", file=sys.stderr)
        return 2
    except ValueError as err:
        print(f"{prefix}: error: {err}", file=sys.stderr)
        return 2
    except OSError as err:
        print(f"{prefix}: error: {err.strerror or err} ({err.filename or 'no file'})",
              file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"{prefix}: interrupted; nothing was written", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
