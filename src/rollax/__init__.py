"""rollax: batched on-policy reinforcement learning in JAX with checked contracts."""

from rollax.algos import PPOConfig, TabularConfig, make_train, ppo, tabular, train
from rollax.collect import (
    AutoResetTrajectory,
    Trajectory,
    collect,
    collect_autoreset,
    collection_keys,
    reset_batch,
    rollout,
)
from rollax.contracts import CheckReport, EnvContractError, check_collector, check_env
from rollax.distributions import Categorical, DiagGaussian
from rollax.envs import (
    Box,
    Corridor,
    Discrete,
    Environment,
    TabularEnv,
    make,
    mdp_from_gymnasium,
    register,
    registered,
)
from rollax.exact import (
    FiniteMDP,
    expected_return,
    optimal_return,
    optimal_values,
    policy_return,
    policy_table,
    policy_values,
    uniform_policy,
)
from rollax.evaluation import evaluate_policy
from rollax.losses import (
    actor_critic_loss,
    clipped_value_loss,
    ppo_clip_loss,
    ppo_clip_objective,
    ratio_stats,
    reinforce_loss,
)
from rollax.policies import (
    BernoulliPolicy,
    GreedyPolicy,
    MLPActorCritic,
    Policy,
    SoftmaxPolicy,
    default_policy,
)
from rollax.returns import discounted_returns, gae, reward_to_go

__version__ = "0.1.0"

__all__ = [
    "CheckReport",
    "EnvContractError",
    "check_collector",
    "check_env",
    "AutoResetTrajectory",
    "Categorical",
    "DiagGaussian",
    "MLPActorCritic",
    "collect_autoreset",
    "discounted_returns",
    "gae",
    "ppo",
    "reset_batch",
    "tabular",
    "BernoulliPolicy",
    "Box",
    "Corridor",
    "Discrete",
    "Environment",
    "FiniteMDP",
    "SoftmaxPolicy",
    "TabularEnv",
    "GreedyPolicy",
    "PPOConfig",
    "Policy",
    "TabularConfig",
    "actor_critic_loss",
    "clipped_value_loss",
    "evaluate_policy",
    "ratio_stats",
    "Trajectory",
    "collect",
    "collection_keys",
    "default_policy",
    "expected_return",
    "make",
    "make_train",
    "mdp_from_gymnasium",
    "optimal_return",
    "optimal_values",
    "policy_return",
    "policy_table",
    "policy_values",
    "ppo_clip_loss",
    "ppo_clip_objective",
    "register",
    "registered",
    "reinforce_loss",
    "reward_to_go",
    "rollout",
    "train",
    "uniform_policy",
]
