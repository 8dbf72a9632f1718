"""The checks a command runs on an environment before it writes anything. A host environment
(a ``gymnasium.Env``): one of its environments reset and stepped once, the observations,
reward and flags held against its declared Gymnasium spaces (:func:`check_host_before_run`).
A JAX environment: that it
is hashable and declares spaces rollax supports, then one reset and one step traced abstractly
(``jax.eval_shape``: nothing is compiled or run), the observation laid out as its space
(one array, or the leaves of a ``Dict`` / ``Tuple``), and held against
the declared spaces by the ``reset_output`` and ``step_output`` checks of ``check_env``. A
failure is one line (``ValueError``) naming the environment.
"""

from __future__ import annotations

from typing import Any

import jax

from rollax.contracts.env_checks import reset_output, step_output
from rollax.contracts.env_run import EnvRun, Shapes, abstract_shapes
from rollax.contracts.probe import (
    RandomPolicy,
    first_line,
    mutable,
    unhashable,
    unsupported_observation,
    unsupported_space,
)
from rollax.envs.host import HostEnvironment
from rollax.envs.masks import mask_problem


def check_host_before_run(env: HostEnvironment, name: str) -> None:
    """``ValueError`` in one line naming ``name`` when one environment of ``env``, reset with
    seed 0 and stepped once, gives an observation that does not fit its declared space (the
    leaf, its dtype and shape, and the space's: the words of ``reset_output`` /
    ``step_output`` for a JAX environment), a reward that is not a real scalar or flags that
    are not bool scalars, or raises (:meth:`~rollax.envs.host.HostEnvironment.first_problem`).
    ``rollax check-env`` refuses the same, so no pointer to it."""
    problem = env.first_problem()
    if problem is None:
        return
    check, what = problem
    raise ValueError(f"environment {name!r}: {what}" if check is None else
                     f"environment {name!r} fails {check}: {what}")


def trace_once(env: Any, name: str) -> Shapes:
    """The abstract values of one reset and one step of ``env`` (a uniformly random action,
    key 0); ``ValueError`` ``environment '<name>': ...`` in one line when they cannot be
    traced."""
    key = jax.eval_shape(jax.random.key, 0)  # abstract: nothing is compiled
    try:
        policy = RandomPolicy.for_space(env.action_space)
        return abstract_shapes(env, policy, policy.init(), key)
    except Exception as err:
        raise ValueError(f"environment {name!r}: one reset and step cannot be traced "
                         f"({first_line(err)})") from None


def check_usable(env: Any, name: str) -> None:
    """``ValueError`` in one line unless ``env`` is hashable and immutable (``jit`` takes it
    as a static argument: a frozen dataclass) and its ``observation_space`` and
    ``action_space`` are spaces rollax supports (``Discrete``, ``Box``, ``MultiDiscrete``,
    ``MultiBinary``; for observations a ``Dict`` or ``Tuple`` of them)."""
    problem = unhashable(env, name) or mutable(env, name) or unsupported_space(env, name)
    if problem is not None:
        raise ValueError(problem)


def trace_checked(env: Any, name: str) -> Shapes:
    """:func:`check_usable`, then :func:`trace_once`, then the observation must have the
    layout of its space: one array, or the dicts and tuples of a ``Dict`` / ``Tuple``
    (``ValueError`` in one line otherwise). What ``rollax check-env`` runs before its checks."""
    check_usable(env, name)
    shapes = trace_once(env, name)
    problem = unsupported_observation(shapes.observation, env.observation_space,
                                      name)
    if problem is not None:
        raise ValueError(problem)
    return shapes


def check_before_run(env: Any, name: str) -> None:
    """``ValueError`` in one line naming ``name`` unless ``env`` is usable
    (:func:`check_usable`) and one reset and one step of ``env`` trace and pass
    ``reset_output`` and ``step_output`` (observation of the shape and dtype of
    ``observation_space``, leaf by leaf for a ``Dict`` / ``Tuple``, a float32 scalar reward,
    bool scalar ``terminated`` / ``truncated``, a state of stable types, an ``action_mask`` (if
    any) laid out for the action space: :func:`rollax.envs.masks.mask_problem`); a failing
    trace or check points to ``rollax check-env``."""
    check_usable(env, name)  # check-env refuses these too: no pointer to it
    hint = f"; `rollax check-env {name}` runs every check"
    try:
        shapes = trace_once(env, name)
    except ValueError as err:
        raise ValueError(f"{err}{hint}") from None
    problem = (unsupported_observation(shapes.observation, env.observation_space, name)
               or mask_problem(env, shapes.action_mask, name))
    if problem is not None:
        raise ValueError(problem)
    run = EnvRun(env=env, policy=None, params=None, batch_size=1, num_steps=1, seed=0,
                 from_horizon=False, autoreset_fn=None, shapes=shapes)
    for check in (reset_output, step_output):
        try:
            result = check(run)
        except Exception as err:  # e.g. an observation_space without shape or dtype
            raise ValueError(f"environment {name!r}: {check.__name__} cannot be checked "
                             f"({first_line(err)}){hint}") from None
        if result.failed:
            raise ValueError(f"environment {name!r} fails {check.__name__}: {result.message}"
                             f"{hint}")
