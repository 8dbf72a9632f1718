"""Observations of several arrays (a ``Dict`` or ``Tuple`` space) or of a ``Discrete`` space,
read by the actor-critics: each leaf encoded by its kind, the codes concatenated into one
feature vector, then the usual dense heads (:class:`EncodedActorCritic`) or the memory of a
GRU/LSTM (:class:`rollax.nets.rnn.RecurrentActorCritic` with an ``encoder``).

A leaf's kind (:func:`leaf_specs`):

- ``image``: a rank-3 ``Box`` ``(H, W, C)``. With ``conv`` (network ``cnn``, or ``auto`` when the
  observation has an image leaf) it goes through its own convolutional torso, the CNN's
  (:class:`rollax.nets.cnn.CNNActorCritic`: 16 channels, 3x3, stride 1, ReLU, flattened
  channel-major); without, it is flattened like a vector;
- ``vector``: any other ``Box`` (or a ``MultiBinary``), flattened and cast to float32, used as
  it is (no layer of its own: the heads' first dense layer reads it);
- ``discrete``: a ``Discrete(n)`` leaf as its one-hot code of ``n`` floats, a
  ``MultiDiscrete(nvec)`` leaf as the one-hot codes of its components side by side. One-hot,
  not a learned embedding: the first dense layer on a one-hot code *is* an embedding (one
  column per value), without another size to choose.

Observation normalisation (``normalize_observations``) applies to the float ``Box`` leaves that
are not images only (:meth:`ObservationEncoder.stats_template`).

A single flat ``Box`` (and the flattened images of the suites' adapters) keeps the networks of
:mod:`rollax.nets.mlp` and :mod:`rollax.nets.cnn` unchanged: :func:`needs_encoder` says which
observation spaces come here.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from rollax.envs.base import (
    Box,
    Discrete,
    MultiBinary,
    MultiDiscrete,
    is_structured,
    space_leaves,
    space_tree,
)
from rollax.nets.cnn import conv, conv_hwc
from rollax.nets.heads import ActorCriticParams, FeedForwardHeads, linear, orthogonal_plans

__all__ = ["KINDS", "EncodedActorCritic", "LeafSpec", "ObservationEncoder", "encodable_problem",
           "has_image_leaf", "leaf_specs", "needs_encoder"]

KINDS = ("image", "vector", "discrete")
"""The kinds of observation leaf, each encoded its own way (module docstring)."""


@dataclasses.dataclass(frozen=True)
class LeafSpec:
    """One array of an observation: its path (``jax.tree_util.keystr``), kind, shape and, for a
    discrete leaf, the number of values of each component (``nvec``)."""

    path: str
    kind: str
    shape: tuple[int, ...]
    nvec: tuple[int, ...] = ()
    normalized: bool = False
    """A float, non-image ``Box`` leaf: observation normalisation applies to it."""

    @property
    def size(self) -> int:
        """Floats of its code without a torso: ``sum(nvec)`` one-hot, else the flat size."""
        return sum(self.nvec) if self.kind == "discrete" else math.prod(self.shape)


def _leaf(path: str, space: Any) -> LeafSpec:
    if isinstance(space, Discrete):
        if tuple(space.shape) != ():
            raise ValueError(f"observation leaf {path or 'observation'}: a Discrete "
                             f"observation must be a scalar, got shape {tuple(space.shape)}")
        return LeafSpec(path, "discrete", (), (int(space.n),))
    if isinstance(space, MultiDiscrete):
        return LeafSpec(path, "discrete", tuple(space.shape), tuple(space.nvec))
    if isinstance(space, MultiBinary):
        return LeafSpec(path, "vector", tuple(space.shape))
    if isinstance(space, Box):
        shape = tuple(int(d) for d in space.shape)
        if len(shape) == 3:
            return LeafSpec(path, "image", shape)
        floating = np.issubdtype(np.dtype(space.dtype), np.floating)
        return LeafSpec(path, "vector", shape, normalized=floating)
    raise ValueError(f"observation leaf {path or 'observation'} is a {type(space).__name__}; "
                     f"the networks read Box, Discrete, MultiDiscrete and MultiBinary leaves")


def leaf_specs(space: Any) -> tuple[LeafSpec, ...]:
    """The leaves of an observation space in ``jax.tree.leaves`` order (``ValueError`` naming
    a leaf the networks cannot read)."""
    return tuple(_leaf(path, s) for path, s in space_leaves(space))


def needs_encoder(space: Any) -> bool:
    """Whether observations of ``space`` go through an :class:`ObservationEncoder`: a ``Dict``
    or ``Tuple``, a ``Discrete`` / ``MultiDiscrete`` / ``MultiBinary``, or a ``Box`` that is
    not one vector. A rank-1 ``Box`` keeps the plain networks."""
    return not (isinstance(space, Box) and len(space.shape) == 1)


def encodable_problem(space: Any) -> str | None:
    """Why the networks cannot read observations of ``space`` (None when they can)."""
    if not (is_structured(space) or isinstance(space, (Box, Discrete, MultiDiscrete,
                                                         MultiBinary))):
        return f"its observation_space is a {type(space).__name__}"
    try:
        leaf_specs(space)
    except ValueError as err:
        return str(err)
    return None


def has_image_leaf(space: Any) -> bool:
    """Whether some leaf of ``space`` is an image (a rank-3 ``Box``)."""
    return any(leaf.kind == "image" for leaf in leaf_specs(space))


@dataclasses.dataclass(frozen=True)
class ObservationEncoder:
    """Reads one observation (a pytree of the leaves ``leaves``) into one feature vector: the
    leaves' codes concatenated in ``jax.tree.leaves`` order (module docstring). With ``conv``
    each image leaf has a torso of ``len(channels)`` convolutions whose layers come first in a
    network's layer tuple (:meth:`torso_plan`, :meth:`encode`)."""

    leaves: tuple[LeafSpec, ...]
    treedef: Any
    """The observation's pytree structure (``jax.tree.structure``)."""
    conv: bool = False
    channels: tuple[int, ...] = (16,)
    kernel_size: int = 3

    @classmethod
    def for_space(cls, space: Any, conv: bool = False) -> ObservationEncoder:
        """The encoder of observations of ``space`` (images through torsos with ``conv``)."""
        treedef = jax.tree.structure(space_tree(space, lambda s: 0))
        encoder = cls(leaf_specs(space), treedef, conv)
        for leaf in encoder.images:
            h, w, _ = leaf.shape
            shrink = len(encoder.channels) * (encoder.kernel_size - 1)
            if min(h, w) - shrink < 1:
                raise ValueError(f"observation leaf {leaf.path}: {len(encoder.channels)} "
                                 f"convolution(s) of size {encoder.kernel_size} leave nothing of "
                                 f"an image {leaf.shape!r}; use network mlp")
        return encoder

    @property
    def images(self) -> tuple[LeafSpec, ...]:
        """The leaves read by a convolutional torso (none without ``conv``)."""
        return tuple(leaf for leaf in self.leaves if self.conv and leaf.kind == "image")

    @property
    def num_torso_layers(self) -> int:
        return len(self.channels) * len(self.images)

    def _code_size(self, leaf: LeafSpec) -> int:
        if self.conv and leaf.kind == "image":
            h, w, _ = leaf.shape
            shrink = len(self.channels) * (self.kernel_size - 1)
            return self.channels[-1] * (h - shrink) * (w - shrink)
        return leaf.size

    @property
    def num_features(self) -> int:
        """Length of the feature vector :meth:`encode` returns."""
        return sum(self._code_size(leaf) for leaf in self.leaves)

    def torso_plan(self) -> tuple[list, list]:
        """Shapes ``(out, in * k * k)`` and gains (sqrt 2) of every image leaf's convolutions,
        leaf after leaf (as :func:`rollax.nets.heads.orthogonal_plans` takes them)."""
        k = self.kernel_size
        shapes = []
        for leaf in self.images:
            ins = (leaf.shape[2], *self.channels[:-1])
            shapes += [(b, a * k * k) for a, b in zip(ins, self.channels)]
        return shapes, [math.sqrt(2.0)] * len(shapes)

    def torso_layers(self, weights: list) -> tuple:
        """The convolutions of :meth:`torso_plan`'s drawn matrices."""
        return tuple(conv(w, self.kernel_size) for w in weights)

    def encode(self, torso: tuple, observation: Any) -> jax.Array:
        """The feature vector of one observation; ``torso``: the layers of
        :meth:`torso_layers` (empty without ``conv``)."""
        values = self.treedef.flatten_up_to(observation)
        codes, used = [], 0
        for leaf, x in zip(self.leaves, values, strict=True):
            x = jnp.asarray(x)
            if leaf.kind == "discrete":
                x = x.reshape(-1)
                codes += [jax.nn.one_hot(x[i], n, dtype=jnp.float32)
                          for i, n in enumerate(leaf.nvec)]
            elif self.conv and leaf.kind == "image":
                image = x.reshape(leaf.shape).astype(jnp.float32)
                for layer in torso[used:used + len(self.channels)]:
                    image = jax.nn.relu(conv_hwc(layer, image))
                used += len(self.channels)
                codes.append(jnp.transpose(image, (2, 0, 1)).reshape(-1))
            else:
                codes.append(x.reshape(-1).astype(jnp.float32))
        return jnp.concatenate(codes)

    def stats_template(self) -> Any:
        """An observation-shaped pytree for the observation statistics: zeros of the leaf's
        shape for each normalised leaf (float, non-image ``Box``), None for the others."""
        return self.treedef.unflatten(
            [jnp.zeros(leaf.shape, jnp.float32) if leaf.normalized else None
             for leaf in self.leaves])


@dataclasses.dataclass(frozen=True)
class EncodedActorCritic(FeedForwardHeads):
    """Separate actor and critic over an observation of several leaves (or a discrete one):
    each network is the :class:`ObservationEncoder`'s code (with its own convolutional torsos
    for image leaves when ``encoder.conv``), then the shared dense head
    (:class:`rollax.nets.heads.ActorCriticHead`). Initialisation is the MLP's and the CNN's:
    orthogonal, gain sqrt(2) for the convolutions and hidden layers, 1.0 for logits (0.01 for a
    Gaussian mean) and the value, zero biases; drawn in the order actor torsos, actor head,
    critic torsos, critic head (one ``orthogonal_many`` call).

    Example::

        space = rollax.Dict({"grid": rollax.Box(0, 1, (5, 5, 1)), "cue": rollax.Discrete(3)})
        net = EncodedActorCritic(ObservationEncoder.for_space(space, conv=True), num_actions=2)
        params = net.init(jax.random.key(0))
        obs = {"grid": jnp.zeros((5, 5, 1)), "cue": jnp.int32(2)}
        action, log_prob = net.sample(params, obs, jax.random.key(1))
    """

    encoder: ObservationEncoder
    num_actions: int | None = None
    action_size: int | None = None
    hidden: tuple[int, ...] = (64, 64)
    activation: str = "tanh"
    init_log_std: float = 0.0
    action_nvec: tuple[int, ...] | None = None
    action_bits: int | None = None

    def init(self, key: jax.Array) -> ActorCriticParams:
        torso = self.encoder.torso_plan()
        actor_head, critic_head = self.head_plans(self.encoder.num_features)
        actor_convs, actor_dense, critic_convs, critic_dense = orthogonal_plans(
            key, [torso, actor_head, torso, critic_head])
        encoder = self.encoder
        return ActorCriticParams(
            (*encoder.torso_layers(actor_convs), *(linear(w) for w in actor_dense)),
            (*encoder.torso_layers(critic_convs), *(linear(w) for w in critic_dense)),
            self.initial_log_std())

    def forward(self, layers: tuple, observation: Any) -> jax.Array:
        n = self.encoder.num_torso_layers
        return self.dense(layers[n:], self.encoder.encode(layers[:n], observation))
