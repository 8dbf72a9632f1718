"""The contract checker: every environment and the library's collector pass it, and planted
bugs (tiny environments and collectors defined here) are caught by the right named check at
the right step and environment."""

import dataclasses
import functools
import pathlib
import re
from concurrent.futures import ThreadPoolExecutor
from typing import Any, ClassVar, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rollax
from custom_envs.point_mass import PointMass  # tests/custom_envs: a user's environment
from rollax.collect import Trajectory
from rollax.contracts import (
    COLLECTOR_CHECKS,
    ENV_CHECKS,
    HOST_CHECKS,
    RECURRENT_CHECKS,
    EnvContractError,
    RandomPolicy,
    check_collector,
    check_env,
)
from rollax.contracts.env_checks import batch_permutation, determinism
from rollax.contracts.env_run import EnvRun
from rollax.contracts.preflight import check_usable
from rollax.contracts.probe import MAX_DEFAULT_STEPS, default_steps
from rollax.contracts.registry import (
    COLLECTOR_REGISTRY,
    ENV_REGISTRY,
    HOST_REGISTRY,
    RECURRENT_REGISTRY,
)
from rollax.contracts.trees import ULPS, cell_mismatch, ulps_apart
from rollax.envs.base import Box, Discrete, start_counters
from rollax.envs.corridor import GOAL, Corridor

B = 16  # batch of the planted-bug and collector checks (check_env's default)
SEED = 0
GYMNAX = ("gymnax:Catch-bsuite", "gymnax:CartPole-v1")
ENV_NAMES = tuple(rollax.registered()) + GYMNAX


def make_env(name):
    """``rollax.make(name)``; an environment that registers no time limit (CliffWalking) gets
    horizon 100 rather than being skipped."""
    try:
        return rollax.make(name)
    except ValueError as error:
        if "horizon" not in str(error):
            raise
        return rollax.make(name, horizon=100)


@pytest.mark.slow
@pytest.mark.parametrize("name", ENV_NAMES)
def test_environment_passes(reports, name):
    report = reports[name]
    assert report.ok, str(report)
    assert report.names == ENV_CHECKS
    assert report["episodes_end"].passed, report["episodes_end"].message  # episodes did end
    report.raise_if_failed()  # no error


# ---------------------------------------------------------------------------------------------
# Planted environment bugs: the corridor with one contract broken. Before the bug fires they
# behave exactly like the corridor, so the first offending cell is read off a plain
# ``rollax.rollout`` of the corridor with the checker's documented keys.


@dataclasses.dataclass(frozen=True)
class RewardAfterDone(Corridor):
    def step(self, state, action, key=None):
        next_state, reward, terminated, truncated = super().step(state, action)
        return next_state, jnp.where(state.done, 0.5, reward).astype(jnp.float32), terminated, \
            truncated


@dataclasses.dataclass(frozen=True)
class EventTwice(Corridor):
    """``terminated`` not gated by liveness: it fires again on every step spent on the goal."""

    def step(self, state, action, key=None):
        next_state, reward, terminated, truncated = super().step(state, action)
        return next_state, reward, terminated | (next_state.position == GOAL), truncated


@dataclasses.dataclass(frozen=True)
class MovesAfterDone(Corridor):
    """The elapsed counter keeps running once done."""

    def step(self, state, action, key=None):
        next_state, reward, terminated, truncated = super().step(state, action)
        return next_state._replace(elapsed=state.elapsed + 1), reward, terminated, truncated


@dataclasses.dataclass(frozen=True)
class ObservationOutsideSpace(Corridor):
    """Declares three observations although the goal (3) is observed."""

    @property
    def observation_space(self):
        return Discrete(GOAL)


@dataclasses.dataclass(frozen=True)
class NaNReward(Corridor):
    """NaN reward for the move 1 -> 2."""

    def step(self, state, action, key=None):
        next_state, reward, terminated, truncated = super().step(state, action)
        bad = ~state.done & (state.position == 1) & (action == 1)
        return next_state, jnp.where(bad, jnp.nan, reward).astype(jnp.float32), terminated, \
            truncated


@functools.cache
def corridor_rollout():
    env = Corridor()
    policy = RandomPolicy.for_space(env.action_space)
    num_steps = env.horizon + 3  # check_env's default

    def rollout(key):
        keys = rollax.collection_keys(key, B, num_steps, False)
        return rollax.rollout(env, policy, None, *keys)[1]

    return jax.jit(rollout)


@functools.cache
def corridor_reference(seed):
    """The corridor driven exactly like ``check_env(..., batch_size=B, seed=seed)`` drives it:
    ``rollax.rollout`` with the random policy and ``rollax.collection_keys``."""
    return jax.tree.map(np.asarray, corridor_rollout()(jax.random.key(seed)))


def first_cell(mask):
    cells = np.argwhere(mask)
    assert len(cells), "the planted bug never fires with this seed"
    return int(cells[0][0]), int(cells[0][1])


def expected_reward_after_done(ref):
    return first_cell(~ref.active)


def expected_event_twice(ref):
    # the first step taken from a finished episode sitting on the goal fires terminated again
    return first_cell(~ref.active & (ref.observation == GOAL))


def expected_moves_after_done(ref):
    return first_cell(~ref.active)


def expected_outside_space(ref):
    return first_cell(ref.terminated)  # the step that produced position 3


def expected_nan_reward(ref):
    return first_cell(ref.active & (ref.observation == 1) & (ref.action == 1))


# bug: (environment, check that must fail, first offending (step, env) from the reference,
# seed); the seeds spread the first offending cells over several steps and environments
PLANTED_ENVS = {
    "reward_after_done": (RewardAfterDone(), "absorbing_reward", expected_reward_after_done, 0),
    "event_twice": (EventTwice(), "events", expected_event_twice, 8),
    "moves_after_done": (MovesAfterDone(), "absorbing_state", expected_moves_after_done, 7),
    "observation_outside_space": (ObservationOutsideSpace(), "observation_in_space",
                                  expected_outside_space, 2),
    "nan_reward": (NaNReward(), "finite_values", expected_nan_reward, 0),
}


@pytest.mark.slow
@pytest.mark.parametrize("bug", PLANTED_ENVS)
def test_planted_environment_bug_is_caught(reports, bug):
    _, check, expected, seed = PLANTED_ENVS[bug]
    report = reports[bug]
    assert not report.ok
    result = report[check]
    assert result.failed, str(report)
    assert (result.step, result.env) == expected(corridor_reference(seed)), result.message
    assert f"step {result.step}, env {result.env}" in result.message
    with pytest.raises(EnvContractError, match=check):
        report.raise_if_failed()
    # the other contracts still hold (only the planted one is broken)
    assert report["runs"].passed and report["determinism"].passed
    assert report["batch_permutation"].passed


@pytest.mark.slow
def test_reward_after_done_message(reports):
    result = reports["reward_after_done"]["absorbing_reward"]
    t, b = result.step, result.env
    assert result.message == f"reward after done: step {t}, env {b}, reward 0.5"
    assert float(result.values["reward"]) == 0.5


@pytest.mark.slow
def test_nan_reward_and_outside_space_values(reports):
    assert np.isnan(reports["nan_reward"]["finite_values"].values["reward"])
    assert int(reports["observation_outside_space"]["observation_in_space"]
               .values["observation"]) == GOAL


# ---------------------------------------------------------------------------------------------
# Collectors: rollax.collect passes; planted variants (same code, one defect) are caught.


def make_collector(mask_after_step=False, broadcast_key=False, reuse_step_key=False):
    """An absorbing collector written out; each flag plants one defect."""

    @functools.partial(jax.jit, static_argnums=(0, 1, 4, 5))
    def collect_fn(env, policy, params, key, batch_size, num_steps):
        reset_key, action_key = jax.random.split(key)
        state = jax.vmap(env.reset)(jax.random.split(reset_key, batch_size))
        step_keys = jax.random.split(action_key, num_steps)
        if reuse_step_key:  # defect: the same B keys at every step
            step_keys = jnp.broadcast_to(step_keys[0], step_keys.shape)

        def one(state, key):
            observation = env.observation(state)
            action, log_prob = policy.sample(params, observation, key)
            next_state, reward, terminated, truncated = env.step(state, action)
            done = env.done(next_state if mask_after_step else state)  # defect: post-step mask
            row = Trajectory(observation, action, reward, ~done, terminated, truncated, log_prob)
            return next_state, row

        def body(state, step_key):
            if broadcast_key:  # defect: one key for every environment
                keys = jnp.broadcast_to(step_key, (batch_size,))
            else:
                keys = jax.random.split(step_key, batch_size)
            return jax.vmap(one)(state, keys)

        return jax.lax.scan(body, state, step_keys)

    return collect_fn


CORRIDOR = Corridor()
POLICY = rollax.BernoulliPolicy(3)
PARAMS = POLICY.init()
T = 10


def collector_report(collect_fn):
    return check_collector(collect_fn, CORRIDOR, POLICY, PARAMS, batch_size=B, num_steps=T,
                           seed=SEED)


COLLECTORS = {
    "rollax.collect": rollax.collect,
    "written_out": make_collector(),
    "mask_after_step": make_collector(mask_after_step=True),
    "broadcast_key": make_collector(broadcast_key=True),
    "reuse_step_key": make_collector(reuse_step_key=True),
}


# ---------------------------------------------------------------------------------------------
# Every report is computed once, on two threads (compilation dominates the cost and releases
# the GIL), heaviest first.


@pytest.fixture(scope="module")
def reports():
    jobs = {name: functools.partial(check_env, make_env(name))
            for name in GYMNAX + tuple(rollax.registered())}
    # the auto-reset check (compile-heavy, exercised by every registered environment) is
    # skipped for the planted bugs: none of them is about auto-reset
    jobs.update({bug: functools.partial(check_env, env, batch_size=B, seed=seed,
                                        autoreset_fn=None)
                 for bug, (env, _, _, seed) in PLANTED_ENVS.items()})
    jobs.update({f"collector:{name}": functools.partial(collector_report, fn)
                 for name, fn in COLLECTORS.items()})
    for seed in {seed for *_, seed in PLANTED_ENVS.values()}:  # cached for the planted tests
        jobs[f"corridor_reference:{seed}"] = functools.partial(corridor_reference, seed)
    # last, long after the corridor's own check compiled what this one reuses (same env, B, T)
    jobs["check_env+broadcast_key"] = functools.partial(
        check_env, CORRIDOR, collect_fn=COLLECTORS["broadcast_key"])
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = {name: pool.submit(job) for name, job in jobs.items()}
        return {name: future.result() for name, future in futures.items()}


@pytest.mark.slow
def test_rollax_collect_passes(reports):
    report = reports["collector:rollax.collect"]
    assert report.ok, str(report)
    assert report.names == COLLECTOR_CHECKS
    assert all(r.passed for r in report), str(report)


@pytest.mark.slow
def test_written_out_collector_without_defects_passes(reports):
    report = reports["collector:written_out"]
    assert report.ok, str(report)


@pytest.mark.slow
def test_mask_after_step_is_caught(reports):
    report = reports["collector:mask_after_step"]
    result = report["active_mask"]
    assert result.failed, str(report)
    _, ref = rollax.collect(CORRIDOR, POLICY, PARAMS, jax.random.key(SEED), B, T)
    ended = np.asarray(ref.terminated | ref.truncated)
    assert (result.step, result.env) == first_cell(ended)
    assert bool(result.values["active"]) is False
    assert report["padding_zero_reward"].failed  # the ending reward now sits on "padding"
    assert report["matches_reference"].failed


@pytest.mark.slow
def test_broadcast_key_is_caught(reports):
    report = reports["collector:broadcast_key"]
    result = report["keys_per_env"]
    assert result.failed, str(report)
    assert (result.step, result.env) == (0, 1)  # env 1 is the first to repeat env 0's actions
    assert int(result.values["repeated columns"]) == B - 1
    assert report["keys_per_step"].passed


@pytest.mark.slow
def test_reused_step_key_is_caught(reports):
    report = reports["collector:reuse_step_key"]
    result = report["keys_per_step"]
    assert result.failed, str(report)
    assert (result.step, result.env) == (1, None)  # step 1 repeats step 0 (all environments)
    assert int(result.values["repeated rows"]) == T - 1
    assert report["keys_per_env"].passed


@pytest.mark.slow
def test_check_env_runs_a_custom_collector(reports):
    report = reports["check_env+broadcast_key"]
    assert report["keys_per_env"].failed and report["keys_per_env"].env == 1
    assert all(report[name].passed for name in ENV_CHECKS)  # the environment itself is fine
    assert set(COLLECTOR_CHECKS) <= set(report.names)


# ---------------------------------------------------------------------------------------------
# Report and random policy


@pytest.mark.slow
def test_report_table_and_error(reports):
    report = reports["reward_after_done"]
    table = str(report)
    assert "absorbing_reward" in table and "FAILED" in table and "passed" in table
    with pytest.raises(ValueError, match="reward after done: step"):
        report.raise_if_failed()
    with pytest.raises(KeyError):
        report["no_such_check"]


def test_random_policy_samples_its_space():
    space = Box(np.array([-1.0, 0.0, -np.inf, -np.inf], np.float32),
                np.array([2.0, np.inf, 3.0, np.inf], np.float32), (4,))
    policy = RandomPolicy.for_space(space)
    hash(policy)  # a valid static argument
    keys = jax.random.split(jax.random.key(0), 256)
    actions, log_probs = jax.jit(jax.vmap(lambda k: policy.sample(None, None, k)))(keys)
    actions = np.asarray(actions)
    assert actions.shape == (256, 4) and actions.dtype == np.float32
    assert np.isfinite(actions).all() and np.isfinite(np.asarray(log_probs)).all()
    assert (actions[:, 0] >= -1).all() and (actions[:, 0] <= 2).all()
    assert (actions[:, 1] >= 0).all() and (actions[:, 2] <= 3).all()
    assert actions[:, 3].min() < 0 < actions[:, 3].max()
    assert all(bool(space.contains(a)) for a in actions[:4])
    discrete = RandomPolicy.for_space(Discrete(5))
    a, _ = jax.jit(jax.vmap(lambda k: discrete.sample(None, None, k)))(keys)
    assert set(np.asarray(a).tolist()) == set(range(5))


# ---------------------------------------------------------------------------------------------
# The registry is the one list of checks: reports, docstring and docs follow it


DOCS_API = pathlib.Path(__file__).resolve().parents[2] / "docs" / "api.md"


def docs_block(marker):
    """The lines between ``<!-- marker: ... -->`` and ``<!-- /marker -->`` in docs/api.md."""
    text = DOCS_API.read_text(encoding="utf-8")
    match = re.search(rf"<!-- {marker}:[^\n]*-->\n(.*?)\n<!-- /{marker} -->", text, re.DOTALL)
    assert match, f"docs/api.md has no {marker} block"
    return match.group(1)


@pytest.mark.parametrize("marker, registry, names", [
    ("env-checks", ENV_REGISTRY, ENV_CHECKS),
    ("collector-checks", COLLECTOR_REGISTRY, COLLECTOR_CHECKS),
    ("recurrent-checks", RECURRENT_REGISTRY, RECURRENT_CHECKS),
    ("host-checks", HOST_REGISTRY, HOST_CHECKS),
])
def test_docs_list_the_registered_checks(marker, registry, names):
    block = docs_block(marker)
    documented = tuple(re.findall(r"^\| `([a-z_]+)` \|", block, re.MULTILINE))
    assert documented == names == registry.names  # same names, same order
    assert block == registry.markdown()  # and the same descriptions


def test_docstring_lists_the_registered_checks():
    from rollax import contracts

    listed = re.findall(r"^``([a-z_]+)``$", contracts.__doc__, re.MULTILINE)
    assert tuple(listed) == ENV_CHECKS + COLLECTOR_CHECKS + RECURRENT_CHECKS + HOST_CHECKS


class KeyState(NamedTuple):
    pos: jax.Array
    rng: jax.Array
    """A typed key kept in the state, as Craftax, Jumanji and others keep theirs."""
    elapsed: jax.Array
    done: jax.Array


@dataclasses.dataclass(frozen=True)
class KeyWalk(rollax.Environment):
    """Walks right on action 1 and ends at position 3; its reward is drawn from the key in its
    state (deterministic given the state: no transition key)."""

    horizon: int = 6

    def reset(self, key):
        return KeyState(jnp.int32(0), key, *start_counters())

    def transition(self, state, action, key):
        rng, draw = jax.random.split(state.rng)
        pos = state.pos + action
        return state._replace(pos=pos, rng=rng), jax.random.uniform(draw), pos >= 3

    def observation(self, state):
        return jnp.reshape(state.pos, (1,)).astype(jnp.float32)

    @property
    def observation_space(self):
        return Box(np.float32(0), np.float32(12), (1,))

    @property
    def action_space(self):
        return Discrete(2)


def test_a_typed_key_inside_the_state_passes_every_check():
    # the checker records states as host arrays (keys as their key data); the auto-reset check
    # used to mix those with typed keys and fail for any such environment
    report = rollax.check_env(KeyWalk())
    assert report.ok, report
    final = next(r for r in report.results if r.name == "autoreset_final_observation")
    assert final.status == "passed" and "episode ends" in final.message


@dataclasses.dataclass(frozen=True)
class TracedRbgWalk(KeyWalk):
    """KeyWalk keeping an ``rbg`` key (4 words of key data, not threefry's 2) made from the
    reset key, and failing if it is reset outside a trace. It splits the key each step and
    draws nothing from it (``rbg``'s draws change under ``vmap``; its splits do not)."""

    def reset(self, key):
        assert isinstance(key, jax.core.Tracer), "reset ran op by op"
        rng = jax.random.wrap_key_data(jnp.tile(jax.random.key_data(key), 2), impl="rbg")
        return KeyState(jnp.int32(0), rng, *start_counters())

    def transition(self, state, action, key):
        rng, _ = jax.random.split(state.rng)
        pos = state.pos + action
        return state._replace(pos=pos, rng=rng), jnp.float32(0.5) * action, pos >= 3


def test_the_checks_reset_only_in_a_trace_and_keep_a_state_keys_implementation():
    # an environment reset op by op compiles each operation (the auto-reset check did so once,
    # for the state's types: 609 programs for Playground's CartpoleBalance); the recorded key
    # data is wrapped back with the state key's own implementation
    report = rollax.check_env(TracedRbgWalk())
    assert report.ok, report
    final = next(r for r in report.results if r.name == "autoreset_final_observation")
    assert final.status == "passed" and "episode ends" in final.message


# ---------------------------------------------------------------------------------------------
# Key ownership inside an environment (read off the jaxprs of reset and step) and flag dtypes


@dataclasses.dataclass(frozen=True)
class SlipCorridor(Corridor):
    """A stochastic corridor that owns its keys correctly: the transition key is split, one
    half slips the move (probability 1/4), the other draws three noise values in a vmap and a
    scan that carries and splits its key; the reward is unchanged (noise times 0)."""

    stochastic: ClassVar[bool] = True

    def slip_key(self, key):
        return key

    def transition(self, state, action, key):
        slip_key, noise_key, loop_key = jax.random.split(self.slip_key(key), 3)
        slip = jax.random.bernoulli(slip_key, 0.25)
        action = jnp.where(slip, 1 - action, action)
        noise = jax.vmap(jax.random.uniform)(jax.random.split(noise_key, 2)).sum()
        noise += jax.lax.scan(lambda k, _: (jax.random.split(k)[0], 0.0), loop_key, None,
                              length=3)[1].sum()  # the carried key is split, not reused
        state, reward, reached = super().transition(state, action, key)
        return state, reward + 0 * noise, reached


@dataclasses.dataclass(frozen=True)
class ConstantKeySlip(SlipCorridor):
    """Its transition ignores its key and slips with ``jax.random.key(0)``."""

    def slip_key(self, key):
        return jax.random.key(0)


@dataclasses.dataclass(frozen=True)
class LoopReuseSlip(SlipCorridor):
    """Draws inside a scan from a captured key: the same numbers on every iteration."""

    def transition(self, state, action, key):
        noise = jax.lax.scan(lambda c, _: (c, jax.random.uniform(key)), 0, None, length=3)[1]
        state, reward, reached = Corridor.transition(self, state, action, None)
        return state, reward + 0 * noise.sum(), reached


@dataclasses.dataclass(frozen=True)
class ResetDrawsTwice(Corridor):
    """The start position and a bonus coin both drawn from the reset key."""

    def reset(self, key):
        state = super().reset(key)
        coin = jax.random.bernoulli(key).astype(jnp.int32)
        return state._replace(position=state.position * coin)


@dataclasses.dataclass(frozen=True)
class ResetReusesAfterSplit(Corridor):
    """Splits its key, then draws from the key itself."""

    def reset(self, key):
        start_key, _ = jax.random.split(key)
        state = super().reset(start_key)
        bound = jax.random.randint(key, (), 1, 2)
        return state._replace(position=jnp.minimum(state.position, bound))


@dataclasses.dataclass(frozen=True)
class ResetConstantKey(Corridor):
    """A random-looking start that is the same for every key."""

    def reset(self, key):
        return super().reset(jax.random.key(0))


@dataclasses.dataclass(frozen=True)
class FloatTerminated(Corridor):
    """``transition`` returns ``terminated`` as float32."""

    def transition(self, state, action, key):
        state, reward, reached = super().transition(state, action, key)
        return state, reward, reached.astype(jnp.float32)


@dataclasses.dataclass(frozen=True)
class FloatTruncated(Corridor):
    """A ``step`` of its own that returns ``truncated`` as float32."""

    def step(self, state, action, key=None):
        state, reward, terminated, truncated = super().step(state, action)
        return state, reward, terminated, truncated.astype(jnp.float32)


# bug: (environment, the check that fails, the start of its message)
KEY_BUGS = {
    "reset_draws_twice": (ResetDrawsTwice(), "key_used_once",
                          "reset: its key is consumed by 2 random draws or splits "
                          "(random_split at corridor.py:"),
    "reset_reuses_after_split": (ResetReusesAfterSplit(), "key_used_once",
                                 "reset: its key is consumed by 2 random draws or splits "
                                 "(random_split at test_contracts.py:"),
    "loop_reuse": (LoopReuseSlip(), "key_used_once",
                   "transition: its key is consumed by 3 random draws or splits (random_bits x3 "
                   "at test_contracts.py:"),
    "transition_constant_key": (ConstantKeySlip(), "draws_from_key",
                                "transition: draws random numbers (random_bits at "
                                "test_contracts.py:"),
    "reset_constant_key": (ResetConstantKey(), "draws_from_key",
                           "reset: draws random numbers (random_bits at corridor.py:"),
    "float_terminated": (FloatTerminated(), "step_output", "terminated must be bool"),
    "float_truncated": (FloatTruncated(), "step_output", "truncated must be bool"),
}


@functools.cache
def key_report(name):
    env = SlipCorridor() if name == "slip" else KEY_BUGS[name][0]
    return check_env(env, batch_size=2, autoreset_fn=None)


def test_keys_owned_correctly_pass():
    report = key_report("slip")
    assert report.ok, str(report)
    assert report["draws_from_key"].message == ("reset draws from its key; transition draws "
                                                "from its key")


@pytest.mark.parametrize("bug", KEY_BUGS)
def test_planted_key_or_flag_bug_is_caught(bug):
    _, check, message = KEY_BUGS[bug]
    report = key_report(bug)
    assert report.failures == [report[check]], str(report)  # that check only; all others ran
    assert report[check].message.startswith(message), report[check].message
    skipped = [r.name for r in report if r.status == "skipped"]
    assert skipped == ["autoreset_final_observation"], str(report)  # autoreset_fn=None


def test_key_messages_name_the_draws():
    assert key_report("transition_constant_key")["draws_from_key"].message.endswith(
        "from a key that is not its own (a constant key); use the key argument")
    loop = key_report("loop_reuse")["key_used_once"].message
    assert "on every iteration of a scan); split it and use each part once" in loop


# ---------------------------------------------------------------------------------------------
# Outputs of differently batched programs: floats up to ULPS apart, integers and booleans bit
# for bit; replays of one program bit for bit


@pytest.mark.slow
@pytest.mark.parametrize("batch_size", [4, 8, 16, 32, 64])
def test_point_mass_passes_at_every_batch_size(batch_size):
    """A correct continuous-action environment with a two-term reward, -(x**2) - 0.01 * a**2.
    At 16 environments XLA's CPU code rounds some lanes' rewards 1 ulp apart from the same
    environment's in another lane, which the permuted batch of ``batch_permutation`` puts it
    in: that check failed this correct environment (8 and 32 passed)."""
    autoreset = rollax.collect_autoreset if batch_size == B else None  # once is enough
    report = check_env(PointMass(), batch_size=batch_size, autoreset_fn=autoreset)
    assert report.ok, str(report)
    assert report["batch_permutation"].passed and report["episodes_end"].passed


def test_ulps_apart():
    f32 = np.float32
    one_up = np.nextafter(f32(1), f32(2))
    a = np.array([1, 1, 0, 0, np.nan, np.nan, np.inf, np.inf, -1e-45], f32)
    b = np.array([1, one_up, -0.0, 1e-45, np.nan, 1, np.inf, 3.4028235e38, 1e-45], f32)
    far = np.iinfo(np.uint64).max
    assert ulps_apart(a, b).tolist() == [0, 1, 0, 1, 0, far, 0, far, 2]
    x = np.array([2.0, -3.0])  # float64: its own ulps
    assert ulps_apart(x, np.nextafter(np.nextafter(x, 0), 0)).tolist() == [2, 2]


def test_cell_mismatch_tolerates_floats_only():
    reward = np.full((3, 2), -0.6383, np.float32)
    close = reward.copy()
    for _ in range(ULPS):
        close[1, 1] = np.nextafter(close[1, 1], np.float32(0))
    far = close.copy()
    far[1, 1] = np.nextafter(far[1, 1], np.float32(0))
    assert cell_mismatch(reward, close, 2).tolist() == [[False, False], [False, True],
                                                        [False, False]]  # bit for bit
    assert not cell_mismatch(reward, close, 2, ULPS).any()
    assert cell_mismatch(reward, far, 2, ULPS).tolist() == [[False, False], [False, True],
                                                            [False, False]]
    elapsed = np.zeros((3, 2), np.int32)
    assert cell_mismatch(elapsed, elapsed + np.eye(3, 2, dtype=np.int32), 2, ULPS).tolist() == [
        [True, False], [False, True], [False, False]]  # integers: exact whatever the ulps


@dataclasses.dataclass
class ChangedRerun(EnvRun):
    """``check_env``'s run whose reruns (every trace after the first: the replay of
    ``determinism``, the permuted run of ``batch_permutation``) come back through ``change``."""

    change: Any = None
    calls: int = 0

    def run(self, keys, perm, override=False, overrides=None):
        trace = super().run(keys, perm, override, overrides)
        self.calls += 1
        return trace if self.calls == 1 else self.change(trace)


def nudged(field, cell, ulps):
    """``change``: the float leaf ``field`` (a Trace field, or ``states.<name>``) moved ``ulps``
    units in the last place toward zero at ``cell``."""
    def change(trace):
        part, _, leaf = field.partition(".")
        holder = getattr(trace, part)
        x = np.array(getattr(holder, leaf) if leaf else holder)
        for _ in range(ulps):
            x[cell] = np.nextafter(x[cell], x.dtype.type(0))
        if leaf:
            return trace._replace(**{part: holder._replace(**{leaf: x})})
        return trace._replace(**{part: x})
    return change


def bumped(field, cell):
    """``change``: the integer or boolean leaf ``field`` changed by one at ``cell``."""
    def change(trace):
        part, _, leaf = field.partition(".")
        holder = getattr(trace, part)
        x = np.array(getattr(holder, leaf) if leaf else holder)
        x[cell] = ~x[cell] if x.dtype == bool else x[cell] + 1
        if leaf:
            return trace._replace(**{part: holder._replace(**{leaf: x})})
        return trace._replace(**{part: x})
    return change


def rerun_results(change):
    env = PointMass(horizon=4)
    policy = RandomPolicy.for_space(env.action_space)
    run = ChangedRerun(env, policy, None, 4, 6, SEED, True, None, change=change)
    run.start()
    return batch_permutation(run), determinism(run)


@pytest.mark.parametrize("change, permutes", [
    (nudged("reward", (2, 1), ULPS), True),
    (nudged("states.x", (3, 2), 1), True),
    (nudged("reward", (2, 1), ULPS + 1), False),
    (nudged("observation", (1, 3), 64), False),
    (bumped("states.elapsed", (3, 2)), False),
    (bumped("terminated", (1, 0)), False),
    (bumped("in_space", (0, 1)), False),
], ids=["reward-4-ulps", "state-1-ulp", "reward-5-ulps", "observation-64-ulps", "int-state",
        "terminated", "in-space"])
def test_batch_permutation_tolerates_rounding_only(change, permutes):
    """Planted differences in the permuted run: floats up to ULPS apart pass; a float further
    apart, an integer or a boolean that differs fails, naming the field. The replay with the
    same keys (``determinism``) fails every one of them: one program, bit for bit."""
    permutation, replay = rerun_results(change)
    assert permutation.passed is permutes, permutation.message
    assert replay.failed and replay.message.startswith("same keys, different outputs")
    if not permutes:
        assert permutation.message.startswith("permuted keys do not permute the outputs")
    if change.__qualname__.startswith("nudged") and not permutes:
        assert "ulps apart" in permutation.message


@functools.partial(jax.jit, static_argnums=(0, 1, 4, 5))
def reversed_collect(env, policy, params, key, batch_size, num_steps):
    """``rollax.collect`` with the batch run in reverse order and put back: correct, but each
    environment sits in another lane of the batch."""
    reset_keys, action_keys, transition_keys = rollax.collection_keys(key, batch_size, num_steps,
                                                                      env.stochastic)
    back = np.arange(batch_size)[::-1]
    final, traj = rollax.rollout(env, policy, params, reset_keys[back], action_keys[:, back],
                                 None if transition_keys is None else transition_keys[:, back])
    return jax.tree.map(lambda x: x[back], final), jax.tree.map(lambda x: x[:, back], traj)


def reward_nudged(ulps):
    """``rollax.collect`` with every reward moved ``ulps`` units in the last place."""
    def collect_fn(env, policy, params, key, batch_size, num_steps):
        final, traj = rollax.collect(env, policy, params, key, batch_size, num_steps)
        reward = traj.reward
        for _ in range(ulps):
            reward = jnp.nextafter(reward, jnp.float32(0))
        return final, traj._replace(reward=reward)
    return collect_fn


def test_matches_reference_tolerates_rounding_only():
    """A correct collector running the batch in another order matches rollax.collect (on this
    point mass its rewards are 1 ulp off at 16 environments); rewards moved further than ULPS
    do not."""
    report = check_collector(reversed_collect, PointMass(), batch_size=B)
    assert report.ok, str(report)
    env = PointMass(horizon=50)  # no padding: every reward nonzero
    close = check_collector(reward_nudged(ULPS), env, batch_size=4, num_steps=20)
    assert close["matches_reference"].passed, str(close)
    far = check_collector(reward_nudged(ULPS + 1), env, batch_size=4, num_steps=20)
    result = far["matches_reference"]
    assert result.failed and result.message.startswith("reward differs from rollax.collect: "
                                                       "step 0, env 0")
    assert int(result.values["ulps apart"]) == ULPS + 1


# ---------------------------------------------------------------------------------------------
# What the checker cannot drive: a long horizon (bounded by default), an unhashable
# environment, a dict observation


def test_default_steps_are_bounded():
    """horizon + 3 steps, at most MAX_DEFAULT_STEPS: a continuing task's horizon=10**9 asked
    the checker for a trace of 10**9 steps (119 GiB at 16 environments)."""
    assert MAX_DEFAULT_STEPS == 1024
    assert default_steps(PointMass(horizon=100)) == (103, True)
    assert default_steps(PointMass(horizon=1021)) == (1024, True)
    assert default_steps(PointMass(horizon=10**9)) == (MAX_DEFAULT_STEPS, True)


def test_continuing_task_is_checked_on_the_default_steps():
    report = check_env(PointMass(horizon=10**9), batch_size=4, autoreset_fn=None)
    assert report.settings["num_steps"] == MAX_DEFAULT_STEPS
    assert report.ok, str(report)
    assert report["episodes_end"].status == "warning"
    assert "no episode ended within 1,024 steps" in report["episodes_end"].message


@dataclasses.dataclass(frozen=True)
class ListFieldPointMass(PointMass):
    """Frozen, but with a list among its fields: hashing it raises."""

    gains: list = dataclasses.field(default_factory=lambda: [1.0])


@dataclasses.dataclass(frozen=True)
class DictObservationPointMass(PointMass):
    """Observes a dict of two arrays under its Box space."""

    def observation(self, state):
        return {"x": state.x[None], "v": state.v[None]}


@dataclasses.dataclass(frozen=True)
class DictSpacePointMass(DictObservationPointMass):
    @property
    def observation_space(self):
        return {"x": Box(-np.inf, np.inf, (1,)), "v": Box(-np.inf, np.inf, (1,))}


def test_unhashable_environment_fails_runs():
    """rollax.collect and the trainers take the environment as a static argument of jit: an
    unhashable one fails ``runs`` in one line (it used to pass every check but the auto-reset
    one, which failed with JAX's many-line error)."""
    report = check_env(ListFieldPointMass(horizon=4), batch_size=2, autoreset_fn=None)
    runs = report["runs"]
    assert runs.failed and "\n" not in runs.message
    assert runs.message.endswith("is not hashable (TypeError: unhashable type: 'list'): "
                                 "environments must be hashable: use "
                                 "@dataclasses.dataclass(frozen=True) with hashable fields "
                                 "(tuples, not lists or arrays)")
    assert report["reset_output"].passed and report["step_output"].passed  # still run


class MutablePointMass(rollax.Environment):
    """PointMass's behaviour in a plain class that sets its attributes in ``__init__``:
    hashable (by identity), but mutable."""

    def __init__(self, horizon: int):
        self.horizon = horizon
        self.inner = PointMass(horizon=horizon)

    def reset(self, key):
        return self.inner.reset(key)

    def transition(self, state, action, key):
        return self.inner.transition(state, action, key)

    def observation(self, state):
        return self.inner.observation(state)

    @property
    def observation_space(self):
        return self.inner.observation_space

    @property
    def action_space(self):
        return self.inner.action_space


def test_mutable_environment_fails_runs():
    """A plain subclass that sets its attributes passed every check (it hashes by identity);
    the docs call it bad input. It fails ``runs`` in one line naming an attribute that can be
    set, and the command line's preflight refuses it with the same words; rollax's own
    frozen environments pass."""
    env = MutablePointMass(horizon=4)
    report = check_env(env, batch_size=2, autoreset_fn=None)
    runs = report["runs"]
    assert runs.failed and "\n" not in runs.message
    assert runs.message.endswith("is mutable (its attribute 'horizon' can be set): "
                                 "environments must be immutable: use "
                                 "@dataclasses.dataclass(frozen=True) with hashable fields "
                                 "(tuples, not lists or arrays)")
    assert env.horizon == 4  # probing set each attribute to its own value
    with pytest.raises(ValueError, match=r"^environment 'mine' is mutable \(its attribute "
                                         r"'horizon' can be set\)"):
        check_usable(env, "mine")
    check_usable(PointMass(horizon=4), "mine")  # frozen: no attribute can be set
    check_usable(rollax.make("CartPole-v1"), "CartPole-v1")


def test_dict_observations_are_refused_or_reported():
    with pytest.raises(ValueError, match=r"^environment 'DictSpacePointMass\(horizon=4, "
                                         r"dt=0.05\)': its observation_space is a dict; "
                                         r"the supported spaces are rollax.Discrete, rollax.Box, "
                                         r"rollax.MultiDiscrete and rollax.MultiBinary, and for "
                                         r"observations rollax.Dict and rollax.Tuple of them"):
        check_env(DictSpacePointMass(horizon=4), batch_size=2)
    report = check_env(DictObservationPointMass(horizon=4), batch_size=2)
    assert report["runs"].failed and report["runs"].message.endswith(
        "observation(state) returns a dict, not one array; an observation of several arrays "
        "needs a rollax.Dict or rollax.Tuple observation_space")
    assert report["reset_output"].message == ("start observation does not match "
                                              "observation_space: observation 'dict', space "
                                              "'float32[2]'")
