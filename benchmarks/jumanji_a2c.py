"""Jumanji's own trainer (``jumanji.training``: its A2C agent, networks, evaluators and per-
environment config) at a budget this CPU allows, for the side-by-side table in QUALITY.md.

    python benchmarks/jumanji_a2c.py --env minesweeper --steps 2000000 --seeds 0 1 2 \
        --out benchmarks/results/jumanji_a2c_minesweeper.json

It composes Jumanji's hydra config (``agent=a2c``, ``env=<name>``) with only the budget
changed: ``num_epochs`` so that epochs x learner steps x ``n_steps`` x ``total_batch_size`` is
the step budget (rounded up to whole epochs; ``--learner-steps`` sets the learner steps per
epoch, default Jumanji's), everything else as Jumanji ships it. The training loop is
``jumanji/training/train.py``'s: ``agent.run_epoch`` scanned over an epoch under ``pmap``;
evaluation is Jumanji's greedy evaluator after the last epoch (``--eval-episodes`` episodes).
Each seed appends one JSON row to ``--out`` (a seed already there is skipped, so an interrupted
measurement continues where it stopped): environment steps, the greedy mean return over the
evaluation episodes (Jumanji's evaluator reports the mean only), the wall time of training
(first epoch, which compiles, and the rest) and the versions.
Requirements: ``benchmarks/requirements-jumanji.txt`` (Jumanji's training extras: hydra-core,
dm-haiku, distrax, rlax, tensorboardX, neptune, tqdm).
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import os
import platform
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from _timing import append_row


def _config(env: str, seed: int, steps: int, learner_steps: int | None, eval_episodes: int):
    import jumanji.training
    from hydra import compose, initialize_config_dir

    folder = Path(jumanji.training.__file__).parent / "configs"
    with initialize_config_dir(config_dir=str(folder), version_base=None):
        cfg = compose("config.yaml", overrides=[f"env={env}", "agent=a2c", f"seed={seed}"])
    training = cfg.env.training
    if learner_steps is not None:
        training.num_learner_steps_per_epoch = learner_steps
    per_epoch = (training.n_steps * training.total_batch_size
                 * training.num_learner_steps_per_epoch)
    training.num_epochs = max(1, math.ceil(steps / per_epoch))
    cfg.env.evaluation.greedy_eval_total_batch_size = eval_episodes
    cfg.env.evaluation.eval_total_batch_size = eval_episodes
    return cfg, per_epoch


def mlp_agent(cfg, environment, hidden=(64, 64)):
    """Jumanji's A2C agent with Jumanji's optimiser and loss settings for ``cfg`` but, instead of
    the environment's own network, the network rollax builds for it by default: every
    observation field but ``step_count`` flattened and concatenated (as rollax's adapter does),
    one tanh MLP (``hidden``) per head, the policy's logits masked with ``action_mask``. Only for
    environments whose policy is one categorical over the joint action (Minesweeper)."""
    import haiku as hk
    import optax
    from jumanji.training.agents.a2c import A2CAgent
    from jumanji.training.networks.actor_critic import ActorCriticNetworks, FeedForwardNetwork
    from jumanji.training.networks.parametric_distribution import (
        FactorisedActionSpaceParametricDistribution,
    )

    num_values = np.asarray(environment.unwrapped.action_spec.num_values)

    def flat(observation):
        fields = [getattr(observation, name) for name in observation._fields
                  if name != "step_count"]
        batch = fields[0].shape[0]
        return jnp.concatenate([jnp.reshape(f, (batch, -1)).astype(jnp.float32)
                                for f in fields], axis=-1)

    def network(critic: bool) -> FeedForwardNetwork:
        def forward(observation):
            out = hk.nets.MLP((*hidden, 1 if critic else int(np.prod(num_values))),
                              activation=jnp.tanh)(flat(observation))
            if critic:
                return jnp.squeeze(out, -1)
            mask = jnp.reshape(observation.action_mask, out.shape)
            return jnp.where(mask, out, jnp.finfo(jnp.float32).min)

        init, apply = hk.without_apply_rng(hk.transform(forward))
        return FeedForwardNetwork(init=init, apply=apply)

    networks = ActorCriticNetworks(
        policy_network=network(False), value_network=network(True),
        parametric_action_distribution=FactorisedActionSpaceParametricDistribution(num_values))
    a2c = cfg.env.a2c
    return A2CAgent(env=environment, n_steps=cfg.env.training.n_steps,
                    total_batch_size=cfg.env.training.total_batch_size,
                    actor_critic_networks=networks, optimizer=optax.adam(a2c.learning_rate),
                    normalize_advantage=a2c.normalize_advantage,
                    discount_factor=a2c.discount_factor,
                    bootstrapping_factor=a2c.bootstrapping_factor,
                    l_pg=a2c.l_pg, l_td=a2c.l_td, l_en=a2c.l_en)


def run(env: str, seed: int, steps: int, learner_steps: int | None, eval_episodes: int,
        network: str = "jumanji") -> dict:
    from jumanji.training.setup_train import (
        setup_agent,
        setup_env,
        setup_evaluators,
        setup_training_state,
    )

    cfg, per_epoch = _config(env, seed, steps, learner_steps, eval_episodes)
    key, init_key = jax.random.split(jax.random.PRNGKey(cfg.seed))
    environment = setup_env(cfg)
    agent = setup_agent(cfg, environment) if network == "jumanji" else mlp_agent(cfg, environment)
    _, greedy_eval = setup_evaluators(cfg, agent)
    state = setup_training_state(environment, agent, init_key)

    @functools.partial(jax.pmap, axis_name="devices")
    def epoch_fn(training_state):
        training_state, metrics = jax.lax.scan(
            lambda s, _: agent.run_epoch(s), training_state, None,
            cfg.env.training.num_learner_steps_per_epoch)
        return training_state, jax.tree_util.tree_map(jnp.mean, metrics)

    seconds = []
    for _ in range(cfg.env.training.num_epochs):
        start = time.perf_counter()
        state, metrics = epoch_fn(state)
        jax.block_until_ready((state, metrics))
        seconds.append(time.perf_counter() - start)
    key, eval_key = jax.random.split(key)
    greedy = greedy_eval.run_evaluation(state.params_state, eval_key)
    greedy = {k: float(np.asarray(v).reshape(-1)[0]) for k, v in greedy.items()}
    return {
        "peer": "jumanji.training a2c", "network": network,
        "env": cfg.env.registered_version, "seed": seed,
        "env_steps": cfg.env.training.num_epochs * per_epoch,
        "epochs": cfg.env.training.num_epochs, "steps_per_epoch": per_epoch,
        "greedy_episode_return": greedy.get("episode_return"),
        "greedy": greedy, "eval_episodes": eval_episodes,
        "first_epoch_s": round(seconds[0], 2), "rest_s": round(sum(seconds[1:]), 2),
        "train_s": round(sum(seconds), 2),
        "versions": {"jax": jax.__version__, "python": platform.python_version(),
                     "jumanji": __import__("jumanji").__version__},
        "machine": f"{platform.processor() or platform.machine()}, {jax.device_count()} "
                   f"{jax.devices()[0].platform} device(s), {len(os.sched_getaffinity(0))} "
                   "core(s) allowed",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", required=True, help="a Jumanji training config: minesweeper, lbf, "
                        "rubiks_cube, bin_pack, ...")
    parser.add_argument("--steps", type=int, required=True, help="environment step budget")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--learner-steps", type=int, default=None,
                        help="learner steps per epoch (default: Jumanji's config)")
    parser.add_argument("--eval-episodes", type=int, default=1000)
    parser.add_argument("--out", type=Path, default=None, help="JSON lines, appended")
    parser.add_argument("--network", choices=("jumanji", "mlp"), default="jumanji",
                        help="the environment's network from Jumanji's config (default), or "
                        "the flat MLP rollax builds by default (mlp_agent)")
    args = parser.parse_args()
    done = set()
    if args.out is not None and args.out.exists():  # resumable: finished seeds are kept
        for line in args.out.read_text().splitlines():
            row = json.loads(line)
            done.add((row["config"], row["seed"], row["budget"], row.get("network", "jumanji"),
                      row.get("learner_steps")))
    for seed in args.seeds:
        if (args.env, seed, args.steps, args.network, args.learner_steps) in done:
            print(f"{args.env} seed {seed}: already in {args.out}", flush=True)
            continue
        row = {"config": args.env, "budget": args.steps, "learner_steps": args.learner_steps,
               **run(args.env, seed, args.steps, args.learner_steps, args.eval_episodes,
                      args.network)}
        append_row(row, args.out)


if __name__ == "__main__":
    main()
