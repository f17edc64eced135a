"""``lightning-recipes memory``: estimate per-device memory and recommend a strategy preset from the shell."""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import sys
import typing
from collections.abc import Sequence
from typing import Any

import torch
import yaml

from lightning_recipes.strategies._host import available_host_memory
from lightning_recipes.strategies._units import GIB
from lightning_recipes.strategies.memory import (
    _PRECISIONS,
    OPTIMIZER_STATES,
    estimate_memory,
    render,
)
from lightning_recipes.strategies.presets import PRESETS
from lightning_recipes.strategies.recommend import LADDERS, recommend_strategy

__all__ = ["main"]

_SUFFIXES = {"K": 1e3, "M": 1e6, "B": 1e9, "G": 1e9, "T": 1e12}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lightning-recipes memory",
        description=(
            "Estimate per-device training memory and recommend the simplest strategy preset that fits."
            " Model arguments LightningCLI-style: --model.init_args.n_layers 24 (or --model.n_layers 24),"
            " nested ones too: --model.recipe.optimizer lion (a dataclass argument such as the recipe is"
            " built from its fields)."
            " The model is built on the meta device: no memory is allocated."
        ),
    )
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--model", help="import path of a model class, e.g. pkg.module.MyLightningModule")
    what.add_argument("--num-params", help="parameter count instead of a model, e.g. 7B, 1.3e9, 350M")
    parser.add_argument("--devices", type=int, default=1, help="devices per node (default 1)")
    parser.add_argument("--num-nodes", type=int, default=1, help="nodes (default 1)")
    parser.add_argument("--gpu-memory", type=float, default=80.0, help="GiB per device (default 80)")
    parser.add_argument(
        "--host-memory",
        type=float,
        default=None,
        help="host GiB per node, checks offload (default: what this machine has available now)",
    )
    parser.add_argument(
        "--optimizer",
        default=None,
        choices=sorted(OPTIMIZER_STATES),
        help="default: the model's own (its recipe, or its configure_optimizers()), adamw for --num-params",
    )
    parser.add_argument("--precision", default="bf16-mixed", choices=list(_PRECISIONS))
    parser.add_argument("--family", default="fsdp", choices=sorted(LADDERS), help="ladder to climb")
    parser.add_argument("--headroom", type=float, default=0.15, help="fraction of device memory kept free")
    parser.add_argument("--strategy", choices=sorted(PRESETS), help="estimate this preset only (no ladder)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command; returns 0 when a preset fits, 1 when none does, 2 on bad arguments.

    Example:
        >>> main(["--num-params", "7B", "--devices", "8", "--gpu-memory", "80"])  # doctest: +ELLIPSIS
        7,000,000,000 params, adamw, bf16-mixed, 8 device(s) x 1 node(s); budget 68.0 of 80 GiB per device
        ...
        note: recommended: recipes_fsdp_shard_grad_op
        0
    """
    args_list = list(sys.argv[1:] if argv is None else argv)
    known, model_args = _split_model_args(args_list)
    parser = _parser()
    args = parser.parse_args(known)
    try:
        target: Any = _build_model(args.model, model_args) if args.model else _parse_count(args.num_params)
        if model_args and not args.model:
            raise ValueError(f"model arguments {sorted(model_args)} need --model.")
        if args.strategy:
            print(
                estimate_memory(
                    target,
                    optimizer=args.optimizer,
                    precision=args.precision,
                    strategy=args.strategy,
                    devices=args.devices,
                    num_nodes=args.num_nodes,
                )
            )
            return 0
        host_memory_gb, host_note = _host_memory(args.host_memory)
        recommendation = recommend_strategy(
            target,
            devices=args.devices,
            device_memory_gb=args.gpu_memory,
            num_nodes=args.num_nodes,
            optimizer=args.optimizer,
            precision=args.precision,
            family=args.family,
            headroom=args.headroom,
            host_memory_gb=host_memory_gb,
        )
    except (ValueError, TypeError, ImportError) as err:
        print(f"lightning-recipes memory: error: {err}", file=sys.stderr)
        return 2
    notes = recommendation.notes()
    if host_note and any(estimate.host for estimate in recommendation.estimates):
        notes.append(host_note)
    print(render(recommendation.table(), *notes, recommendation.verdict()), end="")
    return 0 if recommendation.preset else 1


def _host_memory(given: float | None) -> tuple[float | None, str]:
    """Host GiB per node for the offload rows: ``--host-memory``, else this machine's, with a note saying
    so."""
    if given is not None:
        return given, ""
    available = available_host_memory()
    if available is None:
        return None, "host memory unknown here: offload rows not checked; pass --host-memory GIB"
    return available / GIB, (
        f"offload rows checked against {available / GIB:.1f} GiB of host memory available on this machine;"
        " pass --host-memory GIB for the training nodes if they differ"
    )


def _split_model_args(argv: list[str]) -> tuple[list[str], dict[str, Any]]:
    """Pull ``--model.init_args.x v`` / ``--model.x=v`` out of ``argv``; values parsed as YAML (ints,
    lists...)."""
    known: list[str] = []
    model_args: dict[str, Any] = {}
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg.startswith("--model."):
            key, sep, value = arg[len("--model.") :].partition("=")
            if not sep:
                if i + 1 >= len(argv):
                    raise SystemExit(f"lightning-recipes memory: error: {arg} needs a value")
                value = argv[i + 1]
                i += 1
            _set_nested(model_args, key.removeprefix("init_args.").split("."), yaml.safe_load(value))
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
            raise SystemExit(f"lightning-recipes memory: error: --model.{key} is set twice")
        target = inner
    last = target.get(keys[-1])
    if isinstance(last, dict) and isinstance(value, dict):
        last.update(value)
    else:
        target[keys[-1]] = value


def _typed_arguments(cls: type, kwargs: dict[str, Any]) -> dict[str, Any]:
    """Build dataclass arguments (``recipe: OptimizerRecipe | None``) from the mappings given for them, as
    LightningCLI does; other values pass as they are."""
    try:
        hints = typing.get_type_hints(getattr(cls, "__init__"))  # noqa: B009  (mypy: __init__ on a type)
    except Exception:  # unresolvable annotations: pass the values as given
        hints = {}
    out = dict(kwargs)
    for name, value in kwargs.items():
        if not isinstance(value, dict):
            continue
        hint = hints.get(name)
        options = typing.get_args(hint) if typing.get_args(hint) else (hint,)
        classes = [t for t in options if isinstance(t, type) and dataclasses.is_dataclass(t)]
        if len(classes) == 1:
            try:
                out[name] = classes[0](**value)
            except TypeError as err:
                raise ValueError(f"--model.{name}: {err}") from None
    return out


def _build_model(path: str, kwargs: dict[str, Any]) -> torch.nn.Module:
    module_name, _, class_name = path.rpartition(".")
    if not module_name:
        raise ValueError(f"--model must be a full import path like 'pkg.module.Class', got {path!r}.")
    cls = getattr(importlib.import_module(module_name), class_name, None)
    if cls is None:
        raise ValueError(f"--model {path!r}: module {module_name!r} has no attribute {class_name!r}.")
    kwargs = _typed_arguments(cls, kwargs)
    with torch.device("meta"):
        model = cls(**kwargs)
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"--model {path!r} built a {type(model).__name__}, not a torch.nn.Module.")
    return model


def _parse_count(text: str) -> int:
    value = text.strip().upper().replace("_", "")
    scale = 1.0
    if value and value[-1] in _SUFFIXES:
        scale, value = _SUFFIXES[value[-1]], value[:-1]
    try:
        count = round(float(value) * scale)
    except ValueError:
        raise ValueError(f"--num-params must be a count like 7B, 350M or 1.3e9, got {text!r}.") from None
    if count <= 0:
        raise ValueError(f"--num-params must be positive, got {text!r}.")
    return count


if __name__ == "__main__":
    raise SystemExit(main())
