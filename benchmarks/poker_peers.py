"""Exploitability against experience in Kuhn poker and Leduc hold'em: rollax's self-play PPO
beside OpenSpiel's own CFR and NFSP, each run here, for QUALITY.md. One library per process,
each in the environment that has it:

    # rollax (pgx extra):  python benchmarks/poker_peers.py --lib rollax --game kuhn_poker \\
    #                         --steps 262144 --seeds 3 --json /tmp/poker-rollax.json
    # OpenSpiel (open_spiel + torch + dm-tree, e.g. .bench/zoo):
    #   .bench/zoo/bin/python benchmarks/poker_peers.py --lib cfr --game kuhn_poker \\
    #       --iterations 1000 --json /tmp/poker-cfr.json
    #   .bench/zoo/bin/python benchmarks/poker_peers.py --lib nfsp --game kuhn_poker \\
    #       --steps 262144 --seeds 3 --json /tmp/poker-nfsp.json
    # the table:  python benchmarks/poker_peers.py --table /tmp/poker-*.json

What each measures, at checkpoints along the run:
- rollax: ``rollax train --env pgx:<game>`` (self-play PPO, one policy for both seats) with
  ``--eval-every``; the exploitability is rollax's own exact one of the policy's probabilities,
  logged in metrics.jsonl (checked against OpenSpiel's ``exploitability`` in rollax's tests).
  Experience: environment steps (both players' moves).
- CFR: OpenSpiel's ``cfr.CFRSolver`` (vanilla CFR, full traversals), the exploitability of its
  average policy by OpenSpiel's ``exploitability.exploitability``. Experience: iterations,
  each a traversal of the whole tree for both players (no sampling).
- NFSP: OpenSpiel's ``pytorch.nfsp.NFSP`` with the settings of OpenSpiel's
  ``examples/nfsp_kuhn_pytorch.py`` (one hidden layer of 128, anticipatory 0.1, epsilon 0.06 ->
  0.001 over the run), its average policy measured by OpenSpiel's ``exploitability``.
  Experience: environment steps, counted as rollax counts them (one per move).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PGX = {"kuhn_poker": "kuhn_poker", "leduc_poker": "leduc_holdem"}
"""OpenSpiel's name -> Pgx's."""
ROLLAX = ["--num-envs", "32", "--num-steps", "32", "--network", "mlp", "--hidden", "64", "64",
          "--lr", "3e-4", "--ent-coef", "0.01", "--eval-episodes", "8"]
"""rollax's settings (the games have no preset): docs/cli.md's Kuhn example, wider."""


def machine() -> str:
    return f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, " \
           f"Python {platform.python_version()}"


def run_rollax(game: str, steps: int, seeds: int, points: int, extra: list[str]) -> dict:
    updates = steps // (32 * 32)
    every = max(1, updates // points)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "run"
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "rollax.cli", "train", "--env", f"pgx:{PGX[game]}",
                        "--total-steps", str(steps), *ROLLAX, *extra, "--seeds", str(seeds),
                        "--eval-every", str(every), "--out", str(out), "--json"],
                       check=True, stdout=subprocess.DEVNULL)
        wall = time.perf_counter() - start
        rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    curve: dict[int, list[float]] = {}
    for row in rows:
        if "exploitability" in row:
            curve.setdefault(row["update"] * 32 * 32, []).append(row["exploitability"])
    return {"lib": "rollax PPO self-play", "unit": "env steps", "wall_s": wall,
            "settings": " ".join([*ROLLAX, *extra]), "seeds": seeds,
            "curve": [[x, ys] for x, ys in sorted(curve.items())]}


def run_cfr(game: str, iterations: int, points: int) -> dict:
    import pyspiel
    from open_spiel.python.algorithms import cfr, exploitability

    spiel = pyspiel.load_game(game)
    solver = cfr.CFRSolver(spiel)
    marks = sorted({max(1, round(iterations / 2 ** k)) for k in range(points)})  # halvings
    curve, spent = [], 0.0
    for i in range(1, iterations + 1):
        start = time.perf_counter()
        solver.evaluate_and_update_policy()
        spent += time.perf_counter() - start
        if i in marks:
            value = exploitability.exploitability(spiel, solver.average_policy())
            curve.append([i, [float(value)]])
    return {"lib": "OpenSpiel CFR", "unit": "iterations", "wall_s": spent, "seeds": 1,
            "settings": "cfr.CFRSolver (vanilla, alternating=True)", "curve": curve}


def run_nfsp(game: str, steps: int, seed: int, points: int) -> dict:
    import numpy as np
    import torch
    from open_spiel.python import policy, rl_environment
    from open_spiel.python.algorithms import exploitability
    from open_spiel.python.pytorch import nfsp

    np.random.seed(seed)
    torch.manual_seed(seed)
    env = rl_environment.Environment(
        game, players=2, chance_event_sampler=rl_environment.ChanceEventSampler(seed=seed))
    size = env.observation_spec()["info_state"][0]
    actions = env.action_spec()["num_actions"]
    agents = [nfsp.NFSP(p, size, actions, [128], int(2e6), 0.1, replay_buffer_capacity=int(2e5),
                        epsilon_decay_duration=steps, epsilon_start=0.06, epsilon_end=0.001)
              for p in range(2)]

    class Average(policy.Policy):
        """Both agents' average policies, read as OpenSpiel's examples read them."""

        def __init__(self):
            super().__init__(env.game, [0, 1])

        def action_probabilities(self, state, player_id=None):
            player = state.current_player()
            legal = state.legal_actions(player)
            infos = [None, None]
            infos[player] = state.information_state_tensor(player)
            lists = [None, None]
            lists[player] = legal
            step = rl_environment.TimeStep(
                observations={"info_state": infos, "legal_actions": lists,
                              "current_player": player},
                rewards=None, discounts=None, step_type=None)
            with agents[player].temp_mode_as(nfsp.MODE.AVERAGE_POLICY):
                probs = agents[player].step(step, is_evaluation=True).probs
            return {a: probs[a] for a in legal}

    average = Average()
    marks = [steps * k // points for k in range(1, points + 1)]
    curve, taken, spent = [], 0, 0.0
    start = time.perf_counter()
    while taken < steps:
        step = env.reset()
        while not step.last():
            player = step.observations["current_player"]
            step = env.step([agents[player].step(step).action])
            taken += 1
        for agent in agents:
            agent.step(step)
        if marks and taken >= marks[0]:
            spent += time.perf_counter() - start
            curve.append([taken, [float(exploitability.exploitability(env.game, average))]])
            while marks and taken >= marks[0]:
                marks.pop(0)
            start = time.perf_counter()
    spent += time.perf_counter() - start
    return {"lib": "OpenSpiel NFSP", "unit": "env steps", "wall_s": spent, "seeds": 1,
            "settings": "pytorch.nfsp.NFSP as examples/nfsp_kuhn_pytorch.py", "curve": curve}


def table(paths: list[str]) -> str:
    import numpy as np

    found = [json.loads(Path(p).read_text()) for p in paths]
    lines = ["| game | library | experience | exploitability (mean over seeds; min-max) | "
             "wall s (training) | machine |", "|---|---|---|---|---|---|"]
    for result in found:
        extra = result["settings"].removeprefix(" ".join(ROLLAX)).strip()
        name = f"{result['lib']} {extra}" if result["lib"].startswith("rollax") else result["lib"]
        for x, ys in result["curve"]:
            spread = f" ({min(ys):.4f}-{max(ys):.4f})" if len(ys) > 1 else ""
            lines.append(f"| {result['game']} | {name} | {x:,} {result['unit']} | "
                         f"{np.mean(ys):.4f}{spread} | {result['wall_s']:.1f} | "
                         f"{result['machine']} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lib", choices=("rollax", "cfr", "nfsp"))
    parser.add_argument("--game", choices=tuple(PGX), default="kuhn_poker")
    parser.add_argument("--steps", type=int, default=262144)
    parser.add_argument("--iterations", type=int, default=1000)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--points", type=int, default=8, help="checkpoints along the run")
    parser.add_argument("--rollax-flags", default="",
                        help="more rollax train flags, e.g. '--opponents pool --ent-coef 0.05'")
    parser.add_argument("--json")
    parser.add_argument("--table", nargs="+", help="JSON files to print as one table")
    args = parser.parse_args()
    if args.table:
        print(table(args.table))
        return
    if args.lib == "rollax":
        result = run_rollax(args.game, args.steps, args.seeds, args.points,
                            args.rollax_flags.split())
    elif args.lib == "cfr":
        result = run_cfr(args.game, args.iterations, args.points)
    else:
        runs = [run_nfsp(args.game, args.steps, s, args.points) for s in range(args.seeds)]
        result = {**runs[0], "seeds": args.seeds, "wall_s": sum(r["wall_s"] for r in runs),
                  "curve": [[x, [ys for r in runs for ys in r["curve"][i][1]]]
                            for i, (x, _) in enumerate(runs[0]["curve"])]}
    result.update(game=args.game, machine=machine())
    text = json.dumps(result)
    print(text)
    if args.json:
        Path(args.json).write_text(text)


if __name__ == "__main__":
    main()
