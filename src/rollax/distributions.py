"""Action distributions written directly: log-prob, entropy, sampling, mode.

Each is a NamedTuple of arrays (a pytree), so it passes through ``jit`` and ``vmap``; batch
dimensions are leading, the event dimensions (Gaussian, factorised categorical, Bernoulli) are
last. ``log_prob`` and ``entropy`` give one number per batch cell (the sum over an event's
components), ``sample`` and ``mode`` one action (int32 for the discrete ones).

- :class:`Categorical`: ``Discrete`` actions; :class:`DiagGaussian`: ``Box`` actions;
- :class:`MultiCategorical`: ``MultiDiscrete`` actions, one categorical per component;
- :class:`Bernoulli`: ``MultiBinary`` actions, one bit per component.

Action masks (:mod:`rollax.envs.masks`): ``dist.masked(mask)`` is the distribution restricted
to the legal actions, and :func:`masked` does it when a mask is given (``None``: the
distribution itself). An illegal logit becomes :data:`MASK_LOGIT`, a large negative *finite*
number: its probability is exactly 0, its gradient 0, and ``0 * log p`` stays 0 in the
entropy, so sampling, log-probabilities, entropies and modes are those of the legal actions.
``DiagGaussian`` takes no mask.

Sampling from given noise: ``dist.noise_shape`` is the shape of the independent uniforms on
``(0, 1)`` that ``dist.from_uniform(u)`` turns into a sample (one per entry of the logits or the
mean): Gumbel-max for the categoricals, ``u < p`` for bits, the normal quantile for the
Gaussian. It draws from the same distribution as ``sample`` (not the same numbers for a key);
an exported sampling policy takes ``u`` as an input (``docs/export.md``).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import ndtri

_HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)

MASK_LOGIT = -1e9
"""The logit of an illegal action (a masked entry): ``exp(MASK_LOGIT - max)`` is exactly 0 in
float32 for any logits a network gives, and no Gumbel noise (at most ~17) lifts it over a legal
logit. It is finite, so ``0 * log p`` is 0 and gradients stay finite, and it lies above
:data:`PAD_LOGIT`, so a row with no legal value (a finished state's) is uniform over the
component's own values, never over its padding."""


class Categorical(NamedTuple):
    """``p(a) = softmax(logits)[a]`` over the last axis of ``logits``."""

    logits: jax.Array

    def log_prob(self, action: jax.Array) -> jax.Array:
        """``log_softmax(logits)[a]``, picked by a select and a sum rather than a gather: the
        sum adds exact zeros to the one picked value, so it is that value bit for bit, and a
        TPU selects where it gathers (and, under ``grad``, scatters) slowly. An action outside
        ``[0, n)`` picks nothing: its log-probability is 0."""
        log_p = jax.nn.log_softmax(self.logits)
        picked = jax.nn.one_hot(action, log_p.shape[-1], dtype=jnp.bool_)
        return jnp.sum(jnp.where(picked, log_p, 0.0), axis=-1)

    def entropy(self) -> jax.Array:
        """``-sum_a p(a) log p(a)``."""
        log_p = jax.nn.log_softmax(self.logits)
        return -jnp.sum(jnp.exp(log_p) * log_p, axis=-1)

    def sample(self, key: jax.Array) -> jax.Array:
        return jax.random.categorical(key, self.logits).astype(jnp.int32)

    def mode(self) -> jax.Array:
        return jnp.argmax(self.logits, axis=-1).astype(jnp.int32)

    @property
    def noise_shape(self) -> tuple[int, ...]:
        return tuple(self.logits.shape)

    def from_uniform(self, u: jax.Array) -> jax.Array:
        """Gumbel-max: ``argmax_a logits[a] - log(-log u[a])`` (``u`` of the logits' shape)."""
        return jnp.argmax(self.logits - jnp.log(-jnp.log(u)), axis=-1).astype(jnp.int32)

    def masked(self, mask: jax.Array) -> Categorical:
        """Only the actions where ``mask`` (bool, the logits' shape) is True: the others'
        logits become :data:`MASK_LOGIT`."""
        return Categorical(jnp.where(mask, self.logits, MASK_LOGIT))


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

    @property
    def noise_shape(self) -> tuple[int, ...]:
        return tuple(self.mean.shape)

    def from_uniform(self, u: jax.Array) -> jax.Array:
        """``mean + s * Phi^-1(u)`` (``Phi^-1`` the standard normal's quantile; ``u`` of the
        mean's shape)."""
        return self.mean + jnp.exp(self.log_std) * ndtri(u)

    def masked(self, mask: jax.Array) -> DiagGaussian:
        raise ValueError("action masks need a Discrete, MultiDiscrete or MultiBinary action "
                         "space, not a Box (a diagonal Gaussian)")


PAD_LOGIT = float(np.finfo(np.float32).min)
"""The logit of a padding entry of :class:`MultiCategorical` (the most negative float32):
its probability ``exp(PAD_LOGIT - max)`` is exactly 0 in float32, and ``0 * log p`` is 0 (an
``-inf`` logit would make the entropy's ``0 * -inf`` a NaN)."""


class MultiCategorical(NamedTuple):
    """Independent categoricals, one per component of a ``MultiDiscrete(nvec)`` action:
    ``p(a) = prod_k softmax(logits[k])[a_k]``, so

    - ``log p(a) = sum_k log_softmax(logits[k])[a_k]`` and
    - ``H = sum_k -sum_j p_k(j) log p_k(j)``.

    ``logits`` is ``(..., K, N)`` with ``K = len(nvec)`` components and ``N = max(nvec)``:
    row ``k`` holds component ``k``'s ``nvec[k]`` logits, then :data:`PAD_LOGIT` (probability
    0) up to ``N`` (:meth:`from_flat` builds it from the actor's ``sum(nvec)`` outputs). A
    boolean ``(K, N)`` mask restricts each component (:meth:`masked`). Actions are
    int32 ``(..., K)``; ``sample`` draws every component from one key (``jax.random.categorical``
    over the last axis: independent Gumbel noise per entry), ``mode`` is the per-component
    argmax."""

    logits: jax.Array

    @staticmethod
    def from_flat(flat: jax.Array, nvec: tuple[int, ...]) -> MultiCategorical:
        """The padded ``(..., K, max(nvec))`` logits of the flat ``(..., sum(nvec))`` outputs:
        component ``k`` reads the ``nvec[k]`` entries after the first ``sum(nvec[:k])``."""
        width = max(nvec)
        starts = np.cumsum((0, *nvec[:-1]))
        column = np.arange(width)
        valid = column[None, :] < np.asarray(nvec)[:, None]  # (K, N)
        index = np.where(valid, starts[:, None] + column[None, :], 0)
        gathered = flat[..., index]
        return MultiCategorical(jnp.where(jnp.broadcast_to(valid, gathered.shape), gathered,
                                          PAD_LOGIT))

    def _components(self) -> Categorical:
        return Categorical(self.logits)

    def log_prob(self, action: jax.Array) -> jax.Array:
        return jnp.sum(self._components().log_prob(action), axis=-1)

    def entropy(self) -> jax.Array:
        return jnp.sum(self._components().entropy(), axis=-1)

    def sample(self, key: jax.Array) -> jax.Array:
        return self._components().sample(key)

    def mode(self) -> jax.Array:
        return self._components().mode()

    @property
    def noise_shape(self) -> tuple[int, ...]:
        return tuple(self.logits.shape)

    def from_uniform(self, u: jax.Array) -> jax.Array:
        """Gumbel-max per component (``u`` of the padded logits' shape ``(..., K, N)``)."""
        return self._components().from_uniform(u)

    def masked(self, mask: jax.Array) -> MultiCategorical:
        """Only the values where ``mask`` (bool ``(..., K, N)``, a row per component) is True:
        the others' logits become :data:`MASK_LOGIT`; padding stays :data:`PAD_LOGIT`
        whatever the mask says there."""
        return MultiCategorical(jnp.where(mask, self.logits,
                                          jnp.minimum(self.logits, MASK_LOGIT)))


class Bernoulli(NamedTuple):
    """Independent bits, one per component of a ``MultiBinary(n)`` action, ``p_i =
    sigmoid(logits_i)`` the probability of a 1:

    - ``log p(a) = sum_i a_i log sigmoid(l_i) + (1 - a_i) log sigmoid(-l_i)`` and
    - ``H = sum_i -p_i log sigmoid(l_i) - (1 - p_i) log sigmoid(-l_i)``.

    ``logits`` is ``(..., n)``; actions are int32 ``(..., n)`` of 0s and 1s. ``sample`` draws
    one uniform ``u_i`` per bit from its key and gives ``u_i < p_i``; ``mode`` gives ``l_i >
    0`` (a 0 at ``p_i = 1/2``)."""

    logits: jax.Array

    def log_prob(self, action: jax.Array) -> jax.Array:
        on = action.astype(bool)
        per_bit = jnp.where(on, jax.nn.log_sigmoid(self.logits), jax.nn.log_sigmoid(-self.logits))
        return jnp.sum(per_bit, axis=-1)

    def entropy(self) -> jax.Array:
        p = jax.nn.sigmoid(self.logits)
        per_bit = -p * jax.nn.log_sigmoid(self.logits) - (1 - p) * jax.nn.log_sigmoid(-self.logits)
        return jnp.sum(per_bit, axis=-1)

    def sample(self, key: jax.Array) -> jax.Array:
        u = jax.random.uniform(key, self.logits.shape, self.logits.dtype)
        return (u < jax.nn.sigmoid(self.logits)).astype(jnp.int32)

    def mode(self) -> jax.Array:
        return (self.logits > 0).astype(jnp.int32)

    @property
    def noise_shape(self) -> tuple[int, ...]:
        return tuple(self.logits.shape)

    def from_uniform(self, u: jax.Array) -> jax.Array:
        """``u_i < p_i`` (``u`` of the logits' shape)."""
        return (u < jax.nn.sigmoid(self.logits)).astype(jnp.int32)

    def masked(self, mask: jax.Array) -> Bernoulli:
        """Only the values where ``mask`` (bool ``(..., n, 2)``: ``mask[i, v]``, bit ``i`` may
        be ``v``) is True: a bit with one legal value gets the logit ``-MASK_LOGIT`` (only 1)
        or ``MASK_LOGIT`` (only 0), so it takes that value with probability 1 and adds 0 to
        the entropy; a bit with both (or, undefined, neither) keeps its logit."""
        zero, one = mask[..., 0], mask[..., 1]
        return Bernoulli(jnp.where(one & ~zero, -MASK_LOGIT,
                                   jnp.where(zero & ~one, MASK_LOGIT, self.logits)))


Distribution = Categorical | DiagGaussian | MultiCategorical | Bernoulli
"""The action distributions of the actor-critics."""


def masked(dist, mask):
    """``dist`` restricted to the legal actions of ``mask`` (``dist.masked(mask)``), or
    ``dist`` itself when ``mask`` is None (an environment without masks)."""
    return dist if mask is None else dist.masked(mask)
