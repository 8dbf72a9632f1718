"""Action distributions written directly: log-prob, entropy, sampling, mode.

Each is a NamedTuple of arrays (a pytree), so it passes through ``jit`` and ``vmap``; batch
dimensions are leading, the event dimension (Gaussian) is last.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp

_HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)


class Categorical(NamedTuple):
    """``p(a) = softmax(logits)[a]`` over the last axis of ``logits``."""

    logits: jax.Array

    def log_prob(self, action: jax.Array) -> jax.Array:
        log_p = jax.nn.log_softmax(self.logits)
        return jnp.take_along_axis(log_p, action[..., None].astype(jnp.int32), axis=-1)[..., 0]

    def entropy(self) -> jax.Array:
        """``-sum_a p(a) log p(a)``."""
        log_p = jax.nn.log_softmax(self.logits)
        return -jnp.sum(jnp.exp(log_p) * log_p, axis=-1)

    def sample(self, key: jax.Array) -> jax.Array:
        return jax.random.categorical(key, self.logits).astype(jnp.int32)

    def mode(self) -> jax.Array:
        return jnp.argmax(self.logits, axis=-1).astype(jnp.int32)


class DiagGaussian(NamedTuple):
    """Independent normals, ``s = exp(log_std)``:
    ``log p(x) = sum_i -((x_i - mu_i) / s_i)^2 / 2 - log s_i - log(2 pi) / 2``."""

    mean: jax.Array
    log_std: jax.Array

    def log_prob(self, action: jax.Array) -> jax.Array:
        z = (action - self.mean) * jnp.exp(-self.log_std)
        return jnp.sum(-0.5 * z * z - self.log_std - _HALF_LOG_2PI, axis=-1)

    def entropy(self) -> jax.Array:
        """``sum_i log s_i + (1 + log 2 pi) / 2``."""
        per_dim = self.log_std + 0.5 + _HALF_LOG_2PI
        return jnp.sum(jnp.broadcast_to(per_dim, self.mean.shape), axis=-1)

    def sample(self, key: jax.Array) -> jax.Array:
        noise = jax.random.normal(key, self.mean.shape, self.mean.dtype)
        return self.mean + jnp.exp(self.log_std) * noise

    def mode(self) -> jax.Array:
        return self.mean
