"""PPO quality: K seeds in one program per task, greedy evaluation, against published targets.

    python benchmarks/ppo_quality.py [--tasks CartPole-v1 Acrobot-v1 Pendulum-v1] [--seeds 8]
    python benchmarks/ppo_quality.py --tasks gymnax:Breakout-MinAtar --seeds 3 [--total-steps N]
    python benchmarks/ppo_quality.py --render      # rewrite QUALITY.md from the stored rows

Each task trains ``--seeds`` seeds of ``rollax.make_train(config)`` (config = the task's preset
from ``rollax.ppo.PRESETS``, ``--total-steps`` overriding its budget) vmapped in one jitted
program, and prints one row: the mean greedy evaluation return over seeds with a 95 % bootstrap
interval, the interquartile mean, the per-seed returns, compile and run time (wall and process
CPU seconds) and env steps per second. Every row is stored in benchmarks/quality_results.json,
keyed by task and steps per seed (a rerun replaces its own row and keeps the others), and
benchmarks/QUALITY.md is regenerated from all stored rows. A row trained on fewer steps than
the preset's budget is labelled a short-budget run and not compared with the published target.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import fcntl
import json
import os
import platform
import shlex
import subprocess
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from scipy import stats

import rollax
from rollax.algos import base, ppo, registry

HERE = Path(__file__).resolve().parent
MEMORY = HERE / "quality_memory.md"
"""The memory task's section (GRU against MLP), written by ``benchmarks/memory.py``."""
PEERS = HERE / "quality_peers.md"
"""The side-by-side section (rollax against rejax's and Brax's own trainers, same settings),
written from the tables of ``wide_ablation.py``, ``minatar_compare.py`` and ``brax_ppo.py``."""
FAMILY = HERE / "quality_family.md"
"""The policy-gradient family's section (REINFORCE, GRPO, A2C beside PPO), written by
``benchmarks/family_quality.py``."""
HOST = HERE / "quality_host.md"
"""Environments stepped on the host beside their peers (benchmarks/host_sb3.py,
benchmarks/cleanrl_side_by_side.py), written by hand from their tables."""
BUDGET = HERE / "quality_minatar_budget.md"
"""MinAtar at the published budget, one resumable process per seed, written by
``benchmarks/minatar_budget.py table``."""
A2C_SB3 = HERE / "a2c_sb3.md"
"""A2C beside Stable-Baselines3's own A2C, from ``benchmarks/a2c_sb3.py``'s tables."""
CLASSIC = ("CartPole-v1", "Acrobot-v1", "Pendulum-v1")
MINATAR = tuple(f"gymnax:{game}-MinAtar" for game in
                ("Breakout", "Asterix", "Freeway", "SpaceInvaders"))

TARGETS = {
    "CartPole-v1": 475.0, "Acrobot-v1": -100.0, "Pendulum-v1": -400.0,
    # gymnax-blines' PPO returns as published in gymnax's README (table of environments,
    # "Trained Policy / Checkpoint" column, R: ...): one 1e7-step run per game, its
    # checkpoint evaluated by sampling the policy (not greedily) on 164 episodes.
    "gymnax:Asterix-MinAtar": 15.0, "gymnax:Breakout-MinAtar": 28.0,
    "gymnax:Freeway-MinAtar": 58.0, "gymnax:SpaceInvaders-MinAtar": 131.0,
}
SOURCES = {task: "solved threshold" for task in CLASSIC}
SOURCES.update({task: "gymnax-blines PPO" for task in MINATAR})
ORDER = (*CLASSIC, *MINATAR)


def iqm(x: np.ndarray) -> float:
    """Interquartile mean: the mean of the middle 50 % of the values."""
    x = np.sort(x)
    n = len(x)
    return float(x[n // 4: n - n // 4].mean()) if n >= 4 else float(x.mean())


def progress_train(config, every_s: float):
    """``rollax.make_train(config)`` whose updates also print, at most every ``every_s``
    seconds, the env steps done and the mean return of the episodes finished since the last
    line (a host callback per update; the training itself is unchanged). Also returns
    ``marks``, filled during the run: ``{env steps per seed: time first reported}``."""
    algo = registry.build(config)
    start, last, returns, marks = time.perf_counter(), [time.perf_counter()], [], {}

    def report(env_steps, episode_return):
        ret = np.asarray(episode_return, np.float64)
        returns.extend(ret[np.isfinite(ret)].ravel().tolist())
        now = time.perf_counter()
        marks.setdefault(int(np.max(env_steps)), now)
        if now - last[0] >= every_s:
            mean = f"{np.mean(returns):.2f}" if returns else "n/a"
            print(f"    [{now - start:8.0f} s] env steps/seed {int(np.max(env_steps)):,} "
                  f"of {config.total_steps:,}: training episode return {mean}", flush=True)
            last[0] = now
            returns.clear()

    def update(state, hp):
        state, metrics = algo.update(state, hp)
        jax.debug.callback(report, metrics.env_steps, metrics.episode_return)
        return state, metrics

    return base.make_train(algo._replace(update=update)), marks


def curve(episode_return: np.ndarray, env_steps: np.ndarray, points: int = 10) -> list:
    """``[[env steps per seed, mean training episode return], ...]`` at ``points`` even
    stretches of the run (the mean over seeds and over the updates of each stretch)."""
    updates = episode_return.shape[-1]
    out = []
    for chunk in np.array_split(np.arange(updates), min(points, updates)):
        values = episode_return[..., chunk]
        values = values[np.isfinite(values)]
        out.append([int(env_steps[..., chunk[-1]].max()),
                    float(values.mean()) if values.size else None])
    return out


def run(task: str, seeds: int, total_steps: int | None, progress_s: float) -> dict:
    overrides = {} if total_steps is None else dict(total_steps=total_steps)
    config = ppo.resolve(ppo.preset(task, **overrides))
    preset_steps = ppo.preset(task).total_steps
    marks: dict = {}
    if progress_s > 0:
        train, marks = progress_train(config, progress_s)
    else:
        train = rollax.make_train(config)
    train = jax.jit(jax.vmap(train))
    keys = jnp.stack([jax.random.key(s) for s in range(seeds)])
    start, cpu = time.perf_counter(), time.process_time()
    compiled = train.lower(keys).compile()
    compile_s, compile_cpu_s = time.perf_counter() - start, time.process_time() - cpu
    start, cpu = time.perf_counter(), time.process_time()
    result = jax.block_until_ready(compiled(keys))
    run_s, run_cpu_s = time.perf_counter() - start, time.process_time() - cpu
    returns = np.asarray(result.eval_return, dtype=np.float64)
    if seeds > 1 and np.ptp(returns) > 0:
        ci = stats.bootstrap((returns,), np.mean, confidence_level=0.95,
                             random_state=0).confidence_interval
        low, high = float(ci.low), float(ci.high)
    else:
        low = high = float(returns.mean())
    steps = ppo.num_updates(config) * config.num_envs * config.num_steps
    # steady rate: from the first to the last update reported (no evaluation, no start-up)
    sps_updates = None
    if len(marks) >= 3:
        (s0, t0), (s1, t1) = sorted(marks.items())[0], sorted(marks.items())[-1]
        sps_updates = seeds * (s1 - s0) / (t1 - t0) if t1 > t0 else None
    config_dict = dataclasses.asdict(config)
    config_dict["hidden"] = list(config.hidden)
    return dict(
        task=task, status="done", seeds=seeds, steps=steps, preset_steps=preset_steps,
        returns=returns.round(3).tolist(), mean=float(returns.mean()), low=low, high=high,
        iqm=iqm(returns), target=TARGETS.get(task), target_source=SOURCES.get(task),
        compile_s=compile_s, compile_cpu_s=compile_cpu_s, run_s=run_s, run_cpu_s=run_cpu_s,
        sps=seeds * steps / run_s, sps_cpu=seeds * steps / run_cpu_s, sps_updates=sps_updates,
        eval_episodes=config.eval_episodes, progress_callback=progress_s > 0,
        curve=curve(np.asarray(result.metrics.episode_return, np.float64),
                    np.asarray(result.metrics.env_steps)),
        config=config_dict, machine=machine(), nice=os.nice(0), loadavg_end=os.getloadavg(),
        finished=datetime.datetime.now().isoformat(timespec="seconds"),
        command=" ".join(shlex.quote(a) for a in ["python", *sys.argv]),
    )


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return (f"{cpu}, {os.cpu_count()} cores, {platform.system()} {platform.release()}; "
            f"Python {platform.python_version()}, jax {jax.__version__} on "
            f"{jax.devices()[0].platform}; rollax commit {commit()}")


def commit() -> str:
    """The checkout's short commit, with ``+`` when its tracked files have changes."""
    def git(*args):
        return subprocess.run(["git", *args], cwd=HERE, capture_output=True, text=True).stdout
    head = git("rev-parse", "--short", "HEAD").strip() or "unknown"
    return head + ("+" if git("status", "--porcelain", "--untracked-files=no").strip() else "")


# --- stored rows and the markdown made from them ---------------------------------------------

def row_key(row: dict) -> str:
    return f"{row['task']}@{row['steps']}"


def update_rows(path: Path, rows: list[dict]) -> dict:
    """Merge ``rows`` into the JSON store at ``path`` (locked, so concurrent runs do not lose
    each other's rows) and return all stored rows."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        f.seek(0)
        text = f.read()
        stored = json.loads(text) if text.strip() else {}
        for row in rows:
            stored[row_key(row)] = row
        f.seek(0)
        f.truncate()
        json.dump(stored, f, indent=1, sort_keys=True)
        f.write("\n")
        f.flush()
        return stored


def load_rows(path: Path) -> dict:
    return json.loads(path.read_text()) if path.exists() else {}


def short_budget(row: dict) -> bool:
    """Trained on fewer steps than the preset's budget. A run takes whole updates, so it ends
    within one batch below ``total_steps`` (CartPole's 500,000: 976 updates = 499,712 steps)."""
    config = row.get("config") or {}
    batch = config.get("num_envs", 0) * config.get("num_steps", 0)
    return row["steps"] + max(batch, 1) <= row.get("preset_steps", row["steps"])


def _fmt(x, spec: str) -> str:
    return "—" if x is None else format(x, spec)


def _sort_key(row: dict):
    task = row["task"]
    return (ORDER.index(task) if task in ORDER else len(ORDER), task, -row["steps"])


def _table_row(row: dict) -> str:
    target, met = row.get("target"), "—"
    if target is not None:
        if row["task"] in CLASSIC:
            shown = f">= {target:g} ({row.get('target_source', '')})"
        else:
            shown = f"{target:g} ({row.get('target_source', '')})"
        if short_budget(row):
            met = f"n/a (short budget; target at {row['preset_steps']:,})"
        else:
            met = "yes" if row["mean"] >= target else "no"
    else:
        shown = ""
    steps = f"{row['steps']:,}" + (" (short budget)" if short_budget(row) else "")
    per_seed = ", ".join(f"{r:g}" for r in np.round(row["returns"], 1))
    cpu = row.get("run_cpu_s")
    return (f"| {row['task']} | {steps} | {row['seeds']} | {row['mean']:.1f} "
            f"[{row['low']:.1f}, {row['high']:.1f}] | {row['iqm']:.1f} | {per_seed} | {shown} "
            f"| {met} | {row['compile_s']:.1f} | {row['run_s']:.1f} | {_fmt(cpu, '.1f')} | "
            f"{row['sps']:,.0f} | {_fmt(row.get('sps_cpu'), ',.0f')} |")


MINATAR_NOTES = """\
## MinAtar (gymnax) against gymnax-blines

Targets: the PPO returns gymnax's README publishes for gymnax-blines' checkpoints (table of
environments, "Trained Policy / Checkpoint" column: Asterix 15, Breakout 28, Freeway 58,
SpaceInvaders 131). They come from one 1e7-step run per game (seed 0), its return measured by
*sampling* the policy on 164 episodes; ours are the mean over seeds of a *greedy* evaluation
(the policy's mode) on 32 episodes per seed after training, so the comparison is indicative,
not like for like.

Settings (`rollax.ppo.PRESETS["gymnax:<game>-MinAtar"]`), from gymnax-blines (commit 3f029d6)
`agents/<game>-MinAtar/ppo.yaml`, the same for all four games, and its `utils/ppo.py` and
`utils/models.py`:

{settings}

Differences that remain: the network (rollax's CNN instead of gymnax-blines' MLP, as issue 13
asks), its initialisation, and the evaluation (greedy vs sampled; many seeds vs one).
"""
MINATAR_SETTINGS = (  # (setting, gymnax-blines, rollax preset)
    ("env steps", "`num_train_steps: 10000000`",
     "`total_steps=10_000_000` (1,220 updates of 64 x 128)"),
    ("parallel envs", "`num_train_envs: 64`", "`num_envs=64`"),
    ("steps per rollout", "`n_steps: 128` (129 stepped, the last only bootstraps)",
     "`num_steps=128`"),
    ("epochs x minibatches", "`epoch_ppo: 4`, `n_minibatch: 8`", "`epochs=4`, `minibatches=8`"),
    ("learning rate", "`lr_begin = lr_end = 5e-4`, `lr_warmup: 0.05` (a no-op: constant)",
     "`lr=5e-4`, `anneal_lr=False`"),
    ("optimiser", "clip_by_global_norm(0.5), Adam eps 1e-5", "the same (`max_grad_norm=0.5`)"),
    ("gamma, GAE lambda", "0.999, 0.95", "`gamma=0.999`, `gae_lambda=0.95`"),
    ("clip", "0.2, value clipped too", "`clip_eps=0.2`, `clip_value=True`"),
    ("entropy, value coefficients", "0.01, 0.5", "`ent_coef=0.01`, `vf_coef=0.5`"),
    ("advantages", "normalised per minibatch", "`normalize_advantages=True`"),
    ("network", "`Categorical-MLP`: separate actor and critic MLPs, 2 x 256 ReLU over the "
     "flattened 10x10xC planes, flax default kernels, uniform(0.05) biases",
     "`network=\"cnn\"`, `hidden=(256, 256)`, `activation=\"relu\"`: separate actor and "
     "critic, each one 3x3 convolution (16 planes, ReLU) then 2 x 256 ReLU; orthogonal "
     "initialisation, zero biases"),
    ("episode limit", "gymnax `max_steps_in_episode` (1000; Freeway 2500)",
     "the same (the adapter's default horizon)"),
    ("evaluation", "164 episodes, actions sampled", "32 episodes per seed, greedy"),
)
MINATAR_NOTES = MINATAR_NOTES.format(settings="\n".join(
    ["| setting | gymnax-blines | rollax preset |", "|---|---|---|"]
    + [f"| {a} | {b} | {c} |" for a, b, c in MINATAR_SETTINGS]))


HEADER = ("| task | steps/seed | seeds | greedy eval mean [95% CI] | IQM | per-seed returns "
          "| target | met | compile s | wall s | CPU s | env steps/s | env steps per CPU s |"
          "\n|---|---|---|---|---|---|---|---|---|---|---|---|---|")


def render(stored: dict, out: Path) -> None:
    rows = sorted(stored.values(), key=_sort_key)
    done = [r for r in rows if r.get("status", "done") == "done"]
    pending = [r for r in rows if r.get("status", "done") != "done"]
    header = HEADER
    machines: dict = {}
    for r in done:
        machines.setdefault(r.get("machine") or "not recorded", []).append(r["task"])
    text = [
        "# PPO quality (greedy evaluation, 32 episodes per seed)", "",
        "Generated by `python benchmarks/ppo_quality.py` from the rows stored in "
        "`benchmarks/quality_results.json` (one per task and budget; "
        "`python benchmarks/ppo_quality.py --render` rewrites this file from them). Presets "
        "from `rollax.ppo.PRESETS`; all seeds of a task in one vmapped program; wall and CPU "
        "seconds of the run exclude compilation (CPU s: the process's CPU time over all its "
        "threads; the machine is shared and runs are niced, so wall time depends on its load); "
        "env steps/s counts all seeds.", "",
        "Machines:", "", *(f"- {m}: {', '.join(dict.fromkeys(tasks))}"
                            for m, tasks in machines.items()), "",
        "Targets: classic control, the solved threshold (mean >= target); MinAtar, "
        "gymnax-blines' published PPO return (met when our mean is at least it; see below). A "
        "run on fewer steps than the preset's budget is a short-budget run, not compared.", "",
        header,
    ]
    text += [_table_row(r) for r in done]
    short = [r for r in done if short_budget(r)]
    if short:
        text += ["", "### Throughput, and the time a full-budget run would take here", "",
                 "From the short-budget rows above, at that run's load: the whole run includes "
                 "the greedy evaluations before and after training (32 episodes of the full "
                 "horizon each), \"updates only\" is the rate between the first and the last "
                 "update (with `--progress`) and is what the estimates use; compile time is "
                 "not included:", "",
                 "| task | measured steps/seed x seeds | env steps/s (wall, whole run) | "
                 "env steps/s (wall, updates only) | env steps per CPU s | est. wall for the "
                 "preset budget x same seeds | est. CPU time |",
                 "|---|---|---|---|---|---|---|"]
        for r in short:
            total = r["preset_steps"] * r["seeds"]
            rate = r.get("sps_updates") or r["sps"]
            text.append(
                f"| {r['task']} | {r['steps']:,} x {r['seeds']} | {r['sps']:,.0f} | "
                f"{_fmt(r.get('sps_updates'), ',.0f')} | {_fmt(r.get('sps_cpu'), ',.0f')} | "
                f"{r['preset_steps']:,} x {r['seeds']}: {total / rate / 3600:.1f} h | "
                + (f"{total / r['sps_cpu'] / 3600:.1f} h |" if r.get("sps_cpu") else "— |"))
    if pending:
        text += ["", "### Runs not finished when this file was written", ""]
        for r in pending:
            text.append(f"- {r['task']}: {r['steps']:,} steps/seed x {r['seeds']} seeds, "
                        f"{r['status']} since {r.get('started', '?')} (pid {r.get('pid')}, "
                        f"log `{r.get('log', '?')}`): `{r.get('command', '')}`")
    curves = [r for r in done if r.get("curve")]
    if curves:
        text += ["", "### Training curves", "",
                 "Mean return of the training episodes (sampled actions) that finished in each "
                 "tenth of the run, over seeds; env steps per seed at the end of each tenth:", ""]
        for r in curves:
            points = ", ".join(f"{s / 1e6:.2g}M: {_fmt(v, '.1f')}" for s, v in r["curve"])
            text.append(f"- {r['task']} ({r['steps']:,} steps/seed): {points}")
    if any(r["task"] in MINATAR for r in rows):
        text += ["", MINATAR_NOTES.rstrip()]
        full = sorted({r["task"] for r in done if r["task"] in MINATAR and not short_budget(r)})
        missing = [t for t in MINATAR if t not in full]
        if BUDGET.exists():  # the 1e7 runs, one process per seed, resumable
            text += ["", BUDGET.read_text().rstrip()]
        elif missing:
            text += ["", "Not yet run at the published budget (1e7 env steps per seed): "
                     + ", ".join(missing) + ". The rows above for them are short-budget runs; "
                     "the throughput table says how long a full run would take on their "
                     "machine."]
    for section in (PEERS, FAMILY, A2C_SB3, MEMORY, HOST):  # by hand from their scripts' tables
        if section.exists():
            text += ["", section.read_text().rstrip()]
    tmp = out.with_suffix(".md.tmp")
    tmp.write_text("\n".join(text) + "\n")
    tmp.replace(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", nargs="+", default=list(CLASSIC),
                        help=f"tasks (default: classic control); MinAtar: {' '.join(MINATAR)}")
    parser.add_argument("--seeds", type=int, default=8)
    parser.add_argument("--total-steps", type=int, default=None,
                        help="env steps per seed (default: the preset's budget)")
    parser.add_argument("--progress", type=float, default=0.0, metavar="SECONDS",
                        help="print training progress at most every SECONDS (0: off)")
    parser.add_argument("--log", default=None, help="log file to name in QUALITY.md while "
                        "the runs are going")
    parser.add_argument("--render", action="store_true",
                        help="only rewrite QUALITY.md from the stored rows")
    parser.add_argument("--results", default=str(HERE / "quality_results.json"))
    parser.add_argument("--out", default=str(HERE / "QUALITY.md"))
    args = parser.parse_args()
    results, out = Path(args.results), Path(args.out)
    if args.render:
        render(load_rows(results), out)
        return
    command = " ".join(shlex.quote(a) for a in ["python", *sys.argv])
    now = datetime.datetime.now().isoformat(timespec="seconds")
    queued = []
    for task in args.tasks:
        config = ppo.resolve(ppo.preset(task, **({} if args.total_steps is None else
                                                  dict(total_steps=args.total_steps))))
        steps = ppo.num_updates(config) * config.num_envs * config.num_steps
        queued.append(dict(task=task, steps=steps, seeds=args.seeds, status="queued",
                           started=now, pid=os.getpid(), log=args.log, command=command))
    render(update_rows(results, queued), out)
    print(HEADER, flush=True)
    for entry in queued:
        entry = dict(entry, status="running",
                     started=datetime.datetime.now().isoformat(timespec="seconds"))
        render(update_rows(results, [entry]), out)
        try:
            row = run(entry["task"], args.seeds, args.total_steps, args.progress)
        except BaseException as error:  # leave no row "running" behind
            render(update_rows(results, [dict(entry, status=f"failed ({error!r:.200})")]), out)
            raise
        assert row_key(row) == row_key(entry), (row_key(row), row_key(entry))
        print(_table_row(row), flush=True)
        render(update_rows(results, [row]), out)


if __name__ == "__main__":
    main()
