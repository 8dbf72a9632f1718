"""Policy-gradient losses over time-major ``(T, B)`` arrays (minimised by gradient descent).

Both losses sum over live cells only and divide by the number of episodes ``B`` (the
objective is return per episode, not per transition). Targets, advantages and stored
behaviour log-probabilities are held under ``stop_gradient``.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp


def _check_same_shape(**arrays) -> None:
    shapes = {name: jnp.shape(a) for name, a in arrays.items()}
    first = next(iter(shapes.values()))
    if len(first) != 2 or any(s != first for s in shapes.values()):
        raise ValueError(f"expected (T, B) arrays of one shape, got {shapes}")


def reinforce_loss(log_prob: jax.Array, returns: jax.Array, active: jax.Array) -> jax.Array:
    """``-(1/B) sum_{t,b} active[t,b] * log_prob[t,b] * sg(returns[t,b])``.

    Shapes: all ``(T, B)``; returns a scalar. Its gradient is the REINFORCE estimate of minus
    the gradient of the expected episode return.
    """
    _check_same_shape(log_prob=log_prob, returns=returns, active=active)
    returns = jax.lax.stop_gradient(returns)
    total = jnp.sum(jnp.where(active, log_prob * returns, 0.0))
    return -total / log_prob.shape[1]


def ppo_clip_objective(ratio: jax.Array, advantage: jax.Array, clip_eps: float = 0.2):
    """Per-cell clipped surrogate ``min(ratio * A, clip(ratio, 1 - eps, 1 + eps) * A)``.

    Example: ``A = +1, ratio = 1.4`` gives 1.2; ``A = -1, ratio = 0.6`` gives -0.8.
    """
    clipped = jnp.clip(ratio, 1.0 - clip_eps, 1.0 + clip_eps)
    return jnp.minimum(ratio * advantage, clipped * advantage)


def ppo_clip_loss(
    log_prob: jax.Array,
    behaviour_log_prob: jax.Array,
    advantages: jax.Array,
    active: jax.Array,
    clip_eps: float = 0.2,
) -> jax.Array:
    """``-(1/B) sum active * min(r A, clip(r, 1-eps, 1+eps) A)`` with
    ``r = exp(log_prob - sg(behaviour_log_prob))`` and ``A = sg(advantages)``.

    Shapes: all ``(T, B)``; returns a scalar. The stored behaviour log-probs are the fixed
    denominator of the ratio: the loss has zero derivative with respect to them.
    """
    _check_same_shape(
        log_prob=log_prob, behaviour_log_prob=behaviour_log_prob, advantages=advantages,
        active=active,
    )
    ratio = jnp.exp(log_prob - jax.lax.stop_gradient(behaviour_log_prob))
    term = ppo_clip_objective(ratio, jax.lax.stop_gradient(advantages), clip_eps)
    return -jnp.sum(jnp.where(active, term, 0.0)) / log_prob.shape[1]


class RatioStats(NamedTuple):
    """How far an update moved the policy on a batch; ``r = pi_new(a|s) / pi_behaviour(a|s)``.
    Names follow Stable-Baselines3 and CleanRL."""

    approx_kl: jax.Array
    """k3 estimate of KL(behaviour || new): mean((r - 1) - log r), >= 0."""
    old_approx_kl: jax.Array
    """The naive estimate mean(-log r)."""
    clip_fraction: jax.Array
    """Fraction of cells with |r - 1| > eps."""
    ratio_min: jax.Array
    ratio_max: jax.Array


def ratio_stats(ratio: jax.Array, log_ratio: jax.Array, clip_eps, live: jax.Array | None = None
                ) -> RatioStats:
    """:class:`RatioStats` over every cell of ``ratio`` (any shape), or over the cells where
    ``live`` is true (means divide by the live count, at least 1). ``log_ratio`` is the log of
    ``ratio`` as the caller has it (computed from log-probs, or ``log(ratio)``)."""
    kl, naive = (ratio - 1.0) - log_ratio, -log_ratio
    clipped = (jnp.abs(ratio - 1.0) > clip_eps).astype(jnp.float32)
    if live is None:
        return RatioStats(jnp.mean(kl), jnp.mean(naive), jnp.mean(clipped), jnp.min(ratio),
                          jnp.max(ratio))
    return RatioStats(live_mean(kl, live), live_mean(naive, live), live_mean(clipped, live),
                      jnp.min(jnp.where(live, ratio, jnp.inf)),
                      jnp.max(jnp.where(live, ratio, -jnp.inf)))


def live_mean(x: jax.Array, live: jax.Array) -> jax.Array:
    """The mean of ``x`` over the cells where ``live`` is true: ``sum(x * live) /
    max(sum(live), 1)`` (0 when no cell is live)."""
    return jnp.sum(jnp.where(live, x, 0.0)) / jnp.maximum(jnp.sum(live), 1)


def clipped_value_loss(value: jax.Array, behaviour_value: jax.Array, target: jax.Array,
                       clip_eps, clip: bool = True) -> jax.Array:
    """``0.5 * mean(max((V - G)^2, (V_b + clip(V - V_b, -eps, eps) - G)^2))`` over a flat batch
    ``(N,)``; without ``clip``, ``0.5 * mean((V - G)^2)``. ``V_b`` is the value stored at
    collection time, ``G`` the target."""
    loss = (value - target) ** 2
    if clip:
        clipped = behaviour_value + jnp.clip(value - behaviour_value, -clip_eps, clip_eps)
        loss = jnp.maximum(loss, (clipped - target) ** 2)
    return 0.5 * jnp.mean(loss)


def actor_critic_loss(log_prob, behaviour_log_prob, advantage, value, behaviour_value, target,
                      entropy, *, clip_eps, vf_coef, ent_coef, clip_value: bool = True,
                      normalize_advantages: bool = True):
    """PPO's actor-critic loss over a flat minibatch (every argument ``(N,)``)::

        r = exp(log_prob - behaviour_log_prob)
        A = (advantage - mean) / (std + 1e-8)                     # when normalising
        L = -mean(min(r A, clip(r, 1 - eps, 1 + eps) A))          # ppo_clip_objective
            + vf_coef * clipped_value_loss(value, behaviour_value, target, eps, clip_value)
            - ent_coef * mean(entropy)

    Returns ``(L, aux)`` with ``aux`` the policy loss, value loss, entropy and the
    :class:`RatioStats` fields. The behaviour log-probs, values, advantages and targets are
    the frozen batch (their gradients are not taken: pass them as data).
    """
    log_ratio = log_prob - behaviour_log_prob
    ratio = jnp.exp(log_ratio)
    if normalize_advantages:
        advantage = (advantage - advantage.mean()) / (advantage.std() + 1e-8)
    policy_loss = -jnp.mean(ppo_clip_objective(ratio, advantage, clip_eps))
    value_loss = clipped_value_loss(value, behaviour_value, target, clip_eps, clip_value)
    entropy = jnp.mean(entropy)
    total = policy_loss + vf_coef * value_loss - ent_coef * entropy
    aux = dict(policy_loss=policy_loss, value_loss=value_loss, entropy=entropy,
               **ratio_stats(ratio, log_ratio, clip_eps)._asdict())
    return total, aux
