"""A user's own Gymnasium environment, for ``--env custom_envs.gym_walk:make`` (a host
environment): a walk on 0..size-1 from the middle, action 1 right and 0 left, reward 1 and the
end on reaching the right edge, -0.1 a step otherwise. By hand: the best return is
``1 - 0.1 * (size // 2 - 1)`` (walk right at once). ``make`` takes Gymnasium's
``render_mode="rgb_array"`` (the row as cells); ``make_dict`` takes none (so it cannot be
drawn)."""

from typing import ClassVar

import gymnasium
import numpy as np


class Walk(gymnasium.Env):
    metadata: ClassVar[dict] = {"render_modes": ["rgb_array"], "render_fps": 4}

    def __init__(self, size: int = 7, render_mode: str | None = None):
        self.size = size
        self.render_mode = render_mode
        self.observation_space = gymnasium.spaces.Box(0.0, 1.0, (size,), np.float32)
        self.action_space = gymnasium.spaces.Discrete(2)
        self.position = size // 2

    def _obs(self):
        obs = np.zeros(self.size, np.float32)
        obs[self.position] = 1.0
        return obs

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.position = self.size // 2
        return self._obs(), {}

    def step(self, action):
        self.position = max(0, self.position + (1 if int(action) == 1 else -1))
        done = self.position == self.size - 1
        return self._obs(), 1.0 if done else -0.1, done, False, {}

    def render(self):
        """The row as 8x8-pixel cells: grey, the goal (the right edge) green, the walker
        white."""
        picture = np.full((8, 8 * self.size, 3), 60, np.uint8)
        picture[:, 8 * (self.size - 1):] = (0, 160, 0)
        picture[:, 8 * self.position:8 * (self.position + 1)] = 255
        return picture


def make(size: int = 7, horizon: int = 50, render_mode: str | None = None) -> gymnasium.Env:
    return gymnasium.wrappers.TimeLimit(Walk(size, render_mode), horizon)


def make_unlimited(size: int = 7) -> gymnasium.Env:
    return Walk(size)


class DictWalk(Walk):
    """The same walk observed as a ``Dict``: the one-hot row, and a ``Tuple`` of the position
    (``Discrete``) and the distances to both edges (a 1x2 ``Box``)."""

    def __init__(self, size: int = 7):
        super().__init__(size)
        spaces = gymnasium.spaces
        self.observation_space = spaces.Dict({
            "row": spaces.Box(0.0, 1.0, (size,), np.float32),
            "where": spaces.Tuple((spaces.Discrete(size),
                                   spaces.Box(0.0, float(size), (1, 2), np.float32)))})

    def _obs(self):
        edges = np.array([[self.position, self.size - 1 - self.position]], np.float32)
        return {"row": super()._obs(), "where": (self.position, edges)}


def make_dict(size: int = 7, horizon: int = 50) -> gymnasium.Env:
    return gymnasium.wrappers.TimeLimit(DictWalk(size), horizon)
