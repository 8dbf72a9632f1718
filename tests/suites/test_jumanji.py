"""The Jumanji adapter (needs ``pip install rollax[jumanji]``): bit-identical agreement with
Jumanji's own ``step`` (no auto-reset) up to each environment's first episode end, the
terminated/truncated split at Jumanji's time limit, the contract checker, a tiny training run
and the error messages."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

jumanji = pytest.importorskip("jumanji")

import rollax  # noqa: E402
import rollax.cli  # noqa: E402
from rollax.envs.suites.jumanji import JumanjiEnv, make_jumanji  # noqa: E402

BATCH, STEPS = 32, 300


@dataclasses.dataclass(frozen=True)
class Case:
    name: str
    options: tuple  # Jumanji constructor options of the reference (and the adapter)
    limit: int | None  # the suite's own time limit (None: none; then `horizon` truncates)
    horizon: int | None = None  # rollax horizon given explicitly (suites without a limit)


CASES = {
    # Random Snake dies fast (invalid moves): a 30-step limit gives both endings.
    "Snake-v1": Case("Snake-v1", (("time_limit", 30),), 30),
    # Game2048 has no limit: random games last ~80-250 steps; horizon 150 truncates some.
    "Game2048-v1": Case("Game2048-v1", (), None, 150),
    "Maze-v0": Case("Maze-v0", (("time_limit", 40),), 40),
}


def _lockstep(case: Case):
    """A jitted ``key -> dict of (T, B, ...)`` arrays: the adapter and Jumanji's raw ``step``
    (the reference, built with the same options) run side by side with the same actions; a
    twin of the reference with a limit one step later, stepped from the reference's state,
    tells whether a ``LAST`` at the limit is also the task's own end."""
    options = dict(case.options)
    env = make_jumanji(case.name, horizon=case.horizon, **options)
    assert env == rollax.make(f"jumanji:{case.name}", horizon=case.horizon, **options)
    ref = jumanji.make(case.name, **options)
    twin = jumanji.make(case.name, **dict(options, time_limit=case.limit + 1)) if case.limit \
        else ref
    n = env.action_space.n

    def one(key):
        reset_key, run_key = jax.random.split(key)
        ours = env.reset(reset_key)
        theirs, _ = ref.reset(jax.random.key_data(reset_key))

        def body(carry, action_key):
            ours, theirs = carry
            action = jax.random.randint(action_key, (), 0, n)
            mask = env.action_mask(ours)
            ours, reward, terminated, truncated = env.step(ours, action)
            _, twin_step = twin.step(theirs, action)
            theirs, step = ref.step(theirs, action)
            out = dict(ours_obs=ours.obs, theirs_obs=step.observation, ours_reward=reward,
                       theirs_reward=step.reward, terminated=terminated, truncated=truncated,
                       last=step.last(), twin_last=twin_step.last(), elapsed=ours.elapsed,
                       step_count=theirs.step_count, vector=env.observation(ours), mask=mask)
            return (ours, theirs), out

        _, out = jax.lax.scan(body, (ours, theirs), jax.random.split(run_key, STEPS))
        return out

    return env, jax.jit(jax.vmap(one, out_axes=1))


@pytest.fixture(scope="module", params=list(CASES))
def lockstep(request):
    case = CASES[request.param]
    env, run = _lockstep(case)
    out = jax.device_get(run(jax.random.split(jax.random.key(7), BATCH)))
    return case, env, out


def test_lockstep_matches_jumanji_bit_for_bit(lockstep):
    case, env, out = lockstep
    events = out["terminated"] | out["truncated"]
    assert events.any(axis=0).all(), "every environment ends its first episode"
    ends = events.argmax(axis=0)  # (B,) step index of each environment's first end
    limit = case.limit or env.horizon
    assert env.horizon == limit
    counts = {"terminated": 0, "truncated": 0, "terminated_on_limit_step": 0}
    for b, e in enumerate(ends):
        np.testing.assert_array_equal(out["ours_reward"][: e + 1, b],
                                      out["theirs_reward"][: e + 1, b].astype(np.float32))
        for ours, theirs in zip(jax.tree.leaves(out["ours_obs"]),
                                jax.tree.leaves(out["theirs_obs"]), strict=True):
            np.testing.assert_array_equal(ours[: e + 1, b], theirs[: e + 1, b])
        np.testing.assert_array_equal(out["elapsed"][: e + 1, b], out["step_count"][: e + 1, b])
        # Jumanji's reference ends on the same step: LAST (time limit included), or for a suite
        # without a limit, LAST or the horizon.
        ref_end = out["last"][:, b] | (out["step_count"][:, b] >= limit)
        assert ref_end.argmax() == e
        task_end = out["twin_last"][e, b] if case.limit else out["last"][e, b]
        assert out["terminated"][e, b] == task_end
        assert out["truncated"][e, b] == (not task_end)
        if task_end:
            counts["terminated"] += 1
            counts["terminated_on_limit_step"] += int(e + 1 == limit)
        else:
            counts["truncated"] += 1
            assert e + 1 == limit  # truncation exactly where Jumanji's limit fires
    print(f"\n{case.name}: {BATCH} x {STEPS} steps, horizon {limit}: {counts}")
    assert counts["terminated"] > 0 and counts["truncated"] > 0


def test_observation_vector_and_mask(lockstep):
    _, env, out = lockstep
    obs = out["ours_obs"]
    parts = []
    for field, _ in env.observation_fields:
        leaf = obs
        for part in field.split("."):
            leaf = getattr(leaf, part)
        parts.append(np.reshape(np.asarray(leaf), (STEPS, BATCH, -1)).astype(np.float32))
    np.testing.assert_array_equal(out["vector"], np.concatenate(parts, axis=-1))
    assert out["vector"].dtype == np.float32 and out["vector"].shape[-1] == \
        env.observation_space.shape[0]
    assert "step_count" not in dict(env.observation_fields)
    assert out["mask"].dtype == bool and out["mask"].shape == (STEPS, BATCH, env.action_space.n)


def test_time_limit_option_is_the_horizon():
    a = rollax.make("jumanji:Snake-v1", time_limit=30)
    b = rollax.make("jumanji:Snake-v1", horizon=30)
    assert a == b and hash(a) == hash(b) and a.horizon == 30
    assert rollax.make("jumanji:Snake-v1").horizon == 4000
    assert rollax.make("jumanji:Maze-v0").horizon == 100
    assert rollax.make("jumanji:Game2048-v1").horizon == 4000
    assert rollax.make("jumanji:TSP-v1").horizon == 20
    assert not a.stochastic and isinstance(a, JumanjiEnv)
    assert a.jumanji_env.time_limit == 2**31 - 1  # the limit is rollax's, not Jumanji's
    with pytest.raises(ValueError, match="disagree"):
        rollax.make("jumanji:Snake-v1", time_limit=30, horizon=40)
    with pytest.raises(ValueError, match="no time_limit"):
        rollax.make("jumanji:Game2048-v1", time_limit=30)


def test_unsupported_and_unknown_ids():
    with pytest.raises(ValueError, match=r"jumanji:Tetris-v0 is not supported.*multi-discrete"):
        rollax.make("jumanji:Tetris-v0")
    with pytest.raises(ValueError, match=r"unknown jumanji environment 'Snake-v9'.*Snake-v1"):
        rollax.make("jumanji:Snake-v9")
    with pytest.raises(ValueError, match="does not accept"):
        rollax.make("jumanji:Snake-v1", rows=3)
    assert isinstance(rollax.make("jumanji:Game2048-v1"), JumanjiEnv)


@pytest.mark.parametrize("name, options", [("Snake-v1", {"time_limit": 64}),
                                           ("Game2048-v1", {"horizon": 300})])
def test_check_env(name, options):
    report = rollax.check_env(rollax.make(f"jumanji:{name}", **options))
    assert report.ok, report


def test_train_tiny(tmp_path):
    code = rollax.cli.main(["train", "--env", "jumanji:Game2048-v1", "--horizon", "64",
                            "--total-steps", "1024", "--num-envs", "8",
                            "--out", str(tmp_path / "run")])
    assert code == 0


def test_reset_accepts_raw_and_typed_keys():
    env = rollax.make("jumanji:Game2048-v1")
    typed = env.reset(jax.random.key(3))
    raw = env.reset(jax.random.key_data(jax.random.key(3)))
    assert jax.tree.all(jax.tree.map(lambda x, y: bool(jnp.all(x == y)), typed, raw))
