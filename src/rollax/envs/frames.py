"""Pictures of environment states, drawn on the host: :func:`frame_renderer` gives, for an
environment that can be drawn, a function from one state (NumPy leaves, no batch axis) to an
RGB frame ``(H, W, 3)`` of ``uint8``.

- Gymnasium's classic control (``CartPole-v1``, ``Acrobot-v1``, ``MountainCar-v0``,
  ``Pendulum-v1``): Gymnasium's own renderer, its environment set to the rollax state, so the
  pictures are Gymnasium's (needs pygame: ``pip install 'rollax[render]'``);
- Gymnasium's toy text (``FrozenLake-v1``, ``FrozenLake8x8-v1``, ``Taxi-v4``,
  ``CliffWalking-v1``): Gymnasium's own renderer, its environment built with the task's
  options (a FrozenLake map) and set to the state's index, facing its default way (a state
  does not hold the last action); needs pygame too;
- the corridor: its four cells, the agent a disc, the goal marked;
- Jumanji's environments (``jumanji:<id>``): the environment's own viewer (matplotlib), drawn
  into an array instead of a window, 400x400 pixels;
- Brax's environments (``brax:<name>``): MuJoCo's renderer (offscreen, EGL on a machine
  without a display) on the state's positions and velocities, as Brax's own
  ``brax.io.image.render_array`` draws them, 240x320 pixels;
- MuJoCo Playground's (``playground:<name>``): the same renderer on the state's MJX data, as
  Playground's own ``render_array`` draws them;
- Craftax's environments (``craftax:<id>``): Craftax's own pixel renderer (its textures, the
  player's view and inventory), 16 pixels a block, compiled once and run on the host;
- XLand-MiniGrid's environments (``xminigrid:<id>``): xminigrid's own RGB renderer (the whole
  grid, the agent's view highlighted), 32 pixels a tile;
- Pgx's games other than MinAtar (``pgx:2048``): Pgx's own SVG (``state.to_svg()``),
  rasterised by CairoSVG (needs ``pip install 'rollax[render]'`` and the system's Cairo);
- binary image planes (MinAtar's 10x10xC through gymnax or Pgx, any environment whose
  ``raw_observation_shape`` is ``(H, W, C)`` with sides of at most 32 and bounds ``[0, 1]``):
  each cell coloured by its highest lit plane, one colour per plane, on black.

Nothing here runs inside a compiled program: states are collected by one (see
:mod:`rollax.run.video`) and drawn afterwards. Host environments (``gymnasium:<id>``,
``envpool:<id>``, a factory's ``gymnasium.Env``) hold their states outside JAX: they are
drawn by their own ``render()`` as the episodes are played
(:func:`rollax.run.video.play_host_episodes`), not here.
"""

from __future__ import annotations

import colorsys
import copy
import functools
import importlib.util
import os
from collections.abc import Callable
from typing import Any

import numpy as np

from rollax.envs.base import Box

__all__ = ["DRAWN", "Renderer", "frame_renderer", "quiet_pygame"]

Renderer = Callable[[Any], np.ndarray]
"""One state (NumPy leaves) -> an RGB frame ``(H, W, 3)``, ``uint8``."""

DRAWN = ("CartPole-v1", "Acrobot-v1", "MountainCar-v0", "Pendulum-v1", "corridor",
         "Gymnasium's toy text (FrozenLake-v1, FrozenLake8x8-v1, Taxi-v4, CliffWalking-v1)",
         "MinAtar's games (gymnax:<game>-MinAtar, pgx:minatar-<game>)", "pgx:2048",
         "Jumanji's environments (jumanji:<id>)", "Brax's environments (brax:<name>)",
         "Playground's (playground:<name>)", "Craftax's environments (craftax:<id>)",
         "XLand-MiniGrid's (xminigrid:<id>)",
         "Gymnasium's environments with rgb_array rendering (gymnasium:<id>)",
         "EnvPool's (envpool:<id>)")
"""What :func:`frame_renderer` draws, as the refusal of anything else names it."""

PLANE_CELL = 16
"""Pixels per cell side of a picture of planes."""

PYGAME_MISSING = ("drawing {name} needs pygame (Gymnasium's renderer): "
                  "`pip install 'rollax[render]'`")


def quiet_pygame() -> None:
    """SDL's dummy audio and video drivers for pygame (Gymnasium's renderer) on a machine
    without a display (no ``DISPLAY`` nor ``WAYLAND_DISPLAY``), unless ``SDL_AUDIODRIVER`` /
    ``SDL_VIDEODRIVER`` are set: frames are drawn offscreen, and otherwise ``pygame.init()``
    prints ALSA's and SDL's complaints about the missing sound card and display."""
    if not os.environ.get("DISPLAY") and not os.environ.get("WAYLAND_DISPLAY"):
        os.environ.setdefault("SDL_AUDIODRIVER", "dummy")
        os.environ.setdefault("SDL_VIDEODRIVER", "dummy")


def frame_renderer(env: Any, name: str | None = None) -> Renderer | None:
    """The function drawing ``env``'s states (module docstring), or ``None`` when rollax has
    no way to draw them. ``ValueError`` with the install command when the drawing needs
    pygame and it is missing. ``name`` names ``env`` in that message."""
    from rollax.envs.acrobot import Acrobot
    from rollax.envs.cartpole import CartPole
    from rollax.envs.corridor import Corridor
    from rollax.envs.mountain_car import MountainCar
    from rollax.envs.pendulum import Pendulum
    from rollax.envs.suites.craftax import CraftaxEnv
    from rollax.envs.suites.pgx import PgxEnv
    from rollax.envs.suites.xminigrid import XMiniGridEnv
    from rollax.envs.tabular import TOY_TEXT, TabularEnv

    gymnasium = {CartPole: ("CartPoleEnv", _cartpole_state),
                 Acrobot: ("AcrobotEnv", _acrobot_state),
                 MountainCar: ("MountainCarEnv", _mountain_car_state),
                 Pendulum: ("PendulumEnv", _pendulum_state)}
    for kind, (cls, state_of) in gymnasium.items():
        if isinstance(env, kind):
            if importlib.util.find_spec("pygame") is None:
                raise ValueError(PYGAME_MISSING.format(name=name or type(env).__name__))
            quiet_pygame()
            return _GymnasiumDrawing(cls, state_of)
    if isinstance(env, TabularEnv):  # a toy-text task, or another finite MDP: no picture
        if env.name not in TOY_TEXT:
            return None
        if importlib.util.find_spec("pygame") is None:
            raise ValueError(PYGAME_MISSING.format(name=name or env.name))
        quiet_pygame()
        return _ToyTextDrawing(env.name, dict(env.options))
    if isinstance(env, Corridor):
        return _draw_corridor
    if getattr(env, "prefix", None) == "brax" and hasattr(env.suite_env, "sys"):
        return _MujocoDrawing(env.suite_env.sys.mj_model, _brax_physics)
    if getattr(env, "prefix", None) == "playground" and hasattr(env.suite_env, "mj_model"):
        return _MujocoDrawing(env.suite_env.mj_model, _playground_physics)
    if isinstance(env, CraftaxEnv):
        return _CraftaxDrawing(env.name)
    if isinstance(env, XMiniGridEnv):
        return _XMiniGridDrawing(int(env.xminigrid_params.view_size))
    if isinstance(env, PgxEnv) and not env.name.startswith("minatar"):
        _import_cairosvg(name or f"pgx:{env.name}")
        return _draw_pgx
    viewer = getattr(getattr(env, "jumanji_env", None), "_viewer", None)
    if hasattr(viewer, "_display_rgb_array"):
        return _JumanjiDrawing(viewer, JUMANJI_VIEWED.get(str(getattr(env, "name", ""))))
    planes = _plane_shape(env)
    if planes is not None:
        colours = plane_colours(planes[2])
        return lambda state: draw_planes(np.asarray(env.observation(state)).reshape(planes),
                                         colours)
    return None


# --- Gymnasium's classic control ---------------------------------------------------------------

class _GymnasiumDrawing:
    """Gymnasium's environment ``cls`` (of ``gymnasium.envs.classic_control``) drawing the
    states it is given (``state_of`` maps a rollax state to Gymnasium's ``env.state``)."""

    def __init__(self, cls: str, state_of: Callable[[Any], Any]):
        from gymnasium.envs import classic_control

        self.env = getattr(classic_control, cls)(render_mode="rgb_array")
        self.state_of = state_of
        self.fps = self.env.metadata["render_fps"]
        """Gymnasium's frames per second for this environment."""

    def __call__(self, state) -> np.ndarray:
        self.env.state = self.state_of(state)
        self.env.last_u = None  # Pendulum draws its last torque as an arrow: none (others ignore)
        return np.asarray(self.env.render(), np.uint8)


class _ToyTextDrawing:
    """Gymnasium's toy-text environment ``env_id`` (built with ``options``) drawing the states
    it is given: ``env.s`` is the state's index, no last action (the default facing)."""

    def __init__(self, env_id: str, options: dict[str, Any]):
        import gymnasium

        self.env = gymnasium.make(env_id, render_mode="rgb_array", **options).unwrapped
        self.fps = self.env.metadata["render_fps"]

    def __call__(self, state) -> np.ndarray:
        self.env.s = int(state.state)  # pyright: ignore[reportAttributeAccessIssue]
        self.env.lastaction = None  # pyright: ignore[reportAttributeAccessIssue]
        return np.asarray(self.env.render(), np.uint8)


def _cartpole_state(s) -> np.ndarray:
    return np.array([s.x, s.x_dot, s.theta, s.theta_dot], np.float64)


def _acrobot_state(s) -> np.ndarray:
    return np.array([s.theta1, s.theta2, s.dtheta1, s.dtheta2], np.float64)


def _mountain_car_state(s) -> np.ndarray:
    return np.array([s.position, s.velocity], np.float64)


def _pendulum_state(s) -> np.ndarray:
    return np.array([s.theta, s.theta_dot], np.float64)


# --- Jumanji ------------------------------------------------------------------------------------

JUMANJI_VIEWED = {"Connector-v3": "grid"}
"""The Jumanji ids whose viewer draws a field of the state, not the state (as the
environment's own ``render`` passes it)."""


class _JumanjiDrawing:
    """A copy of a Jumanji environment's matplotlib viewer that returns its pictures as arrays
    (Jumanji's own ``rgb_array`` display, chosen on the copy: the environment's viewer is left
    as it was), on a figure of 4x4 inches (400x400 pixels), given Jumanji's state or its field
    ``field``. Reads Jumanji's private ``_viewer``, ``_display`` and ``figure_size`` (jumanji
    1.1)."""

    def __init__(self, viewer, field: str | None = None):
        self.viewer = copy.copy(viewer)
        self.viewer._display = self.viewer._display_rgb_array
        self.viewer.figure_size = (4.0, 4.0)
        self.field = field

    def __call__(self, state) -> np.ndarray:
        inner = state.inner if self.field is None else getattr(state.inner, self.field)
        return np.asarray(self.viewer.render(inner))[..., :3].copy()


# --- Brax ---------------------------------------------------------------------------------------

class _MujocoDrawing:
    """MuJoCo's offscreen renderer for a model, made at the first picture and reused: a
    state's physics set into MuJoCo's data (``fill(data, state)``), forward kinematics, the
    default free camera, 240x320 pixels (the way ``brax.io.image.render_array`` and
    Playground's ``render_array`` draw)."""

    def __init__(self, model, fill: Callable[[Any, Any], None]):
        self.model, self.fill = model, fill
        self.renderer = None

    def __call__(self, state) -> np.ndarray:
        import mujoco  # pyright: ignore[reportMissingImports]  (the brax / playground extra)

        if self.renderer is None:
            try:
                self.renderer = mujoco.Renderer(self.model, height=240, width=320)
            except Exception as err:  # no OpenGL context: MuJoCo imported before MUJOCO_GL
                raise ValueError(f"drawing needs MuJoCo's offscreen OpenGL: set "
                                 f"MUJOCO_GL=egl before importing mujoco ({err})") from None
        data = mujoco.MjData(self.model)
        self.fill(data, state)
        mujoco.mj_forward(self.model, data)
        self.renderer.update_scene(data, camera=-1)
        return np.asarray(self.renderer.render(), np.uint8)


def _brax_physics(data, state) -> None:
    """A Brax state's positions ``q`` and velocities ``qd``."""
    physics = state.inner.pipeline_state
    data.qpos, data.qvel = np.asarray(physics.q), np.asarray(physics.qd)


def _playground_physics(data, state) -> None:
    """A Playground state's MJX data: positions, velocities, mocap bodies and applied forces
    (what Playground's own ``render_array`` copies)."""
    mjx = state.inner.data
    data.qpos, data.qvel = np.asarray(mjx.qpos), np.asarray(mjx.qvel)
    data.mocap_pos, data.mocap_quat = np.asarray(mjx.mocap_pos), np.asarray(mjx.mocap_quat)
    data.xfrc_applied = np.asarray(mjx.xfrc_applied)


# --- Craftax and XLand-MiniGrid ----------------------------------------------------------------

class _CraftaxDrawing:
    """Craftax's ``make_craftax_pixel_renderer`` (``craftax.craftax_classic.renderer`` for the
    Classic ids, ``craftax.craftax.renderer`` for the others) at 16 pixels a block, compiled
    once. The adapter stores the state's ``state_rng`` as raw key data; it is wrapped back (the
    renderer draws the night's static from it). Craftax prints its texture loading on standard
    output: sent to standard error, so a command's ``--json`` output stays one object."""

    BLOCK = 16

    def __init__(self, name: str):
        self.draw = _craftax_draw("craftax.craftax_classic.renderer" if "Classic" in name
                                  else "craftax.craftax.renderer", self.BLOCK)

    def __call__(self, state) -> np.ndarray:
        pixels = np.asarray(self.draw(state.inner))
        return np.clip(np.rint(pixels), 0, 255).astype(np.uint8)


@functools.cache
def _craftax_draw(module_name: str, block: int) -> Callable:
    """The compiled renderer of :class:`_CraftaxDrawing`, built once per process (its compile
    takes seconds)."""
    import contextlib
    import importlib
    import sys

    import jax

    with contextlib.redirect_stdout(sys.stderr):
        render = importlib.import_module(module_name).make_craftax_pixel_renderer(block)

    def draw(inner):
        inner = inner.replace(state_rng=jax.random.wrap_key_data(inner.state_rng))
        return render(inner)

    return jax.jit(draw)


class _XMiniGridDrawing:
    """xminigrid's ``rendering.rgb_render.render``: the whole grid, the agent drawn as its
    triangle and its ``view_size`` field of view highlighted, 32 pixels a tile."""

    def __init__(self, view_size: int):
        from xminigrid.rendering.rgb_render import render  # pyright: ignore[reportMissingImports]

        self.render, self.view_size = render, view_size

    def __call__(self, state) -> np.ndarray:
        inner = state.timestep.state
        return np.asarray(self.render(np.asarray(inner.grid), inner.agent, self.view_size),
                          np.uint8)


# --- the corridor ------------------------------------------------------------------------------

def _draw_corridor(state) -> np.ndarray:
    """The corridor's cells left to right, 48 pixels each: grey floor, the goal (the last
    cell) green, the agent a blue disc."""
    from rollax.envs.corridor import NUM_POSITIONS

    cell = 48
    frame = np.full((cell, cell * NUM_POSITIONS, 3), 255, np.uint8)
    for i in range(NUM_POSITIONS):
        colour = (120, 200, 120) if i == NUM_POSITIONS - 1 else (220, 220, 220)
        frame[2:-2, i * cell + 2:(i + 1) * cell - 2] = colour
    yy, xx = np.mgrid[:cell, :cell]
    disc = (yy - cell / 2 + 0.5) ** 2 + (xx - cell / 2 + 0.5) ** 2 <= (cell / 3) ** 2
    at = int(np.asarray(state.position)) * cell
    frame[:, at:at + cell][disc] = (40, 90, 200)
    return frame


# --- Pgx ---------------------------------------------------------------------------------------

def _import_cairosvg(name: str):
    """CairoSVG, or a ``ValueError`` with the install command (it needs the system's Cairo)."""
    try:
        import cairosvg  # pyright: ignore[reportMissingImports]  (the render extra)
    except (ImportError, OSError) as err:  # OSError: the package without libcairo
        raise ValueError(f"drawing {name} needs CairoSVG (Pgx draws its games as SVG) and the "
                         f"system's Cairo library: `pip install 'rollax[render]'` "
                         f"({str(err).splitlines()[0]})") from None
    return cairosvg


def _draw_pgx(state) -> np.ndarray:
    """Pgx's own picture of a state (``state.to_svg()``, its default light theme), rasterised
    by CairoSVG onto white. Pgx's MinAtar draws its planes through matplotlib instead (an
    image in the SVG, blurred when rasterised, and half a second a frame): rollax draws those
    planes itself (below)."""
    import io

    from PIL import Image

    png = _import_cairosvg("pgx").svg2png(bytestring=state.inner.to_svg().encode())
    with Image.open(io.BytesIO(png)) as picture:
        rgba = picture.convert("RGBA")
    canvas = Image.new("RGBA", rgba.size, "white")
    return np.asarray(Image.alpha_composite(canvas, rgba).convert("RGB"))


# --- planes ------------------------------------------------------------------------------------

def _plane_shape(env) -> tuple[int, int, int] | None:
    """``(H, W, C)`` when ``env`` observes binary planes that small (module docstring)."""
    shape = getattr(env, "raw_observation_shape", None)
    space = env.observation_space
    if shape is None or len(shape) != 3 or not isinstance(space, Box):
        return None
    if max(shape[:2]) > 32 or int(np.prod(shape)) != int(np.prod(space.shape)):
        return None
    if not (np.all(np.asarray(space.low) == 0) and np.all(np.asarray(space.high) == 1)):
        return None
    h, w, c = (int(n) for n in shape)
    return h, w, c


def plane_colours(channels: int) -> np.ndarray:
    """``(channels, 3)`` ``uint8`` colours, evenly spaced hues at full saturation."""
    return np.array([[round(255 * v) for v in colorsys.hsv_to_rgb(i / channels, 0.75, 0.95)]
                     for i in range(channels)], np.uint8)


def draw_planes(planes: np.ndarray, colours: np.ndarray, cell: int = PLANE_CELL) -> np.ndarray:
    """A ``(H, W, C)`` stack of planes as a picture: each cell ``cell`` pixels wide, coloured
    by the highest-numbered plane lit there (above 0.5), black where none is."""
    lit = planes > 0.5
    top = np.where(lit.any(-1), planes.shape[-1] - 1 - np.argmax(lit[..., ::-1], -1), -1)
    picture = np.where((top >= 0)[..., None], colours[np.maximum(top, 0)], 0).astype(np.uint8)
    return np.repeat(np.repeat(picture, cell, 0), cell, 1)
