"""Training algorithms, each registered once in :mod:`rollax.algos.registry`: ``tabular``
(REINFORCE and PPO-clip on finite tasks), ``ppo`` (neural actor-critic PPO) and ``a2c``
(synchronous advantage actor-critic on PPO's rollout)."""

from rollax.algos import a2c, ppo, tabular
from rollax.algos.a2c import A2CConfig
from rollax.algos.base import Algorithm, AlgorithmSpec
from rollax.algos.ppo import PPOConfig
from rollax.algos.registry import make_train, register_algorithm, train
from rollax.algos.tabular import TabularConfig

__all__ = ["A2CConfig", "Algorithm", "AlgorithmSpec", "PPOConfig", "TabularConfig", "a2c",
           "make_train", "ppo", "register_algorithm", "tabular", "train"]
