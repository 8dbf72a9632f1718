"""The commands of ``rollax`` as typed dataclasses (tyro turns them into flags).

``rollax train``'s flags are the run's settings (:class:`RunFlags`) and every field of the
config of the algorithm that trains the chosen environment, each typed and documented from its
dataclass, with the environment's preset (and the config file's values) as defaults; the
fields that only other registered algorithms have are flags too, refused for this environment.
An algorithm added to :mod:`rollax.algos.registry` brings its flags with it.
"""

import ast
import dataclasses
import decimal
import functools
import inspect
import itertools
import operator
import textwrap
import types
import typing
from collections.abc import Mapping
from typing import Annotated, Any, Literal

import tyro

from rollax.envs.tabular import TOY_TEXT


# {tabular} and {neural}: the methods that train each task, filled in from the registry
# (rollax.cli.reference.train_summary), so that the help names every registered method.
@dataclasses.dataclass(frozen=True)
class RunFlags:
    """Train a policy (--algo; default ppo). Finite tasks (corridor, toy-text) train a tabular
    policy with {tabular} and report the exact return per update; vector-observation
    tasks (CartPole-v1, Acrobot-v1, MountainCar-v0, Pendulum-v1, gymnax:<id>) train a neural
    policy with {neural}, from the algorithm's preset for the task, and report a greedy
    evaluation."""

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
    """Greedy evaluation episodes per lane: of each --eval-every evaluation, and of the
    evaluation after training (neural tasks)."""
    video_every: int | None = None
    """A GIF of one greedy episode of lane 0 every N updates (at chunk ends) and at the end,
    in RUN/videos/, listed in summary.json; for environments rollax draws (rollax render);
    never changes the training results (default: none)."""
    devices: int | None = None
    """Split the lanes and each lane's environment batch over this many devices (the first N
    of jax.devices(); must divide lanes x num_envs or batch size); results equal one device's
    to float tolerance. On a CPU the rollax command makes N devices, and devices that each
    hold whole lanes run every lane as its single-seed run. Default: on a CPU, the most
    devices, one a core, that each hold whole lanes (seeds on every core), else one device;
    1: the lanes in one vmap on one device. With --resume: continue on N devices."""
    key_impl: Literal["threefry2x32", "rbg", "unsafe_rbg"] = "threefry2x32"
    """JAX's random-key implementation of the root keys. threefry2x32: the same numbers on
    every platform; rbg, unsafe_rbg: the accelerator's own generator (faster on a TPU), the
    same numbers only for the same command, platform and JAX version."""
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


@functools.cache
def field_docs(cls: type) -> dict[str, str]:
    """The docstring under each field of a dataclass, from its source and its dataclass bases'
    (a subclass's docstring of a field it redeclares wins); each class's source is read once
    per process (the dict is shared: do not change it)."""
    docs = {}
    for klass in reversed(cls.__mro__):
        if not dataclasses.is_dataclass(klass):
            continue
        tree = ast.parse(textwrap.dedent(inspect.getsource(klass)))
        body = tree.body[0].body  # type: ignore[attr-defined]
        for field, doc in itertools.pairwise(body):
            if (isinstance(field, ast.AnnAssign) and isinstance(field.target, ast.Name)
                    and isinstance(doc, ast.Expr) and isinstance(doc.value, ast.Constant)):
                docs[field.target.id] = " ".join(str(doc.value.value).split())
    return docs


def parse_count(text: str) -> int:
    """A count as people write it: ``1000000``, ``1_000_000`` or ``1e6`` (a whole number)."""
    try:
        number = decimal.Decimal(text.strip())  # exact: 9223372036854775807 stays itself
    except decimal.InvalidOperation:
        raise ValueError(f"{text!r} is not a whole number") from None
    if not number.is_finite() or number.adjusted() > 40 or number != number.to_integral_value():
        raise ValueError(f"{text!r} is not a whole number")
    return int(number)


Count = Annotated[int, tyro.constructors.PrimitiveConstructorSpec(
    nargs=1, metavar="INT", instance_from_str=lambda args: parse_count(args[0]),
    is_instance=lambda x: isinstance(x, int) and not isinstance(x, bool),
    str_from_instance=lambda x: [str(x)])]
"""An ``int`` flag that also reads ``1e6`` and ``1_000_000``."""


def flag_type(hint: Any) -> Any:
    """A config field's type as a flag: ``int`` (alone or in ``int | None``) as :data:`Count`."""
    if hint is int:
        return Count
    args = typing.get_args(hint)
    if typing.get_origin(hint) in (typing.Union, types.UnionType) and int in args:
        return functools.reduce(operator.or_, [Count if a is int else a for a in args])
    return hint


def _optional(hint: Any) -> Any:
    return hint if type(None) in typing.get_args(hint) else hint | None


@dataclasses.dataclass(frozen=True)
class Field:
    """One flag of ``rollax train``: its name, type, default and help."""

    name: str
    hint: Any
    default: Any
    help: str

    def as_field(self) -> tuple[str, Any, Any]:
        return (self.name, Annotated[flag_type(self.hint),
                                     tyro.conf.arg(help=self.help, metavar=choices(self.hint))],
                dataclasses.field(default=self.default))


def choices(hint: Any) -> str | None:
    """``{auto,mlp,cnn}`` for a ``Literal`` flag that may also be ``None`` (the field of
    another algorithm, unset unless given): its choices in order, without ``None``."""
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    if len(args) == 1 and typing.get_origin(args[0]) is Literal and len(typing.get_args(hint)) > 1:
        return "{" + ",".join(map(str, typing.get_args(args[0]))) + "}"
    return None


def train_fields(spec, defaults: Mapping[str, Any], tags: Mapping[str, str]) -> list[Field]:
    """The flags of ``rollax train`` for an environment that ``spec`` trains, in help order:
    ``--algo``, the run's first settings, every field of ``spec``'s config, the run's other
    settings, then the fields only other algorithms have (``None`` unless given; refused for
    this environment). ``defaults``: each flag's value when not given (the config's default,
    its preset or the config file's); ``tags``: a note on where it came from."""
    from rollax.algos.registry import algorithms
    from rollax.run.config import taken_by

    def make(cls, name, hint, help_prefix="") -> Field:
        text = help_prefix + (field_docs(cls).get(name) or name)
        if name in tags:
            text += f" [{tags[name]}]"
        return Field(name, hint, defaults.get(name), text)

    run_hints = typing.get_type_hints(RunFlags, include_extras=True)
    run = [make(RunFlags, f.name, run_hints[f.name]) for f in dataclasses.fields(RunFlags)]
    hints = typing.get_type_hints(spec.config_type)
    if "algo" in hints:
        algo_flag = make(spec.config_type, "algo", hints["algo"])
    else:  # every method that trains this task, the chosen one first
        methods = tuple(dict.fromkeys([*spec.methods, *(
            m for s in algorithms() if s.trains.name == spec.trains.name for m in s.methods)]))
        task = spec.trains.name
        algo_flag = Field("algo", Literal[methods], defaults.get("algo", spec.methods[0]),
                          f"Policy-gradient method ({task} tasks: {', '.join(methods)}).")
    taken = {"algo", *(f.name for f in run)}
    own = [make(spec.config_type, n, hints[n]) for n in spec.fields if n not in taken]
    taken |= set(spec.fields)
    others = []
    for other in algorithms():
        other_hints = typing.get_type_hints(other.config_type)
        for name in other.fields:
            if name not in taken:
                taken.add(name)
                others.append(make(other.config_type, name, _optional(other_hints[name]),
                                   f"({taken_by(spec, [name])} only) "))
    cut = [f.name for f in run].index("seeds") + 1
    return [algo_flag, *run[:cut], *own, *run[cut:], *others]


def train_command(fields: list[Field], summary: str) -> type:
    """The ``rollax train`` command of these flags, a frozen dataclass tyro parses; ``summary``
    heads its help (:func:`rollax.cli.reference.train_summary`)."""
    train = dataclasses.make_dataclass("Train", [f.as_field() for f in fields], frozen=True)
    train.__module__ = __name__
    train.__doc__ = summary
    return train


@dataclasses.dataclass(frozen=True)
class EvalCommand:
    """Evaluate the saved policies of a training run with fresh keys (greedy by default)."""

    run_dir: tyro.conf.Positional[str]
    """The run folder."""
    episodes: int = 100
    """Episodes per seed."""
    stochastic: bool = False
    """Sample actions instead of acting greedily."""
    seed: int = 0
    """Evaluation keys derive from jax.random.key(seed), apart from training's."""
    search_simulations: int | None = None
    """A game's policy also plays the search player of this many simulations per move
    (eval_search_win_first, ...; docs/games.md); default: the run's eval_search_simulations,
    0: none."""
    json: bool = False
    """Print one JSON object."""


@dataclasses.dataclass(frozen=True)
class PlotCommand:
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
class CheckEnvCommand:
    """Check an environment against the functional contract (jitted and vmapped): spaces,
    events, absorbing states, keys, finiteness, auto-reset final observations."""

    name: tyro.conf.Positional[str]
    """A registered environment name (e.g. CartPole-v1, gymnax:Catch-bsuite) or
    package.module:factory."""
    batch_size: int = 16
    """Environments checked in parallel."""
    num_steps: int | None = None
    """Steps each environment is driven for (default: its horizon + 3, at most 1024)."""
    seed: int = 0
    """Keys derive from jax.random.key(seed)."""
    json: bool = False
    """Print one JSON object (ok, checks)."""


@dataclasses.dataclass(frozen=True)
class RolloutCommand:
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
class ExactCommand:
    """Exact expected return of the uniform and of the optimal policy (dynamic programming)."""

    env: Literal[("corridor", *TOY_TEXT)] = "corridor"  # type: ignore[valid-type]
    """Finite task: the corridor or a Gymnasium toy-text environment."""
    horizon: int | None = None
    """Finite horizon (default: 8 for corridor, else the registered episode limit)."""
    json: bool = False
    """Print one JSON object (uniform_return, optimal_return, horizon)."""


@dataclasses.dataclass(frozen=True)
class GradientsCommand:
    """Measure policy-gradient estimators against the exact gradient of a finite task (bias,
    variance, MSE, cosine per estimator and batch size; docs/gradients.md)."""

    env: str = "corridor"
    """Finite task: corridor, a toy-text task, or package.module:factory (with to_mdp())."""
    horizon: int | None = None
    """Finite horizon (default: 8 for corridor, else the registered episode limit)."""
    episodes: str = "16,64,256"
    """Episodes per batch N, a comma list (each a multiple of --group-size)."""
    batches: int = 1000
    """Batches K drawn per N (>= 2): the sample gradients the statistics are taken over."""
    estimators: str | None = None
    """Comma list of estimators (default: all; docs/gradients.md describes each)."""
    group_size: int = 4
    """Episodes per group sharing a start state (score-loo and the group estimators)."""
    lam: float = 0.95
    """GAE lambda of gae-exact and gae-fitted, in [0, 1]."""
    params: Literal["random", "uniform"] = "random"
    """Where the gradient is taken: logits 0.5 * normal(params key), or zero logits."""
    seed: int = 0
    """Root key jax.random.key(seed), split into the params key and the batches' key."""
    out: str | None = None
    """Figure file, .png/.svg/.pdf (default runs/gradients-<env>-seed<S>-<time>.png)."""
    json: bool = False
    """Print one JSON object (settings, exact facts, rows, figure)."""


@dataclasses.dataclass(frozen=True)
class RenderCommand:
    """Play episodes of a run's policy (greedy by default), or of a uniform random policy on an
    environment, and write them as a GIF or MP4 with the step, return and action captioned;
    with --versus RUN2, games of a two-player game between two kept snapshots, seats
    alternating, each move's player and the result captioned."""

    target: tyro.conf.Positional[str]
    """A run folder, or an environment name (CartPole-v1, gymnax:Breakout-MinAtar, ...)."""
    out: str = "episode.gif"
    """The video file, .gif or .mp4 (MP4: pip install 'rollax[render]')."""
    episodes: int = 1
    """Episodes, one after the other in the video."""
    lane: int = 0
    """The run's lane (seed or sweep point) whose policy plays."""
    versus: str | None = None
    """A run folder of the same two-player game (TARGET itself allowed) whose snapshot plays
    the other seat: TARGET's moves first in games 1, 3, ..., RUN2's in games 2, 4, ...."""
    versus_lane: int = 0
    """With --versus: RUN2's lane whose policy plays."""
    update: int | None = None
    """With --versus: TARGET's kept checkpoint (its update) that plays (default: the latest)."""
    versus_update: int | None = None
    """With --versus: RUN2's kept checkpoint that plays (default: the latest)."""
    sample: bool = False
    """Sample actions instead of acting greedily (an environment's random policy samples)."""
    fps: float = 30.0
    """Frames per second."""
    seed: int = 0
    """Episodes start from jax.random.key(seed)."""
    max_steps: int = 1000
    """Steps per episode at most (also at most the environment's horizon)."""
    json: bool = False
    """Print one JSON object (out, returns, lengths, frames; with --versus: out, env, policy,
    players, games with each side's result, lengths, frames)."""


@dataclasses.dataclass(frozen=True)
class ExportCommand:
    """Write the policy of a run's lane as a file that acts without rollax: a jax.export
    artifact (stablehlo, loaded with JAX alone) or an ONNX model."""

    run_dir: tyro.conf.Positional[str]
    """The run folder."""
    format: Literal["stablehlo", "onnx"] = "stablehlo"
    """stablehlo: a serialized jax.export artifact (.jax); onnx: an ONNX model (.onnx; pip
    install 'rollax[onnx]')."""
    out: str | None = None
    """The file (default: policy.jax or policy.onnx); a JSON description goes beside it."""
    lane: int = 0
    """The run's lane (seed or sweep point) whose policy is exported."""
    sample: bool = False
    """Export the sampling policy: it takes a noise input (uniforms on (0, 1)) and draws the
    action from it; without it, the greedy policy (the distribution's mode)."""
    json: bool = False
    """Print the description as one JSON object."""


@dataclasses.dataclass(frozen=True)
class ExploitabilityCommand:
    """Exact NashConv and exploitability of a run's policies in Kuhn poker or Leduc hold'em
    (pgx:kuhn_poker, pgx:leduc_holdem; docs/games.md): each lane's policy at every
    information state, against best responses."""

    run_dir: tyro.conf.Positional[str]
    """The run folder (trained on pgx:kuhn_poker or pgx:leduc_holdem)."""
    greedy: bool = False
    """Measure the greedy policy (its mode at each information state) instead of the
    policy's own probabilities."""
    json: bool = False
    """Print one JSON object (env, updates, policy, lanes)."""


@dataclasses.dataclass(frozen=True)
class RateCommand:
    """Elo ratings (Bradley-Terry) of the policies saved in run folders of one two-player game
    (every kept checkpoint of every lane), against each other and a random legal player,
    who is rated 0 (docs/games.md)."""

    run_dirs: tyro.conf.Positional[tuple[str, ...]]
    """The run folders (trained by self-play on the same game with the same network)."""
    games: int = 50
    """Games each pair plays from each seat."""
    seed: int = 0
    """The round robin's games draw from jax.random.key(seed)."""
    greedy: bool = False
    """Play each policy's mode (most likely move) instead of sampling its moves."""
    json: bool = False
    """Print one JSON object (env, games, policy, players best first, wins)."""


@dataclasses.dataclass(frozen=True)
class PlayCommand:
    """Play a game against a run's policy in the terminal: a run trained by self-play on
    pgx:tic_tac_toe or pgx:connect_four takes one seat, you type your moves (a cell or column
    number; q quits) after each drawn board."""

    run_dir: tyro.conf.Positional[str]
    """The run folder (trained on pgx:tic_tac_toe or pgx:connect_four)."""
    seat: Literal["first", "second", "random"] = "first"
    """Your place in the move order (first plays X); random: drawn from --seed."""
    sample: bool = False
    """The agent samples its moves instead of playing its policy's mode (most likely move)."""
    lane: int = 0
    """The run's lane (seed or sweep point) whose policy plays."""
    seed: int = 0
    """Keys derive from jax.random.key(seed): the start state, the agent's samples."""
    json: bool = False
    """Draw the game on stderr; print one JSON object on stdout at the end (moves, result)."""


@dataclasses.dataclass(frozen=True)
class EnvsCommand:
    """List every registered environment id, one per line (with gymnax installed, also
    gymnax:<id> for each gymnax environment)."""

    json: bool = False
    """Print one JSON object (envs: the list)."""


@dataclasses.dataclass(frozen=True)
class TuneCommand:
    """Search hyperparameters with Optuna (the tune extra), PARALLEL trials at a time as the
    lanes of one compiled program."""

    env: str = "CartPole-v1"
    """The environment every trial trains."""
    algo: str | None = None
    """The method (default: the one that trains ENV); fixed for every trial."""
    trials: int = 16
    """Trials in all."""
    parallel: int = 4
    """Trials per program (its lanes)."""
    space: str | None = None
    """A YAML file: name: {low: L, high: H, log: true} or name: [choices], per-lane settings
    only (default: rl-baselines3-zoo's PPO space, per-lane part)."""
    sampler: Literal["tpe", "random", "cmaes", "grid"] = "tpe"
    """Optuna's sampler, seeded with SEED (grid: every setting a list of choices)."""
    budget: str | None = None
    """Env steps per trial (total_steps; default: the environment's preset)."""
    metric: str | None = None
    """The summary's per-lane number to maximise (default: the algorithm's score,
    eval_return)."""
    out: str | None = None
    """The study folder (default: a new one under tune/)."""
    seed: int = 0
    """The sampler's seed and every trial's training seed."""
    resume: str | None = None
    """A study folder to continue (its settings are read back; other flags are refused)."""
    show: str | None = None
    """A study folder to show: its best trials and figures (nothing trained; no other flag)."""
    pruner: Literal["halving", "hyperband", "median"] | None = None
    """Stop poor trials early (Optuna's pruner, at rungs of PRUNE_EVERY updates): the PARALLEL
    lanes become slots of one program, each taking the next trial as one ends."""
    prune_every: int | None = None
    """With --pruner: updates between a trial's reports (default: about a tenth of its run)."""
    pbt: bool = False
    """Population-based training: PARALLEL lanes in one run, the worst copying the best."""
    pbt_every: int | None = None
    """Updates between PBT's exploit steps (default: a tenth of the run's updates)."""
    json: bool = False
    """Print one JSON object (the best trial and its settings)."""


COMMANDS = {"train": RunFlags, "eval": EvalCommand, "plot": PlotCommand,
            "rollout": RolloutCommand, "exact": ExactCommand, "gradients": GradientsCommand,
            "check-env": CheckEnvCommand, "envs": EnvsCommand, "render": RenderCommand,
            "export": ExportCommand, "exploitability": ExploitabilityCommand,
            "play": PlayCommand, "rate": RateCommand, "tune": TuneCommand}

CONFIG_EXCLUDED = ("config", "resume", "json", "compile_cache", "log")
"""Train flags a config file may not set."""


ALIASES = {"learning_rate": "lr", "total_timesteps": "total_steps", "n_envs": "num_envs",
           "n_steps": "num_steps", "n_epochs": "epochs", "update_epochs": "epochs",
           "num_minibatches": "minibatches", "clip_range": "clip_eps", "clip_coef": "clip_eps",
           "horizon_length": "horizon", "env_id": "env", "ent_coeff": "ent_coef",
           "vf_coeff": "vf_coef", "norm_obs": "normalize_observations",
           "normalize_obs": "normalize_observations", "norm_adv": "normalize_advantages",
           "clip_vloss": "clip_value", "anneal_learning_rate": "anneal_lr",
           "hidden_sizes": "hidden",
           "net_arch": "hidden", "lstm_hidden_size": "memory_size",
           "n_timesteps": "total_steps", "policy": "network", "activation_fn": "activation",
           "log_std_init": "init_log_std", "normalize": "normalize_observations",
           "normalize_advantage": "normalize_advantages", "norm_reward": "normalize_rewards",
           "clip_reward": "reward_clip"}
"""Names Stable-Baselines3, CleanRL and PureJaxRL give rollax's settings: an unknown flag or
key that is one of them is answered with rollax's name."""
