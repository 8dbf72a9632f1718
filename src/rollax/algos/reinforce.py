"""REINFORCE for neural policies: ``rollax train --algo reinforce`` on any task PPO trains.

One update, on ``B`` complete episodes (:mod:`rollax.algos.episodic`)::

    traj = collect_groups(env, policy, params, key, B / G, G, T = horizon)
    G_t = r_t + gamma r_{t+1} + ... + gamma^(T-1-t) r_{T-1}      # reward-to-go, per episode
    b_t = 0                                  baseline none
          V(s_t)                             baseline value: the critic, fitted to G_t
          mean_{j != i in the group} G^j_t   baseline loo: the group's other episodes
    A_t = G_t - b_t                          (standardised over live cells when asked)
    L = -(1/B) sum_{t,b} active [log pi(a_t|s_t) sg(A_t) + ent_coef H_t]
        + vf_coef (1/B) sum_{t,b} active (V(s_t) - G_t)^2 / 2        (baseline value only)
    params <- adam(clip_per_network(grad L))                         # one step per batch

The objective is normalised per episode (divided by ``B``, the number of episodes, never by
the number of steps), so with ``gamma = 1`` and no baseline ``-grad L`` is an unbiased
estimate of the gradient of the expected episode return. Both baselines keep it unbiased: the
critic's ``V(s_t)`` does not depend on the action taken at ``t``, and the leave-one-out mean
is computed from other episodes, independent of episode ``i``'s actions. The leave-one-out
baseline needs ``group_size >= 2``: the episodes of a group start from the same state.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Literal, NamedTuple

import jax
import jax.numpy as jnp

from rollax.algos import episodic, optim
from rollax.algos.base import hyperparams_type, traced
from rollax.algos.episodic import EpisodicConfig, EpisodicParts, EpisodicState
from rollax.losses import explained_variance, live_mean, normalized_sum
from rollax.returns import discounted_returns, group_mean
from rollax.validate import check_real

__all__ = ["BASELINES", "PRESETS", "SPEC", "ReinforceConfig", "ReinforceHyperparams",
           "ReinforceMetrics", "ReinforceResult", "advantages", "check"]

BASELINES = ("none", "value", "loo")


@dataclasses.dataclass(frozen=True)
class ReinforceConfig(EpisodicConfig):
    """REINFORCE settings (the shared ones: :class:`rollax.algos.episodic.EpisodicConfig`)."""

    baseline: Literal["none", "value", "loo"] = "value"
    """What is subtracted from the reward-to-go: none, value (a learned state value fitted to
    the returns) or loo (the mean reward-to-go of the other episodes of the group; needs
    group_size >= 2)."""
    gamma: float = traced(0.99)
    """Discount of the reward-to-go, in (0, 1] (1: the episode return itself)."""
    vf_coef: float = traced(0.5)
    """Weight of the value loss (baseline value)."""
    normalize_advantages: bool = False
    """Standardise the advantages over the batch's live cells (a per-batch shift and scale)."""


ReinforceHyperparams = hyperparams_type(ReinforceConfig)
"""The traced fields of :class:`ReinforceConfig` (``lr``, ``ent_coef``, ``max_grad_norm``,
``gamma``, ``vf_coef``) as a NamedTuple."""


class ReinforceMetrics(NamedTuple):
    """Per-update diagnostics (each ``(updates,)``)."""

    loss: jax.Array
    policy_loss: jax.Array
    """``-(1/B) sum active log pi sg(A)``."""
    value_loss: jax.Array
    """``(1/B) sum active (V - G)^2 / 2`` (0 without the value baseline)."""
    entropy: jax.Array
    """Mean entropy over live cells."""
    explained_variance: jax.Array
    """``1 - Var(G - b) / Var(G)`` over live cells: how much of the returns' variance the
    baseline removes (0 for none; NaN when the returns do not vary)."""
    grad_norm: jax.Array
    """Norm of the actor's gradient before clipping."""
    episode_return: jax.Array
    """Mean return of the batch's episodes."""
    episode_length: jax.Array
    env_steps: jax.Array
    """Live environment steps taken so far."""


class ReinforceResult(NamedTuple):
    params: Any
    metrics: ReinforceMetrics
    eval_return: jax.Array
    state: EpisodicState


PRESETS: dict[str, dict] = {
    "CartPole-v1": dict(updates=150, batch_size=16, lr=3e-3, baseline="value"),
    "Acrobot-v1": dict(updates=300, batch_size=16, lr=3e-3, baseline="value"),
}
"""Tuned settings per task (overrides of the :class:`ReinforceConfig` defaults)."""


def advantages(returns: jax.Array, values: jax.Array, live: jax.Array, baseline: str,
               group_size: int) -> jax.Array:
    """``A = G - b`` for ``(T, B)`` reward-to-go ``returns``: ``b`` is 0 (none), ``values``
    (value) or the mean of the group's other episodes' ``returns`` at the same time step (loo;
    finished episodes count with their 0 reward-to-go)."""
    if baseline == "value":
        return returns - jax.lax.stop_gradient(values)
    if baseline == "loo":
        return returns - group_mean(jnp.where(live, returns, 0.0), group_size,
                                             leave_one_out=True)
    return returns


def update(parts: EpisodicParts, state: EpisodicState, hp):
    """One REINFORCE update on a fresh batch: ``(next state, ReinforceMetrics)``."""
    config = parts.config
    key, traj = episodic.collect_batch(parts, state)
    live = traj.active
    no_bootstrap = jnp.zeros_like(traj.reward)
    returns = discounted_returns(traj.reward, no_bootstrap, traj.terminated, traj.truncated,
                                 hp.gamma)
    returns = jnp.where(live, returns, 0.0)

    def terms(out: episodic.Replayed):
        """Each cell's advantage (fixed: no gradient) and the loss's parts from ``out``."""
        adv = advantages(returns, out.value, live, config.baseline, config.group_size)
        if config.normalize_advantages:
            mean = live_mean(adv, live)
            adv = (adv - mean) / (jnp.sqrt(live_mean((adv - mean) ** 2, live)) + 1e-8)
        adv = jax.lax.stop_gradient(adv)
        policy_loss = -normalized_sum(out.log_prob * adv, live, config.group_size)
        entropy = normalized_sum(out.entropy, live, config.group_size)
        value_loss = jnp.zeros(())
        if config.baseline == "value":
            value_loss = normalized_sum(0.5 * (out.value - returns) ** 2, live,
                                        config.group_size)
        total = policy_loss - hp.ent_coef * entropy + hp.vf_coef * value_loss
        baseline = returns - advantages(returns, out.value, live, config.baseline,
                                        config.group_size)
        return adv, total, dict(policy_loss=policy_loss, value_loss=value_loss,
                                entropy=live_mean(out.entropy, live),
                                explained_variance=explained_variance(baseline, returns, live))

    if not episodic.skips_padding(parts):  # a recurrent memory runs through every step:
        # the whole batch in one pass
        def loss(params):
            _, total, aux = terms(episodic.replay(parts, params, traj))
            return total, aux

        step = episodic.gradient_step(parts, state, loss, hp)
    else:  # the chunks holding a live cell only (short episodes: a fraction of T x B)
        out = episodic.replay_batch(parts, state.params, traj)
        adv, total, aux = terms(out)
        # the loss is linear in each cell's terms: its weight per cell, normalized_sum's
        weight = episodic.cell_weights(live, config.group_size)
        value_weight = hp.vf_coef * (config.baseline == "value")

        def per_cell(chunk: episodic.Replayed, d):
            return d["weight"] * (-chunk.log_prob * d["adv"] - hp.ent_coef * chunk.entropy
                                  + value_weight * 0.5 * (chunk.value - d["returns"]) ** 2)

        step = episodic.chunked_step(parts, state, traj,
                                     dict(weight=weight, adv=adv, returns=returns), per_cell,
                                     hp, value=total, aux=aux)
    ep_return, ep_length = episodic.episode_totals(traj)
    env_steps = state.env_steps + jnp.sum(live).astype(jnp.int32)
    aux = step.aux
    metrics = ReinforceMetrics(
        loss=step.loss, policy_loss=aux["policy_loss"], value_loss=aux["value_loss"],
        entropy=aux["entropy"], explained_variance=aux["explained_variance"],
        grad_norm=optim.actor_norm(step.grads), episode_return=jnp.mean(ep_return),
        episode_length=jnp.mean(ep_length), env_steps=env_steps)
    return state._replace(params=step.params, opt_state=step.opt_state, key=key,
                          updates=state.updates + 1, env_steps=env_steps), metrics


def init(parts: EpisodicParts, key: jax.Array, hp) -> EpisodicState:
    return episodic.fresh_state(parts, key, hp)


def check(config: ReinforceConfig) -> None:
    """Check REINFORCE's own settings (the shared ones: :func:`episodic.validate`)."""
    if config.baseline not in BASELINES:
        raise ValueError(f"baseline must be one of {', '.join(BASELINES)}, got "
                         f"{config.baseline!r}")
    check_real("gamma", config.gamma, 0, 1, low_open=True)
    check_real("vf_coef", config.vf_coef, 0, float("inf"), high_open=True)
    if config.baseline == "loo" and config.group_size < 2:
        raise ValueError(f"group_size must be at least 2 for baseline loo (the mean of the "
                         f"group's other episodes), got {config.group_size}")


SPEC = episodic.spec(
    "reinforce", ReinforceConfig, check=check, init=init, update=update,
    greedy_result=lambda state, metrics, eval_return: ReinforceResult(state.params, metrics,
                                                               eval_return, state),
    presets=PRESETS,
    shown=("episode_return", "policy_loss", "value_loss", "entropy", "explained_variance"),
    headline=("updates", "batch_size", "group_size", "baseline", "lr"))
"""REINFORCE's facts: trains what PPO trains when asked with ``--algo reinforce``."""
