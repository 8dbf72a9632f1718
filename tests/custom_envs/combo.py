"""Every space at once: a ``Dict`` observation (an image, a vector and a discrete leaf), a
``MultiDiscrete((2, 4))`` action and an action mask, where the best return needs more than one
leaf and the mask matters.

Each step shows a fresh draw: ``grid`` a 5x5x1 image with one lit cell, in the two left columns
or the two right ones (side uniform); ``reading`` a vector of 2 floats, each of magnitude in
``[0.2, 1]`` and random sign; ``cue`` a ``Discrete(2)``. The action has two components:

- ``a[0]`` in ``{0, 1}``, both always legal: the lit cell's side (0 left, 1 right) when
  ``cue == 0``, the sign of ``reading[0]`` (0 negative, 1 positive) when ``cue == 1``; it pays
  1 when right (the task of tests/custom_envs/lookout.py);
- ``a[1]`` in ``{0, 1, 2, 3}``, of which only ``2 * cue`` and ``2 * cue + 1`` are legal
  (``action_mask``): the right one is ``2 * cue + (reading[1] > 0)``, which pays 1, the other
  legal one 0, and an illegal value pays :data:`TRAP` (3, more than the right answer): a
  policy that ignored the mask would learn to take illegal values.

Episodes end by truncation after ``horizon`` steps (4 by default).

By hand, per step under the mask (times ``horizon`` for an episode):

- the optimum is 2 (both components right), 8 an episode;
- a uniformly random legal policy gets 1/2 + 1/2 = 1, 4 an episode;
- a policy blind to the image or to the cue gets at most 3/4 + 1 = 1.75 (``a[0]``: right for
  sure only when the visible information settles it, 3/4 of the time: blind to the cue, when
  side and sign agree; blind to the image, when the cue is 1; ``a[1]`` needs only
  ``reading[1]``, the mask already fixing its pair by the cue), 7 an episode;
- a policy blind to the vector gets at most 3/4 + 1/2 = 1.25, 5 an episode;
- a policy ignoring the mask could get 1 + 3 = 4 (an illegal ``a[1]``), so a greedy return
  above 8 means an illegal action was taken.

Factories: :func:`make` (the task); planted bugs for ``rollax check-env``: :func:`wrong_shape`
(a ``(2, 3)`` mask where ``MultiDiscrete((2, 4))`` needs ``(2, 4)``: ``action_mask_shape``),
:func:`no_legal` (on the third step of every episode no value of ``a[1]`` is legal:
``legal_action_exists``). The third planted bug, an illegal action sampled, is a policy that
ignores the mask; the environment cannot make one, so the tests plant it in the checker's own
policy (tests/contracts/test_combo_checks.py). :func:`unmasked` is the task without ``action_mask``
(every value legal, illegal ones still paying ``TRAP``), for trainers that take no mask.
"""

import dataclasses
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

import rollax
from rollax.envs.base import start_counters

TRAP = 3.0
"""The reward of an illegal ``a[1]`` (more than a right answer's 1)."""

NVEC = (2, 4)
"""The action space's ``nvec``."""


class ComboState(NamedTuple):
    side: jax.Array
    """int32: 0 the lit cell is in the left two columns, 1 in the right two."""
    cell: jax.Array
    """int32 (2,): the lit cell's row and column."""
    reading: jax.Array
    """float32 (2,)."""
    cue: jax.Array
    """int32, 0 or 1."""
    elapsed: jax.Array
    done: jax.Array


def draw(key) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
    """``(side, cell, reading, cue)`` of one step, as the module docstring says."""
    k_side, k_row, k_col, k_mag, k_sign, k_cue = jax.random.split(key, 6)
    side = jax.random.bernoulli(k_side).astype(jnp.int32)
    row = jax.random.randint(k_row, (), 0, 5, jnp.int32)
    col = jax.random.randint(k_col, (), 0, 2, jnp.int32) + 3 * side
    sign = jnp.where(jax.random.bernoulli(k_sign, 0.5, (2,)), 1.0, -1.0)
    magnitude = jax.random.uniform(k_mag, (2,), jnp.float32, 0.2, 1.0)
    cue = jax.random.bernoulli(k_cue).astype(jnp.int32)
    return side, jnp.stack([row, col]), sign * magnitude, cue


@dataclasses.dataclass(frozen=True)
class Combo(rollax.Environment):
    """The task of the module docstring; ``bug`` a planted mask bug (``"wrong_shape"``,
    ``"no_legal"``); ``masked=False`` drops ``action_mask``."""

    horizon: int = 4
    bug: str | None = None
    stochastic = True

    def reset(self, key):
        return ComboState(*draw(key), *start_counters())

    def answers(self, state) -> jax.Array:
        """int32 (2,): the right value of each component."""
        first = jnp.where(state.cue == 0, state.side, (state.reading[0] > 0).astype(jnp.int32))
        second = 2 * state.cue + (state.reading[1] > 0).astype(jnp.int32)
        return jnp.stack([first, second])

    def legal(self, state) -> jax.Array:
        """bool ``(2, 4)``: both values of ``a[0]``; ``2 * cue`` and ``2 * cue + 1`` of
        ``a[1]``."""
        values = jnp.arange(4)
        first = values < 2
        second = (values // 2) == state.cue
        return jnp.stack([first, second])

    def action_mask(self, state):
        legal = self.legal(state)
        if self.bug == "wrong_shape":
            return legal[:, :3]
        if self.bug == "no_legal":
            return legal.at[1].set(legal[1] & (state.elapsed != 2))
        return legal

    def transition(self, state, action, key):
        action = jnp.asarray(action, jnp.int32)
        right = action == self.answers(state)
        legal = self.legal(state)[1, jnp.clip(action[1], 0, 3)] & (action[1] >= 0) & \
            (action[1] < 4)
        reward = right[0].astype(jnp.float32) + jnp.where(legal, right[1].astype(jnp.float32),
                                                          TRAP)
        fresh = dict(zip(("side", "cell", "reading", "cue"), draw(key)))
        return state._replace(**fresh), reward, jnp.zeros((), bool)

    def observation(self, state):
        grid = jnp.zeros((5, 5, 1), jnp.float32).at[state.cell[0], state.cell[1], 0].set(1.0)
        return {"grid": grid, "reading": state.reading, "cue": state.cue}

    @property
    def observation_space(self):
        return rollax.Dict({"grid": rollax.Box(np.float32(0.0), np.float32(1.0), (5, 5, 1)),
                            "reading": rollax.Box(np.float32(-1.0), np.float32(1.0), (2,)),
                            "cue": rollax.Discrete(2)})

    @property
    def action_space(self):
        return rollax.MultiDiscrete(NVEC)


@dataclasses.dataclass(frozen=True)
class UnmaskedCombo(Combo):
    """:class:`Combo` without ``action_mask`` (every value of ``a[1]`` is legal to the
    trainer; the illegal ones still pay ``TRAP``)."""

    action_mask = None  # type: ignore[assignment]


def make(horizon: int = 4) -> Combo:
    return Combo(horizon=horizon)


def wrong_shape(horizon: int = 4) -> Combo:
    return Combo(horizon=horizon, bug="wrong_shape")


def no_legal(horizon: int = 4) -> Combo:
    return Combo(horizon=horizon, bug="no_legal")


def unmasked(horizon: int = 4) -> UnmaskedCombo:
    return UnmaskedCombo(horizon=horizon)
