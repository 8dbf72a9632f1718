"""Training algorithms, each registered once in :mod:`rollax.algos.registry`: ``tabular``
(REINFORCE and PPO-clip on finite tasks) and ``ppo`` (neural actor-critic PPO)."""

from rollax.algos import ppo, tabular
from rollax.algos.base import Algorithm, AlgorithmSpec
from rollax.algos.ppo import PPOConfig
from rollax.algos.registry import make_train, register_algorithm, train
from rollax.algos.tabular import TabularConfig

__all__ = ["Algorithm", "AlgorithmSpec", "PPOConfig", "TabularConfig", "make_train",
           "ppo", "register_algorithm", "tabular", "train"]
