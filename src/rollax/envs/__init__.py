"""Functional environments: the interface, the corridor, finite MDPs and the registry."""

from rollax.envs.acrobot import Acrobot, AcrobotState
from rollax.envs.base import Box, Dict, Discrete, Environment, MultiBinary, MultiDiscrete, Tuple
from rollax.envs.cartpole import CartPole, CartPoleState
from rollax.envs.corridor import Corridor, CorridorState
from rollax.envs.mountain_car import MountainCar, MountainCarState
from rollax.envs.pendulum import Pendulum, PendulumState
from rollax.envs.registry import make, register, registered
from rollax.envs.tabular import TOY_TEXT, FiniteMDPState, TabularEnv, mdp_from_gymnasium

__all__ = [
    "TOY_TEXT",
    "Acrobot",
    "AcrobotState",
    "Box",
    "CartPole",
    "CartPoleState",
    "Corridor",
    "CorridorState",
    "Dict",
    "Discrete",
    "Environment",
    "FiniteMDPState",
    "MountainCar",
    "MountainCarState",
    "MultiBinary",
    "MultiDiscrete",
    "Pendulum",
    "PendulumState",
    "TabularEnv",
    "Tuple",
    "make",
    "mdp_from_gymnasium",
    "register",
    "registered",
]
