"""The spatial actor-critic (``network: spatial``): its logits in the cell order ``(row, col,
kind)`` checked by hand, the logit map moving with its board (translation equivariance of
"same" convolutions), the value unmoved by a shift, masked cells never drawn, the shapes under
``jit`` and ``vmap``, the grid read from an observation of fields, and the refusals."""

import types

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from helpers import f32_rtol
from rollax.distributions import masked
from rollax.envs.base import Box, Discrete, MultiDiscrete
from rollax.nets.build import actor_critic, check_network, network_choice
from rollax.nets.spatial import CellPart, GlobalPart, GridLayout, SpatialActorCritic, grid_layout


def grid_env(h, w, c, actions):
    """What the network reads of an environment with ``(h, w, c)`` board planes in ``[0, 1]``."""
    size = h * w * c
    return types.SimpleNamespace(
        observation_space=Box(np.zeros(size), np.ones(size), (size,)),
        action_space=actions if not isinstance(actions, int) else Discrete(actions),
        raw_observation_shape=(h, w, c))


def pick_channel(net, params, channel, kind_weights):
    """``params`` whose actor's logit for kind ``k`` of a cell is ``kind_weights[k]`` times
    the cell's input ``channel`` (only the 3x3 kernels' centre taps and one unit used)."""
    first = params.actor[0]
    weight = jnp.zeros_like(first.weight).at[0, channel, 1, 1].set(1.0)
    layers = [eqx.tree_at(lambda lay: lay.weight, first, weight)]
    for layer in params.actor[1:-1]:
        layers.append(eqx.tree_at(lambda lay: lay.weight, layer,
                                  jnp.zeros_like(layer.weight).at[0, 0, 1, 1].set(1.0)))
    out = params.actor[-1]
    weight = jnp.zeros_like(out.weight).at[:, 0, 0, 0].set(jnp.asarray(kind_weights))
    layers.append(eqx.tree_at(lambda lay: lay.weight, out, weight))
    return params._replace(actor=tuple(layers))


@pytest.fixture(scope="module")
def board():
    """A 7x8 board of 3 planes, 2 kinds of action per cell, two convolutions (zero biases,
    as drawn)."""
    env = grid_env(7, 8, 3, 112)
    net = actor_critic(env, "spatial", (8, 8), "relu", 0.0, 8)
    params = net.init(jax.random.key(0))
    return env, net, params


def test_auto_never_picks_it_and_spatial_builds_it(board):
    env, net, _ = board
    assert isinstance(net, SpatialActorCritic) and net.kinds == 2
    assert network_choice("auto", env) == "cnn" and network_choice("spatial", env) == "spatial"
    assert net.layout == GridLayout(7, 8, (CellPart(0, 3),), (), 168)


def test_each_cells_logit_is_its_action_in_row_col_kind_order(board):
    _, net, params = board
    hand = pick_channel(net, params, channel=2, kind_weights=[1.0, 3.0])
    logits = jax.jit(net.logits)
    for row, col in [(0, 0), (1, 4), (6, 7), (3, 0)]:
        image = np.zeros((7, 8, 3), np.float32)
        image[row, col, 2] = 1.0
        got = np.asarray(logits(hand.actor, jnp.asarray(image.reshape(-1))))
        cell = row * 8 + col
        assert int(np.argmax(got)) == cell * 2 + 1, (row, col)
        np.testing.assert_allclose(got[cell * 2], 1.0)
        np.testing.assert_allclose(np.delete(got, [cell * 2, cell * 2 + 1]), 0.0)


def _random_biases(params, key):
    def noisy(layers, key):
        keys = jax.random.split(key, len(layers))
        return tuple(eqx.tree_at(lambda lay: lay.bias, lay,
                                 0.3 * jax.random.normal(k, lay.bias.shape))
                     for k, lay in zip(keys, layers))

    actor_key, critic_key = jax.random.split(key)
    return params._replace(actor=noisy(params.actor, actor_key),
                           critic=noisy(params.critic, critic_key))


def test_the_logit_map_moves_with_the_board(board):
    # two "same" 3x3 convolutions: a cell two or more cells from the edge sees no padding, so
    # away from the edges the map of a shifted board is the shifted map (biases included)
    env, net, params = board
    params = _random_biases(params, jax.random.key(3))
    image = jax.random.uniform(jax.random.key(4), (7, 8, 3))
    before = net.logits(params.actor, image.reshape(-1)).reshape(7, 8, 2)
    shifted = jnp.roll(image, (1, 1), axis=(0, 1))
    after = net.logits(params.actor, shifted.reshape(-1)).reshape(7, 8, 2)
    # rows 2-4 and columns 2-5 are padding-free; (3..4, 3..5) moved from (2..3, 2..4)
    np.testing.assert_allclose(after[3:5, 3:6], before[2:4, 2:5], rtol=1e-5, atol=1e-5)
    assert not np.allclose(after[3:5, 3:6], before[3:5, 3:6], atol=1e-3)  # it depends on x
    mlp = actor_critic(env, "mlp", (8,), "relu", 0.0, 8)
    mlp_params = mlp.init(jax.random.key(0))
    flat = [mlp.distribution(mlp_params, x.reshape(-1)).logits.reshape(7, 8, 2)
            for x in (image, shifted)]
    assert not np.allclose(flat[1][3:5, 3:6], flat[0][2:4, 2:5], atol=1e-3)  # an MLP's does not


def test_a_shifted_piece_keeps_its_value_and_moves_its_logits(board):
    # zero biases: an empty board's features are zero, so a piece whose features (two cells
    # around it) stay on the board gives the same pooled features and value wherever it is,
    # and logits that follow it
    _, net, params = board
    values, peaks = [], []
    for row, col in [(3, 2), (3, 5), (4, 3)]:
        image = np.zeros((7, 8, 3), np.float32)
        image[row - 1:row + 1, col, 0] = 1.0
        image[row, col, 1] = 0.5
        o = jnp.asarray(image.reshape(-1))
        values.append(float(net.value(params, o)))
        logits = net.logits(params.actor, o).reshape(7, 8, 2)
        peaks.append(np.asarray(logits[row - 1:row + 2, col - 1:col + 2]))
    np.testing.assert_allclose(values, values[0], rtol=1e-5)
    np.testing.assert_allclose(peaks[1], peaks[0], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(peaks[2], peaks[0], rtol=1e-5, atol=1e-6)


def test_masked_cells_get_no_probability(board):
    _, net, params = board
    o = jax.random.uniform(jax.random.key(5), (168,))
    mask = jnp.arange(112) % 7 == 3
    dist = masked(net.distribution(params, o), mask)
    probs = jnp.exp(jax.vmap(dist.log_prob)(jnp.arange(112)))
    np.testing.assert_allclose(probs[~mask], 0.0)
    np.testing.assert_allclose(probs.sum(), 1.0, rtol=f32_rtol(1e-5))  # exp of log-probabilities
    keys = jax.random.split(jax.random.key(6), 256)
    actions, _ = jax.vmap(net.sample, (None, None, 0, None))(params, o, keys, mask)
    assert bool(jnp.all(mask[actions]))
    assert bool(mask[net.greedy(params, o, mask)])


def test_shapes_under_jit_and_vmap(board):
    _, net, params = board
    obs = jax.random.uniform(jax.random.key(7), (4, 168))
    dist, value = jax.jit(jax.vmap(net.distribution_value, (None, 0)))(params, obs)
    assert dist.logits.shape == (4, 112) and value.shape == (4,)
    assert net.observation_size == 168
    assert [lay.weight.shape for lay in params.actor] == [(8, 3, 3, 3), (8, 8, 3, 3),
                                                          (2, 8, 1, 1)]
    assert [lay.weight.shape for lay in params.critic[2:]] == [(8, 16), (1, 8)]


def fields_env(board_low=-1.0, board_high=8.0):
    """An observation of Jumanji-like fields: a 4x4 board of values, its 4x4 mask, a count."""
    low = np.concatenate([np.full(16, board_low), np.zeros(16), [0.0]])
    high = np.concatenate([np.full(16, board_high), np.ones(16), [16.0]])
    return types.SimpleNamespace(
        observation_space=Box(low, high, (33,)), action_space=Discrete(16),
        observation_fields=(("board", (4, 4)), ("action_mask", (4, 4)), ("count", ())))


def test_a_grid_of_fields_reads_small_integer_values_one_hot_and_shares_the_rest():
    layout = grid_layout(fields_env())
    assert layout == GridLayout(4, 4, (CellPart(0, 1, -1, 10), CellPart(16, 1)),
                                (GlobalPart(32, 1, 1 / 16),), 33)
    assert layout.channels == 12
    board = np.full(16, -1.0)
    board[5] = 3.0
    o = jnp.asarray(np.concatenate([board, np.arange(16) % 2, [4.0]]), jnp.float32)
    grid = np.asarray(layout.read(o))
    assert grid.shape == (4, 4, 12)
    np.testing.assert_array_equal(grid[1, 1, :10], np.eye(10)[4])  # value 3 is the 5th of -1..8
    np.testing.assert_array_equal(grid[0, 0, :10], np.eye(10)[0])
    np.testing.assert_array_equal(grid[..., 10].reshape(-1), np.arange(16) % 2)
    np.testing.assert_allclose(grid[..., 11], 0.25)
    wide = grid_layout(fields_env(board_low=0.0, board_high=100.0))
    assert wide.cells[0] == CellPart(0, 1) and wide.channels == 3  # 101 values: as they are


@pytest.mark.parametrize("env,words", [
    (grid_env(6, 7, 2, 7), r"its 7 actions are not one per cell \(and kind\) of its 6x7 grid: "
                           r"7 is not a multiple of 42"),
    (grid_env(8, 8, 2, 65), r"its 65 actions .* 65 is not a multiple of 64"),
    (grid_env(3, 3, 2, MultiDiscrete((3, 3))), "its action is a MultiDiscrete, not one "
                                               "Discrete action per cell of its 3x3 grid"),
    (types.SimpleNamespace(observation_space=Box(np.zeros(4), np.ones(4), (4,)),
                           action_space=Discrete(4)), r"its observation is no grid"),
])
def test_refused_in_one_line_where_the_actions_are_not_the_cells(env, words):
    with pytest.raises(ValueError, match=r"^network spatial gives one logit per cell of a grid, "
                                         r"but env 'g': " + words) as error:
        check_network(env, "spatial", (8,), "relu", 0.0, 8, env_name="g")
    assert "\n" not in str(error.value)
    with pytest.raises(ValueError, match="multiple of the 9 cells"):
        SpatialActorCritic(layout=GridLayout(3, 3, (CellPart(0, 2),), (), 18), num_actions=10)
