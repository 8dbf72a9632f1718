"""A user's Gymnasium environments whose outputs do not fit their declared spaces, for
``--env custom_envs.gym_misfit:<factory>`` (host environments): the walk of
:mod:`custom_envs.gym_walk` (a one-hot row of ``size`` cells, ``Box(0, 1, (size,), float32)``)
with one planted fault each, from ``bad_from`` (the step, counted from 1 over the
environment's life, episodes after episodes, at which its output goes wrong; 0: its first
reset's).

``make(fault=..., bad_from=...)``: ``"long"`` observations of ``size + 1`` cells, ``"ints"``
int64 observations (they fit: Gymnasium casts them to the float32 space losing nothing of
their kind), ``"reward"`` a reward of shape ``(2,)``,
``"flag"`` an int ``terminated``, ``"nan"`` a NaN reward from step ``bad_from`` on. ``make_dict``:
the ``Dict`` observation of ``gym_walk.DictWalk`` whose ``['where'][1]`` leaf is ``(1, 3)``
instead of ``(1, 2)``."""

import gymnasium
import numpy as np

from custom_envs.gym_walk import DictWalk, Walk


class Misfit(Walk):
    def __init__(self, size: int = 7, fault: str = "long", bad_from: int = 0):
        super().__init__(size)
        self.fault, self.bad_from, self.steps = fault, bad_from, 0

    @property
    def bad(self) -> bool:
        return self.steps >= self.bad_from

    def _obs(self):
        obs = super()._obs()
        if self.bad and self.fault == "long":
            return np.append(obs, np.float32(0))
        if self.bad and self.fault == "ints":
            return obs.astype(np.int64)
        return obs

    def step(self, action):
        self.steps += 1
        obs, reward, terminated, truncated, info = super().step(action)
        if self.bad and self.fault == "reward":
            reward = np.array([reward, reward])
        if self.bad and self.fault == "nan":
            reward = float("nan")
        if self.bad and self.fault == "flag":
            terminated = int(terminated)
        return obs, reward, terminated, truncated, info


def make(fault: str = "long", bad_from: int = 0, horizon: int = 1000) -> gymnasium.Env:
    return gymnasium.wrappers.TimeLimit(Misfit(7, fault, bad_from), horizon)


class DictMisfit(DictWalk):
    def _obs(self):
        obs = super()._obs()
        position, edges = obs["where"]
        return {"row": obs["row"], "where": (position, np.append(edges, [[0.0]], axis=1))}


def make_dict(horizon: int = 50) -> gymnasium.Env:
    return gymnasium.wrappers.TimeLimit(DictMisfit(7), horizon)


def long_at_step() -> gymnasium.Env:
    """Observations of 8 cells from the first step on."""
    return make("long", 1)


def long_later(horizon: int = 1000) -> gymnasium.Env:
    """Observations of 8 cells from each environment's 40th step on (a training run's third
    update at 4 environments x 16 steps)."""
    return make("long", 40, horizon)


def nan_reward(horizon: int = 1000) -> gymnasium.Env:
    """A NaN reward from each environment's third step on (step 2, counted from 0)."""
    return make("nan", 3, horizon)
