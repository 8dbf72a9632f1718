"""Group-relative PPO without a critic: ``rollax train --algo grpo`` on any task PPO trains.

One update, on ``K`` groups of ``G`` complete episodes, each group from one start state
(:func:`rollax.collect.collect_groups`: the same reset key, action keys of their own)::

    traj = collect_groups(env, policy, params, key, K, G, T = horizon)     # behaviour log-probs
    R_i = sum_t r_t                                   # episode i's return
    A_i = R_i - mean_{j in group(i)} R_j              # its advantage, at every live step of i
    A_i = A_i / (std_{j in group(i)} R_j + 1e-8)      # only with scale_by_std
    repeat epochs times, full batch:
        r = pi(a|s) / pi_behaviour(a|s)
        J = N[ min(r A, clip(r, 1 - eps, 1 + eps) A) - kl_coef k3 + ent_coef H ]
        params <- adam(clip_per_network(-grad J))

``k3 = pi_ref/pi - log(pi_ref/pi) - 1`` estimates KL(pi || pi_ref) to the reference policy, the
initial parameters (kept in the state). ``N`` normalises the per-cell terms
(:func:`rollax.losses.normalized_sum`): per ``episode`` (the contract's), per live
``step`` (weighs long episodes more) or per ``group``. The critic-free advantage needs
resettable start states (every task here resets from a key) and complete episodes (the batch
runs each episode to its end within the horizon).

Dividing by the group's standard deviation weighs groups unevenly (a group whose returns barely
differ gets large advantages), and the group mean includes the episode itself, which shrinks
its own score term by ``(G - 1) / G``: both change the gradient's direction or scale from the
policy gradient's, which the exact gradient lab (``rollax gradients``) measures.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Literal, NamedTuple

import jax
import jax.numpy as jnp

from rollax.algos import episodic, optim
from rollax.algos.base import env_batch, hyperparams_type, traced
from rollax.algos.episodic import EpisodicConfig, EpisodicParts, EpisodicState
from rollax.losses import (
    NORMALIZATIONS,
    k3_penalty,
    live_mean,
    normalized_sum,
    ppo_clip_objective,
    ratio_stats,
)
from rollax.returns import group_mean, group_standardize
from rollax.validate import check_count, check_real

__all__ = ["PRESETS", "SPEC", "GRPOConfig", "GRPOHyperparams", "GRPOMetrics", "GRPOResult",
           "check", "group_advantages"]


@dataclasses.dataclass(frozen=True)
class GRPOConfig(EpisodicConfig):
    """Group-relative PPO settings (the shared ones: :class:`EpisodicConfig`)."""

    group_size: int = 8
    """Episodes per group G (from one start state), at least 2; must divide batch_size."""
    batch_size: int = env_batch(64)
    """Episodes per batch, B (= groups x group_size)."""
    epochs: int = 4
    """Full-batch gradient steps per batch, on the frozen behaviour log-probs."""
    clip_eps: float = traced(0.2)
    """Clip range of the ratio, in (0, 1)."""
    kl_coef: float = traced(0.0)
    """Weight of the k3 penalty towards the initial policy (0: none)."""
    scale_by_std: bool = False
    """Divide each advantage by its group's return standard deviation (off: that division
    weighs groups unevenly)."""
    normalization: Literal["episode", "step", "group"] = "episode"
    """How per-cell terms become the objective: episode (sum / episodes, the contract's),
    step (sum / live steps) or group (per live step within each group, averaged)."""


GRPOHyperparams = hyperparams_type(GRPOConfig)
"""The traced fields of :class:`GRPOConfig` (``lr``, ``ent_coef``, ``max_grad_norm``,
``clip_eps``, ``kl_coef``) as a NamedTuple."""


class GRPOMetrics(NamedTuple):
    """Per-update diagnostics (each ``(updates,)``)."""

    policy_loss: jax.Array
    """Minus the clipped objective at the first epoch (ratio 1)."""
    kl_to_reference: jax.Array
    """Mean k3 estimate of KL(pi || pi_ref) over live cells, at the first epoch."""
    entropy: jax.Array
    approx_kl: jax.Array
    """k3 estimate of KL(behaviour || updated) over live cells after the epochs."""
    clip_fraction: jax.Array
    """Fraction of live cells whose final ratio left [1 - eps, 1 + eps]."""
    flat_groups: jax.Array
    """Fraction of groups whose episodes all returned the same (zero advantage: no signal)."""
    grad_norm: jax.Array
    """Norm of the actor's gradient at the first epoch, before clipping."""
    episode_return: jax.Array
    episode_length: jax.Array
    env_steps: jax.Array


class GRPOResult(NamedTuple):
    params: Any
    metrics: GRPOMetrics
    eval_return: jax.Array
    state: EpisodicState


PRESETS: dict[str, dict] = {
    "CartPole-v1": dict(updates=50, batch_size=64, group_size=8, lr=3e-3),
    "Acrobot-v1": dict(updates=100, batch_size=64, group_size=8, lr=3e-3, ent_coef=0.01),
}
"""Tuned settings per task (overrides of the :class:`GRPOConfig` defaults)."""


def group_advantages(returns: jax.Array, group_size: int, scale_by_std: bool) -> jax.Array:
    """``(B,)`` episode returns to advantages: the return minus its group's mean (the episode
    included), divided by the group's standard deviation (``+ 1e-8``, ``ddof = 0``:
    :func:`rollax.returns.group_standardize`) when ``scale_by_std``."""
    if scale_by_std:
        return group_standardize(returns, group_size)
    return returns - group_mean(returns, group_size)


def update(parts: EpisodicParts, state: EpisodicState, hp):
    """One GRPO update: ``(next state, GRPOMetrics)``. Feed-forward networks read only the
    chunks of time steps that hold a live cell (:func:`rollax.algos.episodic.skips_padding`):
    the objective is a weighted sum of per-cell terms, so each epoch's gradient is summed
    chunk by chunk; a recurrent network replays the whole batch."""
    config = parts.config
    key, traj = episodic.collect_batch(parts, state)
    live = traj.active
    ep_return, ep_length = episodic.episode_totals(traj)
    advantage = jnp.broadcast_to(group_advantages(ep_return, config.group_size,
                                                  config.scale_by_std), live.shape)
    reference = episodic.replay_batch(parts, state.reference, traj).log_prob

    def terms(log_prob, entropy, behaviour, reference, advantage):
        """Each cell's clipped objective and its full term (with the k3 penalty and the
        entropy bonus), and the k3 estimate."""
        ratio = jnp.exp(log_prob - behaviour)
        clipped = ppo_clip_objective(ratio, advantage, hp.clip_eps)
        k3 = k3_penalty(log_prob, reference)
        return clipped, clipped - hp.kl_coef * k3 + hp.ent_coef * entropy, k3

    def summary(out: episodic.Replayed):
        """``(-objective, metrics)`` of the batch's cells replayed as ``out``."""
        clipped, full, k3 = terms(out.log_prob, out.entropy, traj.log_prob, reference, advantage)
        norm = normalized_sum(full, live, config.group_size, config.normalization)
        policy = normalized_sum(clipped, live, config.group_size, config.normalization)
        return -norm, dict(policy_loss=-policy, kl_to_reference=live_mean(k3, live),
                           entropy=live_mean(out.entropy, live))

    if not episodic.skips_padding(parts):
        def whole_epoch(inner, _):
            step = episodic.gradient_step(
                parts, inner, lambda p: summary(episodic.replay(parts, p, traj)), hp)
            return (inner._replace(params=step.params, opt_state=step.opt_state),
                    (step.aux, optim.actor_norm(step.grads)))

        stepped, (aux, grad_norms) = jax.lax.scan(whole_epoch, state, None, config.epochs)
        aux = jax.tree.map(lambda x: x[0], aux)  # the first epoch's
    else:  # normalized_sum is linear: a weight per cell, the gradient summed over live chunks
        data = dict(weight=episodic.cell_weights(live, config.group_size, config.normalization),
                    live=live, behaviour=traj.log_prob, reference=reference, advantage=advantage)

        def per_cell(chunk: episodic.Replayed, d):
            full = terms(chunk.log_prob, chunk.entropy, d["behaviour"], d["reference"],
                         d["advantage"])[1]
            return -d["weight"] * jnp.where(d["live"], full, 0.0)

        def chunked_epoch(inner, _):
            step = episodic.chunked_step(parts, inner, traj, data, per_cell, hp)
            return (inner._replace(params=step.params, opt_state=step.opt_state),
                    optim.actor_norm(step.grads))

        # the first epoch's metrics, from a forward pass under its parameters
        aux = summary(episodic.replay_batch(parts, state.params, traj))[1]
        stepped, grad_norms = jax.lax.scan(chunked_epoch, state, None, config.epochs)
    final = episodic.replay_batch(parts, stepped.params, traj).log_prob
    moved = ratio_stats(jnp.exp(final - traj.log_prob), final - traj.log_prob, hp.clip_eps, live)
    flat = jnp.all(advantage[0].reshape(-1, config.group_size) == 0, axis=1)
    env_steps = state.env_steps + jnp.sum(live).astype(jnp.int32)
    metrics = GRPOMetrics(
        policy_loss=aux["policy_loss"], kl_to_reference=aux["kl_to_reference"],
        entropy=aux["entropy"], approx_kl=moved.approx_kl, clip_fraction=moved.clip_fraction,
        flat_groups=jnp.mean(flat.astype(jnp.float32)), grad_norm=grad_norms[0],
        episode_return=jnp.mean(ep_return), episode_length=jnp.mean(ep_length),
        env_steps=env_steps)
    return stepped._replace(key=key, updates=state.updates + 1, env_steps=env_steps), metrics


def init(parts: EpisodicParts, key: jax.Array, hp) -> EpisodicState:
    return episodic.fresh_state(parts, key, hp, keep_reference=True)


def check(config: GRPOConfig) -> None:
    """Check GRPO's own settings (the shared ones: :func:`episodic.validate`)."""
    check_count("epochs", config.epochs)
    if isinstance(config.group_size, int) and not isinstance(config.group_size, bool) and (
            config.group_size < 2):
        raise ValueError(f"group_size must be at least 2 (an episode is compared with its "
                         f"group), got {config.group_size}")
    check_real("clip_eps", config.clip_eps, 0, 1, low_open=True, high_open=True)
    check_real("kl_coef", config.kl_coef, 0, float("inf"), high_open=True)
    if config.normalization not in NORMALIZATIONS:
        raise ValueError(f"normalization must be one of {', '.join(NORMALIZATIONS)}, "
                         f"got {config.normalization!r}")


SPEC = episodic.spec(
    "grpo", GRPOConfig, check=check, init=init, update=update,
    greedy_result=lambda state, metrics, eval_return: GRPOResult(state.params, metrics, eval_return,
                                                          state),
    presets=PRESETS,
    shown=("episode_return", "approx_kl", "clip_fraction", "flat_groups", "kl_to_reference"),
    headline=("updates", "batch_size", "group_size", "epochs", "lr"))
"""GRPO's facts: trains what PPO trains when asked with ``--algo grpo``."""
