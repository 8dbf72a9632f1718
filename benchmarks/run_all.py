"""Run every benchmark row, one subprocess at a time, and write RESULTS.md and results.json.

    bash benchmarks/run.sh [--quick] [--only ROW ...] [--out DIR]
    .bench/anchors/bin/python benchmarks/run_all.py [--quick] [--only ROW ...] [--out DIR]

Rows: throughput (CartPole-v1 beside gymnax, and the corridor collector), ppo (rollax vs rejax
at 4 environments, PPOConfig's defaults; then at 64 environments, 500,000 steps, and at 1,024,
2,097,152 steps = 16 updates of 131,072, jobs ppo-rollax-64, ppo-rejax-64, ppo-rollax-1024,
ppo-rejax-1024), solve (time to solve CartPole-v1, rollax vs Stable-Baselines3; rollax once
cold, then twice more in two fresh processes sharing a fresh temporary compile cache, jobs
solve-rollaxwarm-fill and solve-rollaxwarm, the second of which loads the program from disk:
the warm-cache time), seeds (1, 8, 64 seeds in one program), cnn (one PPO update on MinAtar
Breakout: rollax's CNN beside its MLP, its torso as it was before 2026-12-02 and the same update
written plainly, benchmarks/cnn_speed.py). Each job runs in its own
process, with the anchors environment's Python or the rejax one, and writes JSON to a temporary
file; the peak resident memory of that process is read from ``os.wait4``. The full run
writes benchmarks/RESULTS.md and benchmarks/results.json; ``--quick`` (tiny sizes, a smoke test
of a few minutes) writes to .bench/quick/ instead, ``--out DIR`` to DIR.
``--only`` re-runs some rows (every job of a row: ``--only ppo`` the six PPO jobs, ``--only
solve`` all four solve jobs) and keeps the others from the existing results.json.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ANCHORS = ROOT / ".bench/anchors/bin/python"
REJAX = ROOT / ".bench/rejax/bin/python"
ROWS = ("throughput", "ppo", "solve", "seeds", "cnn", "user")
TARGETS = {"ppo_run": 0.7, "ppo_compile": 0.5, "solve_speedup": 20.0,
           "solve_speedup_warm": 40.0, "cnn_over_mlp": 0.35, "cnn_over_before": 4.0,
           "command_s": 2.0, "train_beyond_s": 2.5, "gymnasium_over_before": 5.0,
           "act_over_before": 20.0, "seeds_over_processes": 0.9,
           "cli_over_bare": 1.1}
PPO_WIDE = {64: 500_000, 1024: 2_097_152}
"""The wider PPO rows: environments -> total steps (1,024 x 128 x 16 = 2,097,152). --quick runs
one update (environments x 128 steps)."""
VERSIONS = {
    ANCHORS: ["rollax", "jax", "jaxlib", "gymnax", "gymnasium", "optax", "equinox", "numpy",
              "torch", "stable-baselines3"],
    REJAX: ["rejax", "jax", "jaxlib", "gymnax", "flax", "distrax", "optax", "numpy"],
}


def jobs(row: str, quick: bool, tmp: Path) -> list[tuple[str, Path, list[str]]]:
    """(job name, python, script and arguments) of each process of ``row``; ``tmp`` is a fresh
    folder for this run's files (the solve row's compile cache). The part of a job's name
    before the first "-" is its row (``--only`` keeps other rows' jobs by it)."""
    if row == "throughput":
        size = (["--sizes", "1", "64", "--steps", "100", "--repeats", "2", "--corridor", "1024"]
                if quick else [])
        out = [("throughput", ANCHORS, ["throughput.py", *size]),
               ("throughput-rollax-only", ANCHORS, ["throughput.py", *size, "--no-gymnax"])]
        if "--no-rollax" in _help(ANCHORS, "throughput.py"):
            out.append(("throughput-gymnax-only", ANCHORS,
                        ["throughput.py", *size, "--no-rollax", "--corridor"]))
        return out
    if row == "ppo":
        size = ["--total-steps", "8192", "--repeats", "1"] if quick else []
        out = [("ppo-rollax", ANCHORS, ["ppo_rollax.py", *size]),
               ("ppo-rejax", REJAX, ["ppo_rejax.py", *size])]
        for envs, steps in PPO_WIDE.items():
            wide = ["--num-envs", str(envs), "--total-steps",
                    *([str(envs * 128), "--repeats", "1"] if quick else [str(steps)])]
            out += [(f"ppo-rollax-{envs}", ANCHORS, ["ppo_rollax.py", *wide]),
                    (f"ppo-rejax-{envs}", REJAX, ["ppo_rejax.py", *wide])]
        return out
    if row == "solve":
        rollax = ["solve.py", "--lib", "rollax", *(["--seeds", "2", "--steps", "8192"]
                                                   if quick else [])]
        cache = ["--compile-cache", str(tmp / "compile-cache")]  # fresh: the fill job writes it
        return [("solve-rollax", ANCHORS, rollax),
                ("solve-rollaxwarm-fill", ANCHORS, [*rollax, *cache]),
                ("solve-rollaxwarm", ANCHORS, [*rollax, *cache]),
                ("solve-sb3", ANCHORS, ["solve.py", "--lib", "sb3", *(
                    ["--seeds", "1", "--steps", "2048"] if quick else [])])]
    if row == "seeds":
        size = ["--total-steps", "4096"] if quick else []
        return [(f"seeds-{k}", ANCHORS, ["seeds.py", "--seeds", str(k), *size])
                for k in ((1, 2) if quick else (1, 8, 64))]
    if row == "cnn":
        return [("cnn", ANCHORS, ["cnn_speed.py", "--before", "--repeats",
                                  "1" if quick else "5"])]
    if row == "user":
        return [("user", ANCHORS, ["user_speed.py", "--repeats", "1" if quick else "3"])]
    raise ValueError(row)


def _output(*cmd) -> subprocess.CompletedProcess:
    return subprocess.run([str(c) for c in cmd], cwd=ROOT, capture_output=True, text=True,
                          check=False)


def _help(python: Path, script: str) -> str:
    return _output(python, ROOT / "benchmarks" / script, "--help").stdout


IDLE_LIMIT_S = 60
"""A job that uses no CPU for this long is taken as hung, killed and run once more (jaxlib
0.10.1 and 0.10.2, which rollax's pin now excludes, deadlock on the CPU in vmapped PPO
programs: worker threads idle, the main thread waiting for a result; benchmarks/NOTES.md)."""


def _cpu_seconds(pid: int) -> float:
    """The CPU time of ``pid``, of its children it has waited for and of its running
    descendants (a job that runs its measurements in subprocesses is not idle)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        own = sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return -1.0
    return own + sum(max(_cpu_seconds(child), 0.0) for child in _children(pid))


def _children(pid: int) -> list[int]:
    children = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            children += [int(c) for c in (task / "children").read_text().split()]
        except (OSError, ValueError):
            pass
    return children


def _watch(proc: subprocess.Popen, stop: threading.Event) -> None:
    """Kill ``proc`` once its CPU time stops growing for ``IDLE_LIMIT_S``."""
    last, idle_since = _cpu_seconds(proc.pid), time.monotonic()
    while not stop.wait(5):
        now = _cpu_seconds(proc.pid)
        if now > last + 0.05:
            last, idle_since = now, time.monotonic()
        elif time.monotonic() - idle_since > IDLE_LIMIT_S:
            proc.kill()
            return


def run_job(name: str, python: Path, argv: list[str]) -> dict:
    """Run one job to completion (once more if it hangs)."""
    result = _run_job(name, python, argv)
    if result["rc"] == -signal.SIGKILL:
        print(f"=== {name}: killed after {IDLE_LIMIT_S} s without CPU use (hung); "
              "running it once more", flush=True)
        result = {**_run_job(name, python, argv), "retried_after_hang": True}
    return result


def _run_job(name: str, python: Path, argv: list[str]) -> dict:
    """Run one job to completion; its JSON, exit status, wall time and peak RSS."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out.json"
        cmd = [str(python), str(ROOT / "benchmarks" / argv[0]), *argv[1:], "--json", str(out)]
        print(f"\n=== {name}: {' '.join(cmd[1:])}", flush=True)
        load = os.getloadavg()[0]
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=ROOT)
        stop = threading.Event()
        watchdog = threading.Thread(target=_watch, args=(proc, stop), daemon=True)
        watchdog.start()
        _, status, usage = os.wait4(proc.pid, 0)
        stop.set()
        proc.returncode = os.waitstatus_to_exitcode(status)
        wall = time.perf_counter() - start
        data = json.loads(out.read_text()) if out.exists() else None
    shown = f"{python.relative_to(ROOT)} benchmarks/{' '.join(argv)}"
    print(f"=== {name}: exit {proc.returncode}, {wall:.1f} s, peak RSS "
          f"{usage.ru_maxrss / 1024:.0f} MiB", flush=True)
    return {"cmd": shown, "rc": proc.returncode, "wall_s": wall,  # ru_maxrss is in KiB
            "peak_rss_mib": usage.ru_maxrss / 1024, "load_before": load, "data": data}


def machine() -> dict:
    def first(path: str, key: str, sep: str = ":") -> str:
        try:
            for line in Path(path).read_text().splitlines():
                if line.startswith(key):
                    return line.split(sep, 1)[1].strip().strip('"')
        except OSError:
            pass
        return "?"

    mem_kib = first("/proc/meminfo", "MemTotal").split()[0]
    versions = {}
    for python, packages in VERSIONS.items():
        code = ("import importlib.metadata as m, json, sys\nv = {}\nfor p in sys.argv[1:]:\n"
                "    try: v[p] = m.version(p)\n    except m.PackageNotFoundError: pass\n"
                "print(json.dumps(v))")
        out = _output(python, "-c", code, *packages)
        env = python.parent.parent.name
        versions[env] = json.loads(out.stdout) if out.returncode == 0 else {"error": out.stderr}
    commit = _output("git", "rev-parse", "--short", "HEAD").stdout.strip()
    dirty = _output("git", "status", "--porcelain", "--untracked-files=no").stdout.strip()
    return {
        "cpu": first("/proc/cpuinfo", "model name"), "cores": os.cpu_count(),
        "ram_gib": round(int(mem_kib) / 2**20, 1) if mem_kib.isdigit() else None,
        "os": f"{first('/etc/os-release', 'PRETTY_NAME', '=')}, {platform.platform()}",
        "python": platform.python_version(), "versions": versions,
        "commit": commit + (" (with uncommitted changes)" if dirty else ""),
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
    }


# ---------------------------------------------------------------------------------- report


def _f(x, spec=".2f", none="—"):
    return none if x is None else format(x, spec)


def _mem(results, name):
    job = results.get(name)
    return f"{job['peak_rss_mib']:.0f}" if job else "—"


def _failed(results, names) -> list[str]:
    lines = [f"*{n} failed (exit {results[n]['rc']}): see the console output of "
             f"`{results[n]['cmd']}`.*" for n in names if n in results and not results[n]["data"]]
    return [*lines, ""] if lines else []


def _target(value, bound, at_most=True) -> str:
    if value is None:
        return "not measured"
    return "met" if (value <= bound if at_most else value >= bound) else "missed"


def report_throughput(results, out: list[str], summary: list[str]) -> None:
    data = (results.get("throughput") or {}).get("data")
    out += ["## Environment throughput (CartPole-v1) and the corridor collector", ""]
    out += _failed(results, ["throughput", "throughput-rollax-only", "throughput-gymnax-only"])
    if not data:
        return
    out += [(f"Device: {data.get('machine', '?')}. Uniform random policy, auto-reset, "
             "`jit(vmap)` x `scan` of T steps; median of repeated runs after a warm-up; compile "
             "time apart. Ratio = rollax steps/s / gymnax steps/s (> 1: rollax faster)."), "",
            ("| B | T | rollax steps/s | gymnax 1.x steps/s | rollax / gymnax | "
             "compile s rollax | compile s gymnax |"), "|---|---|---|---|---|---|---|"]
    rows = data["rows"]
    for r in rows:
        if r["row"].startswith("CartPole"):
            out.append(f"| {r['B']:,} | {r['T']} | {r['rollax_sps']:.3e} | "
                       f"{_f(r.get('gymnax_sps'), '.3e')} | {_f(r.get('ratio'))} | "
                       f"{r['rollax_compile_s']:.2f} | {_f(r.get('gymnax_compile_s'))} |")
    out += ["", "Corridor absorbing collector (`rollax.collect`, trajectory stored):", "",
            "| B | T | env steps/s | compile s |", "|---|---|---|---|"]
    for r in rows:
        if r["row"].startswith("corridor"):
            out.append(f"| {r['B']:,} | {r['T']} | {r['rollax_sps']:.3e} | "
                       f"{r['rollax_compile_s']:.2f} |")
    both, ours, theirs = (_mem(results, n) for n in ("throughput", "throughput-rollax-only",
                                                      "throughput-gymnax-only"))
    out += ["", (f"Peak host memory (max RSS of the process): rollax and gymnax in one process "
                 f"{both} MiB; rollax alone {ours} MiB; gymnax alone {theirs} MiB."), ""]


def _ppo_cells(d: dict) -> str:
    """The cells both PPO tables share: library, env steps, compile, run, steps/s, returns."""
    per = ", ".join(f"{x:.1f}" for x in d["eval_returns"])
    return (f"{d['lib']} {d['version']} | {d['env_steps']:,} | {d['compile_s']:.2f} | "
            f"{d['run_s']:.2f} ({len(d['run_times'])} runs) | {d['sps']:.3e} | "
            f"{d['eval_return']:.1f} ({per})")


def report_ppo(results, out: list[str], summary: list[str]) -> None:
    ours, theirs = (results.get(n, {}).get("data") for n in ("ppo-rollax", "ppo-rejax"))
    out += ["## PPO on CartPole-v1: rollax vs rejax", ""]
    out += _failed(results, ["ppo-rollax", "ppo-rejax"])
    out += [("Same hyperparameters: 4 envs x 128 steps, 4 epochs, 4 minibatches, lr 2.5e-4 "
             "annealed linearly, gamma 0.99, lambda 0.95, clip 0.2, vf 0.5, entropy 0.01, "
             "max grad norm 0.5, (64, 64) tanh, advantages normalised per minibatch. Compile = "
             "`jit(train).lower(key).compile()`; run = median of the timed runs after a warm-up, "
             "each ending in a greedy evaluation over 32 episodes. Ratio = rollax time / rejax "
             "time (< 1: rollax faster)."), "",
            ("| library | env steps | compile s | run s (median) | env steps/s | greedy return "
             "(median; per run) | peak RSS MiB |"), "|---|---|---|---|---|---|---|"]
    for name, d in (("ppo-rollax", ours), ("ppo-rejax", theirs)):
        if d:
            out.append(f"| {_ppo_cells(d)} | {_mem(results, name)} |")
    run_ratio = compile_ratio = None
    if ours and theirs:
        run_ratio, compile_ratio = (ours["run_s"] / theirs["run_s"],
                                    ours["compile_s"] / theirs["compile_s"])
        out += ["", (f"rollax / rejax: run time {run_ratio:.2f} (speed-up {1 / run_ratio:.2f}x), "
                 f"compile time {compile_ratio:.2f} (speed-up {1 / compile_ratio:.2f}x).")]
    if theirs:
        out += ["", (f"rejax side: {theirs.get('evaluation', '')}; gymnax "
                 f"{theirs.get('gymnax', '?')}. Differences that configuration cannot remove:"), ""]
        out += [f"- {d}" for d in theirs.get("differences", [])]
    out.append("")
    report_ppo_wide(results, out)
    summary.append(f"| PPO run time, rollax / rejax <= {TARGETS['ppo_run']} | {_f(run_ratio)} | "
                   f"{_target(run_ratio, TARGETS['ppo_run'])} |")
    summary.append(f"| PPO compile time, rollax / rejax <= {TARGETS['ppo_compile']} | "
                   f"{_f(compile_ratio)} | {_target(compile_ratio, TARGETS['ppo_compile'])} |")


def report_ppo_wide(results, out: list[str]) -> None:
    names = [f"ppo-{lib}-{envs}" for envs in PPO_WIDE for lib in ("rollax", "rejax")]
    if not any(n in results for n in names):
        return
    out += ["### Wider batches: 64 and 1,024 environments", ""]
    out += _failed(results, names)
    out += [("The hyperparameters above apart from the number of environments N: N envs x 128 "
             "steps per update, still 4 epochs x 4 minibatches, so a minibatch holds N x 32 "
             "steps (2,048 at 64 envs, 32,768 at 1,024); lr 2.5e-4 annealed linearly over the "
             "run's gradient steps. 64 envs: 500,000 steps (61 updates of 8,192); 1,024 envs: "
             "2,097,152 steps (16 updates of 131,072). Compile and run timed as above. Ratios = "
             "rollax time / rejax time at that N (< 1: rollax faster)."), "",
            ("| envs | library | env steps | compile s | run s (median) | env steps/s | greedy "
             "return (median; per run) | run rollax / rejax | compile rollax / rejax | peak RSS "
             "MiB |"), "|---|---|---|---|---|---|---|---|---|---|"]
    for envs in PPO_WIDE:
        ours, theirs = (results.get(f"ppo-{lib}-{envs}", {}).get("data")
                        for lib in ("rollax", "rejax"))
        run_ratio = compile_ratio = ""
        if ours and theirs:
            run_ratio = f"{ours['run_s'] / theirs['run_s']:.2f}"
            compile_ratio = f"{ours['compile_s'] / theirs['compile_s']:.2f}"
        for lib, d in (("rollax", ours), ("rejax", theirs)):
            if d:
                ratios = (run_ratio, compile_ratio) if lib == "rollax" else ("", "")
                out.append(f"| {envs:,} | {_ppo_cells(d)} | {ratios[0]} | {ratios[1]} | "
                           f"{_mem(results, f'ppo-{lib}-{envs}')} |")
    out.append("")


def report_solve(results, out: list[str], summary: list[str]) -> None:
    names = ("solve-rollax", "solve-rollaxwarm-fill", "solve-rollaxwarm", "solve-sb3")
    ours, fill, warm, theirs = (results.get(n, {}).get("data") for n in names)
    out += ["## Time to solve CartPole-v1: rollax vs Stable-Baselines3 (rl-zoo tuned)", ""]
    out += _failed(results, names)
    out += [("Solved: mean greedy evaluation return >= 475 over the seeds (32 episodes each). "
             "rollax: all seeds in one program, time = compile + training + evaluation. SB3: "
             "seeds one after the other, time = sum over seeds of environment and model set-up, "
             "training and evaluation (imports excluded). One measurement each. Ratio = rollax "
             "time / SB3 time (< 1: rollax faster); speed-up = SB3 time / rollax time. "
             "\"warm compile cache\": rollax again in a fresh process whose compile cache "
             "(`solve.py --compile-cache DIR`, a fresh temporary folder) an earlier process "
             "of the same program filled, so compile = tracing, lowering and loading the "
             "program from disk."), "",
            ("| library | seeds | steps/seed | time to solve s | of which compile s | greedy "
             "return per seed | mean | solved | peak RSS MiB |"),
            "|---|---|---|---|---|---|---|---|---|"]
    for name, d in (("solve-rollax", ours), ("solve-rollaxwarm", warm), ("solve-sb3", theirs)):
        if d:
            per = ", ".join(f"{x:.1f}" for x in d["eval_returns"])
            label = ", warm compile cache" if name == "solve-rollaxwarm" else ""
            out.append(f"| {d['lib']} {d['version']} ({d['device']}){label} | {d['seeds']} | "
                       f"{d['steps_per_seed']:,} | {d['time_s']:.1f} | {_f(d.get('compile_s'))} "
                       f"| {per} | {d['eval_mean']:.1f} | {'yes' if d['solved'] else 'no'} | "
                       f"{_mem(results, name)} |")
    if ours:
        out += ["", f"rollax settings: `{ours['config']}`."]
    warm_hit = bool(warm and warm.get("cache_hits"))
    if fill or warm:
        def cache(d):
            return (f"{d['time_s']:.1f} s, of which compile {d['compile_s']:.2f} s, "
                    f"{d.get('cache_hits', 0)} cache hit(s), {d.get('cache_writes', 0)} "
                    "write(s)" if d else "failed")
        out += ["", (f"Warm compile cache: the filling process {cache(fill)}; the warm process "
                     f"{cache(warm)}.")]
        if warm and not warm_hit:
            out.append("The warm process did not load its program from the cache: its time is "
                       "not a warm-cache time.")
    if theirs:
        times = ", ".join(f"{t:.1f}" for t in theirs["seed_times"])
        out += ["", (f"SB3 settings (rl-baselines3-zoo hyperparams/ppo.yml, CartPole-v1): "
                 f"`{theirs['config']}`; per-seed times {times} s; "
                 f"{theirs['torch_threads']} torch threads.")]
    speedup = None
    if ours and theirs:
        speedup = theirs["time_s"] / ours["time_s"]
        out += ["", (f"rollax / SB3 time: {ours['time_s'] / theirs['time_s']:.3f} "
                 f"(speed-up {speedup:.1f}x).")]
        if not theirs["solved"]:
            out.append("SB3 did not reach 475 on its tuned budget; its time is that budget's.")
    warm_speedup = theirs["time_s"] / warm["time_s"] if warm_hit and theirs else None
    if warm_speedup:
        out += ["", (f"rollax (warm compile cache) / SB3 time: "
                 f"{warm['time_s'] / theirs['time_s']:.3f} (speed-up {warm_speedup:.1f}x).")]
    out.append("")
    met = _target(speedup, TARGETS["solve_speedup"], at_most=False)
    if ours and not ours["solved"]:
        met = "missed (rollax did not solve)"
    summary.append(f"| time to solve, SB3 / rollax >= {TARGETS['solve_speedup']:.0f} | "
                   f"{_f(speedup, '.1f')} | {met} |")
    met = _target(warm_speedup, TARGETS["solve_speedup_warm"], at_most=False)
    if warm and not warm_hit:
        met = "not measured (no cache hit)"
    elif warm and not warm["solved"]:
        met = "missed (rollax did not solve)"
    summary.append(f"| time to solve, warm compile cache, SB3 / rollax >= "
                   f"{TARGETS['solve_speedup_warm']:.0f} | {_f(warm_speedup, '.1f')} | {met} |")


def report_seeds(results, out: list[str], summary: list[str]) -> None:
    names = sorted((n for n in results if n.startswith("seeds-")), key=lambda n: int(n[6:]))
    out += ["## Seeds scaling: K PPO seeds (CartPole-v1) in one vmapped program", ""]
    out += _failed(results, names)
    rows = [(n, r) for n in names if results[n]["data"] for r in results[n]["data"]["rows"]]
    if not rows:
        return
    base = next((r["sps"] for _, r in rows if r["seeds"] == 1), None)
    out += [("One process per K. Env steps/s counts all seeds; scaling = steps/s over the "
             "1-seed steps/s."), "",
            ("| seeds | steps/seed | compile s | run s | env steps/s | scaling vs 1 seed | "
             "greedy eval mean | peak RSS MiB |"), "|---|---|---|---|---|---|---|---|"]
    for name, r in rows:
        out.append(f"| {r['seeds']} | {r['steps_per_seed']:,} | {r['compile_s']:.2f} | "
                   f"{r['run_s']:.2f} | {r['sps']:.3e} | "
                   f"{_f(r['sps'] / base if base else None)} | {_f(r.get('eval_mean'), '.1f')} "
                   f"| {_mem(results, name)} |")
    out.append("")


def report_cnn(results, out: list[str], summary: list[str]) -> None:
    out += ["## One PPO update on MinAtar Breakout: CNN vs MLP, rollax vs the plain update", ""]
    out += _failed(results, ["cnn"])
    data = results.get("cnn", {}).get("data")
    if not data:
        return
    ratios = data["ratios"]
    for key, target in (("rollax cnn / rollax mlp", "cnn_over_mlp"),
                        ("rollax cnn / rollax cnn, before", "cnn_over_before")):
        if key in ratios:
            summary.append(f"| env steps/s {key} >= {TARGETS[target]} | {ratios[key]:.2f} | "
                           f"{_target(ratios[key], TARGETS[target], at_most=False)} |")
    out += [("The gymnax-blines preset (64 envs x 128 steps = 8,192 env steps per update, 4 "
             "epochs x 8 minibatches, hidden (256, 256) relu; the CNN one 3x3 convolution of 16 "
             "planes). Each row one compiled update after a warm-up, the rows interleaved in "
             "each repeat; median. \"plain\" = PureJaxRL's update written out (flax.linen, "
             "gymnax's wrappers, scans, optax) with flax's `nn.Conv` (\"lax conv\") or the "
             "convolution as one Dense over the 3x3 patches (\"patches\", rollax's "
             "formulation); \"before\" = rollax's CNN torso as it was before 2026-12-02 "
             "(equinox `Conv2d` on the CHW image). benchmarks/cnn_speed.py's docstring has "
             "the details."), "",
            "| update | s per update (median) | env steps/s | build + compile s |",
            "|---|---|---|---|"]
    for name, sps in data["sps"].items():
        run_s = statistics.median(data["times"][name])
        out.append(f"| {name} | {run_s:.3f} | {sps:,.0f} | {data['compile_s'][name]:.1f} |")
    out += ["", "Ratios of env steps/s: " + "; ".join(
        f"{k} {v:.2f}" for k, v in ratios.items()) + ".", ""]


def report_user(results, out: list[str], summary: list[str]) -> None:
    from user_speed import table  # benchmarks/user_speed.py, beside this script

    out += ["## What a user waits for: the command line, to_gymnasium and act, before and after",
            ""]
    out += _failed(results, ["user"])
    data = results.get("user", {}).get("data")
    if not data:
        return
    b, a = data["results"]["before"], data["results"]["after"]
    for name, key in (("rollax --version", "version"), ("rollax --help", "help"),
                      ("rollax envs", "envs")):
        summary.append(f"| {name} s <= {TARGETS['command_s']:.0f} | {a[key]:.2f} | "
                       f"{_target(a[key], TARGETS['command_s'])} |")
    summary.append(f"| rollax train CartPole-v1 beyond its training s <= "
                   f"{TARGETS['train_beyond_s']} | {a['train_beyond']:.2f} | "
                   f"{_target(a['train_beyond'], TARGETS['train_beyond_s'])} |")
    gym = a["gymnasium"]["rollax"] / b["gymnasium"]["rollax"]
    summary.append(f"| to_gymnasium 8 envs, after / before >= "
                   f"{TARGETS['gymnasium_over_before']:.0f} | {gym:.2f} | "
                   f"{_target(gym, TARGETS['gymnasium_over_before'], at_most=False)} |")
    act = a["act"] / b["act"]
    summary.append(f"| act on one observation, after / before >= "
                   f"{TARGETS['act_over_before']:.0f} | {act:.2f} | "
                   f"{_target(act, TARGETS['act_over_before'], at_most=False)} |")
    if "bare_run" in a:
        over = a["train_run"] / a["bare_run"]
        summary.append(f"| rollax train CartPole-v1 run / the bare program's <= "
                       f"{TARGETS['cli_over_bare']} | {over:.2f} | "
                       f"{_target(over, TARGETS['cli_over_bare'])} |")
    if "seeds_devices" in a:
        cores = a["seeds_devices"] / a["seeds_processes"]
        summary.append(f"| --seeds 2 --devices 2 on 2 cores, over 2 processes >= "
                       f"{TARGETS['seeds_over_processes']} | {cores:.2f} | "
                       f"{_target(cores, TARGETS['seeds_over_processes'], at_most=False)} |")
    out += [(f"benchmarks/user_speed.py: the code at {data['before']} (before this round of "
             f"work) and at {data['after']}, each in fresh processes of the same Python, one "
             f"after the other; medians of {data['repeats']}. The CartPole command uses its "
             "defaults (PPO, 5e5 steps) with a warm compile cache of its own; \"beyond\" is "
             "its wall time less its training run (`run_time_s`): start-up, imports, tracing, "
             "the final evaluation, figures and files. Seeds on the cores: two CartPole seeds "
             "on two forced CPU devices, and as two processes side by side. to_gymnasium: "
             "2,000 steps of 8 "
             "CartPole-v1 environments with random actions, Gymnasium's own SyncVectorEnv in "
             "the same process beside it. act: single observations, the CartPole run's "
             "policy."), "", *table(b, a)]
    out.append("")


def _stamps(results: dict) -> list[tuple[dict, list[str]]]:
    """The jobs grouped by when and where they ran (their ``at``: commit, date, CPU)."""
    groups: list[tuple[dict, list[str]]] = []
    for name, r in results.items():
        at = r.get("at", {"commit": "?", "date": "?", "cpu": "?"})
        for stamp, names in groups:
            if stamp == at:
                names.append(name)
                break
        else:
            groups.append((at, [name]))
    return groups


def report(results: dict, info: dict) -> str:
    versions = "; ".join(f"{env}: " + ", ".join(f"{k} {v}" for k, v in vs.items())
                         for env, vs in info["versions"].items())
    quick = [n for n, r in results.items() if r.get("quick")]
    out = ["# Benchmark results", "",
           ("Written by `bash benchmarks/run.sh` (benchmarks/run_all.py); raw numbers in "
            "results.json beside this file."), "",
           (f"- Machine of the latest run: {info['cpu']}, {info['cores']} cores, "
            f"{info['ram_gib']} GiB RAM; {info['os']}"),
           f"- Python {info['python']}; {versions}",
           *(f"- {', '.join(names)}: rollax commit {at['commit']}, {at['date']}, on "
             f"{at['cpu']}" for at, names in _stamps(results)), ""]
    if quick:
        out += [f"**Quick run (`--quick`, tiny sizes; not for comparison): {', '.join(quick)}.**",
                ""]
    body, summary = [], []
    for row in ROWS:
        globals()[f"report_{row}"](results, body, summary)
    out += ["## Targets", "", "| target | value | status |", "|---|---|---|", *summary, "", *body]
    out += ["## Jobs", "",
            ("One process each, run one after the other. Load = the host's 1-minute load "
             "average just before the job (other work on the machine slows it)."), "",
            "| job | command | exit | wall s | peak RSS MiB | load |", "|---|---|---|---|---|---|"]
    out += [f"| {n} | `{r['cmd']}` | {r['rc']} | {r['wall_s']:.1f} | {r['peak_rss_mib']:.0f} | "
            f"{_f(r.get('load_before'), '.1f')} |" for n, r in results.items()]
    return "\n".join(out) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes (smoke test)")
    parser.add_argument("--only", nargs="+", choices=ROWS, default=list(ROWS))
    parser.add_argument("--out", type=Path, default=None,
                        help="directory for RESULTS.md and results.json (default: benchmarks/, "
                        "or .bench/quick/ with --quick)")
    args = parser.parse_args()
    out_dir = args.out or (ROOT / ".bench/quick" if args.quick else ROOT / "benchmarks")
    out_dir.mkdir(parents=True, exist_ok=True)
    raw = out_dir / "results.json"
    previous = json.loads(raw.read_text())["jobs"] if raw.exists() else {}
    results = {n: r for n, r in previous.items() if n.split("-")[0] not in args.only}
    info = machine()
    at = {k: info[k] for k in ("commit", "date", "cpu")}
    with tempfile.TemporaryDirectory(prefix="rollax-bench-") as tmp:
        for row in args.only:
            for name, python, argv in jobs(row, args.quick, Path(tmp)):
                results[name] = {**run_job(name, python, argv), "quick": args.quick, "at": at}
    results = {n: results[n] for row in ROWS for n in results if n.split("-")[0] == row}
    raw.write_text(json.dumps({"machine": info, "jobs": results}, indent=1) + "\n")
    (out_dir / "RESULTS.md").write_text(report(results, info))
    print(f"\nwrote {out_dir / 'RESULTS.md'} and {raw}")
    failed = [n for n, r in results.items() if r["rc"] != 0]
    if failed:
        sys.exit(f"failed jobs: {', '.join(failed)}")


if __name__ == "__main__":
    main()
