"""``lightning-recipes memory``: estimate per-device memory and recommend a strategy preset from the shell."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence
from typing import Any

import torch

from lightning_recipes._cli_errors import UsageError, handle_usage_errors
from lightning_recipes._cli_jsonargparse import instantiate, parse_object
from lightning_recipes._cli_memory_args import parse_count, parse_memory_args
from lightning_recipes.strategies._host import available_host_memory
from lightning_recipes.strategies._units import GIB
from lightning_recipes.strategies.memory import estimate_memory, render
from lightning_recipes.strategies.recommend import recommend_strategy

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command; returns 0 when a preset fits, 1 when none does, 2 on bad arguments (one line on
    stderr).

    Example:
        >>> main(["--num_params", "7B", "--devices", "8", "--gpu_memory", "80"])  # doctest: +ELLIPSIS
        7,000,000,000 params, adamw, bf16-mixed, 8 device(s) x 1 node(s); budget 68.0 of 80 GiB per device
        ...
        note: recommended: recipes_fsdp_shard_grad_op
        0
    """
    arguments = list(sys.argv[1:] if argv is None else argv)
    return handle_usage_errors("memory", lambda: _run(arguments))


def _run(arguments: list[str]) -> int:
    args, model_args = parse_memory_args(arguments)
    try:
        target: Any = _build_model(args.model, model_args) if args.model else parse_count(args.num_params)
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
        raise UsageError(str(err)) from err
    notes = recommendation.notes()
    if host_note and any(estimate.host for estimate in recommendation.estimates):
        notes.append(host_note)
    print(render(recommendation.table(), *notes, recommendation.verdict()), end="")
    return 0 if recommendation.preset else 1


def _host_memory(given: float | None) -> tuple[float | None, str]:
    """Host GiB per node for the offload rows: ``--host_memory``, else this machine's, with a note saying
    so."""
    if given is not None:
        return given, ""
    available = available_host_memory()
    if available is None:
        return None, "host memory unknown here: offload rows not checked; pass --host_memory GIB"
    return available / GIB, (
        f"offload rows checked against {available / GIB:.1f} GiB of host memory available on this machine;"
        " pass --host_memory GIB for the training nodes if they differ"
    )


def _instantiate(cls: type, kwargs: dict[str, Any]) -> Any:
    """``cls(**kwargs)`` with the arguments checked against ``cls``'s signature first and dataclass arguments
    (``recipe: OptimizerRecipe | None``) built from their mappings, as LightningCLI does: a wrong value is
    one line (``--model.layers: Expected a <class 'int'>``), not a traceback from inside the model."""
    from jsonargparse import ArgumentParser

    parser = ArgumentParser(exit_on_error=False)
    parser.add_class_arguments(cls, "model")
    return instantiate(parser, parse_object(parser, {"model": kwargs})).model


def _build_model(path: str, kwargs: dict[str, Any]) -> torch.nn.Module:
    module_name, _, class_name = path.rpartition(".")
    if not module_name:
        raise ValueError(f"--model must be a full import path like 'pkg.module.Class', got {path!r}.")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as err:
        raise ValueError(
            f"--model {path!r}: no module named {err.name!r}; give the import path of a model class, run "
            "from the folder that holds its module, or install its package."
        ) from None
    cls = getattr(module, class_name, None)
    if cls is None:
        raise ValueError(f"--model {path!r}: module {module_name!r} has no attribute {class_name!r}.")
    with torch.device("meta"):
        model = _instantiate(cls, kwargs)
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"--model {path!r} built a {type(model).__name__}, not a torch.nn.Module.")
    return model


if __name__ == "__main__":
    raise SystemExit(main())
