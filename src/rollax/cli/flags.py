"""The commands of ``rollax`` as typed dataclasses (tyro turns them into flags), and config files.

``Train``'s flags are the run's settings (:data:`rollax.run_config.RUN_SETTINGS`) plus every
registered algorithm's own settings, built from the registry: an algorithm added to
:mod:`rollax.algos.registry` brings its flags with it. An algorithm's flag left unset takes
that algorithm's default.
"""

import ast
import dataclasses
import inspect
import itertools
import textwrap
import typing
from pathlib import Path
from typing import Annotated, Any, Literal

import tyro

from rollax.algos.registry import algorithms
from rollax.envs.tabular import TOY_TEXT


@dataclasses.dataclass(frozen=True)
class RunFlags:
    """Train a policy. Finite tasks (corridor, toy-text) train a tabular policy with REINFORCE
    or PPO-clip and report the exact return per update; vector-observation tasks (CartPole-v1,
    Acrobot-v1, MountainCar-v0, Pendulum-v1, gymnax:<id>) train a neural actor-critic with PPO
    from the task's preset and report a greedy evaluation."""

    env: str = "corridor"
    """Registered environment name, gymnax:<id>, or package.module:factory (an importable
    factory returning a rollax.Environment, called with horizon= when --horizon is given)."""
    seed: int = 0
    """Root key jax.random.key(seed); with --seeds K, seed k uses key(seed + k)."""
    seeds: int = 1
    """Independent seeds trained in one program (vmap)."""
    sweep: tuple[str, ...] = ()
    """Numeric hyperparameters to sweep, each name=v1,v2 (e.g. lr=1e-3,3e-4); every
    combination x seed is one lane of the same program."""
    chunk_size: int | None = None
    """Updates per compiled chunk (default: about 1/20 of the run); never changes results."""
    checkpoint_every: int | None = None
    """Write a checkpoint every N updates (at chunk ends; default: about 1/5 of the run)."""
    checked: bool = False
    """Checked mode: stop on an out-of-range action or a NaN/inf in observations, loss,
    gradients or parameters, naming the update, step and environment."""
    eval_every: int | None = None
    """Greedy evaluation every N updates (at chunk ends) on keys of its own, logged as
    greedy_return and plotted; never changes the training results (default: none)."""
    eval_episodes: int = 32
    """Episodes per lane of each --eval-every evaluation."""
    devices: int | None = None
    """Split the lanes and each lane's environment batch over this many devices (the first N
    of jax.devices(); must divide lanes x num_envs or batch size; default: one device);
    results equal one device's to float tolerance. With --resume: continue on N devices."""
    config: str | None = None
    """TOML or YAML file of these settings (names as here); command-line flags override it."""
    resume: str | None = None
    """Continue the run in this folder from its latest checkpoint (takes no other setting)."""
    out: str | None = None
    """Run folder to create (must not exist); default runs/<env>-<algo>-seed<S>-<time>."""
    json: bool = False
    """Print one JSON object instead of tables."""
    compile_cache: bool = True
    """Load and store compiled programs in JAX's persistent compilation cache (folder:
    $ROLLAX_COMPILE_CACHE, else ~/.cache/rollax/jax; ROLLAX_COMPILE_CACHE=off turns it off).
    Not a run setting: never changes results."""
    log: Annotated[tuple[str, ...], tyro.conf.UseAppendAction] = ()
    """Also log the metrics to experiment trackers: tensorboard (event files in
    RUN_DIR/tensorboard/<lane>/), wandb (one W&B run per lane; WANDB_MODE=offline honoured);
    a comma list or repeated --log. Never changes results; not stored in config.json (give it
    again with --resume)."""


def field_docs(cls: type) -> dict[str, str]:
    """The docstring under each field of a dataclass, from its source."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    body = tree.body[0].body  # type: ignore[attr-defined]
    docs = {}
    for field, doc in itertools.pairwise(body):
        if (isinstance(field, ast.AnnAssign) and isinstance(field.target, ast.Name)
                and isinstance(doc, ast.Expr) and isinstance(doc.value, ast.Constant)):
            docs[field.target.id] = " ".join(str(doc.value.value).split())
    return docs


def _optional(hint: Any) -> Any:
    args = typing.get_args(hint)
    return hint if type(None) in args else hint | None


def _algorithm_fields() -> list[tuple[str, Any, Any]]:
    """``(name, annotation, field)`` for ``--algo`` and each algorithm setting."""
    specs = algorithms()
    methods = tuple(dict.fromkeys(m for spec in specs for m in spec.methods))
    algo_help = "Policy-gradient method (" + "; ".join(
        f"{spec.task} tasks: {', '.join(spec.methods)}" for spec in specs) + ")."
    fields: list[tuple[str, Any, Any]] = [
        ("algo", Annotated[Literal[methods], tyro.conf.arg(help=algo_help)],  # type: ignore
         dataclasses.field(default=methods[0]))]
    seen: dict[str, list[str]] = {}
    hints: dict[str, Any] = {}
    for spec in specs:
        docs, types = field_docs(spec.config_type), typing.get_type_hints(spec.config_type)
        for name in spec.settings:
            seen.setdefault(name, []).append(f"{spec.task}: {docs.get(name, name)}")
            hints.setdefault(name, types[name])
    for name, helps in seen.items():
        text = " / ".join(helps) + " (unset: the algorithm's default)"
        fields.append((name, Annotated[_optional(hints[name]), tyro.conf.arg(help=text)],
                       dataclasses.field(default=None)))
    return fields


def _train_command() -> type:
    """``RunFlags`` with ``--algo`` first and the algorithms' settings after ``--seeds``."""
    docs = field_docs(RunFlags)
    run = [(f.name, Annotated[f.type, tyro.conf.arg(help=docs[f.name])],
            dataclasses.field(default=f.default))
           for f in dataclasses.fields(RunFlags)]
    algo, *settings = _algorithm_fields()
    cut = [name for name, _, _ in run].index("seeds") + 1
    train = dataclasses.make_dataclass("Train", [algo, *run[:cut], *settings, *run[cut:]],
                                       frozen=True)
    train.__module__ = __name__
    train.__doc__ = RunFlags.__doc__
    return train


Train = _train_command()


@dataclasses.dataclass(frozen=True)
class Evaluate:
    """Evaluate the saved policies of a training run with fresh keys (greedy by default)."""

    run_dir: tyro.conf.Positional[str]
    """The run folder."""
    episodes: int = 100
    """Episodes per seed."""
    stochastic: bool = False
    """Sample actions instead of acting greedily."""
    seed: int = 0
    """Evaluation keys derive from jax.random.key(seed), apart from training's."""
    json: bool = False
    """Print one JSON object."""


@dataclasses.dataclass(frozen=True)
class Plot:
    """Draw the figures of one or more run folders (PNG and SVG)."""

    run_dirs: tyro.conf.Positional[tuple[str, ...]]
    """Run folders (training runs are overlaid; rollout folders give active counts)."""
    out: str | None = None
    """Folder for the figures (default: RUN_DIR/figures for one run, else required)."""
    x: Literal["env_steps", "updates"] = "env_steps"
    """The x axis: environment steps per lane, or updates."""
    json: bool = False
    """Print one JSON object listing the files written."""


@dataclasses.dataclass(frozen=True)
class CheckEnv:
    """Check an environment against the functional contract (jitted and vmapped): spaces,
    events, absorbing states, keys, finiteness, auto-reset final observations."""

    name: tyro.conf.Positional[str]
    """A registered environment name (e.g. CartPole-v1, gymnax:Catch-bsuite) or
    package.module:factory."""
    batch_size: int = 16
    """Environments checked in parallel."""
    seed: int = 0
    """Keys derive from jax.random.key(seed)."""
    json: bool = False
    """Print one JSON object (ok, checks)."""


@dataclasses.dataclass(frozen=True)
class Rollout:
    """Collect one absorbing corridor batch with the uniform (zero-logit) policy."""

    seed: int = 0
    """The collection key is jax.random.key(seed)."""
    batch_size: int = 256
    """Environments (episodes) in the batch, B."""
    horizon: int = 8
    """Episode time limit, also the number of steps T collected."""
    out: str | None = None
    """Folder to create for the figure (must not exist); default runs/rollout-seed<S>-<time>."""
    json: bool = False
    """Print one JSON object (active_per_step, mean_return, run_dir)."""


@dataclasses.dataclass(frozen=True)
class Exact:
    """Exact expected return of the uniform and of the optimal policy (dynamic programming)."""

    env: Literal[("corridor", *TOY_TEXT)] = "corridor"  # type: ignore[valid-type]
    """Finite task: the corridor or a Gymnasium toy-text environment."""
    horizon: int | None = None
    """Finite horizon (default: 8 for corridor, else the registered episode limit)."""
    json: bool = False
    """Print one JSON object (uniform_return, optimal_return, horizon)."""


@dataclasses.dataclass(frozen=True)
class Envs:
    """List every registered environment id, one per line (with gymnax installed, also
    gymnax:<id> for each gymnax environment)."""

    json: bool = False
    """Print one JSON object (envs: the list)."""


COMMANDS = {"train": Train, "eval": Evaluate, "plot": Plot, "rollout": Rollout,
            "exact": Exact, "check-env": CheckEnv, "envs": Envs}

CONFIG_EXCLUDED = ("config", "resume", "json", "compile_cache", "log")
"""Train flags a config file may not set."""


ALIASES = {"learning_rate": "lr", "total_timesteps": "total_steps", "n_envs": "num_envs",
           "n_steps": "num_steps", "n_epochs": "epochs", "update_epochs": "epochs",
           "num_minibatches": "minibatches", "clip_range": "clip_eps", "clip_coef": "clip_eps",
           "horizon_length": "horizon", "env_id": "env"}
"""Names Stable-Baselines3 and CleanRL give rollax's settings: an unknown key that is one of
them is answered with rollax's name."""


def config_keys() -> list[str]:
    return [f.name for f in dataclasses.fields(Train) if f.name not in CONFIG_EXCLUDED]


def _parse_file(path: str) -> Any:
    file = Path(path)
    suffix = file.suffix.lower()
    if suffix not in (".toml", ".yaml", ".yml"):
        raise ValueError(f"config {path!r} must be a .toml, .yaml or .yml file")
    try:
        text = file.read_text()
    except OSError as err:
        raise ValueError(f"config {path!r} cannot be read: {err.strerror or err}") from None
    try:
        if suffix == ".toml":
            import tomllib

            return tomllib.loads(text)
        import yaml

        return yaml.safe_load(text)  # plain data only: no tags, no objects
    except Exception as err:  # the parsers raise their own error types
        first = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise ValueError(f"config {path!r} is not valid {suffix[1:].upper()}: {first}") from None


def load_config_file(path: str) -> dict:
    """The settings of a TOML (``.toml``) or YAML (``.yaml``/``.yml``, safe loader) file: a
    table of ``Train`` flag names (``-`` or ``_``) to single values (``sweep``: a list)."""
    import difflib

    data = _parse_file(path)
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ValueError(f"config {path!r} must hold a table of settings, got "
                         f"{type(data).__name__}")
    valid = config_keys()
    settings = {}
    for key, value in data.items():
        name = str(key).replace("-", "_")
        if name not in valid:
            close = [ALIASES[name]] if name in ALIASES else difflib.get_close_matches(
                name, valid, n=1)
            hint = f"; did you mean {close[0]}?" if close else ""
            raise ValueError(f"config {path!r}: unknown key {key!r}{hint}")
        if isinstance(value, dict):
            raise ValueError(f"config: {name!r} must be a single value, not a table")
        if name == "sweep":
            value = (value,) if isinstance(value, str) else tuple(map(str, value))
        settings[name] = value
    return settings
