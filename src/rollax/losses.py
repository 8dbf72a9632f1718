"""Policy-gradient losses over time-major ``(T, B)`` arrays (minimised by gradient descent).

Both losses sum over live cells only and divide by the number of episodes ``B`` (the
objective is return per episode, not per transition). Targets, advantages and stored
behaviour log-probabilities are held under ``stop_gradient``.
"""

from __future__ import annotations

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
