"""The convolutional actor-critic, for image-like observations such as MinAtar's 10x10xC planes,
and :func:`actor_critic`, which builds the MLP, CNN or recurrent actor-critic for an
environment's spaces.

Environments hand policies rank-1 observations (adapters flatten images in C order and keep
the original shape as ``raw_observation_shape``); :class:`CNNActorCritic` takes that vector and
reshapes it to ``image_shape = (H, W, C)`` inside, so collectors, PPO and observation
normalisation see the same shapes as with :class:`rollax.policies.MLPActorCritic`.
"""

from __future__ import annotations

import dataclasses
import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from rollax.envs.base import Discrete
from rollax.initializers import orthogonal_many
from rollax.policies import (
    ACTIVATIONS,
    ActorCriticHeads,
    ActorCriticParams,
    MLPActorCritic,
    check_head,
    linear,
    mlp_plan,
)
from rollax.recurrent import RecurrentActorCritic

__all__ = ["RECURRENT", "CNNActorCritic", "Network", "actor_critic", "conv", "image_shape",
           "network_choice"]


def image_shape(env) -> tuple[int, int, int] | None:
    """``env``'s observation as an image ``(H, W, C)``: its ``raw_observation_shape`` when that
    has rank 3 and flattens to the observation vector, else ``None``."""
    shape = getattr(env, "raw_observation_shape", None)
    space_shape = getattr(env.observation_space, "shape", None)
    if shape is None or len(shape) != 3 or space_shape is None or len(space_shape) != 1:
        return None
    if math.prod(shape) != space_shape[0]:
        return None
    h, w, c = (int(n) for n in shape)
    return h, w, c


def conv(matrix: jax.Array, kernel: int) -> eqx.nn.Conv2d:
    """The stride-1, unpadded ``equinox.nn.Conv2d`` whose kernel is this ``(n_out, n_in *
    kernel**2)`` matrix, with a zero bias (no random draw compiled)."""
    n_out, n_in = matrix.shape[0], matrix.shape[1] // (kernel * kernel)
    layer = jax.eval_shape(lambda: eqx.nn.Conv2d(n_in, n_out, kernel, key=jax.random.key(0)))
    return eqx.tree_at(lambda c: (c.weight, c.bias), layer,
                       (matrix.reshape(n_out, n_in, kernel, kernel),
                        jnp.zeros((n_out, 1, 1), matrix.dtype)))


@dataclasses.dataclass(frozen=True)
class CNNActorCritic(ActorCriticHeads):
    """Separate convolutional actor and critic over an image observation ``(H, W, C)``.

    Each of the two networks is a torso of ``len(channels)`` convolutions (``kernel_size``
    square, stride 1, no padding, ReLU), flattened, then an MLP head with ``hidden`` layers
    (``activation``) and one output layer: categorical logits (``num_actions``) or a Gaussian
    mean (``action_size``, with a free log standard deviation) for the actor, a scalar for the
    critic. Initialisation is the MLP's: orthogonal with gain sqrt(2) for every hidden layer
    (convolutions included, their kernels taken as ``(out, in * k * k)`` matrices), 0.01 for
    the actor's output and 1.0 for the critic's, zero biases.

    Shapes: one observation ``(H * W * C,)`` (C order, as the adapters flatten it); ``vmap``
    adds batch axes. Parameters are an :class:`rollax.policies.ActorCriticParams` whose
    ``actor`` and ``critic`` tuples hold the convolutions then the linear layers.

    Example::

        net = CNNActorCritic(image_shape=(10, 10, 4), num_actions=3)
        params = net.init(jax.random.key(0))
        action, log_prob = net.sample(params, jnp.zeros(400), jax.random.key(1))
    """

    image_shape: tuple[int, int, int]
    num_actions: int | None = None
    action_size: int | None = None
    channels: tuple[int, ...] = (16,)
    kernel_size: int = 3
    hidden: tuple[int, ...] = (64, 64)
    activation: str = "tanh"
    init_log_std: float = 0.0

    def __post_init__(self):
        check_head(self)
        if len(self.image_shape) != 3 or min(self.image_shape) < 1:
            raise ValueError(f"image_shape must be (H, W, C), got {self.image_shape!r}")
        if not self.channels or min(self.channels) < 1 or self.kernel_size < 1:
            raise ValueError(f"channels and kernel_size must be positive, got "
                             f"{self.channels!r} and {self.kernel_size!r}")
        if min(self.feature_map[1:]) < 1:
            raise ValueError(f"{len(self.channels)} convolution(s) of size {self.kernel_size} "
                             f"leave nothing of an image {self.image_shape!r}")

    @property
    def discrete(self) -> bool:
        return self.num_actions is not None

    @property
    def observation_size(self) -> int:
        """Length of the flattened observation, ``H * W * C``."""
        return math.prod(self.image_shape)

    @property
    def feature_map(self) -> tuple[int, int, int]:
        """Shape ``(channels, H', W')`` of the last convolution's output."""
        shrink = len(self.channels) * (self.kernel_size - 1)
        h, w, _ = self.image_shape
        return self.channels[-1], h - shrink, w - shrink

    def _plan(self, n_out: int, out_gain: float) -> tuple[list, list]:
        """Weight shapes (kernels as ``(out, in * k * k)``) and gains of one network."""
        k = self.kernel_size
        ins = (self.image_shape[2], *self.channels[:-1])
        shapes = [(b, a * k * k) for a, b in zip(ins, self.channels)]
        dense_shapes, dense_gains = mlp_plan(
            (math.prod(self.feature_map), *self.hidden, n_out), out_gain)
        return shapes + dense_shapes, [math.sqrt(2.0)] * len(shapes) + dense_gains

    def _layers(self, weights: list) -> tuple:
        n_conv = len(self.channels)
        return (*(conv(w, self.kernel_size) for w in weights[:n_conv]),
                *(linear(w) for w in weights[n_conv:]))

    def init(self, key: jax.Array) -> ActorCriticParams:
        out = self.num_actions if self.discrete else self.action_size
        assert out is not None
        actor_shapes, actor_gains = self._plan(out, 0.01)
        critic_shapes, critic_gains = self._plan(1, 1.0)
        weights = orthogonal_many(key, actor_shapes + critic_shapes, actor_gains + critic_gains)
        log_std = jnp.full((0 if self.discrete else out,), self.init_log_std, jnp.float32)
        return ActorCriticParams(self._layers(weights[:len(actor_shapes)]),
                                 self._layers(weights[len(actor_shapes):]), log_std)

    def torso(self, layers: tuple, observation: jax.Array) -> jax.Array:
        """The flattened features ``(channels * H' * W',)`` of the convolutions in ``layers``."""
        x = jnp.transpose(observation.reshape(self.image_shape), (2, 0, 1))  # (C, H, W)
        for conv in layers[:len(self.channels)]:
            x = jax.nn.relu(conv(x))
        return x.reshape(-1)

    def forward(self, layers: tuple, observation: jax.Array) -> jax.Array:
        act = ACTIVATIONS[self.activation]
        x = self.torso(layers, observation)
        dense = layers[len(self.channels):]
        for layer in dense[:-1]:
            x = act(layer(x))
        return dense[-1](x)


# --- choosing and building an actor-critic for an environment ---------------------------------

RECURRENT = ("gru", "lstm")
"""The recurrent actor-critics (:class:`rollax.recurrent.RecurrentActorCritic`'s cells)."""

Network = MLPActorCritic | CNNActorCritic | RecurrentActorCritic
"""The actor-critics :func:`actor_critic` builds."""


def network_choice(network: str, env) -> str:
    """``network`` itself, or for ``"auto"`` the CNN when ``env``'s observation is an image
    (:func:`image_shape`) and the MLP otherwise."""
    if network == "auto":
        return "cnn" if image_shape(env) is not None else "mlp"
    return network


def actor_critic(env, network: str, hidden: tuple[int, ...], activation: str,
                 init_log_std: float, memory_size: int) -> Network:
    """The actor-critic for ``env``'s spaces: ``network`` ``mlp`` (hidden layers ``hidden``),
    ``cnn`` (over :func:`image_shape`, then ``hidden``), ``gru``/``lstm`` (an embedding of
    ``hidden[0]`` units, a memory of ``memory_size``, heads of ``hidden[1:]``) or ``auto``
    (:func:`network_choice`); a categorical head for ``Discrete`` actions, else a diagonal
    Gaussian starting at ``init_log_std``."""
    space = env.action_space
    discrete = isinstance(space, Discrete)
    num_actions = space.n if discrete else None
    action_size = None if discrete else int(np.prod(space.shape))
    network = network_choice(network, env)
    if network in RECURRENT:
        return RecurrentActorCritic(
            observation_size=int(env.observation_space.shape[0]), num_actions=num_actions,
            action_size=action_size, cell=network, embed_size=hidden[0],
            memory_size=memory_size, hidden=tuple(hidden[1:]), activation=activation,
            init_log_std=init_log_std)
    if network == "cnn":
        shape = image_shape(env)
        if shape is None:
            raise ValueError("network 'cnn' needs image observations (a raw_observation_shape "
                             "(H, W, C)); use network mlp or auto")
        return CNNActorCritic(image_shape=shape, num_actions=num_actions,
                              action_size=action_size, hidden=tuple(hidden),
                              activation=activation, init_log_std=init_log_std)
    return MLPActorCritic(observation_size=int(env.observation_space.shape[0]),
                          num_actions=num_actions, action_size=action_size,
                          hidden=tuple(hidden), activation=activation,
                          init_log_std=init_log_std)
