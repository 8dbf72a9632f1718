"""What every trainer is made of, so one experiment runner drives them all.

An :class:`Algorithm` splits a run ``train(key)`` into pure parts::

    state = init(key, hp)
    state, metrics = update(state, hp)        # one update; scanned, or run in compiled chunks
    outputs = evaluate(state, hp)             # final numbers (exact or evaluation return)

``hp`` is a NamedTuple of the numeric hyperparameters (learning rate, clip range, ...): they
are traced inputs, so a sweep ``vmap``s over them exactly like over seeds. Settings that fix
shapes or the program (batch size, steps, epochs, network sizes) stay in the static config.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple


class Algorithm(NamedTuple):
    config: Any
    """The resolved static config."""
    hyperparams: Any
    """Default numeric hyperparameters (a NamedTuple of Python floats)."""
    num_updates: int
    """Updates in a full run."""
    env_steps_per_update: int
    """Environment steps each update collects."""
    init: Callable
    """``(key, hp) -> state``."""
    update: Callable
    """``(state, hp) -> (state, metrics)``."""
    evaluate: Callable
    """``(state, hp) -> dict`` of final outputs."""
    params: Callable
    """``state -> params`` (what is saved and hashed)."""
    env: Any
    """The environment the run trains on."""
    policy: Any
    """The acting policy (``sample``, ``log_prob``, ``greedy``)."""
    policy_params: Callable
    """``state -> params`` as ``policy`` takes them (e.g. with observation statistics)."""
    checked: bool = False
    """Whether ``update`` stages the runtime checks of :mod:`rollax.guards`."""
    env_batch_fields: tuple[str, ...] | None = None
    """Fields of the (NamedTuple) state whose leaves carry the environment batch on their first
    axis, split over devices by a sharded experiment (``None``: the default names of
    :data:`rollax.sharding.ENV_BATCH_FIELDS`)."""
