"""An experiment, not a rollax feature yet: rollax's own PPO (or A2C) on Jumanji's Minesweeper-v0
with a network of the shape of Jumanji's Minesweeper network, to locate the gap of the Jumanji
table in QUALITY.md (the algorithm, or the network).

    python benchmarks/minesweeper_grid.py --algo ppo --steps 1024000 --seeds 3 \
        --out benchmarks/results/suite_rollax.jsonl

``GridActorCritic`` reads the adapter's observation vector back as its fields (the 10x10 board,
its action mask, the mine count): each cell's value (-1 unexplored, 0-8) embedded in 4
dimensions, three 3x3 convolutions of 8 channels with "same" padding (the board keeps its
10x10 shape; each one matmul of the nine shifted views of the padded board, which XLA runs
faster on the CPU than its convolution), the mine count (divided by the cell count) through a
dense layer of 4 broadcast to every cell, then a per-cell MLP (32, 32, 1): the actor's 100
outputs are the logits of the cells (rollax's sampler applies the mask), the critic's value the
mean of its 100 outputs.
These are the sizes of Jumanji's training config for Minesweeper (board_embed_dim 4,
board_conv_channels [8, 8, 8], kernel 3, num_mines_embed_dim 4, final_layer_dims [32, 32]).
Everything else is ``rollax train``'s: the script replaces the network that rollax's PPO and
A2C build (``rollax.algos.<algo>.actor_critic``) for this process only, then runs the command
line through ``suite_rollax.run`` (``--seeds``, ``--total-steps``, ``--eval-episodes``); the row
is appended like ``suite_rollax.py``'s, with ``"network": "grid (Jumanji's shape)"``.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from _timing import append_row
from suite_rollax import run

from rollax.nets.heads import ActorCriticParams, FeedForwardHeads

ROWS = COLS = 10
EMBED, CHANNELS, MINES_EMBED, FINAL = 4, (8, 8, 8), 4, (32, 32)


def _normal(key, shape, fan_in):
    return jax.random.normal(key, shape, jnp.float32) / np.sqrt(fan_in)


@dataclasses.dataclass(frozen=True)
class GridActorCritic(FeedForwardHeads):
    """Jumanji's Minesweeper network shape on rollax's policy interface (one observation of
    201 floats: board (100), action mask (100), mine count (1))."""

    num_actions: int = ROWS * COLS
    observation_size: int = 2 * ROWS * COLS + 1
    action_size: int | None = None
    hidden: tuple[int, ...] = FINAL
    activation: str = "relu"
    init_log_std: float = 0.0

    def _layers(self, key, outputs: int) -> tuple:
        keys = iter(jax.random.split(key, 16))
        layers = [_normal(next(keys), (10, EMBED), 1.0)]  # cell values -1 .. 8
        fan = EMBED
        for c in CHANNELS:
            layers += [_normal(next(keys), (3, 3, fan, c), 9 * fan), jnp.zeros(c)]
            fan = c
        layers += [_normal(next(keys), (1, MINES_EMBED), 1.0), jnp.zeros(MINES_EMBED)]
        fan += MINES_EMBED
        for width in (*FINAL, outputs):
            layers += [_normal(next(keys), (fan, width), fan), jnp.zeros(width)]
            fan = width
        return tuple(layers)

    def init(self, key: jax.Array) -> ActorCriticParams:
        actor, critic = jax.random.split(key)
        return ActorCriticParams(self._layers(actor, 1), self._layers(critic, 1),
                                 jnp.zeros((0,), jnp.float32))

    def forward(self, layers: tuple, observation: jax.Array) -> jax.Array:
        board = observation[:ROWS * COLS].reshape(ROWS, COLS).astype(jnp.int32) + 1
        mines = observation[-1:] / (ROWS * COLS)
        x = layers[0][board]  # (H, W, EMBED)
        i = 1
        for _ in CHANNELS:  # a "same" 3x3 convolution as one matmul of the 9 shifted views
            padded = jnp.pad(x, ((1, 1), (1, 1), (0, 0)))
            patches = jnp.concatenate([padded[r:r + ROWS, c:c + COLS]
                                       for r in range(3) for c in range(3)], -1)
            kernel = layers[i].reshape(-1, layers[i].shape[-1])  # (3 * 3 * C_in, C_out)
            x = jax.nn.relu(patches @ kernel + layers[i + 1])
            i += 2
        m = mines @ layers[i] + layers[i + 1]
        i += 2
        x = jnp.concatenate([x, jnp.broadcast_to(m, (ROWS, COLS, MINES_EMBED))], -1)
        for _ in FINAL:
            x = jax.nn.relu(x @ layers[i] + layers[i + 1])
            i += 2
        out = (x @ layers[i] + layers[i + 1])[..., 0]  # (H, W)
        return out.reshape(-1)

    def value(self, params: ActorCriticParams, observation: jax.Array) -> jax.Array:
        return jnp.mean(self.forward(params.critic, observation))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--algo", default="ppo", choices=("ppo", "a2c"))
    parser.add_argument("--steps", type=int, required=True)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--eval-episodes", type=int, default=1000)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("extra", nargs="*", help="further rollax train flags (after --)")
    args = parser.parse_args()
    module = importlib.import_module(f"rollax.algos.{args.algo}")
    module.actor_critic = lambda env, *a, **k: GridActorCritic()  # this process only
    env = "jumanji:Minesweeper-v0"
    row = {"tag": [env, args.algo, args.steps, args.seeds, ["grid", *args.extra]],
           **run(env, args.algo, args.steps, args.seeds, args.eval_episodes, args.extra)}
    row["settings"] = {**row["settings"], "network": "grid (Jumanji's shape)",
                       "hidden": list(FINAL)}
    append_row(row, args.out)


if __name__ == "__main__":
    main()
