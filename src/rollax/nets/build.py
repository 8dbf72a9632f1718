"""The actor-critic for an environment: which network (:func:`network_choice`: ``auto`` picks
the CNN for image observations, else the MLP) and its construction for the environment's spaces
(:func:`actor_critic`)."""

from __future__ import annotations

import numpy as np

from rollax.envs.base import Discrete
from rollax.nets.cnn import CNNActorCritic, image_shape
from rollax.nets.mlp import MLPActorCritic
from rollax.nets.rnn import RecurrentActorCritic

__all__ = ["RECURRENT", "Network", "actor_critic", "network_choice"]

RECURRENT = ("gru", "lstm")
"""The recurrent actor-critics (:class:`rollax.nets.rnn.RecurrentActorCritic`'s cells)."""

Network = MLPActorCritic | CNNActorCritic | RecurrentActorCritic
"""The actor-critics :func:`actor_critic` builds."""


def network_choice(network: str, env) -> str:
    """``network`` itself, or for ``"auto"`` the CNN when ``env``'s observation is an image
    (:func:`rollax.nets.cnn.image_shape`) and the MLP otherwise."""
    if network == "auto":
        return "cnn" if image_shape(env) is not None else "mlp"
    return network


def actor_critic(env, network: str, hidden: tuple[int, ...], activation: str,
                 init_log_std: float, memory_size: int) -> Network:
    """The actor-critic for ``env``'s spaces: ``network`` ``mlp`` (hidden layers ``hidden``),
    ``cnn`` (over :func:`rollax.nets.cnn.image_shape`, then ``hidden``), ``gru``/``lstm`` (an
    embedding of ``hidden[0]`` units, a memory of ``memory_size``, heads of ``hidden[1:]``) or
    ``auto`` (:func:`network_choice`); a categorical head for ``Discrete`` actions, else a
    diagonal Gaussian starting at ``init_log_std``."""
    space = env.action_space
    discrete = isinstance(space, Discrete)
    num_actions = space.n if discrete else None
    action_size = None if discrete else int(np.prod(space.shape))
    network = network_choice(network, env)
    if network in RECURRENT:
        return RecurrentActorCritic(
            observation_size=int(env.observation_space.shape[0]), num_actions=num_actions,
            action_size=action_size, cell=network, embed_size=hidden[0],
            memory_size=memory_size, hidden=tuple(hidden[1:]), activation=activation,
            init_log_std=init_log_std)
    if network == "cnn":
        shape = image_shape(env)
        if shape is None:
            raise ValueError("network 'cnn' needs image observations (a raw_observation_shape "
                             "(H, W, C)); use network mlp or auto")
        return CNNActorCritic(image_shape=shape, num_actions=num_actions,
                              action_size=action_size, hidden=tuple(hidden),
                              activation=activation, init_log_std=init_log_std)
    return MLPActorCritic(observation_size=int(env.observation_space.shape[0]),
                          num_actions=num_actions, action_size=action_size,
                          hidden=tuple(hidden), activation=activation,
                          init_log_std=init_log_std)
