"""Returns over time-major ``(T, B)`` arrays, and the reward normalisation of PPO and A2C
(``normalize_rewards``: :func:`running_returns`, :func:`reward_norm_update`,
:func:`reward_normalize`)."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from rollax.policies import RunningStats, merge_moments


def reward_to_go(rewards: jax.Array) -> jax.Array:
    """Undiscounted reward-to-go ``G_t = sum_{k >= t} r_k`` along the time axis 0.

    For complete absorbing episodes (padding rewards are 0) this is the return from each step.
    Shapes: ``rewards (T, ...)`` -> ``(T, ...)``. Example: rewards ``(-0.01, -0.01, 1, 0)`` give
    ``(0.98, 0.99, 1, 0)``.
    """
    rewards = jnp.asarray(rewards)
    if rewards.ndim < 1:
        raise ValueError(f"rewards must have a leading time axis, got shape {rewards.shape}")
    return jnp.flip(jnp.cumsum(jnp.flip(rewards, 0), axis=0), 0)


def _check_time_major(**arrays) -> None:
    shapes = {name: jnp.shape(a) for name, a in arrays.items()}
    first = next(iter(shapes.values()))
    if len(first) < 1 or any(s != first for s in shapes.values()):
        raise ValueError(f"expected time-major arrays of one shape (T, ...), got {shapes}")


def gae(
    rewards: jax.Array,
    values: jax.Array,
    next_values: jax.Array,
    terminated: jax.Array,
    truncated: jax.Array,
    gamma: float | jax.Array,
    lam: float | jax.Array,
    active: jax.Array | None = None,
) -> tuple[jax.Array, jax.Array]:
    """Generalised advantage estimation over time-major ``(T, B)`` arrays.

    ``values[t] = V(s_t)``; ``next_values[t] = V(s'_t)``, the value of the true next state of
    transition t (the final observation when the episode ended there, before any reset)::

        delta_t = r_t + gamma * (1 - terminated_t) * next_values_t - values_t
        A_t     = delta_t + gamma * lam * (1 - done_t) * A_{t+1},   done = terminated | truncated

    A truncated episode is bootstrapped from the value of its real last state; a terminated one
    never is; the last row bootstraps from ``next_values[T-1]`` (the rollout cut). Cells with
    ``active = False`` (absorbing padding) get advantage 0. Returns ``(advantages, targets)``
    with ``targets = advantages + values``; with ``lam = 1`` the targets are the discounted
    returns of :func:`discounted_returns`.
    """
    _check_time_major(rewards=rewards, values=values, next_values=next_values,
                      terminated=terminated, truncated=truncated)
    terminated = jnp.asarray(terminated, bool)
    done = terminated | jnp.asarray(truncated, bool)
    delta = rewards + gamma * jnp.where(terminated, 0.0, next_values) - values
    if active is not None:
        delta = jnp.where(active, delta, 0.0)
    carry_on = gamma * lam * jnp.where(done, 0.0, 1.0)

    def step(next_advantage, x):
        delta_t, carry_on_t = x
        advantage = delta_t + carry_on_t * next_advantage
        return advantage, advantage

    _, advantages = jax.lax.scan(step, jnp.zeros_like(delta[0]), (delta, carry_on), reverse=True)
    return advantages, advantages + values


def discounted_returns(
    rewards: jax.Array,
    next_values: jax.Array,
    terminated: jax.Array,
    truncated: jax.Array,
    gamma: float,
) -> jax.Array:
    """Discounted returns over time-major ``(T, B)`` arrays, respecting episode boundaries::

        G_t = r_t + gamma * { 0                  if terminated_t
                            { V(s'_t)            if truncated_t, or t = T - 1 (rollout cut)
                            { G_{t+1}            otherwise

    ``next_values[t]`` is the value of the true next state of transition t (only read where
    the episode was truncated or the rollout ends).
    """
    _check_time_major(rewards=rewards, next_values=next_values, terminated=terminated,
                      truncated=truncated)
    terminated = jnp.asarray(terminated, bool)
    truncated = jnp.asarray(truncated, bool)

    def step(next_return: jax.Array, x: tuple[jax.Array, jax.Array, jax.Array, jax.Array]):
        r, v, term, trunc = x
        follow = jnp.where(term, 0.0, jnp.where(trunc, v, next_return))
        g = r + gamma * follow
        return g, g

    last = next_values[-1]
    _, returns = jax.lax.scan(step, last, (rewards, next_values, terminated, truncated),
                              reverse=True)
    return returns


def team_gae(agent_rewards: jax.Array, values: jax.Array, next_values: jax.Array,
             terminated: jax.Array, truncated: jax.Array, gamma: float | jax.Array,
             lam: float | jax.Array) -> tuple[jax.Array, jax.Array]:
    """GAE of a team (:mod:`rollax.envs.agents`), each agent on its own rewards and values:
    ``agent_rewards``, ``values`` and ``next_values`` are ``(T, B, N)``, the team's episode
    ends ``terminated`` and ``truncated`` ``(T, B)``. The ends are broadcast over the agents
    and ``(B, N)`` flattened into one batch axis of ``B * N`` chains, so :func:`gae` runs
    unchanged: agent ``i`` of environment ``b`` is the chain ``b * N + i``, which reads only
    its own rewards and values::

        A[t, b, i] = gae(r[:, b, i], V[:, b, i], V'[:, b, i], terminated[:, b], truncated[:, b])

    Returns ``(advantages, targets)``, ``(T, B, N)`` each."""
    T, B, N = agent_rewards.shape
    def chains(x) -> jax.Array:  # (T, B, N), or a team's end (T, B) broadcast: (T, B * N)
        x = jnp.asarray(x)
        return jnp.broadcast_to(x[..., None] if x.ndim == 2 else x, (T, B, N)).reshape(T, B * N)

    advantages, targets = gae(chains(agent_rewards), chains(values), chains(next_values),
                              chains(terminated), chains(truncated), gamma, lam)
    return advantages.reshape(T, B, N), targets.reshape(T, B, N)


def player_gae(
    rewards: jax.Array,
    values: jax.Array,
    next_values: jax.Array,
    player: jax.Array,
    terminated: jax.Array,
    truncated: jax.Array,
    gamma: float | jax.Array,
    lam: float | jax.Array,
    active: jax.Array | None = None,
) -> tuple[jax.Array, jax.Array]:
    """GAE of a game of ``P`` players taking turns, each player's chain over its own turns.

    Shapes: ``rewards (T, B, P)``, the reward every player received in transition ``t``;
    ``values (T, B)``, ``V(s_t)`` from the view of ``player[t]``, the player who acted at
    ``t`` (int, ``0 .. P-1``); ``next_values (T, B, P)``, the value of the true next state of
    transition ``t`` from each player's view (read only where a chain is cut: a truncation,
    or the rollout's last row); ``terminated``, ``truncated (T, B)``. For the player ``a`` who
    acts at ``t``, with ``n`` its next own turn in the same episode::

        R_t     = sum_{k = t}^{n - 1} rewards[k, a]   (every reward paid to a until it acts again)
        delta_t = R_t + gamma * V_next - values[t]
        A_t     = delta_t + gamma * lam * A_next

    ``V_next, A_next = values[n], A_n`` when ``a`` acts again before the episode ends; else the
    episode ended at ``e`` (``R_t`` sums to ``e`` inclusive) and ``V_next = 0`` if it was
    terminated, ``next_values[e, a]`` if truncated or cut by the rollout's end (``e = T - 1``),
    with ``A_next = 0`` in both. A terminal state ends every player's chain, whoever moved
    last: a game lost on the opponent's move pays the loser ``rewards[e, a]`` in its last
    ``R_t``. ``gamma`` and ``lam`` apply once per own turn, not per transition. Cells with
    ``active = False`` get advantage 0 and leave every chain as it was. Returns
    ``(advantages, targets)``, ``(T, B)`` each, ``targets = advantages + values``.

    One reverse ``lax.scan`` over time carrying per lane and player ``(V_next, A_next, R)``,
    ``R`` the rewards since ``t + 1``. With ``P = 1`` and ``next_values[t] = values[t + 1]``
    within episodes this is :func:`gae`. Example (``gamma = lam = 1``, zero values): X moves
    at t = 0 and 2, O at t = 1, X wins at t = 2, ``rewards[2] = (+1, -1)``: X's advantages
    are 1 at t = 0 and 2, O's is -1 at t = 1.
    """
    _check_time_major(values=values, player=player, terminated=terminated, truncated=truncated)
    if rewards.shape[:2] != values.shape or next_values.shape != rewards.shape:
        raise ValueError(f"rewards and next_values must be (T, B, P) over values (T, B), got "
                         f"{rewards.shape}, {next_values.shape} and {values.shape}")
    live = jnp.ones(values.shape, bool) if active is None else jnp.asarray(active, bool)
    xs = (rewards, values, next_values, jnp.asarray(player), jnp.asarray(terminated, bool),
          jnp.asarray(truncated, bool), live)
    start = (next_values[-1], jnp.zeros_like(rewards[0]), jnp.zeros_like(rewards[0]))
    _, advantages = jax.lax.scan(lambda c, x: _player_step(c, x, gamma, lam), start, xs,
                                 reverse=True)
    return advantages, advantages + values


def _player_step(carry, x, gamma, lam):
    """One row of :func:`player_gae`, backwards: cut every chain where an episode ended, add
    the row's rewards, then the actor's advantage, which becomes its chain's next."""
    v_next, a_next, acc = carry
    reward, value, next_value, player, term, trunc, live = x
    cut = (term | trunc)[..., None]
    v_next = jnp.where(cut, jnp.where(term[..., None], 0.0, next_value), v_next)
    a_next = jnp.where(cut, 0.0, a_next)
    acc = jnp.where(cut, 0.0, acc) + reward
    mine = jax.nn.one_hot(player, reward.shape[-1], dtype=bool)
    own = lambda a: jnp.sum(jnp.where(mine, a, 0.0), axis=-1)  # noqa: E731
    advantage = own(acc) + gamma * own(v_next) - value + gamma * lam * own(a_next)
    advantage = jnp.where(live, advantage, 0.0)
    take = mine & live[..., None]
    carry = (jnp.where(take, value[..., None], v_next),
             jnp.where(take, advantage[..., None], a_next), jnp.where(take, 0.0, acc))
    return carry, advantage


def two_player_next_values(next_value: jax.Array, next_player: jax.Array) -> jax.Array:
    """``next_values (T, B, 2)`` of :func:`player_gae` in a two-player zero-sum game from the
    critic's value ``V(s') (T, B)`` of each true next state, seen by the player to act there
    (``next_player``): ``V`` for that player, ``-V`` for the other (zero-sum: what one player
    expects to win, the other expects to lose)."""
    mine = jax.nn.one_hot(next_player, 2, dtype=bool)
    return jnp.where(mine, next_value[..., None], -next_value[..., None])


def group_mean(x: jax.Array, group_size: int, leave_one_out: bool = False) -> jax.Array:
    """The mean of ``x (..., B)`` over each episode's group of ``group_size`` (episode ``b`` is
    in group ``b // group_size``), broadcast back to ``(..., B)``; with ``leave_one_out`` the
    mean of the group's *other* episodes, ``(sum_group - x) / (group_size - 1)``.

    Example: ``group_mean([1, 2, 6], 3, leave_one_out=True)`` is ``[4, 3.5, 1.5]``.
    """
    grouped = x.reshape(*x.shape[:-1], -1, group_size)
    total = jnp.repeat(jnp.sum(grouped, axis=-1), group_size, axis=-1)
    if leave_one_out:
        return (total - x) / (group_size - 1)
    return total / group_size


GROUP_STD_EPS = 1e-8
"""Added to a group's standard deviation before dividing by it (:func:`group_standardize`)."""


def group_standardize(x: jax.Array, group_size: int) -> jax.Array:
    """GRPO's scaled advantage: ``(x - mean_g x) / (std_g x + 1e-8)`` over each episode's
    group of ``group_size`` (as :func:`group_mean`), with the group's population standard
    deviation (``ddof = 0``, ``sqrt(mean_g (x - mean_g x)^2)``). The one definition of
    ``--algo grpo --scale-by-std`` and of the gradient lab's ``group-std``.

    Example: ``group_standardize([1, 2, 6], 3)`` is ``[-0.8006, -0.4804, 1.2810]`` (mean 3,
    standard deviation ``sqrt(14 / 3)``).
    """
    advantage = x - group_mean(x, group_size)
    std = jnp.sqrt(group_mean(advantage ** 2, group_size))
    return advantage / (std + GROUP_STD_EPS)


# --- reward normalisation -----------------------------------------------------------------------

REWARD_EPS = 1e-8
"""Added to the variance of the running return before its square root divides the rewards
(:func:`reward_normalize`; Stable-Baselines3's ``VecNormalize`` epsilon)."""


def reward_norm_init() -> RunningStats:
    """Fresh statistics of the running discounted return: count 1e-4, mean 0, variance 1
    (scalars; the pseudo-count of :func:`rollax.policies.obs_norm_init`)."""
    return RunningStats(jnp.float32(1e-4), jnp.float32(0.0), jnp.float32(1.0))


def running_returns(previous: jax.Array, rewards: jax.Array, active: jax.Array,
                    terminated: jax.Array, truncated: jax.Array,
                    gamma: float | jax.Array) -> tuple[jax.Array, jax.Array]:
    """Each environment's running discounted return through a time-major rollout::

        R_t = gamma * R_{t-1} + r_t        (live cells, active_t)
        R_t = R_{t-1}                      (dead cells: nothing enters)
        R_{t-1} of the next cell = 0       after an episode ends at t (terminated or truncated)

    ``previous (B,)``: each environment's running return before the rollout (0 after an
    episode end); the others ``(T, B)``. Returns ``(R (T, B), carried (B,))``: ``R_t`` at
    every cell (meaningful where ``active``) and the running return to carry into the next
    rollout (0 for an environment whose episode ended at its last cell). Example: rewards
    ``(1, 1, 1)`` with ``gamma`` 0.5, an episode ending at the second cell, from 0: ``R = (1,
    1.5, 1)``, carried 1."""
    _check_time_major(rewards=rewards, active=active, terminated=terminated,
                      truncated=truncated)
    done = terminated | truncated

    def step(ret, x):
        reward, live, ended = x
        ret = jnp.where(live, gamma * ret + reward, ret)
        return jnp.where(ended, jnp.zeros_like(ret), ret), ret

    carried, returns = jax.lax.scan(step, previous, (rewards, active, done))
    return returns, carried


def reward_norm_update(stats: RunningStats, returns: jax.Array,
                       active: jax.Array) -> RunningStats:
    """``stats`` (scalar count, mean, variance) merged with the live values of ``returns``
    (``returns[active]``; :func:`rollax.policies.merge_moments`, Chan et al.): the statistics of
    every live running return seen so far, the pseudo-count of :func:`reward_norm_init`
    included. A rollout without live cells leaves them as they were."""
    live = active.astype(jnp.float32)
    n = jnp.sum(live)
    safe = jnp.maximum(n, 1.0)
    mean = jnp.sum(jnp.where(active, returns, 0.0)) / safe
    var = jnp.sum(jnp.where(active, (returns - mean) ** 2, 0.0)) / safe
    return RunningStats(*merge_moments(stats.count, stats.mean, stats.var, n, mean, var))


def reward_normalize(stats: RunningStats, rewards: jax.Array,
                     clip: float | jax.Array) -> jax.Array:
    """``clip(r / sqrt(var + 1e-8), -clip, clip)`` with the running return's variance: the
    rewards scaled, not centred (as Stable-Baselines3's ``VecNormalize`` and Gymnasium's
    ``NormalizeReward``); a reward of 0 (a dead cell's) stays 0."""
    return jnp.clip(rewards / jnp.sqrt(stats.var + REWARD_EPS), -clip, clip)
