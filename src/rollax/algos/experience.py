"""The experience PPO and A2C learn from (the module of their data path: collect, advantages,
batch, minibatches): a rollout of ``T`` steps of ``B`` auto-reset environments by an
actor-critic, the critic's values and GAE, and how a batch of it is split and scored.

:class:`ExperienceParts` is built from explicit fields (environment, network, ``num_envs``,
``num_steps``, observation and reward normalisation, checked mode); each algorithm builds it
from its own config (:func:`rollax.algos.actor_critic.make_experience`) and adds its loss and
optimiser. One update, each line a method of :class:`ExperienceParts`::

    collected = collect(state, key)             # T steps of B environments, V = critic(obs),
                                                # V' = critic(true next obs)
    advantages = advantages(state, collected, hp)
        r' = reward_scale r, or (normalize_rewards, :meth:`ExperienceParts.rewards`)
            R = running discounted returns (carried across updates), reward statistics <-
            merged with the live R of this rollout, r' = reward_scale clip(r / sqrt(var +
            1e-8), +-clip)
        A, targets = gae(r', V, V', terminated, truncated, gamma, lambda)
        (a game of two players, by self-play: each player's chain over its own turns,
        :meth:`ExperienceParts.game_advantages`; a team of agents: each agent's chain over its
        own rewards and values, :meth:`ExperienceParts.team_advantages`)
    data = batch(state, collected, advantages)  # frozen through the algorithm's steps
    ... the algorithm's gradient steps on minibatches(data) (each scored by score(params)) ...
    state, episodes = advance(state, collected, advantages, params, opt_state, key)
        observation statistics <- merged with this batch (when normalising)

Feed-forward (MLP, CNN) and recurrent (GRU, LSTM) networks differ in four of them, each an
``if self.recurrent``: feed-forward, the ``T * B`` cells are a flat :class:`Batch`, shuffled
into minibatches; recurrent, each environment's memory (``state.carry``) is collected with it
and reset where episodes start, the data is time-major :class:`Sequences`, and minibatches split
the environments, never time, replaying whole sequences from their collected carries.

A team of ``N`` agents (:mod:`rollax.envs.agents`) keeps its agent axis in every record: the
observations ``(T, B, N, D)``, actions, log-probabilities, values, advantages and targets
``(T, B, N)``; a cell of the batch is one environment's step, the whole team's, so the
centralised critic reads every agent's observation, and a minibatch keeps each team's agents
together. :func:`score_cells` flattens the agents into the cells' axis (``(M * N,)``) for the
loss, which weighs each agent's ratio and value on its own, unchanged.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import itertools
from collections.abc import Callable
from typing import Any, NamedTuple, cast

import jax
import jax.numpy as jnp
import optax

from rollax import guards
from rollax.algos.base import Algorithm, neural_algorithm
from rollax.collect import (
    League,
    collect_autoreset,
    collect_autoreset_recurrent,
    collect_league,
    draw_matches,
    reset_batch,
)
from rollax.distributions import masked
from rollax.envs.agents import is_team, num_agents
from rollax.envs.base import Environment
from rollax.nets.build import Network, observation_stats_template
from rollax.nets.heads import read_cells
from rollax.nets.rnn import RecurrentActorCritic
from rollax.policies import (
    NormalizedPolicy,
    RunningStats,
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
    player_gae,
    reward_norm_init,
    reward_norm_update,
    reward_normalize,
    running_returns,
    team_gae,
    two_player_next_values,
)
from rollax.sharding import constrain_envs

__all__ = ["AGENT_METRICS", "CRITIC_CHUNK", "ENV_BATCH_FIELDS", "ActorCriticState",
           "Advantages", "Batch", "Collected", "Episodes", "ExperienceParts", "Scored",
           "Sequences", "agent_episode_stats", "collect_cells", "collect_sequences",
           "critic_values", "episode_stats", "score_cells", "score_sequences",
           "sequence_minibatches", "shuffled_cells", "team_metrics_type", "with_agent_metrics"]


# --- state and data ---------------------------------------------------------------------------

class ActorCriticState(NamedTuple):
    """Everything a run on rollouts carries from one update to the next."""

    params: Any
    """The network's parameters (``ActorCriticParams``, or ``RecurrentParams`` for a GRU/LSTM)."""
    opt_state: optax.OptState
    obs_stats: RunningStats
    env_state: Any
    episode_return: jax.Array
    """(B,) return so far of each environment's current episode."""
    episode_length: jax.Array
    key: jax.Array
    updates: jax.Array
    """The number of updates done so far (0 before the first)."""
    carry: Any = None
    """(B, ...) each environment's memory, for a recurrent network (else None)."""
    reward_stats: RunningStats | None = None
    """Running count, mean and variance (scalars) of the discounted returns of
    ``normalize_rewards`` (else None: no leaves, the state of a run without it unchanged)."""
    discounted_return: Any = None
    """(B,) each environment's running discounted return ``R`` of ``normalize_rewards``
    (:func:`rollax.returns.running_returns`; 0 after an episode end), else None."""
    pool: Any = None
    """A league's (``opponents`` pool) ``K`` past snapshots of ``params``, stacked ``(K, ...)``
    (a ring, all the initial parameters at the start); else None."""
    pool_next: Any = None
    """int32 (): the pool's oldest snapshot, the next one replaced (a league; else None)."""
    league: Any = None
    """A league's :class:`rollax.collect.League` of each environment's current episode, the
    learner's seat and the opponent's index ``(B,)`` each; else None."""
    agent_return: Any = None
    """A team's (:mod:`rollax.envs.agents`) return so far of each agent in each environment's
    current episode, ``(B, N)``; else None."""


ENV_BATCH_FIELDS = ("env_state", "episode_return", "episode_length", "carry",
                    "discounted_return", "league", "agent_return")
"""The fields of :class:`ActorCriticState` batched over the ``B`` environments."""


class Collected(NamedTuple):
    """One update's rollout: the environments and memories (``None`` for feed-forward) to go on
    from, the trajectory, its observations as the network reads them and the critic's values,
    each ``(T, B, ...)``."""

    env_state: Any
    carry: Any
    traj: Any
    observation: Any
    """Normalised with the statistics the rollout was collected with (when normalising)."""
    values: jax.Array
    """``V(s_t)`` (a team's: each agent's, ``(T, B, N)``)."""
    next_values: jax.Array
    """``V(s'_t)`` of the true next observation (the final one where an episode ended)."""
    start: Any = None
    """Recurrent: ``(T, B)`` bool, reset the carry before this cell (:func:`episode_starts`);
    else None."""
    league: Any = None
    """A league's matches to go on from (:class:`rollax.collect.League`); else None."""


class Advantages(NamedTuple):
    """GAE on one update's rollout, ``(T, B)`` each, with the reward statistics the rewards
    were normalised by (``normalize_rewards``, else None)."""

    advantage: jax.Array
    target: jax.Array
    """The critic's regression targets, ``advantage + V``."""
    reward_stats: RunningStats | None = None
    """The reward statistics merged with this rollout."""
    discounted_return: Any = None
    """(B,) the running discounted returns after this rollout."""


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
    live: Any = None
    """bool: the cells the loss weighs, a league's learner's moves (None: every cell)."""


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
    live: Any = None
    """bool: the cells the loss weighs (:attr:`Batch.live`; None: every cell)."""


class Episodes(NamedTuple):
    """The episodes of a rollout: each environment's running return and length ``(B,)``
    after it, and the mean return, mean length and count of those that ended in it."""

    running_return: jax.Array
    running_length: jax.Array
    mean_return: jax.Array
    """NaN when none ended."""
    mean_length: jax.Array
    count: jax.Array
    agent_running: Any = None
    """A team's running return of each agent ``(B, N)`` after the rollout; else None."""
    agent_mean: Any = None
    """A team's mean return of each agent ``(N,)`` over the episodes that ended (NaN when none
    did); else None."""


# --- the parts ----------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class ExperienceParts:
    """The static parts of the experience: environment, network and sizes."""

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
    pool_size: int = 0
    """A league's snapshots ``K`` (``opponents`` pool); 0: self-play, no pool."""
    pool_every: int = 1
    """A league's updates between snapshots."""
    eval_env: Environment | None = None
    """The environment evaluations play, where it is not ``env`` (a game whose training
    games open at random, ``opening_moves``); ``None``: ``env``."""

    @property
    def recurrent(self) -> bool:
        return is_recurrent(self.net)

    @property
    def league(self) -> bool:
        """Whether a pool of past snapshots plays the learner's opponents."""
        return self.pool_size > 0

    def pool_params(self, state: ActorCriticState):
        """The pool as :attr:`policy` takes parameters, stacked ``(K, ...)``: each snapshot
        with the current observation statistics."""
        size = self.pool_size
        stats = jax.tree.map(lambda x: jnp.broadcast_to(x, (size, *x.shape)), state.obs_stats)
        return (state.pool, stats)

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
        if self.league:
            key, init_key, env_key, league_key = jax.random.split(key, 4)
        else:
            key, init_key, env_key = jax.random.split(key, 3)
            league_key = None
        params: Any = self.net.init(init_key)
        B = self.num_envs
        rewards = self.normalize_rewards
        state = ActorCriticState(
            params=params, opt_state=optimiser.init(params),
            obs_stats=obs_norm_init(observation_stats_template(self.net)),
            env_state=reset_batch(self.env, env_key, B),
            episode_return=jnp.zeros(B, jnp.float32), episode_length=jnp.zeros(B, jnp.int32),
            key=key, updates=jnp.zeros((), jnp.int32),
            carry=initial_carries(self.net, params, B) if self.recurrent else None,
            reward_stats=reward_norm_init() if rewards else None,
            discounted_return=jnp.zeros(B, jnp.float32) if rewards else None,
            agent_return=(jnp.zeros((B, num_agents(self.env)), jnp.float32)
                          if is_team(self.env) else None),
        )
        if league_key is None:
            return state
        K = self.pool_size
        return state._replace(
            pool=jax.tree.map(lambda x: jnp.repeat(x[None], K, axis=0), params),
            pool_next=jnp.zeros((), jnp.int32), league=draw_matches(league_key, B, K))

    def collect(self, state: ActorCriticState, key: jax.Array) -> Collected:
        """``T`` steps of the ``B`` environments and the critic's values: one cell at a time
        (:func:`collect_cells`), or for a recurrent network each environment's memory with it
        (:func:`collect_sequences`)."""
        if self.recurrent:
            return collect_sequences(self, state, key)
        return collect_cells(self, state, key)

    def advantages(self, state: ActorCriticState, collected: Collected, hp) -> Advantages:
        """GAE of the rewards as :meth:`rewards` gives them, on the collected values (``hp``:
        ``reward_scale``, ``gamma``, ``gae_lambda``)."""
        traj = collected.traj
        if traj.turns is not None:
            return self.game_advantages(collected, hp)
        if traj.agent_rewards is not None:
            return self.team_advantages(collected, hp)
        rewards, reward_stats, discounted = self.rewards(state, traj, hp)
        advantage, target = gae(rewards, collected.values, collected.next_values,
                                traj.terminated, traj.truncated, hp.gamma, hp.gae_lambda)
        return Advantages(advantage, target, reward_stats, discounted)

    def game_advantages(self, collected: Collected, hp) -> Advantages:
        """Self-play in a two-player zero-sum game (``docs/contract.md §8``): the critic's
        values are the player to act's, and each player's advantages follow its own turns
        (:func:`rollax.returns.player_gae` of ``reward_scale`` times every player's rewards),
        the true next state's value seen by the player to act there and negated for the other
        (:func:`rollax.returns.two_player_next_values`). One policy, one loss over all the
        cells, whoever acted in them."""
        traj = collected.traj
        turns = traj.turns
        next_values = two_player_next_values(collected.next_values, turns.next_player)
        advantage, target = player_gae(turns.rewards * hp.reward_scale, collected.values,
                                       next_values, turns.player, traj.terminated,
                                       traj.truncated, hp.gamma, hp.gae_lambda)
        return Advantages(advantage, target)

    def team_advantages(self, collected: Collected, hp) -> Advantages:
        """A team of agents (:mod:`rollax.envs.agents`): each agent's GAE on ``reward_scale``
        times its own rewards and its own values ``(T, B, N)``, the team's episode ends
        broadcast over the agents (:func:`rollax.returns.team_gae`)."""
        traj = collected.traj
        advantage, target = team_gae(traj.agent_rewards * hp.reward_scale, collected.values,
                                     collected.next_values, traj.terminated, traj.truncated,
                                     hp.gamma, hp.gae_lambda)
        return Advantages(advantage, target)

    def rewards(self, state: ActorCriticState, traj, hp
                ) -> tuple[jax.Array, RunningStats | None, jax.Array | None]:
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
        stats = reward_norm_update(cast(RunningStats, state.reward_stats), returns, traj.active)
        scaled = reward_normalize(stats, traj.reward, self.reward_clip) * hp.reward_scale
        return scaled, stats, carried

    def observed(self, state: ActorCriticState, traj) -> tuple[jax.Array, jax.Array]:
        """A rollout's ``(observation, next_observation)`` as the network reads them
        (normalised with the statistics it collected with), after checked mode's checks of
        its observations and actions."""
        if self.checked:
            guards.check_collected(traj, self.env.action_space, state.updates + 1)
        return (self.normalize(state.obs_stats, traj.observation),
                self.normalize(state.obs_stats, traj.next_observation))

    def batch(self, state: ActorCriticState, collected: Collected,
              advantages: Advantages) -> Batch | Sequences:
        """The data the gradient steps read, frozen through them: the ``T * B`` cells as a flat
        :class:`Batch`, or for a recurrent network the time-major :class:`Sequences` with each
        environment's carry at the rollout's start."""
        traj = collected.traj
        live = None if traj.turns is None else traj.turns.learner
        if self.recurrent:
            return Sequences(state.carry, collected.observation, collected.start, traj.action,
                             traj.log_prob, advantages.advantage, advantages.target,
                             collected.values, traj.action_mask)
        cells = Batch(collected.observation, traj.action, traj.log_prob, advantages.advantage,
                      advantages.target, collected.values, traj.action_mask, live)
        return jax.tree_util.tree_map(lambda x: x.reshape((self.cells,) + x.shape[2:]), cells)

    def minibatches(self, data, key: jax.Array, count: int):
        """``data`` in a random order, split into ``count`` minibatches (a leading axis): the
        cells (:func:`shuffled_cells`), or whole sequences by environment
        (:func:`sequence_minibatches`)."""
        if self.recurrent:
            return sequence_minibatches(data, key, count)
        return shuffled_cells(data, key, count)

    def score(self, params, data) -> Scored:
        """The cells of ``data`` (or of one minibatch of it) under ``params``: each read on its
        own (:func:`score_cells`), or whole sequences replayed (:func:`score_sequences`)."""
        if self.recurrent:
            return score_sequences(self.net, params, data)
        return score_cells(self.net, params, data)

    def advance(self, state: ActorCriticState, collected: Collected, advantages: Advantages,
                params, opt_state, key: jax.Array) -> tuple[ActorCriticState, Episodes]:
        """The state after an update that stepped to ``params`` and ``opt_state`` on
        ``collected`` (the observation statistics merged with its observations when
        normalising), the reward statistics and running discounted returns of its
        ``advantages`` (``normalize_rewards``), and the episodes of the rollout."""
        stats = state.obs_stats
        if self.normalize_observations:
            stats = obs_norm_update(stats, collected.traj.observation)
        episodes = episode_stats(state, collected.traj)
        updates = state.updates + 1
        pool, pool_next = self.snapshot(state, params, updates)
        return ActorCriticState(
            params=params, opt_state=opt_state, obs_stats=stats, env_state=collected.env_state,
            episode_return=episodes.running_return, episode_length=episodes.running_length,
            key=key, updates=updates, carry=collected.carry,
            reward_stats=advantages.reward_stats,
            discounted_return=advantages.discounted_return, pool=pool, pool_next=pool_next,
            league=collected.league, agent_return=episodes.agent_running), episodes

    def snapshot(self, state: ActorCriticState, params, updates: jax.Array):
        """A league's pool after update number ``updates`` stepped to ``params``: when
        ``updates`` is a multiple of ``pool_every``, ``params`` replace the oldest snapshot,
        ``pool[pool_next]``, and ``pool_next`` moves on by one (mod ``K``); else unchanged.
        ``(None, None)`` without a league."""
        if not self.league:
            return None, None
        due = updates % self.pool_every == 0
        pool = jax.tree.map(lambda ring, p: jnp.where(due, ring.at[state.pool_next].set(p), ring),
                            state.pool, params)
        return pool, jnp.where(due, (state.pool_next + 1) % self.pool_size, state.pool_next)

    def algorithm(self, config, *, num_updates: int, init: Callable, update: Callable,
                  greedy_result: Callable) -> Algorithm:
        """The :class:`Algorithm` of a learner on these rollouts
        (:func:`rollax.algos.base.neural_algorithm`): ``B`` environments batched, the
        parameters saved with the observation statistics."""
        return neural_algorithm(
            config, self.env if self.eval_env is None else self.eval_env, self.policy,
            num_updates=num_updates,
            env_steps_per_update=self.cells, init=init, update=update,
            greedy_result=greedy_result,
            params=self.policy_params, env_batch_fields=ENV_BATCH_FIELDS)


# --- feed-forward and recurrent ---------------------------------------------------------------

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


def collect_cells(parts: ExperienceParts, state: ActorCriticState, key: jax.Array) -> Collected:
    """``T`` steps of the ``B`` environments, and the critic's value of each observation and of
    each true next one. In a league (:func:`rollax.collect.collect_league`) the pool's
    snapshots play the learner's opponents."""
    league = None
    if parts.league:
        env_state, league, traj = collect_league(
            parts.env, parts.policy, parts.policy_params(state), parts.pool_params(state),
            state.env_state, cast(League, state.league), key, parts.num_steps)
    else:
        env_state, traj = collect_autoreset(parts.env, parts.policy, parts.policy_params(state),
                                            state.env_state, key, parts.num_steps)
    obs, next_obs = parts.observed(state, traj)
    values, next_values = (critic_values(parts.net, state.params, o) for o in (obs, next_obs))
    return Collected(env_state, None, traj, obs, values, next_values, league=league)


def collect_sequences(parts: ExperienceParts, state: ActorCriticState,
                      key: jax.Array) -> Collected:
    """``T`` steps of the ``B`` environments with their memories, and the critic's values:
    each observation's read by the memory replayed from the rollout's start with its resets,
    each true next observation's by the memory of the episode it ends (or continues)."""
    net = cast(RecurrentActorCritic, parts.net)
    env_state, carry, traj = collect_autoreset_recurrent(
        parts.env, parts.policy, parts.policy_params(state), state.env_state, state.carry, key,
        parts.num_steps)
    obs, next_obs = parts.observed(state, traj)
    starts = episode_starts(traj)
    replay = unroll(net, state.params, state.carry, obs, starts)
    batched = jax.vmap(jax.vmap(net.value, (None, 0)), (None, 0))
    values = batched(state.params, replay.features)
    step = jax.vmap(jax.vmap(net.step, (None, 0, 0)), (None, 0, 0))
    _, next_features = step(state.params, replay.carry, next_obs)
    next_values = batched(state.params, next_features)
    return Collected(env_state, carry, traj, obs, values, next_values, starts)


def shuffled_cells(flat: Batch, key: jax.Array, count: int) -> Batch:
    """The ``N = T * B`` cells in a random order, split into ``count`` rows: fields
    ``(count, N / count, ...)``."""
    n = flat.log_prob.shape[0]
    perm = jax.random.permutation(key, n)
    rows = (count, n // count)
    shuffled = jax.tree_util.tree_map(lambda x: x.reshape(rows + x.shape[1:]),
                                      take_rows(flat, perm))
    return constrain_envs(shuffled, axis=1)  # minibatch rows on "envs"


def take_rows(tree, index: jax.Array):
    """Every leaf of ``tree`` (leaves ``(N, ...)``) at the rows ``index`` (``(M,)``), as
    ``leaf[index]`` each, in one gather per element width: the leaves of 4-byte types (float32,
    int32, uint32) are viewed as uint32 bits, the others grouped by dtype, each group's rows
    laid side by side, gathered once and cut apart again. The values are copied bit for bit.
    A TPU spends its gather time per row taken, nearly whatever the row's width (a CartPole
    batch's six fields gathered apart took six times one gather under 1,024 vmapped seeds:
    benchmarks/TPU.md), so one gather per group is what the shuffle costs there."""
    leaves, treedef = jax.tree_util.tree_flatten(tree)
    groups: dict[Any, list[int]] = {}
    for i, leaf in enumerate(leaves):
        groups.setdefault(_row_kind(leaf.dtype), []).append(i)
    taken: list[Any] = list(leaves)
    for kind, members in groups.items():
        cols = [_as_kind(leaves[i], kind).reshape(leaves[i].shape[0], -1) for i in members]
        rows = (jnp.concatenate(cols, axis=1) if len(cols) > 1 else cols[0])[index]
        bounds = list(itertools.accumulate((col.shape[1] for col in cols), initial=0))
        parts = [rows[:, a:b].reshape(index.shape + leaves[i].shape[1:])
                 for i, a, b in zip(members, bounds[:-1], bounds[1:])]
        # Without the barrier XLA may move a float leaf's bitcast back ahead of the gather, and a
        # TPU then gathers that column with a sum, which turned -0.0 into +0.0: the parts stay bits.
        parts = jax.lax.optimization_barrier(parts)
        for i, part in zip(members, parts):
            taken[i] = _from_kind(part, leaves[i].dtype)
    return jax.tree_util.tree_unflatten(treedef, taken)


def _row_kind(dtype):
    dtype = jnp.dtype(dtype)
    return jnp.dtype(jnp.uint32) if dtype.itemsize == 4 and dtype.kind in "fiu" else dtype


def _as_kind(x: jax.Array, kind) -> jax.Array:
    return x if x.dtype == kind else jax.lax.bitcast_convert_type(x, kind)


def _from_kind(x: jax.Array, dtype) -> jax.Array:
    return x if x.dtype == dtype else jax.lax.bitcast_convert_type(x, dtype)


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
    time (``lax.map``), gradient included. A team's cells ``(M, N)`` (one per agent of each
    environment step) are flattened to ``(M * N,)``, each environment's agents side by
    side."""
    dist, value = read_cells(net, params, data.observation)
    dist = masked(dist, data.action_mask)
    scored = Scored(dist.log_prob(data.action), data.log_prob, data.advantage, value,
                    data.value, data.target, dist.entropy(), data.live)
    if scored.log_prob.ndim == 1:
        return scored
    return jax.tree_util.tree_map(lambda x: x.reshape(-1), scored)


def score_sequences(net: Network, params, data: Sequences) -> Scored:
    """Whole sequences replayed from their stored carries with their resets, then flattened."""
    net = cast(RecurrentActorCritic, net)
    replay = unroll(net, params, data.carry, data.observation, data.start, data.action,
                    data.action_mask)
    value = jax.vmap(jax.vmap(net.value, (None, 0)), (None, 0))(params, replay.features)
    return Scored(*jax.tree_util.tree_map(lambda x: x.reshape(-1), (
        replay.log_prob, data.log_prob, data.advantage, value, data.value, data.target,
        replay.entropy)))


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
    if traj.agent_rewards is None:
        return Episodes(ret, length, mean_ret, mean_len, count)
    running, agent_mean = agent_episode_stats(state.agent_return, traj.agent_rewards, done)
    return Episodes(ret, length, mean_ret, mean_len, count, running, agent_mean)


def agent_episode_stats(running: jax.Array, agent_rewards: jax.Array, done: jax.Array
                        ) -> tuple[jax.Array, jax.Array]:
    """A team's episodes, agent by agent: each agent's running return ``(B, N)`` after the
    rewards ``(T, B, N)`` (0 again after each end of ``done`` ``(T, B)``), and each agent's
    mean return ``(N,)`` over the episodes that ended (NaN when none did)."""

    def step(ret: jax.Array, x: tuple[jax.Array, jax.Array]):
        reward, ends = x
        ret = ret + reward
        return jnp.where(ends[:, None], 0.0, ret), jnp.where(ends[:, None], ret, 0.0)

    running, ended = jax.lax.scan(step, running, (agent_rewards, done))
    count = jnp.sum(done)
    mean = jnp.sum(ended, axis=(0, 1)) / jnp.maximum(count, 1)
    return running, jnp.where(count > 0, mean, jnp.nan)


AGENT_METRICS = ("agent_return", "agent_return_min", "agent_return_max")
"""A team's per-update metrics of its agents' returns (:func:`with_agent_metrics`)."""


@functools.cache
def team_metrics_type(base: type) -> type:
    """An algorithm's metrics NamedTuple ``base`` with :data:`AGENT_METRICS` after its fields
    (``Team<name>``; one type per ``base``, so a run's metrics keep one structure)."""
    return collections.namedtuple(f"Team{base.__name__}", (*base._fields, *AGENT_METRICS))


def with_agent_metrics(metrics: Any, episodes: Episodes) -> Any:
    """``metrics`` (an algorithm's NamedTuple), and for a team its agents' returns after them
    (``docs/metrics.md``), from each agent's mean return over the episodes that ended:
    ``agent_return``, their mean over the agents (the team's ``episode_return`` / N), and
    ``agent_return_min`` and ``agent_return_max``, the lowest and highest agent's. Other
    environments' metrics are returned as they are."""
    mean = episodes.agent_mean
    if mean is None:
        return metrics
    return team_metrics_type(type(metrics))(*metrics, jnp.mean(mean), jnp.min(mean),
                                            jnp.max(mean))
