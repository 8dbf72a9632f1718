"""MinAtar PPO with rollax, gymnax-blines' settings, the MLP or the CNN: the rows to set against
benchmarks/minatar_rejax.py.

    python benchmarks/minatar_rollax.py [--network mlp|cnn] [--games Breakout SpaceInvaders]
        [--total-steps 1000000] [--seeds 3] [--evals 10] [--json OUT]

Per game, the preset ``rollax.ppo.preset("gymnax:<game>-MinAtar")`` (gymnax-blines' settings,
``ppo_presets.MINATAR``: 64 envs x 128 steps, 4 epochs x 8 minibatches, constant lr 5e-4, gamma
0.999, GAE lambda 0.95, clip 0.2, value 0.5, entropy 0.01, global-norm clip 0.5, 2 x 256 ReLU)
with ``network`` mlp (the same MLP as rejax's: separate actor and critic over the flattened
planes) or cnn (the preset's). The ``--seeds`` seeds (keys ``key(0..seeds-1)``, as ``rollax
train --seeds``) are one ``jax.vmap`` of one jitted program, compiled apart and run once.

The program is the runner's own parts (``Algorithm.init`` and ``update``) with its periodic
greedy evaluation, as ``rollax train --eval-every K`` logs it (``greedy_return``): every K
updates, :func:`rollax.evaluate_policy` of the policy's mode on 32 fresh episodes of the full
horizon (1000 steps) per seed, keyed ``fold_in(fold_in(key(seed), EVAL_STREAM), updates)``
(:data:`rollax.run.training.EVAL_STREAM`, a stream training never draws), and once more before
the first update (keys of update 0). Here it is staged inside the compiled program, between
``lax.scan`` blocks of K updates, as rejax's ``eval_callback`` is, so compile and run time
cover the same work in both (no persistent compilation cache: ``rollax train`` turns one on,
this script does not). Evaluation reads the state only: training is unchanged, and the returns
at updates K, 2K, ... equal the ``greedy_return`` rows of ``rollax train --env
gymnax:<game>-MinAtar --network mlp --total-steps S --seeds N --eval-every K`` (checked at 2
updates of Breakout, 2 seeds: the same numbers). The updates and K follow
``_timing.minatar_schedule``, as in minatar_rejax.py.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata

import jax
import jax.numpy as jnp
from _timing import device, emit, minatar_args, minatar_row, minatar_schedule, minatar_timed

import rollax
from rollax.algos import ppo, registry
from rollax.evaluation import evaluate_policy
from rollax.run.training import EVAL_STREAM


def make_train(algo, every: int, evals: int):
    """``train(key) -> (evals + 1,)`` greedy returns at 0, ``every``, 2 ``every``, ...
    updates."""
    hp, episodes = algo.hyperparams, algo.config.eval_episodes

    def train(key):
        root = jax.random.fold_in(key, EVAL_STREAM)

        def greedy(state, updates):
            return evaluate_policy(algo.env, algo.policy, algo.params(state),
                                   jax.random.fold_in(root, updates), episodes)

        def block(state, index):
            state, _ = jax.lax.scan(lambda s, _: algo.update(s, hp), state, None, every)
            return state, greedy(state, (index + 1) * every)

        state = algo.init(key, hp)
        first = greedy(state, 0)
        _, returns = jax.lax.scan(block, state, jnp.arange(evals))
        return jnp.concatenate([first[None], returns])

    return train


def main() -> None:
    args = minatar_args(__doc__, network=True)
    updates, every, evals = minatar_schedule(args.total_steps, args.evals)
    keys = jnp.stack([jax.random.key(s) for s in range(args.seeds)])
    rows, shown = [], {}
    for game in args.games:
        config = ppo.preset(f"gymnax:{game}-MinAtar", network=args.network,
                            total_steps=updates * 64 * 128)
        algo = registry.build(config)
        assert algo.num_updates == updates, (algo.num_updates, updates)
        compile_s, run_s, cpu_s, returns = minatar_timed(
            jax.jit(jax.vmap(make_train(algo, every, evals))), keys)
        rows.append(minatar_row(game, updates, every, jax.device_get(returns), compile_s,
                                run_s, cpu_s))
        row = rows[-1]
        print(f"{game}: final greedy returns {row['final_returns']}, compile "
              f"{compile_s:.1f} s, run {run_s:.1f} s ({row['sps']:,.0f} env steps/s)",
              flush=True)
        shown = dataclasses.asdict(algo.config)
        shown.pop("env")
    emit({"lib": "rollax", "network": args.network, "version": rollax.__version__,
          "gymnax": importlib.metadata.version("gymnax"), "device": device(),
          "config": shown, "evals": evals,
          "evaluation": "greedy (the policy's mode), 32 episodes per seed of the full horizon "
          "(1000 steps), before training and every eval_every_updates updates (rollax train "
          "--eval-every's evaluation, staged in the compiled program)", "games": rows},
         args.json)


if __name__ == "__main__":
    main()
