"""rl-baselines3-zoo's PPO hyperparameters (one environment's entry of its
``hyperparams/ppo.yml``: Stable-Baselines3's ``PPO`` arguments) as :class:`PPOConfig` settings.

The translation is of the whole run the entry describes: an argument the entry leaves out takes
Stable-Baselines3's default (:data:`SB3_DEFAULTS`), so the settings reproduce the zoo's run as
far as rollax has its parts, and what it has not is named. The two losses differ in scale:
Stable-Baselines3 weighs the mean squared value error by ``vf_coef``, rollax weighs half of it
(:func:`rollax.losses.clipped_value_loss`), so rollax's ``vf_coef`` is twice the zoo's.
Two smaller differences are left unnamed: ``lin_X`` falls to 0 by update in Stable-Baselines3
and by gradient step in rollax, and Stable-Baselines3 trains whole updates until
``n_timesteps`` is reached where rollax trains ``total_steps // (num_envs * num_steps)``.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Mapping
from typing import Any

from rollax.validate import check_bool

SB3_DEFAULTS: dict[str, Any] = dict(
    n_envs=1, n_steps=2048, batch_size=64, n_epochs=10, learning_rate=3e-4, gamma=0.99,
    gae_lambda=0.95, clip_range=0.2, clip_range_vf=None, normalize_advantage=True, ent_coef=0.0,
    vf_coef=0.5, max_grad_norm=0.5, policy="MlpPolicy", normalize=False, policy_kwargs=None,
)
"""Stable-Baselines3's ``PPO`` defaults, and the zoo's (``n_envs=1``, no ``normalize``)."""

ACTIVATIONS = {"Tanh": "tanh", "ReLU": "relu"}
"""torch.nn activations rollax has (``activation_fn=nn.Tanh``), by class name."""

JOINT_CLIPPING = ("max_grad_norm (Stable-Baselines3 clips all gradients together, rollax the "
                  "actor's and the critic's apart)")


def from_zoo(entry: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The :class:`PPOConfig` settings of a zoo entry (every field the zoo's run fixes, in the
    config's order) and what rollax has no equivalent of, each named with its value.
    ``ValueError`` naming the key for a value of the wrong kind."""
    sb3 = {**SB3_DEFAULTS, **entry}
    lacks: list[str] = []
    out: dict[str, Any] = {}
    if "n_timesteps" in entry:
        out["total_steps"] = _count("n_timesteps", entry["n_timesteps"])
    envs, steps = _count("n_envs", sb3["n_envs"]), _count("n_steps", sb3["n_steps"])
    batch = _count("batch_size", sb3["batch_size"])
    out |= dict(num_envs=envs, num_steps=steps)
    if batch >= envs * steps:  # Stable-Baselines3 takes the whole rollout as one minibatch
        out["minibatches"] = 1
    elif batch and (envs * steps) % batch == 0:
        out["minibatches"] = envs * steps // batch
    else:
        lacks.append(f"batch_size {batch} (rollax's minibatches split n_envs x n_steps = "
                     f"{envs * steps} steps evenly)")
    out["epochs"] = _count("n_epochs", sb3["n_epochs"])
    out["lr"], out["anneal_lr"] = _schedule("learning_rate", sb3["learning_rate"])
    out["gamma"] = _number("gamma", sb3["gamma"])
    out["gae_lambda"] = _number("gae_lambda", sb3["gae_lambda"])
    out["clip_eps"], annealed = _schedule("clip_range", sb3["clip_range"])
    if annealed:
        lacks.append(f"clip_range {sb3['clip_range']} (rollax's clip_eps is constant)")
    if sb3["clip_range_vf"] is None:
        out["clip_value"] = False
    else:
        lacks.append(f"clip_range_vf {sb3['clip_range_vf']} (Stable-Baselines3 clips the value "
                     "prediction; rollax's clip_value takes the larger of the clipped and "
                     "unclipped losses, at clip_eps)")
    out["ent_coef"] = _number("ent_coef", sb3["ent_coef"])
    out["vf_coef"] = 2 * _number("vf_coef", sb3["vf_coef"])
    out["max_grad_norm"] = _number("max_grad_norm", sb3["max_grad_norm"])
    lacks.append(JOINT_CLIPPING)
    out["normalize_advantages"] = _flag("normalize_advantage", sb3["normalize_advantage"])
    norm_obs, norm_reward = _normalize(sb3["normalize"])
    out["normalize_observations"] = norm_obs
    out["reward_scale"] = 1.0
    out["normalize_rewards"] = norm_reward  # VecNormalize's clip_reward 10 is reward_clip's
    if sb3["policy"] == "MlpPolicy":
        out["network"] = "mlp"
    else:
        lacks.append(f"policy {sb3['policy']} (rollax's networks are its own: the network setting)")
    out |= _policy_kwargs(sb3["policy_kwargs"], lacks)
    lacks += [f"{key} {value}" for key, value in entry.items()
              if key not in SB3_DEFAULTS and key != "n_timesteps"]
    return out, lacks


def _real(value: Any) -> float | None:
    """``value`` as a finite float (YAML reads ``3e-4`` as text), else ``None``."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return None
    try:
        number = float(value)
    except ValueError:
        return None
    return number if math.isfinite(number) else None


def _count(key: str, value: Any) -> int:
    number = _real(value)
    if number is None or number != int(number):
        raise ValueError(f"{key} must be a whole number, got {value!r}")
    return int(number)


def _number(key: str, value: Any) -> float:
    number = _real(value)
    if number is None:
        raise ValueError(f"{key} must be a number, got {value!r}")
    return number


def _flag(key: str, value: Any) -> bool:
    check_bool(key, value)
    return value


def _schedule(key: str, value: Any) -> tuple[float, bool]:
    """``(start value, annealed)`` of a constant or of ``lin_X`` (X linearly to 0)."""
    if isinstance(value, str) and value.startswith("lin_") and _real(value[4:]) is not None:
        return _number(key, value[4:]), True
    if _real(value) is not None:
        return _number(key, value), False
    raise ValueError(f"{key} must be a number or lin_<number>, got {value!r}")


def _normalize(value: Any) -> tuple[bool, bool]:
    """``(observations, rewards)`` normalised: ``true`` is VecNormalize's default (both), a
    dict (or its text, as the zoo writes it) names ``norm_obs`` and ``norm_reward``."""
    if isinstance(value, str):
        try:
            value = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            pass
    if isinstance(value, bool):
        return value, value
    if isinstance(value, dict) and set(value) <= {"norm_obs", "norm_reward"}:
        return (_flag("norm_obs", value.get("norm_obs", True)),
                _flag("norm_reward", value.get("norm_reward", True)))
    raise ValueError(f"normalize must be true, false or a dict of norm_obs and norm_reward, "
                     f"got {value!r}")


def _policy_kwargs(value: Any, lacks: list[str]) -> dict[str, Any]:
    """The network settings of ``policy_kwargs`` (a dict, or the zoo's ``dict(...)`` text);
    the defaults (64-64 tanh, log std 0) when it is not given."""
    kwargs = _python(value) if isinstance(value, str) else dict(value or {})
    if not isinstance(kwargs, dict):
        raise ValueError(f"policy_kwargs must be a dict, got {value!r}")
    out: dict[str, Any] = {"hidden": (64, 64), "activation": "tanh", "init_log_std": 0.0}
    for key, arg in kwargs.items():
        if key == "net_arch":
            hidden = _net_arch(arg)
            if hidden is None:
                lacks.append(f"net_arch {arg} (rollax's actor and critic have the same "
                             "hidden sizes)")
                del out["hidden"]
            else:
                out["hidden"] = hidden
        elif key == "activation_fn" and str(arg).split(".")[-1] in ACTIVATIONS:
            out["activation"] = ACTIVATIONS[str(arg).split(".")[-1]]
        elif key == "log_std_init":
            out["init_log_std"] = _number("log_std_init", arg)
        elif key == "ortho_init" and arg is True:
            pass  # rollax's layers are orthogonal
        elif key == "ortho_init":
            lacks.append(f"ortho_init={arg} (rollax's layers are always orthogonal)")
        else:
            lacks.append(f"policy_kwargs {key}={arg}")
    return out


def _net_arch(arch: Any) -> tuple[int, ...] | None:
    """The hidden sizes of ``net_arch`` when actor and critic share them: a list of sizes,
    ``dict(pi=..., vf=...)`` with ``pi == vf``, or the older ``[dict(pi=..., vf=...)]``."""
    if isinstance(arch, list) and len(arch) == 1 and isinstance(arch[0], dict):
        arch = arch[0]
    if isinstance(arch, dict) and set(arch) == {"pi", "vf"} and arch["pi"] == arch["vf"]:
        arch = arch["pi"]
    if isinstance(arch, list) and arch and all(
            isinstance(n, int) and not isinstance(n, bool) and n >= 1 for n in arch):
        return tuple(arch)
    return None


def _python(text: str) -> Any:
    """The value of the zoo's Python text of ``policy_kwargs`` (``dict(net_arch=[64, 64],
    activation_fn=nn.ReLU)``), read from its syntax tree: literals, ``dict(...)`` calls and
    dotted names (as text); nothing is evaluated."""
    try:
        tree = ast.parse(text.strip(), mode="eval").body
    except SyntaxError:
        raise ValueError(f"policy_kwargs is not a dict: {text!r}") from None

    def value(node: ast.AST) -> Any:
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and (
                node.func.id == "dict") and not node.args:
            return {kw.arg: value(kw.value) for kw in node.keywords if kw.arg is not None}
        if isinstance(node, ast.Dict):
            return {value(k): value(v) for k, v in zip(node.keys, node.values, strict=True)
                    if k is not None}
        if isinstance(node, (ast.List, ast.Tuple)):
            return [value(e) for e in node.elts]
        if isinstance(node, ast.Attribute):
            return f"{value(node.value)}.{node.attr}"
        if isinstance(node, ast.Name):
            return node.id
        return ast.literal_eval(node)

    try:
        return value(tree)
    except (ValueError, TypeError, SyntaxError):
        raise ValueError(f"policy_kwargs is not a dict: {text!r}") from None
