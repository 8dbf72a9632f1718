"""A2C, synchronous advantage actor-critic, compiled end to end:
``rollax.make_train(A2CConfig())(key)``.

One update on the auto-reset rollout of :mod:`rollax.algos.rollout` (which collects, computes
the values and the advantages), one plain policy-gradient step on all of it::

    key, rollout_key = split(key)
    env_state, traj = collect_autoreset(env, policy, params, env_state, rollout_key, T)
    r = r / std(running discounted return), clipped       # normalize_rewards only
    A, G = gae(r, V, V', terminated, truncated, gamma, lambda)   # lambda = 1: n-step returns
    loss = a2c_loss(log pi(a|s), A, V(s), G, entropy)             # all T * B cells at once
    params <- rmsprop(clip_per_network(grad))                     # one step per rollout
    observation statistics <- merged with this batch (when normalising)

A feed-forward network (MLP, CNN) scores the ``T * B`` cells of the rollout; a recurrent one
(GRU, LSTM) replays each environment's whole sequence from the carry it was collected with,
resets included (the rollout's :class:`~rollax.algos.rollout.Strategy`). The defaults are
Stable-Baselines3's A2C (``n_steps=5``, ``lr=7e-4``, RMSprop with ``alpha=0.99, eps=1e-5`` as
``torch.optim.RMSprop`` defines it, ``gae_lambda=1``, no entropy bonus); docs/algorithms.md
lists what differs from it.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Literal, NamedTuple

import jax
import jax.numpy as jnp
import optax

from rollax.algos import optim
from rollax.algos.base import (
    NEURAL,
    Algorithm,
    AlgorithmSpec,
    Report,
    added,
    budget,
    env_batch,
    hyperparams_type,
    traced,
)
from rollax.algos.rollout import ActorCriticState, RolloutParts, check_sizes, environment
from rollax.envs.base import Environment
from rollax.losses import a2c_loss, explained_variance
from rollax.nets.build import actor_critic, check_network, network_choice
from rollax.nets.heads import ActorCriticParams
from rollax.policies import ObsNormState
from rollax.validate import check_count, check_real, check_seed

__all__ = ["PRESETS", "SPEC", "A2CConfig", "A2CHyperparams", "A2CMetrics", "A2CParts",
           "A2CResult", "loss", "make_algorithm", "num_updates", "preset", "resolve", "update",
           "validate"]


# --- config -----------------------------------------------------------------------------------

OPTIMIZERS = ("rmsprop", "adam")


@dataclasses.dataclass(frozen=True)
class A2CConfig:
    """A2C settings; defaults follow Stable-Baselines3's A2C. The fields marked ``traced`` are
    the numeric hyperparameters (:data:`A2CHyperparams`), traced inputs of the compiled
    program, so a sweep ``vmap``s over them."""

    env: str = "CartPole-v1"
    """Registered environment with a Box observation space."""
    horizon: int | None = None
    """Episode time limit (default: the task's own, e.g. 500 for CartPole-v1)."""
    env_options: tuple[str, ...] = added((), stored=())
    """Keyword options of the environment's constructor, each KEY=VALUE (true/false, a number
    or text), e.g. episodic_life=true reward_clip=true for EnvPool's Atari games."""
    seed: int = 0
    """Root key jax.random.key(seed) (seed k of a multi-seed run uses key(seed + k))."""
    total_steps: int = budget(500_000)
    """Environment steps in all: updates = total_steps // (num_envs * num_steps)."""
    num_envs: int = env_batch(8)
    """Parallel environments B (auto-reset)."""
    num_steps: int = 5
    """Steps T collected per environment per update (one gradient step per update)."""
    lr: float = traced(7e-4)
    """Learning rate (start value when annealed)."""
    anneal_lr: bool = False
    """Anneal the learning rate linearly to 0 over training."""
    gamma: float = traced(0.99)
    """Discount factor, in (0, 1]."""
    gae_lambda: float = traced(1.0)
    """GAE lambda, in [0, 1] (1: n-step returns bootstrapped from the rollout's last value)."""
    vf_coef: float = traced(0.5)
    """Weight of the value loss mean((V - G)^2)."""
    ent_coef: float = traced(0.0)
    """Weight of the entropy bonus."""
    max_grad_norm: float = traced(0.5)
    """Gradient-norm clip, of the actor's and the critic's gradients apart."""
    reward_scale: float = traced(1.0)
    """Multiply rewards by this before computing advantages."""
    optimizer: Literal["rmsprop", "adam"] = "rmsprop"
    """rmsprop (PyTorch's: decay 0.99, eps 1e-5 added outside the square root) or adam
    (eps 1e-5)."""
    normalize_advantages: bool = False
    """Normalise advantages over each batch."""
    normalize_observations: bool = False
    """Normalise observations with running statistics (merged after each update)."""
    normalize_rewards: bool = False
    """Divide rewards by the running standard deviation of each environment's discounted
    return (not centred; statistics merged with each rollout before it is used), then clip to
    +-reward_clip; reward_scale multiplies the result (Stable-Baselines3's VecNormalize
    norm_reward)."""
    reward_clip: float = 10.0
    """Bound of the normalised rewards (normalize_rewards), positive."""
    hidden: tuple[int, ...] = (64, 64)
    """Hidden layer sizes of the actor and of the critic."""
    activation: Literal["tanh", "relu"] = "tanh"
    """Hidden activation."""
    init_log_std: float = 0.0
    """Initial log standard deviation (continuous actions)."""
    network: Literal["auto", "mlp", "cnn", "nature", "gru", "lstm"] = "auto"
    """Actor-critic: mlp, cnn, nature, gru or lstm (as PPO's network; a recurrent one replays
    each environment's whole rollout), or auto (nature for images of 36x36 pixels or more, cnn
    for smaller ones, else mlp)."""
    memory_size: int = 128
    """Units of the recurrent memory (network gru or lstm)."""
    eval_episodes: int = 32
    """Greedy evaluation episodes after training (and of each evaluation during training)."""
    eval_steps: int | None = None
    """Steps of each evaluation episode (default: the environment's horizon, at most
    100,000, so a continuing task is evaluated on a bounded stretch)."""


A2CHyperparams = hyperparams_type(A2CConfig)
"""The traced fields of :class:`A2CConfig` as a NamedTuple (``lr``, ``gamma``, ``gae_lambda``,
``vf_coef``, ``ent_coef``, ``max_grad_norm``, ``reward_scale``)."""

ZOO = "DLR-RM/rl-baselines3-zoo hyperparams/a2c.yml at c6c209e7d487635f0b835fb916ec4468142b28ff"

PRESETS: dict[str, dict] = {
    "CartPole-v1": dict(total_steps=500_000, num_envs=8),
    "Acrobot-v1": dict(total_steps=500_000, num_envs=16, normalize_observations=True,
                       reward_scale=0.1),
    "Pendulum-v1": dict(
        total_steps=1_000_000, num_envs=8, num_steps=8, gamma=0.9, gae_lambda=0.9,
        vf_coef=0.4, max_grad_norm=0.5, lr=7e-4, normalize_observations=True,
        reward_scale=0.1,
    ),
}
"""rl-baselines3-zoo's A2C settings (``ZOO``) as rollax has them: ``n_envs`` is ``num_envs``,
``n_timesteps`` ``total_steps``, ``normalize: true`` the observation normalisation. Zoo's
``normalize`` also normalises rewards (VecNormalize): the presets, measured before rollax had
``normalize_rewards``, keep ``reward_scale=0.1`` in its place on Acrobot-v1 and Pendulum-v1
(Acrobot, 8 seeds: greedy -80 to -90 with it, one seed of 8 at -217 without). Pendulum-v1's
gSDE (``use_sde``: state-dependent exploration) is not in rollax, so its ``log_std_init=-2`` (a
gSDE scale) is not taken: a plain Gaussian from ``init_log_std`` 0, with a constant learning
rate (zoo: ``lin_7e-4``), ends at a greedy -155 to -400 in 1e6 steps (8 seeds) where -2 and the
annealed rate stay near -1,100 (3 seeds); ``ortho_init=False`` is not mapped either (rollax's
networks are always orthogonal)."""


def preset(env: str, **overrides) -> A2CConfig:
    """The tuned config for ``env`` with ``overrides`` applied."""
    return A2CConfig(env=env, **{**PRESETS.get(env, {}), **overrides})


def num_updates(config: A2CConfig) -> int:
    return config.total_steps // (config.num_envs * config.num_steps)


def validate(config: A2CConfig, env: Environment | None = None) -> Environment:
    """Check every setting (``ValueError`` naming it and its range); returns the environment
    (``env`` when given: the one already built from ``config.env`` and ``config.horizon``)."""
    check_seed(config.seed)
    check_sizes(config.total_steps, config.num_envs, config.num_steps)
    check_count("eval_episodes", config.eval_episodes)
    if config.eval_steps is not None:
        check_count("eval_steps", config.eval_steps)
    inf = math.inf
    check_real("lr", config.lr, 0, inf, low_open=True, high_open=True)
    check_real("gamma", config.gamma, 0, 1, low_open=True)
    check_real("gae_lambda", config.gae_lambda, 0, 1)
    check_real("vf_coef", config.vf_coef, 0, inf, high_open=True)
    check_real("ent_coef", config.ent_coef, 0, inf, high_open=True)
    check_real("max_grad_norm", config.max_grad_norm, 0, inf, low_open=True, high_open=True)
    check_real("reward_scale", config.reward_scale, 0, inf, low_open=True, high_open=True)
    check_real("reward_clip", config.reward_clip, 0, inf, low_open=True, high_open=True)
    if config.optimizer not in OPTIMIZERS:
        raise ValueError(f"optimizer must be one of {', '.join(OPTIMIZERS)}, "
                         f"got {config.optimizer!r}")
    for name in ("anneal_lr", "normalize_advantages", "normalize_observations",
                 "normalize_rewards"):
        if not isinstance(getattr(config, name), bool):
            raise ValueError(f"{name} must be true or false, got {getattr(config, name)!r}")
    env = environment(config, env, "A2C")
    check_network(env, config.network, config.hidden, config.activation, config.init_log_std,
                  config.memory_size, config.env)
    return env


def resolve(config: A2CConfig, env: Environment | None = None) -> A2CConfig:
    """``config`` validated, with ``horizon`` set to the task's own limit when unset and
    ``network`` to the one ``auto`` picks (``mlp``, ``cnn`` or ``nature``)."""
    return _resolved(config, env)[0]


def _resolved(config: A2CConfig, env: Environment | None) -> tuple[A2CConfig, Environment]:
    env = validate(config, env)
    horizon = env.horizon if config.horizon is None else config.horizon
    return dataclasses.replace(config, horizon=horizon,
                               network=network_choice(config.network, env)), env


# --- state, parts and loss ----------------------------------------------------------------------

class A2CMetrics(NamedTuple):
    """Per-update diagnostics (each ``(updates,)``); names follow SB3/CleanRL."""

    policy_loss: jax.Array
    """-mean(A log pi(a|s)) over the batch."""
    value_loss: jax.Array
    """mean((V(s) - G)^2) over the batch."""
    entropy: jax.Array
    explained_variance: jax.Array
    grad_norm: jax.Array
    """Norm of the actor's gradient (its layers and log_std) before clipping."""
    learning_rate: jax.Array
    episode_return: jax.Array
    """Mean return of episodes that ended during this update's rollout (NaN if none)."""
    episode_length: jax.Array
    episodes: jax.Array
    """Number of episodes that ended during the rollout."""
    env_steps: jax.Array
    """Environment steps taken so far."""


class A2CResult(NamedTuple):
    params: ActorCriticParams
    obs_stats: ObsNormState
    metrics: A2CMetrics
    eval_return: jax.Array
    """Mean greedy-evaluation return over ``eval_episodes``."""
    state: ActorCriticState


@dataclasses.dataclass(frozen=True)
class A2CParts:
    """The static parts of an A2C run: its config, the rollout and the number of updates."""

    config: A2CConfig
    rollout: RolloutParts
    num_updates: int

    def schedule(self, hp, count):
        """The learning rate at update ``count`` (one gradient step each): linear from ``lr``
        to 0 over the run (``anneal_lr``), or ``lr``."""
        return optim.schedule(hp.lr, self.config.anneal_lr, self.num_updates)(count)

    def optimiser(self, hp) -> optax.GradientTransformation:
        lr = functools.partial(self.schedule, hp)
        step = optim.rmsprop(lr) if self.config.optimizer == "rmsprop" else optim.adam(lr)
        return optax.chain(optim.clip_per_network(hp.max_grad_norm), step)


def loss(parts: A2CParts, params, data, hp):
    """:func:`rollax.losses.a2c_loss` of the network on the rollout's ``T * B`` cells (read one
    by one, or whole sequences replayed from their collected carries with their resets)."""
    cells = parts.rollout.score(params, data)
    return a2c_loss(cells.log_prob, cells.advantage, cells.value, cells.target, cells.entropy,
                    vf_coef=hp.vf_coef, ent_coef=hp.ent_coef,
                    normalize_advantages=parts.config.normalize_advantages)


# --- the update and the algorithm ---------------------------------------------------------------

def init(parts: A2CParts, key: jax.Array, hp) -> ActorCriticState:
    return parts.rollout.init(key, parts.optimiser(hp))


def update(parts: A2CParts, state: ActorCriticState, hp):
    """One A2C update: a rollout and one gradient step on all of it; ``(next state,
    A2CMetrics)``."""
    key, rollout_key = jax.random.split(state.key)
    collected = parts.rollout.collect(state, rollout_key, hp)
    step = optim.gradient_step(lambda p: loss(parts, p, collected.data, hp), state.params,
                               state.opt_state, parts.optimiser(hp), parts.rollout.checked,
                               state.update + 1)
    new_state, episodes = parts.rollout.advance(state, collected, step.params, step.opt_state,
                                                key)
    metrics = A2CMetrics(
        policy_loss=step.aux["policy_loss"], value_loss=step.aux["value_loss"],
        entropy=step.aux["entropy"],
        explained_variance=explained_variance(collected.values, collected.targets),
        grad_norm=optim.actor_norm(step.grads),
        learning_rate=jnp.asarray(parts.schedule(hp, state.update), jnp.float32),
        episode_return=episodes.mean_return, episode_length=episodes.mean_length,
        episodes=episodes.count, env_steps=(state.update + 1) * parts.rollout.cells,
    )
    return new_state, metrics


def make_algorithm(config: A2CConfig, checked: bool = False,
                   env: Environment | None = None) -> Algorithm:
    """Validate ``config`` (before compiling) and return A2C's parts (init, update, evaluate).
    ``checked`` stages the runtime checks of :mod:`rollax.guards` into each update."""
    config, env = _resolved(config, env)
    net = actor_critic(env, config.network, config.hidden, config.activation,
                       config.init_log_std, config.memory_size)
    rollout = RolloutParts(env, net, config.num_envs, config.num_steps,
                           config.normalize_observations, checked,
                           normalize_rewards=config.normalize_rewards,
                           reward_clip=float(config.reward_clip))
    parts = A2CParts(config, rollout, num_updates(config))
    return rollout.algorithm(
        config, num_updates=parts.num_updates, init=functools.partial(init, parts),
        update=functools.partial(update, parts),
        result=lambda state, metrics, eval_return: A2CResult(
            state.params, state.obs_stats, metrics, eval_return, state))


SPEC = AlgorithmSpec(
    name="a2c", config_type=A2CConfig, build=make_algorithm, trains=NEURAL,
    report=Report(score="eval_return", progress="episode_return",
                  shown=("episode_return", "value_loss", "entropy", "explained_variance",
                         "grad_norm"),
                  headline=("num_envs", "num_steps", "lr", "optimizer")),
    default=False, presets=PRESETS,
)
"""A2C's facts: trains what PPO trains, when asked (``--algo a2c``)."""
