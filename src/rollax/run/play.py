"""A person against a trained game agent in the terminal (``rollax play RUN``).

A run trained by self-play on ``pgx:tic_tac_toe`` or ``pgx:connect_four`` (``docs/contract.md
§8``) plays one seat with its policy at the latest checkpoint; the person plays the other,
typing a cell (tic-tac-toe, ``1``-``9`` row by row) or a column (Connect Four, ``1``-``7``)
after the board is drawn. A move is checked against the legal-action mask of the state (Pgx's
``legal_action_mask``) before it is played: an illegal or unreadable move is answered in one
line and asked for again, so no move ever reaches Pgx's illegal-move penalty. The agent plays
its policy's mode among the legal actions (``policy.greedy`` with the mask, as ``rollax eval``
plays), or with ``sample`` a draw from its masked distribution.

The board is drawn from the state's observation, the player to act's (Pgx's two planes: plane
0 holds that player's marks, plane 1 the other's), its planes swapped when the agent is to act:
what is shown is what Pgx shows the person.
X is the mark of the first mover. Pgx deals the first move to player id 0 or 1 at random (from
the reset key); the person's seat is a place in the move order, not a player id.

Everything that can be refused (the folder, a run of another environment, a recurrent policy,
the lane, the seed) is checked by :func:`check_play` from the folder's config.json, before the
checkpoint is read or anything compiled.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from rollax.validate import check_seed

__all__ = ["BOARDS", "Board", "PlayedGame", "check_play", "moves_first", "play_game"]


@dataclasses.dataclass(frozen=True)
class Board:
    """How one game's board is drawn and its moves named: Pgx's observation planes ``(rows,
    cols, 2)`` of a player, and an action that is a cell (row by row) or a column."""

    rows: int
    cols: int
    noun: str
    """``"cell"`` (an action names a cell, ``rows * cols`` actions) or ``"column"``."""

    @property
    def moves(self) -> int:
        """The number of actions (cells or columns)."""
        return self.rows * self.cols if self.noun == "cell" else self.cols

    def draw(self, planes: np.ndarray, mine: str, theirs: str) -> list[str]:
        """The board as text lines: ``planes[..., 0]`` (the viewer's marks) as ``mine``,
        ``planes[..., 1]`` as ``theirs``; an empty cell of tic-tac-toe shows its number, an
        empty cell of Connect Four a dot under the column numbers."""
        marks = np.where(planes[..., 0] > 0, mine, np.where(planes[..., 1] > 0, theirs, ""))
        if self.noun == "column":
            head = " " + " ".join(str(c + 1) for c in range(self.cols))
            return [head, *(" " + " ".join(m or "." for m in row) for row in marks)]
        lines: list[str] = []
        for r, row in enumerate(marks):
            cells = [m or str(r * self.cols + c + 1) for c, m in enumerate(row)]
            lines.append(" " + " | ".join(cells))
            if r + 1 < self.rows:
                lines.append("+".join(["---"] * self.cols))
        return lines

    def taken(self) -> str:
        """Why a move that exists is not legal: its cell is taken or its column full."""
        return "is taken" if self.noun == "cell" else "is full"


BOARDS = {"tic_tac_toe": Board(3, 3, "cell"), "connect_four": Board(6, 7, "column")}
"""The Pgx games ``rollax play`` draws, by Pgx id."""


def _drawn_games() -> str:
    return " or ".join(f"pgx:{name}" for name in sorted(BOARDS))


def check_play(path: str | Path, lane: int = 0, seed: int = 0) -> tuple[str, Board]:
    """``(env name, Board)`` of the run in ``path`` that ``rollax play`` can play; a one-line
    ``ValueError`` naming the setting otherwise: no such folder, not a run, a run of an
    environment that is not a game drawn here (a single-player task, or a two-player game
    without a board: chess, the poker games, ...), a recurrent policy, a lane the run does not
    have, a bad seed. Reads config.json only (nothing compiled)."""
    from rollax.run.folder import RunFolder
    from rollax.run.training import read_run

    check_seed(seed)
    folder = RunFolder(Path(path))
    folder.check_exists("run_dir ")
    run = read_run(folder)
    name = str(run.config.env)
    game = name.removeprefix("pgx:")
    if not name.startswith("pgx:") or game not in BOARDS:
        from rollax.envs.suites.pgx import TWO_PLAYER

        what = ("a two-player game it cannot draw" if name.startswith("pgx:")
                and game in TWO_PLAYER else "not a two-player game")
        raise ValueError(f"run_dir {str(path)!r} trained {name}, {what}: play takes runs of "
                         f"{_drawn_games()}")
    network = getattr(run.config, "network", None)
    if network in ("gru", "lstm"):
        raise ValueError(f"run_dir {str(path)!r} trained a recurrent policy (network "
                         f"{network}): play takes feed-forward policies only")
    lanes = len(run.lanes().labels())
    if isinstance(lane, bool) or not isinstance(lane, int) or not 0 <= lane < lanes:
        raise ValueError(f"lane must be in [0, {lanes}) for the run in {str(path)!r}, "
                         f"got {lane!r}")
    return name, BOARDS[game]


def moves_first(seat: str, seed: int) -> bool:
    """Whether the person moves first: ``seat`` ``"first"`` or ``"second"``, or ``"random"``:
    first when ``numpy.random.default_rng(seed).integers(2)`` is 0."""
    if seat == "random":
        return int(np.random.default_rng(seed).integers(2)) == 0
    return seat == "first"


@dataclasses.dataclass
class PlayedGame:
    """What happened in one game of :func:`play_game`."""

    first: bool
    """Whether the person moved first (and played X)."""
    moves: list[tuple[str, int]] = dataclasses.field(default_factory=list)
    """``("you" | "agent", number)`` for every move played, numbers as typed (from 1)."""
    result: str = "unfinished"
    """From the person's seat: ``"win"``, ``"draw"``, ``"loss"``; ``"quit"`` (``q``) or
    ``"unfinished"`` (the input ended)."""


HELP = "q quits"


def play_game(loaded: Any, board: Board, first: bool, *, read: Callable[[], str | None],
              say: Callable[[str], None], prompt: Callable[[str], None],
              sample: bool = False, lane: int = 0, seed: int = 0) -> PlayedGame:
    """One game of the person against lane ``lane`` of ``loaded`` (a
    :class:`rollax.run.loaded.LoadedPolicy` of a game of :data:`BOARDS`), the person moving
    first when ``first``. ``read()`` gives the person's next line (``None`` at the end of the
    input), ``say(line)`` writes a line, ``prompt(text)`` writes the prompt before a read. The
    keys: ``jax.random.key(seed)`` split into the reset key and the agent's sampling key (one
    ``fold_in`` per agent move, used with ``sample`` only)."""
    import jax

    env = loaded.env
    reset_key, act_key = jax.random.split(jax.random.key(seed))
    step = jax.jit(env.step)
    state = jax.jit(env.reset)(reset_key)
    you = int(env.to_act(state)) if first else 1 - int(env.to_act(state))
    mine, theirs = ("X", "O") if first else ("O", "X")
    game = PlayedGame(first)

    def show() -> None:
        say("")
        planes = np.asarray(env.observation(state)).reshape(board.rows, board.cols, 2)
        if int(env.to_act(state)) != you:  # the other player's view: its marks first
            planes = planes[..., ::-1]
        for line in board.draw(planes, mine, theirs):
            say(line)

    show()
    done = False
    while not done:
        mask = np.asarray(env.action_mask(state))
        if int(env.to_act(state)) == you:
            action = _ask(board, mask, read, say, prompt)
            if action is None or action < 0:
                game.result = "unfinished" if action is None else "quit"
                say("the input ended: the game is left unfinished" if action is None
                    else "you quit: the game is left unfinished")
                return game
            game.moves.append(("you", action + 1))
        else:
            obs = np.asarray(env.observation(state))
            key = jax.random.fold_in(act_key, len(game.moves)) if sample else None
            action = int(loaded.act(obs, key, lane=lane, mask=mask))
            game.moves.append(("agent", action + 1))
            say(f"agent plays {board.noun} {action + 1}")
        state, _, terminated, truncated = step(state, np.int32(action), act_key)
        show()
        done = bool(terminated) or bool(truncated)
    paid = float(np.asarray(env.player_rewards(state))[you])
    game.result = "win" if paid > 0 else "loss" if paid < 0 else "draw"
    say({"win": "result: you win", "loss": "result: you lose",
         "draw": "result: a draw"}[game.result] + f" ({mine}, moving "
        f"{'first' if first else 'second'})")
    return game


def _legal(mask: np.ndarray) -> str:
    return " ".join(str(a + 1) for a in np.flatnonzero(mask))


def _ask(board: Board, mask: np.ndarray, read: Callable[[], str | None],
         say: Callable[[str], None], prompt: Callable[[str], None]) -> int | None:
    """The person's legal action (from 0), ``-1`` for ``q``, ``None`` at the end of the input;
    asks again after every refused line."""
    say(f"legal {board.noun}s: {_legal(mask)}")
    while True:
        prompt("your move: ")
        line = read()
        if line is None:
            return None
        text = line.strip()
        if text.lower() in ("q", "quit"):
            return -1
        try:
            number = int(text)
        except ValueError:
            say(f"{text!r} is not a move: type a {board.noun} number (1-{board.moves}), or "
                f"{HELP}")
            continue
        if not 1 <= number <= board.moves:
            say(f"there is no {board.noun} {number}: type 1-{board.moves}, or {HELP}")
        elif not mask[number - 1]:
            say(f"{board.noun} {number} {board.taken()}: legal {board.noun}s: {_legal(mask)}")
        else:
            return number - 1
