"""PPO for neural actor-critics, compiled end to end: ``rollax.make_train(PPOConfig())(key)``.

Settings (:class:`PPOConfig`), tuned presets, validation and the facts the layers above ask
(:data:`SPEC`); the update itself is :mod:`rollax.algos.ppo_update`. After the last update the
policy's mode is evaluated on ``eval_episodes`` absorbing episodes (greedy evaluation).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Literal, NamedTuple

import jax
import numpy as np

from rollax.algos import ppo_update
from rollax.algos.base import Algorithm, AlgorithmSpec, Column, lane_name
from rollax.algos.ppo_update import (
    RECURRENT,
    PPOHyperparams,
    PPOMetrics,
    PPOState,
    Setup,
    make_network,
    network_choice,
)
from rollax.envs.base import Box, Environment
from rollax.envs.registry import make
from rollax.evaluation import evaluate_policy
from rollax.networks import image_shape
from rollax.policies import ActorCriticParams, ObsNormState
from rollax.validate import check_count, check_real, check_seed, is_int

__all__ = [
    "PRESETS",
    "SPEC",
    "PPOConfig",
    "PPOHyperparams",
    "PPOMetrics",
    "PPOResult",
    "PPOState",
    "make_algorithm",
    "make_network",
    "num_updates",
    "preset",
    "validate",
]


@dataclasses.dataclass(frozen=True)
class PPOConfig:
    """PPO settings; defaults follow CleanRL's ppo.py / PureJaxRL for CartPole-v1."""

    env: str = "CartPole-v1"
    """Registered environment with a Box observation space."""
    horizon: int | None = None
    """Episode time limit (default: the task's own, e.g. 500 for CartPole-v1)."""
    seed: int = 0
    """Root key jax.random.key(seed) (seed k of a multi-seed run uses key(seed + k))."""
    total_steps: int = 500_000
    """Environment steps in all: updates = total_steps // (num_envs * num_steps)."""
    num_envs: int = 4
    """Parallel environments B (auto-reset)."""
    num_steps: int = 128
    """Steps T collected per environment per update."""
    epochs: int = 4
    """Passes over each batch."""
    minibatches: int = 4
    """Minibatches per epoch; must divide num_envs * num_steps."""
    lr: float = 2.5e-4
    """Adam learning rate (start value when annealed)."""
    anneal_lr: bool = True
    """Anneal the learning rate linearly to 0 over training."""
    gamma: float = 0.99
    """Discount factor, in (0, 1]."""
    gae_lambda: float = 0.95
    """GAE lambda, in [0, 1]."""
    clip_eps: float = 0.2
    """Clip range of the ratio, in (0, 1)."""
    clip_value: bool = True
    """Clip the value update to +-clip_eps around the collected value."""
    vf_coef: float = 0.5
    """Weight of the value loss."""
    ent_coef: float = 0.01
    """Weight of the entropy bonus."""
    max_grad_norm: float = 0.5
    """Global gradient-norm clip."""
    normalize_advantages: bool = True
    """Normalise advantages within each minibatch."""
    normalize_observations: bool = False
    """Normalise observations with running statistics (merged after each update)."""
    reward_scale: float = 1.0
    """Multiply rewards by this before computing advantages."""
    hidden: tuple[int, ...] = (64, 64)
    """Hidden layer sizes of the actor and of the critic."""
    activation: Literal["tanh", "relu"] = "tanh"
    """Hidden activation."""
    init_log_std: float = 0.0
    """Initial log standard deviation (continuous actions)."""
    network: Literal["auto", "mlp", "cnn", "gru", "lstm"] = "auto"
    """Actor-critic: mlp, cnn (3x3 convolutions over the (H, W, C) image the environment's
    observation flattens, then the hidden layers), gru or lstm (a recurrent memory between an
    embedding of hidden[0] units and heads of hidden[1:]; minibatches split environments), or
    auto (cnn for image observations, else mlp; config.json stores the choice)."""
    memory_size: int = 128
    """Units of the recurrent memory (network gru or lstm)."""
    eval_episodes: int = 32
    """Greedy evaluation episodes after training."""


PRESETS: dict[str, dict] = {
    "CartPole-v1": {},
    "Acrobot-v1": dict(total_steps=1_000_000, num_envs=8),
    "MountainCar-v0": dict(total_steps=1_000_000, num_envs=16, normalize_observations=True),
    "Pendulum-v1": dict(
        total_steps=1_000_000, num_envs=16, num_steps=256, epochs=10, minibatches=16, lr=1e-3,
        gamma=0.95, gae_lambda=0.95, ent_coef=0.0, normalize_observations=True,
        reward_scale=0.1, max_grad_norm=0.5,
    ),
    # MinAtar through gymnax: gymnax-blines' PPO settings (agents/<game>-MinAtar/ppo.yaml,
    # identical for the four games): 64 envs x 128 steps, 4 epochs x 8 minibatches, Adam
    # (eps 1e-5) at a constant 5e-4, gamma 0.999, GAE lambda 0.95, clip 0.2 (value clipped
    # too), entropy 0.01, value 0.5, grad norm 0.5, 1e7 env steps; hidden layers 256-256 ReLU.
    # Not mapped: gymnax-blines' actor-critic is an MLP over the flattened 10x10xC planes
    # ("Categorical-MLP", flatten_3d) with flax's default weights and uniform(0.05) biases;
    # these presets put rollax's CNN (one 3x3 convolution, 16 planes) under the same 256-256
    # heads, orthogonally initialised. Also gymnax-blines' own: its lr "warm-up" runs from
    # 5e-4 to 5e-4 (constant), and each rollout steps 129 times and trains on the first 128.
    **{f"gymnax:{game}-MinAtar": dict(
        total_steps=10_000_000, num_envs=64, num_steps=128, epochs=4, minibatches=8, lr=5e-4,
        anneal_lr=False, gamma=0.999, gae_lambda=0.95, clip_eps=0.2, vf_coef=0.5,
        ent_coef=0.01, max_grad_norm=0.5, hidden=(256, 256), activation="relu",
        network="cnn",
    ) for game in ("Asterix", "Breakout", "Freeway", "SpaceInvaders")},
}
"""Tuned settings per task (overrides of the PPOConfig defaults)."""


def preset(env: str, **overrides) -> PPOConfig:
    """The tuned config for ``env`` with ``overrides`` applied."""
    return PPOConfig(env=env, **{**PRESETS.get(env, {}), **overrides})


class PPOResult(NamedTuple):
    params: ActorCriticParams
    obs_stats: ObsNormState
    metrics: PPOMetrics
    eval_return: jax.Array
    """Mean greedy-evaluation return over ``eval_episodes``."""
    state: PPOState


def num_updates(config: PPOConfig) -> int:
    return config.total_steps // (config.num_envs * config.num_steps)


def _check_sizes(config: PPOConfig) -> None:
    for name in ("total_steps", "num_envs", "num_steps", "epochs", "minibatches",
                 "eval_episodes", "memory_size"):
        check_count(name, getattr(config, name))
    batch = config.num_envs * config.num_steps
    if config.total_steps < batch:
        raise ValueError(f"total_steps must be at least num_envs * num_steps = {batch}, "
                         f"got {config.total_steps}")
    if batch % config.minibatches:
        raise ValueError(f"minibatches must divide num_envs * num_steps = {batch}, "
                         f"got {config.minibatches}")


def _check_numbers(config: PPOConfig) -> None:
    inf = math.inf
    check_real("lr", config.lr, 0, inf, low_open=True, high_open=True)
    check_real("gamma", config.gamma, 0, 1, low_open=True)
    check_real("gae_lambda", config.gae_lambda, 0, 1)
    check_real("clip_eps", config.clip_eps, 0, 1, low_open=True, high_open=True)
    check_real("vf_coef", config.vf_coef, 0, inf, high_open=True)
    check_real("ent_coef", config.ent_coef, 0, inf, high_open=True)
    check_real("max_grad_norm", config.max_grad_norm, 0, inf, low_open=True, high_open=True)
    check_real("reward_scale", config.reward_scale, 0, inf, low_open=True, high_open=True)
    check_real("init_log_std", config.init_log_std, -10, 10)


def validate(config: PPOConfig, env: Environment | None = None) -> Environment:
    """Check every setting (``ValueError`` naming it and its range); returns the environment
    (``env`` when given: the one already built from ``config.env`` and ``config.horizon``)."""
    check_seed(config.seed)
    _check_sizes(config)
    _check_numbers(config)
    if not config.hidden or not all(is_int(h) and h >= 1 for h in config.hidden):
        raise ValueError(f"hidden must be positive layer sizes, got {config.hidden!r}")
    if config.activation not in ("tanh", "relu"):
        raise ValueError(f"activation must be one of tanh, relu, got {config.activation!r}")
    if env is None:
        env = make(config.env) if config.horizon is None else make(config.env,
                                                                  horizon=config.horizon)
    if not isinstance(env.observation_space, Box) or len(env.observation_space.shape) != 1:
        raise ValueError(
            f"env {config.env!r} has no vector (Box) observations: PPO needs one "
            f"(finite tasks train with the tabular trainer, rollax.algos.tabular)"
        )
    _check_network(config, env)
    return env


def _check_network(config: PPOConfig, env: Environment) -> None:
    choices = ("auto", "mlp", "cnn", *RECURRENT)
    if config.network not in choices:
        raise ValueError(f"network must be one of {', '.join(choices)}, got {config.network!r}")
    if config.network in RECURRENT and config.num_envs % config.minibatches:
        raise ValueError(f"minibatches must divide num_envs = {config.num_envs} for network "
                         f"{config.network} (its minibatches split environments), got "
                         f"{config.minibatches}")
    if config.network == "cnn" and image_shape(env) is None:
        shape = getattr(env, "raw_observation_shape", None)
        found = "none" if shape is None else repr(tuple(shape))
        raise ValueError(
            f"network cnn needs image observations, but env {config.env!r} has no "
            f"raw_observation_shape of rank 3 (H, W, C) (got {found}); use network mlp or auto")


def resolve(config: PPOConfig, env: Environment | None = None) -> PPOConfig:
    """``config`` validated, with ``horizon`` set to the task's own limit when unset and
    ``network`` to the one ``auto`` picks (``mlp`` or ``cnn``)."""
    return _resolved(config, env)[0]


def _resolved(config: PPOConfig, env: Environment | None) -> tuple[PPOConfig, Environment]:
    env = validate(config, env)
    horizon = env.horizon if config.horizon is None else config.horizon
    return dataclasses.replace(config, horizon=horizon,
                               network=network_choice(config.network, env)), env


def _evaluate(setup: Setup, state: PPOState, hp: PPOHyperparams) -> dict:
    eval_key, _ = jax.random.split(state.key)
    params = setup.policy_params(state.params, state.obs_stats)
    return {"eval_return": evaluate_policy(setup.env, setup.policy, params, eval_key,
                                           setup.config.eval_episodes)}


def make_algorithm(config: PPOConfig, checked: bool = False,
                   env: Environment | None = None) -> Algorithm:
    """Validate ``config`` (before compiling) and return PPO's parts (init, update, evaluate).
    ``checked`` stages the runtime checks of :mod:`rollax.guards` into each update."""
    config, env = _resolved(config, env)
    setup = Setup(config, env, make_network(env, config), num_updates(config), checked)
    hyperparams = PPOHyperparams(
        lr=config.lr, gamma=config.gamma, gae_lambda=config.gae_lambda,
        clip_eps=config.clip_eps, vf_coef=config.vf_coef, ent_coef=config.ent_coef,
        max_grad_norm=config.max_grad_norm, reward_scale=config.reward_scale)
    return Algorithm(
        config=config, hyperparams=hyperparams, num_updates=setup.num_updates,
        env_steps_per_update=setup.batch, init=functools.partial(ppo_update.init, setup),
        update=functools.partial(ppo_update.update, setup),
        evaluate=functools.partial(_evaluate, setup),
        params=lambda state: (state.params, state.obs_stats), env=env, policy=setup.policy,
        policy_params=lambda state: setup.policy_params(state.params, state.obs_stats),
        result=lambda state, metrics, initial, final: PPOResult(
            state.params, state.obs_stats, metrics, final["eval_return"], state),
        env_batch=("num_envs", config.num_envs), checked=checked,
        env_batch_fields=("env_state", "episode_return", "episode_length", "carry"),
    )


# --- what the layers above ask (rollax.algos.registry) ---------------------------------------

def accepts(env: Environment) -> bool:
    """PPO's actor-critics read vector (rank-1 Box) observations of tasks that are not finite
    (finite tasks train with the tabular trainer)."""
    space = env.observation_space
    return (isinstance(space, Box) and len(space.shape) == 1
            and not hasattr(env, "to_mdp"))


def _describe(config: PPOConfig, lanes: int) -> str:
    return (f"PPO on {config.env}: {config.num_envs} envs x {config.num_steps} steps per "
            f"update, {config.epochs} epochs x "
            f"{config.minibatches} minibatches, lr {config.lr}, {lanes} lane(s)")


def _report(summary: dict, history, params, single: bool) -> dict:
    evals = [lane["eval_return"] for lane in summary["lanes"]]
    return {"eval_return": evals, "eval_return_mean": float(np.mean(evals)),
            "env_steps": summary["env_steps_per_lane"]}


def _lines(summary: dict, history, params, labels: list[dict]) -> list[str]:
    return ["greedy evaluation return per lane: " + "; ".join(
        f"{lane_name(label)}: {lane['eval_return']:.1f}"
        for label, lane in zip(labels, summary["lanes"]))]


def _lane_facts(history) -> dict:
    finished = np.asarray(history[1:], np.float64)
    last = finished[np.isfinite(finished)][-10:]
    return {"final_episode_return": float(last.mean()) if last.size else None}


SPEC = AlgorithmSpec(
    name="ppo", task="neural", config_type=PPOConfig, methods=("ppo",), accepts=accepts,
    build=make_algorithm, requirement="vector (Box) observations", presets=PRESETS,
    score="eval_return", progress="episode_return",
    progress_label="episode return (finished episodes)", progress_from_start=False,
    columns=(Column("episode return", "episode_return", ".1f"),
             Column("approx_kl", "approx_kl", ".2e"),
             Column("clip frac", "clip_fraction", ".3f"), Column("entropy", "entropy", ".3f"),
             Column("expl. var", "explained_variance", ".2f")),
    describe=_describe, report=_report, lines=_lines, lane_facts=_lane_facts,
    stored_defaults={"network": "mlp"},  # runs written before --network trained an MLP
)
"""PPO's facts: the default for every non-finite task with vector observations."""
