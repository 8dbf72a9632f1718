"""The rollout PPO and A2C learn from: ``T`` steps of ``B`` auto-reset environments by an
actor-critic, the critic's values and GAE, and how a batch of it is split and scored.

:class:`RolloutParts` is built from explicit fields (environment, network, ``num_envs``,
``num_steps``, observation and reward normalisation, checked mode); each algorithm builds it
from its own config and adds its loss and optimiser. One update's rollout::

    env_state, traj = collect_autoreset(env, policy, params, env_state, key, T)
    V = critic(obs), V' = critic(true next obs)
    r' = reward_scale r, or (normalize_rewards, :meth:`RolloutParts.rewards`)
        R = running discounted returns (carried across updates), reward statistics <- merged
        with the live R of this rollout, r' = reward_scale clip(r / sqrt(var + 1e-8), +-clip)
    A, targets = gae(r', V, V', terminated, truncated, gamma, lambda)
    ... the algorithm's gradient steps on the data (its minibatches scored by the network) ...
    observation statistics <- merged with this batch (when normalising)

Feed-forward (MLP, CNN) and recurrent (GRU, LSTM) networks differ in one :class:`Strategy`:
feed-forward, the ``T * B`` cells are a flat :class:`Batch`, shuffled into minibatches;
recurrent, each environment's memory (``state.carry``) is collected with it and reset where
episodes start, the data is time-major :class:`Sequences`, and minibatches split the
environments, never time, replaying whole sequences from their collected carries.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, NamedTuple, cast

import jax
import jax.numpy as jnp
import optax

from rollax import guards
from rollax.algos.base import Algorithm, encodable, neural_algorithm
from rollax.collect import collect_autoreset, collect_autoreset_recurrent, reset_batch
from rollax.distributions import masked
from rollax.envs.base import Environment
from rollax.envs.registry import make_configured
from rollax.nets.build import Network, observation_stats_template
from rollax.nets.heads import read_cells
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
from rollax.returns import (
    gae,
    reward_norm_init,
    reward_norm_update,
    reward_normalize,
    running_returns,
)
from rollax.sharding import constrain_envs
from rollax.validate import check_count

__all__ = ["CELLS", "CRITIC_CHUNK", "ENV_BATCH_FIELDS", "SEQUENCES", "ActorCriticState", "Batch",
           "Collected", "Episodes", "RolloutParts", "Scored", "Sequences", "Strategy",
           "check_sizes", "critic_values", "environment", "episode_stats",
           "sequence_minibatches", "shuffled_cells"]


# --- settings ---------------------------------------------------------------------------------

def check_sizes(total_steps: int, num_envs: int, num_steps: int) -> None:
    """``total_steps``, ``num_envs`` and ``num_steps`` are counts, and ``total_steps`` holds
    one batch of ``num_envs * num_steps`` at least (``ValueError`` naming the setting)."""
    for name, value in (("total_steps", total_steps), ("num_envs", num_envs),
                        ("num_steps", num_steps)):
        check_count(name, value)
    batch = num_envs * num_steps
    if total_steps < batch:
        raise ValueError(f"total_steps must be at least num_envs * num_steps = {batch}, "
                         f"got {total_steps}")


def environment(config, env: Environment | None, algorithm: str) -> Environment:
    """The environment ``config`` names (its ``env``, ``horizon`` and ``env_options``; ``env``
    when given: the one already built from them), refused unless the networks read its
    observations (:func:`rollax.algos.base.encodable`; ``algorithm`` names who needs them in
    the message)."""
    name = config.env
    if env is None:
        env = make_configured(name, config.horizon, config.env_options)
    if not encodable(env):
        raise ValueError(f"env {name!r} has no observations the networks read (Box, Discrete, "
                         f"or a Dict / Tuple of them): {algorithm} needs them")
    return env


# --- state and data ---------------------------------------------------------------------------

class ActorCriticState(NamedTuple):
    """Everything a run on rollouts carries from one update to the next."""

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
    reward_stats: ObsNormState | None = None
    """Running count, mean and variance (scalars) of the discounted returns of
    ``normalize_rewards`` (else None: no leaves, the state of a run without it unchanged)."""
    discounted_return: Any = None
    """(B,) each environment's running discounted return ``R`` of ``normalize_rewards``
    (:func:`rollax.returns.running_returns`; 0 after an episode end), else None."""


ENV_BATCH_FIELDS = ("env_state", "episode_return", "episode_length", "carry",
                    "discounted_return")
"""The fields of :class:`ActorCriticState` batched over the ``B`` environments."""


class Collected(NamedTuple):
    """One update's rollout: the environments and memories (``None`` for feed-forward) to go on
    from, the trajectory, the critic's values and targets, and the data the steps train on."""

    env_state: Any
    carry: Any
    traj: Any
    values: jax.Array
    targets: jax.Array
    data: Any
    """:class:`Batch` (feed-forward) or :class:`Sequences` (recurrent)."""
    reward_stats: ObsNormState | None = None
    """The reward statistics merged with this rollout (``normalize_rewards``), else None."""
    discounted_return: Any = None
    """(B,) the running discounted returns after this rollout (``normalize_rewards``)."""


class Batch(NamedTuple):
    """The frozen cells of one rollout, flattened to ``(T * B, ...)``."""

    observation: jax.Array
    action: jax.Array
    log_prob: jax.Array
    advantage: jax.Array
    target: jax.Array
    value: jax.Array
    action_mask: Any = None
    """The action masks the actions were drawn under (None without masks)."""


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
    action_mask: Any = None
    """The action masks the actions were drawn under (None without masks)."""


class Scored(NamedTuple):
    """A (mini)batch's cells flattened to ``(N,)``: the network's log-probabilities, values and
    entropies under the current parameters beside the frozen ones of the rollout (the
    arguments of :func:`rollax.losses.actor_critic_loss`, in its order)."""

    log_prob: jax.Array
    behaviour_log_prob: jax.Array
    advantage: jax.Array
    value: jax.Array
    behaviour_value: jax.Array
    target: jax.Array
    entropy: jax.Array


class Episodes(NamedTuple):
    """The episodes of a rollout: each environment's running return and length ``(B,)``
    after it, and the mean return, mean length and count of those that ended in it."""

    running_return: jax.Array
    running_length: jax.Array
    mean_return: jax.Array
    """NaN when none ended."""
    mean_length: jax.Array
    count: jax.Array


# --- the parts ----------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class RolloutParts:
    """The static parts of the rollout: environment, network and sizes."""

    env: Environment
    net: Network
    num_envs: int
    """Parallel environments B (auto-reset)."""
    num_steps: int
    """Steps T collected per environment per update."""
    normalize_observations: bool = False
    checked: bool = False
    """Stage checked mode's checks of the observations and actions (:mod:`rollax.guards`)."""
    normalize_rewards: bool = False
    """Divide the rewards by the running standard deviation of the discounted return
    (:meth:`rewards`)."""
    reward_clip: float = 10.0
    """Bound of the normalised rewards (``normalize_rewards``)."""

    @property
    def recurrent(self) -> bool:
        return is_recurrent(self.net)

    @property
    def strategy(self) -> Strategy:  # chosen once, from the network
        return SEQUENCES if self.recurrent else CELLS

    @property
    def cells(self) -> int:
        """Environment-step cells per update, ``T x B``."""
        return self.num_envs * self.num_steps

    @property
    def policy(self) -> Any:
        """The network acting on :meth:`policy_params`, ``(params, observation statistics)``,
        normalising the observations with the statistics when asked to."""
        net: Any = self.net
        wrap = NormalizedRecurrent if self.recurrent else NormalizedPolicy
        return wrap(net, normalize=self.normalize_observations)

    def policy_params(self, state: ActorCriticState):
        """``state``'s parameters as :attr:`policy` takes them: what is saved and hashed."""
        return (state.params, state.obs_stats)

    def normalize(self, stats, obs):
        return obs_normalize(stats, obs) if self.normalize_observations else obs

    def init(self, key: jax.Array, optimiser: optax.GradientTransformation) -> ActorCriticState:
        """Fresh parameters, ``optimiser``'s state and observation statistics, and ``B``
        started environments."""
        key, init_key, env_key = jax.random.split(key, 3)
        params: Any = self.net.init(init_key)
        B = self.num_envs
        rewards = self.normalize_rewards
        return ActorCriticState(
            params=params, opt_state=optimiser.init(params),
            obs_stats=obs_norm_init(observation_stats_template(self.net)),
            env_state=reset_batch(self.env, env_key, B),
            episode_return=jnp.zeros(B, jnp.float32), episode_length=jnp.zeros(B, jnp.int32),
            key=key, update=jnp.zeros((), jnp.int32),
            carry=initial_carries(self.net, params, B) if self.recurrent else None,
            reward_stats=reward_norm_init() if rewards else None,
            discounted_return=jnp.zeros(B, jnp.float32) if rewards else None,
        )

    def collect(self, state: ActorCriticState, key: jax.Array, hp) -> Collected:
        """``T`` steps of the ``B`` environments and GAE (``hp``: ``reward_scale``, ``gamma``,
        ``gae_lambda``)."""
        return self.strategy.collect(self, state, key, hp)

    def rewards(self, state: ActorCriticState, traj, hp
                ) -> tuple[jax.Array, ObsNormState | None, jax.Array | None]:
        """The rewards GAE reads, ``(T, B)``, with the reward statistics and the running
        discounted returns to carry (both None without ``normalize_rewards``).

        Without ``normalize_rewards``: ``reward_scale * r``. With it, each environment's running
        discounted return ``R_t = gamma * R_{t-1} + r_t`` (live cells only; 0 after an episode
        ends, terminated or truncated; :func:`rollax.returns.running_returns`) goes on from
        ``state.discounted_return``; the live ``R`` of this rollout are merged into
        ``state.reward_stats`` (:func:`rollax.returns.reward_norm_update`), and the rewards
        are divided by the standard deviation of the statistics so updated (this rollout's
        included), not centred: ``reward_scale * clip(r / sqrt(var + 1e-8), -reward_clip,
        reward_clip)``."""
        if not self.normalize_rewards:
            return traj.reward * hp.reward_scale, None, None
        returns, carried = running_returns(state.discounted_return, traj.reward, traj.active,
                                           traj.terminated, traj.truncated, hp.gamma)
        stats = reward_norm_update(cast(ObsNormState, state.reward_stats), returns, traj.active)
        scaled = reward_normalize(stats, traj.reward, self.reward_clip) * hp.reward_scale
        return scaled, stats, carried

    def observed(self, state: ActorCriticState, traj) -> tuple[jax.Array, jax.Array]:
        """A rollout's ``(observation, next_observation)`` as the network reads them
        (normalised with the statistics it collected with), after checked mode's checks of
        its observations and actions."""
        if self.checked:
            guards.check_collected(traj, self.env.action_space, state.update + 1)
        return (self.normalize(state.obs_stats, traj.observation),
                self.normalize(state.obs_stats, traj.next_observation))

    def minibatches(self, data, key: jax.Array, count: int):
        """``data`` in a random order, split into ``count`` minibatches (a leading axis)."""
        return self.strategy.minibatches(data, key, count)

    def score(self, params, data) -> Scored:
        """The cells of ``data`` (or of one minibatch of it) under ``params``."""
        return self.strategy.score(self.net, params, data)

    def advance(self, state: ActorCriticState, collected: Collected, params, opt_state,
                key: jax.Array) -> tuple[ActorCriticState, Episodes]:
        """The state after an update that stepped to ``params`` and ``opt_state`` on
        ``collected`` (the observation statistics merged with its observations when
        normalising), the reward statistics and running discounted returns of the rollout
        (``normalize_rewards``), and the episodes of the rollout."""
        stats = state.obs_stats
        if self.normalize_observations:
            stats = obs_norm_update(stats, collected.traj.observation)
        episodes = episode_stats(state, collected.traj)
        return ActorCriticState(
            params=params, opt_state=opt_state, obs_stats=stats, env_state=collected.env_state,
            episode_return=episodes.running_return, episode_length=episodes.running_length,
            key=key, update=state.update + 1, carry=collected.carry,
            reward_stats=collected.reward_stats,
            discounted_return=collected.discounted_return), episodes

    def algorithm(self, config, *, num_updates: int, init: Callable, update: Callable,
                  result: Callable) -> Algorithm:
        """The :class:`Algorithm` of a learner on these rollouts
        (:func:`rollax.algos.base.neural_algorithm`): ``B`` environments batched, the
        parameters saved with the observation statistics."""
        return neural_algorithm(
            config, self.env, self.policy, num_updates=num_updates,
            env_steps_per_update=self.cells, init=init, update=update, result=result,
            params=self.policy_params, env_batch_fields=ENV_BATCH_FIELDS)


# --- feed-forward and recurrent ---------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Strategy:
    """What differs between a feed-forward and a recurrent actor-critic, as three functions."""

    collect: Callable[..., Collected]
    """``(parts, state, key, hp) -> Collected``: ``T`` steps of ``B`` environments, and GAE."""
    minibatches: Callable
    """``(data, key, count) -> data`` with a leading axis of ``count`` minibatches."""
    score: Callable[..., Scored]
    """``(net, params, data) -> Scored``."""


CRITIC_CHUNK = 1024
"""About this many cells per call of the critic over a whole rollout (:func:`critic_values`)."""


def critic_values(net: Network, params, obs: jax.Array) -> jax.Array:
    """The critic's values ``(T, B)`` of ``(T, B, ...)`` observations, ``max(1, chunk // B)``
    steps at a time (``lax.map``; all ``B`` environments in every call, so a split of the
    environments over devices stays), ``chunk`` the network's ``cells_per_call`` (the Nature
    CNN's) or :data:`CRITIC_CHUNK`: the CNNs' patches of thousands of observations at once
    would not stay in the CPU's caches (benchmarks/NOTES.md)."""
    T, B = jax.tree.leaves(obs)[0].shape[:2]
    steps = max(1, min(T, getattr(net, "cells_per_call", CRITIC_CHUNK) // B))
    return jax.lax.map(lambda row: jax.vmap(net.value, (None, 0))(params, row), obs,
                       batch_size=steps)


def collect_cells(parts: RolloutParts, state: ActorCriticState, key: jax.Array,
                  hp) -> Collected:
    """Collect ``T`` steps of the ``B`` environments and compute GAE; the data is the flat
    ``(T * B, ...)`` :class:`Batch`."""
    env_state, traj = collect_autoreset(parts.env, parts.policy, parts.policy_params(state),
                                        state.env_state, key, parts.num_steps)
    obs, next_obs = parts.observed(state, traj)
    values, next_values = (critic_values(parts.net, state.params, o) for o in (obs, next_obs))
    rewards, reward_stats, discounted = parts.rewards(state, traj, hp)
    advantages, targets = gae(rewards, values, next_values,
                              traj.terminated, traj.truncated, hp.gamma, hp.gae_lambda)
    flat = jax.tree_util.tree_map(
        lambda x: x.reshape((parts.cells,) + x.shape[2:]),
        Batch(obs, traj.action, traj.log_prob, advantages, targets, values, traj.action_mask))
    return Collected(env_state, None, traj, values, targets, flat, reward_stats, discounted)


def collect_sequences(parts: RolloutParts, state: ActorCriticState, key: jax.Array,
                      hp) -> Collected:
    """Collect ``T`` steps of the ``B`` environments with their memories and compute GAE; the
    data is the time-major :class:`Sequences` with each environment's starting carry."""
    net = cast(RecurrentActorCritic, parts.net)
    env_state, carry, traj = collect_autoreset_recurrent(
        parts.env, parts.policy, parts.policy_params(state), state.env_state, state.carry, key,
        parts.num_steps)
    obs, next_obs = parts.observed(state, traj)
    starts = episode_starts(traj)
    replay = unroll(net, state.params, state.carry, obs, starts)
    batched = jax.vmap(jax.vmap(net.value, (None, 0)), (None, 0))
    values = batched(state.params, replay.features)
    # the true next observation read by the memory of the episode it ends (or continues)
    step = jax.vmap(jax.vmap(net.step, (None, 0, 0)), (None, 0, 0))
    _, next_features = step(state.params, replay.carry, next_obs)
    next_values = batched(state.params, next_features)
    rewards, reward_stats, discounted = parts.rewards(state, traj, hp)
    advantages, targets = gae(rewards, values, next_values,
                              traj.terminated, traj.truncated, hp.gamma, hp.gae_lambda)
    data = Sequences(state.carry, obs, starts, traj.action, traj.log_prob, advantages, targets,
                     values, traj.action_mask)
    return Collected(env_state, carry, traj, values, targets, data, reward_stats, discounted)


def shuffled_cells(flat: Batch, key: jax.Array, count: int) -> Batch:
    """The ``N = T * B`` cells in a random order, split into ``count`` rows: fields
    ``(count, N / count, ...)``."""
    n = flat.log_prob.shape[0]
    perm = jax.random.permutation(key, n)
    rows = (count, n // count)
    shuffled = jax.tree_util.tree_map(lambda x: x[perm].reshape(rows + x.shape[1:]), flat)
    return constrain_envs(shuffled, axis=1)  # minibatch rows on "envs"


def sequence_minibatches(data: Sequences, key: jax.Array, count: int) -> Sequences:
    """The environments in a random order, split into ``count`` groups: fields ``(count, T,
    B / count, ...)``, carries ``(count, B / count, ...)``."""
    B, M = data.start.shape[1], count
    perm = jax.random.permutation(key, B)

    def split(x, axis):
        x = jnp.take(x, perm, axis=axis)
        x = x.reshape(x.shape[:axis] + (M, B // M) + x.shape[axis + 1:])
        return jnp.moveaxis(x, axis, 0)

    carry = constrain_envs(jax.tree_util.tree_map(lambda x: split(x, 0), data.carry), axis=1)
    rest = constrain_envs(jax.tree_util.tree_map(lambda x: split(x, 1), data[1:]), axis=2)
    return Sequences(carry, *rest)


def score_cells(net: Network, params, data: Batch) -> Scored:
    """Each cell of a flat batch read by the network on its own (under its stored action
    mask, if any); a network with ``cells_per_call`` reads the batch that many cells at a
    time (``lax.map``), gradient included."""
    dist, value = read_cells(net, params, data.observation)
    dist = masked(dist, data.action_mask)
    return Scored(dist.log_prob(data.action), data.log_prob, data.advantage, value, data.value,
                  data.target, dist.entropy())


def score_sequences(net: Network, params, data: Sequences) -> Scored:
    """Whole sequences replayed from their stored carries with their resets, then flattened."""
    net = cast(RecurrentActorCritic, net)
    replay = unroll(net, params, data.carry, data.observation, data.start, data.action,
                    data.action_mask)
    value = jax.vmap(jax.vmap(net.value, (None, 0)), (None, 0))(params, replay.features)
    return Scored(*jax.tree_util.tree_map(lambda x: x.reshape(-1), (
        replay.log_prob, data.log_prob, data.advantage, value, data.value, data.target,
        replay.entropy)))


CELLS = Strategy(collect_cells, shuffled_cells, score_cells)
"""Feed-forward networks: every cell of the batch is independent."""
SEQUENCES = Strategy(collect_sequences, sequence_minibatches, score_sequences)
"""Recurrent networks: minibatches split environments, never time."""


# --- episodes -----------------------------------------------------------------------------------

def episode_stats(state: ActorCriticState, traj) -> Episodes:
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
    return Episodes(ret, length, mean_ret, mean_len, count)
