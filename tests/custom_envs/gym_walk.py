"""A user's own Gymnasium environment, for ``--env custom_envs.gym_walk:make`` (a host
environment): a walk on 0..size-1 from the middle, action 1 right and 0 left, reward 1 and the
end on reaching the right edge, -0.1 a step otherwise. By hand: the best return is
``1 - 0.1 * (size // 2 - 1)`` (walk right at once)."""

import gymnasium
import numpy as np


class Walk(gymnasium.Env):
    def __init__(self, size: int = 7):
        self.size = size
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


def make(size: int = 7, horizon: int = 50) -> gymnasium.Env:
    return gymnasium.wrappers.TimeLimit(Walk(size), horizon)


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
