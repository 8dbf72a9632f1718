"""One PPO update on MinAtar Breakout: rollax's CNN beside its MLP and beside the same CNN update
written plainly, PureJaxRL's way, all in one process.

    python benchmarks/cnn_speed.py [--repeats 5] [--lanes 1] [--before] [--json OUT]

The gymnax-blines preset (``rollax.algos.ppo_presets.MINATAR``): 64 environments x 128 steps =
8,192 env steps per update, 4 epochs x 8 minibatches of 1,024, heads of 2 x 256 relu, one 3x3
convolution of 16 planes for the CNN, Adam(5e-4, eps 1e-5) after a global-norm clip of 0.5,
value clipping. Each row is one update, ``jax.jit`` of ``state -> (state, metrics)``, compiled
apart and warmed up, then every row runs once per repeat (interleaved, so a slow moment of the
machine hits them all) and carries its state on; the median is printed:

- ``rollax mlp`` / ``rollax cnn``: ``algo.update`` of ``rollax.ppo.make_algorithm(preset(...,
  network=...))``;
- ``rollax cnn, before`` (``--before``): the CNN's torso as it was before 2026-12-02 (equinox's
  ``Conv2d`` on each ``(C, H, W)`` image), patched in while the row compiles (the rest of
  the update as it is now);
- ``rollax cnn, runner``: the same through the experiment runner (``rollax train``'s path:
  ``--lanes`` lanes, ``vmap``-ed when more than one, one update per chunk, metrics to the
  host), env steps counted over all lanes;
- ``plain cnn, lax conv``: PureJaxRL's ``_update_step`` written out for the same shapes:
  a flax.linen actor-critic (``nn.Conv(16, (3, 3), padding="VALID")``, i.e.
  ``lax.conv_general_dilated`` on NHWC, then Dense 256-256), gymnax's FlattenObservation and
  Log wrappers, the rollout and GAE as scans, a permutation per epoch, PPO's clipped losses,
  optax; the value of each observation computed once, in the rollout;
- ``plain cnn, patches``: the same with the convolution as one Dense over the 3x3 patches
  (im2col), the formulation rollax's CNN uses (``rollax.nets.cnn.conv_hwc``).

Ratios (env steps/s over env steps/s): rollax cnn / rollax mlp, rollax cnn / each plain cnn
(about 1: the CNN runs at the speed XLA gives its parts; below: rollax is the limit).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import time
from typing import NamedTuple

import jax
import jax.numpy as jnp
from _timing import device

from rollax.algos import ppo
from rollax.run.experiment import Runner, make_lanes

ENV = "gymnax:Breakout-MinAtar"


def machine() -> str:
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            model = next(line.split(":", 1)[1].strip() for line in f
                         if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return f"{model}, {cores} cores; {device()}"


# --- rollax ------------------------------------------------------------------------------------

def rollax_update(network: str):
    algo = ppo.make_algorithm(ppo.preset(ENV, network=network, total_steps=10 * 8192))
    hp = algo.hyperparams
    state = jax.jit(algo.init)(jax.random.key(0), hp)
    return jax.jit(lambda s: algo.update(s, hp)), state, algo.env_steps_per_update


class RunnerStep:
    """One update per chunk through :class:`rollax.run.experiment.Runner` (what ``rollax
    train`` runs), as a function of the state."""

    def __init__(self, network: str, lanes: int):
        algo = ppo.make_algorithm(ppo.preset(ENV, network=network, total_steps=10 * 8192))
        self.runner = Runner(algo, make_lanes(0, lanes, {}), chunk_size=1)
        self.steps = algo.env_steps_per_update * lanes

    def __call__(self, state):
        return self.runner.run_chunk(state, 1)


def rollax_update_before(network: str):
    """``rollax_update`` with the CNN's torso as it was before 2026-12-02 (equinox's Conv2d on
    the ``(C, H, W)`` image, i.e. ``lax.conv_general_dilated``), patched in while tracing."""
    from rollax.nets.cnn import CNNActorCritic

    def torso(self, layers, observation):
        x = jnp.transpose(observation.reshape(self.image_shape), (2, 0, 1))
        for layer in layers[:len(self.channels)]:
            x = jax.nn.relu(layer(x))
        return x.reshape(-1)

    fn, state, steps = rollax_update(network)
    current = CNNActorCritic.torso
    CNNActorCritic.torso = torso
    try:
        return fn.lower(state).compile(), state, steps
    finally:
        CNNActorCritic.torso = current


# --- the same update written plainly (PureJaxRL's ppo.py, for a CNN) --------------------------

def plain_update(conv: str, cfg: dict):
    import flax.linen as nn
    import gymnax
    import optax
    from gymnax.wrappers.purerl import FlattenObservationWrapper, LogWrapper

    num_envs, num_steps = cfg["num_envs"], cfg["num_steps"]
    minibatches, epochs = cfg["minibatches"], cfg["epochs"]
    batch = num_envs * num_steps
    env, env_params = gymnax.make("Breakout-MinAtar")
    h, w, c = env.observation_space(env_params).shape
    env = LogWrapper(FlattenObservationWrapper(env))
    num_actions = env.action_space(env_params).n
    orth = nn.initializers.orthogonal

    class Torso(nn.Module):
        @nn.compact
        def __call__(self, x):
            x = x.reshape(x.shape[0], h, w, c)
            if conv == "lax":
                x = nn.Conv(16, (3, 3), padding="VALID", kernel_init=orth(math.sqrt(2)))(x)
            else:  # the 3x3 patches side by side, one Dense: im2col
                hh, ww = h - 2, w - 2
                x = jnp.concatenate([x[:, i:i + hh, j:j + ww] for i in range(3)
                                     for j in range(3)], axis=-1)
                x = nn.Dense(16, kernel_init=orth(math.sqrt(2)))(x)
            x = nn.relu(x).reshape(x.shape[0], -1)
            for _ in range(2):
                x = nn.relu(nn.Dense(256, kernel_init=orth(math.sqrt(2)))(x))
            return x

    class ActorCritic(nn.Module):
        @nn.compact
        def __call__(self, x):
            logits = nn.Dense(num_actions, kernel_init=orth(0.01))(Torso()(x))
            value = nn.Dense(1, kernel_init=orth(1.0))(Torso()(x))
            return logits, value[:, 0]

    network = ActorCritic()
    tx = optax.chain(optax.clip_by_global_norm(cfg["max_grad_norm"]),
                     optax.adam(cfg["lr"], eps=1e-5))

    class Transition(NamedTuple):
        done: jax.Array
        action: jax.Array
        value: jax.Array
        reward: jax.Array
        log_prob: jax.Array
        obs: jax.Array

    def init(key):
        net_key, env_key, key = jax.random.split(key, 3)
        params = network.init(net_key, jnp.zeros((1, h * w * c)))
        obs, env_state = jax.vmap(env.reset, (0, None))(jax.random.split(env_key, num_envs),
                                                        env_params)
        return params, tx.init(params), env_state, obs, key

    def update(runner_state):
        params, opt_state, env_state, last_obs, key = runner_state

        def env_step(carry, _):
            env_state, last_obs, key = carry
            key, act_key, step_key = jax.random.split(key, 3)
            logits, value = network.apply(params, last_obs)
            action = jax.random.categorical(act_key, logits)
            log_prob = jnp.take_along_axis(jax.nn.log_softmax(logits), action[:, None], 1)[:, 0]
            obs, env_state, reward, terminated, truncated, _ = jax.vmap(
                env.step, (0, 0, 0, None))(jax.random.split(step_key, num_envs), env_state,
                                           action, env_params)
            done = terminated | truncated
            return (env_state, obs, key), Transition(done, action, value, reward, log_prob,
                                                     last_obs)

        (env_state, last_obs, key), traj = jax.lax.scan(env_step, (env_state, last_obs, key),
                                                        None, num_steps)
        _, last_val = network.apply(params, last_obs)

        def gae_step(carry, t):
            gae, next_value = carry
            delta = t.reward + cfg["gamma"] * next_value * (1 - t.done) - t.value
            gae = delta + cfg["gamma"] * cfg["gae_lambda"] * (1 - t.done) * gae
            return (gae, t.value), gae

        _, advantages = jax.lax.scan(gae_step, (jnp.zeros_like(last_val), last_val), traj,
                                     reverse=True, unroll=16)
        targets = advantages + traj.value

        def loss_fn(params, t, gae, targets):
            logits, value = network.apply(params, t.obs)
            logp_all = jax.nn.log_softmax(logits)
            log_prob = jnp.take_along_axis(logp_all, t.action[:, None], 1)[:, 0]
            clip = cfg["clip_eps"]
            value_clipped = t.value + (value - t.value).clip(-clip, clip)
            value_loss = 0.5 * jnp.maximum(jnp.square(value - targets),
                                           jnp.square(value_clipped - targets)).mean()
            ratio = jnp.exp(log_prob - t.log_prob)
            gae = (gae - gae.mean()) / (gae.std() + 1e-8)
            actor_loss = -jnp.minimum(ratio * gae,
                                      jnp.clip(ratio, 1 - clip, 1 + clip) * gae).mean()
            entropy = -(jnp.exp(logp_all) * logp_all).sum(-1).mean()
            return actor_loss + cfg["vf_coef"] * value_loss - cfg["ent_coef"] * entropy

        def minibatch_step(carry, mb):
            params, opt_state = carry
            loss, grads = jax.value_and_grad(loss_fn)(params, *mb)
            updates, opt_state = tx.update(grads, opt_state, params)
            return (optax.apply_updates(params, updates), opt_state), loss

        def epoch(carry, key):
            perm = jax.random.permutation(key, batch)
            data = jax.tree_util.tree_map(lambda x: x.reshape((batch,) + x.shape[2:]),
                                          (traj, advantages, targets))
            data = jax.tree_util.tree_map(
                lambda x: jnp.take(x, perm, axis=0).reshape((minibatches, -1) + x.shape[1:]),
                data)
            return jax.lax.scan(minibatch_step, carry, data)

        key, epoch_key = jax.random.split(key)
        (params, opt_state), losses = jax.lax.scan(epoch, (params, opt_state),
                                                   jax.random.split(epoch_key, epochs))
        return (params, opt_state, env_state, last_obs, key), losses.mean()

    return jax.jit(update), jax.jit(init)(jax.random.key(0)), batch


# --- timing --------------------------------------------------------------------------------------

def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--lanes", type=int, default=1,
                        help="lanes (seeds) of the runner row")
    parser.add_argument("--before", action="store_true",
                        help="add the row 'rollax cnn, before' (the convolution as it was)")
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    cfg = ppo.preset(ENV)
    plain_cfg = {k: getattr(cfg, k) for k in (
        "num_envs", "num_steps", "epochs", "minibatches", "lr", "gamma", "gae_lambda",
        "clip_eps", "vf_coef", "ent_coef", "max_grad_norm")}
    print(f"machine: {machine()}; load average {os.getloadavg()[0]:.2f}")
    print(f"preset {ENV}: {cfg.num_envs} envs x {cfg.num_steps} steps, {cfg.epochs} epochs x "
          f"{cfg.minibatches} minibatches, hidden {cfg.hidden} {cfg.activation}", flush=True)

    rows = {}  # name -> (step fn, state, env steps per call, compile s)
    builders = {
        "rollax mlp": lambda: rollax_update("mlp"),
        "rollax cnn": lambda: rollax_update("cnn"),
        **({"rollax cnn, before": lambda: rollax_update_before("cnn")} if args.before
           else {}),
        "plain cnn, lax conv": lambda: plain_update("lax", plain_cfg),
        "plain cnn, patches": lambda: plain_update("patches", plain_cfg),
    }
    for name, build in builders.items():
        start = time.perf_counter()
        fn, state, steps = build()
        fn = fn if hasattr(fn, "input_shardings") else fn.lower(state).compile()
        compile_s = time.perf_counter() - start
        state, _ = jax.block_until_ready(fn(state))  # warm-up
        rows[name] = [fn, state, steps, compile_s]
        print(f"compiled {name} in {compile_s:.1f} s", flush=True)
    name = f"rollax cnn, runner ({args.lanes} lane{'s' * (args.lanes > 1)})"
    step = RunnerStep("cnn", args.lanes)
    start = time.perf_counter()
    state, _ = step(step.runner.initial_state())  # compile and warm-up
    jax.block_until_ready(state)
    rows[name] = [step, state, step.steps, time.perf_counter() - start]

    times: dict[str, list[float]] = {name: [] for name in rows}
    for _ in range(args.repeats):
        for name, row in rows.items():
            start = time.perf_counter()
            row[1], _ = jax.block_until_ready(row[0](row[1]))
            times[name].append(time.perf_counter() - start)

    print()
    print("| update | s per update (median) | env steps/s | build + compile s |")
    print("|---|---|---|---|")
    sps = {}
    for name, (_, _, steps, compile_s) in rows.items():
        run_s = statistics.median(times[name])
        sps[name] = steps / run_s
        print(f"| {name} | {run_s:.3f} | {sps[name]:,.0f} | {compile_s:.1f} |")
    ratios = {
        "rollax cnn / rollax mlp": sps["rollax cnn"] / sps["rollax mlp"],
        **({"rollax cnn / rollax cnn, before": sps["rollax cnn"] / sps["rollax cnn, before"]}
           if args.before else {}),
        "rollax cnn / plain cnn, lax conv": sps["rollax cnn"] / sps["plain cnn, lax conv"],
        "rollax cnn / plain cnn, patches": sps["rollax cnn"] / sps["plain cnn, patches"],
    }
    print()
    for name, value in ratios.items():
        print(f"{name}: {value:.2f}")
    rounded = {k: [round(t, 3) for t in v] for k, v in times.items()}
    print(f"\ntimes per repeat, s: {json.dumps(rounded)}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"machine": machine(), "times": times, "sps": sps, "ratios": ratios,
                       "compile_s": {k: v[3] for k, v in rows.items()}}, f, indent=1)


if __name__ == "__main__":
    main()
