"""PPO for neural actor-critics, compiled end to end: ``rollax.make_train(PPOConfig())(key)``.

The whole algorithm, top to bottom: config, state, the parts (the rollout of
:mod:`rollax.algos.rollout`, the optimiser), loss, epochs of minibatch steps, the update, and
the parts the runner takes (the presets, a table, are in :mod:`rollax.algos.ppo_presets`). One
update::

    key, rollout_key, shuffle_key = split(key, 3)
    env_state, traj = collect_autoreset(env, policy, params, env_state, rollout_key, T)
    V = critic(obs), V' = critic(true next obs)
    r = r / std(running discounted return), clipped                     # normalize_rewards only
    A, targets = gae(r, V, V', terminated, truncated, gamma, lambda)     # two signals kept apart
    repeat `epochs`: split the batch into `minibatches`, and for each minibatch
        loss = actor_critic_loss(...)                                   # rollax.losses
        params <- adam(clip_per_network(grad)), learning rate linearly annealed
    observation statistics <- merged with this batch (when normalising)

A batch's behaviour log-probs, actions, advantages and targets stay frozen through its epochs.
Feed-forward (MLP, CNN) and recurrent (GRU, LSTM) networks differ in the rollout's
:class:`~rollax.algos.rollout.Strategy`: feed-forward, the ``T * B`` cells are shuffled into
minibatches; recurrent, each environment's memory (``state.carry``) is collected with it and
reset where episodes start, and minibatches split the environments, never time, replaying whole
sequences from their collected carries (one epoch of one minibatch gives the stored log-probs
back: ratio 1). After the last update the policy's mode is evaluated on ``eval_episodes``
absorbing episodes.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any, Literal, NamedTuple

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
from rollax.algos.ppo_presets import PRESETS
from rollax.algos.ppo_zoo import from_zoo
from rollax.algos.rollout import ActorCriticState, RolloutParts, check_sizes, environment
from rollax.envs.base import Environment
from rollax.losses import actor_critic_loss, explained_variance
from rollax.nets.build import RECURRENT, Network, actor_critic, check_network, network_choice
from rollax.nets.heads import ActorCriticParams
from rollax.policies import ObsNormState
from rollax.validate import check_count, check_real, check_seed

__all__ = ["PRESETS", "SPEC", "PPOConfig", "PPOHyperparams", "PPOMetrics", "PPOParts",
           "PPOResult", "PPOState", "make_algorithm", "make_network", "make_parts", "num_updates",
           "preset", "resolve", "validate"]


# --- config -----------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class PPOConfig:
    """PPO settings; defaults follow CleanRL's ppo.py / PureJaxRL for CartPole-v1. The fields
    marked ``traced`` are the numeric hyperparameters (:data:`PPOHyperparams`), traced inputs
    of the compiled program, so a sweep ``vmap``s over them."""

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
    num_envs: int = env_batch(4)
    """Parallel environments B (auto-reset)."""
    num_steps: int = 128
    """Steps T collected per environment per update."""
    epochs: int = 4
    """Passes over each batch."""
    minibatches: int = 4
    """Minibatches per epoch; must divide num_envs * num_steps."""
    lr: float = traced(2.5e-4)
    """Adam learning rate (start value when annealed)."""
    anneal_lr: bool = True
    """Anneal the learning rate linearly to 0 over training."""
    gamma: float = traced(0.99)
    """Discount factor, in (0, 1]."""
    gae_lambda: float = traced(0.95)
    """GAE lambda, in [0, 1]."""
    clip_eps: float = traced(0.2)
    """Clip range of the ratio, in (0, 1)."""
    clip_value: bool = True
    """Clip the value update to +-clip_eps around the collected value."""
    vf_coef: float = traced(0.5)
    """Weight of the value loss."""
    ent_coef: float = traced(0.01)
    """Weight of the entropy bonus."""
    max_grad_norm: float = traced(0.5)
    """Gradient-norm clip, of the actor's and the critic's gradients apart."""
    normalize_advantages: bool = True
    """Normalise advantages within each minibatch."""
    normalize_observations: bool = False
    """Normalise observations with running statistics (merged after each update)."""
    reward_scale: float = traced(1.0)
    """Multiply rewards by this before computing advantages."""
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
    network: Literal["auto", "mlp", "cnn", "nature", "gru", "lstm"] = added("auto", stored="mlp")
    """Actor-critic: mlp, cnn (3x3 convolutions over the (H, W, C) image the environment's
    observation flattens, then the hidden layers), nature (the Nature-DQN torso shared by actor
    and critic, its dense layers hidden; Atari's frames), gru or lstm (a recurrent memory
    between an embedding of hidden[0] units and heads of hidden[1:]; minibatches split
    environments), or auto (nature for images of 36x36 pixels or more, cnn for smaller ones,
    else mlp; config.json stores the choice)."""
    memory_size: int = 128
    """Units of the recurrent memory (network gru or lstm)."""
    eval_episodes: int = 32
    """Greedy evaluation episodes after training (and of each evaluation during training)."""
    eval_steps: int | None = None
    """Steps of each evaluation episode (default: the environment's horizon, at most
    100,000, so a continuing task is evaluated on a bounded stretch)."""


PPOHyperparams = hyperparams_type(PPOConfig)
"""The traced fields of :class:`PPOConfig` as a NamedTuple (``lr``, ``gamma``, ``gae_lambda``,
``clip_eps``, ``vf_coef``, ``ent_coef``, ``max_grad_norm``, ``reward_scale``)."""


def preset(env: str, **overrides) -> PPOConfig:
    """The tuned config for ``env`` with ``overrides`` applied."""
    return PPOConfig(env=env, **{**PRESETS.get(env, {}), **overrides})


def num_updates(config: PPOConfig) -> int:
    return config.total_steps // (config.num_envs * config.num_steps)


def validate(config: PPOConfig, env: Environment | None = None) -> Environment:
    """Check every setting (``ValueError`` naming it and its range); returns the environment
    (``env`` when given: the one already built from ``config.env`` and ``config.horizon``)."""
    check_seed(config.seed)
    check_sizes(config.total_steps, config.num_envs, config.num_steps)
    for name in ("epochs", "minibatches", "eval_episodes"):
        check_count(name, getattr(config, name))
    if config.eval_steps is not None:
        check_count("eval_steps", config.eval_steps)
    batch = config.num_envs * config.num_steps
    if batch % config.minibatches:
        raise ValueError(f"minibatches must divide num_envs * num_steps = {batch}, "
                         f"got {config.minibatches}")
    inf = math.inf
    check_real("lr", config.lr, 0, inf, low_open=True, high_open=True)
    check_real("gamma", config.gamma, 0, 1, low_open=True)
    check_real("gae_lambda", config.gae_lambda, 0, 1)
    check_real("clip_eps", config.clip_eps, 0, 1, low_open=True, high_open=True)
    check_real("vf_coef", config.vf_coef, 0, inf, high_open=True)
    check_real("ent_coef", config.ent_coef, 0, inf, high_open=True)
    check_real("max_grad_norm", config.max_grad_norm, 0, inf, low_open=True, high_open=True)
    check_real("reward_scale", config.reward_scale, 0, inf, low_open=True, high_open=True)
    check_real("reward_clip", config.reward_clip, 0, inf, low_open=True, high_open=True)
    env = environment(config, env, "PPO")
    check_network(env, config.network, config.hidden, config.activation, config.init_log_std,
                  config.memory_size, config.env)
    if config.network in RECURRENT and config.num_envs % config.minibatches:
        raise ValueError(f"minibatches must divide num_envs = {config.num_envs} for network "
                         f"{config.network} (its minibatches split environments), got "
                         f"{config.minibatches}")
    return env


def resolve(config: PPOConfig, env: Environment | None = None) -> PPOConfig:
    """``config`` validated, with ``horizon`` set to the task's own limit when unset and
    ``network`` to the one ``auto`` picks (``mlp``, ``cnn`` or ``nature``)."""
    return _resolved(config, env)[0]


def _resolved(config: PPOConfig, env: Environment | None) -> tuple[PPOConfig, Environment]:
    env = validate(config, env)
    horizon = env.horizon if config.horizon is None else config.horizon
    return dataclasses.replace(config, horizon=horizon,
                               network=network_choice(config.network, env)), env


# --- state ------------------------------------------------------------------------------------

PPOState = ActorCriticState
"""Everything a run carries from one update to the next: the rollout's
:class:`~rollax.algos.rollout.ActorCriticState` (parameters, optimiser state, observation
statistics, environments, running episodes, key, update count, recurrent memories, and with
``normalize_rewards`` the reward statistics and running discounted returns)."""


class PPOMetrics(NamedTuple):
    """Per-update diagnostics (each ``(updates,)``); names follow SB3/CleanRL."""

    policy_loss: jax.Array
    value_loss: jax.Array
    entropy: jax.Array
    approx_kl: jax.Array
    """k3 estimator mean((r - 1) - log r), averaged over epochs and minibatches."""
    old_approx_kl: jax.Array
    """mean(-log r), the naive estimator."""
    clip_fraction: jax.Array
    ratio_min: jax.Array
    ratio_max: jax.Array
    explained_variance: jax.Array
    learning_rate: jax.Array
    episode_return: jax.Array
    """Mean return of episodes that ended during this update's rollout (NaN if none)."""
    episode_length: jax.Array
    episodes: jax.Array
    """Number of episodes that ended during the rollout."""
    env_steps: jax.Array
    """Environment steps taken so far."""


class PPOResult(NamedTuple):
    params: ActorCriticParams
    obs_stats: ObsNormState
    metrics: PPOMetrics
    eval_return: jax.Array
    """Mean greedy-evaluation return over ``eval_episodes``."""
    state: PPOState


# --- the parts: the rollout, the network and the optimiser ---------------------------------------

def make_network(env: Environment, config: PPOConfig) -> Network:
    """The actor-critic of ``config`` for ``env``'s spaces
    (:func:`rollax.nets.actor_critic`)."""
    return actor_critic(env, config.network, config.hidden, config.activation,
                        config.init_log_std, config.memory_size)


@dataclasses.dataclass(frozen=True)
class PPOParts:
    """The static parts of a PPO run: its config, the rollout (environment, network, sizes)
    and the number of updates."""

    config: PPOConfig
    rollout: RolloutParts
    num_updates: int

    @property
    def steps_per_update(self) -> int:
        return self.config.epochs * self.config.minibatches

    def schedule(self, hp, count):
        """The learning rate at gradient step ``count``: linear from ``lr`` to 0 over all
        gradient steps of the run (``anneal_lr``), or ``lr``."""
        steps = self.num_updates * self.steps_per_update
        return optim.schedule(hp.lr, self.config.anneal_lr, steps)(count)

    def optimiser(self, hp):
        return optax.chain(optim.clip_per_network(hp.max_grad_norm),
                           optim.adam(lambda count: self.schedule(hp, count)))


def make_parts(config: PPOConfig, env: Environment, checked: bool = False) -> PPOParts:
    """The parts of a resolved ``config`` on ``env``."""
    rollout = RolloutParts(env, make_network(env, config), config.num_envs, config.num_steps,
                           config.normalize_observations, checked,
                           normalize_rewards=config.normalize_rewards,
                           reward_clip=float(config.reward_clip))
    return PPOParts(config, rollout, num_updates(config))


# --- init, loss and epochs ---------------------------------------------------------------------

def init(parts: PPOParts, key: jax.Array, hp) -> PPOState:
    """Fresh parameters, optimiser and observation statistics, and B started environments."""
    return parts.rollout.init(key, parts.optimiser(hp))


def loss(parts: PPOParts, params, data, hp):
    """:func:`rollax.losses.actor_critic_loss` of the network on a minibatch (its cells
    scored by the rollout's strategy: read one by one, or whole sequences replayed from their
    stored carries with their resets)."""
    config = parts.config
    return actor_critic_loss(
        *parts.rollout.score(params, data), clip_eps=hp.clip_eps, vf_coef=hp.vf_coef,
        ent_coef=hp.ent_coef, clip_value=config.clip_value,
        normalize_advantages=config.normalize_advantages)


def sgd_epochs(parts: PPOParts, state: PPOState, data, key: jax.Array, hp):
    """``epochs`` passes of minibatch steps over ``data`` (the cells shuffled for a
    feedforward network, whole sequences split by environment for a recurrent one):
    ``((params, opt_state), aux)`` with aux ``(epochs, minibatches)`` per loss output."""
    tx, config, update = parts.optimiser(hp), parts.config, state.update + 1
    checked = parts.rollout.checked

    def sgd_step(carry: tuple[Any, optax.OptState], minibatch):
        params, opt_state = carry
        step = optim.gradient_step(lambda p: loss(parts, p, minibatch, hp), params, opt_state,
                                   tx, checked, update)
        return (step.params, step.opt_state), step.aux

    def epoch(carry, key):
        return jax.lax.scan(sgd_step, carry,
                            parts.rollout.minibatches(data, key, config.minibatches))

    return jax.lax.scan(epoch, (state.params, state.opt_state),
                        jax.random.split(key, config.epochs))


# --- the update ----------------------------------------------------------------------------------

def update(parts: PPOParts, state: PPOState, hp):
    """One PPO update: ``(next state, PPOMetrics)``."""
    key, rollout_key, shuffle_key = jax.random.split(state.key, 3)
    collected = parts.rollout.collect(state, rollout_key, hp)
    (params, opt_state), aux = sgd_epochs(parts, state, collected.data, shuffle_key, hp)
    new_state, episodes = parts.rollout.advance(state, collected, params, opt_state, key)
    metrics = PPOMetrics(
        policy_loss=aux["policy_loss"].mean(), value_loss=aux["value_loss"].mean(),
        entropy=aux["entropy"].mean(), approx_kl=aux["approx_kl"].mean(),
        old_approx_kl=aux["old_approx_kl"].mean(), clip_fraction=aux["clip_fraction"].mean(),
        ratio_min=aux["ratio_min"].min(), ratio_max=aux["ratio_max"].max(),
        explained_variance=explained_variance(collected.values, collected.targets),
        learning_rate=jnp.asarray(parts.schedule(hp, state.update * parts.steps_per_update),
                                  jnp.float32),
        episode_return=episodes.mean_return, episode_length=episodes.mean_length,
        episodes=episodes.count, env_steps=(state.update + 1) * parts.rollout.cells,
    )
    return new_state, metrics


# --- the algorithm --------------------------------------------------------------------------------

def make_algorithm(config: PPOConfig, checked: bool = False,
                   env: Environment | None = None) -> Algorithm:
    """Validate ``config`` (before compiling) and return PPO's parts (init, update, evaluate).
    ``checked`` stages the runtime checks of :mod:`rollax.guards` into each update."""
    config, env = _resolved(config, env)
    parts = make_parts(config, env, checked)
    return parts.rollout.algorithm(
        config, num_updates=parts.num_updates, init=functools.partial(init, parts),
        update=functools.partial(update, parts),
        result=lambda state, metrics, eval_return: PPOResult(
            state.params, state.obs_stats, metrics, eval_return, state))


SPEC = AlgorithmSpec(
    name="ppo", config_type=PPOConfig, build=make_algorithm, trains=NEURAL,
    report=Report(score="eval_return", progress="episode_return",
                  shown=("episode_return", "approx_kl", "clip_fraction", "entropy",
                         "explained_variance"),
                  headline=("num_envs", "num_steps", "epochs", "minibatches", "lr")),
    presets=PRESETS, from_zoo=from_zoo,
)
"""PPO's facts: the default for every non-finite task with vector observations."""
