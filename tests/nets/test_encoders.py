"""Observations of several leaves (Dict, Tuple) and discrete observations: the spaces, the
per-leaf encoder against NumPy references, the choice of network per leaf, observation
normalisation of the continuous leaves only, the checker on tests/custom_envs/lookout.py, the
CLI's trainings on it, and learning (the lookout task, FrozenLake against its exact
optimum)."""

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rollax
from custom_envs.lookout import bad_cue, make, tuple_obs
from helpers import TINY_FLAGS, run, train_json
from rollax.contracts.preflight import check_before_run
from rollax.envs.base import space_leaves
from rollax.exact import expected_return, optimal_return
from rollax.nets import actor_critic
from rollax.nets.build import check_network, network_choice, observation_stats_template
from rollax.nets.cnn import CNNActorCritic
from rollax.nets.encoders import EncodedActorCritic, ObservationEncoder
from rollax.policies import obs_norm_init, obs_norm_update, obs_normalize

GRID = rollax.Box(np.float32(0), np.float32(1), (5, 5, 1))
VEC = rollax.Box(np.float32(-1), np.float32(1), (2,))


def observation(cell=(1, 3), reading=(0.5, -0.25), cue=1):
    grid = np.zeros((5, 5, 1), np.float32)
    grid[cell[0], cell[1], 0] = 1.0
    return {"grid": jnp.asarray(grid), "reading": jnp.asarray(reading, jnp.float32),
            "cue": jnp.int32(cue)}


# --- spaces -----------------------------------------------------------------------------------

def test_dict_and_tuple_spaces_contain_leaf_by_leaf():
    space = rollax.Dict({"v": VEC, "t": rollax.Tuple((rollax.Discrete(3), GRID))})
    inside = {"v": jnp.zeros(2), "t": (jnp.int32(2), jnp.zeros((5, 5, 1)))}
    assert bool(space.contains(inside))
    assert not bool(space.contains({"v": jnp.zeros(2), "t": (jnp.int32(3), jnp.zeros((5, 5, 1)))}))
    assert not bool(space.contains({"v": jnp.full(2, 2.0), "t": inside["t"]}))
    assert not bool(space.contains({"v": jnp.zeros(2)}))                    # a key missing
    assert not bool(space.contains(jnp.zeros(2)))                           # not a dict
    assert not bool(space.contains({**inside, "t": (jnp.int32(0),)}))       # tuple too short
    assert list(space.spaces) == ["t", "v"]                                 # sorted, as jax is
    paths = [p for p, _ in space_leaves(space)]
    assert paths == [jax.tree_util.keystr(p)
                     for p, _ in jax.tree_util.tree_flatten_with_path(inside)[0]]
    assert paths == ["['t'][0]", "['t'][1]", "['v']"]


@pytest.mark.parametrize("build, message", [
    (lambda: rollax.Dict({}), "Dict needs a non-empty mapping"),
    (lambda: rollax.Dict({1: VEC}), "Dict needs a non-empty mapping"),
    (lambda: rollax.Tuple(()), "Tuple needs at least one space"),
])
def test_empty_or_unnamed_spaces_are_refused(build, message):
    with pytest.raises(ValueError, match=message):
        build()


# --- the encoder ------------------------------------------------------------------------------

def test_encoder_codes_each_leaf_by_its_kind():
    """Without torsos: the leaves in key order (cue, grid, reading), the cue one-hot, the image
    and the vector flattened in C order."""
    encoder = ObservationEncoder.for_space(make().observation_space)
    obs = observation(cell=(2, 4), reading=(-0.5, 0.75), cue=1)
    grid = np.zeros(25, np.float32)
    grid[2 * 5 + 4] = 1.0
    want = np.concatenate([[0.0, 1.0], grid, [-0.5, 0.75]])
    np.testing.assert_array_equal(encoder.encode((), obs), want)
    assert encoder.num_features == 29 and encoder.num_torso_layers == 0


def test_image_leaf_goes_through_the_cnn_torso():
    """With conv the image leaf's code is the CNN's torso (the same convolution gives the same
    features as CNNActorCritic.torso), then the other leaves."""
    encoder = ObservationEncoder.for_space(make().observation_space, conv=True)
    assert encoder.num_features == 2 + 16 * 3 * 3 + 2 and encoder.num_torso_layers == 1
    cnn = CNNActorCritic(image_shape=(5, 5, 1), num_actions=2)
    layers = jax.jit(cnn.init)(jax.random.key(3)).actor
    obs = observation(cell=(0, 4), reading=(0.3, 0.1), cue=0)
    code = encoder.encode(layers[:1], obs)
    np.testing.assert_array_equal(code[:2], [1.0, 0.0])
    np.testing.assert_allclose(code[2:-2], cnn.torso(layers, obs["grid"].reshape(-1)),
                               rtol=1e-6, atol=1e-7)
    np.testing.assert_array_equal(code[-2:], np.float32([0.3, 0.1]))


def test_multi_discrete_leaf_is_one_hot_per_component():
    space = rollax.Tuple((rollax.MultiDiscrete((2, 3)), rollax.MultiBinary(2)))
    encoder = ObservationEncoder.for_space(space)
    code = encoder.encode((), (jnp.asarray([1, 2], jnp.int32), jnp.asarray([1, 0], jnp.int32)))
    np.testing.assert_array_equal(code, [0, 1, 0, 0, 1, 1, 0])


def test_network_choice_per_leaf_and_the_cnn_refusal():
    env = make()
    assert network_choice("auto", env) == "cnn"
    net = actor_critic(env, "auto", (8,), "tanh", 0.0, 8)
    assert isinstance(net, EncodedActorCritic) and net.encoder.conv
    assert not actor_critic(env, "mlp", (8,), "tanh", 0.0, 8).encoder.conv
    gru = actor_critic(env, "gru", (8,), "tanh", 0.0, 8)
    assert gru.encoder is not None and gru.observation_size == 29
    frozen = rollax.make("FrozenLake-v1")
    assert network_choice("auto", frozen) == "mlp"
    with pytest.raises(ValueError, match=r"^network cnn needs an image observation leaf \(a Box "
                                         r"of shape \(H, W, C\)\), but env 'FrozenLake-v1' has "
                                         r"none; use network mlp or auto$"):
        check_network(frozen, "cnn", (8,), "tanh", 0.0, 8, "FrozenLake-v1")
    # a single vector keeps the plain MLP (the same network, the same draws as before)
    assert type(actor_critic(rollax.make("CartPole-v1"), "auto", (8,), "tanh", 0.0, 8)) \
        is rollax.MLPActorCritic


@pytest.mark.parametrize("network", ["mlp", "cnn", "gru", "lstm"])
def test_every_network_reads_a_dict_observation(network):
    env = make()
    net = actor_critic(env, network, (8, 8), "tanh", 0.0, 8)
    params = jax.jit(net.init)(jax.random.key(0))
    obs = observation()
    batch = jax.tree.map(lambda x: jnp.stack([x, x]), obs)
    if network in ("gru", "lstm"):
        carry = net.initial_carry(params)
        _, action, log_prob = jax.jit(net.sample)(params, carry, obs, jax.random.key(1))
    else:
        action, log_prob = jax.jit(net.sample)(params, obs, jax.random.key(1))
        values = jax.jit(jax.vmap(net.value, (None, 0)))(params, batch)
        assert values.shape == (2,) and float(values[0]) == float(values[1])
    assert action.shape == () and np.isfinite(float(log_prob))


# --- observation normalisation ----------------------------------------------------------------

def np_running(batches, prior_count=1e-4):
    """NumPy reference: the statistics of a prior of mean 0 / variance 1 with weight
    ``prior_count`` pooled with every row of every batch (float64)."""
    rows = np.concatenate(batches).astype(np.float64)
    n = rows.shape[0]
    total = prior_count + n
    mean = rows.sum(axis=0) / total
    second = (prior_count * 1.0 + (rows**2).sum(axis=0)) / total  # E[x^2], prior var 1 mean 0
    return total, mean, second - mean**2


def test_normalisation_applies_to_the_continuous_leaves_only():
    net = actor_critic(make(), "cnn", (8,), "tanh", 0.0, 8)
    stats = obs_norm_init(observation_stats_template(net))
    assert stats.mean["grid"] is None and stats.mean["cue"] is None
    rng = np.random.default_rng(0)
    readings = []
    for _ in range(3):
        reading = rng.normal([2.0, -1.0], [0.5, 3.0], (4, 5, 2)).astype(np.float32)
        readings.append(reading.reshape(-1, 2))
        batch = {"grid": jnp.ones((4, 5, 5, 5, 1)), "reading": jnp.asarray(reading),
                 "cue": jnp.ones((4, 5), jnp.int32)}
        stats = obs_norm_update(stats, batch)
    count, mean, var = np_running(readings)
    np.testing.assert_allclose(float(stats.count), count, rtol=1e-6)
    np.testing.assert_allclose(stats.mean["reading"], mean, rtol=1e-5)
    np.testing.assert_allclose(stats.var["reading"], var, rtol=1e-4)
    obs = {"grid": jnp.full((5, 5, 1), 7.0), "reading": jnp.asarray([2.5, 20.0]),
           "cue": jnp.int32(1)}
    out = obs_normalize(stats, obs)
    np.testing.assert_array_equal(out["grid"], obs["grid"])       # images untouched
    assert out["cue"].dtype == jnp.int32 and int(out["cue"]) == 1  # discrete untouched
    want = np.clip((np.asarray([2.5, 20.0]) - mean) / np.sqrt(var + 1e-8), -10, 10)
    np.testing.assert_allclose(out["reading"], want, rtol=1e-4)


def test_vector_statistics_are_unchanged():
    stats = obs_norm_init(3)
    batch = jnp.asarray(np.random.default_rng(1).normal(size=(4, 6, 3)), jnp.float32)
    stats = obs_norm_update(stats, batch)
    _count, mean, var = np_running([np.asarray(batch).reshape(-1, 3)])
    np.testing.assert_allclose(stats.mean, mean, rtol=1e-5)
    np.testing.assert_allclose(stats.var, var, rtol=1e-4)


# --- the checker ------------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("factory", [make, tuple_obs])
def test_check_env_passes_dict_and_tuple_observations(factory):
    env = factory()
    report = rollax.check_env(env, batch_size=4, collect_fn=rollax.collect)
    assert report.ok, str(report)
    net = actor_critic(env, "cnn", (8,), "tanh", 0.0, 8)
    report = rollax.check_collector(rollax.collect, env, net, net.init(jax.random.key(0)),
                                    batch_size=4, num_steps=6)
    assert report.ok, str(report)


@pytest.mark.slow
def test_check_recurrent_passes_on_dict_observations():
    """The recurrent collectors and replay carry pytree observations through (the checker's
    counting probe ignores what it reads)."""
    report = rollax.check_recurrent(make(), batch_size=4)
    assert report.ok, str(report)


def test_check_env_names_the_leaf_outside_its_space():
    report = rollax.check_env(bad_cue(), batch_size=2, autoreset_fn=None)
    failed = [r.name for r in report.failures]
    assert failed == ["observation_in_space"], str(report)
    assert report["observation_in_space"].message == (
        "observation leaf ['cue'] outside its space: step 1, env 0, observation 2, space "
        "'Discrete(2)'")


def test_check_env_names_a_leaf_of_the_wrong_shape_and_a_missing_leaf():
    class Short(type(make())):
        def observation(self, state):
            obs = super().observation(state)
            return {**obs, "reading": obs["reading"][:1]}

    class Missing(type(make())):
        def observation(self, state):
            obs = super().observation(state)
            return {"grid": obs["grid"], "cue": obs["cue"]}

    report = rollax.check_env(Short(), batch_size=1, num_steps=1, autoreset_fn=None)
    assert report["reset_output"].message == ("start observation leaf ['reading'] does not "
                                              "match its space: observation 'float32[1]', "
                                              "space 'float32[2]'")
    with pytest.raises(ValueError, match=r"observation\(state\) returns the leaves \['cue'\], "
                                         r"\['grid'\], but its observation_space has "
                                         r"\['cue'\], \['grid'\], \['reading'\]$"):
        check_before_run(Missing(), "missing")


@pytest.mark.slow
def test_check_env_cli_passes_the_lookout_task(capsys):
    code, out, err = run(capsys, "check-env", "custom_envs.lookout:make", "--json")
    assert code == 0, err
    assert json.loads(out)["ok"] is True


@pytest.mark.slow
def test_check_env_cli_names_the_broken_leaf(capsys):
    code, out, _err = run(capsys, "check-env", "custom_envs.lookout:bad_cue")
    assert code == 1
    assert "observation leaf ['cue'] outside its space" in out


# --- training from the CLI --------------------------------------------------------------------

@pytest.mark.slow
def test_ppo_trains_a_gru_on_the_tuple_task(capsys, tmp_path):
    summary = train_json(capsys, "--env", "custom_envs.lookout:tuple_obs", "--algo", "ppo",
                         *TINY_FLAGS["ppo"], "--normalize-observations", "--network", "gru",
                         "--hidden", "8", "--memory-size", "8", "--eval-episodes", "4",
                         "--checked", "--out", tmp_path / "run")
    assert np.isfinite(summary["eval_return_mean"]) and not summary["diverged"]


# --- learning ---------------------------------------------------------------------------------

@pytest.mark.slow
def test_ppo_learns_the_lookout_task(capsys, tmp_path):
    """The answer needs all three leaves: any policy blind to one of them scores at most
    0.75 per step, 3.0 of 4 (tests/custom_envs/lookout.py); PPO's greedy policy must beat
    that bound clearly (the optimum is 4, a random policy 2)."""
    summary = train_json(capsys, "--env", "custom_envs.lookout:make", "--algo", "ppo",
                         "--total-steps", "32768", "--num-envs", "16", "--num-steps", "16",
                         "--minibatches", "4", "--epochs", "4", "--lr", "0.001",
                         "--ent-coef", "0", "--normalize-observations", "--eval-episodes", "64",
                         "--out", tmp_path / "run")
    assert summary["eval_return_mean"] >= 3.6


@pytest.mark.slow
def test_neural_ppo_nearly_solves_frozen_lake_exactly():
    """FrozenLake-v1 (slippery, horizon 100) observed as a Discrete(16) state, one-hot in the
    network: the greedy policy's exact expected return (dynamic programming on the MDP)
    reaches 90% of the optimum 0.744 (a uniformly random policy gets 0.015)."""
    config = rollax.PPOConfig(env="FrozenLake-v1", total_steps=65536, num_envs=16,
                              num_steps=64, minibatches=4, epochs=4, lr=1e-3, ent_coef=0.01,
                              hidden=(32, 32))
    algo = rollax.algos.registry.build(config)
    out = rollax.make_train(config)(jax.random.key(0))
    mdp = rollax.make("FrozenLake-v1").to_mdp()
    states = jnp.arange(mdp.num_states, dtype=jnp.int32)
    greedy = jax.vmap(lambda s: algo.policy.greedy((out.params, out.obs_stats), s))(states)
    achieved = float(expected_return(mdp, jax.nn.one_hot(greedy, mdp.num_actions)))
    best = float(optimal_return(mdp))
    assert best == pytest.approx(0.744, abs=1e-3)
    assert achieved >= 0.9 * best
