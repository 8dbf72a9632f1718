"""Training algorithms: ``tabular`` (REINFORCE and PPO-clip on finite tasks) and ``ppo``
(neural actor-critic PPO)."""

from rollax.algos import ppo, tabular
from rollax.algos.tabular import (
    TrainConfig,
    TrainMetrics,
    TrainResult,
    make_train,
    resolve_config,
    train,
)

__all__ = [
    "ppo",
    "tabular","TrainConfig", "TrainMetrics", "TrainResult", "make_train", "resolve_config", "train"]
