"""Many devices (rollax.sharding, ``Runner(devices=N)``, ``rollax train --devices N``).

The multi-device checks run in one subprocess with eight CPU devices
(``XLA_FLAGS=--xla_force_host_platform_device_count=8``, ``JAX_PLATFORMS=cpu``): a tabular
and a neural PPO experiment on one device and on eight (2 lanes x 4 envs) give the same
metrics and parameters to float tolerance; the sharded state lies on all eight devices with
the expected smaller shards; the compiled chunk averages the gradient with an all-reduce; the
command line trains, resumes on another device count and refuses too many devices; a
recurrent PPO on two of the devices splits its carry like the environments. Those checks are
subtests of one test (:func:`test_eight_devices`), so that one xdist worker alone builds the
subprocess's report, compiled cheaply as the session's tests are. The claims of bit-for-bit
equality (lanes on devices of their own are each the run alone) are another subprocess's,
compiled as ``rollax`` compiles (:func:`test_eight_devices_exact`, marked ``optimized``),
which another worker can build meanwhile. The rest (the mesh arithmetic, the one-line errors)
runs in this process, on one device.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from rollax.cli import main
from rollax.sharding import check_devices, mesh_shape

SCRIPT = textwrap.dedent(r'''
    import contextlib, io, json, re, shutil, sys, time
    from pathlib import Path

    import jax
    import jax.numpy as jnp
    import numpy as np

    jax.config.update("jax_numpy_rank_promotion", "raise")
    from rollax.algos import ppo, tabular
    from rollax.cli import main
    from rollax.run import compile_cache
    from rollax.run.experiment import Runner, make_lanes

    # the test session's cache (ROLLAX_COMPILE_CACHE): the command-line runs below build the
    # same programs as the experiments, and all_reduce_shapes compiles a chunk again
    compile_cache.from_environment()

    out, part = Path(sys.argv[1]), sys.argv[2]
    report = {"device_count": jax.device_count(), "seconds": {}}

    lowered = []  # every program lowered (then compiled, or read from the compile cache)
    jax.monitoring.register_event_duration_secs_listener(
        lambda event, seconds, **_: lowered.append(event)
        if event == "/jax/core/compile/jaxpr_to_mlir_module_duration" else None)

    def later_chunks_lower(runner, state, n, chunks=2):
        """Programs lowered while ``chunks`` more chunks run on from ``state`` (0: a chunk
        takes the state as the last one left it, and nothing compiles again)."""
        before = len(lowered)
        for _ in range(chunks):
            state, _ = runner.run_chunk(state, n)
        return len(lowered) - before

    def clock(name, start):
        report["seconds"][name] = round(time.perf_counter() - start, 1)

    def host(tree):
        return [np.asarray(x).tolist() for x in jax.tree_util.tree_leaves(jax.device_get(tree))]

    def layout(state):
        rows = []
        for leaf in jax.tree_util.tree_leaves(state):
            if jax.dtypes.issubdtype(leaf.dtype, jax.dtypes.prng_key):
                leaf = jax.random.key_data(leaf)
            rows.append({"shape": list(leaf.shape), "devices": len(leaf.sharding.device_set),
                         "shards": sorted({tuple(s.data.shape) for s in leaf.addressable_shards}),
                         "on": sorted({s.device.id for s in leaf.addressable_shards})})
        return rows

    def all_reduce_shapes(runner, state, n):
        text = runner.chunk.lower(state, runner.hp, jnp.int32(n)).compile().as_text()
        return sorted(set(re.findall(r"[a-z]+[0-9]*\[[0-9,]*\]", " ".join(
            line.split(" all-reduce(")[0] for line in text.splitlines()
            if " all-reduce(" in line))))

    def experiment(name, algo, seeds, n, chunks=1):
        lanes = make_lanes(0, seeds, {})
        result = {}
        for devices in (None, 8):
            start = time.perf_counter()
            runner = Runner(algo, lanes, n, devices=devices)
            state = runner.initial_state()
            rows = []
            for _ in range(chunks):
                state, chunk_metrics = runner.run_chunk(state, n)
                rows.append(chunk_metrics)
            metrics = type(rows[0])(*(np.concatenate(column, axis=1) for column in zip(*rows)))
            key = "one" if devices is None else "eight"
            result[key] = {"params": host(runner.final_params(state)),
                           "metrics": {k: np.asarray(v).tolist()
                                       for k, v in metrics._asdict().items()}}
            if devices:
                result["later_lowerings"] = later_chunks_lower(runner, state, n)
                result["mesh"] = dict(runner.mesh.shape)
                result["layout"] = layout(state)
                result["state_fields"] = [
                    [name, len(jax.tree_util.tree_leaves(getattr(state, name)))]
                    for name in state._fields]
                result["all_reduce"] = all_reduce_shapes(runner, state, n)
                result["param_count"] = sum(  # one lane's
                    int(np.prod(x.shape[1:])) for x in jax.tree_util.tree_leaves(state.params))
            clock(f"{name} devices={devices}", start)
        report[name] = result

    def cli(*argv):
        err, stdout = io.StringIO(), io.StringIO()
        start = time.perf_counter()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(stdout):
            code = main(list(argv))
        clock(" ".join(argv[:3]) + f" ({len(report['seconds'])})", start)
        return {"code": code, "stdout": stdout.getvalue(), "stderr": err.getvalue()}

    common = ["train", "--updates", "6", "--batch-size", "64", "--seeds", "2", "--chunk-size",
              "2", "--checkpoint-every", "2", "--json"]
    if part == "main":  # compiled cheaply, as the session's tests are (float tolerances)
        # the programs of cli_one and cli_eight below (chunks of 2 updates)
        experiment("tabular", tabular.make_algorithm(
            tabular.TabularConfig(updates=6, batch_size=64)), seeds=2, n=2, chunks=3)
        experiment("ppo", ppo.make_algorithm(ppo.preset(
            "CartPole-v1", total_steps=2048, num_envs=8, num_steps=16)), seeds=2, n=16)

        report["cli_one"] = cli(*common, "--devices", "1", "--out", str(out / "one"))
        report["cli_eight"] = cli(*common, "--devices", "8", "--out", str(out / "eight"))
        # an unfinished run (latest checkpoint at update 4) resumed on another device count
        shutil.copytree(out / "eight", out / "resumed")
        (out / "resumed" / "summary.json").unlink()
        shutil.rmtree(out / "resumed" / "figures")
        (out / "resumed" / "checkpoints" / "latest").write_text("update-0000004\n")
        report["cli_resumed"] = cli("train", "--resume", str(out / "resumed"), "--devices",
                                    "4", "--json")
        report["cli_ppo"] = cli("train", "--env", "CartPole-v1", "--total-steps", "2048",
                                "--num-envs", "8", "--num-steps", "16", "--seeds", "2",
                                "--devices", "8", "--chunk-size", "16", "--json",
                                "--out", str(out / "ppo"))
        report["cli_too_many"] = cli("train", "--updates", "2", "--batch-size", "64",
                                     "--devices", "16", "--out", str(out / "never"))
        report["never_written"] = not (out / "never").exists()

        # a recurrent PPO on two of the eight devices: the carry split like the environments
        # (an LSTM: its carry is two leaves, (h, c), each laid out by the same per-leaf rule a
        # GRU's one leaf is)
        recurrent = {}
        for network in ("lstm",):
            algo = ppo.make_algorithm(ppo.preset("CartPole-v1", network=network, num_envs=4,
                                                 num_steps=8, total_steps=64, minibatches=2,
                                                 memory_size=8, hidden=(8, 8)))
            result = {}
            for devices in (None, 2):
                start = time.perf_counter()
                runner = Runner(algo, make_lanes(0, 1, {}), 2, devices=devices)
                initial = runner.initial_state()
                state, _ = runner.run_chunk(initial, 2)
                result["one" if devices is None else "two"] = host(runner.final_params(state))
                if devices:  # one lane, its environments split
                    result["later_lowerings"] = later_chunks_lower(runner, state, 2)
                    result["carry"] = [
                        {"shape": list(x.shape), "devices": len(x.sharding.device_set),
                         "shards": sorted({tuple(s.data.shape) for s in x.addressable_shards}),
                         "spec": [str(a) for a in x.sharding.spec]}
                        for x in jax.tree_util.tree_leaves(initial.carry)]
                    result["declared"] = [str(s) for s in jax.tree_util.tree_leaves(
                        runner.state_shardings.carry, is_leaf=lambda s: hasattr(s, "spec"))]
                clock(f"{network} devices={devices}", start)
            recurrent[network] = result
        report["recurrent"] = recurrent

    else:  # "exact": claims of bit-for-bit equality, compiled as rollax compiles
        # without --devices: whole lanes on as many of the eight devices as there are cores
        from rollax.sharding import cores
        report["cores"] = cores()
        names = []  # the programs the run lowers, by name
        jax.monitoring.register_event_duration_secs_listener(
            lambda event, seconds, fun_name=None, **_: names.append(fun_name)
            if event == "/jax/core/compile/jaxpr_to_mlir_module_duration" else None)
        report["cli_auto"] = cli(*common, "--out", str(out / "auto"))
        report["cli_auto_lowered"] = list(names)
        alone = list(common)
        alone[alone.index("--seeds") + 1] = "1"
        report["cli_alone"] = [cli(*alone, "--seed", str(k), "--out", str(out / f"alone{k}"))
                               for k in (0, 1)]
        # CPU devices holding whole lanes run them apart: each lane the single-seed run exactly
        algo = ppo.make_algorithm(ppo.preset("CartPole-v1", total_steps=1024, num_envs=4,
                                             num_steps=16, minibatches=2))
        apart = {"alone": []}
        start = time.perf_counter()
        for devices in (2, 4):  # two lanes a device (one after another), one lane a device
            runner = Runner(algo, make_lanes(0, 4, {}), 4, devices=devices)
            state, metrics = runner.run_chunk(runner.initial_state(), 4)
            apart[str(devices)] = {"lanes_apart": runner.lanes_apart,
                                   "params": host(runner.final_params(state)),
                                   "loss": np.asarray(metrics.policy_loss).tolist()}
            apart[str(devices)]["later_lowerings"] = later_chunks_lower(runner, state, 4)
        runner = Runner(algo, make_lanes(0, 1, {}), 4)  # a single-seed run's program
        for seed in range(4):  # seed k's run: its own root key (lanes differ in data alone)
            state = runner.init(make_lanes(seed, 1, {}).keys(), runner.hp)
            state, metrics = runner.run_chunk(state, 4)
            apart["alone"].append({"params": host(runner.final_params(state)),
                                   "loss": np.asarray(metrics.policy_loss).tolist()})
        clock("lanes apart", start)
        report["apart"] = apart
    (out / "report.json").write_text(json.dumps(report))
''')


def _report(tmp_path_factory, part: str) -> dict:
    """The report of the subprocess's ``part`` (``main`` or ``exact``), compiled as the test
    that first asks for it compiles (tests/conftest.py: the session's ``XLA_FLAGS`` and
    ``JAX_DISABLE_MOST_OPTIMIZATIONS`` go on to it)."""
    folder = tmp_path_factory.mktemp(f"devices-{part}")
    flags = f"{os.environ.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count=8"
    env = {**os.environ, "XLA_FLAGS": flags.strip(), "JAX_PLATFORMS": "cpu"}
    proc = subprocess.run([sys.executable, "-c", SCRIPT, str(folder), part], env=env,
                          check=False, capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stderr[-4000:]
    data = json.loads((folder / "report.json").read_text())
    data["folder"] = folder
    print("timings (s):", data["seconds"])
    return data


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    return _report(tmp_path_factory, "main")


@pytest.fixture(scope="module")
def exact_report(tmp_path_factory):
    return _report(tmp_path_factory, "exact")


def close(a, b, rtol, atol):
    np.testing.assert_allclose(np.asarray(a, np.float64), np.asarray(b, np.float64),
                               rtol=rtol, atol=atol, equal_nan=True)


# --- one process, one device -----------------------------------------------------------------

@pytest.mark.parametrize("devices, lanes, batch, expected", [
    (8, 2, 8, (2, 4)), (8, 4, 64, (4, 2)), (8, 1, 256, (1, 8)), (8, 16, 1, (8, 1)),
    (6, 4, 3, (2, 3)), (12, 8, 6, (4, 3)), (1, 3, 5, (1, 1))])
def test_mesh_splits_lanes_first(devices, lanes, batch, expected):
    assert mesh_shape(devices, lanes, batch) == expected


def test_usable_device_counts_are_the_divisors_of_lanes_times_batch():
    for lanes in range(1, 7):
        for batch in range(1, 9):
            for devices in range(1, 50):
                ok = (lanes * batch) % devices == 0
                try:
                    split, envs = mesh_shape(devices, lanes, batch)
                except ValueError:
                    assert not ok
                    continue
                assert ok and split * envs == devices
                assert lanes % split == 0 and batch % envs == 0


def test_bad_device_counts(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match=r"^devices must divide lanes x num_envs = 2 x 4 = 8 "
                                         r"\(lanes: seeds x sweep combinations\), i.e. be one "
                                         r"of 1, 2, 4, 8; got 3$"):
        check_devices(3, 2, 4, "num_envs")
    with pytest.raises(ValueError, match="positive integer"):
        check_devices(True, 2, 4)
    # more devices than this process sees (one CPU device): refused before anything is written
    code = main(["train", "--updates", "2", "--batch-size", "8", "--devices", "2"])
    out, err = capsys.readouterr()
    assert code == 2 and out == "" and err.count("\n") == 1
    assert err.startswith("rollax train: error: devices is 2 but JAX sees only 1 ")
    assert list(tmp_path.iterdir()) == []


def test_one_device_is_the_unsharded_program():
    from rollax.algos import tabular
    from rollax.run.experiment import Runner, make_lanes

    algo = tabular.make_algorithm(tabular.TabularConfig(updates=2, batch_size=8))
    for devices in (None, 1):
        runner = Runner(algo, make_lanes(0, 2, {}), 2, devices=devices)
        assert runner.mesh is None and runner.devices == 1


@pytest.mark.parametrize(("platform", "visible", "cores", "lanes", "expected"), [
    ("cpu", 2, 2, 2, 2), ("cpu", 2, 2, 8, 2), ("cpu", 2, 2, 3, None),  # 3 lanes: no split
    ("cpu", 8, 2, 8, 2),  # never more devices than cores
    ("cpu", 8, 16, 6, 6), ("cpu", 8, 16, 12, 6), ("cpu", 1, 16, 4, None),
    ("cpu", 2, 2, 1, None), ("gpu", 8, 16, 8, None),  # a GPU's count is --devices' to say
])
def test_lanes_per_core(monkeypatch, platform, visible, cores, lanes, expected):
    """The devices a run takes without ``--devices``: the largest divisor of the lanes that
    is at most the CPU devices and the cores."""
    from rollax import sharding

    class Device:
        pass

    device = Device()
    device.platform = platform
    monkeypatch.setattr(sharding.jax, "devices", lambda: [device] * visible)
    monkeypatch.setattr(sharding, "cores", lambda: cores)
    assert sharding.lanes_per_core(lanes) == expected


# --- eight CPU devices (one subprocess) ------------------------------------------------------

def check_device_count(report):
    assert report["device_count"] == 8


def check_tabular_eight_devices_equal_one(report):
    run = report["tabular"]
    assert run["mesh"] == {"lanes": 2, "envs": 4}
    assert run["later_lowerings"] == 0  # later chunks run the first one's program
    close(run["eight"]["params"][0], run["one"]["params"][0], 1e-5, 1e-6)
    for name, values in run["one"]["metrics"].items():
        close(run["eight"]["metrics"][name], values, 1e-5, 1e-6)


def check_ppo_eight_devices_equal_one(report):
    run = report["ppo"]
    assert run["mesh"] == {"lanes": 2, "envs": 4}
    for a, b in zip(run["eight"]["params"], run["one"]["params"]):
        close(a, b, 1e-4, 1e-5)
    for name, values in run["one"]["metrics"].items():
        close(run["eight"]["metrics"][name], values, 1e-4, 1e-5)
    assert np.asarray(run["one"]["metrics"]["episodes"]).sum() > 0  # episodes ended: real work


def check_state_spread_over_every_device(report):
    # tabular state (params (2, 3), key (2,), update (2,)): lanes split, the rest replicated
    for leaf in report["tabular"]["layout"]:
        assert leaf["devices"] == 8 and leaf["on"] == list(range(8))
        assert leaf["shards"] == [[1, *leaf["shape"][1:]]]
    # PPO: every leaf on all 8 devices; the environment batch (axis 1, B = 8) split 4 ways
    run = report["ppo"]
    layout = iter(run["layout"])
    env_fields = {"env_state", "episode_return", "episode_length"}
    seen = set()
    for name, count in run["state_fields"]:
        for _ in range(count):
            leaf = next(layout)
            assert leaf["devices"] == 8 and leaf["on"] == list(range(8))
            shape = leaf["shape"]
            if 0 in shape:  # empty (observation statistics when not normalising): no data
                continue
            if name in env_fields:
                assert shape[1] == 8 and leaf["shards"] == [[1, 2, *shape[2:]]]
            else:
                assert leaf["shards"] == [[1, *shape[1:]]]
            seen.add(name)
    assert env_fields <= seen


def check_gradient_averaged_with_all_reduce(report):
    # tabular: the (per-device) gradient of the lane's 3 logits is summed across the envs axis
    assert any(s.startswith("f32[1,3]") for s in report["tabular"]["all_reduce"]), \
        report["tabular"]["all_reduce"]
    assert report["ppo"]["all_reduce"]  # batch statistics at least


def check_ppo_gradient_all_reduce(report):
    # each device's minibatch rows give a partial gradient, summed across "envs" (per layer)
    shapes = report["ppo"]["all_reduce"]
    flat = f"f32[1,{report['ppo']['param_count']}]"
    assert any(s == "f32[1,64,64]" or s == flat for s in shapes), shapes


def check_cli_eight_devices(report):
    one, eight = report["cli_one"], report["cli_eight"]
    assert one["code"] == 0 and eight["code"] == 0, eight["stderr"]
    a, b = json.loads(one["stdout"]), json.loads(eight["stdout"])
    assert "devices" not in a and b["devices"] == 8
    close(b["params"], a["params"], 1e-5, 1e-6)
    close(b["exact_return"], a["exact_return"], 1e-5, 1e-6)
    folder = report["folder"]
    assert json.loads((folder / "eight" / "config.json").read_text())["num_devices"] == 8
    summary = json.loads((folder / "eight" / "summary.json").read_text())
    assert summary["devices"] == 8 and summary["mesh"] == {"lanes": 2, "envs": 4}
    assert json.loads((folder / "one" / "summary.json").read_text())["mesh"] is None


def check_cli_without_devices_puts_whole_lanes_on_the_cores(report):
    """``rollax train --seeds 2`` on a CPU with several devices and cores runs each seed on
    its own device, each lane then its seed's run alone bit for bit; on one core, one device
    (the lanes one ``vmap``)."""
    auto = json.loads(report["cli_auto"]["stdout"])
    alone = [json.loads(a["stdout"]) for a in report["cli_alone"]]
    summary = json.loads((report["folder"] / "auto" / "summary.json").read_text())
    if report["cores"] == 1:
        assert "devices" not in auto and summary["mesh"] is None
        return
    assert auto["devices"] == 2 and summary["mesh"] == {"lanes": 2, "envs": 1}
    # the initial state, the evaluation and the chunk, which compiled beside the first two for
    # the state's layout on the devices (lanes apart, each program is named "call")
    assert report["cli_auto_lowered"].count("jit(call)") == 3, report["cli_auto_lowered"]
    assert auto["params"] == [a["params"][0] for a in alone]
    assert auto["exact_return"] == [a["exact_return"][0] for a in alone]
    # config.json leaves the count to the machine the run is resumed on
    assert json.loads((report["folder"] / "auto" / "config.json").read_text())[
        "num_devices"] is None


def check_cli_resume_on_another_device_count(report):
    resumed = report["cli_resumed"]
    assert resumed["code"] == 0, resumed["stderr"]
    c, b = json.loads(resumed["stdout"]), json.loads(report["cli_eight"]["stdout"])
    assert c["devices"] == 4
    close(c["params"], b["params"], 1e-5, 1e-6)
    rows = (report["folder"] / "resumed" / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(r)["update"] for r in rows] == [u for u in range(7) for _ in range(2)]


def check_cli_ppo_eight_devices(report):
    result = report["cli_ppo"]
    assert result["code"] == 0, result["stderr"]
    obj = json.loads(result["stdout"])
    assert obj["devices"] == 8 and obj["env_steps"] == 2048
    # the same lanes as the Runner runs above: the logged metrics agree with one device's
    one = report["ppo"]["one"]["metrics"]
    rows = [json.loads(r) for r in
            (report["folder"] / "ppo" / "metrics.jsonl").read_text().splitlines()]
    for name in ("policy_loss", "value_loss", "entropy", "approx_kl"):
        logged = np.full((2, 16), np.nan)
        for r in rows:
            if r["update"] > 0:
                logged[r["seed"], r["update"] - 1] = r[name]
        close(logged, one[name], 1e-4, 1e-5)


def check_cli_too_many_devices(report):
    result = report["cli_too_many"]
    assert result["code"] == 2 and result["stdout"] == ""
    assert result["stderr"] == ("rollax train: error: devices is 16 but JAX sees only 8 cpu "
                                "devices (on one host, XLA_FLAGS=--xla_force_host_platform_"
                                "device_count=N gives N CPU devices)\n")
    assert report["never_written"]


LAUNCH = textwrap.dedent(r'''
    import sys
    import jax

    process, port = int(sys.argv[1]), sys.argv[2]
    jax.distributed.initialize(coordinator_address=f"localhost:{port}", num_processes=2,
                               process_id=process)
    assert jax.device_count() == 8 and jax.local_device_count() == 4
    from rollax.cli import main

    raise SystemExit(main(sys.argv[3:]))
''')


def check_two_processes(report):
    """Multi-controller: two processes with four CPU devices each, jax.distributed.initialize
    on localhost, the same command with --devices 8; each writes its own run folder."""
    import socket

    tmp_path = report["folder"] / "two-processes"
    with socket.socket() as s:
        s.bind(("localhost", 0))
        port = s.getsockname()[1]
    flags = f"{os.environ.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count=4"
    env = {**os.environ, "XLA_FLAGS": flags.strip(), "JAX_PLATFORMS": "cpu"}
    argv = ["train", "--updates", "6", "--batch-size", "64", "--seeds", "2", "--chunk-size",
            "2", "--checkpoint-every", "2", "--json", "--devices", "8"]
    procs = [subprocess.Popen([sys.executable, "-c", LAUNCH, str(i), str(port), *argv,
                               "--out", str(tmp_path / f"p{i}")], env=env, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for i in range(2)]
    outputs = [p.communicate(timeout=600) for p in procs]
    for p, (_, err) in zip(procs, outputs):
        assert p.returncode == 0, err[-3000:]
    # the CPU collectives (gloo) print connection lines on stdout: the JSON is the last line
    results = [json.loads(out.strip().splitlines()[-1]) for out, _ in outputs]
    assert results[0]["params_sha256"] == results[1]["params_sha256"]
    assert results[0]["devices"] == 8
    one = json.loads(report["cli_one"]["stdout"])
    close(results[0]["params"], one["params"], 1e-5, 1e-6)
    close(results[0]["exact_return"], one["exact_return"], 1e-5, 1e-6)
    summary = json.loads((tmp_path / "p1" / "summary.json").read_text())
    assert summary["mesh"] == {"lanes": 2, "envs": 4}


# --- a recurrent PPO on two of the eight devices (the same subprocess) -------------------


def check_recurrent_carry_split_over_environments(report, network):
    run = report["recurrent"][network]
    assert run["carry"], "no carry leaves"
    # the carried state's layout (the fresh state, and what a checkpoint is placed with):
    # (lanes 1, B 4, memory 8), B split over the 2 "envs" devices, like the environments
    for leaf in run["carry"]:
        assert leaf["shape"] == [1, 4, 8] and leaf["devices"] == 2
        assert leaf["shards"] == [[1, 2, 8]] and leaf["spec"][1] == "envs"
    assert run["declared"] and all("P('lanes', 'envs')" in s for s in run["declared"])
    assert run["later_lowerings"] == 0  # later chunks run the first one's program
    for a, b in zip(run["two"], run["one"]):
        close(a, b, 1e-4, 1e-5)


def check_cpu_devices_run_their_lanes_apart_each_the_single_seed_run(report, devices):
    """Four PPO lanes on two or four CPU devices (each device whole lanes: no environment
    split) are each, bit for bit, the run of that seed alone on one device."""
    apart = report["apart"]
    assert apart[devices]["lanes_apart"]
    assert apart[devices]["later_lowerings"] == 0  # later chunks run the first one's program
    for lane, alone in enumerate(apart["alone"]):
        assert apart[devices]["loss"][lane] == alone["loss"][0]
        for leaf, own in zip(apart[devices]["params"], alone["params"], strict=True):
            assert leaf[lane] == own[0]


CHECKS = [
    (check_device_count, ()),
    (check_tabular_eight_devices_equal_one, ()),
    (check_ppo_eight_devices_equal_one, ()),
    (check_state_spread_over_every_device, ()),
    (check_gradient_averaged_with_all_reduce, ()),
    (check_ppo_gradient_all_reduce, ()),
    (check_cli_eight_devices, ()),
    (check_cli_resume_on_another_device_count, ()),
    (check_cli_ppo_eight_devices, ()),
    (check_cli_too_many_devices, ()),
    (check_two_processes, ()),
    (check_recurrent_carry_split_over_environments, ("lstm",)),
]
"""The checks of the eight-device subprocess's ``main`` report (to float tolerances), with
their arguments."""

EXACT_CHECKS = [
    (check_cli_without_devices_puts_whole_lanes_on_the_cores, ()),
    (check_cpu_devices_run_their_lanes_apart_each_the_single_seed_run, ("2",)),
    (check_cpu_devices_run_their_lanes_apart_each_the_single_seed_run, ("4",)),
]
"""The checks of its ``exact`` report: lanes on devices of their own are each the run alone,
bit for bit."""


@pytest.mark.integration
def test_eight_devices(report, subtests):
    """Every check of the eight-device subprocess's ``main`` part, each a subtest (reported
    by name): one test, so one xdist worker builds the report instead of every worker that
    runs one of its checks."""
    for check, args in CHECKS:
        with subtests.test(check.__name__.removeprefix("check_"), args=args):
            check(report, *args)


@pytest.mark.optimized
@pytest.mark.integration
def test_eight_devices_exact(exact_report, subtests):
    """The bit-for-bit checks, in a subprocess of their own compiled as ``rollax`` compiles
    (a claim about the program users run), beside :func:`test_eight_devices`."""
    for check, args in EXACT_CHECKS:
        with subtests.test(check.__name__.removeprefix("check_"), args=args):
            check(exact_report, *args)
