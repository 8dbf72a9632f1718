"""The actor-critic for an environment: its settings checked (:func:`check_network`), which
network (:func:`network_choice`: ``auto`` picks the CNN for image observations, or for an
observation with an image leaf, else the MLP) and its construction for the environment's spaces
(:func:`actor_critic`: a single vector observation keeps the plain MLP, CNN and GRU/LSTM; an
observation of several leaves, or a discrete one, is read leaf by leaf,
:mod:`rollax.nets.encoders`)."""

from __future__ import annotations

import numpy as np

from rollax.envs.base import Discrete, MultiBinary, MultiDiscrete
from rollax.nets.cnn import CNNActorCritic, image_shape
from rollax.nets.encoders import (
    EncodedActorCritic,
    ObservationEncoder,
    encodable_problem,
    has_image_leaf,
    needs_encoder,
)
from rollax.nets.heads import ACTIVATIONS
from rollax.nets.mlp import MLPActorCritic
from rollax.nets.rnn import RecurrentActorCritic
from rollax.validate import check_count, check_real, is_int

__all__ = ["NETWORKS", "RECURRENT", "Network", "action_head", "actor_critic", "check_network",
           "network_choice", "observation_stats_template"]

RECURRENT = ("gru", "lstm")
"""The recurrent actor-critics (:class:`rollax.nets.rnn.RecurrentActorCritic`'s cells)."""

NETWORKS = ("auto", "mlp", "cnn", *RECURRENT)
"""The values of a config's ``network`` setting."""

Network = MLPActorCritic | CNNActorCritic | EncodedActorCritic | RecurrentActorCritic
"""The actor-critics :func:`actor_critic` builds."""


def check_network(env, network: str, hidden, activation: str, init_log_std: float,
                  memory_size: int, env_name: str | None = None) -> None:
    """The settings of :func:`actor_critic` for ``env`` checked before anything is built
    (``ValueError`` naming the setting, its allowed values and the value given); ``env_name``
    names ``env`` in the messages."""
    if not hidden or not all(is_int(h) and h >= 1 for h in hidden):
        raise ValueError(f"hidden must be positive layer sizes, got {hidden!r}")
    if activation not in ACTIVATIONS:
        raise ValueError(f"activation must be one of {', '.join(ACTIVATIONS)}, "
                         f"got {activation!r}")
    check_real("init_log_std", init_log_std, -10, 10)
    check_count("memory_size", memory_size)
    if network not in NETWORKS:
        raise ValueError(f"network must be one of {', '.join(NETWORKS)}, got {network!r}")
    space = env.observation_space
    if needs_encoder(space):
        named = type(env).__name__ if env_name is None else repr(env_name)
        problem = encodable_problem(space)
        if problem is not None:
            raise ValueError(f"env {named}: {problem}")
        if network == "cnn" and not has_image_leaf(space):
            raise ValueError(f"network cnn needs an image observation leaf (a Box of shape "
                             f"(H, W, C)), but env {named} has none; use network mlp or auto")
        ObservationEncoder.for_space(space, conv=network_choice(network, env) == "cnn")
        return
    if network == "cnn" and image_shape(env) is None:
        shape = getattr(env, "raw_observation_shape", None)
        found = "none" if shape is None else repr(tuple(shape))
        named = type(env).__name__ if env_name is None else repr(env_name)
        raise ValueError(
            f"network cnn needs image observations, but env {named} has no "
            f"raw_observation_shape of rank 3 (H, W, C) (got {found}); use network mlp or auto")


def network_choice(network: str, env) -> str:
    """``network`` itself, or for ``"auto"`` the CNN when ``env``'s observation is an image
    (:func:`rollax.nets.cnn.image_shape`) and the MLP otherwise."""
    if network == "auto":
        space = env.observation_space
        if needs_encoder(space):
            return "cnn" if has_image_leaf(space) else "mlp"
        return "cnn" if image_shape(env) is not None else "mlp"
    return network


def actor_critic(env, network: str, hidden: tuple[int, ...], activation: str,
                 init_log_std: float, memory_size: int) -> Network:
    """The actor-critic for ``env``'s spaces: ``network`` ``mlp`` (hidden layers ``hidden``),
    ``cnn`` (over :func:`rollax.nets.cnn.image_shape`, then ``hidden``), ``gru``/``lstm`` (an
    embedding of ``hidden[0]`` units, a memory of ``memory_size``, heads of ``hidden[1:]``) or
    ``auto`` (:func:`network_choice`); a categorical head for ``Discrete`` actions, a
    factorised categorical for ``MultiDiscrete``, a Bernoulli per bit for ``MultiBinary``, else
    a diagonal Gaussian starting at ``init_log_std`` (:func:`action_head`). The settings are
    checked first (:func:`check_network`)."""
    check_network(env, network, hidden, activation, init_log_std, memory_size)
    action = action_head(env.action_space)
    network = network_choice(network, env)
    if needs_encoder(env.observation_space):
        encoder = ObservationEncoder.for_space(env.observation_space, conv=network == "cnn")
        if network in RECURRENT:
            return RecurrentActorCritic(
                observation_size=encoder.num_features, cell=network, embed_size=hidden[0],
                memory_size=memory_size, hidden=tuple(hidden[1:]), activation=activation,
                init_log_std=init_log_std, encoder=encoder, **action)
        return EncodedActorCritic(encoder, hidden=tuple(hidden), activation=activation,
                                  init_log_std=init_log_std, **action)
    if network in RECURRENT:
        return RecurrentActorCritic(
            observation_size=int(env.observation_space.shape[0]), cell=network,
            embed_size=hidden[0], memory_size=memory_size, hidden=tuple(hidden[1:]),
            activation=activation, init_log_std=init_log_std, **action)
    if network == "cnn":
        shape = image_shape(env)
        assert shape is not None  # check_network
        return CNNActorCritic(image_shape=shape, hidden=tuple(hidden), activation=activation,
                              init_log_std=init_log_std, **action)
    return MLPActorCritic(observation_size=int(env.observation_space.shape[0]),
                          hidden=tuple(hidden), activation=activation,
                          init_log_std=init_log_std, **action)


def action_head(space) -> dict:
    """The actor-critic's action setting for an action ``space`` (one of
    :data:`rollax.nets.heads.ACTION_KINDS`): ``num_actions`` for ``Discrete``, ``action_nvec``
    for ``MultiDiscrete``, ``action_bits`` for ``MultiBinary``, else ``action_size`` (the
    flattened size of a ``Box``)."""
    if isinstance(space, Discrete):
        return {"num_actions": int(space.n)}
    if isinstance(space, MultiDiscrete):
        return {"action_nvec": tuple(space.nvec)}
    if isinstance(space, MultiBinary):
        return {"action_bits": int(space.n)}
    return {"action_size": int(np.prod(space.shape))}


def observation_stats_template(net) -> int | object:
    """What :func:`rollax.policies.obs_norm_init` takes for ``net``'s observations: the vector
    size of a plain network, else the encoder's observation-shaped template (statistics for
    the float, non-image ``Box`` leaves only)."""
    encoder = getattr(net, "encoder", None)
    return net.observation_size if encoder is None else encoder.stats_template()
