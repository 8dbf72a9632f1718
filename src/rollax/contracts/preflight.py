"""The check a command runs on an environment before it writes anything: one reset and one
step traced abstractly (``jax.eval_shape``: nothing is compiled or run) and held against the
declared spaces by the ``reset_output`` and ``step_output`` checks of ``check_env``. A failure
is one line (``ValueError``) naming the environment.
"""

from __future__ import annotations

from typing import Any

import jax

from rollax.contracts.env_checks import reset_output, step_output
from rollax.contracts.env_run import EnvRun, Shapes, abstract_shapes
from rollax.contracts.probe import RandomPolicy


def _first_line(err: BaseException) -> str:
    """``"TypeError: <the first line of its message>"``."""
    text = str(err).strip().partition("\n")[0]
    return f"{type(err).__name__}: {text}"


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
                         f"({_first_line(err)})") from None


def check_before_run(env: Any, name: str) -> None:
    """``ValueError`` in one line naming ``name`` and pointing to ``rollax check-env``, unless
    one reset and one step of ``env`` trace and pass ``reset_output`` and ``step_output``
    (observation shape and dtype against ``observation_space``, a float32 scalar reward, bool
    scalar ``terminated`` / ``truncated``, a state of stable types)."""
    hint = f"; `rollax check-env {name}` runs every check"
    try:
        shapes = trace_once(env, name)
    except ValueError as err:
        raise ValueError(f"{err}{hint}") from None
    run = EnvRun(env=env, policy=None, params=None, batch_size=1, num_steps=1, seed=0,
                 from_horizon=False, autoreset_fn=None, shapes=shapes)
    for check in (reset_output, step_output):
        try:
            result = check(run)
        except Exception as err:  # e.g. an observation_space without shape or dtype
            raise ValueError(f"environment {name!r}: {check.__name__} cannot be checked "
                             f"({_first_line(err)}){hint}") from None
        if result.failed:
            raise ValueError(f"environment {name!r} fails {check.__name__}: {result.message}"
                             f"{hint}")
