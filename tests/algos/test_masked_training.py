"""Action masks through collection, the updates and evaluation, on the masked guessing tasks
of tests/custom_envs/masked_guess.py (illegal values pay a bonus, so a policy that ignored the
mask would take them)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rollax
from custom_envs.masked_guess import TRAP, discrete, multi_binary, multi_discrete
from helpers import train_json
from rollax.algos import episodic, ppo, reinforce
from rollax.algos.base import hyperparams_of
from rollax.envs.masks import is_legal
from rollax.nets import actor_critic

ENVS = {"discrete": discrete, "multi_discrete": multi_discrete, "multi_binary": multi_binary}


def legal_everywhere(env, traj) -> bool:
    legal = np.asarray(is_legal(env.action_space, traj.action_mask, traj.action))
    return bool(legal[np.asarray(traj.active)].all())


@pytest.mark.parametrize("name", list(ENVS))
def test_collectors_store_the_mask_and_sample_legal_actions(name):
    env = ENVS[name]()
    net = actor_critic(env, "mlp", (8,), "tanh", 0.0, 8)
    params = net.init(jax.random.key(0))
    _, traj = rollax.collect(env, net, params, jax.random.key(1), 32, 5)
    states = jax.vmap(env.reset)(rollax.collection_keys(jax.random.key(1), 32, 5)[0])
    np.testing.assert_array_equal(np.asarray(traj.action_mask[0]),
                                  np.asarray(jax.vmap(env.action_mask)(states)))
    assert traj.action_mask.dtype == jnp.bool_ and legal_everywhere(env, traj)
    # the stored log-prob is the masked distribution's
    want = jax.vmap(jax.vmap(net.log_prob, (None, 0, 0, 0)), (None, 0, 0, 0))(
        params, traj.observation, traj.action, traj.action_mask)
    np.testing.assert_allclose(np.asarray(traj.log_prob), np.asarray(want), rtol=1e-6,
                               atol=1e-6)
    state = rollax.reset_batch(env, jax.random.key(2), 8)
    _, auto = rollax.collect_autoreset(env, net, params, state, jax.random.key(3), 9)
    assert auto.action_mask.shape[:2] == (9, 8) and legal_everywhere(env, auto)


def test_unmasked_trajectories_carry_no_mask():
    env = rollax.make("CartPole-v1")
    net = actor_critic(env, "mlp", (8,), "tanh", 0.0, 8)
    _, traj = rollax.collect(env, net, net.init(jax.random.key(0)), jax.random.key(1), 4, 3)
    assert traj.action_mask is None and len(jax.tree.leaves(traj)) == 7


def test_the_update_scores_under_the_stored_mask_ratio_one():
    """PPO's rollout data keeps the masks; scored under them with the collecting parameters,
    every log-prob is the stored one (ratio 1), while without them it is not."""
    env = discrete()
    config = ppo.PPOConfig(env="custom_envs.masked_guess:discrete", num_envs=8, num_steps=6,
                           total_steps=48, hidden=(16,))
    parts = ppo.make_parts(config, env)
    hp = hyperparams_of(config)
    state = parts.experience.init(jax.random.key(0), parts.optimiser(hp))
    collected = parts.experience.collect(state, jax.random.key(1))
    data = parts.experience.batch(state, collected,
                                  parts.experience.advantages(state, collected, hp))
    assert data.action_mask.shape == (48, 4)
    scored = parts.experience.score(state.params, data)
    ratio = np.exp(np.asarray(scored.log_prob) - np.asarray(scored.behaviour_log_prob))
    np.testing.assert_allclose(ratio, 1.0, rtol=0, atol=1e-6)
    unmasked = parts.experience.score(state.params, data._replace(action_mask=None))
    assert np.abs(np.asarray(unmasked.log_prob) - np.asarray(scored.log_prob)).max() > 0.1
    # entropy over the legal actions only: at most log 2 (two legal values)
    assert (np.asarray(scored.entropy) <= np.log(2) + 1e-6).all()


@pytest.mark.slow
@pytest.mark.parametrize("network", ["mlp", "gru"])
def test_ppo_first_epoch_ratio_is_one_on_a_masked_env(network):
    config = ppo.PPOConfig(env="custom_envs.masked_guess:multi_discrete", total_steps=2 * 64,
                           num_envs=4, num_steps=16, epochs=1, minibatches=1, hidden=(16,),
                           network=network, memory_size=8, eval_episodes=2)
    result = rollax.make_train(config)(jax.random.key(0))
    np.testing.assert_allclose(result.metrics.ratio_min, 1.0, rtol=1e-5)
    np.testing.assert_allclose(result.metrics.ratio_max, 1.0, rtol=1e-5)


def test_episodic_replay_scores_under_the_stored_mask():
    """REINFORCE / GRPO replay: the collecting parameters give the stored log-probs back."""
    config = reinforce.ReinforceConfig(env="custom_envs.masked_guess:multi_binary",
                                       batch_size=4, group_size=2, hidden=(8,))
    _, parts = episodic.make_parts(config, False, multi_binary())
    params = parts.net.init(jax.random.key(0))
    traj = parts.collect(params, jax.random.key(1))
    assert traj.action_mask.shape == (4, 4, 3, 2) and legal_everywhere(parts.env, traj)
    out = episodic.replay(parts, params, traj)
    live = np.asarray(traj.active)
    np.testing.assert_allclose(np.asarray(out.log_prob)[live], np.asarray(traj.log_prob)[live],
                               rtol=0, atol=1e-6)


def test_evaluation_honours_the_mask_greedy_and_sampled():
    """An actor with every logit 0: unmasked, its mode is action 0, illegal for some targets
    (paying TRAP); masked, greedy and sampled evaluation act among the legal actions only, so
    an episode scores at most one per step."""
    env = discrete()
    net = actor_critic(env, "mlp", (8,), "tanh", 0.0, 8)
    params = jax.tree.map(jnp.zeros_like, net.init(jax.random.key(0)))
    for greedy in (True, False):
        total = float(rollax.evaluate_policy(env, net, params, jax.random.key(1), 64,
                                             greedy=greedy))
        assert 0 <= total <= env.horizon
    assert TRAP > 1


def test_greedy_evaluation_picks_the_best_legal_action():
    """With logits favouring the target's successor (legal) and its predecessor (illegal),
    the masked greedy policy scores 0 per step, an unmasked one TRAP: the mode is taken over the
    legal actions."""
    env = discrete()

    class Fixed:
        def greedy(self, params, observation, mask=None):
            target = jnp.argmax(observation)
            logits = jnp.zeros(4).at[(target + 1) % 4].set(1.0).at[(target + 3) % 4].set(2.0)
            dist = rollax.nets.Categorical(logits)
            return (dist if mask is None else dist.masked(mask)).mode()

        def sample(self, params, observation, key, mask=None):
            return self.greedy(params, observation, mask), jnp.float32(0)

    got = float(rollax.evaluate_policy(env, Fixed(), None, jax.random.key(0), 8))
    assert got == 0.0


# --- the command line ----------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("env, best", [("discrete", 4.0), ("multi_discrete", 8.0),
                                       ("multi_binary", 12.0)])
def test_ppo_learns_the_masked_optimum_and_never_takes_an_illegal_action(env, best, capsys,
                                                                         tmp_path):
    """Illegal values pay TRAP (3) each, more than a correct guess (1): a policy that ignored
    the mask would learn them. Under the mask the best return is ``best`` (every component
    guessed on every step); the trained policy reaches it, greedy and sampled, and its
    sampled episodes never take an illegal action."""
    summary = train_json(capsys, "--env", f"custom_envs.masked_guess:{env}", "--algo", "ppo",
                         "--total-steps", "16384", "--num-envs", "16", "--num-steps", "16",
                         "--hidden", "16", "--lr", "0.003", "--eval-episodes", "32",
                         "--out", tmp_path / "run")
    assert summary["eval_return_mean"] == best
    loaded = rollax.load_run(tmp_path / "run")
    task = ENVS[env]()
    _, traj = rollax.collect(task, loaded.policy, loaded.lane_params(0), jax.random.key(7), 64,
                             task.horizon)
    assert legal_everywhere(task, traj)
    returns = np.asarray(traj.reward.sum(axis=0))
    assert returns.max() <= best and returns.mean() >= 0.9 * best
