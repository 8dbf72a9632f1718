"""An exact lab for policy-gradient estimators on finite MDPs (``rollax gradients``).

On a finite task the gradient of the expected episode return is known exactly, so every
sampled estimator can be measured against it: its bias, its variance and its mean squared
error, per batch size. The quantity is the undiscounted return ``J(theta)`` of the task's
horizon ``H`` (``exact.policy_return``) of a tabular policy with parameters ``theta``
(``policies.default_policy``: a softmax logit table, or the corridor's Bernoulli logits)::

    grad J = E[ sum_{t live} grad log pi(a_t | s_t) (G_t - b_t) ]        (any valid baseline b)

:func:`exact_gradient` is ``jax.grad`` of the dynamic programme. Each estimator of
:data:`ESTIMATORS` turns one batch of ``N`` absorbing episodes (collected with
:func:`rollax.collect.rollout`, ``T = H`` steps, ``N / G`` groups of ``G`` episodes that share
a start state) into one sample gradient of the shape of ``theta`` (the ascent direction).
:func:`estimate` draws ``K`` batches and returns the ``K`` sample gradients of every estimator
asked for, in one compiled program; :func:`summarise` and :func:`lab_table` turn them into the
table's rows. docs/gradients.md gives each estimator's equation and why it is or is not
unbiased.

Times and values: a live cell at time index ``t`` has ``H - t`` steps left (an absorbing
episode's ``elapsed`` equals ``t`` while it lives), so the exact value there is
``V_{H-t}(s_t)``, row ``H - t`` of :func:`value_table`. The horizon ends the objective: a
transition truncated at ``H`` is followed by ``V_0 = 0``, never by a bootstrap.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from rollax.collect import Trajectory, collect_groups
from rollax.exact import FiniteMDP, policy_return, policy_table
from rollax.losses import live_mean, ppo_clip_loss, reinforce_loss
from rollax.returns import gae, group_standardize, reward_to_go
from rollax.returns import group_mean as group_means
from rollax.validate import check_count, check_real, closest

PARAM_POINTS = ("random", "uniform")
"""Where the gradient is taken: ``random`` logits ``0.5 * normal(key)`` (the default: a
generic point where no symmetry cancels anything), or ``uniform`` (zero logits)."""
RANDOM_SCALE = 0.5
"""The standard deviation of the ``random`` logits."""
PPO_CLIP_EPS = 0.2
"""The clip range of the ``ppo-first-epoch`` surrogate (irrelevant at ratio 1)."""
CELLS_PER_CHUNK = 1 << 21
"""About this many trajectory cells (batches x episodes x steps) are held at once: the ``K``
batches are ``vmap``ped in chunks under one ``lax.map`` (one program; memory bounded)."""


@dataclasses.dataclass(frozen=True)
class Lab:
    """What an estimator needs besides the batch: the task, its exact MDP, the tabular policy
    and two settings. Hashable: a static argument of the compiled program."""

    env: Any
    """The environment the batches are collected on (``env.to_mdp()`` is :attr:`mdp`)."""
    mdp: FiniteMDP
    policy: Any
    """A tabular policy of the environment (``policies.default_policy(env)``)."""
    group_size: int = 4
    """``G``: episodes per group sharing a start state (``N`` must be a multiple)."""
    lam: float = 0.95
    """GAE's lambda of the ``gae-*`` estimators."""

    @property
    def horizon(self) -> int:
        return self.mdp.horizon


def finite_mdp(env, name: str = "") -> FiniteMDP:
    """``env.to_mdp()``, or a ``ValueError`` for an environment that has no transition table
    (the lab needs exact values) or whose observation is not the MDP's state index (the lab
    looks values up by observation: a ``Discrete`` space of ``S`` states, as the corridor's
    and every :class:`rollax.envs.tabular.TabularEnv`'s)."""
    label = name or type(env).__name__
    to_mdp = getattr(env, "to_mdp", None)
    if to_mdp is None:
        raise ValueError(f"{label} is not a finite task (no transition table to_mdp()): the "
                         f"gradient lab needs exact values; use the corridor or a toy-text task "
                         f"(FrozenLake-v1, Taxi-v4, CliffWalking-v1, ...)")
    mdp = to_mdp()
    space = env.observation_space
    if getattr(space, "n", None) != mdp.num_states or getattr(space, "shape", None) != ():
        raise ValueError(f"{label}: the gradient lab needs the observation to be the state "
                         f"index (a Discrete({mdp.num_states}) space), got {space}")
    return mdp


def lab_params(policy, point: str = "random", key: jax.Array | None = None) -> jax.Array:
    """The parameters the gradient is taken at (:data:`PARAM_POINTS`): zero logits, or
    ``RANDOM_SCALE * normal(key)`` of the policy's shape (``key`` required)."""
    if point not in PARAM_POINTS:
        raise ValueError(f"params must be one of {', '.join(PARAM_POINTS)}, got {point!r}")
    zero = policy.init()
    if point == "uniform":
        return zero
    if key is None:
        raise ValueError("random params need a key")
    return RANDOM_SCALE * jax.random.normal(key, zero.shape, jnp.float32)


# ---------------------------------------------------------------------------------------------
# The exact side


def exact_gradient(mdp: FiniteMDP, policy, params) -> jax.Array:
    """``grad_theta J``: ``jax.grad`` of :func:`rollax.exact.policy_return` (no sampling)."""
    return jax.grad(lambda p: policy_return(mdp, policy, p))(params)


def value_table(mdp: FiniteMDP, policy, params) -> jax.Array:
    """``V[k, s]``: the exact value of state ``s`` with ``k`` steps left, ``k = 0 .. H``
    (shape ``(H + 1, S)``; row 0 is zero), by the backup of :mod:`rollax.exact`."""
    pi = policy_table(policy, params, mdp.num_states, mdp.num_actions)
    r, c = mdp.expected_rewards(), mdp.continuation()

    def step(v, _):
        v = jnp.sum(pi * (r + jnp.einsum("sat,t->sa", c, v)), axis=-1)
        return v, v

    zero = jnp.zeros(mdp.num_states, jnp.float32)
    _, rows = jax.lax.scan(step, zero, None, length=mdp.horizon)
    return jnp.concatenate([zero[None], rows])


# ---------------------------------------------------------------------------------------------
# Batches


def lab_batch(lab: Lab, params, key: jax.Array, episodes: int) -> Trajectory:
    """One batch of ``N = episodes`` absorbing episodes of ``T = H`` steps from ``key``, in
    groups of ``G`` that share a start state and draw their own actions and transitions
    (:func:`rollax.collect.collect_groups`; with ``G = 1``, ``collect``'s batch)."""
    return collect_groups(lab.env, lab.policy, params, key, episodes // lab.group_size,
                          lab.group_size, lab.horizon)[1]


def log_probs(policy, params, traj: Trajectory) -> jax.Array:
    """``log pi(a_t | s_t)`` of every cell, ``(T, N)``, as a function of ``params``."""
    cell = jax.vmap(jax.vmap(policy.log_prob, in_axes=(None, 0, 0)), in_axes=(None, 0, 0))
    return cell(params, traj.observation, traj.action)


def episode_returns(traj: Trajectory) -> jax.Array:
    """``R_i = sum_t r_t``, one return per episode, ``(N,)``."""
    return traj.reward.sum(axis=0)


# ---------------------------------------------------------------------------------------------
# Gradients from weights


def score_gradient(lab: Lab, params, traj: Trajectory, weights: jax.Array) -> jax.Array:
    """``(1/N) sum_{live} grad log pi(a_t|s_t) w_t``: minus the gradient of
    :func:`rollax.losses.reinforce_loss` with ``returns = w`` (per-episode normalisation)."""
    weights = jnp.broadcast_to(weights, traj.reward.shape)
    def loss(p):
        return reinforce_loss(log_probs(lab.policy, p, traj), weights, traj.active)

    return jax.tree.map(jnp.negative, jax.grad(loss)(params))


def per_step_gradient(lab: Lab, params, traj: Trajectory, weights: jax.Array) -> jax.Array:
    """``(1/L) sum_{live} grad log pi(a_t|s_t) w_t`` with ``L`` the batch's live cells
    (:func:`rollax.losses.live_mean`): the average over transitions."""
    def objective(p):
        cells = log_probs(lab.policy, p, traj) * jax.lax.stop_gradient(weights)
        return live_mean(cells, traj.active)

    return jax.grad(objective)(params)


def next_states(traj: Trajectory) -> jax.Array:
    """``s_{t+1}`` of each cell, ``(T, N)``: the next row's observation (a finished episode
    keeps its last state); the last row repeats itself (only ever read with ``V_0 = 0``)."""
    return jnp.concatenate([traj.observation[1:], traj.observation[-1:]])


def exact_cell_values(lab: Lab, values: jax.Array, traj: Trajectory):
    """``(V_{H-t}(s_t), V_{H-t-1}(s_{t+1}))`` of every cell, each ``(T, N)``."""
    left = lab.horizon - jnp.arange(lab.horizon)[:, None]  # steps left at time t, (T, 1)
    now = values[left, traj.observation]
    after = values[left - 1, next_states(traj)]
    return now, after


def fitted_values(lab: Lab, traj: Trajectory, targets: jax.Array) -> jax.Array:
    """A value table ``V(s)`` fitted by least squares to ``targets`` over the batch's live
    cells: the mean target of each visited state, 0 for an unvisited one. It ignores the time
    left, as a critic of the state alone does."""
    live = traj.active.astype(jnp.float32)
    sums = jnp.zeros(lab.mdp.num_states).at[traj.observation].add(live * targets)
    counts = jnp.zeros(lab.mdp.num_states).at[traj.observation].add(live)
    return jnp.where(counts > 0, sums / jnp.maximum(counts, 1.0), 0.0)


def gae_gradient(lab: Lab, params, traj: Trajectory, now: jax.Array, after: jax.Array,
                 lam: float) -> jax.Array:
    """The score gradient with GAE(lambda) advantages (``gamma = 1``) from the critic's values
    ``now[t] = V(s_t)`` and ``after[t] = V(s_{t+1})``, both ``(T, N)``; the last row's
    ``after`` is replaced by 0 (the objective ends at ``H``)."""
    last = jnp.arange(lab.horizon)[:, None] == lab.horizon - 1
    after = jnp.where(last, 0.0, after)
    advantages, _ = gae(traj.reward, now, after, traj.terminated, traj.truncated, 1.0,
                                lam, traj.active)
    return score_gradient(lab, params, traj, advantages)


# ---------------------------------------------------------------------------------------------
# The estimators: (lab, params, batch, exact value table (H + 1, S)) -> sample gradient


Estimator = Callable[[Lab, Any, Trajectory, jax.Array], jax.Array]


def score(lab: Lab, params, traj: Trajectory, values: jax.Array) -> jax.Array:
    """Reward-to-go, no baseline: ``w_t = G_t``. Unbiased."""
    return score_gradient(lab, params, traj, reward_to_go(traj.reward))


def score_value(lab: Lab, params, traj: Trajectory, values: jax.Array) -> jax.Array:
    """``w_t = G_t - V_{H-t}(s_t)`` with the exact value as baseline. Unbiased."""
    now, _ = exact_cell_values(lab, values, traj)
    return score_gradient(lab, params, traj, reward_to_go(traj.reward) - now)


def score_loo(lab: Lab, params, traj: Trajectory, values: jax.Array) -> jax.Array:
    """``w_t^i = G_t^i - mean_{j != i in the group} G_t^j``. Unbiased (the other episodes
    are independent of episode ``i``'s actions given the shared start)."""
    togo = reward_to_go(traj.reward)
    others = group_means(togo, lab.group_size, leave_one_out=True)
    return score_gradient(lab, params, traj, togo - others)


def gae_exact(lab: Lab, params, traj: Trajectory, values: jax.Array) -> jax.Array:
    """GAE(lambda) with the exact ``V_{H-t}``. Unbiased for every lambda."""
    now, after = exact_cell_values(lab, values, traj)
    return gae_gradient(lab, params, traj, now, after, lab.lam)


def gae_fitted(lab: Lab, params, traj: Trajectory, values: jax.Array) -> jax.Array:
    """GAE(lambda) with :func:`fitted_values` of the batch's own reward-to-go. Biased."""
    table = fitted_values(lab, traj, reward_to_go(traj.reward))
    return gae_gradient(lab, params, traj, table[traj.observation], table[next_states(traj)],
                        lab.lam)


def ppo_first_epoch(lab: Lab, params, traj: Trajectory, values: jax.Array) -> jax.Array:
    """Minus the gradient of :func:`rollax.losses.ppo_clip_loss` at the behaviour parameters
    (ratio 1) with ``A_t = G_t``: equals ``score`` on the same batch."""
    togo = reward_to_go(traj.reward)
    def loss(p):
        return ppo_clip_loss(log_probs(lab.policy, p, traj), traj.log_prob, togo, traj.active,
                             PPO_CLIP_EPS)

    return jax.tree.map(jnp.negative, jax.grad(loss)(params))


def group_mean(lab: Lab, params, traj: Trajectory, values: jax.Array) -> jax.Array:
    """GRPO's advantage without the division: ``w^i = R_i - mean_{j in group} R_j`` (the mean
    includes episode ``i``). Its expectation is ``(G - 1) / G * grad J``: biased."""
    ret = episode_returns(traj)
    return score_gradient(lab, params, traj, ret - group_means(ret, lab.group_size))


def group_loo(lab: Lab, params, traj: Trajectory, values: jax.Array) -> jax.Array:
    """RLOO: ``w^i = R_i - mean_{j != i in the group} R_j``. Unbiased; exactly
    ``G / (G - 1)`` times ``group-mean`` on the same batch."""
    ret = episode_returns(traj)
    others = group_means(ret, lab.group_size, leave_one_out=True)
    return score_gradient(lab, params, traj, ret - others)


def group_std(lab: Lab, params, traj: Trajectory, values: jax.Array) -> jax.Array:
    """GRPO's scaled advantage, as ``--algo grpo --scale-by-std`` trains with
    (:func:`rollax.returns.group_standardize`): ``w^i = (R_i - mean_g R) / (std_g R + 1e-8)``
    with the group's population standard deviation (``ddof = 0``). Biased: each group is
    rescaled by its own spread."""
    advantage = group_standardize(episode_returns(traj), lab.group_size)
    return score_gradient(lab, params, traj, advantage)


def per_step_score(lab: Lab, params, traj: Trajectory, values: jax.Array) -> jax.Array:
    """``score`` divided by the batch's live cells ``L`` instead of ``N``. Biased: it
    estimates a gradient scaled by about ``1 / E[episode length]`` and, when lengths differ,
    turned towards the long episodes' steps."""
    return per_step_gradient(lab, params, traj, reward_to_go(traj.reward))


ESTIMATORS: dict[str, Estimator] = {
    "score": score,
    "score-value": score_value,
    "score-loo": score_loo,
    "gae-exact": gae_exact,
    "gae-fitted": gae_fitted,
    "ppo-first-epoch": ppo_first_epoch,
    "group-mean": group_mean,
    "group-loo": group_loo,
    "group-std": group_std,
    "per-step": per_step_score,
}
"""Every estimator by name, in table order."""

UNBIASED = frozenset({"score", "score-value", "score-loo", "gae-exact", "ppo-first-epoch",
                      "group-loo"})
"""The estimators whose expectation is ``grad J`` exactly (``gae-exact`` for every lambda)."""

NEEDS_GROUPS = frozenset({"score-loo", "group-mean", "group-loo", "group-std"})
"""The estimators that compare episodes within a group (``G >= 2``)."""


# ---------------------------------------------------------------------------------------------
# Settings, the compiled program and the table


def check_lab(episodes: Sequence[int], batches: int, group_size: int,
              names: Sequence[str], lam: float) -> None:
    """Every setting of a lab run, checked before anything is compiled (``ValueError``)."""
    unknown = [n for n in names if n not in ESTIMATORS]
    if unknown or not names:
        close = closest(unknown[0], ESTIMATORS) if unknown else None
        hint = f"did you mean {close}? " if close else ""
        raise ValueError(f"unknown estimator {unknown[0] if unknown else ''!r}: {hint}choose "
                         f"from {', '.join(ESTIMATORS)}")
    if len(set(names)) != len(names):
        raise ValueError(f"estimators are listed twice: {', '.join(names)}")
    check_count("group_size", group_size)
    if not episodes:
        raise ValueError("episodes needs at least one batch size")
    for n in episodes:
        check_count("episodes", n)
        if n % group_size:
            raise ValueError(f"episodes must be multiples of group_size {group_size}, got {n}")
    if len(set(episodes)) != len(episodes):
        raise ValueError(f"episodes are listed twice: {', '.join(map(str, episodes))}")
    if not isinstance(batches, int) or isinstance(batches, bool) or batches < 2:
        raise ValueError(f"batches must be an integer >= 2 (a variance needs two), got "
                         f"{batches!r}")
    grouped = sorted(NEEDS_GROUPS & set(names))
    if group_size < 2 and grouped:
        raise ValueError(f"group_size must be at least 2 for {', '.join(grouped)}, got "
                         f"{group_size}")
    check_real("lam", lam, 0.0, 1.0)


def chunk_size(episodes: int, horizon: int, batches: int) -> int:
    """Batches ``vmap``ped at once: about :data:`CELLS_PER_CHUNK` cells, at most ``K``."""
    return max(1, min(batches, CELLS_PER_CHUNK // (episodes * horizon)))


@functools.partial(jax.jit, static_argnames=("lab", "names", "episodes", "batches"))
def _estimate(lab: Lab, names: tuple[str, ...], params, key, episodes: int, batches: int):
    values = value_table(lab.mdp, lab.policy, params)

    def one(batch_key):
        traj = lab_batch(lab, params, batch_key, episodes)
        return {name: ESTIMATORS[name](lab, params, traj, values) for name in names}

    keys = jax.random.split(key, batches)
    return jax.lax.map(one, keys, batch_size=chunk_size(episodes, lab.horizon, batches))


def estimate(lab: Lab, params, key: jax.Array, names: Sequence[str], episodes: int,
             batches: int) -> dict[str, jax.Array]:
    """The ``K = batches`` sample gradients of each estimator in ``names``, ``{name: (K,
    *params.shape)}``, in one compiled program: batch ``k`` is :func:`lab_batch` of
    ``split(key, K)[k]``, and every estimator sees the same ``K`` batches."""
    check_lab([episodes], batches, lab.group_size, names, lab.lam)
    return _estimate(lab, tuple(names), params, key, int(episodes), int(batches))


def _cosine(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Cosine of the last axes, 0 where either vector is zero."""
    norms = np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1)
    return np.where(norms > 0, np.sum(a * b, axis=-1) / np.where(norms > 0, norms, 1.0), 0.0)


def summarise(grads, exact_grad) -> dict[str, float]:
    """The table's numbers for ``K`` sample gradients ``grads (K, ...)`` of one estimator
    against the exact gradient (float64, on the host); ``g_bar`` is their mean:

    - ``bias = ||g_bar - g*||``, ``bias_se`` its standard error by the delta method: with
      ``u = (g_bar - g*) / bias``, ``sd(u . g_k) / sqrt(K)`` (the norm's linearisation, exact
      to first order when the bias is resolved);
    - ``noise = sqrt(variance / K)``: what ``bias`` reads for an unbiased estimator
      (``E ||g_bar - g*||^2 = variance / K``), where the delta method no longer holds;
    - ``variance``: the trace of the sample covariance of the ``g_k`` (``ddof = 1``);
    - ``mse = mean_k ||g_k - g*||^2 = bias^2 + (K - 1) / K * variance``;
    - ``cosine``: between ``g_bar`` and ``g*``; ``mean_cosine``: the mean over batches of the
      cosine between ``g_k`` and ``g*`` (a zero ``g_k`` counts 0).
    """
    g = np.asarray(grads, np.float64).reshape(len(grads), -1)
    star = np.asarray(exact_grad, np.float64).reshape(-1)
    k = g.shape[0]
    diff = g.mean(0) - star
    bias = float(np.linalg.norm(diff))
    variance = float(np.sum(np.var(g, axis=0, ddof=1)))
    direction = diff / bias if bias > 0 else diff
    se = float(np.std(g @ direction, ddof=1) / math.sqrt(k))
    return {"bias": bias, "bias_se": se, "noise": math.sqrt(variance / k),
            "variance": variance, "mse": float(np.mean(np.sum((g - star) ** 2, axis=1))),
            "cosine": float(_cosine(g.mean(0), star)),
            "mean_cosine": float(np.mean(_cosine(g, star)))}


def lab_table(lab: Lab, params, key: jax.Array, names: Sequence[str],
              episodes: Sequence[int], batches: int,
              progress: Callable[[int], None] | None = None) -> list[dict[str, Any]]:
    """One row per estimator and batch size: ``{"estimator", "episodes", "unbiased"}`` (the
    claim of :data:`UNBIASED`) and :func:`summarise`'s numbers. Batch size ``N`` draws its
    batches from ``fold_in(key, N)`` (adding a size changes no other row); ``progress(N)``
    is called after each size."""
    check_lab(list(episodes), batches, lab.group_size, names, lab.lam)
    star = np.asarray(exact_gradient(lab.mdp, lab.policy, params))
    rows: dict[tuple[str, int], dict[str, Any]] = {}
    for n in episodes:
        grads = estimate(lab, params, jax.random.fold_in(key, n), names, n, batches)
        for name in names:
            rows[name, n] = {"estimator": name, "episodes": n, "unbiased": name in UNBIASED,
                             **summarise(np.asarray(grads[name]), star)}
        if progress is not None:
            progress(n)
    return [rows[name, n] for name in names for n in episodes]


def summary_facts(lab: Lab, params) -> dict[str, Any]:
    """The exact facts a table is read against: ``exact_return`` ``J(theta)``,
    ``exact_gradient_norm`` ``||grad J||`` and ``exact_gradient`` (nested lists)."""
    star = exact_gradient(lab.mdp, lab.policy, params)
    value = policy_return(lab.mdp, lab.policy, params)
    return {"exact_return": float(value), "exact_gradient_norm": float(jnp.linalg.norm(star)),
            "exact_gradient": np.asarray(star).tolist()}

