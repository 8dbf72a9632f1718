"""The gradient lab (rollax.gradients, ``rollax gradients``), against independent expectations.

The exact gradient is checked against a brute-force enumeration of every corridor trajectory
(float64 NumPy, the score written by hand) and against central finite differences of a NumPy
backup of a random stochastic MDP. An unbiased estimator's mean over K batches must lie within
Z standard errors of the exact gradient in every component (Z = 4.5: a two-sided normal tail of
7e-6 per component, about 1e-3 over every component and estimator tested here; the seeds are
fixed, so a pass is reproducible). A biased one must miss by more than BIASED standard errors
on a case built to show its bias.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from helpers import f32_atol
from rollax import gradients
from rollax.cli import main
from rollax.collect import collect
from rollax.envs.corridor import Corridor
from rollax.envs.tabular import TabularEnv
from rollax.exact import FiniteMDP
from rollax.policies import BernoulliPolicy, SoftmaxPolicy

Z = 4.5
BIASED = 8.0
K = 4000

# --------------------------------------------------------------------------------------------
# Cases


def corridor_lab(lam=0.9):
    env = Corridor(horizon=6)
    return gradients.Lab(env, env.to_mdp(), BernoulliPolicy(3), group_size=4, lam=lam)


CORRIDOR_PARAMS = jnp.array([0.3, -0.2, 0.5], jnp.float32)


def random_mdp(seed=0, states=4, actions=3, horizon=4) -> FiniteMDP:
    """Stochastic transitions, random rewards, a terminating sink (the last state) and a start
    spread over the other states."""
    rng = np.random.default_rng(seed)
    p = rng.dirichlet(np.ones(states), size=(states, actions))
    r = rng.normal(size=(states, actions, states))
    term = np.zeros((states, actions, states), bool)
    term[:, :, states - 1] = True
    start = np.r_[rng.dirichlet(np.ones(states - 1)), 0.0]
    return FiniteMDP(p, r, term, start, horizon)


def two_scales_mdp() -> FiniteMDP:
    """Two equally likely start states, one decision each, then the end: action 1 earns 1 in
    state 0 and 10 in state 1, action 0 earns nothing. Groups of unequal reward scale."""
    p = np.zeros((3, 2, 3))
    p[:, :, 2] = 1.0
    r = np.zeros((3, 2, 3))
    r[0, 1, 2], r[1, 1, 2] = 1.0, 10.0
    term = np.zeros((3, 2, 3), bool)
    term[:, :, 2] = True
    return FiniteMDP(p, r, term, np.array([0.5, 0.5, 0.0]), 1)


def tabular_lab(mdp, group_size=4, lam=0.9):
    env = TabularEnv(mdp)
    return gradients.Lab(env, mdp, SoftmaxPolicy(mdp.num_states, mdp.num_actions),
                         group_size=group_size, lam=lam)


def zscores(grads, exact):
    """Per-component (mean - exact) / s.e.; components without spread must be exact."""
    g = np.asarray(grads, np.float64).reshape(len(grads), -1)
    star = np.asarray(exact, np.float64).reshape(-1)
    se = g.std(0, ddof=1) / np.sqrt(len(g))
    flat = se == 0
    assert np.allclose(g.mean(0)[flat], star[flat], atol=1e-6)
    return (g.mean(0)[~flat] - star[~flat]) / se[~flat]


# --------------------------------------------------------------------------------------------
# Fixtures: each compiled program is built once per module


@pytest.fixture(scope="module")
def corridor_samples():
    lab = corridor_lab()
    grads = gradients.estimate(lab, CORRIDOR_PARAMS, jax.random.key(0),
                               list(gradients.ESTIMATORS), 16, K)
    star = gradients.exact_gradient(lab.mdp, lab.policy, CORRIDOR_PARAMS)
    return lab, {k: np.asarray(v) for k, v in grads.items()}, np.asarray(star)


@pytest.fixture(scope="module")
def random_samples():
    lab = tabular_lab(random_mdp())
    params = 0.5 * jax.random.normal(jax.random.key(3), (4, 3))
    grads = gradients.estimate(lab, params, jax.random.key(1), sorted(gradients.UNBIASED), 8, K)
    star = gradients.exact_gradient(lab.mdp, lab.policy, params)
    return {k: np.asarray(v) for k, v in grads.items()}, np.asarray(star)


@pytest.fixture(scope="module")
def two_scales_samples():
    lab = tabular_lab(two_scales_mdp())
    params = lab.policy.init()
    names = ["score", "group-loo", "group-std", "per-step"]
    grads = gradients.estimate(lab, params, jax.random.key(2), names, 8, K)
    star = gradients.exact_gradient(lab.mdp, lab.policy, params)
    return {k: np.asarray(v) for k, v in grads.items()}, np.asarray(star)


# --------------------------------------------------------------------------------------------
# (a) The exact gradient


def corridor_gradient_by_enumeration(theta, horizon):
    """sum over every trajectory tau of p(tau) R(tau) sum_t d/dtheta log pi(a_t | s_t), by
    recursion over the corridor's branches (float64; the score of a Bernoulli logit is
    1 - sigmoid for a right move, -sigmoid for a left one)."""
    sig = 1.0 / (1.0 + np.exp(-np.asarray(theta, np.float64)))

    def walk(s, t, prob, ret, score):
        if s == 3 or t == horizon:
            return prob * ret * score
        total = np.zeros(3)
        for a, p_a, d in ((1, sig[s], 1.0 - sig[s]), (0, 1.0 - sig[s], -sig[s])):
            s2 = min(max(s + (1 if a == 1 else -1), 0), 3)
            step = score.copy()
            step[s] += d
            total += walk(s2, t + 1, prob * p_a, ret + (1.0 if s2 == 3 else -0.01), step)
        return total

    return sum(walk(start, 0, 0.5, 0.0, np.zeros(3)) for start in (0, 1))


def test_exact_gradient_matches_trajectory_enumeration():
    env = Corridor(horizon=5)
    policy = BernoulliPolicy(3)
    for theta in ([0.0, 0.0, 0.0], [0.3, -0.2, 0.5], [-1.0, 0.7, 1.5]):
        got = gradients.exact_gradient(env.to_mdp(), policy, jnp.array(theta, jnp.float32))
        np.testing.assert_allclose(got, corridor_gradient_by_enumeration(theta, 5),
                                   atol=f32_atol(2e-6))


def numpy_return(mdp, logits):
    """Expected return by a float64 NumPy backup of the softmax policy of ``logits``."""
    pi = np.exp(logits - logits.max(1, keepdims=True))
    pi /= pi.sum(1, keepdims=True)
    p, r, term = (np.asarray(x, np.float64) for x in (mdp.transitions, mdp.rewards, mdp.terminal))
    v = np.zeros(mdp.num_states)
    for _ in range(mdp.horizon):
        v = (pi * ((p * r).sum(-1) + (p * (1 - term)) @ v)).sum(-1)
    return float(np.asarray(mdp.start) @ v)


def test_exact_gradient_matches_finite_differences_of_a_numpy_backup():
    mdp = random_mdp(seed=5)
    logits = np.random.default_rng(1).normal(size=(4, 3))
    h = 1e-5
    fd = np.zeros_like(logits)
    for idx in np.ndindex(*logits.shape):
        up, down = logits.copy(), logits.copy()
        up[idx] += h
        down[idx] -= h
        fd[idx] = (numpy_return(mdp, up) - numpy_return(mdp, down)) / (2 * h)
    got = gradients.exact_gradient(mdp, SoftmaxPolicy(4, 3), jnp.asarray(logits, jnp.float32))
    np.testing.assert_allclose(got, fd, atol=2e-5)


def test_value_table_rows_are_the_values_with_k_steps_left():
    mdp = random_mdp(seed=2)
    policy = SoftmaxPolicy(4, 3)
    params = jax.random.normal(jax.random.key(0), (4, 3))
    table = np.asarray(gradients.value_table(mdp, policy, params))
    assert table.shape == (5, 4) and np.all(table[0] == 0)
    for k in range(1, 5):
        shorter = FiniteMDP(mdp.transitions, mdp.rewards, mdp.terminal, mdp.start, k)
        from rollax.exact import policy_table, policy_values

        np.testing.assert_allclose(
            table[k], policy_values(shorter, policy_table(policy, params, 4, 3)), atol=1e-5)


# --------------------------------------------------------------------------------------------
# Batches


@pytest.mark.slow
def test_groups_share_a_start_and_one_group_is_collect():
    lab = corridor_lab()
    traj = gradients.lab_batch(lab, CORRIDOR_PARAMS, jax.random.key(7), 64)
    starts = np.asarray(traj.observation[0]).reshape(16, 4)
    assert (starts == starts[:, :1]).all() and len(np.unique(starts[:, 0])) == 2
    actions = np.asarray(traj.action).reshape(6, 16, 4)
    assert not all((actions[..., j] == actions[..., 0]).all() for j in range(1, 4))
    single = gradients.Lab(lab.env, lab.mdp, lab.policy, group_size=1)
    ours = gradients.lab_batch(single, CORRIDOR_PARAMS, jax.random.key(7), 64)
    _, theirs = collect(lab.env, lab.policy, CORRIDOR_PARAMS, jax.random.key(7), 64, 6)
    for a, b in zip(ours, theirs):
        np.testing.assert_array_equal(a, b)


# --------------------------------------------------------------------------------------------
# (b) Unbiased estimators


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(gradients.UNBIASED))
def test_unbiased_on_the_corridor(corridor_samples, name):
    _, grads, star = corridor_samples
    assert np.abs(zscores(grads[name], star)).max() < Z


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(gradients.UNBIASED))
def test_unbiased_on_a_random_stochastic_mdp(random_samples, name):
    grads, star = random_samples
    assert np.abs(zscores(grads[name], star)).max() < Z


@pytest.mark.slow
def test_group_loo_is_unbiased_where_group_std_is_not(two_scales_samples):
    grads, star = two_scales_samples
    assert np.abs(zscores(grads["group-loo"], star)).max() < Z


# --------------------------------------------------------------------------------------------
# (c) Biased estimators, each on a case that shows it


@pytest.mark.slow
def test_group_std_equalises_groups_of_unequal_scale(two_scales_samples):
    grads, star = two_scales_samples
    row = gradients.summarise(grads["group-std"], star)
    assert row["bias"] > BIASED * row["bias_se"] and row["bias"] > BIASED * row["noise"]
    # the exact gradient of state 1 is ten times state 0's; dividing by each group's spread
    # makes them about equal (the mean gradient turns away from the exact one)
    exact_ratio = np.linalg.norm(star[1]) / np.linalg.norm(star[0])
    mean = grads["group-std"].mean(0)
    assert exact_ratio == pytest.approx(10.0, rel=1e-5)
    assert np.linalg.norm(mean[1]) / np.linalg.norm(mean[0]) < 1.5
    assert row["cosine"] < 0.9


@pytest.mark.slow
def test_group_std_is_the_advantage_grpo_trains_with():
    """One definition for the lab's ``group-std`` and ``--algo grpo --scale-by-std``: the
    population standard deviation (``ddof = 0``) plus 1e-8, checked against NumPy and against
    GRPO's own advantages on one batch."""
    from rollax.algos import grpo

    lab = corridor_lab()
    traj = gradients.lab_batch(lab, CORRIDOR_PARAMS, jax.random.key(3), 32)
    returns = np.asarray(traj.reward.sum(axis=0), np.float64).reshape(8, 4)
    spread = returns.std(axis=1, keepdims=True)  # NumPy's default: ddof 0
    assert (spread > 0).sum() >= 4  # groups whose returns differ: the divisor matters
    advantage = (returns - returns.mean(axis=1, keepdims=True)) / (spread + 1e-8)
    want = gradients.score_gradient(lab, CORRIDOR_PARAMS, traj,
                                    jnp.asarray(advantage.reshape(-1), jnp.float32))
    got = gradients.ESTIMATORS["group-std"](lab, CORRIDOR_PARAMS, traj, None)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7)
    ours = grpo.group_advantages(traj.reward.sum(axis=0), lab.group_size, True)
    np.testing.assert_array_equal(
        gradients.score_gradient(lab, CORRIDOR_PARAMS, traj, ours), got)


@pytest.mark.slow
def test_per_step_equals_score_when_every_episode_has_one_step(two_scales_samples):
    grads, _ = two_scales_samples
    np.testing.assert_allclose(grads["per-step"], grads["score"], rtol=1e-5, atol=1e-7)


@pytest.mark.slow
def test_per_step_is_biased_when_lengths_differ(corridor_samples):
    _, grads, star = corridor_samples
    row = gradients.summarise(grads["per-step"], star)
    assert row["bias"] > BIASED * row["bias_se"] and row["bias"] > BIASED * row["noise"]


@pytest.mark.slow
def test_group_mean_is_shrunk_by_g_minus_one_over_g(corridor_samples):
    lab, grads, star = corridor_samples
    row = gradients.summarise(grads["group-mean"], star)
    assert row["bias"] > BIASED * row["bias_se"]
    g = lab.group_size
    assert np.abs(zscores(grads["group-mean"], star * (g - 1) / g)).max() < Z
    # leave-one-out is the same estimate rescaled, batch by batch
    np.testing.assert_allclose(grads["group-loo"], grads["group-mean"] * g / (g - 1),
                               rtol=1e-4, atol=1e-6)


@pytest.mark.slow
def test_gae_with_a_fitted_critic_is_biased(corridor_samples):
    _, grads, star = corridor_samples
    row = gradients.summarise(grads["gae-fitted"], star)
    assert row["bias"] > BIASED * row["bias_se"] and row["bias"] > BIASED * row["noise"]


@pytest.fixture(scope="module")
def perturbed_gae():
    """GAE with the exact values plus a fixed perturbation (V_0 kept 0), at lambda 0 and 1."""
    lab = corridor_lab()
    exact_values = gradients.value_table(lab.mdp, lab.policy, CORRIDOR_PARAMS)
    noise = 0.3 * jax.random.normal(jax.random.key(11), exact_values.shape)
    wrong = exact_values + noise.at[0].set(0.0)
    left = lab.horizon - jnp.arange(lab.horizon)[:, None]

    @jax.jit
    def sample(key, lam):
        traj = gradients.lab_batch(lab, CORRIDOR_PARAMS, key, 16)
        now = wrong[left, traj.observation]
        after = wrong[left - 1, gradients.next_states(traj)]
        return gradients.gae_gradient(lab, CORRIDOR_PARAMS, traj, now, after, lam)

    keys = jax.random.split(jax.random.key(4), K)
    star = gradients.exact_gradient(lab.mdp, lab.policy, CORRIDOR_PARAMS)
    return {lam: np.asarray(jax.vmap(sample, in_axes=(0, None))(keys, lam))
            for lam in (0.0, 1.0)}, np.asarray(star)


@pytest.mark.slow
def test_gae_with_an_inexact_critic_is_biased_below_lambda_one(perturbed_gae):
    grads, star = perturbed_gae
    row = gradients.summarise(grads[0.0], star)
    assert row["bias"] > BIASED * row["bias_se"] and row["bias"] > BIASED * row["noise"]
    assert np.abs(zscores(grads[1.0], star)).max() < Z  # lambda 1: the critic is a baseline


# --------------------------------------------------------------------------------------------
# (d) PPO's first epoch


@pytest.mark.slow
def test_ppo_first_epoch_equals_score_on_the_same_batch(corridor_samples):
    _, grads, _ = corridor_samples
    np.testing.assert_allclose(grads["ppo-first-epoch"], grads["score"], rtol=1e-5, atol=1e-7)


# --------------------------------------------------------------------------------------------
# The table


def test_summarise_on_known_samples():
    grads = np.array([[1.0, 0.0], [3.0, 0.0], [2.0, 2.0], [2.0, -2.0]])
    row = gradients.summarise(grads, np.array([1.0, 0.0]))
    assert row["bias"] == pytest.approx(1.0)
    assert row["variance"] == pytest.approx(2 / 3 + 8 / 3)
    assert row["bias_se"] == pytest.approx(np.sqrt(2 / 3 / 4))
    assert row["noise"] == pytest.approx(np.sqrt((2 / 3 + 8 / 3) / 4))
    assert row["mse"] == pytest.approx((0 + 4 + 5 + 5) / 4)
    assert row["mse"] == pytest.approx(row["bias"] ** 2 + 3 / 4 * row["variance"])
    assert row["cosine"] == pytest.approx(1.0)
    assert row["mean_cosine"] == pytest.approx((1 + 1 + 2 * 2 / np.sqrt(8)) / 4)


def test_the_lab_needs_the_observation_to_be_the_state_index():
    from rollax.envs.base import Discrete

    class Relabelled:
        observation_space = Discrete(2)

        def to_mdp(self):
            return two_scales_mdp()

    with pytest.raises(ValueError, match=r"observation to be the state index \(a Discrete\(3\)"):
        gradients.finite_mdp(Relabelled(), "relabelled")
    with pytest.raises(ValueError, match="not a finite task"):
        gradients.finite_mdp(object(), "plain")


@pytest.mark.parametrize("episodes, batches, group, names, message", [
    ([6], 10, 4, ["score"], "multiples of group_size"),
    ([8], 1, 4, ["score"], "batches must be an integer >= 2"),
    ([8], 10, 4, ["scor"], "did you mean score"),
    ([8], 10, 1, ["group-std"], "group_size must be at least 2"),
    ([0], 10, 1, ["score"], "episodes must be a positive integer"),
])
def test_bad_settings(episodes, batches, group, names, message):
    with pytest.raises(ValueError, match=message):
        gradients.check_lab(episodes, batches, group, names, 0.9)


# --------------------------------------------------------------------------------------------
# (e) The command


@pytest.mark.slow
def test_command_json(capsys, tmp_path):
    figure = tmp_path / "mse.png"
    code = main(["gradients", "--json", "--episodes", "4,8", "--batches", "8",
                 "--out", str(figure)])
    out, err = capsys.readouterr()
    assert code == 0, err
    obj = json.loads(out)  # exactly one JSON object
    names = list(gradients.ESTIMATORS)
    assert [(r["estimator"], r["episodes"]) for r in obj["rows"]] == [
        (n, e) for n in names for e in (4, 8)]
    assert {"bias", "bias_se", "noise", "variance", "mse", "cosine", "mean_cosine",
            "unbiased"} <= set(obj["rows"][0])
    assert obj["env"] == "corridor" and obj["horizon"] == 8 and obj["batches"] == 8
    assert obj["exact_gradient_norm"] > 0 and len(obj["exact_gradient"]) == 3
    assert obj["figure"] == str(figure) and figure.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("argv, message", [
    (["--env", "CartPole-v1"], "CartPole-v1 is not a finite task"),
    (["--env", "FrozenLak-v1"], "did you mean FrozenLake-v1"),
    (["--episodes", "6"], "episodes must be multiples of group_size 4"),
    (["--episodes", "8,x"], "episodes must be a comma list of whole numbers"),
    (["--batches", "1"], "batches must be an integer >= 2"),
    (["--estimators", "score,bogus"], "unknown estimator 'bogus'"),
    (["--lam", "2"], "lam must be a number in [0.0, 1.0]"),
    (["--out", "figure.txt"], "out must name a figure file ending in .png, .svg or .pdf"),
    (["--bogus"], "Unrecognized options"),
])
def test_command_bad_input(capsys, tmp_path, monkeypatch, argv, message):
    monkeypatch.chdir(tmp_path)
    code = main(["gradients", *argv])
    out, err = capsys.readouterr()
    assert code == 2 and out == "" and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1 and err.startswith("rollax gradients: error: ")
    assert message in err
    assert list(tmp_path.iterdir()) == []


def test_the_lab_is_math_it_imports_no_algorithm_run_or_command_line_module():
    tree = ast.parse(Path(gradients.__file__).read_text())
    imported = [node.module for node in ast.walk(tree)
                if isinstance(node, ast.ImportFrom) and node.module]
    imported += [a.name for node in ast.walk(tree) if isinstance(node, ast.Import)
                 for a in node.names]
    assert not [m for m in imported if m.split(".")[:2] in (
        ["rollax", "algos"], ["rollax", "run"], ["rollax", "cli"])]
