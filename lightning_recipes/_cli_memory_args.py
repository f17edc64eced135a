"""The arguments of ``lightning-recipes memory``, parsed without importing torch (``--help`` answers at
once).

Model arguments are LightningCLI's: ``--model.init_args.n_layers 24`` (or ``--model.n_layers 24``), nested
ones too (``--model.recipe.optimizer lion``); they are split off before the parser sees the rest.

Example:
    >>> args, model_args = parse_memory_args(["--num-params", "7B", "--devices", "8"])
    >>> args.num_params, args.devices, model_args
    ('7B', 8, {})
    >>> parse_memory_args(["--model", "pkg.Net", "--model.recipe.optimizer=lion"])[1]
    {'recipe': {'optimizer': 'lion'}}
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from lightning_recipes._cli_errors import UsageError
from lightning_recipes._cli_flags import FlagParser, normalise_flags

__all__ = [
    "FAMILIES",
    "OPTIMIZERS",
    "PRECISIONS",
    "PRESET_NAMES",
    "build_memory_parser",
    "parse_count",
    "parse_memory_args",
]

# The choices, written here so that the parser needs no torch; tests/test_cli_help.py keeps each equal to
# the table it comes from (strategies.memory.OPTIMIZER_STATES, _PRECISIONS, strategies.recommend.LADDERS,
# PRESETS).
OPTIMIZERS = (
    "adadelta", "adagrad", "adam", "adamax", "adamw", "asgd", "lamb", "lion", "nadam", "radam", "rmsprop",
    "rmsprop_momentum", "sgd", "sgd_momentum",
)  # fmt: skip
PRECISIONS = ("32-true", "32", "64-true", "16-mixed", "bf16-mixed", "16-true", "bf16-true")
FAMILIES = ("deepspeed", "fsdp", "fsdp2")
_SUFFIXES = {"K": 1e3, "M": 1e6, "B": 1e9, "G": 1e9, "T": 1e12}
PRESET_NAMES = (
    "ddp", "ddp_spawn", "ddp_static_graph", "deepspeed_zero1", "deepspeed_zero2", "deepspeed_zero2_offload",
    "deepspeed_zero3", "deepspeed_zero3_offload", "fsdp2", "fsdp_full_shard", "fsdp_hybrid", "fsdp_offload",
    "fsdp_shard_grad_op",
)  # fmt: skip


def build_memory_parser() -> argparse.ArgumentParser:
    """The parser of ``lightning-recipes memory`` (without the ``--model.*`` arguments, split off first)."""
    parser = FlagParser(
        prog="lightning-recipes memory",
        description=(
            "Estimate per-device training memory (parameters, gradients, optimizer state; activations are not"
            " counted) for each rung of a strategy ladder, and recommend the simplest strategy preset that"
            " fits; or estimate one --strategy. Exit 0 when a preset fits, 1 when none does."
            " Model arguments LightningCLI-style: --model.init_args.n_layers 24 (or --model.n_layers 24),"
            " nested ones too: --model.recipe.optimizer lion (a dataclass argument such as the recipe is"
            " built from its fields)."
            " The model is built on the meta device: no memory is allocated."
        ),
    )
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--model", help="import path of a model class, e.g. pkg.module.MyLightningModule")
    what.add_argument("--num_params", help="parameter count instead of a model, e.g. 7B, 1.3e9, 350M")
    parser.add_argument("--devices", type=int, default=1, help="devices per node (default 1)")
    parser.add_argument("--num_nodes", type=int, default=1, help="nodes (default 1)")
    parser.add_argument("--gpu_memory", type=float, default=80.0, help="GiB per device (default 80)")
    parser.add_argument(
        "--host_memory",
        type=float,
        default=None,
        help="host GiB per node, checks offload (default: what this machine has available now)",
    )
    parser.add_argument(
        "--optimizer",
        default=None,
        choices=OPTIMIZERS,
        help="default: the model's own (its recipe, or its configure_optimizers()), adamw for --num_params",
    )
    parser.add_argument("--precision", default="bf16-mixed", choices=PRECISIONS)
    parser.add_argument("--family", default="fsdp", choices=FAMILIES, help="ladder to climb")
    parser.add_argument("--headroom", type=float, default=0.15, help="fraction of device memory kept free")
    parser.add_argument("--strategy", choices=PRESET_NAMES, help="estimate this preset only (no ladder)")
    return parser


def parse_memory_args(argv: Sequence[str]) -> tuple[argparse.Namespace, dict[str, Any]]:
    """The parsed arguments and the model's init arguments (``--model.x v``, values read as YAML).

    Raises:
        UsageError: For a bad flag or value, or model arguments without ``--model``.
    """
    known, model_args = _split_model_args(normalise_flags(argv))
    args = build_memory_parser().parse_args(known)
    if args.num_params is not None:
        parse_count(args.num_params)  # checked here, before the command imports torch
    if model_args and not args.model:
        raise UsageError(f"model arguments {sorted(model_args)} need --model.")
    return args, model_args


def parse_count(text: str) -> int:
    """A parameter count written ``7B``, ``350M``, ``1.3e9`` or ``7_000_000``.

    Example:
        >>> parse_count("1.3B"), parse_count("350m")
        (1300000000, 350000000)
    """
    value = text.strip().upper().replace("_", "")
    scale = 1.0
    if value and value[-1] in _SUFFIXES:
        scale, value = _SUFFIXES[value[-1]], value[:-1]
    try:
        count = round(float(value) * scale)
    except ValueError:
        raise UsageError(f"--num_params must be a count like 7B, 350M or 1.3e9, got {text!r}.") from None
    if count <= 0:
        raise UsageError(f"--num_params must be positive, got {text!r}.")
    return count


def _split_model_args(argv: list[str]) -> tuple[list[str], dict[str, Any]]:
    """Pull ``--model.init_args.x v`` / ``--model.x=v`` out of ``argv``; values parsed as YAML (ints,
    lists...)."""
    import yaml

    known: list[str] = []
    model_args: dict[str, Any] = {}
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg.startswith("--model."):
            key, sep, value = arg[len("--model.") :].partition("=")
            if not sep:
                if i + 1 >= len(argv):
                    raise UsageError(f"{arg} needs a value.")
                value = argv[i + 1]
                i += 1
            try:
                parsed = yaml.safe_load(value)
            except yaml.YAMLError as err:
                raise UsageError(f"{arg} {value!r} is not a YAML value: {_first_line(err)}") from None
            _set_nested(model_args, key.removeprefix("init_args.").split("."), parsed)
        else:
            known.append(arg)
        i += 1
    return known, model_args


def _set_nested(target: dict[str, Any], keys: list[str], value: Any) -> None:
    """``recipe.optimizer`` -> ``{"recipe": {"optimizer": value}}`` (a nested ``init_args.`` is dropped too,
    as LightningCLI accepts it there)."""
    keys = [k for i, k in enumerate(keys) if not (k == "init_args" and i > 0)]
    for key in keys[:-1]:
        inner = target.setdefault(key, {})
        if not isinstance(inner, dict):
            raise UsageError(f"--model.{key} is set twice.")
        target = inner
    last = target.get(keys[-1])
    if isinstance(last, dict) and isinstance(value, dict):
        last.update(value)
    else:
        target[keys[-1]] = value


def _first_line(err: Exception) -> str:
    return " ".join(str(err).split())
