"""rollax: batched on-policy reinforcement learning in JAX with checked contracts."""

from typing import TYPE_CHECKING

from rollax.algos import (
    A2CConfig,
    GRPOConfig,
    PPOConfig,
    ReinforceConfig,
    TabularConfig,
    a2c,
    grpo,
    make_train,
    ppo,
    reinforce,
    tabular,
    train,
)
from rollax.collect import (
    AutoResetTrajectory,
    Trajectory,
    collect,
    collect_autoreset,
    collect_autoreset_recurrent,
    collection_keys,
    reset_batch,
    rollout,
)
from rollax.contracts import (
    CheckReport,
    EnvContractError,
    check_collector,
    check_env,
    check_host_env,
    check_recurrent,
)
from rollax.envs import (
    Box,
    Corridor,
    Dict,
    Discrete,
    Environment,
    MultiBinary,
    MultiDiscrete,
    TabularEnv,
    Tuple,
    make,
    mdp_from_gymnasium,
    register,
    registered,
)
from rollax.evaluation import evaluate_policy
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
from rollax.losses import (
    actor_critic_loss,
    clipped_value_loss,
    ppo_clip_loss,
    ppo_clip_objective,
    ratio_stats,
    reinforce_loss,
)
from rollax.nets import (
    Bernoulli,
    Categorical,
    CNNActorCritic,
    DiagGaussian,
    MLPActorCritic,
    MultiCategorical,
    NatureCNNActorCritic,
    RecurrentActorCritic,
    SpatialActorCritic,
)
from rollax.policies import (
    BernoulliPolicy,
    GreedyPolicy,
    Policy,
    SoftmaxPolicy,
    default_policy,
)
from rollax.returns import discounted_returns, gae, reward_to_go
from rollax.version import __version__ as __version__

if TYPE_CHECKING:
    from rollax.gymnasium_export import to_gymnasium
    from rollax.run.loaded import LoadedPolicy, load_run
    from rollax.run.watch import render_episodes

_LAZY = {"LoadedPolicy": "rollax.run.loaded", "load_run": "rollax.run.loaded",
         "render_episodes": "rollax.run.watch", "to_gymnasium": "rollax.gymnasium_export"}
"""Names imported on first use (``import rollax`` stays light): the outer ring, and the
Gymnasium export (which imports Gymnasium)."""


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'rollax' has no attribute {name!r}")

__all__ = [
    "A2CConfig",
    "AutoResetTrajectory",
    "Bernoulli",
    "BernoulliPolicy",
    "Box",
    "CNNActorCritic",
    "Categorical",
    "CheckReport",
    "Corridor",
    "DiagGaussian",
    "Dict",
    "Discrete",
    "EnvContractError",
    "Environment",
    "FiniteMDP",
    "GRPOConfig",
    "GreedyPolicy",
    "LoadedPolicy",
    "MLPActorCritic",
    "MultiBinary",
    "MultiCategorical",
    "MultiDiscrete",
    "NatureCNNActorCritic",
    "PPOConfig",
    "Policy",
    "RecurrentActorCritic",
    "ReinforceConfig",
    "SoftmaxPolicy",
    "SpatialActorCritic",
    "TabularConfig",
    "TabularEnv",
    "Trajectory",
    "Tuple",
    "a2c",
    "actor_critic_loss",
    "check_collector",
    "check_env",
    "check_host_env",
    "check_recurrent",
    "clipped_value_loss",
    "collect",
    "collect_autoreset",
    "collect_autoreset_recurrent",
    "collection_keys",
    "default_policy",
    "discounted_returns",
    "evaluate_policy",
    "expected_return",
    "gae",
    "grpo",
    "load_run",
    "make",
    "make_train",
    "mdp_from_gymnasium",
    "optimal_return",
    "optimal_values",
    "policy_return",
    "policy_table",
    "policy_values",
    "ppo",
    "ppo_clip_loss",
    "ppo_clip_objective",
    "ratio_stats",
    "register",
    "registered",
    "reinforce",
    "reinforce_loss",
    "render_episodes",
    "reset_batch",
    "reward_to_go",
    "rollout",
    "tabular",
    "to_gymnasium",
    "train",
    "uniform_policy",
]
