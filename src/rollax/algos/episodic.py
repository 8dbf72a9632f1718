"""What the whole-episode policy-gradient algorithms share (:mod:`rollax.algos.reinforce`,
:mod:`rollax.algos.grpo`): their settings, batches of complete absorbing episodes in groups,
their replay under the current parameters, one gradient step, and their
:class:`~rollax.algos.base.AlgorithmSpec` (:func:`spec`). Their objectives are normalised by
:func:`rollax.losses.normalized_sum`.

One update of such an algorithm::

    key, collect_key = split(key)
    traj = collect_groups(env, policy, params, collect_key, groups, group_size, T = horizon)
    log pi, entropy, V = replay(params, traj)              # (T, B) each, live where traj.active
    loss = -(1/B) sum_{t,b} active * objective[t, b] ...   # the algorithm's own terms

Every episode of a batch runs to its end within the horizon (``T = horizon``), so nothing is
bootstrapped: a return is the sum of the episode's rewards, and an episode cut by the time limit
is complete for the finite-horizon objective. Episodes come in ``groups`` of ``group_size``;
the episodes of one group start from one reset key (the same start state) and draw their
actions (and a stochastic task's transitions) from keys of their own
(:func:`rollax.collect.collect_groups`).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any, Literal, NamedTuple, cast

import jax
import jax.numpy as jnp
import optax

from rollax import guards
from rollax.algos import optim
from rollax.algos.base import (
    NEURAL,
    AlgorithmSpec,
    Report,
    added,
    encodable,
    env_batch,
    neural_algorithm,
    run_length,
    traced,
)
from rollax.collect import Trajectory, collect_groups
from rollax.distributions import masked
from rollax.envs.agents import is_team
from rollax.envs.base import Environment
from rollax.envs.host import is_host
from rollax.envs.players import is_game
from rollax.envs.registry import make_configured
from rollax.losses import normalized_sum
from rollax.nets.build import Network, actor_critic, check_network, network_choice
from rollax.nets.heads import read_cells
from rollax.recurrent import initial_carries, is_recurrent, unroll
from rollax.validate import check_count, check_real, check_seed

__all__ = [
    "ROWS_PER_CHUNK",
    "SKIP_PADDING",
    "EpisodicConfig",
    "EpisodicParts",
    "EpisodicState",
    "Replayed",
    "cell_weights",
    "chunked_replay",
    "chunked_step",
    "chunked_value_and_grad",
    "collect_batch",
    "episode_totals",
    "fresh_state",
    "gradient_step",
    "live_chunks",
    "make_parts",
    "replay",
    "replay_batch",
    "skips_padding",
    "spec",
    "validate",
]


@dataclasses.dataclass(frozen=True)
class EpisodicConfig:
    """The settings every whole-episode algorithm has (each algorithm's config adds its own)."""

    env: str = "CartPole-v1"
    """Registered environment with a Box observation space."""
    horizon: int | None = None
    """Episode time limit and rollout length T (default: the task's own, e.g. 500 for
    CartPole-v1)."""
    env_options: tuple[str, ...] = added((), stored=())
    """Keyword options of the environment's constructor, each KEY=VALUE (true/false, a number
    or text), e.g. episodic_life=true reward_clip=true for EnvPool's Atari games."""
    seed: int = 0
    """Root key jax.random.key(seed) (seed k of a multi-seed run uses key(seed + k))."""
    updates: int = run_length(100)
    """Number of updates, each on a fresh batch of complete episodes."""
    batch_size: int = env_batch(32)
    """Episodes per batch, B (= groups x group_size)."""
    group_size: int = 1
    """Episodes per group G: the episodes of a group start from the same start state (one reset
    key); must divide batch_size."""
    lr: float = traced(1e-3)
    """Adam learning rate."""
    ent_coef: float = traced(0.0)
    """Weight of the entropy bonus (summed over an episode's live steps, per episode)."""
    max_grad_norm: float = traced(0.5)
    """Gradient-norm clip, of the actor's and the critic's gradients apart."""
    hidden: tuple[int, ...] = (64, 64)
    """Hidden layer sizes of the actor and of the critic."""
    activation: Literal["tanh", "relu"] = "tanh"
    """Hidden activation."""
    init_log_std: float = 0.0
    """Initial log standard deviation (continuous actions)."""
    network: Literal["auto", "mlp", "cnn", "nature", "spatial", "gru", "lstm"] = "auto"
    """Network: mlp, cnn or nature (image observations), spatial (one logit per cell of a
    grid), gru or lstm (a memory reset at each
    episode's start), or auto (nature for images of 36x36 pixels or more, cnn for smaller ones,
    else mlp)."""
    memory_size: int = 128
    """Units of the recurrent memory (network gru or lstm)."""
    eval_episodes: int = 32
    """Greedy evaluation episodes (after training and at each evaluation during training)."""
    eval_steps: int | None = None
    """Steps of each evaluation episode (default: the environment's horizon, at most
    100,000, so a continuing task is evaluated on a bounded stretch)."""


def validate(config: EpisodicConfig, env: Environment | None = None) -> Environment:
    """Check the shared settings (``ValueError`` naming the setting and its range); returns
    the environment (``env`` when given)."""
    check_seed(config.seed)
    for name in ("updates", "batch_size", "group_size", "eval_episodes"):
        check_count(name, getattr(config, name))
    if config.eval_steps is not None:
        check_count("eval_steps", config.eval_steps)
    if config.horizon is not None:
        check_count("horizon", config.horizon)
    if config.batch_size % config.group_size:
        raise ValueError(f"group_size must divide batch_size = {config.batch_size}, got "
                         f"{config.group_size}")
    inf = float("inf")
    check_real("lr", config.lr, 0, inf, low_open=True, high_open=True)
    check_real("ent_coef", config.ent_coef, 0, inf, high_open=True)
    check_real("max_grad_norm", config.max_grad_norm, 0, inf, low_open=True, high_open=True)
    if env is None:
        env = make_configured(config.env, config.horizon, config.env_options)
    if not encodable(env):
        raise ValueError(f"env {config.env!r} has no observations the networks read (Box, "
                         f"Discrete, or a Dict / Tuple of them)")
    if is_host(env):
        raise ValueError(f"env {config.env!r} is stepped on the host, and whole-episode "
                         f"methods start each group of episodes from one reset state, which "
                         f"only a JAX environment gives: train it with PPO or A2C")
    if is_game(env):
        raise ValueError(f"env {config.env!r} is a game of two players, which only PPO and "
                         f"A2C train (by self-play, each player's returns over its own turns)")
    if is_team(env):
        raise ValueError(f"env {config.env!r} is a team of agents with rewards of their own, "
                         f"which only PPO and A2C train (each agent's advantages from its own "
                         f"rewards)")
    check_network(env, config.network, config.hidden, config.activation, config.init_log_std,
                  config.memory_size, config.env)
    return env


@dataclasses.dataclass(frozen=True)
class EpisodicParts:
    """The static parts of a whole-episode run."""

    config: Any
    env: Environment
    net: Network
    checked: bool = False

    @property
    def horizon(self) -> int:
        return cast(int, self.config.horizon)

    @property
    def groups(self) -> int:
        return self.config.batch_size // self.config.group_size

    @property
    def recurrent(self) -> bool:
        return is_recurrent(self.net)

    def optimiser(self, hp) -> optax.GradientTransformation:
        return optax.chain(optim.clip_per_network(hp.max_grad_norm), optim.adam(hp.lr))

    def collect(self, params, key: jax.Array, live_only: bool = False) -> Trajectory:
        """``batch_size`` complete episodes in ``groups`` (:func:`collect_groups`); with
        ``live_only`` the collection stops when every episode has ended (the rows after it
        zeros, dead: for the passes that read only live chunks)."""
        _, traj = collect_groups(self.env, self.net, params, key, self.groups,
                                 self.config.group_size, self.horizon, live_only)
        return traj


def make_parts(config, checked: bool, env: Environment | None):
    """``(resolved config, EpisodicParts)``: the settings checked, ``horizon`` set to the
    task's own limit when unset and ``network`` to the one ``auto`` picks."""
    env = validate(config, env)
    config = dataclasses.replace(config, horizon=env.horizon,
                                 network=network_choice(config.network, env))
    net = actor_critic(env, config.network, config.hidden, config.activation,
                       config.init_log_std, config.memory_size)
    return config, EpisodicParts(config, env, net, checked)


class Replayed(NamedTuple):
    """A batch's cells under the current parameters, each ``(T, B)``."""

    log_prob: jax.Array
    entropy: jax.Array
    value: jax.Array


def replay(parts: EpisodicParts, params, traj: Trajectory) -> Replayed:
    """The log-probabilities of the stored actions, the entropies and the critic's values of
    every cell under ``params`` (under the action masks stored with the actions, if any): a
    feed-forward network reads each observation; a recurrent
    one replays each episode from its initial carry (the collector started it there)."""
    if parts.recurrent:
        net: Any = parts.net
        T, B = traj.reward.shape
        starts = jnp.zeros((T, B), bool).at[0].set(True)
        out = unroll(net, params, initial_carries(net, params, B), traj.observation, starts,
                     traj.action, traj.action_mask)
        value = jax.vmap(jax.vmap(net.value, (None, 0)), (None, 0))(params, out.features)
        return Replayed(cast(jax.Array, out.log_prob), cast(jax.Array, out.entropy), value)

    T, B = traj.reward.shape
    flat = jax.tree.map(lambda x: x.reshape(T * B, *x.shape[2:]), traj.observation)
    dist, value = read_cells(parts.net, params, flat)  # cells_per_call at a time where set
    dist = jax.tree.map(lambda x: x.reshape(T, B, *x.shape[1:]), dist)
    dist = masked(dist, traj.action_mask)
    return Replayed(dist.log_prob(traj.action), dist.entropy(), value.reshape(T, B))


ROWS_PER_CHUNK = 64
"""Time steps (rows of the whole batch) that the padding-skipping passes read at a time."""

SKIP_PADDING = True
"""Feed-forward networks: the collection stops when every episode has ended and the network
reads only the chunks of time steps that hold a live cell (:func:`chunked_replay`,
:func:`chunked_value_and_grad`); ``False``: the whole ``T x B`` batch (the same update up to
the order of the sums; the tests' reference)."""


def skips_padding(parts: EpisodicParts) -> bool:
    """Whether an update reads only the live chunks (:data:`SKIP_PADDING`, feed-forward
    networks: a recurrent memory runs through every step, so it reads the whole batch)."""
    return SKIP_PADDING and not parts.recurrent


def cell_weights(live: jax.Array, group_size: int, normalization: str = "episode") -> jax.Array:
    """Each cell's weight in :func:`rollax.losses.normalized_sum` (which is linear in its
    terms): ``normalized_sum(x) == sum(cell_weights * x)``, ``(T, B)``, 0 on dead cells."""
    return jax.grad(lambda x: normalized_sum(x, live, group_size, normalization))(
        jnp.zeros(live.shape, jnp.float32))


def live_chunks(traj: Trajectory, rows: int = ROWS_PER_CHUNK) -> jax.Array:
    """The number of chunks of ``rows`` time steps that hold a live cell: the batch's longest
    episode, rounded up (episodes absorb, so each column's live cells come first)."""
    T = traj.active.shape[0]
    longest = jnp.max(jnp.where(jnp.any(traj.active, axis=1), jnp.arange(1, T + 1), 0))
    return (longest + rows - 1) // rows


def _padded(tree, rows: int):
    """Every ``(T, ...)`` leaf of ``tree`` padded with zeros (False) to a multiple of
    ``rows`` rows, so every chunk has ``rows`` rows (the padding is dead: ``active`` False)."""
    def pad(x):
        extra = -x.shape[0] % rows
        return jnp.concatenate([x, jnp.zeros((extra, *x.shape[1:]), x.dtype)]) if extra else x

    return jax.tree.map(pad, tree)


def _rows(tree, start: jax.Array, rows: int):
    """Rows ``[start, start + rows)`` of every leaf of a :func:`_padded` ``tree``."""
    return jax.tree.map(lambda x: jax.lax.dynamic_slice_in_dim(x, start, rows), tree)


def chunked_replay(parts: EpisodicParts, params, traj: Trajectory,
                   rows: int = ROWS_PER_CHUNK) -> Replayed:
    """:func:`replay` of the chunks of ``rows`` time steps that hold a live cell
    (:func:`live_chunks`), in a ``while_loop``; the cells of the chunks after them are 0 (they
    are padding: every consumer masks them). Feed-forward networks only. Batches of short
    episodes read a fraction of their ``T x B`` cells."""
    T, B = traj.reward.shape
    rows = min(rows, T)
    n = live_chunks(traj, rows)
    traj = _padded(traj, rows)
    zeros = jnp.zeros((traj.reward.shape[0], B), jnp.float32)

    def body(carry):
        c, out = carry
        chunk = replay(parts, params, _rows(traj, c * rows, rows))
        out = jax.tree.map(lambda buf, x: jax.lax.dynamic_update_slice_in_dim(
            buf, x.astype(buf.dtype), c * rows, 0), out, chunk)
        return c + 1, out

    _, out = jax.lax.while_loop(lambda carry: carry[0] < n, body,
                                (jnp.zeros((), jnp.int32), Replayed(zeros, zeros, zeros)))
    return jax.tree.map(lambda x: x[:T], out)


def chunked_value_and_grad(parts: EpisodicParts, params, traj: Trajectory, data,
                           per_cell: Callable, rows: int = ROWS_PER_CHUNK):
    """``(sum, gradient)`` of ``sum over cells per_cell(replayed, data)``, where ``per_cell``
    maps a chunk's :class:`Replayed` and the same rows of ``data`` (a pytree of ``(T, B)``
    arrays: advantages, weights...) to ``(rows, B)`` terms that are 0 on dead cells. Only
    the chunks that hold a live cell are read (one ``value_and_grad`` each, summed in a
    ``while_loop``), so the result equals the whole batch's gradient up to the order of the
    sums. Feed-forward networks only."""

    rows = min(rows, traj.reward.shape[0])
    n = live_chunks(traj, rows)
    traj, data = _padded(traj, rows), _padded(data, rows)

    def chunk_sum(p, c):
        replayed = replay(parts, p, _rows(traj, c * rows, rows))
        return jnp.sum(per_cell(replayed, _rows(data, c * rows, rows)))

    def body(carry):
        c, total, grads = carry
        value, g = jax.value_and_grad(chunk_sum)(params, c)
        return c + 1, total + value, jax.tree.map(jnp.add, grads, g)

    start = (jnp.zeros((), jnp.int32), jnp.zeros((), jnp.float32),
             jax.tree.map(jnp.zeros_like, params))
    _, total, grads = jax.lax.while_loop(lambda carry: carry[0] < n, body, start)
    return total, grads


def episode_totals(traj: Trajectory) -> tuple[jax.Array, jax.Array]:
    """Each episode's return and live length, ``(B,)`` each."""
    return jnp.sum(traj.reward, axis=0), jnp.sum(traj.active, axis=0).astype(jnp.float32)


class EpisodicState(NamedTuple):
    """Everything a whole-episode run carries from one update to the next."""

    params: Any
    opt_state: optax.OptState
    key: jax.Array
    updates: jax.Array
    """The number of updates done so far (0 before the first)."""
    env_steps: jax.Array
    """Live environment steps taken so far (the padding of finished episodes not counted)."""
    reference: Any = None
    """The initial parameters, for an algorithm with a penalty towards them (else None)."""


def gradient_step(parts: EpisodicParts, state: EpisodicState, loss: Callable,
                  hp) -> optim.Step:
    """``loss(params) -> (value, aux)`` differentiated once and applied
    (:func:`rollax.algos.optim.gradient_step`)."""
    return optim.gradient_step(loss, state.params, state.opt_state, parts.optimiser(hp),
                               parts.checked, state.updates + 1)


def collect_batch(parts: EpisodicParts, state: EpisodicState) -> tuple[jax.Array, Trajectory]:
    """``(next key, batch)``: an update's fresh batch of complete episodes under
    ``state.params``, its collection stopping when every episode has ended where the update
    reads only the live chunks (:func:`skips_padding`); checked mode checks it
    (:func:`rollax.guards.check_collected`)."""
    key, collect_key = jax.random.split(state.key)
    traj = parts.collect(state.params, collect_key, live_only=skips_padding(parts))
    if parts.checked:
        guards.check_collected(traj, parts.env.action_space, state.updates + 1)
    return key, traj


def replay_batch(parts: EpisodicParts, params, traj: Trajectory) -> Replayed:
    """The batch's cells under ``params`` as an update reads them: the live chunks only
    (:func:`chunked_replay`) where it skips padding, else every cell (:func:`replay`)."""
    return (chunked_replay if skips_padding(parts) else replay)(parts, params, traj)


def chunked_step(parts: EpisodicParts, state: EpisodicState, traj: Trajectory, data,
                 per_cell: Callable, hp, value=None, aux=None) -> optim.Step:
    """One gradient step on ``sum over cells per_cell(replayed, data)``, its gradient summed
    over the live chunks (:func:`chunked_value_and_grad`) and applied to ``state``'s parameters
    (:func:`rollax.algos.optim.apply_gradient`); the step reports ``value`` and ``aux`` when
    given (a forward pass's), else the chunks' sum and no aux."""
    total, grads = chunked_value_and_grad(parts, state.params, traj, data, per_cell)
    return optim.apply_gradient(total if value is None else value, {} if aux is None else aux,
                                grads, state.params, state.opt_state, parts.optimiser(hp),
                                parts.checked, state.updates + 1)


def fresh_state(parts: EpisodicParts, key: jax.Array, hp, keep_reference: bool = False
                ) -> EpisodicState:
    """Fresh parameters and optimiser (and the parameters again as the reference)."""
    key, init_key = jax.random.split(key)
    params: Any = parts.net.init(init_key)
    return EpisodicState(params=params, opt_state=parts.optimiser(hp).init(params), key=key,
                         updates=jnp.zeros((), jnp.int32), env_steps=jnp.zeros((), jnp.int32),
                         reference=params if keep_reference else None)


def spec(name: str, config_type: type, *, check: Callable, init: Callable, update: Callable,
         greedy_result: Callable, presets: dict, shown: tuple[str, ...],
         headline: tuple[str, ...]) -> AlgorithmSpec:
    """The :class:`AlgorithmSpec` of a whole-episode algorithm (``--algo name``, trains what
    PPO trains when asked): its build checks the algorithm's own settings (``check(config)``),
    then the shared ones (:func:`make_parts`), and returns the neural algorithm
    (:func:`rollax.algos.base.neural_algorithm`) of ``init(parts, key, hp)``, ``update(parts,
    state, hp)`` and ``greedy_result(state, metrics, eval_return)``."""

    def build(config, checked: bool = False, env: Environment | None = None):
        check(config)
        config, parts = make_parts(config, checked, env)
        policy: Any = parts.net  # feed-forward (Policy) or recurrent (RecurrentPolicy)
        return neural_algorithm(
            config, parts.env, policy, num_updates=config.updates,
            env_steps_per_update=config.batch_size * parts.horizon,
            episodes_per_update=config.batch_size, init=functools.partial(init, parts),
            update=functools.partial(update, parts), greedy_result=greedy_result,
            env_batch_fields=())

    return AlgorithmSpec(
        name=name, config_type=config_type, build=build, trains=NEURAL,
        report=Report(score="eval_return", progress="episode_return", shown=shown,
                      headline=headline),
        default=False, presets=presets)
