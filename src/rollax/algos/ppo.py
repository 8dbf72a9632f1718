"""PPO for neural actor-critics, compiled end to end: ``rollax.make_train(PPOConfig())(key)``.

The whole algorithm, top to bottom: config, state, the parts (the rollout of
:mod:`rollax.algos.experience`, the optimiser), loss, epochs of minibatch steps, the update, and
the parts the runner takes (the presets, a table, are in :mod:`rollax.algos.ppo_presets`). One
update (:meth:`PPOParts.update`)::

    key, rollout_key, shuffle_key = split(key, 3)
    collect:      env_state, traj = collect_autoreset(env, policy, params, env_state,
                                                      rollout_key, T)
                  V = critic(obs), V' = critic(true next obs)
    advantages:   r = r / std(running discounted return), clipped      # normalize_rewards only
                  A, targets = gae(r, V, V', terminated, truncated, gamma, lambda)
    batch:        the cells (or sequences), frozen through the epochs
    sgd_epochs:   repeat `epochs`: split the batch into `minibatches`, and for each minibatch
                      loss = actor_critic_loss(...)                        # rollax.losses
                      params <- adam(clip_per_network(grad)), learning rate linearly annealed
    advance:      observation statistics <- merged with this batch (when normalising)
    metrics

A batch's behaviour log-probs, actions, advantages and targets stay frozen through its epochs.
Feed-forward (MLP, CNN) and recurrent (GRU, LSTM) networks differ inside the rollout's methods
(:class:`~rollax.algos.experience.ExperienceParts`): feed-forward, the ``T * B`` cells are shuffled
into minibatches; recurrent, each environment's memory (``state.carry``) is collected with it
and reset where episodes start, and minibatches split the environments, never time, replaying
whole sequences from their collected carries (one epoch of one minibatch gives the stored
log-probs back: ratio 1). After the last update the policy's mode is evaluated on
``eval_episodes`` absorbing episodes.
"""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

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
    make_network,
    num_updates,
    resolved,
)
from rollax.algos.base import NEURAL, Algorithm, AlgorithmSpec, Report, hyperparams_type, traced
from rollax.algos.experience import (
    ActorCriticState,
    Advantages,
    Collected,
    Episodes,
    ExperienceParts,
    with_agent_metrics,
)
from rollax.algos.ppo_presets import PRESETS
from rollax.algos.ppo_zoo import from_zoo
from rollax.envs.base import Environment
from rollax.losses import actor_critic_loss, explained_variance
from rollax.nets.build import RECURRENT
from rollax.validate import check_bool, check_count, check_real

__all__ = ["PRESETS", "SPEC", "PPOConfig", "PPOHyperparams", "PPOMetrics", "PPOParts",
           "PPOResult", "PPOState", "make_algorithm", "make_network", "make_parts", "num_updates",
           "preset", "resolve", "validate"]


# --- config -----------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class PPOConfig(ActorCriticConfig):
    """PPO settings: the actor-critic's
    (:class:`~rollax.algos.actor_critic.ActorCriticConfig`, whose defaults follow CleanRL's
    ppo.py / PureJaxRL for CartPole-v1), then PPO's own. The fields marked ``traced`` are the
    numeric hyperparameters (:data:`PPOHyperparams`), traced inputs of the compiled program, so
    a sweep ``vmap``s over them."""

    epochs: int = 4
    """Passes over each batch."""
    minibatches: int = 4
    """Minibatches per epoch; must divide num_envs * num_steps."""
    clip_eps: float = traced(0.2)
    """Clip range of the ratio, in (0, 1)."""
    clip_value: bool = True
    """Clip the value update to +-clip_eps around the collected value."""


PPOHyperparams = hyperparams_type(PPOConfig)
"""The traced fields of :class:`PPOConfig` as a NamedTuple (``lr``, ``gamma``, ``gae_lambda``,
``vf_coef``, ``ent_coef``, ``max_grad_norm``, ``reward_scale``, ``clip_eps``)."""


def preset(env: str, **overrides) -> PPOConfig:
    """The tuned config for ``env`` with ``overrides`` applied."""
    return PPOConfig(env=env, **{**PRESETS.get(env, {}), **overrides})


def validate(config: PPOConfig, env: Environment | None = None) -> Environment:
    """Check every setting (``ValueError`` naming it and its range); returns the environment
    (``env`` when given: the one already built from ``config.env`` and ``config.horizon``)."""
    check_settings(config)
    for name in ("epochs", "minibatches"):
        check_count(name, getattr(config, name))
    batch = config.num_envs * config.num_steps
    if batch % config.minibatches:
        raise ValueError(f"minibatches must divide num_envs * num_steps = {batch}, "
                         f"got {config.minibatches}")
    check_real("clip_eps", config.clip_eps, 0, 1, low_open=True, high_open=True)
    check_bool("clip_value", config.clip_value)
    env = environment(config, env, "PPO")
    if config.network in RECURRENT and config.num_envs % config.minibatches:
        raise ValueError(f"minibatches must divide num_envs = {config.num_envs} for network "
                         f"{config.network} (its minibatches split environments), got "
                         f"{config.minibatches}")
    return env


def resolve(config: PPOConfig, env: Environment | None = None) -> PPOConfig:
    """``config`` validated, with ``horizon`` set to the task's own limit when unset and
    ``network`` to the one ``auto`` picks (``mlp``, ``cnn`` or ``nature``)."""
    return resolved(config, validate(config, env))


# --- state ------------------------------------------------------------------------------------

PPOState = ActorCriticState
"""Everything a run carries from one update to the next: the rollout's
:class:`~rollax.algos.experience.ActorCriticState` (parameters, optimiser state, observation
statistics, environments, running episodes, key, the number of updates done, recurrent
memories, and with ``normalize_rewards`` the reward statistics and running discounted
returns)."""


class PPOMetrics(NamedTuple):
    """Per-update diagnostics (each ``(updates,)``); names follow SB3/CleanRL."""

    policy_loss: jax.Array
    value_loss: jax.Array
    entropy: jax.Array
    approx_kl: jax.Array
    """k3 estimator mean((r - 1) - log r), averaged over epochs and minibatches."""
    old_approx_kl: jax.Array
    """mean(-log r), the naive estimator."""
    clip_fraction: jax.Array
    ratio_min: jax.Array
    ratio_max: jax.Array
    explained_variance: jax.Array
    learning_rate: jax.Array
    episode_return: jax.Array
    """Mean return of episodes that ended during this update's rollout (NaN if none)."""
    episode_length: jax.Array
    episodes: jax.Array
    """Number of episodes that ended during the rollout."""
    env_steps: jax.Array
    """Environment steps taken so far."""


PPOResult = ActorCriticResult
"""What ``train`` returns: the final parameters and observation statistics, the
:class:`PPOMetrics` of every update, the greedy evaluation return and the final state."""


# --- the parts: the experience, the optimiser, the loss and the update ------------------------

@dataclasses.dataclass(frozen=True)
class PPOParts:
    """The static parts of a PPO run: its config, the experience (environment, network, sizes)
    and the number of updates; its methods are PPO's steps, :meth:`update` the whole of one."""

    config: PPOConfig
    experience: ExperienceParts
    num_updates: int

    @property
    def steps_per_update(self) -> int:
        return self.config.epochs * self.config.minibatches

    def schedule(self, hp, count):
        """The learning rate at gradient step ``count``: linear from ``lr`` to 0 over all
        gradient steps of the run (``anneal_lr``), or ``lr``."""
        steps = self.num_updates * self.steps_per_update
        return optim.schedule(hp.lr, self.config.anneal_lr, steps)(count)

    def optimiser(self, hp):
        return optax.chain(optim.clip_per_network(hp.max_grad_norm),
                           optim.adam(lambda count: self.schedule(hp, count)))

    def init(self, key: jax.Array, hp) -> PPOState:
        """Fresh parameters, optimiser and observation statistics, and B started environments."""
        return self.experience.init(key, self.optimiser(hp))

    def update(self, state: PPOState, hp) -> tuple[PPOState, PPOMetrics]:
        """One PPO update: ``(next state, PPOMetrics)``."""
        key, rollout_key, shuffle_key = jax.random.split(state.key, 3)
        collected = self.experience.collect(state, rollout_key)
        advantages = self.experience.advantages(state, collected, hp)
        batch = self.experience.batch(state, collected, advantages)
        (params, opt_state), aux = self.sgd_epochs(state, batch, shuffle_key, hp)
        new_state, episodes = self.experience.advance(state, collected, advantages, params,
                                                   opt_state, key)
        return new_state, self.metrics(state, hp, aux, collected, advantages, episodes)

    def sgd_epochs(self, state: PPOState, batch, key: jax.Array, hp):
        """``epochs`` passes of minibatch steps over ``batch`` (the cells shuffled for a
        feedforward network, whole sequences split by environment for a recurrent one):
        ``((params, opt_state), aux)`` with aux ``(epochs, minibatches)`` per loss output."""
        tx, config, update_number = self.optimiser(hp), self.config, state.updates + 1

        def sgd_step(carry: tuple[Any, optax.OptState], minibatch):
            params, opt_state = carry
            step = optim.gradient_step(lambda p: self.loss(p, minibatch, hp), params,
                                       opt_state, tx, self.experience.checked, update_number)
            return (step.params, step.opt_state), step.aux

        def epoch(carry, key):
            return jax.lax.scan(sgd_step, carry,
                                self.experience.minibatches(batch, key, config.minibatches))

        return jax.lax.scan(epoch, (state.params, state.opt_state),
                            jax.random.split(key, config.epochs))

    def loss(self, params, minibatch, hp):
        """:func:`rollax.losses.actor_critic_loss` of the network on a minibatch (its cells
        scored by the rollout: read one by one, or whole sequences replayed from their stored
        carries with their resets)."""
        config = self.config
        scored = self.experience.score(params, minibatch)
        return actor_critic_loss(
            *scored[:7], clip_eps=hp.clip_eps, vf_coef=hp.vf_coef, ent_coef=hp.ent_coef,
            clip_value=config.clip_value, normalize_advantages=config.normalize_advantages,
            live=scored.live)

    def metrics(self, state: PPOState, hp, aux, collected: Collected, advantages: Advantages,
                episodes: Episodes) -> PPOMetrics:
        """The diagnostics of the update from ``state``: the loss outputs ``aux`` averaged over
        its epochs and minibatches (the ratio's extremes over them), the critic's fit, the
        learning rate it started with and the rollout's episodes (a team's: and its agents'
        returns, :func:`~rollax.algos.experience.with_agent_metrics`)."""
        return with_agent_metrics(PPOMetrics(
            policy_loss=aux["policy_loss"].mean(), value_loss=aux["value_loss"].mean(),
            entropy=aux["entropy"].mean(), approx_kl=aux["approx_kl"].mean(),
            old_approx_kl=aux["old_approx_kl"].mean(),
            clip_fraction=aux["clip_fraction"].mean(),
            ratio_min=aux["ratio_min"].min(), ratio_max=aux["ratio_max"].max(),
            explained_variance=explained_variance(collected.values, advantages.target),
            learning_rate=jnp.asarray(self.schedule(hp, state.updates * self.steps_per_update),
                                      jnp.float32),
            episode_return=episodes.mean_return, episode_length=episodes.mean_length,
            episodes=episodes.count, env_steps=(state.updates + 1) * self.experience.cells,
        ), episodes)


def make_parts(config: PPOConfig, env: Environment, checked: bool = False) -> PPOParts:
    """The parts of a resolved ``config`` on ``env``."""
    return PPOParts(config, make_experience(config, env, checked), num_updates(config))


# --- the algorithm --------------------------------------------------------------------------------

def make_algorithm(config: PPOConfig, checked: bool = False,
                   env: Environment | None = None) -> Algorithm:
    """Validate ``config`` (before compiling) and return PPO's parts (init, update, evaluate).
    ``checked`` stages the runtime checks of :mod:`rollax.guards` into each update."""
    env = validate(config, env)
    parts = make_parts(resolved(config, env), env, checked)
    return parts.experience.algorithm(parts.config, num_updates=parts.num_updates,
                                   init=parts.init, update=parts.update,
                                   greedy_result=greedy_result)


SPEC = AlgorithmSpec(
    name="ppo", config_type=PPOConfig, build=make_algorithm, trains=NEURAL,
    report=Report(score="eval_return", progress="episode_return",
                  shown=("episode_return", "approx_kl", "clip_fraction", "entropy",
                         "explained_variance"),
                  headline=("num_envs", "num_steps", "epochs", "minibatches", "lr")),
    presets=PRESETS, from_zoo=from_zoo,
)
"""PPO's facts: the default for every non-finite task with vector observations."""
