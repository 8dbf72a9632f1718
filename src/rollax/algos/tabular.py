"""The seed-sized trainer for tabular policies: REINFORCE and tabular PPO-clip (the
``--algo ppo`` of finite tasks; neural PPO is :mod:`rollax.algos.ppo`), one compiled ``scan``.

One run is a pure function of a key (docs/contract.md §4)::

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
import functools
import math
from typing import Any, Literal, NamedTuple, cast

import jax
import jax.numpy as jnp
import optax

from rollax import guards
from rollax.algos.base import (
    Algorithm,
    AlgorithmSpec,
    Report,
    Task,
    added,
    env_batch,
    hyperparams_type,
    run_length,
    traced,
)
from rollax.collect import Trajectory, collect
from rollax.envs.base import Environment
from rollax.envs.masks import has_action_mask
from rollax.envs.registry import make_configured
from rollax.exact import policy_return
from rollax.losses import live_mean, ppo_clip_loss, ratio_stats, reinforce_loss
from rollax.policies import default_policy
from rollax.returns import reward_to_go
from rollax.sharding import constrain_envs
from rollax.validate import check_count, check_seed, is_real

METHODS = ("ppo", "reinforce")


@dataclasses.dataclass(frozen=True)
class TabularConfig:
    """Settings of the seed-sized tabular trainer (defaults: docs/contract.md §4)."""

    algo: Literal["ppo", "reinforce"] = "ppo"
    """Policy-gradient method: 'ppo' (clipped surrogate) or 'reinforce'."""
    env: str = "corridor"
    """A finite task from the registry: corridor or a Gymnasium toy-text name."""
    seed: int = 0
    """The root key is jax.random.key(seed)."""
    updates: int = run_length(40)
    """Number of updates, each on a fresh on-policy batch."""
    batch_size: int = env_batch(256)
    """Episodes (environments) per batch, B."""
    horizon: int | None = None
    """Episode time limit and rollout length T (default: the environment's, 8 for corridor)."""
    env_options: tuple[str, ...] = added((), stored=())
    """Keyword options of the environment's constructor, each KEY=VALUE (true/false, a number
    or text), e.g. is_slippery=false for FrozenLake-v1."""
    epochs: int | None = None
    """Full-batch gradient steps per batch (default: 3 for ppo, 1 for reinforce)."""
    lr: float = traced(0.5)
    """Learning rate of plain gradient ascent."""
    clip_eps: float = traced(0.2)
    """PPO clip range epsilon, in (0, 1)."""


class TabularMetrics(NamedTuple):
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
    env_steps: jax.Array
    """Live environment steps taken so far (the padding of finished episodes not counted)."""


class TabularResult(NamedTuple):
    params: jax.Array
    """Final policy parameters."""
    exact_return: jax.Array
    """``(updates + 1,)``: exact return of the initial parameters, then after each update."""
    metrics: TabularMetrics


class TabularTrainState(NamedTuple):
    """What the trainer carries from one update to the next."""

    params: jax.Array
    key: jax.Array
    """The running key: each update splits it into (next running key, sample key)."""
    updates: jax.Array
    """The number of updates done so far (0 before the first)."""
    env_steps: jax.Array
    """Live environment steps taken so far."""


TabularHyperparams = hyperparams_type(TabularConfig)
"""The traced fields of :class:`TabularConfig` (``lr``, ``clip_eps``) as a NamedTuple, so a
sweep ``vmap``s over them."""


def resolve_config(config: TabularConfig, env: Environment | None = None) -> TabularConfig:
    """Check every setting and fill the defaults that depend on others (``epochs``,
    ``horizon``). Raises ``ValueError`` naming the setting and its allowed range. ``env``: the
    environment already built from ``config.env`` and ``config.horizon``, if any."""
    if config.algo not in METHODS:
        raise ValueError(f"algo must be one of {', '.join(METHODS)}; got {config.algo!r}")
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
    if env is None:
        env = make_configured(config.env, config.horizon, config.env_options)
    if not hasattr(env, "to_mdp"):
        raise ValueError(f"env must be a finite (tabular) task, {config.env!r} is not")
    if has_action_mask(env):
        raise ValueError(f"env {config.env!r} defines action_mask, which the tabular trainer "
                         f"does not take (its softmax table, entropy and exact return range "
                         f"over every action)")
    epochs = config.epochs if config.epochs is not None else (3 if config.algo == "ppo" else 1)
    return dataclasses.replace(config, horizon=env.horizon, epochs=epochs)


@dataclasses.dataclass(frozen=True)
class TabularParts:
    """The static parts of a tabular run."""

    config: TabularConfig
    env: Any
    checked: bool = False

    @functools.cached_property
    def policy(self):
        return default_policy(self.env)

    @property
    def horizon(self) -> int:
        assert self.config.horizon is not None  # resolve_config always fills it in
        return self.config.horizon

    @functools.cached_property
    def mdp(self):
        return self.env.to_mdp()

    def log_prob(self, params, traj: Trajectory):
        """``(T, B)`` log-probabilities of the stored actions under ``params``."""
        one = jax.vmap(jax.vmap(self.policy.log_prob, (None, 0, 0)), (None, 0, 0))
        return one(params, traj.observation, traj.action)

    def loss(self, params, traj: Trajectory, targets, clip_eps):
        log_prob = self.log_prob(params, traj)
        if self.config.algo == "reinforce":
            return reinforce_loss(log_prob, targets, traj.active)
        return ppo_clip_loss(log_prob, traj.log_prob, targets, traj.active, clip_eps)

    def entropy(self, params, observation):
        """``(T, B)`` entropy of the policy at each observation."""
        actions = jnp.arange(self.env.action_space.n, dtype=jnp.int32)

        def one(obs):
            log_p = jax.vmap(self.policy.log_prob, (None, None, 0))(params, obs, actions)
            return -jnp.sum(jnp.exp(log_p) * log_p)

        return jax.vmap(jax.vmap(one))(observation)


def _gradient_steps(parts: TabularParts, state: TabularTrainState, traj, targets, hp):
    """``epochs`` full-batch gradient steps: ``(params, (losses, grad norms))``."""
    optimiser = optax.sgd(hp.lr)  # params <- params - lr * grad
    update_number = state.updates + 1

    def epoch(params: jax.Array, _):
        loss, grad = jax.value_and_grad(parts.loss)(params, traj, targets, hp.clip_eps)
        step, _ = optimiser.update(grad, optimiser.init(params))
        # optax types the result as a generic pytree; here it is the single array ``params``
        params = cast(jax.Array, optax.apply_updates(params, step))
        if parts.checked:
            guards.check_step(update_number, loss, grad, params)
        return params, (loss, optax.tree.norm(grad))

    return jax.lax.scan(epoch, state.params, jnp.arange(parts.config.epochs))


def update(parts: TabularParts, state: TabularTrainState, hp):
    """One update on a fresh batch: ``(next state, TabularMetrics)``."""
    key, sample_key = jax.random.split(state.key)
    _, traj = collect(parts.env, parts.policy, state.params, sample_key,
                      parts.config.batch_size, parts.horizon)
    traj = constrain_envs(traj, axis=1)  # (T, B, ...): B split over devices, if any
    targets = reward_to_go(traj.reward)
    if parts.checked:
        guards.check_collected(traj, parts.env.action_space, state.updates + 1)
    params, (losses, grad_norms) = _gradient_steps(parts, state, traj, targets, hp)
    ratio = jnp.exp(parts.log_prob(params, traj) - traj.log_prob)
    live = traj.active
    moved = ratio_stats(ratio, jnp.log(ratio), hp.clip_eps, live)
    env_steps = state.env_steps + jnp.sum(live).astype(jnp.int32)
    metrics = TabularMetrics(
        exact_return=policy_return(parts.mdp, parts.policy, params),
        episode_return=jnp.mean(jnp.sum(traj.reward, axis=0)),
        episode_length=jnp.mean(jnp.sum(live, axis=0).astype(jnp.float32)),
        loss=losses[0], grad_norm=grad_norms[0], approx_kl=moved.approx_kl,
        clip_fraction=moved.clip_fraction, ratio_min=moved.ratio_min,
        ratio_max=moved.ratio_max, entropy=live_mean(parts.entropy(params, traj.observation),
                                                      live),
        env_steps=env_steps,
    )
    return TabularTrainState(params=params, key=key, updates=state.updates + 1,
                             env_steps=env_steps), metrics


def make_algorithm(config: TabularConfig, checked: bool = False,
                   env: Environment | None = None) -> Algorithm:
    """Validate ``config`` (before anything compiles) and return the trainer's parts.
    ``checked`` stages the runtime checks of :mod:`rollax.guards` into each update."""
    config = resolve_config(config, env)
    if env is None or env.horizon != config.horizon:
        env = make_configured(config.env, config.horizon, config.env_options)
    parts = TabularParts(config, env, checked)

    def exact(state: TabularTrainState, hp) -> dict:
        return {"exact_return": policy_return(parts.mdp, parts.policy, state.params)}

    def result(state, metrics, initial, final) -> TabularResult:
        history = jnp.concatenate([initial["exact_return"][None], metrics.exact_return])
        return TabularResult(state.params, history, metrics)

    return Algorithm(
        config=config, num_updates=config.updates,
        env_steps_per_update=config.batch_size * parts.horizon,
        episodes_per_update=config.batch_size,
        init=lambda key, hp: TabularTrainState(
            params=parts.policy.init(), key=key, updates=jnp.zeros((), jnp.int32),
            env_steps=jnp.zeros((), jnp.int32)),
        update=functools.partial(update, parts), evaluate=exact, result=result, env=env,
        policy=parts.policy, params=lambda state: state.params,
        env_batch_fields=(),  # the batch lives inside one update only
        policy_extras=lambda params: {"exact_return": policy_return(parts.mdp, parts.policy,
                                                                    params)},
    )


# --- what the layers above ask (rollax.algos.registry) ---------------------------------------

SPEC = AlgorithmSpec(
    name="tabular", config_type=TabularConfig, build=make_algorithm,
    trains=Task("tabular", "a finite task, one with to_mdp",
                lambda env: hasattr(env, "to_mdp")),
    report=Report(score="exact_return", progress="exact_return",
                  shown=("exact_return", "episode_return", "loss", "approx_kl",
                         "clip_fraction"),
                  headline=("updates", "batch_size", "horizon", "epochs", "lr")),
)
"""The tabular trainer's facts: the default for every finite task (one with ``to_mdp``)."""
