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
from typing import Annotated, Literal

import tyro

from rollax.algos.tabular import TrainConfig, resolve_config

EXACT_ENVS = ("corridor", "FrozenLake-v1", "FrozenLake8x8-v1", "Taxi-v4", "CliffWalking-v1")


@dataclasses.dataclass(frozen=True)
class Train:
    """Train a tabular policy (REINFORCE or PPO) and report its exact return per update."""

    config: Annotated[TrainConfig, tyro.conf.OmitArgPrefixes] = TrainConfig()
    out: str | None = None
    """Run folder to create (must not exist); default runs/<env>-<algo>-seed<S>-<time>."""
    json: bool = False
    """Print one JSON object (exact_return, params, run_dir) instead of tables."""


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


def run_train(cmd: Train) -> None:
    import jax
    import numpy as np
    from rich.console import Console
    from rich.table import Table

    from rollax.algos.tabular import make_train
    from rollax.envs.registry import make
    from rollax.exact import optimal_return
    from rollax.plots import plot_exact_return
    from rollax.runs import check_new_run_dir, staged_run_dir, write_json, write_jsonl

    config = resolve_config(cmd.config)
    run_dir = check_new_run_dir(cmd.out, f"{config.env}-{config.algo}-seed{config.seed}")
    start = time.perf_counter()
    result = jax.block_until_ready(make_train(config)(jax.random.key(config.seed)))
    seconds = time.perf_counter() - start
    history = np.asarray(result.exact_return, dtype=np.float64)
    metrics = {k: np.asarray(v, dtype=np.float64) for k, v in result.metrics._asdict().items()}
    optimum = float(optimal_return(make(config.env, horizon=config.horizon).to_mdp()))
    params = _floats(np.asarray(result.params))

    with staged_run_dir(run_dir) as staging:
        write_json(staging / "config.json", {**dataclasses.asdict(config), **_versions()})
        write_jsonl(
            staging / "metrics.jsonl",
            (
                {"update": i + 1, **{k: float(v[i]) for k, v in metrics.items()}}
                for i in range(config.updates)
            ),
        )
        write_json(
            staging / "summary.json",
            {
                "exact_return_initial": float(history[0]),
                "exact_return_final": float(history[-1]),
                "optimal_return": optimum,
                "exact_return": _floats(history),
                "params": params,
                "wall_time_s": seconds,
            },
        )
        plot_exact_return(
            history, staging / "exact_return.png",
            f"{config.algo} on {config.env} (seed {config.seed}, B={config.batch_size})", optimum,
        )

    if cmd.json:
        _emit({"exact_return": _floats(history), "params": params, "run_dir": str(run_dir)})
        return
    console = Console(highlight=False)
    console.print(
        f"{config.algo} on {config.env}: {config.updates} updates x B={config.batch_size}, "
        f"horizon {config.horizon}, {config.epochs} epoch(s), lr {config.lr}, seed {config.seed}"
    )
    table = Table("update", "exact return", "batch return", "loss", "approx_kl", "clip frac")
    every = max(1, config.updates // 20)
    for i in range(config.updates):
        if (i + 1) % every and i + 1 != config.updates:
            continue
        table.add_row(
            str(i + 1), f"{history[i + 1]:.4f}", f"{metrics['episode_return'][i]:.4f}",
            f"{metrics['loss'][i]:+.4f}", f"{metrics['approx_kl'][i]:.2e}",
            f"{metrics['clip_fraction'][i]:.3f}",
        )
    console.print(table)
    console.print(f"exact return before: {history[0]:.6f}")
    console.print(f"exact return after:  {history[-1]:.6f}   (optimal {optimum:.6f})")
    console.print(f"params: {np.round(params, 4).tolist()}   ({seconds:.1f} s, compile included)")
    console.print(f"run folder: {run_dir}")


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
