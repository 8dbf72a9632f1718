"""``rollax eval``, ``plot``, ``rollout``, ``exact``, ``gradients``, ``check-env``, ``envs``,
``render``, ``export``, ``exploitability``, ``play`` and ``rate``; :data:`RUNNERS`, what runs each
command (``train``'s: :func:`rollax.cli.train.run_train`)."""

from __future__ import annotations

from pathlib import Path

from rollax.cli.flags import (
    CheckEnvCommand,
    EnvsCommand,
    EvalCommand,
    ExactCommand,
    ExploitabilityCommand,
    ExportCommand,
    GradientsCommand,
    PlayCommand,
    PlotCommand,
    RateCommand,
    RenderCommand,
    RolloutCommand,
    TuneCommand,
    parse_count,
)
from rollax.cli.parse import TrainRequest
from rollax.cli.train import aggregate_text, emit, run_train
from rollax.cli.tune import run_tune
from rollax.validate import check_count, check_seed, counted


def run_eval(cmd: EvalCommand) -> None:
    from rollax.run.training import evaluate_run

    result = evaluate_run(cmd.run_dir, cmd.episodes, not cmd.stochastic, cmd.seed,
                          cmd.search_simulations)
    if cmd.json:
        emit(result)
        return
    mode = "greedy" if not cmd.stochastic else "stochastic"
    print(f"{result['env']}: {counted(cmd.episodes, mode + ' episode')} per lane")
    for lane in result["lanes"]:
        extra = (f", exact {lane['exact_return']:.6f}" if "exact_return" in lane else "")
        label = ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}"
                          for k, v in lane.items() if k not in ("mean_return", "exact_return"))
        print(f"  {label}: mean return {lane['mean_return']:.4f}{extra}")
    print(aggregate_text(result["aggregate"], "lane"))


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


def run_plot(cmd: PlotCommand) -> None:
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


def run_rollout(cmd: RolloutCommand) -> None:
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
    run_dir = check_new_run_dir(cmd.out, f"rollout-seed{cmd.seed}", staged=True)
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


def run_exact(cmd: ExactCommand) -> None:
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
    print(f"{cmd.env}, horizon {mdp.horizon}, {counted(mdp.num_states, 'state')} x "
          f"{counted(mdp.num_actions, 'action')}")
    print(f"uniform policy exact return: {uniform:.6f}")
    print(f"optimal exact return:        {optimal:.6f}")


FIGURE_SUFFIXES = (".png", ".svg", ".pdf")


def comma_counts(name: str, text: str) -> list[int]:
    """``"16,64,256"`` -> ``[16, 64, 256]``; a one-line error naming ``name`` otherwise."""
    try:
        return [parse_count(part) for part in text.split(",")]
    except ValueError:
        raise ValueError(f"{name} must be a comma list of whole numbers, got {text!r}") from None


def gradients_figure_path(out: str | None, env: str, seed: int) -> Path:
    """Where ``rollax gradients`` draws its figure (checked, nothing written)."""
    import re
    import time

    from rollax.run.folder import check_creatable_folder, check_path_fits

    if out is None:
        safe = re.sub(r"[^\w.-]+", "_", env)
        path = Path("runs") / f"gradients-{safe}-seed{seed}-{time.strftime('%Y%m%d-%H%M%S')}.png"
    else:
        path = Path(out)
    check_path_fits(path)
    if path.suffix.lower() not in FIGURE_SUFFIXES:
        raise ValueError(f"out must name a figure file ending in .png, .svg or .pdf, got "
                         f"{str(path)!r}")
    if path.is_dir():
        raise ValueError(f"out {str(path)!r} is a folder: name a figure file")
    check_creatable_folder(path.absolute().parent)
    return path


def gradient_lines(facts: dict, rows: list[dict]) -> list[str]:
    """The text table of ``rollax gradients``: one line per estimator and N."""
    head = (f"{'estimator':<16} {'N':>5}  {'bias':>9} {'± s.e.':>9} {'noise':>9} "
            f"{'variance':>9} {'MSE':>9} {'cos':>7} {'mean cos':>8}")
    lines = [head]
    for r in rows:
        mark = "" if r["unbiased"] else " *"
        lines.append(f"{r['estimator']:<16} {r['episodes']:>5}  {r['bias']:>9.3g} "
                     f"{r['bias_se']:>9.2g} {r['noise']:>9.2g} {r['variance']:>9.3g} "
                     f"{r['mse']:>9.3g} {r['cosine']:>7.4f} {r['mean_cosine']:>8.4f}{mark}")
    lines.append("noise = sqrt(variance / K): the bias an unbiased estimator shows from K "
                 "batches; ± s.e. (delta method) holds where bias >> noise")
    lines.append(f"* biased by construction; ||grad J||^2 = {facts['exact_gradient_norm']**2:.3g}"
                 f" (the MSE of a zero gradient)")
    return lines


def run_gradients(cmd: GradientsCommand) -> None:
    import sys

    import jax

    from rollax import gradients
    from rollax.envs.registry import make
    from rollax.policies import default_policy
    from rollax.run.plots import plot_gradient_mse

    episodes = comma_counts("episodes", cmd.episodes)
    names = (list(gradients.ESTIMATORS) if cmd.estimators is None
             else [n.strip() for n in cmd.estimators.split(",")])
    check_seed(cmd.seed)
    gradients.check_lab(episodes, cmd.batches, cmd.group_size, names, cmd.lam)
    env = make(cmd.env) if cmd.horizon is None else make(cmd.env, horizon=cmd.horizon)
    mdp = gradients.finite_mdp(env, cmd.env)
    path = gradients_figure_path(cmd.out, cmd.env, cmd.seed)
    lab = gradients.Lab(env, mdp, default_policy(env), cmd.group_size, cmd.lam)
    params_key, batches_key = jax.random.split(jax.random.key(cmd.seed))
    params = gradients.lab_params(lab.policy, cmd.params, params_key)
    facts = gradients.summary_facts(lab, params)

    def progress(n: int) -> None:
        if not cmd.json:
            print(f"N={n}: {counted(cmd.batches, 'batch', 'batches')} done", file=sys.stderr,
                  flush=True)

    rows = gradients.lab_table(lab, params, batches_key, names, episodes, cmd.batches, progress)
    title = (f"{cmd.env}, {cmd.params} params (seed {cmd.seed}), K={cmd.batches}, "
             f"G={cmd.group_size}, lambda={cmd.lam}")
    path.parent.mkdir(parents=True, exist_ok=True)
    plot_gradient_mse(rows, facts["exact_gradient_norm"] ** 2, path, title)
    settings = {"env": cmd.env, "horizon": mdp.horizon, "states": mdp.num_states,
                "actions": mdp.num_actions, "params": cmd.params, "seed": cmd.seed,
                "batches": cmd.batches, "episodes": episodes, "group_size": cmd.group_size,
                "lam": cmd.lam, "estimators": names}
    if cmd.json:
        emit({**settings, **facts, "rows": rows, "figure": str(path)})
        return
    print(f"{cmd.env}, horizon {mdp.horizon}, {counted(mdp.num_states, 'state')} x "
          f"{counted(mdp.num_actions, 'action')}; {cmd.params} params (seed {cmd.seed})")
    print(f"exact return J = {facts['exact_return']:.6f}, ||grad J|| = "
          f"{facts['exact_gradient_norm']:.6g}; {counted(cmd.batches, 'batch', 'batches')} "
          f"per N, groups of {cmd.group_size}, GAE lambda {cmd.lam}")
    for line in gradient_lines(facts, rows):
        print(line)
    print(f"figure: {path}")


def run_check_env(cmd: CheckEnvCommand) -> int:
    from rollax.contracts import check_env, check_host_env
    from rollax.contracts.preflight import check_host_before_run, trace_checked
    from rollax.envs.host import is_host
    from rollax.envs.registry import make

    check_count("batch_size", cmd.batch_size)
    if cmd.num_steps is not None:
        check_count("num_steps", cmd.num_steps)
    check_seed(cmd.seed)
    env = make(cmd.name)
    if is_host(env):  # no state to re-step: the collector's rows against the pool's own
        check_host_before_run(env, cmd.name)  # one line for outputs that do not fit the spaces
        report = check_host_env(env, batch_size=min(cmd.batch_size, 4),
                                num_steps=cmd.num_steps, seed=cmd.seed)
    else:
        # one line for an environment that is unhashable, has a space rollax cannot drive,
        # or cannot even be traced
        trace_checked(env, cmd.name)
        report = check_env(env, batch_size=cmd.batch_size, num_steps=cmd.num_steps,
                           seed=cmd.seed)
    if cmd.json:
        emit({"env": cmd.name, "ok": report.ok,
              "checks": [{"name": r.name, "status": r.status, "message": r.message,
                          "step": r.step, "env": r.env} for r in report.results]})
    else:
        print(f"{cmd.name}:")
        print(report)
    return 0 if report.ok else 1


def run_envs(cmd: EnvsCommand) -> None:
    from rollax.envs.registry import registered
    from rollax.envs.suites import suite_ids

    ids = [*registered(), *suite_ids()]
    if cmd.json:
        emit({"envs": ids})
        return
    for name in ids:
        print(name)


def run_render(cmd: RenderCommand) -> None:
    from rollax.run.watch import render_episodes

    if cmd.versus is not None:
        run_render_versus(cmd)
        return
    for name, value, default in (("versus_lane", cmd.versus_lane, 0),
                                 ("update", cmd.update, None),
                                 ("versus_update", cmd.versus_update, None)):
        if value != default:
            raise ValueError(f"{name} picks a snapshot of a game between two runs: it needs "
                             f"--versus RUN2")
    done = render_episodes(cmd.target, cmd.out, episodes=cmd.episodes, lane=cmd.lane,
                           sample=cmd.sample, fps=cmd.fps, seed=cmd.seed,
                           max_steps=cmd.max_steps)
    if cmd.json:
        emit({"out": str(done.path), "returns": list(done.returns),
              "lengths": list(done.lengths), "frames": done.frames})
        return
    for i, (total, length) in enumerate(zip(done.returns, done.lengths)):
        print(f"episode {i + 1}: return {total:.6g}, {counted(length, 'step')}")
    print(f"wrote {done.path} ({counted(done.frames, 'frame')})")


def run_render_versus(cmd: RenderCommand) -> None:
    from rollax.run.watch import render_versus

    assert cmd.versus is not None
    done = render_versus(cmd.target, cmd.versus, cmd.out, episodes=cmd.episodes, lane=cmd.lane,
                         versus_lane=cmd.versus_lane, update=cmd.update,
                         versus_update=cmd.versus_update, sample=cmd.sample, fps=cmd.fps,
                         seed=cmd.seed, max_steps=cmd.max_steps)
    if cmd.json:
        emit({"out": str(done.path), "env": done.env,
              "policy": "sampled" if cmd.sample else "greedy", "players": list(done.players),
              "games": list(done.games), "lengths": list(done.lengths),
              "frames": done.frames})
        return
    names = [p["name"] for p in done.players]
    for i, game in enumerate(done.games):
        first = game["first"]
        won = game["results"].index("win") if "win" in game["results"] else None
        result = ("a draw" if won is None else
                  f"{names[won]} ({'first' if won == first else 'second'}) wins")
        if not game["ended"]:
            result = "stopped at --max-steps, a draw"
        print(f"game {i + 1}: {names[first]} first, {names[1 - first]} second: {result}, "
              f"{counted(len(game['moves']), 'move')}")
    print(f"wrote {done.path} ({counted(done.frames, 'frame')})")


def run_export(cmd: ExportCommand) -> None:
    from rollax.run.export import FORMATS, export_policy

    out = cmd.out or f"policy{FORMATS.get(cmd.format, '')}"
    info = export_policy(cmd.run_dir, out, cmd.format, cmd.lane, cmd.sample)
    if cmd.json:
        emit(info)
        return
    shape = lambda spec: f"({', '.join(map(str, spec['shape']))}) {spec['dtype']}"  # noqa: E731
    carry = info.get("carry", [])
    inputs = [*carry, *info.get("inputs", [info.get("input")]),
              *(info[k] for k in ("action_mask", "noise") if k in info)]
    outputs = [*({**c, "name": c["output"]} for c in carry), info["output"]]
    listed = lambda specs: ", ".join(f"{s['name']} {shape(s)}" for s in specs)  # noqa: E731
    print(f"wrote {out} ({cmd.format}, {info['policy']}): {listed(inputs)} -> "
          f"{listed(outputs)}, lane {cmd.lane} at update {info['update']}; description in "
          f"{out}.json")


def run_exploitability(cmd: ExploitabilityCommand) -> None:
    from rollax.run.exploitability import run_exploitability as measure

    result = measure(cmd.run_dir, cmd.greedy)
    if cmd.json:
        emit(result)
        return
    print(f"{result['env']}: the {result['policy']} policy at update {result['updates']}, "
          f"against best responses (exact)")
    for lane in result["lanes"]:
        label = ", ".join(f"{k}={v}" for k, v in lane.items() if k not in _EXPLOIT_KEYS)
        print(f"  {label}: exploitability {lane['exploitability']:.6f}, NashConv "
              f"{lane['nash_conv']:.6f} (best responses: first mover "
              f"{lane['best_response_0']:.6f}, second {lane['best_response_1']:.6f}; "
              f"self-play value {lane['self_play_value']:.6f})")


def run_play(cmd: PlayCommand) -> None:
    import sys

    from rollax.run.loaded import load_run
    from rollax.run.play import check_play, moves_first, play_game

    name, board = check_play(cmd.run_dir, cmd.lane, cmd.seed)
    out = sys.stderr if cmd.json else sys.stdout
    stdin = sys.stdin  # None when the command was started with stdin closed: no input
    echo = stdin is not None and not stdin.isatty()  # piped moves are shown, as in a game

    def say(line: str) -> None:
        print(line, file=out, flush=True)

    def prompt(text: str) -> None:
        print(text, end="", file=out, flush=True)

    def read() -> str | None:
        line = stdin.readline() if stdin is not None else ""
        if not line:
            print(file=out)
            return None
        if echo:
            print(line.rstrip("\n"), file=out)
        return line

    first = moves_first(cmd.seat, cmd.seed)
    loaded = load_run(cmd.run_dir)
    policy = "samples from" if cmd.sample else "plays the mode of"
    say(f"{name}: you play {'X, moving first' if first else 'O, moving second'}; the agent "
        f"{policy} lane {cmd.lane}'s policy ({_label(loaded.lanes[cmd.lane])}) at update "
        f"{loaded.updates}. Type a {board.noun} number, q quits.")
    game = play_game(loaded, board, first, read=read, say=say, prompt=prompt,
                     sample=cmd.sample, lane=cmd.lane, seed=cmd.seed)
    if cmd.json:
        emit({"env": name, "updates": loaded.updates, "lane": cmd.lane,
              "seat": "first" if first else "second", "policy": "sampled" if cmd.sample
              else "greedy", "moves": [{"player": who, board.noun: n} for who, n in game.moves],
              "result": game.result})


def _label(label: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in label.items())


def run_rate(cmd: RateCommand) -> None:
    from rollax.run.rating import rate_runs

    result = rate_runs(list(cmd.run_dirs), cmd.games, cmd.seed, cmd.greedy)
    if cmd.json:
        emit(result)
        return
    print(f"{result['env']}: {result['games']} games a seat for every pair, {result['policy']} "
          f"policies; Elo (Bradley-Terry), the random legal player at 0")
    width = max(len(p["name"]) for p in result["players"])
    for rank, player in enumerate(result["players"], 1):
        print(f"  {rank:>3}  {player['name']:<{width}}  {player['elo']:>8.1f}  "
              f"score {player['score']:.3f} of {player['games']} games")


_EXPLOIT_KEYS = ("nash_conv", "exploitability", "best_response_0", "best_response_1",
                 "self_play_value")


RUNNERS = {TrainRequest: run_train, EvalCommand: run_eval, PlotCommand: run_plot,
           RolloutCommand: run_rollout, ExactCommand: run_exact, GradientsCommand: run_gradients,
           CheckEnvCommand: run_check_env, EnvsCommand: run_envs, RenderCommand: run_render,
           ExportCommand: run_export, ExploitabilityCommand: run_exploitability,
           PlayCommand: run_play, RateCommand: run_rate, TuneCommand: run_tune}
"""What runs each command (the object :func:`rollax.cli.parse.parse` gives) and returns its
exit status (``None``: 0)."""

COMPILES = (EvalCommand, RolloutCommand, ExactCommand, GradientsCommand, CheckEnvCommand,
            RenderCommand, ExportCommand, ExploitabilityCommand, PlayCommand, RateCommand,
            TuneCommand)
"""The commands that compile programs with the compile cache on (``train`` turns it on or off
as ``--compile-cache`` asks); :func:`rollax.cli.main` sets it before the command runs."""
