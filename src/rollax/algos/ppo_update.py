"""One PPO update, written from the shared parts (collector, GAE, losses, ratio statistics).

::

    key, rollout_key, shuffle_key = split(key, 3)
    env_state, traj = collect_autoreset(env, policy, params, env_state, rollout_key, T)
    V = critic(obs), V' = critic(true next obs)
    A, targets = gae(r, V, V', terminated, truncated, gamma, lambda)     # two signals kept apart
    repeat `epochs`: shuffle the T*B cells into `minibatches`, and for each minibatch
        loss = actor_critic_loss(...)                                   # rollax.losses
        params <- adam(clip_by_global_norm(grad)), learning rate linearly annealed
    observation statistics <- merged with this batch (when normalising)

The behaviour log-probs, actions, advantages and targets of a batch stay frozen through its
epochs (they are data, not functions of the parameters). A recurrent network (GRU/LSTM) collects
with its memory and replays whole sequences instead: :mod:`rollax.algos.ppo_recurrent`.
"""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from rollax import guards
from rollax.algos import ppo_recurrent
from rollax.collect import collect_autoreset, reset_batch
from rollax.envs.base import Discrete, Environment
from rollax.losses import actor_critic_loss
from rollax.networks import CNNActorCritic, image_shape
from rollax.policies import (
    MLPActorCritic,
    NormalizedPolicy,
    ObsNormState,
    obs_norm_init,
    obs_norm_update,
    obs_normalize,
)
from rollax.recurrent import (
    NormalizedRecurrent,
    RecurrentActorCritic,
    initial_carries,
    is_recurrent,
)
from rollax.returns import gae
from rollax.sharding import constrain_envs


class PPOHyperparams(NamedTuple):
    """Numeric PPO settings, traced (so a sweep can ``vmap`` over them)."""

    lr: float | jax.Array
    gamma: float | jax.Array
    gae_lambda: float | jax.Array
    clip_eps: float | jax.Array
    vf_coef: float | jax.Array
    ent_coef: float | jax.Array
    max_grad_norm: float | jax.Array
    reward_scale: float | jax.Array


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


class Batch(NamedTuple):
    """The frozen cells of one rollout, flattened to ``(T * B, ...)``."""

    observation: jax.Array
    action: jax.Array
    log_prob: jax.Array
    advantage: jax.Array
    target: jax.Array
    value: jax.Array


Network = MLPActorCritic | CNNActorCritic | RecurrentActorCritic
"""The actor-critics PPO builds."""

RECURRENT = ("gru", "lstm")
"""The recurrent choices of ``PPOConfig.network``."""


def network_choice(network: str, env: Environment) -> str:
    """``network`` itself, or for ``"auto"`` the CNN when ``env``'s observation is an image
    (:func:`rollax.networks.image_shape`) and the MLP otherwise."""
    if network == "auto":
        return "cnn" if image_shape(env) is not None else "mlp"
    return network


def make_network(env: Environment, config) -> Network:
    """The actor-critic for ``env``'s spaces with ``config``'s network (``network``: the MLP,
    the CNN over the image shape, or a GRU/LSTM whose embedding has ``hidden[0]`` units, memory
    ``memory_size`` and heads ``hidden[1:]``), layer sizes and activation."""
    space = env.action_space
    kwargs = dict(num_actions=space.n) if isinstance(space, Discrete) else dict(
        action_size=int(np.prod(space.shape)))
    if config.network in RECURRENT:
        return RecurrentActorCritic(
            observation_size=int(env.observation_space.shape[0]), cell=config.network,
            embed_size=config.hidden[0], memory_size=config.memory_size,
            hidden=tuple(config.hidden[1:]), activation=config.activation,
            init_log_std=config.init_log_std, **kwargs)
    if network_choice(config.network, env) == "cnn":
        shape = image_shape(env)
        if shape is None:
            raise ValueError(f"network 'cnn' needs image observations; env {config.env!r} has "
                             f"no raw_observation_shape (H, W, C)")
        return CNNActorCritic(image_shape=shape, num_actions=kwargs.get("num_actions"),
                              action_size=kwargs.get("action_size"), hidden=tuple(config.hidden),
                              activation=config.activation, init_log_std=config.init_log_std)
    return MLPActorCritic(
        observation_size=int(env.observation_space.shape[0]), hidden=tuple(config.hidden),
        activation=config.activation, init_log_std=config.init_log_std, **kwargs,
    )


@dataclasses.dataclass(frozen=True)
class Setup:
    """The static parts of a PPO run (config, environment, network, sizes)."""

    config: Any
    env: Environment
    net: Network
    num_updates: int
    checked: bool = False

    @property
    def recurrent(self) -> bool:
        return is_recurrent(self.net)

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

    def schedule(self, hp: PPOHyperparams, count):
        if self.config.anneal_lr:  # linear from lr to 0 over all gradient steps of the run
            return optax.linear_schedule(hp.lr, 0.0, self.num_updates * self.steps_per_update
                                         )(count)
        return optax.constant_schedule(hp.lr)(count)

    def optimiser(self, hp: PPOHyperparams):
        return optax.chain(optax.clip_by_global_norm(hp.max_grad_norm),
                           optax.adam(lambda count: self.schedule(hp, count), eps=1e-5))


def init(setup: Setup, key: jax.Array, hp: PPOHyperparams) -> PPOState:
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


def loss(setup: Setup, params, data: Batch, hp: PPOHyperparams):
    """:func:`rollax.losses.actor_critic_loss` of the network on a flat minibatch."""
    net, config = setup.net, setup.config
    dist = jax.vmap(net.distribution, (None, 0))(params, data.observation)
    value = jax.vmap(net.value, (None, 0))(params, data.observation)
    return actor_critic_loss(
        dist.log_prob(data.action), data.log_prob, data.advantage, value, data.value,
        data.target, dist.entropy(), clip_eps=hp.clip_eps, vf_coef=hp.vf_coef,
        ent_coef=hp.ent_coef, clip_value=config.clip_value,
        normalize_advantages=config.normalize_advantages)


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


def rollout_batch(setup: Setup, state: PPOState, key: jax.Array, hp: PPOHyperparams):
    """Collect ``T`` steps of the ``B`` environments and compute GAE: ``(env_state, traj,
    values, targets, flat Batch)``."""
    env_state, traj = collect_autoreset(
        setup.env, setup.policy, setup.policy_params(state.params, state.obs_stats),
        state.env_state, key, setup.config.num_steps)
    obs, next_obs = setup.observed(state, traj)
    critic = jax.vmap(jax.vmap(setup.net.value, (None, 0)), (None, 0))
    values, next_values = critic(state.params, obs), critic(state.params, next_obs)
    advantages, targets = gae(traj.reward * hp.reward_scale, values, next_values,
                              traj.terminated, traj.truncated, hp.gamma, hp.gae_lambda)
    flat = jax.tree_util.tree_map(
        lambda x: x.reshape((setup.batch,) + x.shape[2:]),
        Batch(obs, traj.action, traj.log_prob, advantages, targets, values))
    return env_state, traj, values, targets, flat


def shuffled_cells(setup: Setup, flat: Batch, key: jax.Array) -> Batch:
    """The ``T * B`` cells in a random order, split into ``minibatches`` rows: fields
    ``(minibatches, T * B / minibatches, ...)``."""
    perm = jax.random.permutation(key, setup.batch)
    rows = (setup.config.minibatches, setup.batch // setup.config.minibatches)
    shuffled = jax.tree_util.tree_map(lambda x: x[perm].reshape(rows + x.shape[1:]), flat)
    return constrain_envs(shuffled, axis=1)  # minibatch rows on "envs"


def sgd_epochs(setup: Setup, state: PPOState, data, key: jax.Array, hp: PPOHyperparams):
    """``epochs`` passes of minibatch steps over ``data`` (the cells shuffled for a
    feedforward network, whole sequences split by environment for a recurrent one):
    ``((params, opt_state), aux)`` with aux ``(epochs, minibatches)`` per loss output."""
    tx, config, update = setup.optimiser(hp), setup.config, state.update + 1
    split = ppo_recurrent.minibatches if setup.recurrent else shuffled_cells
    loss_fn = ppo_recurrent.loss if setup.recurrent else loss

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


def update(setup: Setup, state: PPOState, hp: PPOHyperparams):
    """One PPO update: ``(next state, PPOMetrics)``."""
    key, rollout_key, shuffle_key = jax.random.split(state.key, 3)
    if setup.recurrent:
        env_state, carry, traj, values, targets, data = ppo_recurrent.rollout_batch(
            setup, state, rollout_key, hp)
    else:
        env_state, traj, values, targets, data = rollout_batch(setup, state, rollout_key, hp)
        carry = None
    (params, opt_state), aux = sgd_epochs(setup, state, data, shuffle_key, hp)
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
    new_state = PPOState(params, opt_state, stats, env_state, ep_ret, ep_len, key,
                         state.update + 1, carry)
    return new_state, metrics
