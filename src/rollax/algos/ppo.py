"""PPO for neural actor-critics, compiled end to end: ``rollax.make_train(PPOConfig())(key)``.

The whole algorithm, top to bottom: config, state, network, rollout with GAE, loss, epochs of
minibatch steps, the update, and the parts the runner takes (the presets, a table, are in
:mod:`rollax.algos.ppo_presets`). One update::

    key, rollout_key, shuffle_key = split(key, 3)
    env_state, traj = collect_autoreset(env, policy, params, env_state, rollout_key, T)
    V = critic(obs), V' = critic(true next obs)
    A, targets = gae(r, V, V', terminated, truncated, gamma, lambda)     # two signals kept apart
    repeat `epochs`: split the batch into `minibatches`, and for each minibatch
        loss = actor_critic_loss(...)                                   # rollax.losses
        params <- adam(clip_per_network(grad)), learning rate linearly annealed
    observation statistics <- merged with this batch (when normalising)

A batch's behaviour log-probs, actions, advantages and targets stay frozen through its epochs.
Feed-forward (MLP, CNN) and recurrent (GRU, LSTM) networks differ in one :class:`Strategy`:
feed-forward, the ``T * B`` cells are shuffled into minibatches; recurrent, each environment's
memory (``state.carry``) is collected with it and reset where episodes start, and minibatches
split the environments, never time, replaying whole sequences from their collected carries
(one epoch of one minibatch gives the stored log-probs back: ratio 1). After the last update
the policy's mode is evaluated on ``eval_episodes`` absorbing episodes.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable
from typing import Any, Literal, NamedTuple, cast

import jax
import jax.numpy as jnp
import optax

from rollax import guards
from rollax.algos.base import (
    Algorithm,
    AlgorithmSpec,
    hyperparams_of,
    hyperparams_type,
    traced,
)
from rollax.algos.ppo_presets import PRESETS
from rollax.algos.ppo_zoo import from_zoo
from rollax.collect import collect_autoreset, collect_autoreset_recurrent, reset_batch
from rollax.envs.base import Box, Environment
from rollax.envs.registry import make
from rollax.evaluation import evaluate_policy
from rollax.losses import actor_critic_loss
from rollax.nets.build import RECURRENT, Network, actor_critic, network_choice
from rollax.nets.cnn import image_shape
from rollax.nets.heads import ActorCriticParams
from rollax.nets.rnn import RecurrentActorCritic
from rollax.policies import (
    NormalizedPolicy,
    ObsNormState,
    obs_norm_init,
    obs_norm_update,
    obs_normalize,
)
from rollax.recurrent import (
    NormalizedRecurrent,
    episode_starts,
    initial_carries,
    is_recurrent,
    unroll,
)
from rollax.returns import gae
from rollax.sharding import constrain_envs
from rollax.validate import check_count, check_real, check_seed, is_int

__all__ = ["PRESETS", "SPEC", "PPOConfig", "PPOHyperparams", "PPOMetrics", "PPOResult",
           "PPOState", "clip_per_network", "make_algorithm", "make_network", "num_updates",
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
    """Greedy evaluation episodes after training (and of each --eval-every evaluation)."""
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


def _check_sizes(config: PPOConfig) -> None:
    for name in ("total_steps", "num_envs", "num_steps", "epochs", "minibatches",
                 "eval_episodes", "memory_size"):
        check_count(name, getattr(config, name))
    if config.eval_steps is not None:
        check_count("eval_steps", config.eval_steps)
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
        env = make(config.env, **({} if config.horizon is None else {"horizon": config.horizon}))
    space = env.observation_space
    if not isinstance(space, Box) or len(space.shape) != 1:
        raise ValueError(f"env {config.env!r} has no vector (Box) observations: PPO needs one "
                         f"(finite tasks train with the tabular trainer, rollax.algos.tabular)")
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



# --- state ------------------------------------------------------------------------------------

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


class PPOState(NamedTuple):
    """Everything a run carries from one update to the next."""

    params: Any
    """The network's parameters (``ActorCriticParams``, or ``RecurrentParams`` for a GRU/LSTM)."""
    opt_state: optax.OptState
    obs_stats: ObsNormState
    env_state: Any
    episode_return: jax.Array
    """(B,) return so far of each environment's current episode."""
    episode_length: jax.Array
    key: jax.Array
    update: jax.Array
    carry: Any = None
    """(B, ...) each environment's memory, for a recurrent network (else None)."""


class PPOResult(NamedTuple):
    params: ActorCriticParams
    obs_stats: ObsNormState
    metrics: PPOMetrics
    eval_return: jax.Array
    """Mean greedy-evaluation return over ``eval_episodes``."""
    state: PPOState


# --- the network and the feed-forward / recurrent strategy -------------------------------------

def make_network(env: Environment, config: PPOConfig) -> Network:
    """The actor-critic of ``config`` for ``env``'s spaces
    (:func:`rollax.nets.actor_critic`)."""
    return actor_critic(env, config.network, config.hidden, config.activation,
                        config.init_log_std, config.memory_size)


@dataclasses.dataclass(frozen=True)
class PPOParts:
    """The static parts of a PPO run (config, environment, network, sizes)."""

    config: PPOConfig
    env: Environment
    net: Network
    num_updates: int
    checked: bool = False

    @property
    def recurrent(self) -> bool:
        return is_recurrent(self.net)

    @property
    def strategy(self) -> Strategy:  # chosen once, from the network
        return WHOLE_SEQUENCES if self.recurrent else SHUFFLED_CELLS

    @property
    def batch(self) -> int:
        return self.config.num_envs * self.config.num_steps

    @property
    def steps_per_update(self) -> int:
        return self.config.epochs * self.config.minibatches

    @property
    def policy(self) -> Any:
        net: Any = self.net
        if not self.config.normalize_observations:
            return net
        return NormalizedRecurrent(net) if self.recurrent else NormalizedPolicy(net)

    def policy_params(self, params, stats):
        return (params, stats) if self.config.normalize_observations else params

    def normalize(self, stats, obs):
        return obs_normalize(stats, obs) if self.config.normalize_observations else obs

    def observed(self, state, traj) -> tuple[jax.Array, jax.Array]:
        """A rollout's ``(observation, next_observation)`` as the network reads them
        (normalised with the statistics it collected with), after checked mode's checks of
        its observations and actions."""
        if self.checked:
            guards.check_observations(traj.observation, state.update + 1)
            guards.check_actions(traj.action, self.env.action_space, state.update + 1)
        return (self.normalize(state.obs_stats, traj.observation),
                self.normalize(state.obs_stats, traj.next_observation))

    def schedule(self, hp, count):
        if self.config.anneal_lr:  # linear from lr to 0 over all gradient steps of the run
            return optax.linear_schedule(hp.lr, 0.0, self.num_updates * self.steps_per_update
                                         )(count)
        return optax.constant_schedule(hp.lr)(count)

    def optimiser(self, hp):
        return optax.chain(clip_per_network(hp.max_grad_norm),
                           optax.adam(lambda count: self.schedule(hp, count), eps=1e-5))


def clip_per_network(max_norm) -> optax.GradientTransformation:
    """``optax.clip_by_global_norm(max_norm)`` applied to the actor's gradient (its layers and
    ``log_std``), the critic's and a recurrent network's shared embedding and memory apart, each
    scaled to norm ``max_norm`` when above it. Clipped jointly, the critic's large early
    gradients shrink every actor step (1,024 CartPole environments: greedy 125 -> 228 from this
    alone; benchmarks/NOTES.md, "Wide batches")."""
    def part(field: str) -> str:
        return {"actor": "actor", "log_std": "actor", "critic": "critic"}.get(field, "shared")

    def update(updates, state, params=None):
        del params
        grads: Any = updates
        parts: dict[str, list] = {}
        for field, value in grads._asdict().items():
            parts.setdefault(part(field), []).extend(jax.tree.leaves(value))
        norms = {name: jnp.sqrt(sum(jnp.sum(jnp.square(g)) for g in leaves))
                 for name, leaves in parts.items()}
        scale = {name: jnp.where(norm < max_norm, 1.0, max_norm / norm)
                 for name, norm in norms.items()}
        return type(grads)(**{field: jax.tree.map(lambda g, f=field: g * scale[part(f)], value)
                              for field, value in grads._asdict().items()}), state

    return optax.GradientTransformation(lambda params: optax.EmptyState(), update)


class Rollout(NamedTuple):
    """One update's batch: the environments and memories (``None`` for feed-forward) to go on
    from, the trajectory, the critic's values and targets, and the data the epochs train on."""

    env_state: Any
    carry: Any
    traj: Any
    values: jax.Array
    targets: jax.Array
    data: Any
    """:class:`Batch` (feed-forward) or :class:`Sequences` (recurrent)."""


@dataclasses.dataclass(frozen=True)
class Strategy:
    """What differs between a feed-forward and a recurrent actor-critic, as three functions."""

    rollout: Callable[..., Rollout]
    """``(setup, state, key, hp) -> Rollout``: ``T`` steps of ``B`` environments, and GAE."""
    minibatches: Callable
    """``(setup, data, key) -> data`` with a leading axis of ``minibatches``."""
    loss: Callable
    """``(setup, params, minibatch, hp) -> (loss, aux)``."""


class Batch(NamedTuple):
    """The frozen cells of one rollout, flattened to ``(T * B, ...)``."""

    observation: jax.Array
    action: jax.Array
    log_prob: jax.Array
    advantage: jax.Array
    target: jax.Array
    value: jax.Array


class Sequences(NamedTuple):
    """The frozen rollout of a recurrent update, time-major ``(T, B, ...)``, with each
    environment's carry at the rollout's start ``(B, ...)``."""

    carry: Any
    observation: jax.Array
    start: jax.Array
    """``(T, B)`` bool: reset the carry before this cell (:func:`episode_starts`)."""
    action: jax.Array
    log_prob: jax.Array
    advantage: jax.Array
    target: jax.Array
    value: jax.Array


# --- init, rollout and GAE ----------------------------------------------------------------------

def init(setup: PPOParts, key: jax.Array, hp) -> PPOState:
    """Fresh parameters, optimiser and observation statistics, and B started environments."""
    key, init_key, env_key = jax.random.split(key, 3)
    params: Any = setup.net.init(init_key)
    B = setup.config.num_envs
    return PPOState(
        params=params, opt_state=setup.optimiser(hp).init(params),
        obs_stats=obs_norm_init(setup.net.observation_size),
        env_state=reset_batch(setup.env, env_key, B),
        episode_return=jnp.zeros(B, jnp.float32), episode_length=jnp.zeros(B, jnp.int32),
        key=key, update=jnp.zeros((), jnp.int32),
        carry=initial_carries(setup.net, params, B) if setup.recurrent else None,
    )


CRITIC_CHUNK = 1024
"""About this many cells per call of the critic over a whole rollout (:func:`critic_values`)."""


def critic_values(setup: PPOParts, params, obs: jax.Array) -> jax.Array:
    """The critic's values ``(T, B)`` of ``(T, B, ...)`` observations, ``max(1,
    CRITIC_CHUNK // B)`` steps at a time (``lax.map``; all ``B`` environments in every call, so
    a split of the environments over devices stays): the CNN's patches of 8,192 observations at
    once would not stay in the CPU's caches (benchmarks/NOTES.md)."""
    steps = max(1, min(len(obs), CRITIC_CHUNK // obs.shape[1]))
    return jax.lax.map(lambda row: jax.vmap(setup.net.value, (None, 0))(params, row), obs,
                       batch_size=steps)


def rollout_cells(setup: PPOParts, state: PPOState, key: jax.Array, hp) -> Rollout:
    """Collect ``T`` steps of the ``B`` environments and compute GAE; the data is the flat
    ``(T * B, ...)`` :class:`Batch`."""
    env_state, traj = collect_autoreset(
        setup.env, setup.policy, setup.policy_params(state.params, state.obs_stats),
        state.env_state, key, setup.config.num_steps)
    obs, next_obs = setup.observed(state, traj)
    values, next_values = (critic_values(setup, state.params, o) for o in (obs, next_obs))
    advantages, targets = gae(traj.reward * hp.reward_scale, values, next_values,
                              traj.terminated, traj.truncated, hp.gamma, hp.gae_lambda)
    flat = jax.tree_util.tree_map(
        lambda x: x.reshape((setup.batch,) + x.shape[2:]),
        Batch(obs, traj.action, traj.log_prob, advantages, targets, values))
    return Rollout(env_state, None, traj, values, targets, flat)


def rollout_sequences(setup: PPOParts, state: PPOState, key: jax.Array, hp) -> Rollout:
    """Collect ``T`` steps of the ``B`` environments with their memories and compute GAE; the
    data is the time-major :class:`Sequences` with each environment's starting carry."""
    net = cast(RecurrentActorCritic, setup.net)
    env_state, carry, traj = collect_autoreset_recurrent(
        setup.env, setup.policy, setup.policy_params(state.params, state.obs_stats),
        state.env_state, state.carry, key, setup.config.num_steps)
    obs, next_obs = setup.observed(state, traj)
    starts = episode_starts(traj)
    replay = unroll(net, state.params, state.carry, obs, starts)
    batched = jax.vmap(jax.vmap(net.value, (None, 0)), (None, 0))
    values = batched(state.params, replay.features)
    # the true next observation read by the memory of the episode it ends (or continues)
    step = jax.vmap(jax.vmap(net.step, (None, 0, 0)), (None, 0, 0))
    _, next_features = step(state.params, replay.carry, next_obs)
    next_values = batched(state.params, next_features)
    advantages, targets = gae(traj.reward * hp.reward_scale, values, next_values,
                              traj.terminated, traj.truncated, hp.gamma, hp.gae_lambda)
    data = Sequences(state.carry, obs, starts, traj.action, traj.log_prob, advantages, targets,
                     values)
    return Rollout(env_state, carry, traj, values, targets, data)


# --- minibatches and loss ------------------------------------------------------------------------

def shuffled_cells(setup: PPOParts, flat: Batch, key: jax.Array) -> Batch:
    """The ``T * B`` cells in a random order, split into ``minibatches`` rows: fields
    ``(minibatches, T * B / minibatches, ...)``."""
    perm = jax.random.permutation(key, setup.batch)
    rows = (setup.config.minibatches, setup.batch // setup.config.minibatches)
    shuffled = jax.tree_util.tree_map(lambda x: x[perm].reshape(rows + x.shape[1:]), flat)
    return constrain_envs(shuffled, axis=1)  # minibatch rows on "envs"


def sequence_minibatches(setup: PPOParts, data: Sequences, key: jax.Array) -> Sequences:
    """The environments in a random order, split into ``minibatches`` groups: fields
    ``(minibatches, T, B / minibatches, ...)``, carries ``(minibatches, B / minibatches, ...)``."""
    B, M = setup.config.num_envs, setup.config.minibatches
    perm = jax.random.permutation(key, B)

    def split(x, axis):
        x = jnp.take(x, perm, axis=axis)
        x = x.reshape(x.shape[:axis] + (M, B // M) + x.shape[axis + 1:])
        return jnp.moveaxis(x, axis, 0)

    carry = constrain_envs(jax.tree_util.tree_map(lambda x: split(x, 0), data.carry), axis=1)
    rest = constrain_envs(jax.tree_util.tree_map(lambda x: split(x, 1), data[1:]), axis=2)
    return Sequences(carry, *rest)


def cells_loss(setup: PPOParts, params, data: Batch, hp):
    """:func:`rollax.losses.actor_critic_loss` of the network on a flat minibatch."""
    net, config = setup.net, setup.config
    dist = jax.vmap(net.distribution, (None, 0))(params, data.observation)
    value = jax.vmap(net.value, (None, 0))(params, data.observation)
    return actor_critic_loss(
        dist.log_prob(data.action), data.log_prob, data.advantage, value, data.value,
        data.target, dist.entropy(), clip_eps=hp.clip_eps, vf_coef=hp.vf_coef,
        ent_coef=hp.ent_coef, clip_value=config.clip_value,
        normalize_advantages=config.normalize_advantages)


def sequences_loss(setup: PPOParts, params, data: Sequences, hp):
    """:func:`rollax.losses.actor_critic_loss` of one minibatch of whole sequences, replayed
    from their stored carries with their resets."""
    net, config = cast(RecurrentActorCritic, setup.net), setup.config
    replay = unroll(net, params, data.carry, data.observation, data.start, data.action)
    value = jax.vmap(jax.vmap(net.value, (None, 0)), (None, 0))(params, replay.features)
    flat = jax.tree_util.tree_map(lambda x: x.reshape(-1), (
        replay.log_prob, data.log_prob, data.advantage, value, data.value, data.target,
        replay.entropy))
    return actor_critic_loss(
        *flat, clip_eps=hp.clip_eps, vf_coef=hp.vf_coef, ent_coef=hp.ent_coef,
        clip_value=config.clip_value, normalize_advantages=config.normalize_advantages)

SHUFFLED_CELLS = Strategy(rollout_cells, shuffled_cells, cells_loss)
"""Feed-forward networks: every cell of the batch is independent."""
WHOLE_SEQUENCES = Strategy(rollout_sequences, sequence_minibatches, sequences_loss)
"""Recurrent networks: minibatches split environments, never time."""


# --- epochs and the update -----------------------------------------------------------------------

def sgd_epochs(setup: PPOParts, state: PPOState, data, key: jax.Array, hp):
    """``epochs`` passes of minibatch steps over ``data`` (the cells shuffled for a
    feedforward network, whole sequences split by environment for a recurrent one):
    ``((params, opt_state), aux)`` with aux ``(epochs, minibatches)`` per loss output."""
    tx, config, update = setup.optimiser(hp), setup.config, state.update + 1
    split, loss_fn = setup.strategy.minibatches, setup.strategy.loss

    def sgd_step(carry: tuple[Any, optax.OptState], data):
        params, opt_state = carry
        (value, aux), grads = jax.value_and_grad(
            lambda p: loss_fn(setup, p, data, hp), has_aux=True)(params)
        updates, opt_state = tx.update(grads, opt_state, params)
        params = optax.apply_updates(params, updates)
        if setup.checked:
            guards.check_finite("loss", value, update)
            guards.check_finite("gradient", grads, update)
            guards.check_finite("parameters", params, update)
        return (params, opt_state), aux

    def epoch(carry, key):
        return jax.lax.scan(sgd_step, carry, split(setup, data, key))

    return jax.lax.scan(epoch, (state.params, state.opt_state),
                        jax.random.split(key, config.epochs))


def episode_stats(state: PPOState, traj):
    """Running returns and lengths of each environment's episode, and the mean return, length
    and count of the episodes that ended in ``traj``."""

    def step(carry: tuple[jax.Array, jax.Array], x: tuple[jax.Array, jax.Array]):
        ret, length = carry
        reward, done = x
        ret, length = ret + reward, length + 1
        out = (jnp.where(done, ret, 0.0), jnp.where(done, length, 0), done)
        return (jnp.where(done, 0.0, ret), jnp.where(done, 0, length)), out

    done = traj.terminated | traj.truncated
    (ret, length), (ended_ret, ended_len, ended) = jax.lax.scan(
        step, (state.episode_return, state.episode_length), (traj.reward, done))
    count = jnp.sum(ended)
    safe = jnp.maximum(count, 1)
    mean_ret = jnp.where(count > 0, jnp.sum(ended_ret) / safe, jnp.nan)
    mean_len = jnp.where(count > 0, jnp.sum(ended_len) / safe, jnp.nan)
    return ret, length, mean_ret, mean_len, count


def explained_variance(values, targets):
    """``1 - Var(targets - values) / Var(targets)`` (NaN when the targets do not vary)."""
    var = jnp.var(targets)
    return jnp.where(var > 0, 1.0 - jnp.var(targets - values) / var, jnp.nan)


def update(setup: PPOParts, state: PPOState, hp):
    """One PPO update: ``(next state, PPOMetrics)``."""
    key, rollout_key, shuffle_key = jax.random.split(state.key, 3)
    batch = setup.strategy.rollout(setup, state, rollout_key, hp)
    traj, values, targets = batch.traj, batch.values, batch.targets
    (params, opt_state), aux = sgd_epochs(setup, state, batch.data, shuffle_key, hp)
    stats = state.obs_stats
    if setup.config.normalize_observations:
        stats = obs_norm_update(stats, traj.observation)
    ep_ret, ep_len, mean_ret, mean_len, count = episode_stats(state, traj)
    metrics = PPOMetrics(
        policy_loss=aux["policy_loss"].mean(), value_loss=aux["value_loss"].mean(),
        entropy=aux["entropy"].mean(), approx_kl=aux["approx_kl"].mean(),
        old_approx_kl=aux["old_approx_kl"].mean(), clip_fraction=aux["clip_fraction"].mean(),
        ratio_min=aux["ratio_min"].min(), ratio_max=aux["ratio_max"].max(),
        explained_variance=explained_variance(values, targets),
        learning_rate=jnp.asarray(setup.schedule(hp, state.update * setup.steps_per_update),
                                  jnp.float32),
        episode_return=mean_ret, episode_length=mean_len, episodes=count,
        env_steps=(state.update + 1) * setup.batch,
    )
    new_state = PPOState(params, opt_state, stats, batch.env_state, ep_ret, ep_len, key,
                         state.update + 1, batch.carry)
    return new_state, metrics

# --- the algorithm --------------------------------------------------------------------------------

def _evaluate(setup: PPOParts, state: PPOState, hp) -> dict:
    eval_key, _ = jax.random.split(state.key)
    params = setup.policy_params(state.params, state.obs_stats)
    return {"eval_return": evaluate_policy(setup.env, setup.policy, params, eval_key,
                                           setup.config.eval_episodes,
                                           num_steps=setup.config.eval_steps)}


def make_algorithm(config: PPOConfig, checked: bool = False,
                   env: Environment | None = None) -> Algorithm:
    """Validate ``config`` (before compiling) and return PPO's parts (init, update, evaluate).
    ``checked`` stages the runtime checks of :mod:`rollax.guards` into each update."""
    config, env = _resolved(config, env)
    setup = PPOParts(config, env, make_network(env, config), num_updates(config), checked)
    return Algorithm(
        config=config, hyperparams=hyperparams_of(config), num_updates=setup.num_updates,
        env_steps_per_update=setup.batch, init=functools.partial(init, setup),
        update=functools.partial(update, setup),
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


SPEC = AlgorithmSpec(
    name="ppo", task="neural", config_type=PPOConfig, methods=("ppo",), accepts=accepts,
    build=make_algorithm, requirement="vector (Box) observations", presets=PRESETS,
    score="eval_return", progress="episode_return",
    shown=("episode_return", "approx_kl", "clip_fraction", "entropy", "explained_variance"),
    headline=("num_envs", "num_steps", "epochs", "minibatches", "lr"), budget="total_steps",
    stored_defaults={"network": "mlp"},  # runs written before --network trained an MLP
    from_zoo=from_zoo,
)
"""PPO's facts: the default for every non-finite task with vector observations."""
