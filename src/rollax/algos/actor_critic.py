"""What PPO and A2C share (:mod:`rollax.algos.ppo`, :mod:`rollax.algos.a2c`): the settings of
an actor-critic that learns from ``T`` steps of ``B`` auto-reset environments
(:class:`ActorCriticConfig`), their one check, the config resolved for an environment, the parts
built from it (the network, the experience of :mod:`rollax.algos.experience`, the number of updates)
and what ``train`` returns (:class:`ActorCriticResult`).

Each algorithm's config extends :class:`ActorCriticConfig` with its own settings and checks
them after the shared ones::

    validate(config):  check_settings(config)        # the shared settings, below
                       ... the algorithm's own ...
                       environment(config, env)      # built, its observations and network checked
    resolve(config):   resolved(config, validate(config))

The defaults are PPO's (CleanRL's ``ppo.py``); A2C replaces those that differ with
Stable-Baselines3's (:func:`rollax.algos.base.new_defaults`).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Literal, NamedTuple, TypeVar, cast

import jax

from rollax.algos.base import added, encodable, env_batch, run_length, traced
from rollax.algos.experience import ActorCriticState, ExperienceParts
from rollax.envs.agents import is_team
from rollax.envs.base import Environment
from rollax.envs.players import is_game
from rollax.envs.registry import make_configured
from rollax.games.search import check_search
from rollax.nets.build import RECURRENT, Network, actor_critic, check_network, network_choice
from rollax.nets.heads import ActorCriticParams
from rollax.policies import RunningStats
from rollax.validate import check_bool, check_count, check_real, check_seed, is_int

__all__ = [
    "ActorCriticConfig",
    "ActorCriticResult",
    "check_self_play",
    "check_settings",
    "check_sizes",
    "environment",
    "greedy_result",
    "make_experience",
    "make_network",
    "num_updates",
    "resolved",
]


@dataclasses.dataclass(frozen=True)
class ActorCriticConfig:
    """The settings every actor-critic on auto-reset rollouts has (each algorithm's config adds
    its own). The fields marked ``traced`` are numeric hyperparameters, traced inputs of the
    compiled program, so a sweep ``vmap``s over them."""

    env: str = "CartPole-v1"
    """Registered environment with a Box observation space."""
    horizon: int | None = None
    """Episode time limit (default: the task's own, e.g. 500 for CartPole-v1)."""
    env_options: tuple[str, ...] = added((), stored=())
    """Keyword options of the environment's constructor, each KEY=VALUE (true/false, a number
    or text), e.g. episodic_life=true reward_clip=true for EnvPool's Atari games."""
    seed: int = 0
    """Root key jax.random.key(seed) (seed k of a multi-seed run uses key(seed + k))."""
    total_steps: int = run_length(500_000)
    """Environment steps in all: updates = total_steps // (num_envs * num_steps)."""
    num_envs: int = env_batch(4)
    """Parallel environments B (auto-reset)."""
    num_steps: int = 128
    """Steps T collected per environment per update."""
    lr: float = traced(2.5e-4)
    """Learning rate (start value when annealed)."""
    anneal_lr: bool = True
    """Anneal the learning rate linearly to 0 over training."""
    gamma: float = traced(0.99)
    """Discount factor, in (0, 1]."""
    gae_lambda: float = traced(0.95)
    """GAE lambda, in [0, 1] (1: n-step returns bootstrapped from the rollout's last value)."""
    vf_coef: float = traced(0.5)
    """Weight of the value loss."""
    ent_coef: float = traced(0.01)
    """Weight of the entropy bonus."""
    max_grad_norm: float = traced(0.5)
    """Gradient-norm clip, of the actor's and the critic's gradients apart."""
    normalize_advantages: bool = True
    """Normalise advantages within each minibatch (the whole batch, when one gradient step
    takes it all)."""
    normalize_observations: bool = False
    """Normalise observations with running statistics (merged after each update)."""
    reward_scale: float = traced(1.0)
    """Multiply rewards by this before computing advantages."""
    normalize_rewards: bool = False
    """Divide rewards by the running standard deviation of each environment's discounted
    return (not centred; statistics merged with each rollout before it is used), then clip to
    +-reward_clip; reward_scale multiplies the result (Stable-Baselines3's VecNormalize
    norm_reward)."""
    reward_clip: float = 10.0
    """Bound of the normalised rewards (normalize_rewards), positive."""
    hidden: tuple[int, ...] = (64, 64)
    """Hidden layer sizes of the actor and of the critic."""
    activation: Literal["tanh", "relu"] = "tanh"
    """Hidden activation."""
    init_log_std: float = 0.0
    """Initial log standard deviation (continuous actions)."""
    network: Literal["auto", "mlp", "cnn", "nature", "spatial", "gru", "lstm"] = added(
        "auto", stored="mlp")
    """Actor-critic: mlp, cnn (3x3 convolutions over the (H, W, C) image the environment's
    observation flattens, then the hidden layers), nature (the Nature-DQN torso shared by actor
    and critic, its dense layers hidden; Atari's frames), spatial (boards and grids whose
    actions are the cells: a 3x3 "same" convolution of each hidden size, one logit per cell
    and kind, the value from the pooled cells), gru or lstm (a recurrent memory
    between an embedding of hidden[0] units and heads of hidden[1:]; whole sequences replayed,
    minibatches split environments), or auto (nature for images of 36x36 pixels or more, cnn
    for smaller ones, else mlp; config.json stores the choice)."""
    memory_size: int = 128
    """Units of the recurrent memory (network gru or lstm)."""
    critic: Literal["own", "centralised"] = added("own", stored="own")
    """A team of agents (docs/contract.md section 9: one network shared by the agents, each
    with its own observation and reward): each agent's critic reads its own observation and id
    (own: IPPO) or the whole team's observations and the agent's id (centralised: MAPPO); the
    actor always reads the agent's own."""
    eval_episodes: int = 32
    """Greedy evaluation episodes after training (and of each evaluation during training)."""
    eval_steps: int | None = None
    """Steps of each evaluation episode (default: the environment's horizon, at most
    100,000, so a continuing task is evaluated on a bounded stretch)."""
    eval_search_simulations: int = added(0, stored=0)
    """A game's evaluations also play a search player (Monte Carlo tree search over random
    rollouts, this many simulations per move; docs/games.md), eval_episodes games from each
    seat (eval_search_win_first, ...); 0: none. Games of two players; needs mctx (pip install
    'rollax[pgx]')."""
    opponents: Literal["self", "pool"] = added("self", stored="self")
    """A game's opponents (docs/contract.md section 8): self (the current policy plays both
    seats) or pool (a small league: each episode the learner takes one seat, drawn at random,
    and a snapshot drawn from the last pool_size ones the other; the opponent's moves are not
    trained on)."""
    pool_size: int = added(4, stored=4)
    """Past parameter snapshots a pool holds (opponents pool)."""
    pool_every: int = added(10, stored=10)
    """Updates between snapshots: every pool_every updates the current parameters replace the
    pool's oldest (opponents pool)."""
    opening_moves: int = added(0, stored=0)
    """A game's random openings: each training game starts after k uniformly random legal
    moves, k drawn from 0 to opening_moves (a move that would end the game is not played), so
    both seats meet positions self-play alone would not reach; evaluations start from the
    game's own start. 0: none. Pgx's games of two players."""


C = TypeVar("C", bound=ActorCriticConfig)

BOOLEANS = ("anneal_lr", "normalize_advantages", "normalize_observations", "normalize_rewards")
"""The shared settings that switch something on or off."""


OPPONENTS = ("self", "pool")
"""The choices of ``opponents``: self-play, or a pool of past snapshots (a league)."""


def num_updates(config: ActorCriticConfig) -> int:
    return config.total_steps // (config.num_envs * config.num_steps)


# --- the checks ---------------------------------------------------------------------------------

def check_sizes(total_steps: int, num_envs: int, num_steps: int) -> None:
    """``total_steps``, ``num_envs`` and ``num_steps`` are counts, and ``total_steps`` holds
    one batch of ``num_envs * num_steps`` at least (``ValueError`` naming the setting)."""
    for name, value in (("total_steps", total_steps), ("num_envs", num_envs),
                        ("num_steps", num_steps)):
        check_count(name, value)
    batch = num_envs * num_steps
    if total_steps < batch:
        raise ValueError(f"total_steps must be at least num_envs * num_steps = {batch}, "
                         f"got {total_steps}")


def check_settings(config: ActorCriticConfig) -> None:
    """Check the shared settings, the environment apart (``ValueError`` naming the setting and
    its range)."""
    check_seed(config.seed)
    check_sizes(config.total_steps, config.num_envs, config.num_steps)
    check_count("eval_episodes", config.eval_episodes)
    if config.eval_steps is not None:
        check_count("eval_steps", config.eval_steps)
    inf = math.inf
    check_real("lr", config.lr, 0, inf, low_open=True, high_open=True)
    check_real("gamma", config.gamma, 0, 1, low_open=True)
    check_real("gae_lambda", config.gae_lambda, 0, 1)
    check_real("vf_coef", config.vf_coef, 0, inf, high_open=True)
    check_real("ent_coef", config.ent_coef, 0, inf, high_open=True)
    check_real("max_grad_norm", config.max_grad_norm, 0, inf, low_open=True, high_open=True)
    check_real("reward_scale", config.reward_scale, 0, inf, low_open=True, high_open=True)
    check_real("reward_clip", config.reward_clip, 0, inf, low_open=True, high_open=True)
    for name in BOOLEANS:
        check_bool(name, getattr(config, name))
    if config.opponents not in OPPONENTS:
        raise ValueError(f"opponents must be one of {', '.join(OPPONENTS)}, "
                         f"got {config.opponents!r}")
    check_count("pool_size", config.pool_size)
    check_count("pool_every", config.pool_every)
    if not is_int(config.opening_moves) or config.opening_moves < 0:
        raise ValueError(f"opening_moves must be an integer >= 0, got {config.opening_moves!r}")


def environment(config: ActorCriticConfig, env: Environment | None,
                algorithm: str) -> Environment:
    """The environment ``config`` names (its ``env``, ``horizon`` and ``env_options``; ``env``
    when given: the one already built from them), refused unless the networks read its
    observations (:func:`rollax.algos.base.encodable`; ``algorithm`` names who needs them in
    the message), with the network's settings checked against it."""
    if env is None:
        env = make_configured(config.env, config.horizon, config.env_options)
    if not encodable(env):
        raise ValueError(f"env {config.env!r} has no observations the networks read (Box, "
                         f"Discrete, or a Dict / Tuple of them): {algorithm} needs them")
    check_network(env, config.network, config.hidden, config.activation, config.init_log_std,
                  config.memory_size, config.env, critic=config.critic)
    check_search(env, config.eval_search_simulations, config.env)
    if is_team(env) and config.normalize_rewards:
        raise ValueError(f"normalize_rewards is refused for {config.env}, a team of agents: its "
                         f"running discounted returns are one scalar reward's, not each agent's")
    if is_game(env):
        check_self_play(config)
    elif config.opponents != "self":
        raise ValueError(f"opponents {config.opponents} is refused for {config.env}: it is not "
                         f"a game of two players")
    if config.opening_moves and not (is_game(env) and hasattr(env, "opening_moves")):
        raise ValueError(f"opening_moves is refused for {config.env}: random openings are for "
                         f"Pgx's games of two players")
    return env


def check_self_play(config: ActorCriticConfig) -> None:
    """What self-play in a game of two players (:mod:`rollax.envs.players`) does not take
    (``ValueError``, one line): a recurrent network, whose one memory per game would carry
    what each player saw into the other's turns (the opponent's cards in poker), and
    ``normalize_rewards``, whose running returns are one player's."""
    if config.network in RECURRENT:
        raise ValueError(f"network {config.network} is refused for {config.env}, a game of "
                         f"two players: one memory would carry each player's view into the "
                         f"other's turns; use mlp or cnn")
    if config.normalize_rewards:
        raise ValueError(f"normalize_rewards is refused for {config.env}, a game of two "
                         f"players: its running discounted returns are one player's")


def resolved(config: C, env: Environment) -> C:
    """A checked ``config`` with ``horizon`` set to ``env``'s own limit when unset and
    ``network`` to the one ``auto`` picks (``mlp``, ``cnn`` or ``nature``)."""
    horizon = env.horizon if config.horizon is None else config.horizon
    return dataclasses.replace(config, horizon=horizon,
                               network=network_choice(config.network, env))


# --- the parts ------------------------------------------------------------------------------------

def make_network(env: Environment, config: ActorCriticConfig) -> Network:
    """The actor-critic of ``config`` for ``env``'s spaces
    (:func:`rollax.nets.actor_critic`)."""
    return actor_critic(env, config.network, config.hidden, config.activation,
                        config.init_log_std, config.memory_size, critic=config.critic)


def make_experience(config: ActorCriticConfig, env: Environment,
                    checked: bool = False) -> ExperienceParts:
    """The experience (:class:`ExperienceParts`) of a resolved ``config`` on ``env``."""
    league = config.opponents == "pool"
    played = env
    if config.opening_moves:  # training's games open at random; evaluations' do not
        played = dataclasses.replace(cast(Any, env), opening_moves=config.opening_moves)
    return ExperienceParts(played, make_network(env, config), config.num_envs, config.num_steps,
                        config.normalize_observations, checked,
                        normalize_rewards=config.normalize_rewards,
                        reward_clip=float(config.reward_clip),
                        pool_size=config.pool_size if league else 0,
                        pool_every=config.pool_every, eval_env=env)


class ActorCriticResult(NamedTuple):
    """What ``train`` returns."""

    params: ActorCriticParams
    obs_stats: RunningStats
    metrics: Any
    """The algorithm's per-update metrics, each ``(updates,)``."""
    eval_return: jax.Array
    """Mean greedy-evaluation return over ``eval_episodes``."""
    state: ActorCriticState


def greedy_result(state: ActorCriticState, metrics, eval_return: jax.Array) -> ActorCriticResult:
    """The final state's parameters and observation statistics, the stacked metrics, the
    evaluation return and the state."""
    return ActorCriticResult(state.params, state.obs_stats, metrics, eval_return, state)
