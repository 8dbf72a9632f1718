"""A2C, synchronous advantage actor-critic, compiled end to end:
``rollax.make_train(A2CConfig())(key)``.

One update on PPO's auto-reset rollout (:mod:`rollax.algos.ppo` collects, computes the values
and the advantages; this module only replaces PPO's epochs of clipped steps by one plain
policy-gradient step)::

    key, rollout_key = split(key)
    env_state, traj = collect_autoreset(env, policy, params, env_state, rollout_key, T)
    A, G = gae(r, V, V', terminated, truncated, gamma, lambda)   # lambda = 1: n-step returns
    loss = a2c_loss(log pi(a|s), A, V(s), G, entropy)             # all T * B cells at once
    params <- rmsprop(clip_per_network(grad))                     # one step per rollout
    observation statistics <- merged with this batch (when normalising)

A feed-forward network (MLP, CNN) scores the ``T * B`` cells of the rollout; a recurrent one
(GRU, LSTM) replays each environment's whole sequence from the carry it was collected with,
resets included, as PPO does (:func:`rollax.algos.ppo.rollout_sequences`). The defaults are
Stable-Baselines3's A2C (``n_steps=5``, ``lr=7e-4``, RMSprop with ``alpha=0.99, eps=1e-5`` as
``torch.optim.RMSprop`` defines it, ``gae_lambda=1``, no entropy bonus); docs/algorithms.md
lists what differs from it.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Literal, NamedTuple, cast

import jax
import jax.numpy as jnp
import optax

from rollax import guards
from rollax.algos import ppo
from rollax.algos.base import (
    Algorithm,
    AlgorithmSpec,
    hyperparams_of,
    hyperparams_type,
    traced,
)
from rollax.envs.base import Box, Environment
from rollax.envs.registry import make
from rollax.evaluation import evaluate_policy
from rollax.nets.heads import ActorCriticParams
from rollax.nets.rnn import RecurrentActorCritic
from rollax.policies import ObsNormState, obs_norm_update
from rollax.recurrent import unroll
from rollax.validate import check_count, check_real, check_seed

__all__ = ["PRESETS", "SPEC", "A2CConfig", "A2CHyperparams", "A2CMetrics", "A2CParts",
           "A2CResult", "a2c_loss", "make_algorithm", "num_updates", "ppo_config", "preset",
           "resolve", "rmsprop", "update", "validate"]


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
    seed: int = 0
    """Root key jax.random.key(seed) (seed k of a multi-seed run uses key(seed + k))."""
    total_steps: int = 500_000
    """Environment steps in all: updates = total_steps // (num_envs * num_steps)."""
    num_envs: int = 8
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
    hidden: tuple[int, ...] = (64, 64)
    """Hidden layer sizes of the actor and of the critic."""
    activation: Literal["tanh", "relu"] = "tanh"
    """Hidden activation."""
    init_log_std: float = 0.0
    """Initial log standard deviation (continuous actions)."""
    network: Literal["auto", "mlp", "cnn", "gru", "lstm"] = "auto"
    """Actor-critic: mlp, cnn, gru or lstm (as PPO's network; a recurrent one replays each
    environment's whole rollout), or auto (cnn for image observations, else mlp)."""
    memory_size: int = 128
    """Units of the recurrent memory (network gru or lstm)."""
    eval_episodes: int = 32
    """Greedy evaluation episodes after training (and of each --eval-every evaluation)."""
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
``normalize`` also normalises rewards (VecNormalize), which rollax has not: ``reward_scale=0.1``
stands in for it on Acrobot-v1 and Pendulum-v1 (Acrobot, 8 seeds: greedy -80 to -90 with it,
one seed of 8 at -217 without). Pendulum-v1's gSDE (``use_sde``: state-dependent exploration)
is not in rollax, so its ``log_std_init=-2`` (a gSDE scale) is not taken: a plain Gaussian
from ``init_log_std`` 0, with a constant learning rate (zoo: ``lin_7e-4``), ends at a greedy
-155 to -400 in 1e6 steps (8 seeds) where -2 and the annealed rate stay near -1,100 (3 seeds);
``ortho_init=False`` is not mapped either (rollax's networks are always orthogonal)."""


def preset(env: str, **overrides) -> A2CConfig:
    """The tuned config for ``env`` with ``overrides`` applied."""
    return A2CConfig(env=env, **{**PRESETS.get(env, {}), **overrides})


def num_updates(config: A2CConfig) -> int:
    return config.total_steps // (config.num_envs * config.num_steps)


def ppo_config(config: A2CConfig) -> ppo.PPOConfig:
    """The :class:`~rollax.algos.ppo.PPOConfig` whose rollout A2C runs: the shared settings,
    one epoch of one minibatch (so PPO's learning-rate schedule counts one step per update)."""
    shared = {f.name: getattr(config, f.name) for f in dataclasses.fields(ppo.PPOConfig)
              if hasattr(config, f.name)}
    return ppo.PPOConfig(**{**shared, "epochs": 1, "minibatches": 1})


def validate(config: A2CConfig, env: Environment | None = None) -> Environment:
    """Check every setting (``ValueError`` naming it and its range); returns the environment
    (``env`` when given: the one already built from ``config.env`` and ``config.horizon``)."""
    check_seed(config.seed)
    for name in ("total_steps", "num_envs", "num_steps", "eval_episodes", "memory_size"):
        check_count(name, getattr(config, name))
    if config.eval_steps is not None:
        check_count("eval_steps", config.eval_steps)
    batch = config.num_envs * config.num_steps
    if config.total_steps < batch:
        raise ValueError(f"total_steps must be at least num_envs * num_steps = {batch}, "
                         f"got {config.total_steps}")
    inf = math.inf
    check_real("lr", config.lr, 0, inf, low_open=True, high_open=True)
    check_real("gamma", config.gamma, 0, 1, low_open=True)
    check_real("gae_lambda", config.gae_lambda, 0, 1)
    check_real("vf_coef", config.vf_coef, 0, inf, high_open=True)
    check_real("ent_coef", config.ent_coef, 0, inf, high_open=True)
    check_real("max_grad_norm", config.max_grad_norm, 0, inf, low_open=True, high_open=True)
    check_real("reward_scale", config.reward_scale, 0, inf, low_open=True, high_open=True)
    if config.optimizer not in OPTIMIZERS:
        raise ValueError(f"optimizer must be one of {', '.join(OPTIMIZERS)}, "
                         f"got {config.optimizer!r}")
    for name in ("anneal_lr", "normalize_advantages", "normalize_observations"):
        if not isinstance(getattr(config, name), bool):
            raise ValueError(f"{name} must be true or false, got {getattr(config, name)!r}")
    if env is None:
        env = make(config.env, **({} if config.horizon is None else {"horizon": config.horizon}))
    space = env.observation_space
    if not isinstance(space, Box) or len(space.shape) != 1:
        raise ValueError(f"env {config.env!r} has no vector (Box) observations: A2C needs one "
                         f"(finite tasks train with the tabular trainer, rollax.algos.tabular)")
    return ppo.validate(ppo_config(config), env)  # hidden, activation, init_log_std, network


def resolve(config: A2CConfig, env: Environment | None = None) -> A2CConfig:
    """``config`` validated, with ``horizon`` set to the task's own limit when unset and
    ``network`` to the one ``auto`` picks (``mlp`` or ``cnn``)."""
    return _resolved(config, env)[0]


def _resolved(config: A2CConfig, env: Environment | None) -> tuple[A2CConfig, Environment]:
    env = validate(config, env)
    rollout = ppo.resolve(ppo_config(config), env)
    return dataclasses.replace(config, horizon=rollout.horizon, network=rollout.network), env


# --- state and loss -----------------------------------------------------------------------------

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
    state: ppo.PPOState


def a2c_loss(log_prob, advantage, value, target, entropy, *, vf_coef, ent_coef,
             normalize_advantages: bool = False):
    """A2C's loss over a flat batch (every argument ``(N,)``)::

        A = (advantage - mean) / (std + 1e-8)                      # when normalising
        L = -mean(A * log_prob) + vf_coef * mean((value - target)^2) - ent_coef * mean(entropy)

    Its policy gradient is ``-mean(A * grad log pi(a|s))``, the advantage actor-critic
    estimate. There is no 0.5 on the squared error (Stable-Baselines3's A2C has none, unlike
    :func:`rollax.losses.clipped_value_loss`). The advantages and targets are frozen
    (``stop_gradient``). Returns ``(L, aux)`` with the policy loss, value loss and entropy."""
    advantage = jax.lax.stop_gradient(advantage)
    target = jax.lax.stop_gradient(target)
    if normalize_advantages:
        advantage = (advantage - advantage.mean()) / (advantage.std() + 1e-8)
    policy_loss = -jnp.mean(advantage * log_prob)
    value_loss = jnp.mean((value - target) ** 2)
    entropy = jnp.mean(entropy)
    total = policy_loss + vf_coef * value_loss - ent_coef * entropy
    return total, dict(policy_loss=policy_loss, value_loss=value_loss, entropy=entropy)


def rmsprop(lr, decay: float = 0.99, eps: float = 1e-5) -> optax.GradientTransformation:
    """PyTorch's RMSprop (``torch.optim.RMSprop``, no momentum, not centred)::

        v <- decay * v + (1 - decay) * g^2          # v starts at 0
        p <- p - lr * g / (sqrt(v) + eps)           # eps outside the square root
    """
    return optax.rmsprop(lr, decay=decay, eps=eps, eps_in_sqrt=False)


# --- the parts, the loss of a rollout and the update -------------------------------------------

@dataclasses.dataclass(frozen=True)
class A2CParts(ppo.PPOParts):
    """PPO's parts (rollout, normalisation, schedule: ``config`` is :func:`ppo_config`) with
    A2C's optimiser."""

    optimizer: str = "rmsprop"

    def optimiser(self, hp):
        lr = functools.partial(self.schedule, hp)
        step = rmsprop(lr) if self.optimizer == "rmsprop" else optax.adam(lr, eps=1e-5)
        return optax.chain(ppo.clip_per_network(hp.max_grad_norm), step)


def cells_loss(setup: A2CParts, params, data: ppo.Batch, hp):
    """:func:`a2c_loss` of a feed-forward network on the flat ``T * B`` cells."""
    net = setup.net
    dist = jax.vmap(net.distribution, (None, 0))(params, data.observation)
    value = jax.vmap(net.value, (None, 0))(params, data.observation)
    return a2c_loss(dist.log_prob(data.action), data.advantage, value, data.target,
                    dist.entropy(), vf_coef=hp.vf_coef, ent_coef=hp.ent_coef,
                    normalize_advantages=setup.config.normalize_advantages)


def sequences_loss(setup: A2CParts, params, data: ppo.Sequences, hp):
    """:func:`a2c_loss` of a recurrent network on the ``B`` whole sequences, replayed from
    their collected carries with their resets."""
    net = cast(RecurrentActorCritic, setup.net)
    replay = unroll(net, params, data.carry, data.observation, data.start, data.action)
    value = jax.vmap(jax.vmap(net.value, (None, 0)), (None, 0))(params, replay.features)
    flat = jax.tree_util.tree_map(lambda x: x.reshape(-1), (
        replay.log_prob, data.advantage, value, data.target, replay.entropy))
    return a2c_loss(*flat, vf_coef=hp.vf_coef, ent_coef=hp.ent_coef,
                    normalize_advantages=setup.config.normalize_advantages)


def update(setup: A2CParts, state: ppo.PPOState, hp):
    """One A2C update: a rollout and one gradient step on all of it; ``(next state,
    A2CMetrics)``."""
    key, rollout_key = jax.random.split(state.key)
    batch = setup.strategy.rollout(setup, state, rollout_key, hp)
    loss_fn = sequences_loss if setup.recurrent else cells_loss
    (loss, aux), grads = jax.value_and_grad(
        lambda p: loss_fn(setup, p, batch.data, hp), has_aux=True)(state.params)
    updates, opt_state = setup.optimiser(hp).update(grads, state.opt_state, state.params)
    params = optax.apply_updates(state.params, updates)
    if setup.checked:
        guards.check_finite("loss", loss, state.update + 1)
        guards.check_finite("gradient", grads, state.update + 1)
        guards.check_finite("parameters", params, state.update + 1)
    stats = state.obs_stats
    if setup.config.normalize_observations:
        stats = obs_norm_update(stats, batch.traj.observation)
    ep_ret, ep_len, mean_ret, mean_len, count = ppo.episode_stats(state, batch.traj)
    metrics = A2CMetrics(
        policy_loss=aux["policy_loss"], value_loss=aux["value_loss"], entropy=aux["entropy"],
        explained_variance=ppo.explained_variance(batch.values, batch.targets),
        grad_norm=optax.tree.norm((grads.actor, grads.log_std)),
        learning_rate=jnp.asarray(setup.schedule(hp, state.update), jnp.float32),
        episode_return=mean_ret, episode_length=mean_len, episodes=count,
        env_steps=(state.update + 1) * setup.batch,
    )
    new_state = ppo.PPOState(params, opt_state, stats, batch.env_state, ep_ret, ep_len, key,
                             state.update + 1, batch.carry)
    return new_state, metrics


# --- the algorithm ------------------------------------------------------------------------------

def evaluate(setup: A2CParts, state: ppo.PPOState, hp) -> dict:
    """The greedy policy's mean return over ``eval_episodes`` absorbing episodes."""
    del hp
    eval_key, _ = jax.random.split(state.key)
    params = setup.policy_params(state.params, state.obs_stats)
    return {"eval_return": evaluate_policy(setup.env, setup.policy, params, eval_key,
                                           setup.config.eval_episodes,
                                           num_steps=setup.config.eval_steps)}


def make_algorithm(config: A2CConfig, checked: bool = False,
                   env: Environment | None = None) -> Algorithm:
    """Validate ``config`` (before compiling) and return A2C's parts (init, update, evaluate).
    ``checked`` stages the runtime checks of :mod:`rollax.guards` into each update."""
    config, env = _resolved(config, env)
    rollout = ppo_config(config)
    setup = A2CParts(rollout, env, ppo.make_network(env, rollout), num_updates(config), checked,
                     config.optimizer)
    return Algorithm(
        config=config, hyperparams=hyperparams_of(config), num_updates=setup.num_updates,
        env_steps_per_update=setup.batch, init=functools.partial(ppo.init, setup),
        update=functools.partial(update, setup), evaluate=functools.partial(evaluate, setup),
        params=lambda state: (state.params, state.obs_stats), env=env, policy=setup.policy,
        policy_params=lambda state: setup.policy_params(state.params, state.obs_stats),
        result=lambda state, metrics, initial, final: A2CResult(
            state.params, state.obs_stats, metrics, final["eval_return"], state),
        env_batch=("num_envs", config.num_envs), checked=checked,
        env_batch_fields=("env_state", "episode_return", "episode_length", "carry"),
    )


SPEC = AlgorithmSpec(
    name="a2c", task="neural", config_type=A2CConfig, methods=("a2c",), accepts=ppo.accepts,
    build=make_algorithm, requirement="vector (Box) observations", presets=PRESETS,
    score="eval_return", progress="episode_return",
    shown=("episode_return", "value_loss", "entropy", "explained_variance", "grad_norm"),
    headline=("num_envs", "num_steps", "lr", "optimizer"), budget="total_steps",
    default=False,
)
"""A2C's facts: trains what PPO trains, when asked (``--algo a2c``)."""
