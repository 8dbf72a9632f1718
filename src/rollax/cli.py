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
import warnings
from pathlib import Path
from typing import Literal

import tyro

from rollax.validate import check_count, check_seed

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
    sweep: tuple[str, ...] = ()
    """Numeric hyperparameters to sweep, each name=v1,v2 (e.g. lr=1e-3,3e-4); every
    combination x seed is one lane of the same program."""
    chunk_size: int | None = None
    """Updates per compiled chunk (default: about 1/20 of the run); never changes results."""
    checkpoint_every: int | None = None
    """Write a checkpoint every N updates (at chunk ends; default: about 1/5 of the run)."""
    checked: bool = False
    """Checked mode: stop on an out-of-range action or a NaN/inf in observations, loss,
    gradients or parameters, naming the update, step and environment."""
    devices: int | None = None
    """Split the lanes and each lane's environment batch over this many devices (the first N
    of jax.devices(); must divide lanes x num_envs or batch size; default: one device);
    results equal one device's to float tolerance. With --resume: continue on N devices."""
    config: str | None = None
    """TOML or YAML file of these settings (names as here); command-line flags override it."""
    resume: str | None = None
    """Continue the run in this folder from its latest checkpoint (takes no other setting)."""
    out: str | None = None
    """Run folder to create (must not exist); default runs/<env>-<algo>-seed<S>-<time>."""
    json: bool = False
    """Print one JSON object instead of tables."""


@dataclasses.dataclass(frozen=True)
class Evaluate:
    """Evaluate the saved policies of a training run with fresh keys (greedy by default)."""

    run_dir: tyro.conf.Positional[str]
    """The run folder."""
    episodes: int = 100
    """Episodes per seed."""
    stochastic: bool = False
    """Sample actions instead of acting greedily."""
    seed: int = 0
    """Evaluation keys derive from jax.random.key(seed), apart from training's."""
    json: bool = False
    """Print one JSON object."""


@dataclasses.dataclass(frozen=True)
class Plot:
    """Draw the figures of one or more run folders (PNG and SVG)."""

    run_dirs: tyro.conf.Positional[tuple[str, ...]]
    """Run folders (training runs are overlaid; rollout folders give active counts)."""
    out: str | None = None
    """Folder for the figures (default: RUN_DIR/figures for one run, else required)."""
    json: bool = False
    """Print one JSON object listing the files written."""


@dataclasses.dataclass(frozen=True)
class CheckEnv:
    """Check an environment against the functional contract (jitted and vmapped): spaces,
    events, absorbing states, keys, finiteness, auto-reset final observations."""

    name: tyro.conf.Positional[str]
    """A registered environment name (e.g. CartPole-v1, gymnax:Catch-bsuite)."""
    batch_size: int = 16
    """Environments checked in parallel."""
    seed: int = 0
    """Keys derive from jax.random.key(seed)."""
    json: bool = False
    """Print one JSON object (ok, checks)."""


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


COMMANDS = {"train": Train, "eval": Evaluate, "plot": Plot, "rollout": Rollout,
            "exact": Exact, "check-env": CheckEnv}


class UsageError(Exception):
    """A one-line error for the user."""


_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_RULE = set("─━-=_ ")


def _one_line(box: str) -> str:
    """Condense tyro's boxed parse error (unicode or ASCII layout, colours or not) into its
    first message: the lines after the title, up to the first blank line or rule."""
    lines = [_ANSI.sub("", raw).strip().strip("│┃╭╮╰╯|+").strip() for raw in box.splitlines()]
    message, titled = [], False
    for text in lines:
        is_rule = not text or set(text) <= _RULE
        if not titled:
            titled = not is_rule  # the first line with words is the box title
            continue
        if is_rule:
            if message:
                break
            continue
        message.append(text)
    return re.sub(r"\s+", " ", " ".join(message)).strip() or "invalid arguments"


CONFIG_EXCLUDED = ("config", "resume", "json")


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _given_on_command_line(argv: list[str], name: str) -> bool:
    flag = _flag(name)
    negative = "--no-" + name.replace("_", "-")
    return any(a == flag or a.startswith(flag + "=") or a == negative for a in argv)


def load_config_file(path: str) -> dict:
    """Read a TOML (``.toml``) or YAML (``.yaml``/``.yml``, safe loader) settings file."""
    import difflib

    file = Path(path)
    suffix = file.suffix.lower()
    if suffix not in (".toml", ".yaml", ".yml"):
        raise ValueError(f"config {path!r} must be a .toml, .yaml or .yml file")
    try:
        text = file.read_text()
    except OSError as err:
        raise ValueError(f"config {path!r} cannot be read: {err.strerror or err}") from None
    try:
        if suffix == ".toml":
            import tomllib

            data = tomllib.loads(text)
        else:
            import yaml

            data = yaml.safe_load(text)  # plain data only: no tags, no objects
    except Exception as err:  # the parsers raise their own error types
        first = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise ValueError(f"config {path!r} is not valid {suffix[1:].upper()}: {first}") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ValueError(f"config {path!r} must hold a table of settings, got "
                         f"{type(data).__name__}")
    valid = [f.name for f in dataclasses.fields(Train) if f.name not in CONFIG_EXCLUDED]
    for key in data:
        name = str(key).replace("-", "_")
        if name not in valid:
            close = difflib.get_close_matches(name, valid, n=1)
            hint = f"; did you mean {close[0]}?" if close else ""
            raise ValueError(f"config {path!r}: unknown key {key!r}{hint}")
    return {str(k).replace("-", "_"): v for k, v in data.items()}


def _config_tokens(data: dict, argv: list[str]) -> list[str]:
    """Command-line tokens for the file's settings that the command line does not override."""
    tokens = []
    for name, value in data.items():
        if _given_on_command_line(argv, name):
            continue
        if isinstance(value, bool):
            tokens.append(_flag(name) if value else "--no-" + name.replace("_", "-"))
        elif isinstance(value, (list, tuple)):
            tokens += [_flag(name), *[str(v) for v in value]]
        elif isinstance(value, dict):
            raise ValueError(f"config: {name!r} must be a single value, not a table")
        else:
            tokens += [_flag(name), "None" if value is None else str(value)]
    return tokens


def _expand_config(argv: list[str]) -> list[str]:
    """``train --config FILE ...``: the file's settings, then the command line's."""
    if not argv or argv[0] != "train":
        return argv
    rest = argv[1:]
    for i, token in enumerate(rest):
        if token == "--config" or token.startswith("--config="):
            if token == "--config":
                if i + 1 >= len(rest):
                    raise UsageError("--config needs a file", "train")
                path, drop = rest[i + 1], 2
            else:
                path, drop = token.split("=", 1)[1], 1
            remaining = rest[:i] + rest[i + drop:]
            data = load_config_file(path)
            return ["train", *_config_tokens(data, remaining), *remaining]
    return argv


def _parse(argv: list[str]):
    if sum(a == "--sweep" or a.startswith("--sweep=") for a in argv) > 1:
        raise UsageError("give every swept setting after one --sweep (e.g. --sweep lr=1e-3,3e-4 "
                         "clip_eps=0.1,0.2)", argv[0] if argv else None)
    buffer = io.StringIO()
    # tyro picks its layout from stdout: a fixed UTF-8, non-terminal stdout keeps it one shape
    out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
    try:
        with contextlib.redirect_stderr(buffer), contextlib.redirect_stdout(out):
            return tyro.extras.subcommand_cli_from_dict(COMMANDS, prog="rollax", args=argv)
    except SystemExit as exit_:
        if exit_.code in (0, None):  # --help: show what tyro printed
            out.flush()
            sys.stdout.write(out.buffer.getvalue().decode("utf-8"))
            raise
        command = argv[0] if argv and argv[0] in COMMANDS else None
        raise UsageError(_one_line(buffer.getvalue()), command) from None


def _emit(obj) -> None:
    from rollax.runs import finite_or_none

    sys.stdout.write(json.dumps(finite_or_none(obj), allow_nan=False) + "\n")
    sys.stdout.flush()


def run_train(cmd: Train) -> None:
    from rollax import training

    if cmd.resume is not None:
        defaults = dataclasses.replace(Train(), resume=cmd.resume, json=cmd.json,
                                       devices=cmd.devices)
        if cmd != defaults:
            changed = [f"--{f.name.replace('_', '-')}" for f in dataclasses.fields(Train)
                       if getattr(cmd, f.name) != getattr(defaults, f.name)]
            raise ValueError(f"--resume takes no other settings (the run's config.json is used); "
                             f"got {', '.join(changed)}")
        run_dir, plan, (summary, params) = training.resume_run(cmd.resume, not cmd.json,
                                                               cmd.devices)
    else:
        plan, algo = training.plan_from_command(cmd)
        run_dir, (summary, params) = training.new_run(plan, algo, cmd.out, not cmd.json)
    _report_train(cmd, run_dir, plan, summary, params)


def _report_train(cmd: Train, run_dir: Path, plan, summary: dict, params) -> None:
    import numpy as np
    from rich.console import Console
    from rich.table import Table

    from rollax import training

    rows = training.read_metrics(run_dir)
    labels = [{k: lane[k] for k in ("seed", *plan.sweep)} for lane in summary["lanes"]]
    tabular = plan.kind == "tabular"
    score = "exact_return" if tabular else "episode_return"
    history = training.metric_table(rows, labels, score)
    single = len(labels) == 1 and not plan.sweep
    if cmd.json:
        obj: dict = {}
        if tabular:
            flat = [np.asarray(p, np.float64).reshape(-1).tolist() for p in
                    np.asarray(params)]
            obj["exact_return"] = history[0].tolist() if single else history.tolist()
            obj["params"] = flat[0] if single else flat
        else:
            evals = [lane["eval_return"] for lane in summary["lanes"]]
            obj["eval_return"] = evals
            obj["eval_return_mean"] = float(np.mean(evals))
            obj["env_steps"] = summary["env_steps_per_lane"]
        if not single:
            obj["seeds"] = [label["seed"] for label in labels]
        if plan.sweep:
            obj["lanes"] = labels
        obj["params_sha256"] = summary["params_sha256"]
        if summary["devices"] > 1:
            obj["devices"] = summary["devices"]
        obj["run_dir"] = str(run_dir)
        _emit(obj)
        return
    console = Console(highlight=False, markup=False)
    config = plan.config
    if tabular:
        console.print(
            f"{config['algo']} on {config['env']}: {config['updates']} updates x "
            f"B={config['batch_size']}, horizon {config['horizon']}, {config['epochs']} epoch(s),"
            f" lr {config['lr']}, {len(labels)} lane(s)")
        columns = [("exact return", "exact_return", ".4f"),
                   ("batch return", "episode_return", ".4f"), ("loss", "loss", "+.4f"),
                   ("approx_kl", "approx_kl", ".2e"), ("clip frac", "clip_fraction", ".3f")]
    else:
        console.print(
            f"PPO on {config['env']}: {config['total_steps']:,} env steps per lane, "
            f"{config['num_envs']} envs x {config['num_steps']} steps, {config['epochs']} epochs"
            f" x {config['minibatches']} minibatches, lr {config['lr']}, {len(labels)} lane(s)")
        columns = [("episode return", "episode_return", ".1f"), ("approx_kl", "approx_kl", ".2e"),
                   ("clip frac", "clip_fraction", ".3f"), ("entropy", "entropy", ".3f"),
                   ("expl. var", "explained_variance", ".2f")]
    tables = {key: training.metric_table(rows, labels, key) for _, key, _ in columns}
    updates = history.shape[1] - 1
    table = Table("update", *[c[0] for c in columns],
                  title="mean over lanes" if len(labels) > 1 else None)
    every = max(1, updates // 20)
    with warnings.catch_warnings():  # NaN where no episode finished: shown as nan
        warnings.simplefilter("ignore", RuntimeWarning)
        for i in range(1, updates + 1):
            if i % every and i != updates:
                continue
            table.add_row(str(i), *[format(float(np.nanmean(tables[key][:, i])), fmt)
                                    for _, key, fmt in columns])
    console.print(table)
    for agg in summary["aggregate"]:
        name = ", ".join(f"{k}={v:g}" for k, v in agg.items() if k != summary["score"])
        stats = agg[summary["score"]]
        if stats["mean"] is None:
            continue
        console.print(f"{summary['score']}{' (' + name + ')' if name else ''}: mean "
                      f"{stats['mean']:.4f}, 95% CI [{stats['ci95'][0]:.4f}, "
                      f"{stats['ci95'][1]:.4f}], IQM {stats['iqm']:.4f} over {stats['n']} seed"
                      + ("s" if stats["n"] != 1 else ""))
    if tabular:
        console.print(f"exact return before: {history[0, 0]:.6f}")
        console.print("exact return after:  " + ", ".join(f"{h:.6f}" for h in history[:, -1]))
        if single:
            values = np.asarray(params, np.float64)[0].reshape(-1)
            console.print("params: [" + ", ".join(f"{v:.4g}" for v in values) + "]")
    else:
        console.print("greedy evaluation return per lane: "
                      + ", ".join(f"{lane['eval_return']:.1f}" for lane in summary["lanes"]))
    if summary["mesh"] is not None:
        mesh = summary["mesh"]
        console.print(f"{summary['devices']} devices: lanes split {mesh['lanes']} ways, "
                      f"environment batch {mesh['envs']} ways")
    sps = summary["env_steps_per_second"]
    console.print(f"compile {summary['compile_time_s']:.1f} s, run {summary['run_time_s']:.1f} s"
                  + (f" ({sps:,.0f} env steps/s)" if sps else "") + f"; run folder: {run_dir}")


def run_eval(cmd: Evaluate) -> None:
    from rollax import evaluation

    result = evaluation.evaluate_run(Path(cmd.run_dir), cmd.episodes, not cmd.stochastic,
                                     cmd.seed)
    if cmd.json:
        _emit(result)
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


def run_plot(cmd: Plot) -> None:
    from rollax.plots import plot_runs
    from rollax.runs import check_creatable_folder
    from rollax.training import read_metrics, read_plan

    runs = [Path(r) for r in cmd.run_dirs]
    if not runs:
        raise ValueError("plot needs at least one run folder")
    for run in runs:
        if not run.is_dir():
            raise ValueError(f"{str(run)!r} is not a folder")
        if (run / "rollout.json").is_file():
            from rollax.experiment import read_json

            data = read_json(run / "rollout.json")
            if not isinstance(data, dict) or not {"active_per_step", "batch_size"} <= set(data):
                raise ValueError(f"{str(run / 'rollout.json')!r} is not a rollout record")
            continue
        if not (run / "config.json").is_file():
            raise ValueError(f"{str(run)!r} is not a rollax run folder (no config.json)")
        read_plan(run)
        if not read_metrics(run):
            raise ValueError(f"{str(run / 'metrics.jsonl')!r} holds no metrics yet")
    if cmd.out is None and len(runs) > 1:
        raise ValueError("out is required when plotting several runs (--out DIR)")
    out = Path(cmd.out) if cmd.out is not None else runs[0] / "figures"
    check_creatable_folder(out)
    written = plot_runs(runs, out)
    if cmd.json:
        _emit({"figures": [str(p) for p in written]})
        return
    for p in written:
        print(p)


def run_rollout(cmd: Rollout) -> None:
    import jax
    import numpy as np

    from rollax.collect import collect
    from rollax.envs.corridor import Corridor
    from rollax.plots import plot_active
    from rollax.policies import BernoulliPolicy
    from rollax.runs import check_new_run_dir, staged_run_dir

    check_seed(cmd.seed)
    check_count("batch_size", cmd.batch_size)
    env = Corridor(horizon=cmd.horizon)
    run_dir = check_new_run_dir(cmd.out, f"rollout-seed{cmd.seed}")
    policy = BernoulliPolicy(3)
    _, traj = collect(env, policy, policy.init(), jax.random.key(cmd.seed), cmd.batch_size,
                      cmd.horizon)
    active = [int(n) for n in np.asarray(traj.active.sum(axis=1))]
    mean_return = float(np.asarray(traj.reward.sum(axis=0)).mean())
    with staged_run_dir(run_dir) as staging:
        (staging / "rollout.json").write_text(json.dumps(
            {"seed": cmd.seed, "batch_size": cmd.batch_size, "horizon": cmd.horizon,
             "active_per_step": active, "mean_return": mean_return}) + "\n")
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


def run_check_env(cmd: CheckEnv) -> int:
    from rollax.contracts import check_env
    from rollax.envs.registry import make

    check_count("batch_size", cmd.batch_size)
    check_seed(cmd.seed)
    report = check_env(make(cmd.name), batch_size=cmd.batch_size, seed=cmd.seed)
    if cmd.json:
        _emit({"env": cmd.name, "ok": report.ok,
               "checks": [{"name": r.name, "status": r.status, "message": r.message,
                           "step": r.step, "env": r.env} for r in report.results]})
    else:
        print(f"{cmd.name}:")
        print(report)
    return 0 if report.ok else 1


RUNNERS = {Train: run_train, Evaluate: run_eval, Plot: run_plot, Rollout: run_rollout,
           Exact: run_exact, CheckEnv: run_check_env}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    name = argv[0] if argv and argv[0] in COMMANDS else None
    prefix = f"rollax {name}" if name else "rollax"
    try:
        cmd = _parse(_expand_config(argv))
        code = RUNNERS[type(cmd)](cmd)
        if code:
            return code
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
        print(f"{prefix}: interrupted", file=sys.stderr)
        return 130
    except Exception as err:
        from rollax.training import Interrupted

        if isinstance(err, Interrupted):
            print(f"{prefix}: {err}", file=sys.stderr)
            return 130
        raise
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
