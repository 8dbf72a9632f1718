"""MultiDiscrete and MultiBinary actions: the spaces, their distributions (MultiCategorical,
Bernoulli) against NumPy references, the actor-critic heads built for them, the checker's
random policy and probes, the checked-mode guard, and training on the guessing tasks of
tests/custom_envs/guess.py."""

import dataclasses
import itertools
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import checkify

import rollax
from custom_envs.guess import multi_binary, multi_discrete
from helpers import TINY_FLAGS, f32_rtol, run, train_json
from rollax.contracts.probe import RandomPolicy, probe_actions
from rollax.distributions import PAD_LOGIT
from rollax.guards import check_actions, check_collected
from rollax.nets import Bernoulli, Categorical, DiagGaussian, MultiCategorical, actor_critic

NVEC = (2, 3, 4)
SAMPLES = 40_000


def np_log_softmax(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, np.float64)
    top = x.max(axis=-1, keepdims=True)
    return x - top - np.log(np.exp(x - top).sum(axis=-1, keepdims=True))


def np_split(flat: np.ndarray, nvec) -> list[np.ndarray]:
    """Component k's logits: the nvec[k] flat entries after the first sum(nvec[:k])."""
    return np.split(np.asarray(flat, np.float64), np.cumsum(nvec)[:-1], axis=-1)


def np_sigmoid(x):
    return 1.0 / (1.0 + np.exp(-np.asarray(x, np.float64)))


def flat_logits(seed=0, batch=(5,)):
    return np.random.default_rng(seed).normal(0.0, 2.0, (*batch, sum(NVEC))).astype(np.float32)


def within_sigmas(counts: np.ndarray, probs: np.ndarray, n: int, sigmas: float = 5.0) -> None:
    """Empirical frequencies within ``sigmas`` binomial standard deviations of ``probs``."""
    freq = counts / n
    sd = np.sqrt(probs * (1 - probs) / n)
    assert np.all(np.abs(freq - probs) <= sigmas * sd + 1e-12), (freq, probs)


# --- spaces -----------------------------------------------------------------------------------

def test_multi_discrete_space():
    space = rollax.MultiDiscrete([2, 3])
    assert space.nvec == (2, 3) and space.shape == (2,) and hash(space) == hash(
        rollax.MultiDiscrete((2, 3)))
    assert bool(space.contains(jnp.array([1, 2], jnp.int32)))
    assert bool(space.contains(np.array([0, 0])))
    assert not bool(space.contains(jnp.array([2, 0])))  # component 0 in [0, 2)
    assert not bool(space.contains(jnp.array([0, 3])))
    assert not bool(space.contains(jnp.array([-1, 0])))
    assert not bool(space.contains(jnp.array([1.0, 2.0])))  # not integers
    assert not bool(space.contains(jnp.array([1, 2, 0])))  # shape
    for bad in ([], [0, 2], [[2, 3]], [2.5]):
        with pytest.raises(ValueError, match="nvec must be a non-empty sequence of positive"):
            rollax.MultiDiscrete(bad)


def test_multi_binary_space():
    space = rollax.MultiBinary(3)
    assert space.shape == (3,) and space.nvec == (2, 2, 2) and space.dtype == jnp.int32
    assert bool(space.contains(jnp.array([0, 1, 1])))
    assert not bool(space.contains(jnp.array([0, 2, 1])))
    assert not bool(space.contains(jnp.array([0, -1, 1])))
    assert not bool(space.contains(jnp.array([0.0, 1.0, 1.0])))
    assert not bool(space.contains(jnp.array([0, 1])))
    for bad in (0, -2, 1.5, True):
        with pytest.raises(ValueError, match="n must be a non-empty sequence of positive"):
            rollax.MultiBinary(bad)


# --- distributions ----------------------------------------------------------------------------

def test_multi_categorical_layout_log_prob_entropy_mode():
    flat = flat_logits()
    dist = MultiCategorical.from_flat(jnp.asarray(flat), NVEC)
    assert dist.logits.shape == (5, 3, 4)
    comps = np_split(flat, NVEC)
    for k, n in enumerate(NVEC):  # row k: its logits, then padding
        np.testing.assert_array_equal(np.asarray(dist.logits[:, k, :n]), flat[:, sum(NVEC[:k]):
                                                                             sum(NVEC[:k]) + n])
        assert np.all(np.asarray(dist.logits[:, k, n:]) == PAD_LOGIT)
    rng = np.random.default_rng(1)
    action = np.stack([rng.integers(0, n, 5) for n in NVEC], axis=-1).astype(np.int32)
    want_lp = sum(np.take_along_axis(np_log_softmax(c), action[:, k, None], -1)[:, 0]
                  for k, c in enumerate(comps))
    want_h = sum(-(np.exp(np_log_softmax(c)) * np_log_softmax(c)).sum(-1) for c in comps)
    want_mode = np.stack([c.argmax(-1) for c in comps], axis=-1)
    np.testing.assert_allclose(np.asarray(dist.log_prob(jnp.asarray(action))), want_lp,
                               rtol=f32_rtol(1e-5))
    np.testing.assert_allclose(np.asarray(dist.entropy()), want_h, rtol=f32_rtol(1e-5))
    assert np.asarray(dist.mode()).tolist() == want_mode.tolist()
    assert dist.mode().dtype == jnp.int32 and dist.log_prob(jnp.asarray(action)).shape == (5,)


def test_multi_categorical_padding_never_chosen():
    """All of a component's logits far below 0: the padding's probability is still 0 and the
    mode and samples stay in range; the entropy is finite (no 0 * -inf)."""
    flat = jnp.asarray([-1e6, -2e6, 0.0, 1.0, 2.0, -3e6, -3e6, -1e6, -5e6], jnp.float32)
    dist = MultiCategorical.from_flat(flat, NVEC)
    assert np.asarray(dist.mode()).tolist() == [0, 2, 2]
    samples = np.asarray(jax.vmap(dist.sample)(jax.random.split(jax.random.key(0), 2000)))
    assert np.all(samples < np.asarray(NVEC))
    assert np.isfinite(float(dist.entropy()))
    assert np.all(np.isfinite(np.asarray(jax.grad(lambda f: MultiCategorical.from_flat(
        f, NVEC).entropy())(flat))))


def test_multi_categorical_samples_follow_the_product_of_its_components():
    flat = flat_logits(seed=2, batch=())
    dist = MultiCategorical.from_flat(jnp.asarray(flat), NVEC)
    samples = np.asarray(jax.vmap(dist.sample)(jax.random.split(jax.random.key(7), SAMPLES)))
    assert samples.shape == (SAMPLES, 3) and samples.dtype == np.int32
    probs = [np.exp(np_log_softmax(c)) for c in np_split(flat, NVEC)]
    cells = list(itertools.product(*(range(n) for n in NVEC)))
    joint = np.array([np.prod([probs[k][a] for k, a in enumerate(cell)]) for cell in cells])
    index = np.ravel_multi_index(samples.T, NVEC)
    within_sigmas(np.bincount(index, minlength=len(cells)), joint, SAMPLES)


def test_bernoulli_log_prob_entropy_mode():
    logits = np.random.default_rng(3).normal(0, 2, (6, 4)).astype(np.float32)
    logits[0, 0] = 0.0  # mode 0 at p = 1/2
    action = np.random.default_rng(4).integers(0, 2, (6, 4)).astype(np.int32)
    p = np_sigmoid(logits)
    want_lp = np.sum(action * np.log(p) + (1 - action) * np.log(1 - p), -1)
    want_h = np.sum(-p * np.log(p) - (1 - p) * np.log(1 - p), -1)
    dist = Bernoulli(jnp.asarray(logits))
    np.testing.assert_allclose(np.asarray(dist.log_prob(jnp.asarray(action))), want_lp,
                               rtol=f32_rtol(1e-5))
    np.testing.assert_allclose(np.asarray(dist.entropy()), want_h, rtol=f32_rtol(1e-5))
    assert np.asarray(dist.mode()).tolist() == (logits > 0).astype(int).tolist()
    assert dist.mode().dtype == jnp.int32


def test_bernoulli_samples_follow_the_product_of_its_bits():
    logits = np.array([-1.5, 0.3, 2.0], np.float32)
    dist = Bernoulli(jnp.asarray(logits))
    samples = np.asarray(jax.vmap(dist.sample)(jax.random.split(jax.random.key(8), SAMPLES)))
    assert samples.dtype == np.int32 and set(np.unique(samples)) <= {0, 1}
    p = np_sigmoid(logits)
    cells = list(itertools.product((0, 1), repeat=3))
    joint = np.array([np.prod(np.where(np.array(c) == 1, p, 1 - p)) for c in cells])
    index = np.ravel_multi_index(samples.T, (2, 2, 2))
    within_sigmas(np.bincount(index, minlength=8), joint, SAMPLES)


def test_from_uniform_draws_each_distribution_by_hand_and_in_law():
    """``from_uniform(u)``, the draw an exported sampling policy makes from its noise input:
    hand values (Gumbel-max, ``u < p``, the normal quantile), then the law of many draws (the
    joint frequencies of a multi-categorical and bits, a Kolmogorov-Smirnov test of a
    Gaussian)."""
    from scipy import stats

    # Gumbel-max by hand: logits (0, 0), u = (0.9, 0.1): -log(-log u) = (2.250, -0.834) -> 0
    assert int(Categorical(jnp.zeros(2)).from_uniform(jnp.array([0.9, 0.1]))) == 0
    assert int(Categorical(jnp.array([0.0, 5.0])).from_uniform(jnp.array([0.9, 0.1]))) == 1
    bits = Bernoulli(jnp.zeros(2)).from_uniform(jnp.array([0.4, 0.6]))  # p = 1/2
    assert np.asarray(bits).tolist() == [1, 0] and bits.dtype == jnp.int32
    gauss = DiagGaussian(jnp.array([1.0]), jnp.log(jnp.array([2.0])))
    np.testing.assert_allclose(gauss.from_uniform(jnp.array([0.975])), [1 + 2 * 1.959964],
                               rtol=f32_rtol(1e-6))
    assert gauss.noise_shape == (1,)

    u = jax.random.uniform(jax.random.key(9), (SAMPLES, 3, max(NVEC)), minval=1e-7)
    flat = flat_logits(seed=2, batch=())
    multi = MultiCategorical.from_flat(jnp.asarray(flat), NVEC)
    assert multi.noise_shape == (3, max(NVEC))
    samples = np.asarray(jax.vmap(multi.from_uniform)(u))
    probs = [np.exp(np_log_softmax(c)) for c in np_split(flat, NVEC)]
    cells = list(itertools.product(*(range(n) for n in NVEC)))
    joint = np.array([np.prod([probs[k][a] for k, a in enumerate(cell)]) for cell in cells])
    within_sigmas(np.bincount(np.ravel_multi_index(samples.T, NVEC), minlength=len(cells)),
                  joint, SAMPLES)

    logits = np.array([-1.5, 0.3, 2.0], np.float32)
    drawn = np.asarray(jax.vmap(Bernoulli(jnp.asarray(logits)).from_uniform)(u[:, 0, :3]))
    p = np_sigmoid(logits)
    joint = np.array([np.prod(np.where(np.array(c) == 1, p, 1 - p))
                      for c in itertools.product((0, 1), repeat=3)])
    within_sigmas(np.bincount(np.ravel_multi_index(drawn.T, (2, 2, 2)), minlength=8), joint,
                  SAMPLES)

    normal = np.asarray(jax.vmap(gauss.from_uniform)(u[:, 0, :1]))[:, 0]
    assert stats.kstest(normal, stats.norm(1.0, 2.0).cdf).pvalue > 1e-3


# --- the actor-critics ------------------------------------------------------------------------

def _dense(layers, x, act=jnp.tanh):
    for layer in layers[:-1]:
        x = act(layer(x))
    return layers[-1](x)


@pytest.mark.parametrize("network", ["mlp", "gru", "lstm"])
@pytest.mark.parametrize("make_env", [multi_discrete, multi_binary], ids=["multi_discrete",
                                                                          "multi_binary"])
def test_actor_critic_for_multi_actions(network, make_env):
    """The head built for the env's action space: output size, logit gain 1.0 (rows of the
    output matrix orthonormal), no log_std; sample / log_prob / greedy against the NumPy
    distribution of the head's own output."""
    env = make_env()
    space = env.action_space
    net = actor_critic(env, network, (16, 16), "tanh", 0.0, 16)
    params = net.init(jax.random.key(0))
    size = sum(space.nvec) if isinstance(space, rollax.MultiDiscrete) else space.n
    out_w = np.asarray(params.actor[-1].weight, np.float64)
    assert out_w.shape == (size, 16) and params.log_std.shape == (0,)
    np.testing.assert_allclose(out_w @ out_w.T, np.eye(size), atol=1e-5)  # gain 1.0
    obs = jnp.linspace(0.0, 1.0, env.observation_space.shape[0])
    if network == "mlp":
        logits = np.asarray(_dense(params.actor, obs))
        action, log_prob = net.sample(params, obs, jax.random.key(1))
        greedy = net.greedy(params, obs)
        replayed = net.log_prob(params, obs, action)
    else:
        _, features = net.step(params, net.initial_carry(params), obs)
        logits = np.asarray(_dense(params.actor, features))
        dist = net.distribution(params, features)
        action = dist.sample(jax.random.key(1))
        log_prob = replayed = dist.log_prob(action)
        greedy = dist.mode()
    action = np.asarray(action)
    assert action.shape == space.shape and action.dtype == np.int32
    assert bool(space.contains(action))
    if isinstance(space, rollax.MultiDiscrete):
        comps = np_split(logits, space.nvec)
        want_lp = sum(np_log_softmax(c)[a] for c, a in zip(comps, action, strict=True))
        want_greedy = [int(c.argmax()) for c in comps]
    else:
        p = np_sigmoid(logits)
        want_lp = np.sum(np.where(action == 1, np.log(p), np.log(1 - p)))
        want_greedy = (logits > 0).astype(int).tolist()
    assert float(log_prob) == pytest.approx(want_lp, rel=f32_rtol(1e-5))
    assert float(replayed) == float(log_prob)
    assert np.asarray(greedy).tolist() == want_greedy


@pytest.mark.slow
def test_cnn_head_for_multi_discrete():
    net = rollax.CNNActorCritic(image_shape=(4, 4, 1), action_nvec=(3, 4), hidden=(8,))
    params = net.init(jax.random.key(0))
    obs = jnp.linspace(0.0, 1.0, 16)
    action, log_prob = net.sample(params, obs, jax.random.key(1))
    assert action.shape == (2,) and bool(rollax.MultiDiscrete((3, 4)).contains(action))
    assert float(net.log_prob(params, obs, action)) == float(log_prob)
    w = np.asarray(params.actor[-1].weight, np.float64)
    np.testing.assert_allclose(w @ w.T, np.eye(7), atol=1e-5)


def test_heads_take_exactly_one_action_setting():
    with pytest.raises(ValueError, match="give exactly one of num_actions"):
        rollax.MLPActorCritic(observation_size=2, num_actions=2, action_nvec=(2, 2))
    with pytest.raises(ValueError, match="give exactly one of num_actions"):
        rollax.MLPActorCritic(observation_size=2, action_size=1, action_bits=2)
    with pytest.raises(ValueError, match="action_nvec must be a non-empty tuple"):
        rollax.MLPActorCritic(observation_size=2, action_nvec=(2, 0))


# --- the checker, the guard, the refusals -----------------------------------------------------

@pytest.mark.parametrize("space", [rollax.MultiDiscrete((2, 3, 5)), rollax.MultiBinary(3)],
                         ids=["multi_discrete", "multi_binary"])
def test_random_policy_is_uniform_per_component(space):
    policy = RandomPolicy.for_space(space)
    keys = jax.random.split(jax.random.key(0), SAMPLES)
    actions, log_probs = jax.vmap(lambda k: policy.sample(None, None, k))(keys)
    actions = np.asarray(actions)
    assert actions.shape == (SAMPLES, len(space.nvec)) and actions.dtype == np.int32
    assert float(log_probs[0]) == pytest.approx(-np.log(np.prod(space.nvec)), rel=1e-6)
    for k, n in enumerate(space.nvec):
        within_sigmas(np.bincount(actions[:, k], minlength=n), np.full(n, 1 / n), SAMPLES)


def test_probe_actions_of_multi_spaces():
    assert probe_actions(rollax.MultiDiscrete((1, 2, 4))).tolist() == [
        [0, 0, 0], [0, 1, 3], [0, 1, 1], [0, 0, 2], [0, 1, 0]]
    probes = probe_actions(rollax.MultiBinary(2))
    assert probes.dtype == np.int32 and probes.tolist() == [[0, 0], [1, 1], [0, 1]]


def _guard_message(actions, space):
    err, _ = checkify.checkify(lambda a: check_actions(a, space, jnp.int32(3)),
                               errors=checkify.user_checks)(jnp.asarray(actions, jnp.int32))
    return err.get()


def test_guard_names_an_out_of_range_component():
    """A planted bug: one component of one action out of range fails checked mode's action
    check, naming the step, the environment and the action (the old guard read MultiDiscrete
    actions as continuous and only checked them finite)."""
    space = rollax.MultiDiscrete((2, 3))
    actions = np.zeros((4, 2, 2), np.int32)  # (T, B, K)
    assert _guard_message(actions, space) is None
    actions[2, 1] = [1, 3]
    message = _guard_message(actions, space)
    assert message is not None and message.startswith(
        "checked mode: action out of range (component i in [0, nvec[i]), nvec [2, 3]) at "
        "update 3, step 2, env 1: [1 3]")
    bits = np.zeros((4, 2, 3), np.int32)
    bits[1, 0, 2] = 2
    assert "step 1, env 0: [0 0 2]" in _guard_message(bits, rollax.MultiBinary(3))


@dataclasses.dataclass(frozen=True)
class OffByOnePolicy:
    """A planted bug: every action's component 1 is 4, one past the range of
    ``MultiDiscrete((3, 4))``."""

    def init(self):
        return None

    def sample(self, params, observation, key):
        action = jnp.array([0, 4], jnp.int32)  # multi_discrete: nvec (3, 4)
        return action, jnp.float32(0.0)


def test_collected_out_of_range_component_fails_checked_mode():
    """rollax.collect with a policy one past the second component's range: the checked-mode
    guard on the collected batch names the first offending step, environment and action."""
    env = multi_discrete()
    policy = OffByOnePolicy()
    _, traj = rollax.collect(env, policy, None, jax.random.key(0), 3, 4)
    err, _ = checkify.checkify(lambda t: check_collected(t, env.action_space, jnp.int32(1)),
                               errors=checkify.user_checks)(traj)
    message = err.get()
    assert message is not None and message.startswith(
        "checked mode: action out of range (component i in [0, nvec[i]), nvec [3, 4]) at "
        "update 1, step 0, env 0: [0 4]")


@pytest.mark.slow
@pytest.mark.parametrize("make_env", [multi_discrete, multi_binary], ids=["multi_discrete",
                                                                          "multi_binary"])
def test_check_recurrent_takes_multi_actions(make_env):
    """The recurrent probe has one counting categorical per component."""
    report = rollax.check_recurrent(make_env())
    assert report.ok and all(r.status == "passed" for r in report), report


@pytest.mark.slow
@pytest.mark.parametrize("make_env", [multi_discrete, multi_binary], ids=["multi_discrete",
                                                                          "multi_binary"])
def test_guessing_tasks_pass_the_contracts(make_env):
    env = make_env()
    report = rollax.check_env(env, batch_size=8, collect_fn=rollax.collect)
    assert report.ok, str(report)
    net = actor_critic(env, "mlp", (8,), "tanh", 0.0, 8)
    report = rollax.check_collector(rollax.collect, env, net, net.init(jax.random.key(0)),
                                    batch_size=8, num_steps=6)
    assert report.ok, str(report)


def test_check_env_cli_passes_a_multi_discrete_task(capsys):
    code, out, err = run(capsys, "check-env", "custom_envs.guess:multi_discrete", "--json")
    assert code == 0, err
    assert json.loads(out)["ok"] is True


# --- training ---------------------------------------------------------------------------------



@pytest.mark.slow
def test_ppo_trains_a_recurrent_policy_on_multi_binary(capsys, tmp_path):
    summary = train_json(capsys, "--env", "custom_envs.guess:multi_binary", "--algo", "ppo",
                         *TINY_FLAGS["ppo"], "--network", "gru", "--hidden", "8",
                         "--memory-size", "8", "--eval-episodes", "4", "--checked",
                         "--out", tmp_path / "run")
    assert np.isfinite(summary["eval_return_mean"]) and not summary["diverged"]


@pytest.mark.slow
@pytest.mark.parametrize("env, best", [("multi_discrete", 8.0), ("multi_binary", 12.0)])
def test_ppo_learns_the_guessing_tasks(env, best, capsys, tmp_path):
    """16,384 steps: PPO's greedy policy guesses (nearly) every component, where a uniformly
    random one scores 4 * (1/3 + 1/4) = 2.33 of 8 (MultiDiscrete (3, 4)), 6 of 12 (3 bits)."""
    summary = train_json(capsys, "--env", f"custom_envs.guess:{env}", "--algo", "ppo",
                         "--total-steps", "16384", "--num-envs", "16", "--num-steps", "16",
                         "--hidden", "16", "--lr", "0.003", "--eval-episodes", "32",
                         "--out", tmp_path / "run")
    assert summary["eval_return_mean"] >= 0.9 * best
