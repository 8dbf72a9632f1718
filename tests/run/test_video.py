"""Watching a policy (``rollax render``, ``rollax.render_episodes``): the corridor's greedy
episode against a hand calculation, its captions and GIF frames, MinAtar's planes, and the
one-line refusals before anything is compiled or written. Gymnasium's classic control (drawn
with pygame) and MP4s: tests/extras/test_render.py."""

import importlib.util
import json

import jax
import numpy as np
import pytest
from PIL import Image

import rollax
from helpers import disk_full_for_staged_files, gif_ends, run
from rollax.contracts.probe import RandomPolicy
from rollax.envs.frames import draw_planes, frame_renderer, plane_colours
from rollax.run.video import captions, play_host_episodes, record_episodes
from rollax.run.watch import render_episodes


@pytest.fixture(scope="module")
def corridor_run(tmp_path_factory):
    """A tabular corridor run trained until its greedy policy walks right (40 updates)."""
    from rollax.cli import main

    out = tmp_path_factory.mktemp("render") / "run"
    assert main(["train", "--json", "--updates", "40", "--out", str(out)]) == 0
    return out


def test_the_greedy_corridor_episode_is_the_hand_calculation(corridor_run, tmp_path):
    # from the start p (0 or 1), L = 3 - p steps right: rewards -0.01 each, then +1 at the
    # goal; the return 1 - 0.01 (L - 1)
    loaded = rollax.load_run(corridor_run)
    recorded = record_episodes(loaded.env, loaded.policy, loaded.lane_params(0),
                               jax.random.key(0), 1, 8)
    start = int(recorded.states.position[0, 0])
    steps = 3 - start
    assert recorded.lengths.tolist() == [steps]
    assert recorded.actions[0, :steps].tolist() == [1] * steps
    np.testing.assert_allclose(recorded.rewards[0],
                               [-0.01] * (steps - 1) + [1.0] + [0.0] * (8 - steps), rtol=1e-6)
    assert recorded.states.position[0].tolist() == [*range(start, 4), *[3] * (9 - steps - 1)]
    returns = np.cumsum([0.0, *[-0.01] * (steps - 1), 1.0])
    assert captions(recorded) == [f"step {t}  return {returns[t]:.6g}  action "
                                  f"{'-' if t == 0 else 1}" for t in range(steps + 1)]
    done = render_episodes(corridor_run, tmp_path / "walk.gif", fps=4)
    assert done.returns == pytest.approx((returns[-1],)) and done.lengths == (steps,)
    assert done.frames == steps + 1
    with Image.open(done.path) as gif:
        assert gif.n_frames == steps + 1 and gif.info["duration"] == 250
        frames = []
        for i in range(steps + 1):
            gif.seek(i)
            frames.append(np.asarray(gif.convert("RGB")))
    assert frames[0].shape == (48 + 18, 4 * 48, 3)  # the corridor over its caption bar
    blue = [(f[:48] == (40, 90, 200)).all(-1) for f in frames]
    for t, mask in enumerate(blue):  # the agent walks one cell per frame
        cell = start + t
        assert mask[:, cell * 48:(cell + 1) * 48].any()
        assert mask.sum() == blue[0].sum()
    assert not np.array_equal(frames[0][48:], frames[-1][48:])  # the captions differ


def test_several_episodes_and_sampling(corridor_run, tmp_path):
    done = render_episodes(corridor_run, tmp_path / "three.gif", episodes=3, sample=True,
                           seed=1)
    assert len(done.returns) == 3 and done.frames == sum(done.lengths) + 3
    for total, length in zip(done.returns, done.lengths):  # the goal at step L, or never
        assert total == pytest.approx(1.0 - 0.01 * (length - 1), abs=1e-6) or (
            length == 8 and total == pytest.approx(-0.08, abs=1e-6))


def test_planes_are_coloured_by_their_highest_lit_plane():
    planes = np.zeros((2, 3, 4), np.float32)
    planes[0, 0, 1] = 1
    planes[0, 0, 3] = 1  # two lit: the highest (3) wins
    planes[1, 2, 0] = 1
    colours = plane_colours(4)
    assert len({tuple(c) for c in colours}) == 4
    picture = draw_planes(planes, colours, cell=2)
    assert picture.shape == (4, 6, 3) and picture.dtype == np.uint8
    assert (picture[:2, :2] == colours[3]).all() and (picture[2:, 4:] == colours[0]).all()
    assert (picture[:2, 2:4] == 0).all()


def test_minatar_random_policy_video(tmp_path, capsys):
    env = rollax.make("gymnax:Breakout-MinAtar")
    assert frame_renderer(env) is not None
    code, out, err = run(capsys, "render", "gymnax:Breakout-MinAtar", "--out",
                         tmp_path / "b.gif", "--max-steps", "40", "--seed", "3", "--json")
    assert code == 0, err
    done = json.loads(out)
    assert done["frames"] == done["lengths"][0] + 1 >= 2
    frames, first, last = gif_ends(tmp_path / "b.gif")
    assert frames == done["frames"]
    assert first.shape == (160 + 18, 160, 3) and not np.array_equal(first[:160], last[:160])


@pytest.mark.parametrize(("argv", "message"), [
    (["corridor", "--out", "x.avi"], "out must end in .gif or .mp4, got 'x.avi'"),
    (["corridor", "--out", "missing/x.gif"], "out: the folder 'missing' does not exist"),
    (["gymnax:Catch-bsuite"],
     "rollax cannot draw 'gymnax:Catch-bsuite' yet; it draws CartPole-v1, "),
    (["corridor", "--episodes", "0"], "episodes must be"),
    (["corridor", "--fps", "0"], "fps must be a number in (0, 240], got 0.0"),
    (["no-such-env"], "unknown environment 'no-such-env'"),
    (["custom_envs.gym_walk:make_dict"],  # a host environment whose maker takes no render_mode
     "rollax cannot draw 'custom_envs.gym_walk:make_dict' yet; it draws CartPole-v1, "),
])
def test_refusals_are_one_line_before_anything_is_written(capsys, tmp_path, monkeypatch, argv,
                                                          message):
    monkeypatch.chdir(tmp_path)
    code, out, err = run(capsys, "render", *argv)
    assert code == 2 and err.startswith(f"rollax render: error: {message}"), err
    assert err.count("\n") == 1 and out == ""
    assert list(tmp_path.iterdir()) == []


def test_a_gif_on_a_full_disk_is_one_line_naming_it_and_leaves_the_old_file(capsys, tmp_path,
                                                                              monkeypatch):
    # the GIF is written beside its path and renamed when whole: ENOSPC (a real one, from
    # /dev/full) is one line with the path, exit 1, and the file that was there is kept
    out = tmp_path / "x.gif"
    out.write_text("an older video")
    disk_full_for_staged_files(monkeypatch)
    code, text, err = run(capsys, "render", "corridor", "--out", out, "--episodes", "3")
    assert (code, text, err) == (1, "", f"rollax render: error: {out}: No space left on device\n")
    assert list(tmp_path.iterdir()) == [out] and out.read_text() == "an older video"
    monkeypatch.undo()
    code, _, err = run(capsys, "render", "corridor", "--out", out, "--episodes", "3")
    assert code == 0, err
    assert list(tmp_path.iterdir()) == [out] and gif_ends(out)[0] > 3


@pytest.mark.skipif(importlib.util.find_spec("imageio_ffmpeg") is not None,
                    reason="imageio-ffmpeg installed (tests/extras/test_render.py writes MP4s)")
def test_an_mp4_without_imageio_names_the_install_command(capsys, tmp_path):
    code, _, err = run(capsys, "render", "corridor", "--out", tmp_path / "x.mp4")
    assert code == 2 and "pip install 'rollax[render]'" in err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.skipif(importlib.util.find_spec("pygame") is not None,
                    reason="pygame installed (tests/extras/test_render.py draws with it)")
@pytest.mark.parametrize("command", ["render", "train"])
def test_a_host_environment_whose_renderer_needs_pygame_names_the_install_command(
        capsys, tmp_path, command):
    # Gymnasium's CartPole draws with pygame: named before anything is compiled or written
    argv = (["render", "gymnasium:CartPole-v1", "--out", tmp_path / "c.gif"] if command == "render"
            else ["train", "--env", "gymnasium:CartPole-v1", "--video-every", "1", "--out",
                  tmp_path / "run"])
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert "needs a package its renderer imports: `pip install 'rollax[render]'` (pygame" in err
    assert list(tmp_path.iterdir()) == []


def test_the_tabular_run_of_the_session_renders_with_a_lane(tabular_run, tmp_path, capsys):
    code, out, err = run(capsys, "render", tabular_run, "--out", tmp_path / "t.gif",
                         "--lane", "0")
    assert code == 0, err
    assert "episode 1: return" in out and out.rstrip().endswith("frames)")
    code, _, err = run(capsys, "render", tabular_run, "--out", tmp_path / "u.gif", "--lane",
                       "5")
    assert code == 2 and "lane must be in [0, 1)" in err


def test_video_every_writes_gifs_into_the_run_and_changes_no_result(capsys, tmp_path):
    flags = ["--updates", "4", "--batch-size", "16", "--chunk-size", "1", "--json"]
    code, out, err = run(capsys, "train", *flags, "--video-every", "2", "--out",
                         tmp_path / "with")
    assert code == 0, err
    with_videos = json.loads(out)
    code, out, err = run(capsys, "train", *flags, "--out", tmp_path / "without")
    assert code == 0, err
    assert with_videos["params_sha256"] == json.loads(out)["params_sha256"]
    summary = json.loads((tmp_path / "with" / "summary.json").read_text())
    assert summary["videos"] == ["videos/update-0000002.gif", "videos/update-0000004.gif"]
    assert "videos" not in json.loads((tmp_path / "without" / "summary.json").read_text())
    config = json.loads((tmp_path / "with" / "config.json").read_text())
    assert config["video_every"] == 2
    for video in summary["videos"]:
        with Image.open(tmp_path / "with" / video) as gif:
            assert 2 <= gif.n_frames <= 9  # one corridor episode: 1 to 8 steps, and its start
            assert gif.size == (4 * 48, 48 + 18)


def test_video_every_is_refused_for_what_rollax_cannot_draw(capsys, tmp_path):
    code, _, err = run(capsys, "train", "--env", "gymnax:Catch-bsuite", "--total-steps",
                       "1024", "--video-every", "1", "--out", tmp_path / "run")
    assert code == 2 and err.startswith("rollax train: error: video_every: rollax cannot draw "
                                        "'gymnax:Catch-bsuite' yet; it draws CartPole-v1, "), err
    assert not (tmp_path / "run").exists()


def _walk_replayed(actions, horizon: int):
    """The user's walk (tests/custom_envs/gym_walk.py) stepped by hand with ``actions``: its
    frames (the start's, then each step's), rewards and whether the last step ended it."""
    from custom_envs.gym_walk import make

    walk = make(horizon=horizon, render_mode="rgb_array")
    walk.reset(seed=0)
    frames, rewards, ended = [walk.render()], [], False
    for t, action in enumerate(actions):
        assert not ended, t  # the video stopped where the episode ended
        _, reward, terminated, truncated, _ = walk.step(int(action))
        frames.append(walk.render())
        rewards.append(reward)
        ended = terminated or truncated
    return np.stack(frames), rewards, ended


def test_a_host_environment_is_drawn_by_its_own_render(capsys, tmp_path):
    # a Gymnasium environment of the user's (stepped on the host) plays its episodes in an
    # environment of its own built with render_mode="rgb_array": the frames, rewards and ends
    # are those of the environment stepped by hand with the same actions
    env = rollax.make("custom_envs.gym_walk:make", horizon=12)
    recorded = play_host_episodes(env, RandomPolicy.for_space(env.action_space), None,
                                  jax.random.key(2), 3, 12, sample=True)
    longest = int(recorded.lengths.max())
    assert recorded.states.shape == (3, longest + 1, 8, 7 * 8, 3)
    for e, length in enumerate(recorded.lengths.tolist()):
        frames, rewards, ended = _walk_replayed(recorded.actions[e, :length], 12)
        assert ended  # the goal, or the 12-step limit
        np.testing.assert_array_equal(recorded.states[e, :length + 1], frames)
        assert (recorded.states[e, length:] == frames[-1]).all()  # a shorter one keeps its last
        np.testing.assert_allclose(recorded.rewards[e], rewards + [0.0] * (longest - length))
    assert len({tuple(a[:n]) for a, n in zip(recorded.actions.tolist(), recorded.lengths)}) > 1
    code, out, err = run(capsys, "render", "custom_envs.gym_walk:make", "--out",
                         tmp_path / "walk.gif", "--max-steps", "12", "--json")
    assert code == 0, err
    done = json.loads(out)
    frames, first, last = gif_ends(tmp_path / "walk.gif")
    assert frames == done["frames"] == done["lengths"][0] + 1
    assert first.shape == (8 + 18, 56, 3) and not np.array_equal(first[:8], last[:8])


def test_a_host_run_is_watched_and_filmed_as_it_trains(capsys, tmp_path):
    # PPO on the user's walk with --video-every: GIFs in the run folder; `rollax render RUN`'s
    # greedy episode is the walk stepped by hand with load_run(RUN).act's actions
    code, out, err = run(capsys, "train", "--env", "custom_envs.gym_walk:make", "--horizon",
                         "10", "--total-steps", "512", "--num-envs", "4", "--num-steps", "32",
                         "--video-every", "2", "--json", "--out", tmp_path / "run")
    assert code == 0, err
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["videos"] == ["videos/update-0000002.gif", "videos/update-0000004.gif"]
    for video in summary["videos"]:
        with Image.open(tmp_path / "run" / video) as gif:
            assert 4 <= gif.n_frames <= 11 and gif.size == (56, 8 + 18)  # 3 to 10 steps
    code, out, err = run(capsys, "render", tmp_path / "run", "--out", tmp_path / "w.gif",
                         "--json")
    assert code == 0, err
    done = json.loads(out)
    loaded = rollax.load_run(tmp_path / "run")
    from custom_envs.gym_walk import make

    walk, actions = make(horizon=10), []
    obs, _ = walk.reset(seed=0)
    total, ended = 0.0, False
    while not ended:
        actions.append(int(loaded.act(obs)))
        obs, reward, terminated, truncated, _ = walk.step(actions[-1])
        total, ended = total + reward, terminated or truncated
    assert done["lengths"] == [len(actions)] and done["returns"] == pytest.approx([total])
    assert done["frames"] == len(actions) + 1
