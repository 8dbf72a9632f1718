"""PPO on CartPole-v1 with rollax's PPOConfig defaults (the row rejax is compared against).

    .bench/anchors/bin/python benchmarks/ppo_rollax.py [--total-steps 500000] [--num-envs 4]
                                                       [--repeats 3] [--json OUT]

4 envs x 128 steps, 4 epochs, 4 minibatches, lr 2.5e-4 annealed, 500,000 steps by default.
``--num-envs N`` changes only the number of environments (``PPOConfig(total_steps=...,
num_envs=N)``, everything else default): 128 steps, 4 epochs and 4 minibatches stay, so an
update collects N x 128 steps and each minibatch holds N x 32 of them.
``train.lower(key).compile()`` is timed apart; then one warm-up run and ``--repeats`` timed runs
(keys 1..repeats; ``--key-impl rbg`` for the chip's own bit generator), each ending in rollax's
greedy evaluation over ``eval_episodes`` = 32.
Same JSON schema as ppo_rejax.py.
"""

from __future__ import annotations

import dataclasses

from _timing import emit, ppo_args, ppo_record, time_compiled

import rollax
from rollax.algos import ppo
from rollax.keys import root_key


def main() -> None:
    args = ppo_args(__doc__)
    config = ppo.PPOConfig(total_steps=args.total_steps, num_envs=args.num_envs)
    train = rollax.make_train(config)
    keys = [root_key(i, args.key_impl) for i in range(args.repeats + 1)]
    compile_s, times, returns = time_compiled(train, keys, lambda out: float(out.eval_return))
    steps = ppo.num_updates(config) * config.num_envs * config.num_steps
    emit(ppo_record("rollax", rollax.__version__, dataclasses.asdict(config),
                    steps, compile_s, times, returns, key_impl=args.key_impl,
                    evaluation=f"greedy (policy mode), {config.eval_episodes} episodes, inside "
                    "train after the last update"), args.json)


if __name__ == "__main__":
    main()
