"""Videos of a policy: episodes played by one compiled program (:func:`record_episodes`), each
state drawn and captioned with the step, the return so far and the last action
(:func:`captioned_frames`), written as a GIF or an MP4 (:func:`write_video`); what
``rollax render`` (:mod:`rollax.run.watch`) and ``rollax train --video-every N``
(:func:`training_video`) write.

The episodes are played by one compiled program (:func:`record_episodes`: the states of
``episodes`` absorbing episodes of at most ``max_steps`` steps, vmapped), and drawn afterwards
on the host (:func:`rollax.envs.frames.frame_renderer`), so drawing never runs inside training
or acting. GIFs are written with Pillow (matplotlib's own dependency); MP4s need
``pip install 'rollax[render]'`` (imageio-ffmpeg's ffmpeg). Either is written whole beside its
path and renamed into place when complete (:func:`write_video`).
"""

from __future__ import annotations

import dataclasses
import errno
import functools
import importlib
import importlib.util
import os
import re
from pathlib import Path
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from rollax.collect import split_key
from rollax.contracts.probe import usable_mask
from rollax.envs.base import step_with_key
from rollax.envs.frames import frame_renderer
from rollax.envs.host import HostEnvironment, is_host
from rollax.evaluation import game_start, game_turn, other_player
from rollax.policies import GreedyPolicy
from rollax.recurrent import is_recurrent
from rollax.run.files import staged_file

__all__ = ["FORMATS", "Recorded", "RecordedGames", "Rendered", "captions", "check_out",
           "drawable", "play_host_episodes", "played", "record_episodes", "record_games",
           "training_video", "write_video"]

FORMATS = (".gif", ".mp4")
"""The video files :func:`write_video` writes, by suffix."""

CAPTION = 18
"""Height in pixels of the caption bar under each frame."""


class Recorded(NamedTuple):
    """``E`` episodes played for ``T`` steps (NumPy arrays)."""

    states: Any
    """The start state then the state after each step: every leaf ``(E, T + 1, ...)``."""
    actions: np.ndarray
    """``(E, T, *A)``: the action of each step."""
    rewards: np.ndarray
    """``(E, T)``: the reward of each step (0 once the episode has ended)."""
    lengths: np.ndarray
    """``(E,)`` int: the live steps of each episode (``T`` for one still running)."""


@dataclasses.dataclass(frozen=True)
class Rendered:
    """What :func:`render_episodes` wrote."""

    path: Path
    returns: tuple[float, ...]
    """Each episode's return (the sum of its rewards; the last caption shows it)."""
    lengths: tuple[int, ...]
    """Each episode's live steps."""
    frames: int
    """Frames in the video (each episode's ``length + 1``)."""


def _act(policy, params, carry, observation, key, mask, sample: bool):
    """``(carry', action)`` of a feed-forward (``carry`` None) or recurrent policy."""
    given = () if mask is None else (mask,)
    if carry is None:
        if sample:
            return None, policy.sample(params, observation, key, *given)[0]
        return None, policy.greedy(params, observation, *given)
    if sample:
        carry, action, _ = policy.sample(params, carry, observation, key, *given)
        return carry, action
    return policy.greedy(params, carry, observation, *given)


@functools.partial(jax.jit, static_argnames=("env", "policy", "episodes", "num_steps",
                                             "sample"))
def _record(env, policy, params, key, episodes: int, num_steps: int, sample: bool):
    def one(key):
        streams = split_key(key, env.stochastic)
        state = env.reset(streams.reset)
        carry = policy.initial_carry(params) if is_recurrent(policy) else None
        transition = (jax.random.split(streams.transition, num_steps)
                      if streams.transition is not None else None)

        def step(state_carry, keys):
            state, carry = state_carry
            action_key, transition_key = keys
            mask = usable_mask(env, state)
            carry, action = _act(policy, params, carry, env.observation(state), action_key,
                                 mask, sample)
            active = ~env.done(state)
            state, reward, _, _ = step_with_key(env, state, action, transition_key)
            return (state, carry), (state, action, jnp.where(active, reward, 0.0), active)

        _, (states, actions, rewards, active) = jax.lax.scan(
            step, (state, carry), (jax.random.split(streams.action, num_steps), transition))
        states = jax.tree.map(lambda first, rest: jnp.concatenate([first[None], rest]),
                              state, states)
        return states, actions, rewards, active.sum()

    return jax.vmap(one)(jax.random.split(key, episodes))


def record_episodes(env, policy, params, key: jax.Array, episodes: int, num_steps: int,
                    sample: bool = False) -> Recorded:
    """``episodes`` episodes of ``policy`` (its mode, or samples with ``sample``) on ``env``
    for ``num_steps`` steps, absorbing (an ended episode keeps its last state, rewards 0),
    each from its own key of ``jax.random.split(key, episodes)`` (split as :func:`rollax.collect`
    splits one environment's key: reset, actions, transitions). Compiled once per (env,
    policy, episodes, num_steps, sample)."""
    states, actions, rewards, lengths = jax.device_get(
        _record(env, policy, params, key, episodes, num_steps, sample))
    return Recorded(states, np.asarray(actions), np.asarray(rewards), np.asarray(lengths))


class RecordedGames(NamedTuple):
    """``G`` games of a two-player game between two parameter sets of one policy, played for
    ``T`` steps (NumPy arrays; :func:`record_games`)."""

    recorded: Recorded
    """The states, actions and lengths; ``rewards`` are side 0's (the first parameters')."""
    movers: np.ndarray
    """``(G, T)`` int: the side that made each move (0: the first parameters, 1: the
    other's); meaningful for the live steps only."""
    payoffs: np.ndarray
    """``(G, 2)``: each side's payoff, the sum of its player's rewards over the live steps."""
    ended: np.ndarray
    """``(G,)`` bool: the game ended within the ``T`` steps."""


@functools.partial(jax.jit, static_argnames=("env", "policy", "num_steps", "sample"))
def _record_games(env, policy, params, other_params, key, first, num_steps: int, sample: bool):
    actor = policy if sample else GreedyPolicy(policy)
    streams, state, me = game_start(env, key, first)
    opponent = other_player(env, actor, other_params)
    games = jnp.arange(first.shape[0])

    def step(state, t):
        mover = (jax.vmap(env.to_act)(state) != me).astype(jnp.int32)
        active = ~jax.vmap(env.done)(state)
        state, action, rewards = game_turn(env, actor, params, opponent, streams, me, t, state)
        sides = jnp.stack([rewards[games, me], rewards[games, 1 - me]], axis=-1)
        return state, (state, action, sides, mover, active)

    last, (states, actions, sides, movers, active) = jax.lax.scan(
        step, state, jnp.arange(num_steps))
    states = jax.tree.map(lambda first, rest: jnp.concatenate([first[None], rest]),
                          state, states)
    lead = lambda x: jnp.swapaxes(x, 0, 1)  # noqa: E731  (steps first -> games first)
    return (jax.tree.map(lead, states), lead(actions), lead(sides), lead(movers),
            active.sum(axis=0), jax.vmap(env.done)(last))


def record_games(env, policy, params, other_params, key: jax.Array, first: jax.Array,
                 num_steps: int, sample: bool = False) -> RecordedGames:
    """One game per entry of ``first (G,)`` of a two-player game: ``policy`` with ``params``
    (side 0) against ``policy`` with ``other_params`` (side 1), side 0 moving first where
    ``first``; both play their mode among the legal actions, or sample with ``sample``. The
    games, their keys and their payoffs are :func:`rollax.evaluation.game_payoffs`'s with
    ``other_params`` (its ``game_start`` and ``game_turn``), but played for ``num_steps``
    steps under ``lax.scan`` (an ended game keeps its last state) so that every state is
    kept for drawing. Compiled once per (env, policy, G, num_steps, sample)."""
    states, actions, sides, movers, lengths, ended = jax.device_get(
        _record_games(env, policy, params, other_params, key, jnp.asarray(first),
                      num_steps, sample))
    sides = np.asarray(sides)
    recorded = Recorded(states, np.asarray(actions), sides[..., 0], np.asarray(lengths))
    return RecordedGames(recorded, np.asarray(movers), sides.sum(axis=1), np.asarray(ended))


@functools.partial(jax.jit, static_argnames=("policy", "sample"))
def _act_one(policy, params, carry, observation, key, sample: bool):
    return _act(policy, params, carry, observation, key, None, sample)


def play_host_episodes(env: HostEnvironment, policy, params, key: jax.Array, episodes: int,
                       num_steps: int, sample: bool = False) -> Recorded:
    """:func:`record_episodes` for a host environment (:mod:`rollax.envs.host`), whose
    states live in Gymnasium's or EnvPool's environments, not in arrays: ``episodes``
    episodes, one after the other, each in an environment of ``env.open_drawn`` seeded as a
    host pool seeds its environment (``bits`` of the episode's reset key, the keys split as
    :func:`record_episodes` splits them), stepped from the host with the compiled policy (one
    compiled call a step) for at most ``num_steps`` steps, each state drawn by the
    environment's own ``render()`` as it is reached. The returned ``states`` are those frames,
    ``(E, T + 1, H, W, 3)`` (``T`` the longest episode; a shorter one keeps its last
    frame), so draw them with ``lambda frame: frame``."""
    env = env.scoring or env  # EnvPool's Atari trained per life: the whole game
    assert env.open_drawn is not None  # checked by the callers (they name what is drawn)
    carry0 = policy.initial_carry(params) if is_recurrent(policy) else None
    recorded = []
    for episode_key in jax.random.split(key, episodes):
        streams = split_key(episode_key, env.stochastic)
        seed = int(jax.random.bits(streams.reset, dtype=jnp.uint32))
        action_keys = jax.random.split(streams.action, num_steps)
        drawn, observation = env.open_drawn(seed)
        try:
            frames, actions, rewards, carry = [np.asarray(drawn.render())], [], [], carry0
            for t in range(num_steps):
                carry, action = _act_one(policy, params, carry,
                                         env.one_observation(observation), action_keys[t],
                                         sample)
                action = np.asarray(action)
                observation, reward, terminated, truncated, _ = drawn.step(
                    env.host_action(action[None])[0])
                frames.append(np.asarray(drawn.render()))
                actions.append(action)
                rewards.append(float(reward))
                if terminated or truncated:
                    break
        finally:
            drawn.close()
        recorded.append((frames, actions, rewards))
    longest = max(len(rewards) for _, _, rewards in recorded)

    def padded(items, size):
        return np.stack(items + [items[-1]] * (size - len(items)))

    return Recorded(np.stack([padded(f, longest + 1) for f, _, _ in recorded]),
                    np.stack([padded(a, longest) for _, a, _ in recorded]),
                    np.array([r + [0.0] * (longest - len(r)) for _, _, r in recorded], np.float32),
                    np.array([len(r) for _, _, r in recorded]))


def played(env, policy, params, key: jax.Array, episodes: int, num_steps: int,
           sample: bool = False) -> tuple[Recorded, Any]:
    """``episodes`` episodes recorded (:func:`record_episodes`, or :func:`play_host_episodes`
    for a host environment) and the function drawing their states; for an environment checked
    drawable (:func:`drawable`)."""
    if is_host(env):
        return (play_host_episodes(env, policy, params, key, episodes, num_steps, sample),
                _as_drawn)
    draw = frame_renderer(env)
    assert draw is not None  # checked by the callers (they name what is drawn)
    return record_episodes(env, policy, params, key, episodes, num_steps, sample), draw


def _as_drawn(frame: np.ndarray) -> np.ndarray:
    return frame


def drawable(env, name: str) -> bool:
    """Whether rollax can draw ``env``'s states (:func:`rollax.envs.frames.frame_renderer`,
    or a host environment's own rendering); ``ValueError`` with the install command when the
    drawing needs a package that is missing. ``name`` names ``env`` in that message."""
    if is_host(env):
        env = env.scoring or env
        if env.open_drawn is None:
            return False
        _first_frame(env, name)
        return True
    return frame_renderer(env, name) is not None


def _first_frame(env: HostEnvironment, name: str) -> None:
    """Draw a host environment's first frame once, so that a package its renderer imports
    (pygame for Gymnasium's classic control, ...) is named before anything is compiled or
    written."""
    import gymnasium

    assert env.open_drawn is not None
    try:
        drawn, _ = env.open_drawn(0)
        try:
            drawn.render()
        finally:
            drawn.close()
    except (ImportError, gymnasium.error.DependencyNotInstalled) as err:
        raise ValueError(f"drawing {name} needs a package its renderer imports: "
                         f"`pip install 'rollax[render]'` ({str(err).splitlines()[0]})") from None


def _caption(frame: np.ndarray, text: str, width: int | None = None) -> np.ndarray:
    """``frame`` with a white bar of :data:`CAPTION` pixels under it holding ``text``; with
    ``width``, on a white canvas that wide (the frame at its left)."""
    from PIL import Image, ImageDraw

    height, wide = frame.shape[0], max(frame.shape[1], width or 0)
    canvas = Image.new("RGB", (wide, height + CAPTION), "white")
    canvas.paste(Image.fromarray(frame), (0, 0))
    ImageDraw.Draw(canvas).text((4, height + 3), text, fill="black")
    return np.asarray(canvas)


def _action_text(action: np.ndarray) -> str:
    flat = np.ravel(action)
    if np.issubdtype(flat.dtype, np.floating):
        return "[" + ", ".join(f"{v:+.2f}" for v in flat) + "]" if flat.size > 1 \
            else f"{float(flat[0]):+.2f}"
    return str(int(flat[0])) if flat.size == 1 else "[" + " ".join(map(str, flat)) + "]"


def captions(recorded: Recorded) -> list[str]:
    """The caption of each frame, in order: each episode's ``length + 1`` states as ``[episode
    e/E  ]step t  return R_t  action a`` (``R_t`` the sum of its first ``t`` rewards, ``a`` the
    action that led to the state, ``-`` for the first)."""
    lines = []
    episodes = len(recorded.lengths)
    for e in range(episodes):
        length = int(recorded.lengths[e])
        total = np.concatenate([[0.0], np.cumsum(recorded.rewards[e, :length])])
        label = f"episode {e + 1}/{episodes}  " if episodes > 1 else ""
        for t in range(length + 1):
            action = "-" if t == 0 else _action_text(recorded.actions[e, t - 1])
            lines.append(f"{label}step {t}  return {total[t]:.6g}  action {action}")
    return lines


def captioned_frames(recorded: Recorded, draw, texts: list[str] | None = None
                     ) -> list[np.ndarray]:
    """Each episode's ``length + 1`` states drawn by ``draw``, with :func:`captions` under
    them, in order; or with ``texts`` (one a frame), every frame widened to the longest of
    them."""
    from PIL import Image, ImageDraw

    states = [jax.tree.map(lambda x, e=e, t=t: x[e, t], recorded.states)
              for e, length in enumerate(recorded.lengths) for t in range(int(length) + 1)]
    width = None
    if texts is not None:
        measure = ImageDraw.Draw(Image.new("RGB", (1, 1)))
        width = 8 + max(round(measure.textlength(text)) for text in texts)
    return [_caption(draw(state), text, width)
            for state, text in zip(states, captions(recorded) if texts is None else texts)]


def write_video(frames: list[np.ndarray], path: Path, fps: float) -> None:
    """``frames`` (RGB ``uint8``, all of one size) as the GIF or MP4 ``path`` (by suffix),
    ``fps`` frames per second; an MP4's sides are padded to even numbers (H.264's need).

    The video is written whole to a hidden temporary file beside ``path`` and renamed to it
    only once complete and synced (:func:`rollax.run.files.staged_file`): on a failure (a
    full disk, the encoder stopping) ``OSError`` names ``path`` and the reason, nothing is
    left behind and an existing ``path`` is as it was."""
    with staged_file(path) as tmp:
        if path.suffix.lower() == ".gif":
            from PIL import Image

            images = [Image.fromarray(f) for f in frames]
            images[0].save(tmp, format="GIF", save_all=True, append_images=images[1:], loop=0,
                           duration=max(1, round(1000 / fps)))
        else:
            _encode_mp4(frames, tmp, fps, path)


ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.EACCES, errno.EIO)
"""The errors an encoder writing a file reports in its own words that :func:`_encode_mp4`
turns back into their ``errno`` (by the operating system's message, ``os.strerror``)."""


def _encode_mp4(frames: list[np.ndarray], tmp: Path, fps: float, path: Path) -> None:
    """``frames`` as an H.264 MP4 ``tmp`` (``path`` once renamed), encoded by imageio-ffmpeg's
    ffmpeg fed raw RGB frames on its stdin.

    The encoder is started without forking this multithreaded (JAX) process (no ``preexec_fn``:
    CPython spawns it with ``vfork``/``posix_spawn``, which run no Python in the child, so JAX's
    ``os.fork()`` warning is not raised), in its own process group (Ctrl-C interrupts rollax,
    which stops the encoder, not the encoder first). Its exit status is checked: a failure it
    reports only when finishing the file (a full disk) is an ``OSError`` naming ``path`` and
    ffmpeg's reason (its ``errno`` where the reason is one of :data:`ERRNOS`)."""
    import subprocess
    import threading
    from fractions import Fraction

    ffmpeg = importlib.import_module("imageio_ffmpeg").get_ffmpeg_exe()  # the render extra
    height, width = frames[0].shape[:2]
    pad = ((0, height % 2), (0, width % 2), (0, 0))
    rate = Fraction(fps).limit_denominator(1001)
    command = [ffmpeg, "-hide_banner", "-loglevel", "error", "-y",
               "-f", "rawvideo", "-pix_fmt", "rgb24", "-s", f"{width + width % 2}x"
               f"{height + height % 2}", "-r", str(rate), "-i", "pipe:0",
               "-an", "-c:v", "libx264", "-pix_fmt", "yuv420p", "-crf", "25", "-f", "mp4",
               str(tmp)]
    process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, bufsize=0, close_fds=False,
                               process_group=0)
    said: list[bytes] = []  # read as it comes, so that a talkative ffmpeg never blocks
    stdin, stderr = process.stdin, process.stderr
    assert stdin is not None and stderr is not None
    reader = threading.Thread(target=lambda: said.append(stderr.read()), daemon=True)
    reader.start()
    try:
        try:
            for frame in frames:
                stdin.write(np.pad(frame, pad, constant_values=255).tobytes())
        except BrokenPipeError:
            pass  # ffmpeg stopped early: its exit status and words say why
        finally:
            try:
                stdin.close()
            except BrokenPipeError:
                pass
        code = process.wait()
    except BaseException:  # Ctrl-C: the encoder does not outlive the write
        process.kill()
        process.wait()
        raise
    reader.join()
    stderr.close()
    if code != 0:
        lines = b"".join(said).decode(errors="replace").replace(str(tmp), str(path))
        reason = next((re.sub(r"^\[[^]]*\] ", "", line.strip())  # its "[muxer @ 0x..] "
                       for line in reversed(lines.splitlines()) if line.strip()),
                      f"exit status {code}")
        known = next((e for e in ERRNOS if os.strerror(e) in lines), None)
        if known is not None:
            raise OSError(known, os.strerror(known), str(path))
        raise OSError(errno.EIO, f"the MP4 encoder (ffmpeg) failed: {reason}", str(path))


def _has(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def check_out(out: str | Path) -> Path:
    """The video path ``out``, refused (``ValueError``, one line) before anything is compiled
    or written: an unknown suffix, an MP4 without its extra, a missing parent folder."""
    path = Path(out)
    if path.suffix.lower() not in FORMATS:
        raise ValueError(f"out must end in {' or '.join(FORMATS)}, got {str(out)!r}")
    if path.suffix.lower() == ".mp4" and not _has("imageio_ffmpeg"):
        raise ValueError("writing an MP4 needs imageio and ffmpeg: "
                         "`pip install 'rollax[render]'` (or write a .gif)")
    if not path.parent.is_dir():
        raise ValueError(f"out: the folder {str(path.parent)!r} does not exist")
    return path


def training_video(env, policy, params, key: jax.Array, path: Path,
                   max_steps: int = 1000, fps: float = 30.0) -> Rendered:
    """One greedy episode of ``policy`` with ``params`` (one lane's) on ``env`` from ``key``,
    written as the GIF ``path`` (its folder created): what ``rollax train --video-every N``
    writes into the run folder. Compiled once per (env, policy); reads the parameters only."""
    recorded, draw = played(env, policy, params, key, 1, int(min(max_steps, env.horizon)))
    frames = captioned_frames(recorded, draw)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_video(frames, path, fps)
    return Rendered(path, (float(np.sum(recorded.rewards[0])),), (int(recorded.lengths[0]),),
                    len(frames))
