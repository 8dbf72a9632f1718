"""PPO for neural actor-critics, compiled end to end: ``make_train(config)(key)``.

One update (all inside one ``lax.scan`` over updates)::

    key, rollout_key, shuffle_key = split(key, 3)
    env_state, traj = collect_autoreset(env, policy, params, env_state, rollout_key, T)
    V = critic(obs), V' = critic(true next obs)
    A, targets = gae(r, V, V', terminated, truncated, gamma, lambda)     # two signals kept apart
    repeat `epochs`: shuffle the T*B cells into `minibatches`, and for each minibatch
        loss = -mean(min(r A, clip(r, 1-eps, 1+eps) A))     # A normalised per minibatch
               + vf_coef * 0.5 * mean(max((V - target)^2, (V_clipped - target)^2))
               - ent_coef * mean(entropy)
        params <- adam(clip_by_global_norm(grad)), learning rate linearly annealed
    observation statistics <- merged with this batch (when normalising)

The behaviour log-probs, actions, advantages and targets of a batch stay frozen through its
epochs. After the last update the policy's mode is evaluated on ``eval_episodes`` absorbing
episodes (greedy evaluation).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Callable, Literal, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from rollax import guards
from rollax.algos.base import Algorithm
from rollax.collect import collect, collect_autoreset, reset_batch
from rollax.envs.base import Box, Discrete
from rollax.envs.registry import make
from rollax.policies import (
    ActorCriticParams,
    GreedyPolicy,
    MLPActorCritic,
    NormalizedPolicy,
    ObsNormState,
    obs_norm_init,
    obs_norm_update,
    obs_normalize,
)
from rollax.returns import gae
from rollax.sharding import constrain_envs
from rollax.validate import check_count, check_real, check_seed, is_int


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
}
"""Tuned settings per task (overrides of the PPOConfig defaults)."""


def preset(env: str, **overrides) -> PPOConfig:
    """The tuned config for ``env`` with ``overrides`` applied."""
    return PPOConfig(env=env, **{**PRESETS.get(env, {}), **overrides})


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

    params: ActorCriticParams
    opt_state: optax.OptState
    obs_stats: ObsNormState
    env_state: object
    episode_return: jax.Array
    """(B,) return so far of each environment's current episode."""
    episode_length: jax.Array
    key: jax.Array
    update: jax.Array


class PPOResult(NamedTuple):
    params: ActorCriticParams
    obs_stats: ObsNormState
    metrics: PPOMetrics
    eval_return: jax.Array
    """Mean greedy-evaluation return over ``eval_episodes``."""
    state: PPOState


def num_updates(config: PPOConfig) -> int:
    return config.total_steps // (config.num_envs * config.num_steps)


def validate(config: PPOConfig):
    """Check every setting (``ValueError`` naming it and its range); returns the env."""
    check_seed(config.seed)
    for name in ("total_steps", "num_envs", "num_steps", "epochs", "minibatches",
                 "eval_episodes"):
        check_count(name, getattr(config, name))
    batch = config.num_envs * config.num_steps
    if config.total_steps < batch:
        raise ValueError(
            f"total_steps must be at least num_envs * num_steps = {batch}, "
            f"got {config.total_steps}"
        )
    if batch % config.minibatches:
        raise ValueError(
            f"minibatches must divide num_envs * num_steps = {batch}, got {config.minibatches}"
        )
    check_real("lr", config.lr, 0, math.inf, low_open=True, high_open=True)
    check_real("gamma", config.gamma, 0, 1, low_open=True)
    check_real("gae_lambda", config.gae_lambda, 0, 1)
    check_real("clip_eps", config.clip_eps, 0, 1, low_open=True, high_open=True)
    check_real("vf_coef", config.vf_coef, 0, math.inf, high_open=True)
    check_real("ent_coef", config.ent_coef, 0, math.inf, high_open=True)
    check_real("max_grad_norm", config.max_grad_norm, 0, math.inf, low_open=True,
                high_open=True)
    check_real("reward_scale", config.reward_scale, 0, math.inf, low_open=True,
                high_open=True)
    check_real("init_log_std", config.init_log_std, -10, 10)
    if not config.hidden or not all(is_int(h) and h >= 1 for h in config.hidden):
        raise ValueError(f"hidden must be positive layer sizes, got {config.hidden!r}")
    if config.activation not in ("tanh", "relu"):
        raise ValueError(f"activation must be one of tanh, relu, got {config.activation!r}")
    env = make(config.env) if config.horizon is None else make(config.env, horizon=config.horizon)
    if not isinstance(env.observation_space, Box) or len(env.observation_space.shape) != 1:
        raise ValueError(
            f"env {config.env!r} has no vector (Box) observations: PPO needs one "
            f"(finite tasks train with the tabular trainer, rollax.algos.tabular)"
        )
    return env


def make_network(env, config: PPOConfig) -> MLPActorCritic:
    space = env.action_space
    kwargs = dict(num_actions=space.n) if isinstance(space, Discrete) else dict(
        action_size=int(np.prod(space.shape)))
    return MLPActorCritic(
        observation_size=int(env.observation_space.shape[0]), hidden=tuple(config.hidden),
        activation=config.activation, init_log_std=config.init_log_std, **kwargs,
    )


def _explained_variance(values, targets):
    var = jnp.var(targets)
    return jnp.where(var > 0, 1.0 - jnp.var(targets - values) / var, jnp.nan)


class _Batch(NamedTuple):
    observation: jax.Array
    action: jax.Array
    log_prob: jax.Array
    advantage: jax.Array
    target: jax.Array
    value: jax.Array


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


def make_algorithm(config: PPOConfig, checked: bool = False) -> Algorithm:
    """Validate ``config`` (before compiling) and return PPO's parts (init, update, evaluate).
    ``checked`` stages the runtime checks of :mod:`rollax.guards` into each update."""
    env = validate(config)
    net = make_network(env, config)
    policy = NormalizedPolicy(net) if config.normalize_observations else net
    updates = num_updates(config)
    B, T = config.num_envs, config.num_steps
    batch = B * T
    mb = batch // config.minibatches
    steps_per_update = config.epochs * config.minibatches

    def schedule(hp: PPOHyperparams, count):
        if config.anneal_lr:  # linear from lr to 0 over all gradient steps of the run
            return optax.linear_schedule(hp.lr, 0.0, updates * steps_per_update)(count)
        return optax.constant_schedule(hp.lr)(count)

    def optimiser(hp: PPOHyperparams):
        return optax.chain(optax.clip_by_global_norm(hp.max_grad_norm),
                           optax.adam(lambda count: schedule(hp, count), eps=1e-5))

    def policy_params(params, stats):
        return (params, stats) if config.normalize_observations else params

    def norm(stats, obs):
        return obs_normalize(stats, obs) if config.normalize_observations else obs

    def loss_fn(params, data: _Batch, hp: PPOHyperparams):
        eps = hp.clip_eps
        dist = jax.vmap(net.distribution, (None, 0))(params, data.observation)
        log_prob = dist.log_prob(data.action)
        log_ratio = log_prob - data.log_prob
        ratio = jnp.exp(log_ratio)
        adv = data.advantage
        if config.normalize_advantages:
            adv = (adv - adv.mean()) / (adv.std() + 1e-8)
        policy_loss = -jnp.mean(jnp.minimum(ratio * adv, jnp.clip(ratio, 1 - eps, 1 + eps) * adv))
        value = jax.vmap(net.value, (None, 0))(params, data.observation)
        value_loss = (value - data.target) ** 2
        if config.clip_value:
            clipped = data.value + jnp.clip(value - data.value, -eps, eps)
            value_loss = jnp.maximum(value_loss, (clipped - data.target) ** 2)
        value_loss = 0.5 * jnp.mean(value_loss)
        entropy = jnp.mean(dist.entropy())
        total = policy_loss + hp.vf_coef * value_loss - hp.ent_coef * entropy
        aux = dict(
            policy_loss=policy_loss, value_loss=value_loss, entropy=entropy,
            approx_kl=jnp.mean((ratio - 1) - log_ratio), old_approx_kl=jnp.mean(-log_ratio),
            clip_fraction=jnp.mean((jnp.abs(ratio - 1) > eps).astype(jnp.float32)),
            ratio_min=jnp.min(ratio), ratio_max=jnp.max(ratio),
        )
        return total, aux

    def episode_stats(state: PPOState, traj):
        def step(carry, x):
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

    def init(key: jax.Array, hp: PPOHyperparams) -> PPOState:
        key, init_key, env_key = jax.random.split(key, 3)
        params = net.init(init_key)
        return PPOState(
            params=params, opt_state=optimiser(hp).init(params),
            obs_stats=obs_norm_init(net.observation_size),
            env_state=reset_batch(env, env_key, B),
            episode_return=jnp.zeros(B, jnp.float32), episode_length=jnp.zeros(B, jnp.int32),
            key=key, update=jnp.zeros((), jnp.int32),
        )

    def update(state: PPOState, hp: PPOHyperparams):
        tx = optimiser(hp)
        key, rollout_key, shuffle_key = jax.random.split(state.key, 3)
        env_state, traj = collect_autoreset(
            env, policy, policy_params(state.params, state.obs_stats), state.env_state,
            rollout_key, T)
        if checked:
            guards.check_observations(traj.observation, state.update + 1)
            guards.check_actions(traj.action, env.action_space, state.update + 1)
        obs = norm(state.obs_stats, traj.observation)
        next_obs = norm(state.obs_stats, traj.next_observation)
        critic = jax.vmap(jax.vmap(net.value, (None, 0)), (None, 0))
        values, next_values = critic(state.params, obs), critic(state.params, next_obs)
        advantages, targets = gae(traj.reward * hp.reward_scale, values, next_values,
                                  traj.terminated, traj.truncated, hp.gamma, hp.gae_lambda)
        flat = jax.tree_util.tree_map(
            lambda x: x.reshape((batch,) + x.shape[2:]),
            _Batch(obs, traj.action, traj.log_prob, advantages, targets, values))

        def sgd_step(carry, data):
            params, opt_state = carry
            (loss, aux), grads = jax.value_and_grad(loss_fn, has_aux=True)(params, data, hp)
            updates_, opt_state = tx.update(grads, opt_state, params)
            params = optax.apply_updates(params, updates_)
            if checked:
                guards.check_finite("loss", loss, state.update + 1)
                guards.check_finite("gradient", grads, state.update + 1)
                guards.check_finite("parameters", params, state.update + 1)
            return (params, opt_state), aux

        def epoch(carry, key):
            params, opt_state = carry
            perm = jax.random.permutation(key, batch)
            shuffled = jax.tree_util.tree_map(
                lambda x: x[perm].reshape((config.minibatches, mb) + x.shape[1:]), flat)
            shuffled = constrain_envs(shuffled, axis=1)  # minibatch rows on "envs"
            return jax.lax.scan(sgd_step, (params, opt_state), shuffled)

        (params, opt_state), aux = jax.lax.scan(
            epoch, (state.params, state.opt_state), jax.random.split(shuffle_key, config.epochs))
        stats = state.obs_stats
        if config.normalize_observations:
            stats = obs_norm_update(stats, traj.observation)
        ep_ret, ep_len, mean_ret, mean_len, count = episode_stats(state, traj)
        metrics = PPOMetrics(
            policy_loss=aux["policy_loss"].mean(), value_loss=aux["value_loss"].mean(),
            entropy=aux["entropy"].mean(), approx_kl=aux["approx_kl"].mean(),
            old_approx_kl=aux["old_approx_kl"].mean(),
            clip_fraction=aux["clip_fraction"].mean(),
            ratio_min=aux["ratio_min"].min(), ratio_max=aux["ratio_max"].max(),
            explained_variance=_explained_variance(values, targets),
            learning_rate=jnp.asarray(schedule(hp, state.update * steps_per_update),
                                      jnp.float32),
            episode_return=mean_ret, episode_length=mean_len, episodes=count,
            env_steps=(state.update + 1) * batch,
        )
        new_state = PPOState(params, opt_state, stats, env_state, ep_ret, ep_len, key,
                             state.update + 1)
        return new_state, metrics

    def evaluate_state(state: PPOState, hp: PPOHyperparams) -> dict:
        eval_key, _ = jax.random.split(state.key)
        returns = evaluate(env, policy, policy_params(state.params, state.obs_stats), eval_key,
                           config.eval_episodes)
        return {"eval_return": returns}

    hyperparams = PPOHyperparams(
        lr=config.lr, gamma=config.gamma, gae_lambda=config.gae_lambda,
        clip_eps=config.clip_eps, vf_coef=config.vf_coef, ent_coef=config.ent_coef,
        max_grad_norm=config.max_grad_norm, reward_scale=config.reward_scale)
    return Algorithm(
        config=config, hyperparams=hyperparams, num_updates=updates,
        env_steps_per_update=batch, init=init, update=update, evaluate=evaluate_state,
        params=lambda state: (state.params, state.obs_stats),
        env=env, policy=policy,
        checked=checked, policy_params=lambda state: policy_params(state.params, state.obs_stats),
    )


def make_train(config: PPOConfig) -> Callable[..., PPOResult]:
    """Validate ``config`` (before compiling) and return the compiled ``train(key)``.

    ``train`` is a pure function of its key: ``jax.vmap(train)(keys)`` trains many seeds in
    one program; ``train(key, hp)`` takes :class:`PPOHyperparams` as traced inputs (sweeps).
    """
    algo = make_algorithm(config)

    def train(key: jax.Array, hp: PPOHyperparams | None = None) -> PPOResult:
        hp = algo.hyperparams if hp is None else hp
        state = algo.init(key, hp)
        state, metrics = jax.lax.scan(lambda s, _: algo.update(s, hp), state, None,
                                      algo.num_updates)
        eval_return = algo.evaluate(state, hp)["eval_return"]
        return PPOResult(state.params, state.obs_stats, metrics, eval_return, state)

    return jax.jit(train)


def evaluate(env, policy, params, key, episodes: int, greedy: bool = True) -> jax.Array:
    """Mean return of ``episodes`` absorbing episodes (one each, ``env.horizon`` steps), acting
    with the policy's mode (``greedy``) or by sampling."""
    actor = GreedyPolicy(policy) if greedy else policy
    _, traj = collect(env, actor, params, key, episodes, env.horizon)
    return jnp.mean(jnp.sum(traj.reward, axis=0))
