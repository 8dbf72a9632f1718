"""The Jumanji adapter (needs ``pip install rollax[jumanji]``): bit-identical agreement with
Jumanji's own ``step`` (no auto-reset) up to each environment's first episode end, the
terminated/truncated split at Jumanji's time limit, the contract checker, a tiny training run
and the error messages."""

from __future__ import annotations

import dataclasses
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

jumanji = pytest.importorskip("jumanji")

import rollax  # noqa: E402
import rollax.cli  # noqa: E402
import rollax.envs.masks  # noqa: E402
from rollax.envs.base import Discrete, MultiDiscrete  # noqa: E402
from rollax.envs.masks import mask_shape  # noqa: E402
from rollax.envs.suites.jumanji import JumanjiEnv, make_jumanji  # noqa: E402

BATCH, STEPS = 32, 300
"""The lockstep's environments, and at most its steps (every episode ends by the adapter's
horizon: the lockstep runs one step past it where that is fewer)."""


@dataclasses.dataclass(frozen=True)
class Case:
    name: str
    options: tuple  # Jumanji constructor options of the reference (and the adapter)
    limit: int | None  # the suite's own time limit (None: none; then `horizon` truncates)
    horizon: int | None = None  # rollax horizon given explicitly (suites without a limit)
    explore: float = 1.0  # chance per step of a uniform action (maybe illegal), else a legal one
    both: bool = True  # random play ends some episodes by each of terminated and truncated
    rtol: float = 0.0  # rewards and observations: 0 bit for bit; BinPack's float sums round
    # differently in the two compiled programs (about 1e-7 relative)


CASES = {
    # Random Snake dies fast (invalid moves): a 30-step limit gives both endings.
    "Snake-v1": Case("Snake-v1", (("time_limit", 30),), 30),
    # Game2048 has no limit: random games last ~80-250 steps; horizon 150 truncates some.
    "Game2048-v1": Case("Game2048-v1", (), None, 150),
    "Maze-v0": Case("Maze-v0", (("time_limit", 40),), 40),
}
NEW_CASES = {  # the environments with a joint or multi-discrete action (slow: compiled one each)
    "Minesweeper-v0": Case("Minesweeper-v0", (), None, 10),
    "Sudoku-very-easy-v0": Case("Sudoku-very-easy-v0", (), None, 4, explore=0.1),
    "Tetris-v0": Case("Tetris-v0", (("time_limit", 12),), 12, explore=0.0),
    "BinPack-v2": Case("BinPack-v2", (), None, 8, explore=0.05, rtol=1e-6),
    "FlatPack-v0": Case("FlatPack-v0", (), None, None, explore=0.1, both=False),
    "RubiksCube-partly-scrambled-v0": Case("RubiksCube-partly-scrambled-v0", (), 20,
                                           both=False),
    "JobShop-v0": Case("JobShop-v0", (), None, 30, explore=0.03),
    "Cleaner-v0": Case("Cleaner-v0", (("time_limit", 30),), 30, explore=0.03),
    "MMST-v0": Case("MMST-v0", (("time_limit", 20),), 20, explore=0.0, both=False),
    "RobotWarehouse-v0": Case("RobotWarehouse-v0", (("time_limit", 30),), 30, explore=0.0),
    "MultiCVRP-v0": Case("MultiCVRP-v0", (), None, 14, explore=0.0),
}


@pytest.fixture(scope="module", autouse=True)
def _suite_rank_promotion():
    """MultiCVRP's reward broadcasts ranks implicitly; rollax's conftest makes that an error for
    its own code."""
    with jax.numpy_rank_promotion("allow"):
        yield


def _components(index, nvec):
    """A joint index as its components, C order, by repeated division (the reference for the
    adapter's ``jnp.unravel_index``)."""
    parts = []
    for n in reversed(nvec):
        parts.append(index % n)
        index = index // n
    return jnp.stack(parts[::-1])


def _jumanji_action(case: Case, env, action):
    """The reference's action for rollax's ``action`` (the layout the docs give per id)."""
    spec = env.jumanji_env.action_spec
    if isinstance(env.action_space, MultiDiscrete):
        return action.astype(spec.dtype)
    if isinstance(spec, jumanji.specs.MultiDiscreteArray):  # a joint Discrete
        return _components(action, [int(n) for n in np.asarray(spec.num_values)]).astype(
            spec.dtype)
    return action


def _draw(case: Case, env, mask, key):
    """A rollax action: uniform over the space with chance ``case.explore``, else uniform over
    the legal ones of ``mask``."""
    space = env.action_space
    pick, uniform_key, legal_key = jax.random.split(key, 3)
    logits = jnp.where(mask, 0.0, -jnp.inf)
    legal = jax.random.categorical(legal_key, logits, axis=-1).astype(jnp.int32)
    if isinstance(space, MultiDiscrete):
        uniform = jax.random.randint(uniform_key, (len(space.nvec),), 0,
                                     np.asarray(space.nvec))
    else:
        uniform = jax.random.randint(uniform_key, (), 0, space.n)
    return jnp.where(jax.random.uniform(pick) < case.explore, uniform, legal)


def _raw_mask_at(case: Case, env, raw_obs, ref_action):
    """Whether Jumanji's own mask allows the reference's action, and whether it allows any
    (every component some value); both True where it has no mask."""
    raw = getattr(raw_obs, "action_mask", None)
    if raw is None:
        return jnp.bool_(True), jnp.bool_(True)
    if isinstance(env.action_space, MultiDiscrete):
        return (jnp.all(raw[jnp.arange(raw.shape[0]), ref_action]),
                jnp.all(jnp.any(raw, axis=-1)))
    if ref_action.ndim:
        return raw[tuple(ref_action)], jnp.any(raw)
    return raw[ref_action], jnp.any(raw)


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

    steps = min(STEPS, env.horizon + 1)

    def one(key):
        reset_key, run_key = jax.random.split(key)
        ours = env.reset(reset_key)
        theirs, _ = ref.reset(jax.random.key_data(reset_key))
        start = getattr(theirs, "step_count", 0)  # MultiCVRP counts from 1

        def body(carry, inputs):
            ours, theirs = carry
            t, action_key = inputs
            mask = env.action_mask(ours)
            action = _draw(case, env, mask, action_key)
            ref_action = _jumanji_action(case, env, action)
            legal = rollax.envs.masks.is_legal(env.action_space, mask, action)
            raw_legal, any_raw = _raw_mask_at(case, env, ours.obs, ref_action)
            ours, reward, terminated, truncated = env.step(ours, action)
            # without a limit the twin is the reference itself (its step is the reference's)
            twin_last = None if twin is ref else twin.step(theirs, ref_action)[1].last()
            theirs, step = ref.step(theirs, ref_action)
            twin_last = step.last() if twin_last is None else twin_last
            out = dict(ours_obs=ours.obs, theirs_obs=step.observation, ours_reward=reward,
                       theirs_reward=step.reward, terminated=terminated, truncated=truncated,
                       last=step.last(), twin_last=twin_last, elapsed=ours.elapsed,
                       step_count=getattr(theirs, "step_count", t + 1) - start,
                       vector=env.observation(ours), mask=mask, legal=legal,
                       raw_legal=raw_legal, any_raw=any_raw)
            return (ours, theirs), out

        _, out = jax.lax.scan(body, (ours, theirs),
                              (jnp.arange(steps), jax.random.split(run_key, steps)))
        return out

    return env, jax.jit(jax.vmap(one, out_axes=1))


@pytest.fixture(scope="module", params=[*CASES, *(pytest.param(name, marks=pytest.mark.slow)
                                                 for name in NEW_CASES)])
def lockstep(request):
    case = {**CASES, **NEW_CASES}[request.param]
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
        np.testing.assert_allclose(out["ours_reward"][: e + 1, b],
                                   out["theirs_reward"][: e + 1, b].astype(np.float32),
                                   rtol=case.rtol, atol=0)
        for ours, theirs in zip(jax.tree.leaves(out["ours_obs"]),
                                jax.tree.leaves(out["theirs_obs"]), strict=True):
            np.testing.assert_allclose(ours[: e + 1, b], theirs[: e + 1, b], rtol=case.rtol,
                                       atol=0)
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
    print(f"\n{case.name}: {BATCH} x {len(events)} steps, horizon {limit}: {counts}")
    if case.both:
        assert counts["terminated"] > 0 and counts["truncated"] > 0
    else:
        assert counts["terminated"] + counts["truncated"] == BATCH


def test_observation_vector_and_mask(lockstep):
    _, env, out = lockstep
    obs = out["ours_obs"]
    parts = []
    for field, _ in env.observation_fields:
        leaf = obs
        for part in field.split("."):
            leaf = getattr(leaf, part)
        parts.append(np.reshape(np.asarray(leaf), (*out["mask"].shape[:2], -1)).astype(np.float32))
    np.testing.assert_array_equal(out["vector"], np.concatenate(parts, axis=-1))
    assert out["vector"].dtype == np.float32 and out["vector"].shape[-1] == \
        env.observation_space.shape[0]
    assert "step_count" not in dict(env.observation_fields)
    assert out["mask"].dtype == bool
    assert out["mask"].shape[1:] == (BATCH, *mask_shape(env.action_space))


def test_mask_is_jumanjis(lockstep):
    """Up to each first episode end, rollax's mask allows an action exactly when Jumanji's own
    mask allows the action the adapter hands Jumanji (unless Jumanji's mask allowed nothing)."""
    _, _, out = lockstep
    events = out["terminated"] | out["truncated"]
    live = np.cumsum(events, axis=0) - events == 0  # steps taken before the first end, and it
    live &= out["any_raw"]
    np.testing.assert_array_equal(out["legal"][live], out["raw_legal"][live])
    assert out["legal"][live].any()


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


REFUSED = {  # id: the reason named, were the adapter not to know it (jumanji 1.1.2's registry
    # is all accepted: tests/suites/test_jumanji_teams.py takes the teams)
    "Connector-v3": r"each of its 10 agents gets its own reward \(reward shape \(10,\)\), and "
                    r"the adapter reads the observations of the teams it knows only "
                    r"\(LevelBasedForaging-v0\)$",
    "SearchAndRescue-v0": r"each of its 2 agents .*; its action is continuous \(BoundedArray of",
}
NEW_IDS = ["RubiksCube-v0", "RubiksCube-partly-scrambled-v0", "Minesweeper-v0", "Sudoku-v0",
           "Sudoku-very-easy-v0", "Tetris-v0", "BinPack-v2", "FlatPack-v0", "JobShop-v0",
           "Cleaner-v0", "MMST-v0", "RobotWarehouse-v0", "MultiCVRP-v0"]


def test_every_registered_id_builds_or_is_refused_naming_why(monkeypatch):
    registered = jumanji.registered_environments()
    assert set(REFUSED) | set(NEW_IDS) | set(CASES) <= registered
    assert set(rollax.envs.suites.jumanji.ids()) == registered
    for name in REFUSED:  # an id Jumanji registers and the adapter does not know
        monkeypatch.delitem(rollax.envs.suites.jumanji.SUPPORTED, name)
        monkeypatch.delitem(rollax.envs.suites.jumanji.TEAMS, name)
    for name in REFUSED:
        with pytest.raises(ValueError, match=rf"^jumanji:{name} is not supported: "
                                             rf"{REFUSED[name]}") as info:
            rollax.make(f"jumanji:{name}")
        assert "\n" not in str(info.value)
    assert set(rollax.envs.suites.jumanji.ids()) == registered - set(REFUSED)


@pytest.mark.parametrize("name, space, mask, horizon", [
    ("Minesweeper-v0", Discrete(100), (100,), 90),  # (row, col) joint, 10 x 10 - 10 mines
    ("Sudoku-v0", Discrete(729), (729,), 81),  # (row, col, digit) joint, 81 cells
    ("Tetris-v0", Discrete(40), (40,), 400),  # (rotation, column) joint, time_limit 400
    ("BinPack-v2", Discrete(800), (800,), 20),  # (ems, item) joint, 20 items
    ("FlatPack-v0", Discrete(8100), (8100,), 25),  # (block, rotation, row, col), 25 blocks
    ("RubiksCube-v0", MultiDiscrete((6, 1, 3)), (3, 6), 200),  # (face, depth, direction)
    ("RubiksCube-partly-scrambled-v0", MultiDiscrete((6, 1, 3)), (3, 6), 20),
    ("JobShop-v0", MultiDiscrete((21,) * 10), (10, 21), 20 * 8 * 6),  # per machine
    ("Cleaner-v0", MultiDiscrete((4,) * 3), (3, 4), 100),  # per agent
    ("MMST-v0", MultiDiscrete((36,) * 3), (3, 36), 70),
    ("RobotWarehouse-v0", MultiDiscrete((5,) * 4), (4, 5), 500),
    ("MultiCVRP-v0", MultiDiscrete((21,) * 2), (2, 21), 40),  # step_count from 1, > 40 ends
])
def test_new_spaces_and_horizons(name, space, mask, horizon):
    env = rollax.make(f"jumanji:{name}")
    assert env.action_space == space and env.horizon == horizon
    state = env.reset(jax.random.key(0))
    assert env.action_mask(state).shape == mask and env.action_mask(state).dtype == jnp.bool_


def test_mmst_time_limit_sizes_its_state():
    """MMST's time limit sizes arrays of its state: the inner environment gets horizon + 1."""
    env = rollax.make("jumanji:MMST-v0", time_limit=12)
    assert env.horizon == 12 and env.jumanji_env.time_limit == 13
    assert env.reset(jax.random.key(0)).inner.connected_nodes.shape == (3, 13)


def test_no_legal_value_allows_every_value():
    """A live state (or a component) that Jumanji's mask gives no legal value: all allowed."""
    env = rollax.make("jumanji:Cleaner-v0")
    state = env.reset(jax.random.key(0))
    mask = state.obs.action_mask.at[1].set(False)
    got = env.action_mask(state._replace(obs=state.obs._replace(action_mask=mask)))
    np.testing.assert_array_equal(got[1], np.ones(4, bool))
    np.testing.assert_array_equal(np.delete(got, 1, axis=0), np.delete(mask, 1, axis=0))
    flat = rollax.make("jumanji:Minesweeper-v0")
    state = flat.reset(jax.random.key(0))
    none = state.obs._replace(action_mask=jnp.zeros_like(state.obs.action_mask))
    assert flat.action_mask(state._replace(obs=none)).all()
    rubik = rollax.make("jumanji:RubiksCube-v0")  # no mask: every value, padding excluded
    np.testing.assert_array_equal(rubik.action_mask(rubik.reset(jax.random.key(0))),
                                  np.arange(6)[None, :] < np.array([6, 1, 3])[:, None])


def test_unsupported_and_unknown_ids():
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


# these two run their 16 x 1,024 checked steps in half the time compiled as rollax does (FlatPack
# 59 -> 30 s, RobotWarehouse 46 -> 37 s); the others compile for longer than they run
OPTIMIZED_CHECKS = ("FlatPack-v0", "RobotWarehouse-v0")


@pytest.mark.slow
@pytest.mark.parametrize("name", [
    pytest.param(n, marks=pytest.mark.optimized) if n in OPTIMIZED_CHECKS else n for n in NEW_IDS])
def test_check_env_new_ids(name, capsys):
    """``rollax check-env jumanji:<id>`` (the CLI, default settings) on every id this adapter
    took on with multi-discrete actions and joint masks: 10-60 s each on 2 cores."""
    code = rollax.cli.main(["check-env", f"jumanji:{name}"])
    assert code == 0, capsys.readouterr().out


def test_train_tiny(tmp_path):
    code = rollax.cli.main(["train", "--env", "jumanji:Game2048-v1", "--horizon", "64",
                            "--total-steps", "1024", "--num-envs", "8",
                            "--out", str(tmp_path / "run")])
    assert code == 0


@pytest.mark.slow
@pytest.mark.parametrize("name", ["Minesweeper-v0", "RubiksCube-v0", "BinPack-v2"])
def test_train_ppo_masked_and_multi_discrete(name, tmp_path):
    """PPO from the CLI on a joint Discrete with its mask (Minesweeper, BinPack) and on a
    MultiDiscrete action (RubiksCube); then the saved policy evaluates."""
    out = tmp_path / "run"
    code = rollax.cli.main(["train", "--env", f"jumanji:{name}", "--algo", "ppo",
                            "--total-steps", "512", "--num-envs", "8", "--num-steps", "32",
                            "--out", str(out)])
    assert code == 0
    assert any(out.iterdir())


def test_reset_accepts_raw_and_typed_keys():
    env = rollax.make("jumanji:Game2048-v1")
    typed = env.reset(jax.random.key(3))
    raw = env.reset(jax.random.key_data(jax.random.key(3)))
    assert jax.tree.all(jax.tree.map(lambda x, y: bool(jnp.all(x == y)), typed, raw))


def test_render_draws_with_jumanjis_own_viewer(tmp_path, capsys):
    """`rollax render jumanji:Game2048-v1`: a random policy's episode drawn by Game2048's
    viewer (into arrays), as a GIF whose first and last pictures differ, and whose caption's
    return is the episode's: the sum of the rewards Jumanji's own step gives for its actions."""
    from helpers import gif_ends, run
    from rollax.envs.frames import frame_renderer
    from rollax.run.video import record_episodes

    env = rollax.make("jumanji:Game2048-v1")
    draw = frame_renderer(env)
    start = jax.device_get(env.reset(jax.random.key(0)))
    picture = draw(start)
    assert picture.shape == (400, 400, 3) and picture.dtype == np.uint8
    assert env.jumanji_env._viewer._display != draw.viewer._display  # the env's left as it was
    code, out, err = run(capsys, "render", "jumanji:Game2048-v1", "--out", tmp_path / "g.gif",
                         "--max-steps", "30", "--json")
    assert code == 0, err
    done = json.loads(out)
    frames, first, last = gif_ends(tmp_path / "g.gif")
    assert frames == done["frames"] == done["lengths"][0] + 1
    assert not np.array_equal(first, last)
    # the same episode replayed in Jumanji itself: its rewards sum to the caption's return
    from rollax.contracts.probe import RandomPolicy

    recorded = record_episodes(env, RandomPolicy.for_space(env.action_space), None,
                               jax.random.key(0), 1, 30, sample=True)
    state = recorded.states.inner
    inner0 = jax.tree.map(lambda x: x[0, 0], state)
    total, jstate = 0.0, inner0
    for t in range(int(recorded.lengths[0])):
        jstate, timestep = env.jumanji_env.step(jstate, env.jumanji_action(
            jnp.asarray(recorded.actions[0, t])))
        total += float(timestep.reward)
    assert total == pytest.approx(done["returns"][0])
