"""EnvPool's environments through ``envpool:<id>`` (``pip install rollax[envpool]``), checked
against EnvPool's own pools stepped by hand in plain Python loops: the rows rollax records are
EnvPool's with its next-step resets dropped (rollax resets within the ending step)."""

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rollax
from helpers import assert_gymnasium_rows, run, seed_of, train_json
from rollax.collect import collect_autoreset, episode_returns, reset_batch, split_key
from rollax.contracts.probe import RandomPolicy
from rollax.envs.host import is_host
from rollax.envs.registry import make_configured
from rollax.nets.build import actor_critic
from rollax.nets.cnn import image_shape
from rollax.returns import gae
from rollax.run.video import play_host_episodes

envpool = pytest.importorskip("envpool")


def envpool_seed(key, batch_size: int) -> int:
    """The seed of the EnvPool pool a reset with ``key`` opens (environment ``b``: seed + b)."""
    return seed_of(key) % (2**31 - batch_size)


def envpool_rows(task, seed, actions, clip=None, image=False, **options):
    """EnvPool's own environments, one pool of one environment per column of ``actions``
    (T, B, ...), seeded ``seed + b`` as environment ``b`` of a pool seeded ``seed`` is; after
    an episode ends EnvPool's next step resets it (ignoring its action), and that step is
    taken here and left out of the rows: the rows a same-step collector records
    (observation, next observation, reward, terminated, truncated); ``image``: EnvPool's
    ``(C, H, W)`` frames as rollax's flattened ``(H, W, C)``."""
    steps, batch = actions.shape[:2]
    rows = [[] for _ in range(steps)]
    for b in range(batch):
        pool = envpool.make_gymnasium(task, num_envs=1, seed=seed + b, **options)
        dtype = pool.action_space.dtype
        obs = pool.reset()[0][0]
        for t in range(steps):
            action = actions[t, b] if clip is None else np.clip(actions[t, b], *clip)
            nxt, reward, term, trunc, _ = pool.step(np.asarray([action], dtype))
            rows[t].append((seen(obs, image), seen(nxt[0], image), reward[0], term[0],
                            trunc[0]))
            obs = nxt[0]
            if term[0] or trunc[0]:  # EnvPool's reset step: the new episode's first observation
                first, reward, *_ = pool.step(np.asarray([action], dtype))
                assert reward[0] == 0
                obs = first[0]
        pool.close()
    return rows


def seen(observation, image: bool) -> np.ndarray:
    """An observation of EnvPool's as rollax's policies see it."""
    return np.float32(np.moveaxis(observation, 0, -1).reshape(-1) if image else observation)


def test_cartpole_rows_are_envpools_with_its_reset_steps_dropped():
    env = rollax.make("envpool:CartPole-v1", horizon=15)
    assert is_host(env) and env.horizon == 15 and env.action_space == rollax.Discrete(2)
    assert rollax.make("envpool:CartPole-v1").horizon == 500
    net = actor_critic(env, "mlp", (8,), "tanh", 0.0, 1)
    params = net.init(jax.random.key(0))
    key = jax.random.key(1)
    state = reset_batch(env, key, 3)
    _, traj = collect_autoreset(env, net, params, state, jax.random.key(2), 40)
    assert traj.terminated.any() and traj.truncated.any() and traj.active.all()
    assert_gymnasium_rows(traj, envpool_rows("CartPole-v1", envpool_seed(key, 3),
                                             np.asarray(traj.action), max_episode_steps=15))


def test_a_truncated_mujoco_episode_is_bootstrapped_from_its_true_final_observation():
    """HalfCheetah cut at 5 steps: every fifth step is truncated (never terminated), its next
    observation EnvPool's own final one, not the new episode's first (the next row's), and GAE
    bootstraps the truncated step from the value of that final observation."""
    env = rollax.make("envpool:HalfCheetah-v4", horizon=5)
    assert env.observation_space.shape == (17,) and env.action_space.shape == (6,)
    net = actor_critic(env, "mlp", (16,), "tanh", 0.5, 1)
    params = net.init(jax.random.key(0))
    key = jax.random.key(3)
    state = reset_batch(env, key, 2)
    _, traj = collect_autoreset(env, net, params, state, jax.random.key(4), 12)
    ends = np.zeros((12, 2), bool)
    ends[[4, 9]] = True
    np.testing.assert_array_equal(traj.truncated, ends)
    assert not traj.terminated.any()
    rows = envpool_rows("HalfCheetah-v4", envpool_seed(key, 2), np.asarray(traj.action),
                        clip=(-1.0, 1.0), max_episode_steps=5)
    assert_gymnasium_rows(traj, rows)
    final = np.asarray(traj.next_observation[4, 0])
    assert not np.array_equal(final, np.asarray(traj.observation[5, 0]))
    value = jax.vmap(jax.vmap(net.value, (None, 0)), (None, 0))
    values, next_values = value(params, traj.observation), value(params, traj.next_observation)
    advantages, _ = gae(traj.reward, values, next_values, traj.terminated, traj.truncated,
                        0.99, 0.0)
    by_hand = rows[4][0][2] + 0.99 * net.value(params, jnp.asarray(rows[4][0][1])) - values[4, 0]
    np.testing.assert_allclose(advantages[4, 0], by_hand, rtol=1e-5)
    wrong = rows[4][0][2] + 0.99 * values[5, 0] - values[4, 0]  # the next episode's start
    assert abs(float(advantages[4, 0] - wrong)) > 1e-3


def test_evaluation_runs_a_pool_of_its_own_and_closes_it():
    env = rollax.make("envpool:CartPole-v1", horizon=20)
    net = actor_critic(env, "mlp", (8,), "tanh", 0.0, 1)
    params = net.init(jax.random.key(0))
    pools = set(env.pools)
    key = jax.random.key(5)
    returns = episode_returns(env, rollax.GreedyPolicy(net), params, key, 3, 20)
    act = jax.jit(lambda o: rollax.GreedyPolicy(net).sample(params, o, jax.random.key(0))[0])
    seed = envpool_seed(jax.random.split(key)[0], 3)  # the reset stream of split_key
    expected = []
    for b in range(3):
        pool = envpool.make_gymnasium("CartPole-v1", num_envs=1, seed=seed + b,
                                      max_episode_steps=20)
        obs, total, done = pool.reset()[0], 0.0, False
        while not done:
            obs, reward, term, trunc, _ = pool.step(np.asarray([act(obs[0])], np.int32))
            total, done = total + reward[0], term[0] or trunc[0]
        expected.append(total)
    np.testing.assert_array_equal(returns, expected)
    assert set(env.pools) == pools


def test_errors_are_one_line(capsys, tmp_path):
    with pytest.raises(ValueError, match=r"did you mean .*envpool:HalfCheetah-v4"):
        rollax.make("envpool:HalfCheetah-v9")
    with pytest.raises(ValueError, match="does not accept"):
        rollax.make("envpool:CartPole-v1", no_such_option=3)
    code, _, err = run(capsys, "train", "--env", "envpool:Pong-v9", "--out", tmp_path / "a")
    assert code == 2 and len(err.strip().splitlines()) == 1 and "envpool:Pong-v5" in err
    assert not (tmp_path / "a").exists()


@pytest.mark.slow
def test_the_mujoco_preset_trains_from_the_command_line_and_resumes(capsys, tmp_path):
    """HalfCheetah with CleanRL's settings (one environment, 2,048 steps an update), two
    updates, then a resume to three; the run folder loads and evaluates."""
    out = tmp_path / "run"
    first = train_json(capsys, "--env", "envpool:HalfCheetah-v4", "--total-steps", "4096",
                       "--checkpoint-every", "1", "--eval-episodes", "2", "--out", out)
    assert first["env_steps"] == 4096 and np.isfinite(first["eval_return_mean"])
    again = train_json(capsys, "--resume", out, "--total-steps", "6144")
    assert again["env_steps"] == 6144
    config = json.loads((out / "config.json").read_text())["config"]
    assert (config["num_envs"], config["num_steps"], config["epochs"]) == (1, 2048, 10)
    loaded = rollax.load_run(out)
    assert loaded.updates == 3 and is_host(loaded.env)
    assert np.shape(loaded.act(np.zeros(17, np.float32))) == (6,)
    code, shown, _ = run(capsys, "eval", out, "--episodes", "2", "--json")
    result = json.loads(shown)
    assert code == 0 and result["episodes"] == 2 and np.isfinite(result["aggregate"]["mean"])


def test_atari_frames_are_envpools_with_channels_last():
    """Breakout's stacked frames, EnvPool's (4, 84, 84), reach the policy as (84, 84, 4) images
    flattened (what PPO's CNN reads), over episodes cut at 20 steps."""
    env = rollax.make("envpool:Breakout-v5", horizon=20)
    assert env.raw_observation_shape == (84, 84, 4) and image_shape(env) == (84, 84, 4)
    policy = RandomPolicy.for_space(env.action_space)
    key = jax.random.key(6)
    state = reset_batch(env, key, 2)
    _, traj = collect_autoreset(env, policy, policy.init(), state, jax.random.key(7), 24)
    assert traj.truncated[19].all()
    assert_gymnasium_rows(traj, envpool_rows("Breakout-v5", envpool_seed(key, 2),
                                             np.asarray(traj.action), image=True,
                                             max_episode_steps=20))


def test_atari_trained_per_life_continues_the_game_and_is_scored_on_whole_games():
    """With ``episodic_life`` a lost life ends the training episode (terminated) and the game
    goes on, as EnvPool's own next step continues it (a reset would restart the game at 5
    lives): the rows equal EnvPool's with its continuation steps dropped, rewards clipped.
    Evaluation plays the whole, unclipped game (the same environment made without the two
    options), whatever the training environment's options."""
    options = {"episodic_life": True, "reward_clip": True}
    env = rollax.make("envpool:Breakout-v5", horizon=200, **options)
    policy = RandomPolicy.for_space(env.action_space)
    key = jax.random.key(8)
    state = reset_batch(env, key, 2)
    _, traj = collect_autoreset(env, policy, policy.init(), state, jax.random.key(9), 130)
    assert int(traj.terminated.sum()) >= 4  # lives lost, the games going on
    assert_gymnasium_rows(traj, envpool_rows("Breakout-v5", envpool_seed(key, 2),
                                             np.asarray(traj.action), image=True,
                                             max_episode_steps=200, **options))
    game = rollax.make("envpool:Breakout-v5", horizon=200)
    assert env.scoring is game and game.scoring is None
    net = actor_critic(env, "nature", (16,), "relu", 0.0, 1)
    params = net.init(jax.random.key(10))
    scored = rollax.evaluate_policy(env, net, params, jax.random.key(11), 2, greedy=False)
    assert float(scored) == float(rollax.evaluate_policy(game, net, params, jax.random.key(11),
                                                         2, greedy=False))


def test_check_host_env_passes_on_envpool_pools():
    """``check_host_env`` on EnvPool's CartPole (its endings within 20 steps), MuJoCo's
    Hopper (Box actions clipped) and Breakout trained per life (the continuation step after a
    lost life): every recorded row is the pool's own."""
    for name, horizon, options in (("envpool:CartPole-v1", 20, ()),
                                   ("envpool:Hopper-v4", 15, ()),
                                   ("envpool:Breakout-v5", None, ("episodic_life=true",))):
        env = make_configured(name, horizon, options)
        report = rollax.check_host_env(env, batch_size=2, num_steps=40)
        assert report.ok, report


@pytest.mark.parametrize(("task", "steps"), [("CartPole-v1", 40), ("HalfCheetah-v5", 4)])
def test_videos_are_envpools_own_frames_along_the_episode(task, steps):
    # each episode is played in an EnvPool environment of its own with render_mode="rgb_array",
    # seeded as a pool reset with the episode's reset key: EnvPool's frames of the same seed and
    # actions, stepped by hand (HalfCheetah's drawn into MuJoCo's OpenGL context)
    env = rollax.make(f"envpool:{task}")
    recorded = play_host_episodes(env, RandomPolicy.for_space(env.action_space), None,
                                  jax.random.key(5), 2, steps, sample=True)
    context = None
    if task == "HalfCheetah-v5":  # EnvPool's MuJoCo draws in the calling thread's OpenGL
        import mujoco

        context = mujoco.GLContext(640, 480)
        context.make_current()
    for e, episode_key in enumerate(jax.random.split(jax.random.key(5), 2)):
        length = int(recorded.lengths[e])
        pool = envpool.make_gymnasium(task, num_envs=1, batch_size=1,
                                      seed=envpool_seed(split_key(episode_key, False).reset, 1),
                                      render_mode="rgb_array")
        pool.reset()
        frames, total = [pool.render()[0]], 0.0
        for action in recorded.actions[e, :length]:
            _, reward, *_ = pool.step(np.asarray(env.host_action(action[None]),
                                                 pool.action_space.dtype))
            frames.append(pool.render()[0])
            total += float(reward[0])
        pool.close()
        np.testing.assert_array_equal(recorded.states[e, :length + 1], np.stack(frames))
        assert recorded.rewards[e].sum() == pytest.approx(total, rel=1e-6)
        assert not np.array_equal(frames[0], frames[-1])
    if context is not None:
        context.free()


def test_a_run_trained_per_life_is_filmed_on_the_whole_game():
    # Breakout with episodic_life (an episode per life in training) is scored, and filmed, on
    # the whole game: the video's episode goes on past the first lost life, exactly as
    # EnvPool's game without episodic_life stepped by hand with the same actions
    env = rollax.make("envpool:Breakout-v5", episodic_life=True)
    recorded = play_host_episodes(env, RandomPolicy.for_space(env.action_space), None,
                                  jax.random.key(0), 1, 400, sample=True)
    length = int(recorded.lengths[0])
    pool = envpool.make_gymnasium(
        "Breakout-v5", num_envs=1, batch_size=1, render_mode="rgb_array",
        seed=envpool_seed(split_key(jax.random.split(jax.random.key(0), 1)[0], False).reset, 1))
    pool.reset()
    lives, ended = [], False
    for t, action in enumerate(recorded.actions[0, :length]):
        assert not ended, t
        _, _, terminated, truncated, info = pool.step(np.asarray([action], np.int32))
        lives.append(int(info["lives"][0]))
        ended = bool(terminated[0] or truncated[0])
        np.testing.assert_array_equal(recorded.states[0, t + 1], pool.render()[0])
    pool.close()
    assert ended or length == 400
    assert lives[0] > min(lives)  # a life was lost, and the episode went on
