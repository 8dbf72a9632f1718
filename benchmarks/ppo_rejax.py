"""PPO on CartPole-v1 with rejax (the anchor), hyperparameters set to rollax's PPOConfig defaults.

    .bench/rejax/bin/python benchmarks/ppo_rejax.py [--total-steps 500000] [--num-envs 4]
                                                    [--repeats 3] [--json OUT]

Runs in the rejax environment (benchmarks/requirements-rejax.txt: rejax 0.1.3 needs gymnax 0.0.9,
whose step returns 5 values). ``jax.jit(algo.train).lower(key).compile()`` is timed apart; then
one warm-up run and ``--repeats`` timed runs (keys 1..repeats), each ending in a greedy
evaluation over 32 episodes. rejax's own evaluation samples actions from the policy (128
episodes), so its ``eval_callback`` is replaced by a greedy one (argmax of the actor's logits,
run by ``rejax.evaluate.evaluate``), and ``eval_freq = total_timesteps`` with
``skip_initial_evaluation=True`` makes that evaluation run once, after the last update, as
rollax's does. Settings rejax cannot express are listed under "differences" in the output.
``--num-envs N`` (default 4, as rollax's) changes only the number of environments: 128 steps,
4 epochs and 4 minibatches stay, so an update collects N x 128 steps, each minibatch holds
N x 32 of them, and the update count and the learning-rate schedule's length follow N.
"""

from __future__ import annotations

import importlib.metadata

import jax
import jax.numpy as jnp
import optax
from _timing import emit, ppo_args, ppo_record, time_compiled
from rejax import PPO
from rejax.evaluate import evaluate

# rollax's PPOConfig defaults (src/rollax/algos/ppo.py); the number of environments is
# --num-envs (default 4, rollax's).
NUM_STEPS, EPOCHS, MINIBATCHES, LR = 128, 4, 4, 2.5e-4
EVAL_EPISODES = 32

DIFFERENCES = [
    ("gradient clipping: rejax applies optax.clip(0.5) (element-wise, to each network's "
     "gradient); rollax clips the actor's and the critic's gradients to global norm 0.5 apart"),
    "Adam epsilon: rejax uses optax.adam's default 1e-8; rollax uses 1e-5",
    ("two Adam optimisers (actor, critic) in rejax, one over both networks in rollax (the same"
     " updates apart from the clipping above, since the networks share no parameters)"),
    ("initialisation: rejax uses flax's Dense default (LeCun normal, zero bias); rollax uses "
     "orthogonal weights (gain sqrt 2 hidden, 1 for the logits and the critic's output)"),
    ("time limit: rejax (gymnax 0.0.9) treats the 500-step limit as termination (no "
     "bootstrap); rollax bootstraps truncated episodes from the value of the true next "
     "observation"),
    ("environment: gymnax 0.0.9's CartPole-v1 computes a reset at every step and selects; "
     "rollax resets only when some environment finished"),
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


def make_algo(total_steps: int, num_envs: int):
    updates = total_steps // (num_envs * NUM_STEPS)  # rollax's num_updates
    if updates < 1:
        raise ValueError(f"total_steps must be at least num_envs * {NUM_STEPS} = "
                         f"{num_envs * NUM_STEPS}, got {total_steps}")
    steps = updates * num_envs * NUM_STEPS
    config = {
        "env": "CartPole-v1", "num_envs": num_envs, "num_steps": NUM_STEPS,
        "num_epochs": EPOCHS, "num_minibatches": MINIBATCHES, "total_timesteps": steps,
        "eval_freq": steps, "skip_initial_evaluation": True, "gamma": 0.99, "gae_lambda": 0.95,
        "clip_eps": 0.2, "vf_coef": 0.5, "ent_coef": 0.01, "max_grad_norm": 0.5,
        "normalize_observations": False, "normalize_rewards": False,
        "agent_kwargs": {"activation": "tanh", "hidden_layer_sizes": (64, 64)},
    }
    # Linear from LR to 0 over every gradient step (each optimiser counts its own, one per
    # minibatch), as rollax anneals.
    schedule = optax.linear_schedule(LR, 0.0, updates * EPOCHS * MINIBATCHES)
    algo = PPO.create(**config, learning_rate=schedule).replace(eval_callback=greedy_eval)
    shown = {**config, "learning_rate": f"linear {LR} -> 0 over {updates * EPOCHS * MINIBATCHES}"
             " gradient steps", "eval_callback": f"greedy, {EVAL_EPISODES} episodes"}
    return algo, steps, shown


def main() -> None:
    args = ppo_args(__doc__)
    algo, steps, shown = make_algo(args.total_steps, args.num_envs)
    keys = [jax.random.PRNGKey(i) for i in range(args.repeats + 1)]
    compile_s, times, returns = time_compiled(
        jax.jit(algo.train), keys, lambda out: float(out[1][-1]))
    emit(ppo_record("rejax", importlib.metadata.version("rejax"), shown, steps, compile_s, times,
                    returns, evaluation="greedy (argmax of the actor's logits), "
                    f"{EVAL_EPISODES} episodes, via a replaced eval_callback run once after "
                    "the last update (eval_freq = total_timesteps, no initial evaluation)",
                    differences=DIFFERENCES,
                    gymnax=importlib.metadata.version("gymnax")), args.json)


if __name__ == "__main__":
    main()
