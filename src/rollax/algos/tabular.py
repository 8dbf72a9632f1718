"""The seed-sized trainer for tabular policies: REINFORCE and PPO-clip, one compiled ``scan``.

One run is a pure function of a key (spec §4)::

    params = zeros; history = [exact_return(params)]
    repeat `updates` times:
        key, sample_key = split(key)                       # in that order
        trajectory = collect(env, policy, params, sample_key, B, T = horizon)
        G = reward_to_go(trajectory.reward)                # frozen targets
        repeat `epochs` times (REINFORCE: exactly once):
            params = params - lr * grad(loss)(params)      # full batch, plain gradient step
        history.append(exact_return(params))

REINFORCE minimises ``reinforce_loss``; PPO minimises ``ppo_clip_loss`` with the reward-to-go as
advantage and the behaviour log-probs stored at collection time as the fixed denominator.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Callable, Literal, NamedTuple

import jax
import jax.numpy as jnp
import optax

from rollax import guards
from rollax.algos.base import Algorithm
from rollax.collect import Trajectory, collect
from rollax.envs.registry import make
from rollax.exact import policy_return
from rollax.losses import ppo_clip_loss, reinforce_loss
from rollax.policies import default_policy
from rollax.returns import reward_to_go
from rollax.sharding import constrain_envs
from rollax.validate import check_count, check_seed, is_real

ALGOS = ("ppo", "reinforce")


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """Settings of the seed-sized tabular trainer (defaults are the spec's)."""

    algo: Literal["ppo", "reinforce"] = "ppo"
    """Policy-gradient method: 'ppo' (clipped surrogate) or 'reinforce'."""
    env: str = "corridor"
    """A finite task from the registry: corridor or a Gymnasium toy-text name."""
    seed: int = 0
    """The root key is jax.random.key(seed)."""
    updates: int = 40
    """Number of updates, each on a fresh on-policy batch."""
    batch_size: int = 256
    """Episodes (environments) per batch, B."""
    horizon: int | None = None
    """Episode time limit and rollout length T (default: the environment's, 8 for corridor)."""
    epochs: int | None = None
    """Full-batch gradient steps per batch (default: 3 for ppo, 1 for reinforce)."""
    lr: float = 0.5
    """Learning rate of plain gradient ascent."""
    clip_eps: float = 0.2
    """PPO clip range epsilon, in (0, 1)."""


class TrainMetrics(NamedTuple):
    """Per-update diagnostics; each field has shape ``(updates,)``."""

    exact_return: jax.Array
    """Exact expected return after the update."""
    episode_return: jax.Array
    """Mean sampled episode return of the batch the update used."""
    episode_length: jax.Array
    """Mean number of live steps per episode in that batch."""
    loss: jax.Array
    """Loss at the first epoch (before any step on this batch)."""
    grad_norm: jax.Array
    """Global norm of the first epoch's gradient."""
    approx_kl: jax.Array
    """k3 estimate of KL(behaviour || updated) over live cells: mean((r - 1) - log r)."""
    clip_fraction: jax.Array
    """Fraction of live cells whose final ratio lies outside [1 - eps, 1 + eps]."""
    ratio_min: jax.Array
    """Smallest final ratio over live cells."""
    ratio_max: jax.Array
    """Largest final ratio over live cells."""
    entropy: jax.Array
    """Mean entropy (nats) of the updated policy over the batch's live observations."""


class TrainResult(NamedTuple):
    params: jax.Array
    """Final policy parameters."""
    exact_return: jax.Array
    """``(updates + 1,)``: exact return of the initial parameters, then after each update."""
    metrics: TrainMetrics


class TabularState(NamedTuple):
    """What the trainer carries from one update to the next."""

    params: jax.Array
    key: jax.Array
    """The running key: each update splits it into (next running key, sample key)."""
    update: jax.Array
    """Updates done so far."""


class TabularHyperparams(NamedTuple):
    """Numeric settings (traced, so they can be swept with ``vmap``)."""

    lr: float | jax.Array
    clip_eps: float | jax.Array


def resolve_config(config: TrainConfig) -> TrainConfig:
    """Check every setting and fill the defaults that depend on others (``epochs``,
    ``horizon``). Raises ``ValueError`` naming the setting and its allowed range."""
    if config.algo not in ALGOS:
        raise ValueError(f"algo must be one of {', '.join(ALGOS)}; got {config.algo!r}")
    check_seed(config.seed)
    for name in ("updates", "batch_size"):
        check_count(name, getattr(config, name))
    if config.horizon is not None:
        check_count("horizon", config.horizon)
    if config.epochs is not None:
        check_count("epochs", config.epochs)
    if config.algo == "reinforce" and config.epochs not in (None, 1):
        raise ValueError(
            f"epochs must be 1 for algo reinforce (one update per fresh rollout), "
            f"got {config.epochs}"
        )
    if not is_real(config.lr) or not math.isfinite(config.lr) or config.lr <= 0:
        raise ValueError(f"lr must be a finite number > 0, got {config.lr!r}")
    if not is_real(config.clip_eps) or not 0 < config.clip_eps < 1:
        raise ValueError(f"clip_eps must be a number in (0, 1), got {config.clip_eps!r}")
    env = make(config.env) if config.horizon is None else make(config.env, horizon=config.horizon)
    if not hasattr(env, "to_mdp"):
        raise ValueError(f"env must be a finite (tabular) task, {config.env!r} is not")
    epochs = config.epochs if config.epochs is not None else (3 if config.algo == "ppo" else 1)
    return dataclasses.replace(config, horizon=env.horizon, epochs=epochs)


def _live_mean(x, active):
    return jnp.sum(jnp.where(active, x, 0.0)) / jnp.maximum(jnp.sum(active), 1)


def make_algorithm(config: TrainConfig, checked: bool = False) -> Algorithm:
    """Validate ``config`` (before anything compiles) and return the trainer's parts.
    ``checked`` stages the runtime checks of :mod:`rollax.guards` into each update."""
    config = resolve_config(config)
    env = make(config.env, horizon=config.horizon)
    policy = default_policy(env)
    mdp = env.to_mdp()
    batch_size, num_steps = config.batch_size, config.horizon
    actions = jnp.arange(env.action_space.n, dtype=jnp.int32)

    def batch_log_prob(params, traj: Trajectory):
        return jax.vmap(jax.vmap(policy.log_prob, (None, 0, 0)), (None, 0, 0))(
            params, traj.observation, traj.action
        )

    def loss_fn(params, traj: Trajectory, targets, clip_eps):
        log_prob = batch_log_prob(params, traj)
        if config.algo == "reinforce":
            return reinforce_loss(log_prob, targets, traj.active)
        return ppo_clip_loss(log_prob, traj.log_prob, targets, traj.active, clip_eps)

    def entropy(params, observation):
        def one(obs):
            log_p = jax.vmap(policy.log_prob, (None, None, 0))(params, obs, actions)
            return -jnp.sum(jnp.exp(log_p) * log_p)

        return jax.vmap(jax.vmap(one))(observation)

    def init(key: jax.Array, hp: TabularHyperparams) -> TabularState:
        return TabularState(policy.init(), key, jnp.zeros((), jnp.int32))

    def update(state: TabularState, hp: TabularHyperparams):
        optimiser = optax.sgd(hp.lr)  # params <- params - lr * grad
        key, sample_key = jax.random.split(state.key)
        _, traj = collect(env, policy, state.params, sample_key, batch_size, num_steps)
        traj = constrain_envs(traj, axis=1)  # (T, B, ...): B split over devices, if any
        targets = reward_to_go(traj.reward)
        if checked:
            guards.check_observations(traj.observation, state.update + 1)
            guards.check_actions(traj.action, env.action_space, state.update + 1)

        def epoch(params, _):
            loss, grad = jax.value_and_grad(loss_fn)(params, traj, targets, hp.clip_eps)
            if checked:
                guards.check_finite("loss", loss, state.update + 1)
                guards.check_finite("gradient", grad, state.update + 1)
            step, _ = optimiser.update(grad, optimiser.init(params))
            params = optax.apply_updates(params, step)
            if checked:
                guards.check_finite("parameters", params, state.update + 1)
            return params, (loss, optax.tree.norm(grad))

        params, (losses, grad_norms) = jax.lax.scan(epoch, state.params,
                                                    jnp.arange(config.epochs))
        ratio = jnp.exp(batch_log_prob(params, traj) - traj.log_prob)
        live = traj.active
        clipped = jnp.abs(ratio - 1.0) > hp.clip_eps
        metrics = TrainMetrics(
            exact_return=policy_return(mdp, policy, params),
            episode_return=jnp.mean(jnp.sum(traj.reward, axis=0)),
            episode_length=jnp.mean(jnp.sum(live, axis=0).astype(jnp.float32)),
            loss=losses[0],
            grad_norm=grad_norms[0],
            approx_kl=_live_mean((ratio - 1.0) - jnp.log(ratio), live),
            clip_fraction=_live_mean(clipped.astype(jnp.float32), live),
            ratio_min=jnp.min(jnp.where(live, ratio, jnp.inf)),
            ratio_max=jnp.max(jnp.where(live, ratio, -jnp.inf)),
            entropy=_live_mean(entropy(params, traj.observation), live),
        )
        return TabularState(params, key, state.update + 1), metrics

    def evaluate(state: TabularState, hp: TabularHyperparams) -> dict:
        return {"exact_return": policy_return(mdp, policy, state.params)}

    return Algorithm(
        config=config, hyperparams=TabularHyperparams(config.lr, config.clip_eps),
        num_updates=config.updates, env_steps_per_update=batch_size * num_steps,
        init=init, update=update, evaluate=evaluate, params=lambda state: state.params,
        env=env, policy=policy, policy_params=lambda state: state.params, checked=checked,
    )


def make_train(config: TrainConfig) -> Callable[..., TrainResult]:
    """Validate ``config`` (before anything compiles) and return the compiled ``train(key)``.

    ``train`` is pure, so seeds vectorise: ``jax.vmap(train)(jax.random.split(key, 8))``;
    ``train(key, hp)`` takes the numeric hyperparameters as traced inputs (for sweeps).
    """
    algo = make_algorithm(config)

    def train(key: jax.Array, hp: TabularHyperparams | None = None) -> TrainResult:
        hp = algo.hyperparams if hp is None else hp
        state = algo.init(key, hp)
        initial = algo.evaluate(state, hp)["exact_return"]
        state, metrics = jax.lax.scan(lambda s, _: algo.update(s, hp), state, None,
                                      algo.num_updates)
        history = jnp.concatenate([initial[None], metrics.exact_return])
        return TrainResult(state.params, history, metrics)

    return jax.jit(train)


def train(config: TrainConfig, key: jax.Array | None = None) -> TrainResult:
    """Train once: ``make_train(config)(key)``, the key defaulting to ``key(config.seed)``."""
    run = make_train(config)
    return run(jax.random.key(config.seed) if key is None else key)
