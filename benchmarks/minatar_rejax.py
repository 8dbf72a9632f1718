"""MinAtar PPO with rejax's own trainer (the peer), gymnax-blines' settings and a 2 x 256 MLP.

    .bench/rejax/bin/python benchmarks/minatar_rejax.py [--games Breakout SpaceInvaders]
        [--total-steps 1000000] [--seeds 3] [--evals 10] [--json OUT]

Runs in the rejax environment (benchmarks/requirements-rejax.txt: rejax 0.1.3 on gymnax 0.0.9,
whose MinAtar games differ from gymnax 1.x's: see DIFFERENCES). Per game, ``rejax.PPO`` with
gymnax-blines' MinAtar settings (rollax's ``ppo_presets.MINATAR``: 64 envs x 128 steps, 4
epochs x 8 minibatches, constant lr 5e-4, gamma 0.999, GAE lambda 0.95, clip 0.2, value 0.5,
entropy 0.01, gradient clip 0.5) and rejax's actor and critic MLPs set to 2 x 256 ReLU over the
flattened 10 x 10 x C planes. The ``--seeds`` seeds (keys ``PRNGKey(0..seeds-1)``) are one
``jax.vmap`` of ``algo.train``, compiled apart (``lower().compile()``) and then run once.

Evaluation: rejax's ``eval_callback`` (by default 128 episodes *sampling* the policy) is
replaced by a greedy one: the argmax of the actor's logits over 32 episodes (run by
``rejax.evaluate.evaluate``, capped at ``max_steps_in_episode`` = 1000). rejax calls it before
training and every ``eval_freq`` env steps inside the compiled program, so the curve has
``--evals`` + 1 points and its last is the final return; ``eval_freq`` is a whole number of
updates and the run a whole number of them (``_timing.minatar_schedule``: 1e6 steps -> 120
updates of 8,192, evaluated every 12). ``benchmarks/minatar_rollax.py`` evaluates rollax at the
same updates; ``benchmarks/minatar_compare.py`` tabulates and plots both.
"""

from __future__ import annotations

import importlib.metadata

import jax
import jax.numpy as jnp
from _timing import (
    MINATAR_BATCH,
    device,
    emit,
    minatar_args,
    minatar_row,
    minatar_schedule,
    minatar_timed,
)
from rejax import PPO
from rejax.evaluate import evaluate

EVAL_EPISODES = 32

DIFFERENCES = [
    ("gradient clipping: rejax applies optax.clip(0.5) (each gradient element clipped to "
     "[-0.5, 0.5], actor and critic apart); rollax clips the actor's and the critic's "
     "gradients to global norm 0.5 apart (gymnax-blines: the joint gradient)"),
    "Adam epsilon: rejax uses optax.adam's default 1e-8; gymnax-blines and rollax use 1e-5",
    ("two Adam optimisers (actor, critic) in rejax, one over both networks in rollax (the same "
     "updates apart from the clipping above: the networks share no parameters)"),
    ("initialisation: rejax uses flax's Dense default (LeCun normal kernels, zero biases); "
     "rollax orthogonal (gain sqrt 2 hidden, 1 for the logits and the critic's output), zero "
     "biases (the same scale as LeCun's for the logits: rows of norm about 1)"),
    ("time limit (1000 steps): rejax (gymnax 0.0.9) treats reaching it as termination (no "
     "bootstrap); rollax bootstraps truncated episodes from the value of the true last "
     "observation"),
    ("environment versions: rejax runs gymnax 0.0.9's MinAtar, rollax gymnax 1.x's. "
     "SpaceInvaders differs: 0.0.9 starts the first wave with 4 x 7 aliens (columns 2-8) and "
     "every later one with 4 x 6, 1.x (and MinAtar) always 4 x 6; 0.0.9 checks an enemy "
     "bullet against the player's position before its move, 1.x after it (as MinAtar). "
     "Breakout's, Asterix's and Freeway's dynamics are the same (observation dtypes and "
     "the time-limit flag aside)"),
    ("auto-reset: gymnax 0.0.9 computes a reset at every step and selects; rollax resets only "
     "when some environment finished (speed only)"),
    ("evaluation: both greedy (argmax of the logits), 32 episodes of at most 1000 steps per "
     "seed at the same updates, staged inside the compiled training program; rejax's "
     "episodes are keyed by its current training key, rollax's by a stream of their own "
     "(the numbers differ by sampling only)"),
    ("rollouts: both step 128 times per update and bootstrap from the value of the next "
     "observation (gymnax-blines steps 129 and drops the last)"),
    "seeds: rejax PRNGKey(0..n-1), rollax key(0..n-1): independent draws, not paired runs",
]


def greedy_eval(algo, ts, rng):
    """Mean return of EVAL_EPISODES episodes acting with the argmax of the actor's logits."""
    def act(obs, _):
        logits = algo.actor.apply(ts.actor_ts.params, obs[None],
                                  method=lambda module, x: module._action_dist(x).logits)
        return jnp.argmax(logits[0])

    _, returns = evaluate(act, rng, algo.env, algo.env_params, EVAL_EPISODES,
                          algo.env_params.max_steps_in_episode)
    return returns.mean()


def make_algo(game: str, updates: int, every: int):
    config = {
        "env": f"{game}-MinAtar", "num_envs": 64, "num_steps": 128, "num_epochs": 4,
        "num_minibatches": 8, "total_timesteps": updates * MINATAR_BATCH,
        "eval_freq": every * MINATAR_BATCH, "skip_initial_evaluation": False,
        "learning_rate": 5e-4, "gamma": 0.999, "gae_lambda": 0.95, "clip_eps": 0.2,
        "vf_coef": 0.5, "ent_coef": 0.01, "max_grad_norm": 0.5,
        "normalize_observations": False, "normalize_rewards": False,
        "agent_kwargs": {"activation": "relu", "hidden_layer_sizes": (256, 256)},
    }
    algo = PPO.create(**config).replace(eval_callback=greedy_eval)
    return algo, {**config, "eval_callback": f"greedy, {EVAL_EPISODES} episodes"}


def main() -> None:
    args = minatar_args(__doc__)
    updates, every, evals = minatar_schedule(args.total_steps, args.evals)
    keys = jnp.stack([jax.random.PRNGKey(s) for s in range(args.seeds)])
    rows, shown = [], {}
    for game in args.games:
        algo, shown = make_algo(game, updates, every)
        compile_s, run_s, cpu_s, (_, returns) = minatar_timed(
            jax.jit(jax.vmap(algo.train)), keys)
        rows.append(minatar_row(game, updates, every, jax.device_get(returns), compile_s,
                                run_s, cpu_s))
        row = rows[-1]
        print(f"{game}: final greedy returns {row['final_returns']}, compile "
              f"{compile_s:.1f} s, run {run_s:.1f} s ({row['sps']:,.0f} env steps/s)",
              flush=True)
    shown.pop("env", None)
    emit({"lib": "rejax", "network": "mlp", "version": importlib.metadata.version("rejax"),
          "gymnax": importlib.metadata.version("gymnax"), "device": device(),
          "config": shown, "evals": evals,
          "evaluation": f"greedy (argmax of the actor's logits), {EVAL_EPISODES} episodes per "
          "seed, before training and every eval_freq env steps (rejax's eval_callback "
          "replaced)", "differences": DIFFERENCES, "games": rows}, args.json)


if __name__ == "__main__":
    main()
