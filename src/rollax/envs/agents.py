"""Teams of agents acting at once, each paid its own reward (``docs/contract.md §9``): what an
environment adds to be one, and how rollax reads it.

An environment is a team when it has ``num_agents >= 2`` and ``agent_rewards(state) ->
float32 (num_agents,)``: what each agent received in the transition that reached ``state``
(read right after a live step only). Every agent acts on every step, so its spaces carry an
agent axis first:

- the observation is ``(N, ...)``: row ``i`` is agent ``i``'s own view (what the team shares,
  repeated in every row);
- the action is one per agent: a ``MultiDiscrete`` of ``N`` equal components, or a ``Box`` of
  shape ``(N, k)`` (``k`` continuous values each); the action mask, where there is one, is
  ``(N, n)``, row ``i`` agent ``i``'s legal actions;
- the episode ends for the whole team at once (``terminated`` and ``truncated`` stay
  scalars), and the scalar ``reward`` ``step`` returns is the team's sum,
  ``sum_i agent_rewards[i]``, so the single-agent machinery (episode returns, evaluation,
  checks) reads the team's return.

One network with shared parameters acts for every agent (:mod:`rollax.nets.team`); the
collectors record the agents' rewards beside the team's (``Trajectory.agent_rewards``,
``(T, B, N)``), and the actor-critics learn from each agent's own rewards and values.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

__all__ = ["agent_rewards", "agent_space", "is_team", "num_agents", "team_problem"]


def num_agents(env: Any) -> int:
    """The agents of ``env``: its ``num_agents``, 1 for an environment without one."""
    return int(getattr(env, "num_agents", 1))


def is_team(env: Any) -> bool:
    """Whether ``env`` is a team of two or more agents with rewards of their own (module
    docstring)."""
    return num_agents(env) > 1 and hasattr(env, "agent_rewards")


def agent_rewards(env: Any, next_state: Any, active: jax.Array) -> jax.Array | None:
    """Each agent's reward ``(N,)`` in one environment's step to ``next_state`` (0 where the
    episode had already ended: ``active`` false), or ``None`` for an environment that is not
    a team."""
    if not is_team(env):
        return None
    rewards = jnp.asarray(env.agent_rewards(next_state), jnp.float32)
    return jnp.where(active, rewards, 0.0)


def agent_space(space: Any, agents: int) -> tuple[str, int]:
    """One agent's action in a team's action ``space`` of ``agents`` agents: ``("discrete",
    n)`` for a ``MultiDiscrete`` of ``agents`` components of ``n`` values each, ``("box", k)``
    for a ``Box`` of shape ``(agents, k)``. ``ValueError`` (one line) for any other space."""
    nvec = getattr(space, "nvec", None)
    shape = tuple(getattr(space, "shape", ()))
    if nvec is not None and len(nvec) == agents and len(set(nvec)) == 1:
        return "discrete", int(nvec[0])
    if nvec is None and len(shape) == 2 and shape[0] == agents:
        return "box", int(shape[1])
    raise ValueError(f"a team of {agents} agents needs one action per agent (a MultiDiscrete of "
                     f"{agents} equal components, or a Box of shape ({agents}, k)); got "
                     f"{type(space).__name__} of shape {shape}")


def team_problem(env: Any) -> str | None:
    """Why ``env``'s spaces do not fit a team (one clause), or ``None`` when they do: an
    observation of shape ``(N, D)`` and one action per agent (:func:`agent_space`)."""
    agents = num_agents(env)
    shape = tuple(getattr(env.observation_space, "shape", ()) or ())
    if len(shape) != 2 or shape[0] != agents:
        return (f"a team of {agents} agents needs an observation of shape ({agents}, D), "
                f"one row per agent; got {shape}")
    try:
        agent_space(env.action_space, agents)
    except ValueError as error:
        return str(error)
    return None

