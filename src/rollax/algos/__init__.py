"""Training algorithms, each registered once in :mod:`rollax.algos.registry`: ``tabular``
(REINFORCE and PPO-clip on finite tasks), ``ppo`` (neural actor-critic PPO), ``a2c``
(synchronous advantage actor-critic on PPO's rollout), ``reinforce`` (REINFORCE with baselines
on whole episodes) and ``grpo`` (group-relative PPO without a critic)."""

from rollax.algos import a2c, grpo, ppo, reinforce, tabular
from rollax.algos.a2c import A2CConfig
from rollax.algos.base import Algorithm, AlgorithmSpec
from rollax.algos.grpo import GRPOConfig
from rollax.algos.ppo import PPOConfig
from rollax.algos.registry import make_train, register_algorithm, train
from rollax.algos.reinforce import ReinforceConfig
from rollax.algos.tabular import TabularConfig

__all__ = ["A2CConfig", "Algorithm", "AlgorithmSpec", "GRPOConfig", "PPOConfig",
           "ReinforceConfig", "TabularConfig", "a2c", "grpo", "make_train", "ppo",
           "register_algorithm", "reinforce", "tabular", "train"]
