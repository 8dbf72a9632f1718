"""The convolutional actor-critics: :class:`CNNActorCritic` for small image-like observations
such as MinAtar's 10x10xC planes, :class:`NatureCNNActorCritic` (the Nature-DQN torso, shared
by actor and critic) for frames such as Atari's 84x84x4.

Environments hand policies rank-1 observations (adapters flatten images in C order and keep
the original shape as ``raw_observation_shape``, read by :func:`image_shape`);
:class:`CNNActorCritic` takes that vector and reshapes it to ``image_shape = (H, W, C)`` inside,
so collectors, PPO and observation normalisation see the same shapes as with
:class:`rollax.nets.mlp.MLPActorCritic`. :func:`conv` builds a convolution from a drawn matrix;
:func:`conv_hwc` applies it as one matrix product of the image's patches (the parameters stay
``equinox.nn.Conv2d`` layers).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, ClassVar, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp

from rollax.distributions import Distribution
from rollax.nets.heads import (
    ACTIVATIONS,
    ActorCriticParams,
    FeedForwardHeads,
    linear,
    mlp_plan,
    orthogonal_plans,
)

__all__ = ["NATURE_CONVS", "CNNActorCritic", "NatureCNNActorCritic", "NatureParams", "conv",
           "conv_hwc", "image_shape"]


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


def check_image_shape(shape) -> None:
    """``ValueError`` unless ``shape`` is ``(H, W, C)`` of positive sizes."""
    if len(shape) != 3 or min(shape) < 1:
        raise ValueError(f"image_shape must be (H, W, C), got {shape!r}")


def conv(matrix: jax.Array, kernel: int, stride: int = 1) -> eqx.nn.Conv2d:
    """The unpadded ``equinox.nn.Conv2d`` of this ``stride`` whose kernel is this ``(n_out, n_in
    * kernel**2)`` matrix, with a zero bias (no random draw compiled)."""
    n_out, n_in = matrix.shape[0], matrix.shape[1] // (kernel * kernel)
    layer = jax.eval_shape(lambda: eqx.nn.Conv2d(n_in, n_out, kernel, stride,
                                                 key=jax.random.key(0)))
    return eqx.tree_at(lambda c: (c.weight, c.bias), layer,
                       (matrix.reshape(n_out, n_in, kernel, kernel),
                        jnp.zeros((n_out, 1, 1), matrix.dtype)))


def conv_hwc(layer: eqx.nn.Conv2d, image: jax.Array) -> jax.Array:
    """``layer`` (unpadded, as :func:`conv` builds it) on one ``(H, W, C)`` image, as one matrix
    product of the image's patches: ``(H', W', n_out)`` with ``H' = (H - k) // stride + 1``, the
    same numbers as ``layer`` on the ``(C, H, W)`` image, channels last.

    The k*k shifted (and strided) views of the image side by side, ``(H', W', k * k * C)``,
    times the kernel as a ``(k * k * C, n_out)`` matrix. Under ``vmap`` this is one matmul of
    ``(N * H' * W', k * k * C)`` patches, and its kernel gradient is a matmul too; XLA on the
    CPU runs the ``conv_general_dilated`` form's kernel gradient (a convolution with an 8x8
    window over the batch) as a naive loop, ~15x slower than the whole rest of a PPO minibatch step
    (benchmarks/NOTES.md, "The CNN's kernel gradient")."""
    n_out, n_in, kh, kw = layer.weight.shape
    stride = layer.stride[0]
    h, w = (image.shape[0] - kh) // stride + 1, (image.shape[1] - kw) // stride + 1
    span_h, span_w = stride * (h - 1) + 1, stride * (w - 1) + 1
    patches = jnp.concatenate([image[i:i + span_h:stride, j:j + span_w:stride]
                               for i in range(kh) for j in range(kw)], axis=-1)
    matrix = jnp.transpose(layer.weight, (2, 3, 1, 0)).reshape(kh * kw * n_in, n_out)
    out = patches @ matrix
    return out if layer.bias is None else out + layer.bias.reshape(1, 1, n_out)


@dataclasses.dataclass(frozen=True)
class CNNActorCritic(FeedForwardHeads):
    """Separate convolutional actor and critic over an image observation ``(H, W, C)``.

    Each of the two networks is a torso of ``len(channels)`` convolutions (``kernel_size``
    square, stride 1, no padding, ReLU), flattened, then the shared dense head
    (:class:`rollax.nets.heads.ActorCriticHead`): ``hidden`` layers (``activation``) and one
    output layer, categorical logits (``num_actions``) or a Gaussian mean (``action_size``, with
    a free log standard deviation) for the actor, a scalar for the critic. Initialisation is
    the MLP's: orthogonal with gain sqrt(2) for every hidden layer (convolutions included, their
    kernels taken as ``(out, in * k * k)`` matrices), 1.0 for the actor's logits (0.01 for a
    Gaussian mean) and 1.0 for the critic's output, zero biases.

    Shapes: one observation ``(H * W * C,)`` (C order, as the adapters flatten it); ``vmap``
    adds batch axes. Parameters are an :class:`rollax.nets.heads.ActorCriticParams` whose
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
    action_nvec: tuple[int, ...] | None = None
    """``MultiDiscrete`` actions: the number of choices of each component."""
    action_bits: int | None = None
    """``MultiBinary`` actions: the number of bits."""

    def __post_init__(self):
        super().__post_init__()
        check_image_shape(self.image_shape)
        if not self.channels or min(self.channels) < 1 or self.kernel_size < 1:
            raise ValueError(f"channels and kernel_size must be positive, got "
                             f"{self.channels!r} and {self.kernel_size!r}")
        if min(self.feature_map[1:]) < 1:
            raise ValueError(f"{len(self.channels)} convolution(s) of size {self.kernel_size} "
                             f"leave nothing of an image {self.image_shape!r}")

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

    def init(self, key: jax.Array) -> ActorCriticParams:
        """Drawn in the order actor convolutions, actor head, critic convolutions, critic head
        (one ``orthogonal_many`` call)."""
        k = self.kernel_size
        ins = (self.image_shape[2], *self.channels[:-1])
        torso = ([(b, a * k * k) for a, b in zip(ins, self.channels)],
                 [math.sqrt(2.0)] * len(self.channels))
        actor_head, critic_head = self.head_plans(math.prod(self.feature_map))
        actor_convs, actor_dense, critic_convs, critic_dense = orthogonal_plans(
            key, [torso, actor_head, torso, critic_head])
        return ActorCriticParams(self._layers(actor_convs, actor_dense),
                                 self._layers(critic_convs, critic_dense),
                                 self.initial_log_std())

    def _layers(self, convs: list, dense: list) -> tuple:
        return (*(conv(w, self.kernel_size) for w in convs), *(linear(w) for w in dense))

    def torso(self, layers: tuple, observation: jax.Array) -> jax.Array:
        """The flattened features ``(channels * H' * W',)`` of the convolutions in ``layers``,
        channel-major (the order of ``equinox.nn.Conv2d``'s ``(C', H', W')`` output, which the
        first dense layer's columns follow). Each convolution is :func:`conv_hwc`, channels
        last; one transpose at the end."""
        x = observation.reshape(self.image_shape)  # (H, W, C)
        for layer in layers[:len(self.channels)]:
            x = jax.nn.relu(conv_hwc(layer, x))
        return jnp.transpose(x, (2, 0, 1)).reshape(-1)

    def forward(self, layers: tuple, observation: jax.Array) -> jax.Array:
        """The torso's features through the dense head (the layers after the convolutions)."""
        return self.dense(layers[len(self.channels):], self.torso(layers, observation))


NATURE_CONVS = ((32, 8, 4), (64, 4, 2), (64, 3, 1))
"""The Nature-DQN torso's convolutions: ``(channels, kernel, stride)`` each, unpadded, ReLU."""


class NatureParams(NamedTuple):
    """Parameters of :class:`NatureCNNActorCritic`: a pytree of arrays only."""

    torso: tuple
    """The shared torso: the three convolutions, then the dense layers of ``hidden``."""
    actor: tuple
    """The actor's output layer (logits or the Gaussian mean)."""
    critic: tuple
    """The critic's output layer (the scalar value)."""
    log_std: jax.Array
    """State-independent log standard deviations ``(action_size,)``; ``(0,)`` when discrete."""


@dataclasses.dataclass(frozen=True)
class NatureCNNActorCritic(FeedForwardHeads):
    """The Nature-DQN network as an actor-critic (the one of CleanRL's and PureJaxRL's Atari
    PPO), for frames such as Atari's ``(84, 84, 4)``.

    One torso shared by actor and critic: the observation times ``input_scale`` (``1/255`` for
    byte frames), then :data:`NATURE_CONVS` (32 8x8 kernels of stride 4, 64 4x4 of stride 2,
    64 3x3 of stride 1, unpadded, ReLU; 84x84 -> 20x20 -> 9x9 -> 7x7), flattened channel-major,
    then the dense layers ``hidden`` (``(512,)`` in the Nature network) with ``activation``;
    on it two output layers, the actor's (categorical logits, a Gaussian mean with a free
    log standard deviation, ...) and the critic's scalar. Initialisation: orthogonal, gain
    sqrt(2) for the torso (kernels as ``(out, in * k * k)`` matrices), the actor's output
    :data:`rollax.nets.heads.ACTOR_OUT_GAIN`, 1.0 for the critic's, zero biases. The images
    need at least 36x36 pixels.

    ``distribution`` and ``value`` read the torso each; ``distribution_value``, what the losses
    call, reads it once. Parameters are a :class:`NatureParams`; per-network gradient
    clipping clips the torso on its own. The policy methods are
    :class:`rollax.nets.heads.FeedForwardHeads`' (its ``forward`` unused).

    Example::

        net = NatureCNNActorCritic(image_shape=(84, 84, 4), num_actions=4)
        params = net.init(jax.random.key(0))
        action, log_prob = net.sample(params, jnp.zeros(84 * 84 * 4), jax.random.key(1))
    """

    image_shape: tuple[int, int, int]
    num_actions: int | None = None
    action_size: int | None = None
    hidden: tuple[int, ...] = (512,)
    activation: str = "relu"
    init_log_std: float = 0.0
    input_scale: float = 1.0
    """Multiplies the observation first (``1/255`` for byte frames)."""
    action_nvec: tuple[int, ...] | None = None
    """``MultiDiscrete`` actions: the number of choices of each component."""
    action_bits: int | None = None
    """``MultiBinary`` actions: the number of bits."""

    cells_per_call: ClassVar[int] = 16
    """How many observations the losses and the critic over a rollout read at a time: an
    84x84x4 frame's first-layer patches are 400 KB, so a 256-frame minibatch at once leaves
    the CPU's caches (here 1.3 ms a frame forward at 1,024 frames, 0.35 ms at 8; a minibatch
    gradient 0.42 s at once, 0.32 s 16 frames at a time)."""

    def __post_init__(self):
        super().__post_init__()
        check_image_shape(self.image_shape)
        if min(self.image_shape[:2]) < 36:
            raise ValueError(f"the Nature CNN needs images of at least 36x36 pixels, got "
                             f"{self.image_shape!r}")

    @property
    def observation_size(self) -> int:
        """Length of the flattened observation, ``H * W * C``."""
        return math.prod(self.image_shape)

    @property
    def feature_map(self) -> tuple[int, int, int]:
        """Shape ``(channels, H', W')`` of the last convolution's output."""
        h, w, _ = self.image_shape
        for _, k, s in NATURE_CONVS:
            h, w = (h - k) // s + 1, (w - k) // s + 1
        return NATURE_CONVS[-1][0], h, w

    def init(self, key: jax.Array) -> NatureParams:
        """Drawn in the order torso convolutions, torso dense layers, actor output, critic
        output (one ``orthogonal_many`` call)."""
        ins = (self.image_shape[2], *(c for c, _, _ in NATURE_CONVS[:-1]))
        convs = ([(c, n * k * k) for n, (c, k, _) in zip(ins, NATURE_CONVS)],
                 [math.sqrt(2.0)] * len(NATURE_CONVS))
        dense = mlp_plan((math.prod(self.feature_map), *self.hidden, 1), 1.0)
        dense = dense[0][:-1], dense[1][:-1]  # the hidden layers only (gain sqrt(2))
        actor_head, critic_head = self.head_plans(self.hidden[-1])
        actor_head = actor_head[0][-1:], actor_head[1][-1:]  # the output layers only
        critic_head = critic_head[0][-1:], critic_head[1][-1:]
        conv_w, dense_w, actor_w, critic_w = orthogonal_plans(
            key, [convs, dense, actor_head, critic_head])
        torso = (*(conv(w, k, s) for w, (_, k, s) in zip(conv_w, NATURE_CONVS)),
                 *(linear(w) for w in dense_w))
        return NatureParams(torso, (linear(actor_w[0]),), (linear(critic_w[0]),),
                            self.initial_log_std())

    def features(self, torso: tuple, observation: jax.Array) -> jax.Array:
        """The torso's output ``(hidden[-1],)`` for one flattened observation."""
        x = observation.reshape(self.image_shape) * self.input_scale  # (H, W, C)
        for layer in torso[:len(NATURE_CONVS)]:
            x = jax.nn.relu(conv_hwc(layer, x))
        x = jnp.transpose(x, (2, 0, 1)).reshape(-1)
        act = ACTIVATIONS[self.activation]
        for layer in torso[len(NATURE_CONVS):]:
            x = act(layer(x))
        return x

    def distribution(self, params: Any, observation: jax.Array) -> Distribution:
        """The actor's output layer on the shared torso's features (``params`` a
        :class:`NatureParams`); ``sample``, ``log_prob`` and ``greedy`` read it as every
        feed-forward network's do."""
        out = params.actor[0](self.features(params.torso, observation))
        return self.action_distribution(out, params.log_std)

    def value(self, params: Any, observation: jax.Array) -> jax.Array:
        """The critic's output layer on the shared torso's features."""
        return params.critic[0](self.features(params.torso, observation))[0]

    def distribution_value(self, params: Any, observation: jax.Array) -> tuple[Distribution,
                                                                               jax.Array]:
        """Both heads on one pass of the torso (a loss's gradient then runs the torso's
        backward pass once, not once per head)."""
        features = self.features(params.torso, observation)
        return (self.action_distribution(params.actor[0](features), params.log_std),
                params.critic[0](features)[0])
