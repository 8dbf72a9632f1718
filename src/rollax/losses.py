"""The policy-gradient losses and their diagnostics, every algorithm's (minimised by gradient
descent).

- over time-major ``(T, B)`` arrays of whole episodes (``active`` marks the live cells):
  :func:`reinforce_loss` and :func:`ppo_clip_loss` sum over live cells and divide by the number
  of episodes ``B`` (the objective is return per episode, not per transition); their targets,
  advantages and stored behaviour log-probabilities are held under ``stop_gradient``;
  :func:`normalized_sum` turns per-cell terms into an objective per episode, per live step or
  per group; :func:`k3_penalty` estimates a KL divergence to a reference policy per cell;
- over a flat batch ``(N,)`` of rollout cells: PPO's :func:`actor_critic_loss` (with
  :func:`ppo_clip_objective` and :func:`clipped_value_loss`) and A2C's :func:`a2c_loss`;
- diagnostics: :func:`ratio_stats` (how far an update moved the policy),
  :func:`explained_variance` (how much of the targets' variance the values explain),
  :func:`live_mean`.
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


def weighed_mean(x: jax.Array, live: jax.Array | None = None) -> jax.Array:
    """``mean(x)``, or with ``live`` the mean over the live cells (:func:`live_mean`)."""
    return jnp.mean(x) if live is None else live_mean(x, live)


def normalized_advantages(advantage: jax.Array, live: jax.Array | None = None) -> jax.Array:
    """``(A - mean) / (std + 1e-8)``, the mean and the standard deviation over every cell, or
    over the live cells only (``live``; the others then are 0 and weigh nothing)."""
    if live is None:
        return (advantage - advantage.mean()) / (advantage.std() + 1e-8)
    mean = live_mean(advantage, live)
    std = jnp.sqrt(live_mean((advantage - mean) ** 2, live))
    return jnp.where(live, (advantage - mean) / (std + 1e-8), 0.0)


def clipped_value_loss(value: jax.Array, behaviour_value: jax.Array, target: jax.Array,
                       clip_eps, clip: bool = True, live: jax.Array | None = None) -> jax.Array:
    """``0.5 * mean(max((V - G)^2, (V_b + clip(V - V_b, -eps, eps) - G)^2))`` over a flat batch
    ``(N,)``; without ``clip``, ``0.5 * mean((V - G)^2)``. ``V_b`` is the value stored at
    collection time, ``G`` the target. ``live``: the mean over the live cells only."""
    loss = (value - target) ** 2
    if clip:
        clipped = behaviour_value + jnp.clip(value - behaviour_value, -clip_eps, clip_eps)
        loss = jnp.maximum(loss, (clipped - target) ** 2)
    return 0.5 * weighed_mean(loss, live)


def actor_critic_loss(log_prob, behaviour_log_prob, advantage, value, behaviour_value, target,
                      entropy, *, clip_eps, vf_coef, ent_coef, clip_value: bool = True,
                      normalize_advantages: bool = True, live: jax.Array | None = None):
    """PPO's actor-critic loss over a flat minibatch (every argument ``(N,)``)::

        r = exp(log_prob - behaviour_log_prob)
        A = (advantage - mean) / (std + 1e-8)                     # when normalising
        L = -mean(min(r A, clip(r, 1 - eps, 1 + eps) A))          # ppo_clip_objective
            + vf_coef * clipped_value_loss(value, behaviour_value, target, eps, clip_value)
            - ent_coef * mean(entropy)

    Returns ``(L, aux)`` with ``aux`` the policy loss, value loss, entropy and the
    :class:`RatioStats` fields. The behaviour log-probs, values, advantages and targets are
    the frozen batch (their gradients are not taken: pass them as data).

    ``live`` (bool ``(N,)``, or None: every cell): the cells that weigh. Every mean above,
    the advantages' mean and deviation and the ratio's statistics are then over the live cells
    only, and the others add nothing to ``L`` nor to its gradient (a league's opponent moves,
    ``docs/contract.md §8``).
    """
    log_ratio = log_prob - behaviour_log_prob
    ratio = jnp.exp(log_ratio)
    if normalize_advantages:
        advantage = normalized_advantages(advantage, live)
    if live is not None:  # a dead cell's ratio (another policy's log-prob) stays finite
        ratio = jnp.where(live, ratio, 1.0)
        log_ratio = jnp.where(live, log_ratio, 0.0)
    policy_loss = -weighed_mean(ppo_clip_objective(ratio, advantage, clip_eps), live)
    value_loss = clipped_value_loss(value, behaviour_value, target, clip_eps, clip_value, live)
    entropy = weighed_mean(entropy, live)
    total = policy_loss + vf_coef * value_loss - ent_coef * entropy
    aux = dict(policy_loss=policy_loss, value_loss=value_loss, entropy=entropy,
               **ratio_stats(ratio, log_ratio, clip_eps, live)._asdict())
    return total, aux


def a2c_loss(log_prob, advantage, value, target, entropy, *, vf_coef, ent_coef,
             normalize_advantages: bool = False, live: jax.Array | None = None):
    """A2C's loss over a flat batch (every argument ``(N,)``)::

        A = (advantage - mean) / (std + 1e-8)                      # when normalising
        L = -mean(A * log_prob) + vf_coef * mean((value - target)^2) - ent_coef * mean(entropy)

    Its policy gradient is ``-mean(A * grad log pi(a|s))``, the advantage actor-critic
    estimate. There is no 0.5 on the squared error (Stable-Baselines3's A2C has none, unlike
    :func:`clipped_value_loss`). The advantages and targets are frozen (``stop_gradient``).
    Returns ``(L, aux)`` with the policy loss, value loss and entropy.

    ``live`` (bool ``(N,)``, or None): the means over the live cells only, as in
    :func:`actor_critic_loss`.

    Example: ``A = (1, -1)``, ``log_prob = log(0.5, 0.25)``, ``value = target``, no entropy
    bonus: ``L = -(log 0.5 - log 0.25) / 2 = -log(2) / 2``.
    """
    advantage = jax.lax.stop_gradient(advantage)
    target = jax.lax.stop_gradient(target)
    if normalize_advantages:
        advantage = normalized_advantages(advantage, live)
    policy_loss = -weighed_mean(advantage * log_prob, live)
    value_loss = weighed_mean((value - target) ** 2, live)
    entropy = weighed_mean(entropy, live)
    total = policy_loss + vf_coef * value_loss - ent_coef * entropy
    return total, dict(policy_loss=policy_loss, value_loss=value_loss, entropy=entropy)


def k3_penalty(log_prob: jax.Array, reference_log_prob: jax.Array) -> jax.Array:
    """Per cell, the k3 estimate of ``KL(pi || pi_ref)`` from an action drawn by ``pi``::

        k3 = pi_ref / pi - log(pi_ref / pi) - 1        (computed from log-probabilities)

    Shapes: the two arrays alike (any shape); returns that shape. Each term is ``>= 0`` (0
    where the two policies agree), and its mean over ``pi``'s actions is unbiased for the KL
    divergence. Example: ``pi_ref / pi = 2`` gives ``1 - log 2 = 0.3069``.
    """
    log_ratio = reference_log_prob - log_prob
    return jnp.exp(log_ratio) - log_ratio - 1.0


NORMALIZATIONS = ("episode", "step", "group")
"""How a sum over a batch's live cells becomes an objective (:func:`normalized_sum`)."""


def normalized_sum(x: jax.Array, live: jax.Array, group_size: int,
                   normalization: str = "episode") -> jax.Array:
    """The objective of per-cell terms ``x (T, B)`` over the ``live`` cells ``(T, B)``::

        episode:  (1/B) sum_{t,b} live x                   (the contract's: per episode)
        step:     sum_{t,b} live x / sum_{t,b} live        (per live step: weighs long
                                                            episodes more)
        group:    (1/K) sum_k [sum_{t, b in k} live x / sum_{t, b in k} live]
                                                           (per live step within each of the
                                                            K groups of group_size episodes)

    Returns a scalar (a step or group without a live cell counts one step). Example: ``x`` all
    1 on 2 episodes of lengths 3 and 1: episode 2, step 1.
    """
    masked = jnp.where(live, x, 0.0)
    if normalization == "episode":
        return jnp.sum(masked) / x.shape[1]
    if normalization == "step":
        return jnp.sum(masked) / jnp.maximum(jnp.sum(live), 1)
    sums = jnp.sum(masked, axis=0).reshape(-1, group_size).sum(axis=1)
    steps = jnp.sum(live, axis=0).reshape(-1, group_size).sum(axis=1)
    return jnp.mean(sums / jnp.maximum(steps, 1))


def explained_variance(predicted: jax.Array, target: jax.Array,
                       live: jax.Array | None = None) -> jax.Array:
    """How much of the targets' variance the predictions explain::

        1 - Var(target - predicted) / Var(target)

    over every cell (any shape, the two arrays alike; ``jnp.var``), or over the cells where
    ``live`` is true (the variances as :func:`live_mean` of squared deviations from the live
    mean). Returns a scalar: 1 for perfect predictions, 0 for predicting the mean, negative
    when worse; NaN when the targets do not vary. Example: targets ``(1, 2, 3)``, predictions
    ``(1, 2, 2)``: ``1 - (2/9) / (2/3) = 2/3``.
    """
    if live is None:
        var = jnp.var(target)
        return jnp.where(var > 0, 1.0 - jnp.var(target - predicted) / var, jnp.nan)
    centred = target - live_mean(target, live)
    var = live_mean(centred ** 2, live)
    resid = target - predicted
    resid_var = live_mean((resid - live_mean(resid, live)) ** 2, live)
    return jnp.where(var > 0, 1.0 - resid_var / jnp.where(var > 0, var, 1.0), jnp.nan)
