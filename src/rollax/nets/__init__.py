"""The networks: actor-critics, their distributions and their initialisation.

- ``heads``: the head every actor-critic shares (settings check, dense layers drawn by
  one orthogonal rule, the forward loop, the action distribution), and the feed-forward
  policy methods;
- ``mlp``: :class:`MLPActorCritic`; ``cnn``: :class:`CNNActorCritic`,
  :class:`NatureCNNActorCritic` (and ``image_shape``);
  ``rnn``: the GRU/LSTM :class:`RecurrentActorCritic`; ``spatial``: :class:`SpatialActorCritic`
  (one logit per cell of a grid, :func:`grid_layout`); ``team``: :class:`TeamActorCritic` (one
  network shared by a team's agents, its critic each agent's own or centralised);
- ``distributions``: ``Categorical``, ``DiagGaussian``, ``MultiCategorical`` and
  ``Bernoulli``; ``initializers``: orthogonal
  weights written in ``jnp`` (no LAPACK call);
- ``build``: the actor-critic for an environment (:func:`network_choice`,
  :func:`actor_critic`).

What a policy is (the ``Policy`` and ``RecurrentPolicy`` protocols, tabular policies,
observation normalisation, carries and replay) lives in :mod:`rollax.policies` and
:mod:`rollax.recurrent`; the networks build on those. A network's parameters are a pytree of
arrays (equinox layers in NamedTuples) whose structure checkpoints rely on.
"""

from rollax.distributions import Bernoulli, Categorical, DiagGaussian, MultiCategorical
from rollax.nets.build import RECURRENT, Network, actor_critic, network_choice
from rollax.nets.cnn import CNNActorCritic, NatureCNNActorCritic, NatureParams, image_shape
from rollax.nets.heads import ActorCriticHead, ActorCriticParams, FeedForwardHeads
from rollax.nets.mlp import MLPActorCritic
from rollax.nets.rnn import RecurrentActorCritic, RecurrentParams
from rollax.nets.spatial import GridLayout, SpatialActorCritic, grid_layout
from rollax.nets.team import TeamActorCritic

__all__ = [
    "RECURRENT",
    "ActorCriticHead",
    "ActorCriticParams",
    "Bernoulli",
    "CNNActorCritic",
    "Categorical",
    "DiagGaussian",
    "FeedForwardHeads",
    "GridLayout",
    "MLPActorCritic",
    "MultiCategorical",
    "NatureCNNActorCritic",
    "NatureParams",
    "Network",
    "RecurrentActorCritic",
    "RecurrentParams",
    "SpatialActorCritic",
    "TeamActorCritic",
    "actor_critic",
    "grid_layout",
    "image_shape",
    "network_choice",
]
