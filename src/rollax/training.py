"""``rollax train``: build the algorithm and lanes, create the run folder, run the compiled
chunks with progress, metrics, checkpoints and resume, then summarise (the outer ring)."""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from pathlib import Path

import numpy as np

from rollax import checkpoint
from rollax.experiment import (
    Interrupt,
    Runner,
    _jsonable,
    lane_params_sha256,
    make_lanes,
    metrics_rows,
    params_sha256,
    parse_sweep,
    read_json,
    run_loop,
    summarize,
)
from rollax.runs import check_new_run_dir, write_json
from rollax.validate import check_count, check_seed

TABULAR_ONLY = ("updates", "batch_size")


class Interrupted(Exception):
    """Training stopped on Ctrl-C after writing a checkpoint."""

    def __init__(self, run_dir: Path, update: int):
        super().__init__(f"interrupted at update {update}; checkpoint written; continue with "
                         f"`rollax train --resume {run_dir}`")
        self.run_dir, self.update = run_dir, update
NEURAL_ONLY = ("total_steps", "num_envs", "num_steps", "minibatches")


@dataclasses.dataclass(frozen=True)
class Plan:
    """Everything that defines a run (what config.json stores)."""

    kind: str
    """'tabular' or 'ppo'."""
    config: dict
    """The resolved algorithm config."""
    seed: int
    seeds: int
    sweep: dict
    chunk_size: int
    checkpoint_every: int
    checked: bool = False
    """Run the checks of checked mode (never changes results)."""
    num_devices: int | None = None
    """Devices the lanes and environment batch are split over (``None``: one device; a layout:
    results equal the one-device run to float tolerance)."""

    def identity(self) -> dict:
        """What a checkpoint must match (chunking, checkpoint spacing and the device count
        excluded: they never change results beyond float tolerance)."""
        return {"kind": self.kind, "config": self.config, "seed": self.seed,
                "seeds": self.seeds, "sweep": self.sweep}


def build_algorithm(kind: str, config: dict, checked: bool = False):
    if kind == "tabular":
        from rollax.algos.tabular import TrainConfig, make_algorithm

        return make_algorithm(TrainConfig(**config), checked=checked)
    from rollax.algos.ppo import PPOConfig, make_algorithm

    fields = dict(config)
    fields["hidden"] = tuple(fields.get("hidden", (64, 64)))
    return make_algorithm(PPOConfig(**fields), checked=checked)


def _is_tabular(env_name: str, horizon) -> bool:
    from rollax.envs.registry import make

    env = make(env_name) if horizon is None else make(env_name, horizon=horizon)
    return hasattr(env, "to_mdp")


def _given(cmd, names) -> list[str]:
    return ["--" + n.replace("_", "-") for n in names if getattr(cmd, n) is not None]


def plan_from_command(cmd):
    """Validate a ``Train`` command into a :class:`Plan` and its algorithm; raises
    ``ValueError`` before anything is compiled or written."""
    check_count("seeds", cmd.seeds)
    check_seed(cmd.seed, cmd.seeds)
    for name in ("chunk_size", "checkpoint_every"):
        if getattr(cmd, name) is not None:
            check_count(name, getattr(cmd, name))
    if _is_tabular(cmd.env, cmd.horizon):
        if _given(cmd, NEURAL_ONLY):
            raise ValueError(f"{', '.join(_given(cmd, NEURAL_ONLY))} only apply to neural "
                             f"tasks; {cmd.env} is tabular (use --updates and --batch-size)")
        from rollax.algos.tabular import TrainConfig, resolve_config

        given = {k: getattr(cmd, k) for k in ("updates", "batch_size", "horizon", "epochs", "lr",
                                              "clip_eps") if getattr(cmd, k) is not None}
        config = resolve_config(TrainConfig(algo=cmd.algo, env=cmd.env, seed=cmd.seed, **given))
        kind = "tabular"
    else:
        if cmd.algo != "ppo":
            raise ValueError(f"algo {cmd.algo} is only available for tabular tasks; "
                             f"{cmd.env} trains with --algo ppo")
        if _given(cmd, TABULAR_ONLY):
            raise ValueError(f"{', '.join(_given(cmd, TABULAR_ONLY))} only apply to tabular "
                             f"tasks; {cmd.env} is neural (use --total-steps and --num-envs)")
        from rollax.algos import ppo

        given = {k: getattr(cmd, k) for k in ("horizon", "epochs", "lr", "clip_eps", *NEURAL_ONLY)
                 if getattr(cmd, k) is not None}
        config = ppo.preset(cmd.env, seed=cmd.seed, **given)
        if config.horizon is None:  # record the task's own limit in the resolved config
            config = dataclasses.replace(config, horizon=ppo.validate(config).horizon)
        kind = "ppo"
    config_dict = dataclasses.asdict(config)
    algo = build_algorithm(kind, config_dict, cmd.checked)
    sweep = parse_sweep(cmd.sweep, algo.hyperparams)
    for name, values in sweep.items():
        for v in values:  # each swept value must be a valid setting on its own
            if name in config_dict:
                build_algorithm(kind, {**config_dict, name: v})
    chunk = cmd.chunk_size or max(1, -(-algo.num_updates // 20))
    every = cmd.checkpoint_every or max(chunk, -(-algo.num_updates // 5))
    plan = Plan(kind, config_dict, cmd.seed, cmd.seeds, sweep, min(chunk, algo.num_updates),
                every, cmd.checked, cmd.devices)
    check_plan_devices(plan, algo)
    return plan, algo


def check_plan_devices(plan: Plan, algo) -> None:
    """``ValueError`` (before anything is compiled or written) unless ``plan.num_devices``
    divides lanes x environment batch and that many devices are visible."""
    if plan.num_devices is None:
        return
    from rollax import sharding

    combos = 1
    for values in plan.sweep.values():
        combos *= len(values)
    sharding.check_devices(plan.num_devices, plan.seeds * combos,
                           sharding.env_batch_size(algo), sharding.env_batch_name(algo))
    sharding.check_available(plan.num_devices)


def _versions() -> dict:
    import jax

    import rollax

    return {"rollax": rollax.__version__, "jax": jax.__version__,
            "devices": [str(d) for d in jax.devices()], "python": sys.version.split()[0]}


def _progress(total_updates: int, steps_per_update: int, lanes: int, enabled: bool):
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
    )

    console = Console(stderr=True)
    return Progress(
        TextColumn("[bold]updates"), BarColumn(), MofNCompleteColumn(),
        TextColumn("{task.fields[steps]} env steps"), TextColumn("{task.fields[sps]} steps/s"),
        TextColumn("return {task.fields[ret]}"), TimeRemainingColumn(),
        console=console, disable=not enabled or not console.is_terminal, transient=False,
    )


def _latest_return(kind: str, metrics) -> str:
    values = np.asarray(metrics.exact_return if kind == "tabular" else metrics.episode_return)
    last = values[:, -1]
    last = last[np.isfinite(last)]
    return f"{last.mean():.3f}" if last.size else "—"


def execute(plan: Plan, algo, run_dir: Path, resume: bool, show_progress: bool) -> dict:
    """Run (or continue) the experiment in ``run_dir``; returns ``(summary, final params)``
    (params with a leading lane axis)."""
    lanes = make_lanes(plan.seed, plan.seeds, plan.sweep)
    labels = lanes.labels()
    runner = Runner(algo, lanes, plan.chunk_size, devices=plan.num_devices)
    metrics_path = run_dir / "metrics.jsonl"
    ckpt_dir = run_dir / "checkpoints"
    identity = plan.identity()

    start = time.perf_counter()
    state = runner.initial_state()
    if resume:
        template = state if runner.mesh is None else runner.to_host(state)
        update, state = checkpoint.load(checkpoint.latest(ckpt_dir), template, identity)
        state = runner.place(state)
        _truncate_metrics(metrics_path, update)
    else:
        update = 0
        initial = {k: np.asarray(v)
                   for k, v in runner.to_host(runner.evaluate(state, runner.hp)).items()}
        with metrics_path.open("w") as f:
            for lane, label in enumerate(labels):
                row = {**label, "update": 0,
                       **{k: _jsonable(v[lane]) for k, v in initial.items()}}
                f.write(json.dumps(row) + "\n")
    compile_start = time.perf_counter()
    size = plan.chunk_size if algo.checked else np.int32(plan.chunk_size)
    runner.chunk.lower(state, runner.hp, size).compile()
    compile_s = time.perf_counter() - compile_start
    steps_per_update = algo.env_steps_per_update
    total = algo.num_updates
    run_start = time.perf_counter()
    run_updates = 0

    with _progress(total, steps_per_update, len(lanes), show_progress) as progress, \
            Interrupt() as interrupt:
        task = progress.add_task("train", total=total, completed=update,
                                 steps=f"{update * steps_per_update:,}", sps="—", ret="—")

        chunk_start = time.perf_counter()

        def on_chunk(metrics, first, done):
            nonlocal run_updates, chunk_start
            now = time.perf_counter()
            chunk_sps = len(lanes) * (done - first) * steps_per_update / max(now - chunk_start,
                                                                            1e-9)
            with metrics_path.open("a") as f:
                for row in metrics_rows(metrics, labels, first):
                    row["env_steps_per_second"] = chunk_sps  # all lanes, this chunk (host)
                    f.write(json.dumps(row) + "\n")
            run_updates += done - first
            elapsed = now - run_start
            sps = len(lanes) * run_updates * steps_per_update / max(elapsed, 1e-9)
            progress.update(task, completed=done, steps=f"{done * steps_per_update:,}",
                            sps=f"{sps:,.0f}", ret=_latest_return(plan.kind, metrics))
            chunk_start = time.perf_counter()

        def save(done, state):
            checkpoint.save(ckpt_dir, done, state if runner.mesh is None
                            else runner.to_host(state), identity)

        state, done, interrupted = run_loop(runner, state, update, on_chunk,
                                            plan.checkpoint_every, save, interrupt)
    run_s = time.perf_counter() - run_start
    if interrupted:
        raise Interrupted(run_dir, done)
    final = {k: np.asarray(v, np.float64)
             for k, v in runner.to_host(runner.evaluate(state, runner.hp)).items()}
    params = runner.to_host(runner.final_params(state))
    summary = _summary(plan, algo, labels, final, params, metrics_path, compile_s, run_s,
                       run_updates, time.perf_counter() - start)
    summary["devices"] = runner.devices
    summary["mesh"] = (None if runner.mesh is None else
                       {name: int(size) for name, size in runner.mesh.shape.items()})
    write_json(run_dir / "summary.json", summary)
    _figures(plan, run_dir)
    return summary, params


def _truncate_metrics(path: Path, update: int) -> None:
    """Keep the metric lines up to ``update`` (a killed run may have logged past its last
    checkpoint); rewritten atomically."""
    lines = path.read_text().splitlines() if path.exists() else []
    kept = [line for line in lines if line.strip() and json.loads(line)["update"] <= update]
    checkpoint._atomic_write_text(path, "".join(line + "\n" for line in kept))


def read_metrics(run_dir: Path) -> list[dict]:
    path = run_dir / "metrics.jsonl"
    try:
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    except FileNotFoundError:
        raise ValueError(f"{str(path)!r} is missing: not a rollax run folder") from None
    except ValueError as err:
        raise ValueError(f"{str(path)!r} is corrupt: {err}") from None


def metric_table(rows: list[dict], labels: list[dict], name: str) -> np.ndarray:
    """``(lanes, updates + 1)`` array of metric ``name`` (NaN where missing)."""
    index = {json.dumps(label, sort_keys=True): i for i, label in enumerate(labels)}
    updates = max(r["update"] for r in rows)
    out = np.full((len(labels), updates + 1), np.nan)
    for r in rows:
        label = {k: r[k] for k in labels[0]}
        value = r.get(name)
        if value is not None:
            out[index[json.dumps(label, sort_keys=True)], r["update"]] = value
    return out


def _summary(plan, algo, labels, final, params, metrics_path, compile_s, run_s, run_updates,
             wall_s) -> dict:
    rows = read_metrics(metrics_path.parent)
    lanes = []
    sha = lane_params_sha256(params, len(labels))
    score_name = "exact_return" if plan.kind == "tabular" else "eval_return"
    for i, label in enumerate(labels):
        lane = {**label, score_name: float(final[score_name][i]), "params_sha256": sha[i]}
        if plan.kind == "tabular":
            history = metric_table(rows, labels, "exact_return")[i]
            lane["exact_return_initial"] = float(history[0])
        else:
            ep = metric_table(rows, labels, "episode_return")[i, 1:]
            last = ep[np.isfinite(ep)][-10:]
            lane["final_episode_return"] = float(last.mean()) if last.size else None
        lanes.append(lane)
    groups = {}
    for lane, label in zip(lanes, labels):
        key = json.dumps({k: v for k, v in label.items() if k != "seed"}, sort_keys=True)
        groups.setdefault(key, []).append(lane[score_name])
    aggregate = [{**json.loads(k), score_name: summarize(v)} for k, v in groups.items()]
    steps = len(labels) * run_updates * algo.env_steps_per_update
    return {
        "kind": plan.kind, "score": score_name, "lanes": lanes, "aggregate": aggregate,
        "params_sha256": params_sha256(params), "wall_time_s": wall_s,
        "compile_time_s": compile_s, "run_time_s": run_s,
        "env_steps_per_second": steps / run_s if run_s > 0 else None,
        "env_steps_per_lane": algo.num_updates * algo.env_steps_per_update,
    }


def _figures(plan: Plan, run_dir: Path) -> None:
    from rollax.plots import plot_runs

    plot_runs([run_dir], run_dir / "figures")


def new_run(plan: Plan, algo, out: str | None, show_progress: bool):
    """Create the run folder (config.json first) and execute."""
    env = plan.config["env"].replace(":", "-")
    name = f"{env}-{plan.config.get('algo', 'ppo')}-seed{plan.seed}"
    run_dir = check_new_run_dir(out, name)
    run_dir.mkdir(parents=True)
    config = {**dataclasses.asdict(plan), **_versions()}
    checkpoint._atomic_write_text(run_dir / "config.json", json.dumps(config, indent=2) + "\n")
    return run_dir, execute(plan, algo, run_dir, resume=False, show_progress=show_progress)


def read_plan(run_dir: Path) -> Plan:
    """The :class:`Plan` stored in a run folder's config.json."""
    stored = read_json(run_dir / "config.json")
    try:
        fields = {f.name: stored[f.name] for f in dataclasses.fields(Plan)
                  if f.name not in ("checked", "num_devices")}
    except KeyError as err:
        raise ValueError(f"{str(run_dir / 'config.json')!r} lacks {err}: not a training run"
                         ) from None
    return Plan(**fields, checked=bool(stored.get("checked", False)),
                num_devices=stored.get("num_devices"))


def resume_run(run_dir: str, show_progress: bool, devices: int | None = None):
    """Continue the run in ``run_dir`` from its latest checkpoint, on the device count of its
    config.json or on ``devices`` (a layout only: the checkpoint fits any count)."""
    path = Path(run_dir)
    if not path.is_dir():
        raise ValueError(f"resume: {run_dir!r} is not a folder")
    plan = read_plan(path)
    if (path / "summary.json").exists():
        raise ValueError(f"resume: the run in {run_dir!r} already finished (summary.json)")
    algo = build_algorithm(plan.kind, plan.config, plan.checked)
    if devices is not None:
        plan = dataclasses.replace(plan, num_devices=devices)
    check_plan_devices(plan, algo)
    # a run stopped before its first checkpoint starts again from update 0 in its folder
    started = (path / "checkpoints" / checkpoint.LATEST).exists()
    if started:
        checkpoint.latest(path / "checkpoints")  # refuse a broken pointer early
    return path, plan, execute(plan, algo, path, resume=started, show_progress=show_progress)
