"""How the neural algorithms move their parameters: the gradient clipped per network, the
optimisers (Adam and PyTorch's RMSprop, ``eps`` 1e-5), the learning-rate schedule, and one
gradient step with checked mode's checks::

    (loss, aux), g = value_and_grad(loss)(params)
    g <- clip_per_network(g, max_grad_norm)          # the actor and the critic apart
    params <- optimiser(g)                           # adam or rmsprop, lr from the schedule

PPO, A2C, REINFORCE and group-relative PPO take their steps here
(:func:`gradient_step`); each chooses its optimiser and schedule from its own config.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

from rollax import guards

__all__ = ["Step", "actor_norm", "adam", "clip_per_network", "gradient_step", "rmsprop",
           "schedule"]


def clip_per_network(max_norm) -> optax.GradientTransformation:
    """``optax.clip_by_global_norm(max_norm)`` applied to the actor's gradient (its layers and
    ``log_std``), the critic's and a recurrent network's shared embedding and memory apart, each
    scaled to norm ``max_norm`` when above it. Clipped jointly, the critic's large early
    gradients shrink every actor step (1,024 CartPole environments: greedy 125 -> 228 from this
    alone; benchmarks/NOTES.md, "Wide batches")."""
    def part(field: str) -> str:
        return {"actor": "actor", "log_std": "actor", "critic": "critic"}.get(field, "shared")

    def update(updates, state, params=None):  # optax names the gradient "updates"
        del params
        grads: Any = updates
        parts: dict[str, list] = {}
        for field, value in grads._asdict().items():
            parts.setdefault(part(field), []).extend(jax.tree.leaves(value))
        norms = {name: jnp.sqrt(sum(jnp.sum(jnp.square(g)) for g in leaves))
                 for name, leaves in parts.items()}
        scale = {name: jnp.where(norm < max_norm, 1.0, max_norm / norm)
                 for name, norm in norms.items()}
        return type(grads)(**{field: jax.tree.map(lambda g, f=field: g * scale[part(f)], value)
                              for field, value in grads._asdict().items()}), state

    return optax.GradientTransformation(lambda params: optax.EmptyState(), update)


def actor_norm(grads) -> jax.Array:
    """The norm of the actor's gradient (its layers and ``log_std``; the whole gradient of a
    network without an ``actor`` field), before clipping."""
    if hasattr(grads, "actor"):
        return optax.tree.norm((grads.actor, grads.log_std))
    return optax.tree.norm(grads)


def schedule(lr, anneal: bool, steps: int) -> Callable:
    """The learning rate at gradient step ``count``: ``lr``, or with ``anneal`` linear from
    ``lr`` to 0 over ``steps`` gradient steps, ``lr * (1 - count / steps)``."""
    if anneal:
        return optax.linear_schedule(lr, 0.0, steps)
    return optax.constant_schedule(lr)


def adam(lr) -> optax.GradientTransformation:
    """Adam with ``eps`` 1e-5 (CleanRL's and Stable-Baselines3's)."""
    return optax.adam(lr, eps=1e-5)


def rmsprop(lr, decay: float = 0.99, eps: float = 1e-5) -> optax.GradientTransformation:
    """PyTorch's RMSprop (``torch.optim.RMSprop``, no momentum, not centred)::

        v <- decay * v + (1 - decay) * g^2          # v starts at 0
        p <- p - lr * g / (sqrt(v) + eps)           # eps outside the square root
    """
    return optax.rmsprop(lr, decay=decay, eps=eps, eps_in_sqrt=False)


class Step(NamedTuple):
    """One gradient step: the new parameters and optimiser state, the loss, its ``aux`` and
    the gradient (before clipping)."""

    params: Any
    opt_state: optax.OptState
    loss: jax.Array
    aux: Any
    grads: Any


def gradient_step(loss: Callable, params, opt_state: optax.OptState,
                  optimiser: optax.GradientTransformation, checked: bool = False,
                  update_number=None) -> Step:
    """``loss(params) -> (value, aux)`` differentiated once and ``optimiser``'s step applied;
    with ``checked``, checked mode's checks of the loss, the gradient and the new parameters
    (:func:`rollax.guards.check_step`, naming update ``update_number``)."""
    (value, aux), grads = jax.value_and_grad(loss, has_aux=True)(params)
    return apply_gradient(value, aux, grads, params, opt_state, optimiser, checked,
                          update_number)


def apply_gradient(value, aux, grads, params, opt_state: optax.OptState,
                   optimiser: optax.GradientTransformation, checked: bool = False,
                   update_number=None) -> Step:
    """:func:`gradient_step` with the loss's ``value``, ``aux`` and gradient ``grads``
    computed by the caller (e.g. chunk by chunk)."""
    deltas, opt_state = optimiser.update(grads, opt_state, params)  # optax's "updates"
    params = optax.apply_updates(params, deltas)
    if checked:
        guards.check_step(update_number, value, grads, params)
    return Step(params, opt_state, value, aux, grads)
