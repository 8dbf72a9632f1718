"""Functional environments: the interface, the corridor, finite MDPs and the registry."""

from rollax.envs.base import Box, Discrete, Environment
from rollax.envs.corridor import Corridor, CorridorState
from rollax.envs.registry import make, register, registered
from rollax.envs.tabular import TOY_TEXT, TabularEnv, TabularState, mdp_from_gymnasium

__all__ = [
    "Box",
    "Corridor",
    "CorridorState",
    "Discrete",
    "Environment",
    "TOY_TEXT",
    "TabularEnv",
    "TabularState",
    "make",
    "mdp_from_gymnasium",
    "register",
    "registered",
]
