"""Rendering with the ``render`` extra (``pip install 'rollax[render]'``: pygame, imageio with
its ffmpeg, moviepy): rollax's classic control drawn by Gymnasium's own renderer, checked
against Gymnasium's environment stepped by hand; a trained CartPole policy as a playable MP4
and GIF; Gymnasium's ``RecordVideo`` on ``to_gymnasium(..., render_mode="rgb_array")``."""

import json
import os
import subprocess
import sys
import warnings

import gymnasium as gym
import jax
import numpy as np
import pytest
from PIL import Image

import rollax
from helpers import disk_full_for_staged_files, run, seed_of
from rollax.collect import split_key
from rollax.contracts.probe import RandomPolicy
from rollax.envs.frames import frame_renderer
from rollax.run.video import play_host_episodes

pytest.importorskip("pygame")
iio = pytest.importorskip("imageio.v3")
pytest.importorskip("moviepy")


@pytest.mark.parametrize(("name", "actions"), [
    ("CartPole-v1", [1, 1, 0, 1, 1, 1, 0, 0]),
    ("MountainCar-v0", [2, 2, 2, 0, 0, 2, 1, 2]),
    ("Acrobot-v1", [0, 2, 2, 1, 0, 0, 2, 2]),
    ("Pendulum-v1", [[1.5], [-2.0], [0.3], [2.0], [2.0], [-1.0], [0.0], [1.0]]),
])
def test_frames_are_gymnasiums_own_along_the_same_trajectory(name, actions):
    # Gymnasium's environment and rollax's, started in the same state and given the same
    # actions, draw the same pictures (the dynamics agree to float32 rounding, so at most a
    # few boundary pixels differ)
    env = rollax.make(name)
    draw = frame_renderer(env)
    theirs = gym.make(name, render_mode="rgb_array").unwrapped
    theirs.reset(seed=0)
    state = env.reset(jax.random.key(0))
    fields = {"CartPole-v1": ("x", "x_dot", "theta", "theta_dot"),
              "MountainCar-v0": ("position", "velocity"),
              "Acrobot-v1": ("theta1", "theta2", "dtheta1", "dtheta2"),
              "Pendulum-v1": ("theta", "theta_dot")}[name]
    state = state._replace(**{f: np.float32(v) for f, v in zip(fields, theirs.state)})
    for action in actions:
        mine = draw(jax.device_get(state))
        theirs.last_u = None
        reference = theirs.render()
        assert mine.shape == reference.shape and mine.dtype == np.uint8
        assert np.mean(np.any(mine != reference, axis=-1)) < 0.002
        state, *_ = env.step(state, np.asarray(action, env.action_space.dtype))
        theirs.step(np.asarray(action, np.float32) if name == "Pendulum-v1" else action)
    assert not np.array_equal(mine, draw(jax.device_get(env.reset(jax.random.key(1)))))


@pytest.mark.parametrize(("name", "options", "actions"), [
    ("FrozenLake-v1", {"is_slippery": False}, [2, 2, 1, 1, 1, 2]),
    ("FrozenLake8x8-v1", {"is_slippery": False}, [2, 2, 2, 1, 1, 1, 2]),
    ("CliffWalking-v1", {"horizon": 50}, [0, 1, 1, 1, 0, 1, 2]),
    ("Taxi-v4", {}, [0, 0, 2, 2, 1, 3]),
])
def test_toy_text_frames_are_gymnasiums_own_at_the_states_its_dynamics_reach(name, options,
                                                                          actions):
    # Gymnasium's deterministic variant stepped by hand and rollax's, from the same start, reach
    # the same states: each of rollax's pictures is Gymnasium's picture of that state (drawn
    # facing the default way: a state does not hold the last action)
    env = rollax.make(name, **options)
    draw = frame_renderer(env)
    theirs = gym.make(name, render_mode="rgb_array",
                      **{k: v for k, v in options.items() if k != "horizon"}).unwrapped
    theirs.reset(seed=3)
    state = env.reset(jax.random.key(0))._replace(state=np.int32(theirs.s))
    frames = []
    for i, action in enumerate(actions):
        theirs.lastaction = None
        frames.append(draw(jax.device_get(state)))
        np.testing.assert_array_equal(frames[-1], theirs.render())
        state, *_ = env.step(state, np.int32(action), jax.random.key(i))
        theirs.step(action)
        assert int(state.state) == theirs.s
    assert not np.array_equal(frames[0], frames[-1])  # the agent moved
    assert frames[0].dtype == np.uint8 and frames[0].shape[-1] == 3


@pytest.fixture(scope="module")
def cartpole_run(tmp_path_factory):
    from rollax.cli import main

    out = tmp_path_factory.mktemp("render-extra") / "run"
    assert main(["train", "--json", "--env", "CartPole-v1", "--total-steps", "4096",
                 "--out", str(out)]) == 0
    return out


@pytest.mark.parametrize("suffix", [".mp4", ".gif"])
def test_a_trained_cartpole_policy_as_a_playable_video(capsys, tmp_path, cartpole_run, suffix):
    out = tmp_path / f"cartpole{suffix}"
    code, text, err = run(capsys, "render", cartpole_run, "--out", out, "--max-steps", "120",
                          "--json")
    assert code == 0, err
    done = json.loads(text)
    length = done["lengths"][0]
    assert done["frames"] == length + 1 and done["returns"] == [float(length)]  # +1 a step
    frames = iio.imread(out) if suffix == ".mp4" else None
    if frames is None:
        with Image.open(out) as gif:
            frames = []
            for i in range(gif.n_frames):
                gif.seek(i)
                frames.append(np.asarray(gif.convert("RGB")))
            frames = np.stack(frames)
    assert len(frames) == length + 1
    assert frames.shape[1:] == (400 + 18, 600, 3)  # Gymnasium's 600x400, the caption under it
    assert np.abs(frames[0].astype(int) - frames[-1].astype(int)).mean() > 0.1


def test_an_mp4_on_a_full_disk_is_one_line_naming_it_and_leaves_the_old_file(capsys, tmp_path,
                                                                               monkeypatch):
    # ffmpeg writes the staged file (a link to /dev/full: its writes fail with ENOSPC) and
    # reports the failure only in its exit status and its words: one line with the path,
    # exit 1, and the file that was there is kept
    out = tmp_path / "x.mp4"
    out.write_text("an older video")
    disk_full_for_staged_files(monkeypatch)
    code, text, err = run(capsys, "render", "corridor", "--out", out, "--episodes", "3")
    assert (code, text, err) == (1, "", f"rollax render: error: {out}: No space left on device\n")
    assert list(tmp_path.iterdir()) == [out] and out.read_text() == "an older video"


def test_an_mp4_encoder_that_fails_is_named_with_its_reason(tmp_path, monkeypatch):
    # a failure ffmpeg words without an errno: its last line, the staged name replaced by
    # the path the user gave; nothing left
    from rollax.run import video

    monkeypatch.setattr(video, "ERRNOS", ())
    disk_full_for_staged_files(monkeypatch)
    frames = [np.full((4, 6, 3), i, np.uint8) for i in range(5)]
    with pytest.raises(OSError, match="the MP4 encoder \\(ffmpeg\\) failed: ") as caught:
        video.write_video(frames, tmp_path / "y.mp4", 10.0)
    assert caught.value.filename == str(tmp_path / "y.mp4")
    assert list(tmp_path.iterdir()) == []


def test_the_mp4_encoder_starts_without_forking_the_jax_process(tmp_path):
    # JAX warns "os.fork() was called ... JAX is multithreaded" when its backend is up and
    # the process forks (imageio's writer forks for its preexec_fn); the encoder is spawned
    from rollax.run.video import write_video

    jax.devices()  # JAX's backend up: a fork from here on warns
    frames = [np.full((5, 7, 3), 40 * i, np.uint8) for i in range(6)]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        write_video(frames, tmp_path / "v.mp4", 12.0)
    assert [str(w.message) for w in caught if "fork" in str(w.message)] == []
    video = iio.imread(tmp_path / "v.mp4")
    assert video.shape == (6, 6, 8, 3)  # the sides padded to even numbers
    means = video[:, :5, :7].reshape(6, -1).mean(axis=1)  # lossy H.264: each frame's grey
    np.testing.assert_allclose(means, [40 * i for i in range(6)], atol=8)
    assert list(tmp_path.iterdir()) == [tmp_path / "v.mp4"]


def test_record_video_on_to_gymnasium(tmp_path):
    env = gym.wrappers.RecordVideo(rollax.to_gymnasium("CartPole-v1", render_mode="rgb_array"),
                                   str(tmp_path / "videos"), episode_trigger=lambda e: e == 0,
                                   disable_logger=True)
    assert env.metadata["render_fps"] == 50  # Gymnasium's CartPole rate
    env.reset(seed=0)
    steps = 0
    while True:
        steps += 1
        _, _, terminated, truncated, _ = env.step(steps % 2)
        if terminated or truncated:
            break
    env.close()
    videos = list((tmp_path / "videos").glob("*.mp4"))
    assert len(videos) == 1
    assert len(iio.imread(videos[0])) == steps + 1


def test_video_every_on_a_neural_run(capsys, tmp_path):
    code, _, err = run(capsys, "train", "--json", "--env", "CartPole-v1", "--total-steps",
                         "1024", "--num-envs", "4", "--num-steps", "128", "--video-every", "1",
                         "--out", tmp_path / "run")
    assert code == 0, err
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["videos"] == [f"videos/update-{u:07d}.gif" for u in (1, 2)]
    for video in summary["videos"]:
        with Image.open(tmp_path / "run" / video) as gif:
            assert gif.size == (600, 400 + 18) and gif.n_frames >= 2


def test_a_gymnasium_host_environment_is_drawn_by_gymnasium_itself(capsys, tmp_path):
    # gymnasium:CartPole-v1 is stepped on the host: each episode plays in Gymnasium's own
    # environment made with render_mode="rgb_array", reset with the seed a pool reset with the
    # episode's reset key gets; the same environment stepped by hand gives the same frames
    env = rollax.make("gymnasium:CartPole-v1")
    recorded = play_host_episodes(env, RandomPolicy.for_space(env.action_space), None,
                                  jax.random.key(1), 2, 60, sample=True)
    for e, episode_key in enumerate(jax.random.split(jax.random.key(1), 2)):
        length = int(recorded.lengths[e])
        cartpole = gym.make("CartPole-v1", render_mode="rgb_array")
        cartpole.reset(seed=seed_of(split_key(episode_key, False).reset))
        frames = [cartpole.render()]
        for action in recorded.actions[e, :length]:
            _, _, terminated, truncated, _ = cartpole.step(int(action))
            frames.append(cartpole.render())
        assert terminated or truncated or length == 60
        np.testing.assert_array_equal(recorded.states[e, :length + 1], np.stack(frames))
        assert recorded.rewards[e].sum() == length  # +1 a step
    code, out, err = run(capsys, "render", "gymnasium:CartPole-v1", "--out",
                         tmp_path / "c.mp4", "--json")
    assert code == 0, err
    done = json.loads(out)
    assert len(iio.imread(tmp_path / "c.mp4")) == done["frames"] == done["lengths"][0] + 1


@pytest.mark.integration
@pytest.mark.parametrize(("target", "suffix"), [("CartPole-v1", ".gif"),
                                                ("gymnasium:CartPole-v1", ".gif"),
                                                ("CartPole-v1", ".mp4")])
def test_drawing_on_a_machine_without_display_or_sound_prints_nothing_else(tmp_path, target,
                                                                           suffix):
    # pygame's first init on a headless machine prints ALSA's and SDL's complaints unless SDL's
    # dummy drivers are chosen (rollax does, when nothing is set); an MP4's encoder is started
    # without forking JAX's process (whose warning it printed)
    env = {k: v for k, v in os.environ.items()
           if k not in ("DISPLAY", "WAYLAND_DISPLAY", "SDL_AUDIODRIVER", "SDL_VIDEODRIVER")}
    done = subprocess.run([sys.executable, "-m", "rollax.cli", "render", target, "--out",
                           str(tmp_path / f"c{suffix}"), "--max-steps", "3"], env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert done.stdout.endswith("frames)\n")
