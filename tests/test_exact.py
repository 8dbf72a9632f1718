"""Exact (dynamic-programming) evaluation, checked against independent references.

Every expectation here comes from a hand calculation, a plain NumPy / Python reference written
in this file (loop backups, brute-force trajectory enumeration, finite differences), Gymnasium's
own transition tables, or Monte Carlo sampling with a stated statistical tolerance.
"""

from __future__ import annotations

import itertools
import math

import gymnasium
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rollax
from helpers import f32_atol, f32_rtol
from rollax.envs.corridor import Corridor

# --------------------------------------------------------------------------------------------
# Independent references (NumPy / plain Python, float64)
# --------------------------------------------------------------------------------------------


def ref_policy_values_loop(P, R, term, pi, horizon):
    """Policy evaluation by the finite-horizon backup, written as explicit loops (float64)."""
    P, R, term, pi = (np.asarray(x, np.float64) for x in (P, R, term, pi))
    S, A = pi.shape
    v = np.zeros(S)
    for _ in range(horizon):
        new = np.zeros(S)
        for s in range(S):
            for a in range(A):
                q = 0.0
                for s2 in range(S):
                    q += P[s, a, s2] * (R[s, a, s2] + (1.0 - term[s, a, s2]) * v[s2])
                new[s] += pi[s, a] * q
        v = new
    return v


def ref_optimal_values_loop(P, R, term, horizon):
    """Optimal finite-horizon values by the max backup, explicit loops (float64)."""
    P, R, term = (np.asarray(x, np.float64) for x in (P, R, term))
    S, A, _ = P.shape
    v = np.zeros(S)
    for _ in range(horizon):
        new = np.full(S, -np.inf)
        for s in range(S):
            for a in range(A):
                q = 0.0
                for s2 in range(S):
                    q += P[s, a, s2] * (R[s, a, s2] + (1.0 - term[s, a, s2]) * v[s2])
                new[s] = max(new[s], q)
        v = new
    return v


def ref_backup_vec(P, R, term, horizon, pi=None):
    """Vectorised NumPy version of the same backup (used for the large Gymnasium tables; it is
    itself checked against the loop version on random MDPs)."""
    P, R, term = (np.asarray(x, np.float64) for x in (P, R, term))
    r = (P * R).sum(-1)
    c = P * (1.0 - term)
    v = np.zeros(P.shape[0])
    for _ in range(horizon):
        q = r + c @ v
        v = q.max(-1) if pi is None else (np.asarray(pi, np.float64) * q).sum(-1)
    return v


def brute_force_return(P, R, term, start, horizon, pi_t):
    """Expected return by enumerating every trajectory ``(s0, a0, s1, a1, ..., s_H)``.

    ``pi_t(t, s)`` gives the action distribution at time ``t`` in state ``s`` (so it also
    covers non-stationary policies). After termination the remaining entries are fixed to
    the canonical value 0 so that each real trajectory is counted exactly once.
    """
    P, R, term, start = (np.asarray(x, np.float64) for x in (P, R, term, start))
    S, A, _ = P.shape
    total = 0.0
    for s0 in range(S):
        if start[s0] == 0.0:
            continue
        for seq in itertools.product(range(A), range(S), repeat=horizon):
            prob, ret, s, ended = start[s0], 0.0, s0, False
            for t in range(horizon):
                a, s2 = seq[2 * t], seq[2 * t + 1]
                if ended:
                    if a != 0 or s2 != 0:
                        prob = 0.0
                    continue
                prob *= pi_t(t, s)[a] * P[s, a, s2]
                ret += R[s, a, s2]
                ended = bool(term[s, a, s2])
                s = s2
            total += prob * ret
    return total


def sigmoid(x):
    return 1.0 / (1.0 + math.exp(-x))


def corridor_enumerated_return(theta, horizon):
    """Exact corridor return of the Bernoulli policy by enumerating all 2^H action sequences
    from each start (0 or 1, probability 1/2); pure Python floats (float64)."""
    total = 0.0
    for start in (0, 1):
        for actions in itertools.product((0, 1), repeat=horizon):
            pos, prob, ret, done = start, 0.5, 0.0, False
            for a in actions:
                if done:
                    if a != 0:  # count each terminated trajectory once
                        prob = 0.0
                    continue
                p_right = sigmoid(float(theta[min(pos, 2)]))
                prob *= p_right if a == 1 else 1.0 - p_right
                pos = min(max(pos + (1 if a == 1 else -1), 0), 3)
                if pos == 3:
                    ret += 1.0
                    done = True
                else:
                    ret -= 0.01
            total += prob * ret
    return total


def random_mdp(seed):
    rng = np.random.RandomState(seed)
    S, A, H = rng.randint(2, 7), rng.randint(2, 4), rng.randint(1, 8)
    P = rng.dirichlet(np.ones(S), size=(S, A))
    R = rng.normal(size=(S, A, S))
    term = rng.rand(S, A, S) < 0.2
    start = rng.dirichlet(np.ones(S))
    pi = rng.dirichlet(np.ones(A), size=S)
    return P, R, term, start, H, pi


def tiny_mdp(seed):
    rng = np.random.RandomState(1000 + seed)
    S, A, H = 2, 2, rng.randint(1, 4)
    P = rng.dirichlet(np.ones(S), size=(S, A))
    R = rng.normal(size=(S, A, S))
    term = rng.rand(S, A, S) < 0.2
    start = rng.dirichlet(np.ones(S))
    pi = rng.dirichlet(np.ones(A), size=S)
    return P, R, term, start, H, pi


# --------------------------------------------------------------------------------------------
# Module-scope fixtures
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def corridor_mdp():
    return Corridor(horizon=8).to_mdp()


@pytest.fixture(scope="module")
def bernoulli():
    return rollax.BernoulliPolicy(3)


@pytest.fixture(scope="module")
def corridor_return_fns(corridor_mdp, bernoulli):
    f = lambda th: rollax.policy_return(corridor_mdp, bernoulli, th)  # noqa: E731
    return f, jax.jit(f), jax.jit(jax.grad(f))


# --------------------------------------------------------------------------------------------
# 1. Corridor exact returns (hand calculations)
# --------------------------------------------------------------------------------------------

LEFT_TABLE = np.array([[1.0, 0.0]] * 4)
UNIFORM_TABLE = np.array([[0.5, 0.5]] * 4)
RIGHT_TABLE = np.array([[0.0, 1.0]] * 4)


@pytest.mark.parametrize(
    "table, expected",
    [
        # 8 live steps of -0.01 from either start, the goal is never reached.
        (LEFT_TABLE, -0.08),
        # value of docs/contract.md §5 (also re-derived by the enumeration test below).
        (UNIFORM_TABLE, 0.466875),
        # from 0: -0.01 -0.01 +1 = 0.98; from 1: -0.01 +1 = 0.99; mean 0.985.
        (RIGHT_TABLE, 0.985),
    ],
    ids=["always-left", "uniform", "always-right"],
)
def test_corridor_expected_return_horizon_8(corridor_mdp, table, expected):
    got = float(rollax.expected_return(corridor_mdp, jnp.asarray(table, jnp.float32)))
    assert got == pytest.approx(expected, abs=1e-6)


def test_corridor_uniform_hand_value_matches_enumeration():
    # independent re-derivation of 0.466875: theta = 0 is the uniform Bernoulli policy.
    assert corridor_enumerated_return(np.zeros(3), 8) == pytest.approx(0.466875, abs=1e-12)


def test_corridor_horizon_2_always_right():
    mdp = Corridor(horizon=2).to_mdp()
    # from 0: two steps of -0.01, truncated at 2; from 1: -0.01 then +1.
    expected = (-0.02 + 0.99) / 2
    got = float(rollax.expected_return(mdp, jnp.asarray(RIGHT_TABLE, jnp.float32)))
    assert got == pytest.approx(expected, abs=1e-6)


def test_corridor_optimal_return():
    assert float(rollax.optimal_return(Corridor(horizon=8).to_mdp())) == pytest.approx(
        0.985, abs=1e-6
    )
    # horizon 1: from 0 one step right reaches 1 (-0.01), from 1 reaches 2 (-0.01); moving left
    # also costs -0.01 and the goal is out of reach: -0.01.
    assert float(rollax.optimal_return(Corridor(horizon=1).to_mdp())) == pytest.approx(
        -0.01, abs=1e-7
    )
    # horizon 2: from 0 the goal is out of reach (-0.02); from 1 it is reached (0.99).
    assert float(rollax.optimal_return(Corridor(horizon=2).to_mdp())) == pytest.approx(
        (-0.02 + 0.99) / 2, abs=1e-6
    )
    # per-state optimal values at horizon 8: 0.98, 0.99, 1.0 and 0 at the (never live) goal.
    np.testing.assert_allclose(
        np.asarray(rollax.optimal_values(Corridor(horizon=8).to_mdp())),
        [0.98, 0.99, 1.0, 0.0],
        atol=1e-6,
    )


def test_corridor_mdp_table_by_hand(corridor_mdp):
    P = np.asarray(corridor_mdp.transitions)
    for s in range(3):
        assert P[s, 0, max(s - 1, 0)] == 1.0
        assert P[s, 1, s + 1] == 1.0
    assert np.asarray(corridor_mdp.rewards)[2, 1, 3] == 1.0
    assert np.asarray(corridor_mdp.rewards)[0, 0, 0] == -0.01
    assert bool(np.asarray(corridor_mdp.terminal)[2, 1, 3])
    np.testing.assert_array_equal(np.asarray(corridor_mdp.start), [0.5, 0.5, 0, 0])
    assert corridor_mdp.horizon == 8


# --------------------------------------------------------------------------------------------
# 2. policy_return of the Bernoulli policy vs. enumeration
# --------------------------------------------------------------------------------------------


def test_policy_table_bernoulli_by_hand(bernoulli):
    theta = np.array([0.7, -1.2, 2.0], np.float32)
    table = np.asarray(rollax.policy_table(bernoulli, jnp.asarray(theta), 4, 2))
    for pos in range(4):
        p = sigmoid(float(theta[min(pos, 2)]))
        np.testing.assert_allclose(table[pos], [1 - p, p], rtol=f32_rtol(1e-6))


@pytest.mark.parametrize("horizon", [1, 3, 6])
def test_policy_return_matches_enumeration(bernoulli, horizon):
    mdp = Corridor(horizon=horizon).to_mdp()
    f = lambda th: rollax.policy_return(mdp, bernoulli, th)  # noqa: E731
    jf = jax.jit(f)
    rng = np.random.RandomState(horizon)
    for theta in [np.zeros(3), *rng.normal(scale=1.5, size=(3, 3))]:
        expected = corridor_enumerated_return(theta, horizon)
        th = jnp.asarray(theta, jnp.float32)
        assert float(f(th)) == pytest.approx(expected, abs=f32_atol(2e-6))
        assert float(jf(th)) == pytest.approx(expected, abs=f32_atol(2e-6))


def test_policy_return_horizon_8_matches_enumeration(corridor_return_fns):
    f, jf, _ = corridor_return_fns
    for theta in np.random.RandomState(8).normal(scale=2.0, size=(3, 3)):
        expected = corridor_enumerated_return(theta, 8)
        th = jnp.asarray(theta, jnp.float32)
        assert float(f(th)) == pytest.approx(expected, abs=f32_atol(2e-6))
        assert float(jf(th)) == pytest.approx(expected, abs=f32_atol(2e-6))


# --------------------------------------------------------------------------------------------
# 3. Exact gradient vs. central finite differences of the float64 reference
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_exact_gradient_matches_finite_differences(corridor_return_fns, seed):
    _, _, grad_fn = corridor_return_fns
    theta = np.random.RandomState(100 + seed).normal(size=3)
    if seed == 0:
        theta = np.zeros(3)
    eps = 1e-5
    fd = np.zeros(3)
    for k in range(3):
        e = np.zeros(3)
        e[k] = eps
        fd[k] = (
            corridor_enumerated_return(theta + e, 8) - corridor_enumerated_return(theta - e, 8)
        ) / (2 * eps)
    got = np.asarray(grad_fn(jnp.asarray(theta, jnp.float32)), np.float64)
    np.testing.assert_allclose(got, fd, atol=1e-4)


# --------------------------------------------------------------------------------------------
# 4. Sampled REINFORCE gradient vs. exact gradient
# --------------------------------------------------------------------------------------------

REINFORCE_THETA = np.array([0.3, -0.5, 0.2], np.float32)
REINFORCE_B, REINFORCE_T = 2**16, 8


@pytest.fixture(scope="module")
def reinforce_batch(bernoulli):
    env = rollax.make("corridor", horizon=8)
    _, traj = rollax.collect(
        env, bernoulli, jnp.asarray(REINFORCE_THETA), jax.random.key(20240611),
        REINFORCE_B, REINFORCE_T,
    )
    return traj


def numpy_reinforce_per_episode(traj, theta):
    """Per-episode REINFORCE (reward-to-go) gradient contributions, shape (B, 3), float64."""
    obs = np.asarray(traj.observation)
    act = np.asarray(traj.action).astype(np.float64)
    rew = np.asarray(traj.reward, np.float64)
    active = np.asarray(traj.active)
    rtg = np.flip(np.cumsum(np.flip(rew, 0), 0), 0)  # G_t = sum_{k >= t} r_k
    cell = np.minimum(obs, 2)
    p_right = 1.0 / (1.0 + np.exp(-np.asarray(theta, np.float64)[cell]))
    score = act - p_right  # d log pi(a | s) / d theta[cell]
    contrib = np.where(active, score * rtg, 0.0)  # (T, B)
    g = np.zeros((obs.shape[1], 3))
    for k in range(3):
        g[:, k] = np.where(cell == k, contrib, 0.0).sum(0)
    return g


def test_reinforce_batch_is_sane(reinforce_batch):
    traj = reinforce_batch
    assert traj.reward.shape == (REINFORCE_T, REINFORCE_B)
    # every episode ends within the horizon: exactly one terminated-or-truncated event.
    events = np.asarray(traj.terminated) | np.asarray(traj.truncated)
    np.testing.assert_array_equal(events.sum(0), 1)
    # the policy's stored log-probabilities are those of the Bernoulli policy.
    cell = np.minimum(np.asarray(traj.observation), 2)
    p = 1.0 / (1.0 + np.exp(-REINFORCE_THETA.astype(np.float64)[cell]))
    lp = np.where(np.asarray(traj.action) == 1, np.log(p), np.log1p(-p))
    np.testing.assert_allclose(np.asarray(traj.log_prob), lp, atol=f32_atol(1e-5))


def test_sampled_reinforce_gradient_matches_exact(reinforce_batch, corridor_return_fns):
    _, _, grad_fn = corridor_return_fns
    g = numpy_reinforce_per_episode(reinforce_batch, REINFORCE_THETA)
    mean = g.mean(0)
    se = g.std(0, ddof=1) / math.sqrt(REINFORCE_B)
    exact = np.asarray(grad_fn(jnp.asarray(REINFORCE_THETA)), np.float64)
    # Independent cross-check of the exact gradient itself (finite differences, float64).
    fd = np.array([
        (corridor_enumerated_return(REINFORCE_THETA + 1e-5 * np.eye(3)[k], 8)
         - corridor_enumerated_return(REINFORCE_THETA - 1e-5 * np.eye(3)[k], 8)) / 2e-5
        for k in range(3)
    ])
    np.testing.assert_allclose(exact, fd, atol=1e-4)
    # Monte Carlo tolerance: the episode-mean of an unbiased estimator; |mean - exact| <= 5
    # standard errors per component (two-sided failure probability ~6e-7 per component if the
    # estimator is unbiased, for a CLT-normal mean of 65536 i.i.d. episodes).
    assert np.all(se > 0)
    assert np.all(np.abs(mean - exact) <= 5 * se), (mean, exact, se)


@pytest.mark.slow
def test_reinforce_loss_gradient_equals_minus_numpy_mean(reinforce_batch, bernoulli):
    traj = reinforce_batch
    g = numpy_reinforce_per_episode(traj, REINFORCE_THETA)
    rew = np.asarray(traj.reward, np.float64)
    rtg = np.flip(np.cumsum(np.flip(rew, 0), 0), 0).copy()

    def loss(params, returns):
        lp = jax.vmap(jax.vmap(bernoulli.log_prob, in_axes=(None, 0, 0)), in_axes=(None, 0, 0))(
            params, traj.observation, traj.action
        )
        return rollax.reinforce_loss(lp, returns, traj.active)

    # float32 (the library's working precision). The backward pass of the logit gather is a
    # scatter-add that accumulates ~1.7e5 float32 terms per logit sequentially, so its rounding
    # error is about 1e-4 of sum|terms|/B (observed ~7e-5); allow 1e-3 of that scale.
    grad32 = np.asarray(
        jax.jit(jax.grad(loss))(jnp.asarray(REINFORCE_THETA), jnp.asarray(rtg, jnp.float32)),
        np.float64,
    )
    cell = np.minimum(np.asarray(traj.observation), 2)
    p_right = 1.0 / (1.0 + np.exp(-REINFORCE_THETA.astype(np.float64)[cell]))
    terms = np.where(np.asarray(traj.active), (np.asarray(traj.action) - p_right) * rtg, 0.0)
    scale = np.array([np.abs(terms[cell == k]).sum() for k in range(3)]) / REINFORCE_B
    assert np.all(np.abs(grad32 - (-g.mean(0))) <= 1e-3 * scale), (grad32, -g.mean(0), scale)
    # float64: the same loss agrees with minus the NumPy mean to round-off.
    with jax.enable_x64(True):
        grad64 = np.asarray(
            jax.grad(loss)(jnp.asarray(REINFORCE_THETA, jnp.float64), jnp.asarray(rtg))
        )
    np.testing.assert_allclose(grad64, -g.mean(0), rtol=1e-9, atol=1e-12)


# --------------------------------------------------------------------------------------------
# 5. Random finite MDPs vs. NumPy loops and brute force
# --------------------------------------------------------------------------------------------


def make_mdp(P, R, term, start, H):
    return rollax.FiniteMDP(P, R, term, start, H)


@pytest.mark.parametrize("seed", range(10))
def test_random_mdp_policy_evaluation(seed):
    P, R, term, start, H, pi = random_mdp(seed)
    mdp = make_mdp(P, R, term, start, H)
    ref_v = ref_policy_values_loop(P, R, term, pi, H)
    np.testing.assert_allclose(ref_backup_vec(P, R, term, H, pi), ref_v, rtol=1e-12, atol=1e-12)
    v = np.asarray(rollax.policy_values(mdp, jnp.asarray(pi, jnp.float32)))
    np.testing.assert_allclose(v, ref_v, rtol=1e-5, atol=1e-5)
    er = float(rollax.expected_return(mdp, jnp.asarray(pi, jnp.float32)))
    assert er == pytest.approx(float(start @ ref_v), rel=1e-5, abs=1e-5)
    # the uniform table
    S, A = pi.shape
    np.testing.assert_allclose(np.asarray(rollax.uniform_policy(mdp)), np.full((S, A), 1 / A))


@pytest.mark.parametrize("seed", range(10))
def test_random_mdp_optimal_values(seed):
    P, R, term, start, H, _ = random_mdp(seed)
    S, A = P.shape[:2]
    mdp = make_mdp(P, R, term, start, H)
    ref_v = ref_optimal_values_loop(P, R, term, H)
    np.testing.assert_allclose(ref_backup_vec(P, R, term, H), ref_v, rtol=1e-12, atol=1e-12)
    v = np.asarray(rollax.optimal_values(mdp))
    np.testing.assert_allclose(v, ref_v, rtol=1e-5, atol=1e-5)
    opt = float(rollax.optimal_return(mdp))
    assert opt == pytest.approx(float(start @ ref_v), rel=1e-5, abs=1e-5)
    # no stationary deterministic policy beats the optimum (values from the NumPy reference)
    best = -np.inf
    for actions in itertools.product(range(A), repeat=S):
        pi = np.eye(A)[list(actions)]
        vp = ref_backup_vec(P, R, term, H, pi)
        assert np.all(v >= vp - 1e-5)
        best = max(best, float(start @ vp))
    assert opt >= best - 1e-5


@pytest.mark.parametrize("seed", range(6))
def test_tiny_mdp_brute_force(seed):
    P, R, term, start, H, pi = tiny_mdp(seed)
    mdp = make_mdp(P, R, term, start, H)
    expected = brute_force_return(P, R, term, start, H, lambda t, s: pi[s])
    assert float(rollax.expected_return(mdp, jnp.asarray(pi, jnp.float32))) == pytest.approx(
        expected, rel=1e-5, abs=1e-5
    )
    assert float(start @ ref_policy_values_loop(P, R, term, pi, H)) == pytest.approx(
        expected, rel=1e-12, abs=1e-12
    )
    # optimum = max over all deterministic, non-stationary (time-dependent) Markov policies,
    # enumerated and evaluated by brute force.
    eye = np.eye(2)
    best = -np.inf
    for plan in itertools.product(range(4), repeat=H):  # plan[t] encodes (a(s=0), a(s=1))
        decide = lambda t, s, plan=plan: eye[(plan[t] >> s) & 1]  # noqa: E731
        best = max(best, brute_force_return(P, R, term, start, H, decide))
    assert float(rollax.optimal_return(mdp)) == pytest.approx(best, rel=1e-5, abs=1e-5)


def test_policy_return_softmax_matches_reference():
    P, R, term, start, H, _ = random_mdp(3)
    S, A = P.shape[:2]
    mdp = make_mdp(P, R, term, start, H)
    logits = np.random.RandomState(7).normal(size=(S, A))
    pi = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    got = float(rollax.policy_return(mdp, rollax.SoftmaxPolicy(S, A), jnp.asarray(logits)))
    assert got == pytest.approx(float(start @ ref_policy_values_loop(P, R, term, pi, H)),
                                rel=f32_rtol(1e-5), abs=f32_atol(1e-5))


def test_policy_values_rejects_wrong_policy_shape():
    P, R, term, start, H, pi = random_mdp(0)
    mdp = make_mdp(P, R, term, start, H)
    with pytest.raises(ValueError):
        rollax.policy_values(mdp, jnp.asarray(pi.T if pi.shape[0] != pi.shape[1] else pi[:-1]))


# --------------------------------------------------------------------------------------------
# 6. FiniteMDP validation
# --------------------------------------------------------------------------------------------


def _valid():
    P = np.array([[[0.5, 0.5], [1.0, 0.0]], [[0.0, 1.0], [0.2, 0.8]]])
    return dict(
        transitions=P, rewards=np.zeros_like(P), terminal=np.zeros(P.shape, bool),
        start=np.array([1.0, 0.0]), horizon=3,
    )


def test_finite_mdp_valid_baseline():
    mdp = rollax.FiniteMDP(**_valid())
    assert (mdp.num_states, mdp.num_actions, mdp.horizon) == (2, 2, 3)
    rollax.FiniteMDP(**{**_valid(), "horizon": np.int64(2)})  # numpy integers are fine


@pytest.mark.parametrize(
    "change",
    [
        {"transitions": np.full((2, 2), 0.5)},  # 2-D
        {"transitions": np.full((2, 2, 3), 1 / 3)},  # S' != S
        {"rewards": np.zeros((2, 2, 3))},
        {"rewards": np.zeros((2, 2))},
        {"terminal": np.zeros((2, 1, 2), bool)},
        {"start": np.array([1.0, 0.0, 0.0])},
        {"start": np.array([[1.0, 0.0]])},
        {"transitions": np.array([[[0.5, 0.4], [1.0, 0.0]], [[0.0, 1.0], [0.2, 0.8]]])},
        {"transitions": np.array([[[0.5, 0.5], [1.0, 0.0]], [[0.3, 1.0], [0.2, 0.8]]])},
        {"transitions": np.array([[[1.5, -0.5], [1.0, 0.0]], [[0.0, 1.0], [0.2, 0.8]]])},
        {"transitions": np.array([[[np.nan, 1.0], [1.0, 0.0]], [[0.0, 1.0], [0.2, 0.8]]])},
        {"start": np.array([0.5, 0.4])},
        {"start": np.array([1.5, -0.5])},
        {"start": np.array([0.0, 0.0])},
        {"horizon": 0},
        {"horizon": -3},
        {"horizon": 2.0},
        {"horizon": 2.5},
        {"horizon": "4"},
        {"horizon": None},
        {"horizon": True},
        {"horizon": False},
    ],
    ids=[
        "P-2d", "P-S'!=S", "R-wrong-shape", "R-2d", "term-wrong-shape", "start-too-long",
        "start-2d", "P-sum<1", "P-sum>1", "P-negative", "P-nan", "start-sum<1",
        "start-negative", "start-zero", "horizon-0", "horizon-negative", "horizon-float-int",
        "horizon-float", "horizon-str", "horizon-None", "horizon-True", "horizon-False",
    ],
)
def test_finite_mdp_validation(change):
    with pytest.raises(ValueError):
        rollax.FiniteMDP(**{**_valid(), **change})


# --------------------------------------------------------------------------------------------
# 7. Gymnasium toy-text import
# --------------------------------------------------------------------------------------------

GYM_CASES = {
    "FrozenLake-v1": ((16, 4), None),
    "FrozenLake8x8-v1": ((64, 4), None),
    "Taxi-v4": ((500, 6), None),
    "CliffWalking-v1": ((48, 4), 30),
}


@pytest.fixture(scope="module")
def gym_mdps():
    return {
        env_id: rollax.mdp_from_gymnasium(env_id, horizon=h)
        for env_id, (_, h) in GYM_CASES.items()
    }


def _aggregate(entries):
    """{s2: [prob, reward, terminated]} from Gymnasium's P[s][a] list."""
    out = {}
    for prob, s2, reward, terminated in entries:
        s2 = int(s2)
        if s2 in out:
            assert out[s2][1:] == [reward, bool(terminated)]
            out[s2][0] += prob
        else:
            out[s2] = [prob, reward, bool(terminated)]
    return out


@pytest.mark.parametrize("env_id", list(GYM_CASES))
def test_gymnasium_import_matches_gymnasium_tables(gym_mdps, env_id):
    mdp = gym_mdps[env_id]
    shape, horizon = GYM_CASES[env_id]
    S, A = shape
    P = np.asarray(mdp.transitions)
    R = np.asarray(mdp.rewards)
    T = np.asarray(mdp.terminal).astype(bool)
    assert P.shape == R.shape == T.shape == (S, A, S)
    assert (mdp.num_states, mdp.num_actions) == shape
    expected_h = gymnasium.spec(env_id).max_episode_steps if horizon is None else horizon
    assert mdp.horizon == expected_h
    np.testing.assert_allclose(P.sum(-1), 1.0, atol=1e-9)
    env = gymnasium.make(env_id).unwrapped
    np.testing.assert_allclose(np.asarray(mdp.start), env.initial_state_distrib, atol=1e-12)
    rng = np.random.RandomState(len(env_id))
    pairs = [(0, 0), (S - 1, A - 1)] + [(int(rng.randint(S)), int(rng.randint(A)))
                                        for _ in range(8)]
    for s, a in pairs:
        agg = _aggregate(env.P[s][a])
        for s2 in range(S):
            if s2 in agg:
                prob, reward, terminated = agg[s2]
                assert P[s, a, s2] == pytest.approx(prob, abs=1e-12), (s, a, s2)
                assert R[s, a, s2] == reward, (s, a, s2)
                assert bool(T[s, a, s2]) == terminated, (s, a, s2)
            else:
                assert P[s, a, s2] == 0.0, (s, a, s2)


def test_gymnasium_spec_horizons():
    assert [gymnasium.spec(i).max_episode_steps
            for i in ("FrozenLake-v1", "FrozenLake8x8-v1", "Taxi-v4")] == [100, 200, 200]


def test_frozenlake_slippery_entries_by_hand(gym_mdps):
    P = np.asarray(gym_mdps["FrozenLake-v1"].transitions)
    R = np.asarray(gym_mdps["FrozenLake-v1"].rewards)
    T = np.asarray(gym_mdps["FrozenLake-v1"].terminal).astype(bool)
    # state 0, LEFT: slips to LEFT (stay), DOWN (4), UP (stay) with 1/3 each -> 2/3 stay.
    np.testing.assert_allclose(P[0, 0, [0, 4]], [2 / 3, 1 / 3], atol=1e-12)
    # state 14, RIGHT: 1/3 each to 15 (goal, +1, terminal), 10 (up), 14 (down, wall).
    np.testing.assert_allclose(P[14, 2, [10, 14, 15]], [1 / 3] * 3, atol=1e-12)
    assert R[14, 2, 15] == 1.0 and T[14, 2, 15] and not T[14, 2, 10]
    # state 5 is a hole: absorbing and terminal.
    assert np.all(P[5, :, 5] == 1.0) and np.all(T[5, :, 5])


def test_cliffwalking_needs_horizon():
    with pytest.raises(ValueError, match="horizon"):
        rollax.mdp_from_gymnasium("CliffWalking-v1")


@pytest.mark.parametrize("env_id", list(GYM_CASES))
def test_gymnasium_dp_matches_numpy_reference(gym_mdps, env_id):
    mdp = gym_mdps[env_id]
    P, R, T = (np.asarray(x) for x in (mdp.transitions, mdp.rewards, mdp.terminal))
    start = np.asarray(mdp.start, np.float64)
    S, A = P.shape[:2]
    uni = np.full((S, A), 1.0 / A)
    ref_u = start @ ref_backup_vec(P, R, T, mdp.horizon, uni)
    ref_o = start @ ref_backup_vec(P, R, T, mdp.horizon)
    got_u = float(rollax.expected_return(mdp, jnp.asarray(uni, jnp.float32)))
    got_o = float(rollax.optimal_return(mdp))
    assert got_u == pytest.approx(ref_u, rel=2e-4, abs=1e-5)
    assert got_o == pytest.approx(ref_o, rel=2e-4, abs=1e-5)


@pytest.mark.parametrize("horizon, expected", [(5, 0.0), (6, 1.0), (7, 1.0), (100, 1.0)])
def test_frozenlake_deterministic_optimal(horizon, expected):
    # 4x4 map SFFF/FHFH/FFFH/HFFG: the goal (3, 3) is 3 + 3 = 6 moves from the start, e.g.
    # right, right, down, down, down, right (0-1-2-6-10-14-15) avoids every hole.
    mdp = rollax.mdp_from_gymnasium("FrozenLake-v1", horizon=horizon, is_slippery=False)
    assert np.all(np.isin(np.asarray(mdp.transitions), [0.0, 1.0]))
    assert float(rollax.optimal_return(mdp)) == pytest.approx(expected, abs=1e-6)


@pytest.mark.parametrize("horizon, expected", [(12, -12.0), (13, -13.0), (14, -13.0), (30, -13.0)])
def test_cliffwalking_optimal(horizon, expected):
    # Start 36 = bottom-left, goal 47 = bottom-right, cliff 37..46 between them. The shortest
    # safe path is up, 11 x right, down: 13 steps of -1 (the step into the goal also costs -1
    # and terminates). With 12 steps the goal is out of reach, so the best is 12 steps of -1
    # without touching the cliff (-100): -12.
    mdp = rollax.mdp_from_gymnasium("CliffWalking-v1", horizon=horizon)
    assert float(rollax.optimal_return(mdp)) == pytest.approx(expected, abs=1e-4)


# --------------------------------------------------------------------------------------------
# 8. Sampler vs. DP on Gymnasium tasks
# --------------------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize(
    "env_id, kwargs, batch, steps",
    [("FrozenLake-v1", {}, 4096, 100), ("Taxi-v4", {"horizon": 20}, 4096, 20)],
)
def test_sampled_return_matches_exact(env_id, kwargs, batch, steps):
    env = rollax.make(env_id, **kwargs)
    assert isinstance(env, rollax.TabularEnv) and env.stochastic
    mdp = env.to_mdp()
    assert mdp.horizon == steps
    S, A = mdp.num_states, mdp.num_actions
    policy = rollax.SoftmaxPolicy(S, A)
    _, traj = rollax.collect(env, policy, policy.init(), jax.random.key(7), batch, steps)
    returns = np.asarray(traj.reward, np.float64).sum(0)
    # every episode has finished within T = horizon steps
    ended = np.asarray(traj.terminated) | np.asarray(traj.truncated)
    np.testing.assert_array_equal(ended.sum(0), 1)
    exact = float(rollax.expected_return(mdp, jnp.full((S, A), 1.0 / A, jnp.float32)))
    # cross-check the DP value itself against the NumPy reference
    ref = np.asarray(mdp.start) @ ref_backup_vec(
        mdp.transitions, mdp.rewards, mdp.terminal, mdp.horizon, np.full((S, A), 1.0 / A)
    )
    assert exact == pytest.approx(ref, rel=1e-4, abs=1e-5)
    se = returns.std(ddof=1) / math.sqrt(batch)
    # Monte Carlo tolerance: 5 standard errors of the mean of `batch` i.i.d. episode returns.
    assert se > 0
    assert abs(returns.mean() - exact) <= 5 * se, (returns.mean(), exact, se)
