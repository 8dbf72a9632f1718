"""A2C, synchronous advantage actor-critic, compiled end to end:
``rollax.make_train(A2CConfig())(key)``.

One update (:meth:`A2CParts.update`) on the auto-reset rollout of :mod:`rollax.algos.experience`
(which collects, computes the values and the advantages), one plain policy-gradient step on all
of it::

    key, rollout_key = split(key)
    collect:      env_state, traj = collect_autoreset(env, policy, params, env_state,
                                                      rollout_key, T)
    advantages:   r = r / std(running discounted return), clipped     # normalize_rewards only
                  A, G = gae(r, V, V', terminated, truncated, gamma, lambda)  # lambda = 1: n-step
    batch:        all T * B cells at once
    step:         loss = a2c_loss(log pi(a|s), A, V(s), G, entropy)
                  params <- rmsprop(clip_per_network(grad))           # one step per rollout
    advance:      observation statistics <- merged with this batch (when normalising)
    metrics

A feed-forward network (MLP, CNN) scores the ``T * B`` cells of the rollout; a recurrent one
(GRU, LSTM) replays each environment's whole sequence from the carry it was collected with,
resets included (inside the rollout's methods). The settings are PPO's actor-critic ones
(:class:`~rollax.algos.actor_critic.ActorCriticConfig`) and the optimiser; the defaults are
Stable-Baselines3's A2C (``n_steps=5``, ``lr=7e-4``, RMSprop with ``alpha=0.99, eps=1e-5`` as
``torch.optim.RMSprop`` defines it, ``gae_lambda=1``, no entropy bonus); docs/algorithms.md
lists what differs from it.
"""

from __future__ import annotations

import dataclasses
from typing import Literal, NamedTuple

import jax
import jax.numpy as jnp
import optax

from rollax.algos import optim
from rollax.algos.actor_critic import (
    ActorCriticConfig,
    ActorCriticResult,
    check_settings,
    environment,
    greedy_result,
    make_experience,
    num_updates,
    resolved,
)
from rollax.algos.base import (
    NEURAL,
    Algorithm,
    AlgorithmSpec,
    Report,
    hyperparams_type,
    new_defaults,
)
from rollax.algos.experience import (
    ActorCriticState,
    Advantages,
    Collected,
    Episodes,
    ExperienceParts,
    with_agent_metrics,
)
from rollax.envs.base import Environment
from rollax.losses import a2c_loss, explained_variance

__all__ = ["PRESETS", "SPEC", "A2CConfig", "A2CHyperparams", "A2CMetrics", "A2CParts",
           "A2CResult", "make_algorithm", "make_parts", "num_updates", "preset", "resolve",
           "validate"]


# --- config -----------------------------------------------------------------------------------

OPTIMIZERS = ("rmsprop", "adam")


@dataclasses.dataclass(frozen=True)
@new_defaults(num_envs=8, num_steps=5, lr=7e-4, anneal_lr=False, gae_lambda=1.0, ent_coef=0.0,
              normalize_advantages=False)
class A2CConfig(ActorCriticConfig):
    """A2C settings: the actor-critic's
    (:class:`~rollax.algos.actor_critic.ActorCriticConfig`), with Stable-Baselines3's A2C
    defaults where they differ from PPO's (``new_defaults``: 8 environments of 5 steps, a
    constant learning rate of 7e-4, GAE lambda 1 (n-step returns), no entropy bonus, advantages
    not normalised), then the optimiser. The fields marked ``traced`` are the numeric
    hyperparameters (:data:`A2CHyperparams`), traced inputs of the compiled program, so a sweep
    ``vmap``s over them."""

    optimizer: Literal["rmsprop", "adam"] = "rmsprop"
    """rmsprop (PyTorch's: decay 0.99, eps 1e-5 added outside the square root) or adam
    (eps 1e-5)."""


A2CHyperparams = hyperparams_type(A2CConfig)
"""The traced fields of :class:`A2CConfig` as a NamedTuple (``lr``, ``gamma``, ``gae_lambda``,
``vf_coef``, ``ent_coef``, ``max_grad_norm``, ``reward_scale``)."""

ZOO = "DLR-RM/rl-baselines3-zoo hyperparams/a2c.yml at c6c209e7d487635f0b835fb916ec4468142b28ff"

PRESETS: dict[str, dict] = {
    "CartPole-v1": dict(total_steps=500_000, num_envs=8),
    "Acrobot-v1": dict(total_steps=500_000, num_envs=16, normalize_observations=True,
                       reward_scale=0.1),
    "Pendulum-v1": dict(
        total_steps=1_000_000, num_envs=8, num_steps=8, gamma=0.9, gae_lambda=0.9,
        vf_coef=0.4, max_grad_norm=0.5, lr=7e-4, normalize_observations=True,
        reward_scale=0.1,
    ),
}
"""rl-baselines3-zoo's A2C settings (``ZOO``) as rollax has them: ``n_envs`` is ``num_envs``,
``n_timesteps`` ``total_steps``, ``normalize: true`` the observation normalisation. Zoo's
``normalize`` also normalises rewards (VecNormalize): the presets, measured before rollax had
``normalize_rewards``, keep ``reward_scale=0.1`` in its place on Acrobot-v1 and Pendulum-v1
(Acrobot, 8 seeds: greedy -80 to -90 with it, one seed of 8 at -217 without). Pendulum-v1's
gSDE (``use_sde``: state-dependent exploration) is not in rollax, so its ``log_std_init=-2`` (a
gSDE scale) is not taken: a plain Gaussian from ``init_log_std`` 0, with a constant learning
rate (zoo: ``lin_7e-4``), ends at a greedy -155 to -400 in 1e6 steps (8 seeds) where -2 and the
annealed rate stay near -1,100 (3 seeds); ``ortho_init=False`` is not mapped either (rollax's
networks are always orthogonal)."""


def preset(env: str, **overrides) -> A2CConfig:
    """The tuned config for ``env`` with ``overrides`` applied."""
    return A2CConfig(env=env, **{**PRESETS.get(env, {}), **overrides})


def validate(config: A2CConfig, env: Environment | None = None) -> Environment:
    """Check every setting (``ValueError`` naming it and its range); returns the environment
    (``env`` when given: the one already built from ``config.env`` and ``config.horizon``)."""
    check_settings(config)
    if config.optimizer not in OPTIMIZERS:
        raise ValueError(f"optimizer must be one of {', '.join(OPTIMIZERS)}, "
                         f"got {config.optimizer!r}")
    return environment(config, env, "A2C")


def resolve(config: A2CConfig, env: Environment | None = None) -> A2CConfig:
    """``config`` validated, with ``horizon`` set to the task's own limit when unset and
    ``network`` to the one ``auto`` picks (``mlp``, ``cnn`` or ``nature``)."""
    return resolved(config, validate(config, env))


# --- metrics and parts ---------------------------------------------------------------------------

class A2CMetrics(NamedTuple):
    """Per-update diagnostics (each ``(updates,)``); names follow SB3/CleanRL."""

    policy_loss: jax.Array
    """-mean(A log pi(a|s)) over the batch."""
    value_loss: jax.Array
    """mean((V(s) - G)^2) over the batch."""
    entropy: jax.Array
    explained_variance: jax.Array
    grad_norm: jax.Array
    """Norm of the actor's gradient (its layers and log_std) before clipping."""
    learning_rate: jax.Array
    episode_return: jax.Array
    """Mean return of episodes that ended during this update's rollout (NaN if none)."""
    episode_length: jax.Array
    episodes: jax.Array
    """Number of episodes that ended during the rollout."""
    env_steps: jax.Array
    """Environment steps taken so far."""


A2CResult = ActorCriticResult
"""What ``train`` returns: the final parameters and observation statistics, the
:class:`A2CMetrics` of every update, the greedy evaluation return and the final state."""


@dataclasses.dataclass(frozen=True)
class A2CParts:
    """The static parts of an A2C run: its config, the experience and the number of updates; its
    methods are A2C's steps, :meth:`update` the whole of one."""

    config: A2CConfig
    experience: ExperienceParts
    num_updates: int

    def schedule(self, hp, count):
        """The learning rate at update ``count`` (one gradient step each): linear from ``lr``
        to 0 over the run (``anneal_lr``), or ``lr``."""
        return optim.schedule(hp.lr, self.config.anneal_lr, self.num_updates)(count)

    def optimiser(self, hp) -> optax.GradientTransformation:
        step = optim.rmsprop if self.config.optimizer == "rmsprop" else optim.adam
        return optax.chain(optim.clip_per_network(hp.max_grad_norm),
                           step(lambda count: self.schedule(hp, count)))

    def init(self, key: jax.Array, hp) -> ActorCriticState:
        return self.experience.init(key, self.optimiser(hp))

    def update(self, state: ActorCriticState, hp) -> tuple[ActorCriticState, A2CMetrics]:
        """One A2C update: a rollout and one gradient step on all of it; ``(next state,
        A2CMetrics)``."""
        key, rollout_key = jax.random.split(state.key)
        collected = self.experience.collect(state, rollout_key)
        advantages = self.experience.advantages(state, collected, hp)
        batch = self.experience.batch(state, collected, advantages)
        step = optim.gradient_step(lambda p: self.loss(p, batch, hp), state.params,
                                   state.opt_state, self.optimiser(hp), self.experience.checked,
                                   state.updates + 1)
        new_state, episodes = self.experience.advance(state, collected, advantages, step.params,
                                                   step.opt_state, key)
        return new_state, self.metrics(state, hp, step, collected, advantages, episodes)

    def loss(self, params, batch, hp):
        """:func:`rollax.losses.a2c_loss` of the network on the rollout's ``T * B`` cells (read
        one by one, or whole sequences replayed from their collected carries with their
        resets)."""
        cells = self.experience.score(params, batch)
        return a2c_loss(cells.log_prob, cells.advantage, cells.value, cells.target,
                        cells.entropy, vf_coef=hp.vf_coef, ent_coef=hp.ent_coef,
                        normalize_advantages=self.config.normalize_advantages, live=cells.live)

    def metrics(self, state: ActorCriticState, hp, step: optim.Step, collected: Collected,
                advantages: Advantages, episodes: Episodes) -> A2CMetrics:
        """The diagnostics of the update from ``state``: the loss's terms and the actor's
        gradient norm of its one ``step``, the critic's fit, the learning rate and the
        rollout's episodes (a team's: and its agents' returns,
        :func:`~rollax.algos.experience.with_agent_metrics`)."""
        return with_agent_metrics(A2CMetrics(
            policy_loss=step.aux["policy_loss"], value_loss=step.aux["value_loss"],
            entropy=step.aux["entropy"],
            explained_variance=explained_variance(collected.values, advantages.target),
            grad_norm=optim.actor_norm(step.grads),
            learning_rate=jnp.asarray(self.schedule(hp, state.updates), jnp.float32),
            episode_return=episodes.mean_return, episode_length=episodes.mean_length,
            episodes=episodes.count, env_steps=(state.updates + 1) * self.experience.cells,
        ), episodes)


def make_parts(config: A2CConfig, env: Environment, checked: bool = False) -> A2CParts:
    """The parts of a resolved ``config`` on ``env``."""
    return A2CParts(config, make_experience(config, env, checked), num_updates(config))


# --- the algorithm --------------------------------------------------------------------------------

def make_algorithm(config: A2CConfig, checked: bool = False,
                   env: Environment | None = None) -> Algorithm:
    """Validate ``config`` (before compiling) and return A2C's parts (init, update, evaluate).
    ``checked`` stages the runtime checks of :mod:`rollax.guards` into each update."""
    env = validate(config, env)
    parts = make_parts(resolved(config, env), env, checked)
    return parts.experience.algorithm(parts.config, num_updates=parts.num_updates,
                                   init=parts.init, update=parts.update,
                                   greedy_result=greedy_result)


SPEC = AlgorithmSpec(
    name="a2c", config_type=A2CConfig, build=make_algorithm, trains=NEURAL,
    report=Report(score="eval_return", progress="episode_return",
                  shown=("episode_return", "value_loss", "entropy", "explained_variance",
                         "grad_norm"),
                  headline=("num_envs", "num_steps", "lr", "optimizer")),
    default=False, presets=PRESETS,
)
"""A2C's facts: trains what PPO trains, when asked (``--algo a2c``)."""
