"""The spatial actor-critic (``network: spatial``) for boards and grids whose actions are the
cells: :class:`SpatialActorCritic` keeps the observation's cells as an image, convolves it with
"same" padding (the grid keeps its ``H x W``) and gives one logit per cell and kind, so that a
pattern worth playing (a revealed 0 beside a hidden cell, a line of two) scores the same
wherever on the board it lies.

:func:`grid_layout` reads an environment's flat observation vector as a grid
(:class:`GridLayout`): an image observation (``raw_observation_shape`` ``(H, W, C)`` or
``(H, W)``, as the Pgx adapter keeps it) is one grid of ``C`` channels; an observation of named
fields (``observation_fields``, as the Jumanji adapter gives it) is a grid of the fields whose
shape starts with the first grid-shaped field's ``(H, W)`` (their trailing axes as channels),
every other field a global feature broadcast to each cell. :func:`spatial_problem` says in one
line why an environment cannot have this network (its actions are not the grid's cells and
kinds).
"""

from __future__ import annotations

import dataclasses
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from rollax.distributions import Distribution
from rollax.envs.base import Discrete
from rollax.nets.cnn import conv, conv_hwc
from rollax.nets.heads import (
    ACTIVATIONS,
    ACTOR_OUT_GAIN,
    ActorCriticParams,
    FeedForwardHeads,
    linear,
    mlp_plan,
    orthogonal_plans,
)

__all__ = ["ONE_HOT_VALUES", "GridLayout", "SpatialActorCritic", "grid_layout",
           "spatial_problem"]

ONE_HOT_VALUES = (3, 16)
"""A grid field whose bounds are one integer range of this many values (inclusive; Jumanji's
Minesweeper board, -1 to 8, has 10) is read one-hot, one channel per value: each cell's value
becomes a category, not a magnitude. Bool planes (2 values) stay as they are."""


class CellPart(NamedTuple):
    """One field of the grid: ``H * W * channels`` floats in C order from ``start``."""

    start: int
    channels: int
    low: int = 0
    """The first value of a one-hot field."""
    values: int = 0
    """The values of a one-hot field (:data:`ONE_HOT_VALUES`); 0: read as it is."""


class GlobalPart(NamedTuple):
    """One field shown to every cell: ``size`` floats from ``start``, times ``scale``."""

    start: int
    size: int
    scale: float = 1.0
    """``1 / high`` where the field's upper bound is one finite value above 1, else 1."""


class GridLayout(NamedTuple):
    """How an observation vector of ``size`` floats reads as an ``(height, width, channels)``
    grid (:meth:`read`): its cell fields side by side (one-hot ones expanded), then its global
    (``shared``) fields broadcast to every cell."""

    height: int
    width: int
    cells: tuple[CellPart, ...]
    shared: tuple[GlobalPart, ...]
    size: int

    @property
    def channels(self) -> int:
        """The grid's channels ``C``: a one-hot field's ``channels * values``, a plain field's
        ``channels``, a global field's ``size``."""
        return (sum(p.channels * max(p.values, 1) for p in self.cells)
                + sum(p.size for p in self.shared))

    def read(self, observation: jax.Array) -> jax.Array:
        """One observation ``(size,)`` as the grid ``(height, width, channels)``."""
        h, w = self.height, self.width
        parts = []
        for p in self.cells:
            x = observation[p.start:p.start + h * w * p.channels].reshape(h, w, p.channels)
            if p.values:
                kinds = jnp.arange(p.low, p.low + p.values, dtype=x.dtype).reshape(1, 1, 1, -1)
                x = (x[..., None] == kinds).astype(x.dtype).reshape(h, w, -1)
            parts.append(x)
        for p in self.shared:
            x = observation[p.start:p.start + p.size] * p.scale
            parts.append(jnp.broadcast_to(x, (h, w, p.size)))
        return jnp.concatenate(parts, axis=-1)


def _fields(env) -> tuple[tuple[str, tuple[int, ...]], ...] | None:
    """``env``'s observation vector as ``(name, shape)`` fields in order: its
    ``observation_fields``, or its ``raw_observation_shape`` of rank 2 or 3 as one field."""
    space_shape = getattr(env.observation_space, "shape", None)
    if space_shape is None or len(space_shape) != 1:
        return None
    fields = getattr(env, "observation_fields", None)
    if fields is None:
        raw = getattr(env, "raw_observation_shape", None)
        if raw is None or len(raw) not in (2, 3):
            return None
        fields = (("observation", tuple(raw)),)
    fields = tuple((name, tuple(int(n) for n in shape)) for name, shape in fields)
    if sum(math.prod(shape) for _, shape in fields) != space_shape[0]:
        return None
    return fields


def _bounds(space, start: int, size: int) -> tuple[np.ndarray, np.ndarray]:
    """The distinct lower and upper bounds of ``size`` floats from ``start`` (infinite where the
    space has none)."""
    part = slice(start, start + size)
    low = np.broadcast_to(np.asarray(getattr(space, "low", -np.inf), np.float64), space.shape)
    high = np.broadcast_to(np.asarray(getattr(space, "high", np.inf), np.float64), space.shape)
    return np.unique(low[part]), np.unique(high[part])


def _cell_part(space, start: int, size: int, channels: int) -> CellPart:
    """A grid field, one-hot where its bounds are one integer range of
    :data:`ONE_HOT_VALUES` values."""
    low, high = _bounds(space, start, size)
    if low.size == 1 and high.size == 1 and np.all(np.isfinite([low[0], high[0]])):
        values = high[0] - low[0] + 1
        integral = low[0] == round(low[0]) and high[0] == round(high[0])
        if integral and ONE_HOT_VALUES[0] <= values <= ONE_HOT_VALUES[1]:
            return CellPart(start, channels, int(low[0]), int(values))
    return CellPart(start, channels)


def _global_part(space, start: int, size: int) -> GlobalPart:
    """A field shown to every cell, divided by its upper bound where that is one finite value
    above 1 (Minesweeper's mine count: 1 / 99)."""
    _, high = _bounds(space, start, size)
    scale = 1.0 / high[0] if high.size == 1 and np.isfinite(high[0]) and high[0] > 1 else 1.0
    return GlobalPart(start, size, float(scale))


def grid_layout(env) -> GridLayout | None:
    """``env``'s observation vector as a grid (module docstring), or ``None`` when it has no
    grid: no ``raw_observation_shape`` of rank 2 or 3 and no field of rank 2 or more."""
    fields = _fields(env)
    if fields is None:
        return None
    grid = next((shape[:2] for _, shape in fields if len(shape) >= 2), None)
    if grid is None:
        return None
    space, start, cells, shared = env.observation_space, 0, [], []
    for _, shape in fields:
        size = math.prod(shape)
        if shape[:2] == grid:
            cells.append(_cell_part(space, start, size, size // math.prod(grid)))
        elif size:
            shared.append(_global_part(space, start, size))
        start += size
    return GridLayout(grid[0], grid[1], tuple(cells), tuple(shared), start)


def spatial_problem(env) -> str | None:
    """Why ``network spatial`` cannot read ``env`` (one line), or ``None``: it needs a grid
    (:func:`grid_layout`) and a ``Discrete`` action whose count is the grid's ``H * W`` cells
    times a whole number of kinds."""
    layout = grid_layout(env)
    if layout is None:
        shape = getattr(env, "raw_observation_shape", None)
        found = "none" if shape is None else repr(tuple(shape))
        return (f"its observation is no grid (no raw_observation_shape (H, W, C) or (H, W), "
                f"got {found}, and no observation_fields of rank 2 or more)")
    cells = layout.height * layout.width
    grid = f"{layout.height}x{layout.width}"
    space = env.action_space
    if not isinstance(space, Discrete):
        return (f"its action is a {type(space).__name__}, not one Discrete action per cell of "
                f"its {grid} grid")
    if int(space.n) % cells:
        return (f"its {int(space.n)} actions are not one per cell (and kind) of its {grid} "
                f"grid: {int(space.n)} is not a multiple of {cells}")
    return None


@dataclasses.dataclass(frozen=True)
class SpatialActorCritic(FeedForwardHeads):
    """Separate convolutional actor and critic that keep the grid ``(H, W, C)`` of
    :class:`GridLayout` at its size, for actions that are its cells (times ``K`` kinds).

    Each network reads the grid ``x_0 = layout.read(o)`` through ``len(hidden)`` 3x3
    convolutions with "same" (zero) padding, ``x_i = act(conv3x3_i(pad(x_{i-1})))`` with
    ``hidden[i]`` channels (``activation``), so ``x_L`` is ``(H, W, hidden[-1])``. The actor's
    logits are a 1x1 convolution of ``x_L`` to ``K = num_actions / (H * W)`` channels,
    ``(H, W, K)`` flattened in C order: action ``(r * W + c) * K + k`` is cell ``(r, c)``,
    kind ``k`` (Pgx's tic-tac-toe: action ``3 r + c``; Jumanji's Minesweeper: the joint
    ``(row, col)`` action ``10 row + col``). The critic pools its own ``x_L`` over the cells,
    ``[mean(x_L), max(x_L)]`` (``2 * hidden[-1]``), then one dense layer of ``hidden[-1]``
    units (``activation``) and the scalar value. Illegal cells are masked by the action
    distribution, like every head's. Initialisation is the CNN's: orthogonal with gain
    sqrt(2) for the convolutions (kernels as ``(out, in * 9)`` matrices) and the critic's
    hidden layer, 1.0 for the logits' 1x1 convolution and for the value, zero biases.

    Shapes: one observation ``(layout.size,)``; ``vmap`` adds batch axes. Parameters are an
    :class:`rollax.nets.heads.ActorCriticParams`: ``actor`` the 3x3 convolutions then the 1x1
    one, ``critic`` the 3x3 convolutions then the two dense layers.

    Example::

        layout = GridLayout(3, 3, (CellPart(0, 2),), (), 18)  # tic-tac-toe's (3, 3, 2)
        net = SpatialActorCritic(layout=layout, num_actions=9)
        params = net.init(jax.random.key(0))
        action, log_prob = net.sample(params, jnp.zeros(18), jax.random.key(1))
    """

    layout: GridLayout
    num_actions: int | None = None
    action_size: int | None = None
    hidden: tuple[int, ...] = (64, 64)
    activation: str = "relu"
    init_log_std: float = 0.0

    def __post_init__(self):
        super().__post_init__()
        cells = self.layout.height * self.layout.width
        if self.num_actions is None or self.num_actions % cells:
            raise ValueError(f"the spatial network needs num_actions, a multiple of the "
                             f"{cells} cells of its grid, got {self.num_actions!r}")
        if not self.hidden:
            raise ValueError("the spatial network needs at least one convolution (hidden)")

    @property
    def observation_size(self) -> int:
        """Length of the observation vector."""
        return self.layout.size

    @property
    def kinds(self) -> int:
        """``K``: the actions per cell."""
        return self.num_actions // (self.layout.height * self.layout.width)  # type: ignore

    def init(self, key: jax.Array) -> ActorCriticParams:
        """Drawn in the order actor convolutions, logits, critic convolutions, critic dense
        layers (one ``orthogonal_many`` call)."""
        ins = (self.layout.channels, *self.hidden[:-1])
        torso = ([(b, a * 9) for a, b in zip(ins, self.hidden)],
                 [math.sqrt(2.0)] * len(self.hidden))
        logits = ([(self.kinds, self.hidden[-1])], [ACTOR_OUT_GAIN["logits"]])
        value = mlp_plan((2 * self.hidden[-1], self.hidden[-1], 1), 1.0)
        actor_convs, actor_out, critic_convs, critic_dense = orthogonal_plans(
            key, [torso, logits, torso, value])
        return ActorCriticParams(
            (*(conv(w, 3) for w in actor_convs), conv(actor_out[0], 1)),
            (*(conv(w, 3) for w in critic_convs), *(linear(w) for w in critic_dense)),
            self.initial_log_std())

    def torso(self, layers: tuple, observation: jax.Array) -> jax.Array:
        """The features ``(H, W, hidden[-1])`` of the 3x3 "same" convolutions in ``layers``."""
        act = ACTIVATIONS[self.activation]
        x = self.layout.read(observation)
        for layer in layers[:len(self.hidden)]:
            x = act(conv_hwc(layer, jnp.pad(x, ((1, 1), (1, 1), (0, 0)))))
        return x

    def logits(self, layers: tuple, observation: jax.Array) -> jax.Array:
        """The actor's logits ``(H * W * K,)``: the 1x1 convolution's ``(H, W, K)`` map in C
        order."""
        return conv_hwc(layers[-1], self.torso(layers, observation)).reshape(-1)

    def critic(self, layers: tuple, observation: jax.Array) -> jax.Array:
        """The value ``()``: the critic's features pooled (mean and max over the cells), then
        its dense layers."""
        x = self.torso(layers, observation)
        pooled = jnp.concatenate([jnp.mean(x, axis=(0, 1)), jnp.max(x, axis=(0, 1))])
        return self.dense(layers[len(self.hidden):], pooled)[0]

    def distribution(self, params: ActorCriticParams, observation: jax.Array) -> Distribution:
        return self.action_distribution(self.logits(params.actor, observation), params.log_std)

    def value(self, params: ActorCriticParams, observation: jax.Array) -> jax.Array:
        return self.critic(params.critic, observation)
