"""``lightning-recipes memory``: estimate per-device memory and recommend a strategy preset; the model's
arguments are LightningCLI's (``--model.init_args.n_layers 24``).

Example:
    >>> parse(["--model", "pkg.Net", "--model.recipe.optimizer=lion"])[1]
    {'recipe': {'optimizer': 'lion'}}
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from lightning_recipes._names import LADDERS, OPTIMIZERS, PRECISIONS, PRESET_ROWS
from lightning_recipes.cli._args import (
    FlagParser,
    Option,
    UsageError,
    command_main,
    import_class,
    instantiate,
    normalise_flags,
    summarise,
)

__all__ = ["build_parser", "main", "parse", "parse_count"]

_SUFFIXES = {"K": 1e3, "M": 1e6, "B": 1e9, "G": 1e9, "T": 1e12}
_OPTIONS: tuple[Option, ...] = (
    ("devices", int, 1, "devices per node (default 1)"),
    ("num_nodes", int, 1, "nodes (default 1)"),
    ("gpu_memory", float, 80.0, "GiB per device (default 80)"),
    ("host_memory", float, None,
     "host GiB per node, checks offload (default: what this machine has available now)"),
    ("optimizer", tuple(sorted(OPTIMIZERS)), None,
     "default: the model's own (its recipe, or its configure_optimizers()), adamw for --num_params"),
    ("precision", tuple(PRECISIONS), "bf16-mixed", "(default: bf16-mixed)"),
    ("family", tuple(sorted(LADDERS)), "fsdp", "ladder to climb"),
    ("headroom", float, 0.15, "fraction of device memory kept free"),
    ("strategy", tuple(sorted(PRESET_ROWS)), None, "estimate this preset only (no ladder)"),
)  # fmt: skip


def build_parser() -> argparse.ArgumentParser:
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
    parser.add_options(_OPTIONS)
    return parser


def parse(argv: Sequence[str]) -> tuple[argparse.Namespace, dict[str, Any]]:
    """The parsed arguments and the model's init arguments (``--model.x v``, values read as YAML).

    Raises:
        UsageError: For a bad flag or value, or model arguments without ``--model``.
    """
    import yaml

    known: list[str] = []
    model_args: dict[str, Any] = {}
    argv = normalise_flags(argv)
    index = 0
    while index < len(argv):
        arg = argv[index]
        index += 1
        if not arg.startswith("--model."):
            known.append(arg)
            continue
        key, sep, value = arg[len("--model.") :].partition("=")
        if not sep:
            if index >= len(argv):
                raise UsageError(f"{arg} needs a value.")
            value, index = argv[index], index + 1
        try:
            parsed = yaml.safe_load(value)
        except yaml.YAMLError as err:
            raise UsageError(f"{arg} {value!r} is not a YAML value: {' '.join(str(err).split())}") from None
        _set_nested(model_args, key.removeprefix("init_args.").split("."), parsed)
    args = build_parser().parse_args(known)
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
    scale = _SUFFIXES.get(value[-1:], 1.0)
    try:
        count = round(float(value[:-1] if value[-1:] in _SUFFIXES else value) * scale)
    except ValueError:
        raise UsageError(f"--num_params must be a count like 7B, 350M or 1.3e9, got {text!r}.") from None
    if count <= 0:
        raise UsageError(f"--num_params must be positive, got {text!r}.")
    return count


def _set_nested(target: dict[str, Any], keys: list[str], value: Any) -> None:
    """``recipe.optimizer`` -> ``{"recipe": {"optimizer": value}}`` (a nested ``init_args.`` is dropped)."""
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


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; 0 when a preset fits, 1 when none does, 2 on bad arguments (one line on stderr).

    Example:
        >>> main(["--num_params", "7B", "--devices", "8", "--gpu_memory", "80"])  # doctest: +ELLIPSIS
        7,000,000,000 params, adamw, bf16-mixed, 8 device(s) x 1 node(s); budget 68.0 of 80 GiB per device
        ...
        note: recommended: recipes_fsdp_shard_grad_op
        0
    """
    return command_main("memory", _run, argv)


def _run(arguments: list[str]) -> int:
    from lightning_recipes.strategies.memory import estimate_memory, render
    from lightning_recipes.strategies.recommend import recommend_strategy

    args, model_args = parse(arguments)
    try:
        target: Any = _build_model(args.model, model_args) if args.model else parse_count(args.num_params)
        hardware = {"optimizer": args.optimizer, "precision": args.precision, "devices": args.devices}
        hardware["num_nodes"] = args.num_nodes
        if args.strategy:
            print(estimate_memory(target, strategy=args.strategy, **hardware))
            return 0
        host_memory_gb, host_note = _host_memory(args.host_memory)
        recommendation = recommend_strategy(
            target,
            device_memory_gb=args.gpu_memory,
            family=args.family,
            headroom=args.headroom,
            host_memory_gb=host_memory_gb,
            **hardware,
        )
    except (ValueError, TypeError, ImportError) as err:
        raise UsageError(str(err)) from err
    notes = recommendation.notes()
    if host_note and any(estimate.host for estimate in recommendation.estimates):
        notes.append(host_note)
    print(render(recommendation.table(), *notes, recommendation.verdict()), end="")
    return 0 if recommendation.preset else 1


def _host_memory(given: float | None) -> tuple[float | None, str]:
    """Host GiB per node for the offload rows: ``--host_memory``, else this machine's, with a note."""
    from lightning_recipes.strategies import available_host_memory

    if given is not None:
        return given, ""
    available = available_host_memory()
    if available is None:
        return None, "host memory unknown here: offload rows not checked; pass --host_memory GIB"
    return available / 2**30, (
        f"offload rows checked against {available / 2**30:.1f} GiB of host memory available on this machine;"
        " pass --host_memory GIB for the training nodes if they differ"
    )


def _build_model(path: str, kwargs: dict[str, Any]) -> Any:
    """``path``'s class built on the meta device, its arguments checked against its signature first and
    dataclass arguments built from their mappings, as LightningCLI does."""
    import torch
    from jsonargparse import ArgumentParser

    cls = import_class("--model", path)
    parser = ArgumentParser(exit_on_error=False)
    parser.add_class_arguments(cls, "model")
    try:
        config = parser.parse_object({"model": kwargs})
    except argparse.ArgumentError as err:
        raise UsageError(summarise(str(err))) from err
    with torch.device("meta"):
        model = instantiate(parser, config).model
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"--model {path!r} built a {type(model).__name__}, not a torch.nn.Module.")
    return model
