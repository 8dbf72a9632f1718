"""Evaluating a policy by sampling: the mean return of fresh absorbing episodes; in a game of
two players (:mod:`rollax.envs.players`), its wins, draws and losses against a uniformly random
legal player from each seat (:func:`game_scores`) and, when asked, against a search player
(Monte Carlo tree search over random rollouts, :func:`search_scores`), and in Kuhn poker and
Leduc hold'em (``pgx:kuhn_poker``, ``pgx:leduc_holdem``) the exact exploitability of its
probabilities (:mod:`rollax.games`)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from rollax.collect import episode_returns
from rollax.envs.base import Environment, step_with_key
from rollax.envs.masks import action_mask
from rollax.envs.players import is_game
from rollax.games.exact import exploitability
from rollax.games.pgx_views import env_view, policy_table
from rollax.games.search import search_player
from rollax.policies import GreedyPolicy, Policy
from rollax.recurrent import GreedyRecurrent, RecurrentPolicy, is_recurrent
from rollax.validate import check_count

MAX_EVAL_STEPS = 100_000
"""The longest evaluation episode by default: an environment whose horizon is longer (a
continuing task, e.g. ``horizon=10**9``) is evaluated on its first ``MAX_EVAL_STEPS`` steps
unless ``eval_steps`` says otherwise."""


def evaluation_steps(env: Environment, eval_steps: int | None = None) -> int:
    """The steps of each evaluation episode: ``eval_steps``, or by default the environment's
    horizon, at most :data:`MAX_EVAL_STEPS`."""
    if eval_steps is None:
        return min(env.horizon, MAX_EVAL_STEPS)
    check_count("eval_steps", eval_steps)
    return int(eval_steps)


def scoring_env(env: Environment) -> Environment:
    """The environment whose returns are the task's score: ``env`` itself, unless its
    training signal differs from the task's (a host environment's ``scoring``: EnvPool's Atari
    trained with ``episodic_life`` (an episode per life) or ``reward_clip`` (rewards' signs) is
    scored on whole, unclipped games). Evaluation plays this one."""
    return getattr(env, "scoring", None) or env


def evaluate_policy(env: Environment, policy: Policy | RecurrentPolicy, params, key: jax.Array,
                    episodes: int, greedy: bool = True, num_steps: int | None = None
                    ) -> jax.Array:
    """Mean return of ``episodes`` absorbing episodes of the task's score
    (:func:`scoring_env`: ``env`` itself but for EnvPool's Atari trained per life or on clipped
    rewards), one per environment, keys from ``key`` as :func:`rollax.collect` owns them, each
    cut after ``num_steps`` steps (:func:`evaluation_steps`: by default ``env.horizon``, at
    most :data:`MAX_EVAL_STEPS`), acting with the policy's mode (``greedy``) or by sampling; a
    recurrent policy starts each episode from its initial carry. Returns a scalar::

        mean_b sum_t reward[t, b]

    The returns are summed as the episodes run (:func:`rollax.collect.episode_returns`):
    memory grows with ``episodes``, not with the horizon.

    Example::

        env = rollax.make("CartPole-v1")
        net = rollax.MLPActorCritic(observation_size=4, num_actions=2)
        rollax.evaluate_policy(env, net, net.init(jax.random.key(0)), jax.random.key(1), 32)
    """
    env = scoring_env(env)
    actor: Any = policy
    if greedy:
        actor = GreedyRecurrent(actor) if is_recurrent(actor) else GreedyPolicy(actor)
    steps = evaluation_steps(env, num_steps)
    return jnp.mean(episode_returns(env, actor, params, key, episodes, steps))


GAME_SCORES = tuple(f"eval_{outcome}_{seat}" for seat in ("first", "second")
                    for outcome in ("win", "draw", "loss"))
"""The rates :func:`game_scores` outputs beside ``eval_return``, in this order."""

SEARCH_SCORES = tuple(name.replace("eval_", "eval_search_", 1) for name in GAME_SCORES)
"""The rates against the search player (:func:`search_scores`) beside ``eval_search_return``:
``eval_search_win_first``, ..., ``eval_search_loss_second``."""

SEARCH_STREAM = 0x53524348
"""``fold_in`` tag of the games against the search player: :func:`scores` plays them on
``fold_in(key, SEARCH_STREAM)``, the games against the random player on ``key``."""


def scores(env: Environment, policy: Policy | RecurrentPolicy, params, key: jax.Array,
           episodes: int, greedy: bool = True, num_steps: int | None = None,
           search_simulations: int = 0) -> dict[str, jax.Array]:
    """A neural policy's evaluation: ``{"eval_return": evaluate_policy(...)}``, or for a game
    of two players :func:`game_scores` (``eval_return`` and the six rates of
    :data:`GAME_SCORES`), with ``exploitability`` in Kuhn poker and Leduc hold'em: the exact
    exploitability (:func:`rollax.games.exact.exploitability`) of the policy's own
    probabilities (whatever ``greedy`` says) at every information state
    (:func:`rollax.games.pgx_views.policy_table`); and with ``search_simulations > 0`` the
    same games against the search player of that many simulations (:func:`search_scores`:
    ``eval_search_return`` and :data:`SEARCH_SCORES`)."""
    if is_game(env):
        out = game_scores(env, policy, params, key, episodes, greedy, num_steps)
        view = env_view(env)
        if view is not None:
            out["exploitability"] = exploitability(view.tree, policy_table(policy, params,
                                                                           view))
        if search_simulations:
            out.update(search_scores(env, policy, params,
                                     jax.random.fold_in(key, SEARCH_STREAM), episodes,
                                     search_simulations, greedy, num_steps))
        return out
    return {"eval_return": evaluate_policy(env, policy, params, key, episodes, greedy,
                                           num_steps)}


def game_scores(env: Any, policy: Any, params, key: jax.Array, games: int,
                greedy: bool = True, num_steps: int | None = None,
                opponent: Callable | None = None, prefix: str = "eval"
                ) -> dict[str, jax.Array]:
    """``policy`` against a uniformly random legal player in a two-player game (or against
    ``opponent``, :func:`game_payoffs`): ``games`` games with the policy moving first,
    ``games`` with it moving second (one batch of ``2 * games``). Outputs ``eval_return``, the
    mean payoff to the policy over all of them, and per seat the rates of wins (payoff > 0),
    draws (= 0: a game still running after ``num_steps`` counts as one) and losses (< 0):
    ``eval_win_first``, ``eval_draw_first``, ``eval_loss_first``, ``eval_win_second``, ...
    (:data:`GAME_SCORES`); ``prefix`` replaces ``eval`` in every name."""
    first = jnp.arange(2 * games) < games
    payoff = game_payoffs(env, policy, params, key, first, greedy, num_steps,
                          opponent=opponent)
    out = {f"{prefix}_return": jnp.mean(payoff)}
    for seat, mine in (("first", first), ("second", ~first)):
        for outcome, hit in (("win", payoff > 0), ("draw", payoff == 0), ("loss", payoff < 0)):
            out[f"{prefix}_{outcome}_{seat}"] = jnp.sum(hit & mine) / games
    return out


def search_scores(env: Any, policy: Any, params, key: jax.Array, games: int,
                  simulations: int, greedy: bool = True, num_steps: int | None = None
                  ) -> dict[str, jax.Array]:
    """:func:`game_scores` against the search player of ``simulations`` simulations per move
    (:func:`rollax.games.search.search_player`: UCT over random rollouts, on mctx), named
    ``eval_search_return`` and ``eval_search_win_first``, ... (:data:`SEARCH_SCORES`)."""
    return game_scores(env, policy, params, key, games, greedy, num_steps,
                       opponent=search_player(env, simulations), prefix="eval_search")


def game_payoffs(env: Any, policy: Policy, params, key: jax.Array, first: jax.Array,
                 greedy: bool = True, num_steps: int | None = None, other_params=None,
                 opponent: Callable | None = None) -> jax.Array:
    """The payoff to ``policy`` of one game per entry of ``first (G,)`` (bool: the policy has
    the first move) against a player choosing uniformly among the legal actions, or, with
    ``other_params``, against the same policy with those parameters (greedy or sampled as
    ``policy``), or against ``opponent``: ``(states (G, ...), keys (G,)) -> actions (G,)``
    over the batch of games (e.g. :func:`rollax.games.search.search_player`). Keys:
    ``reset, act, other, transition = split(key, 4)``, game ``g`` resets with
    ``split(reset, G)[g]`` and at step ``t`` draws from ``split(fold_in(stream, t), G)[g]``.
    The games run in a ``while_loop`` until all have ended or ``num_steps``
    (:func:`evaluation_steps`) have been taken; the payoff sums the policy's player's
    ``player_rewards`` over its live steps."""
    actor: Any = GreedyPolicy(policy) if greedy else policy
    steps = evaluation_steps(env, num_steps)
    streams, state, me = game_start(env, key, first)
    if opponent is None:
        opponent = other_player(env, actor, other_params)

    def body(loop):
        t, state, total = loop
        state, _, paid = game_turn(env, actor, params, opponent, streams, me, t, state)
        return t + 1, state, total + paid[jnp.arange(me.shape[0]), me]

    def running(loop):
        return (loop[0] < steps) & jnp.any(~jax.vmap(env.done)(loop[1]))

    start = (jnp.zeros((), jnp.int32), state, jnp.zeros(me.shape, jnp.float32))
    return jax.lax.while_loop(running, body, start)[2]


def game_start(env: Any, key: jax.Array, first: jax.Array) -> tuple[jax.Array, Any, jax.Array]:
    """The start of :func:`game_payoffs`'s games: ``(streams (4,), states (G, ...), me (G,))``,
    ``streams`` the keys ``reset, act, other, transition = split(key, 4)``, game ``g`` reset
    with ``split(reset, G)[g]``, ``me`` the player id of the policy (the starter where
    ``first``, the other player elsewhere)."""
    streams = jax.random.split(key, 4)
    state = jax.vmap(env.reset)(jax.random.split(streams[0], first.shape[0]))
    starter = jax.vmap(env.to_act)(state)
    return streams, state, jnp.where(first, starter, 1 - starter)


def other_player(env: Any, actor: Any, other_params=None) -> Callable:
    """The opponent of :func:`game_payoffs` over a batch of games: ``(states, keys) ->
    actions``, uniform among the legal actions, or ``actor`` with ``other_params``."""
    return jax.vmap(functools.partial(_other, env, actor, other_params))


def game_turn(env: Any, actor: Any, params, opponent: Callable, streams: jax.Array,
              me: jax.Array, t: jax.Array, state: Any) -> tuple[Any, jax.Array, jax.Array]:
    """Step ``t`` of every game of :func:`game_payoffs` (``streams`` and ``me`` of
    :func:`game_start`): the player to act moves, ``actor`` with ``params`` where it is ``me``,
    ``opponent`` elsewhere, each game drawing from ``split(fold_in(stream, t), G)[g]``.
    Returns ``(states', actions (G,), rewards (G, players))``: every player's reward of the
    step, 0 in a game that had already ended (which keeps its state)."""
    size = me.shape[0]
    act, other, step = [jax.random.split(jax.random.fold_in(s, t), size) for s in streams[1:]]

    def one(state, me, other, act_key, step_key):
        mine = actor.sample(params, env.observation(state), act_key,
                            action_mask(env, state))[0]
        action = jnp.where(env.to_act(state) == me, mine, other).astype(mine.dtype)
        live = ~env.done(state)
        state = step_with_key(env, state, action, step_key)[0]
        return state, action, jnp.where(live, env.player_rewards(state), 0.0)

    return jax.vmap(one)(state, me, opponent(state, other), act, step)


def _other(env: Any, actor: Any, other_params, state, key: jax.Array) -> jax.Array:
    """The other player's action in one game of :func:`game_payoffs`: uniform among the legal
    actions, or ``actor`` with ``other_params``."""
    mask = action_mask(env, state)
    if other_params is None:
        return jax.random.categorical(key, jnp.where(mask, 0.0, -jnp.inf))
    return actor.sample(other_params, env.observation(state), key, mask)[0]


def rate_players(env: Any, policy: Policy, players: list, key: jax.Array, games: int,
                 greedy: bool = False, num_steps: int | None = None
                 ) -> tuple[np.ndarray, np.ndarray]:
    """Bradley-Terry ratings (:func:`rollax.games.ratings.bradley_terry`, Elo scale, player 0
    at 0) of ``players``, parameter sets of ``policy`` in a two-player game, or ``None`` for
    the uniformly random legal player, from a round robin: each pair plays ``games`` games
    with each of them moving first (:func:`game_payoffs` with ``other_params``, or against the
    random player; a draw counts half a win to each). Returns ``(wins (S, S), elo (S,))``.
    The games of pair ``(i, j)`` use ``fold_in(key, i * S + j)``; one program serves every
    pair of parameter sets, another every pair with the random player."""
    from rollax.games.ratings import bradley_terry, elo

    first = jnp.arange(2 * games) < games
    both = jax.jit(lambda a, b, k: game_payoffs(env, policy, a, k, first, greedy, num_steps,
                                                other_params=b))
    random = jax.jit(lambda a, k: game_payoffs(env, policy, a, k, first, greedy, num_steps))
    s = len(players)
    wins = np.zeros((s, s))
    for i in range(s):
        for j in range(i + 1, s):
            a, b, k = players[i], players[j], jax.random.fold_in(key, i * s + j)
            if a is None and b is None:
                raise ValueError("rate_players: the random player may take one place only")
            if b is None:
                payoff = np.asarray(random(a, k))
            elif a is None:
                payoff = -np.asarray(random(b, k))  # zero-sum: i's payoff is j's negated
            else:
                payoff = np.asarray(both(a, b, k))
            wins[i, j] = np.sum(payoff > 0) + 0.5 * np.sum(payoff == 0)
            wins[j, i] = np.sum(payoff < 0) + 0.5 * np.sum(payoff == 0)
    return wins, elo(bradley_terry(wins))
