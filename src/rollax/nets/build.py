"""The actor-critic for an environment: its settings checked (:func:`check_network`), which
network (:func:`network_choice`: ``auto`` picks the Nature CNN for images of at least 36x36
pixels, the small CNN for smaller images or an observation with an image leaf, else the MLP;
``spatial``, one logit per cell of a grid, is only ever asked for)
and its construction for the environment's spaces (:func:`actor_critic`: a single vector
observation keeps the plain MLP, CNNs and GRU/LSTM; an observation of several leaves, or a
discrete one, is read leaf by leaf, :mod:`rollax.nets.encoders`)."""

from __future__ import annotations

import numpy as np

from rollax.envs.agents import agent_space, is_team, num_agents, team_problem
from rollax.envs.base import Discrete, MultiBinary, MultiDiscrete
from rollax.nets.cnn import CNNActorCritic, NatureCNNActorCritic, image_shape
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
from rollax.nets.spatial import SpatialActorCritic, grid_layout, spatial_problem
from rollax.nets.team import CRITICS, TeamActorCritic
from rollax.validate import check_count, check_real, is_int

__all__ = ["NETWORKS", "RECURRENT", "Network", "action_head", "actor_critic", "check_network",
           "network_choice", "observation_stats_template"]

RECURRENT = ("gru", "lstm")
"""The recurrent actor-critics (:class:`rollax.nets.rnn.RecurrentActorCritic`'s cells)."""

NETWORKS = ("auto", "mlp", "cnn", "nature", "spatial", *RECURRENT)
"""The values of a config's ``network`` setting."""

NATURE_MIN_SIZE = 36
"""The smallest image side the Nature CNN's convolutions take (``auto`` picks it from here)."""

Network = (MLPActorCritic | CNNActorCritic | NatureCNNActorCritic | EncodedActorCritic
           | SpatialActorCritic | RecurrentActorCritic | TeamActorCritic)
"""The actor-critics :func:`actor_critic` builds."""


def check_network(env, network: str, hidden, activation: str, init_log_std: float,
                  memory_size: int, env_name: str | None = None, critic: str = "own") -> None:
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
    if critic not in CRITICS:
        raise ValueError(f"critic must be one of {', '.join(CRITICS)}, got {critic!r}")
    space = env.observation_space
    named = type(env).__name__ if env_name is None else repr(env_name)
    if is_team(env) or critic != "own":
        check_team(env, network, critic, named)
        return
    if network == "spatial":
        problem = spatial_problem(env)
        if problem is not None:
            raise ValueError(f"network spatial gives one logit per cell of a grid, but env "
                             f"{named}: {problem}; use network mlp, cnn or auto")
        return
    if needs_encoder(space):
        problem = encodable_problem(space)
        if problem is not None:
            raise ValueError(f"env {named}: {problem}")
        if network == "nature":
            raise ValueError(f"network nature reads one image observation, but env {named}'s "
                             f"observation has several leaves or is discrete; use network cnn, "
                             f"mlp or auto")
        if network == "cnn" and not has_image_leaf(space):
            raise ValueError(f"network cnn needs an image observation leaf (a Box of shape "
                             f"(H, W, C)), but env {named} has none; use network mlp or auto")
        ObservationEncoder.for_space(space, conv=network_choice(network, env) == "cnn")
        return
    image = image_shape(env)
    if network in ("cnn", "nature") and image is None:
        shape = getattr(env, "raw_observation_shape", None)
        found = "none" if shape is None else repr(tuple(shape))
        raise ValueError(
            f"network {network} needs image observations, but env {named} has no "
            f"raw_observation_shape of rank 3 (H, W, C) (got {found}); use network mlp or auto")
    if network == "nature" and image is not None and min(image[:2]) < NATURE_MIN_SIZE:
        raise ValueError(
            f"network nature needs images of at least {NATURE_MIN_SIZE}x{NATURE_MIN_SIZE} "
            f"pixels, but env {named}'s are {image!r}; use network cnn or auto")


def check_team(env, network: str, critic: str, named: str) -> None:
    """A team's network (:class:`rollax.nets.team.TeamActorCritic`): an MLP over spaces with
    an agent axis; ``critic centralised`` needs a team (one-line ``ValueError`` each)."""
    if not is_team(env):
        raise ValueError(f"critic {critic} reads the whole team's observations, but env {named} "
                         f"is not a team of agents with rewards of their own; use critic own")
    problem = team_problem(env)
    if problem is not None:
        raise ValueError(f"env {named}: {problem}")
    if network not in ("auto", "mlp"):
        raise ValueError(f"network {network} is refused for env {named}, a team of "
                         f"{num_agents(env)} agents: one MLP with shared parameters acts for "
                         f"every agent; use network mlp or auto")


def network_choice(network: str, env) -> str:
    """``network`` itself, or for ``"auto"``, when ``env``'s observation is an image
    (:func:`rollax.nets.cnn.image_shape`), the Nature CNN for images of at least
    :data:`NATURE_MIN_SIZE` pixels a side and the small CNN for smaller ones (MinAtar's 10x10;
    also for an observation with an image leaf), and the MLP otherwise."""
    if network == "auto":
        if is_team(env):
            return "mlp"
        space = env.observation_space
        if needs_encoder(space):
            return "cnn" if has_image_leaf(space) else "mlp"
        shape = image_shape(env)
        if shape is None:
            return "mlp"
        return "nature" if min(shape[:2]) >= NATURE_MIN_SIZE else "cnn"
    return network


def actor_critic(env, network: str, hidden: tuple[int, ...], activation: str,
                 init_log_std: float, memory_size: int, critic: str = "own") -> Network:
    """The actor-critic for ``env``'s spaces: ``network`` ``mlp`` (hidden layers ``hidden``),
    ``cnn`` (over :func:`rollax.nets.cnn.image_shape`, then ``hidden``), ``nature`` (the
    Nature-DQN torso over the image, its dense layers ``hidden``, shared by actor and critic, the
    pixels scaled by :func:`pixel_scale`), ``gru``/``lstm`` (an embedding of ``hidden[0]``
    units, a memory of ``memory_size``, heads of ``hidden[1:]``) or ``auto``
    (:func:`network_choice`); a categorical head for ``Discrete`` actions, a factorised
    categorical for ``MultiDiscrete``, a Bernoulli per bit for ``MultiBinary``, else a diagonal
    Gaussian starting at ``init_log_std`` (:func:`action_head`); ``spatial``
    (:class:`rollax.nets.spatial.SpatialActorCritic`: a 3x3 "same" convolution of each
    ``hidden`` size over the grid :func:`rollax.nets.spatial.grid_layout` reads, one logit per
    cell and kind). A team of agents (:mod:`rollax.envs.agents`) gets one MLP shared by its
    agents, its critic reading each agent's own observation or, ``critic="centralised"``, the
    whole team's (:class:`rollax.nets.team.TeamActorCritic`). The settings are checked first
    (:func:`check_network`)."""
    check_network(env, network, hidden, activation, init_log_std, memory_size, critic=critic)
    if is_team(env):
        agents = num_agents(env)
        kind, size = agent_space(env.action_space, agents)
        action = {"num_actions" if kind == "discrete" else "action_size": size}
        return TeamActorCritic(num_agents=agents,
                               observation_size=int(env.observation_space.shape[1]),
                               hidden=tuple(hidden), activation=activation,
                               init_log_std=init_log_std, centralised=critic == "centralised",
                               **action)
    action = action_head(env.action_space)
    network = network_choice(network, env)
    if network == "spatial":
        layout = grid_layout(env)
        assert layout is not None  # check_network
        return SpatialActorCritic(layout=layout, hidden=tuple(hidden), activation=activation,
                                  init_log_std=init_log_std, **action)
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
    if network == "nature":
        shape = image_shape(env)
        assert shape is not None  # check_network
        return NatureCNNActorCritic(image_shape=shape, hidden=tuple(hidden),
                                    activation=activation, init_log_std=init_log_std,
                                    input_scale=pixel_scale(env.observation_space), **action)
    if network == "cnn":
        shape = image_shape(env)
        assert shape is not None  # check_network
        return CNNActorCritic(image_shape=shape, hidden=tuple(hidden), activation=activation,
                              init_log_std=init_log_std, **action)
    return MLPActorCritic(observation_size=int(env.observation_space.shape[0]),
                          hidden=tuple(hidden), activation=activation,
                          init_log_std=init_log_std, **action)


def pixel_scale(space) -> float:
    """What the Nature CNN multiplies an observation of ``space`` by: ``1 / high`` when the
    space's upper bounds are one finite value above 1 (Atari's byte frames: ``1/255``, CleanRL's
    ``x / 255.0``), else 1."""
    high = np.unique(np.asarray(getattr(space, "high", np.inf), np.float64))
    if high.size == 1 and np.isfinite(high[0]) and high[0] > 1:
        return float(1.0 / high[0])
    return 1.0


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
