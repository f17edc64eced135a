"""``lightning-recipes demo`` and ``demo --finetune``: the arguments, checked without importing torch (the
demos: :mod:`lightning_recipes.demos`).

Example:
    >>> args = parse(["--epochs", "3", "--batch-size", "32"])
    >>> args.epochs, args.batch_size, args.finetune
    (3, 32, False)
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from lightning_recipes.cli._args import (
    FlagParser,
    Option,
    UsageError,
    normalise_flags,
    parse_bool,
    require_extra,
)

__all__ = [
    "DEMO_OPTIMIZERS",
    "DEMO_SETTINGS",
    "build_finetune_parser",
    "build_parser",
    "check_demo_args",
    "check_finetune_args",
    "parse",
    "split_finetune_flag",
]

#: Per-optimizer settings for the demo's model (``--lr`` defaults), from a small sweep on the digits.
DEMO_SETTINGS: dict[str, dict[str, float]] = {
    "adamw": {"lr": 3e-3, "weight_decay": 0.05},
    "lion": {"lr": 3e-4, "weight_decay": 0.5},
    "lamb": {"lr": 1e-2, "weight_decay": 0.01},
}
#: The optimizers the demo has settings for (``--optimizer``).
DEMO_OPTIMIZERS = tuple(sorted(DEMO_SETTINGS))
LOGGERS = {"csv": None, "wandb-offline": ("wandb", "wandb")}  # logger -> (module, extra) it needs
_AT_LEAST = dict(epochs=1, batch_size=1, shots=1, finetune_epochs=3, pretrain_epochs=1, threads=1)
_DATA_EXTRA = 'Needs scikit-learn: pip install "lightning-recipes[data]".'

_DEMO_OPTIONS: tuple[Option, ...] = (
    ("epochs", int, 12, "maximum training epochs (default: 12)"),
    ("threads", int, None, "torch CPU threads (default: torch's, one per core). On a machine other processes "
     "keep busy, 1 is much faster: the threads of one step wait for each other (see the README)."),
    ("optimizer", DEMO_OPTIMIZERS, "adamw", "optimizer recipe (default: adamw)"),
    ("lr", float, None, "peak learning rate (default: per optimizer)"),
    ("batch_size", int, 64, "per-device batch size (default: 64)"),
    ("seed", int, 0, "global seed (default: 0)"),
    ("output_dir", Path, Path("demo_output"), "logs and plots go here (default: demo_output)"),
    ("logger", tuple(LOGGERS), "csv",
     'csv, or wandb in offline mode (never contacts a server; pip install "lightning-recipes[wandb]")'),
    ("skip_preflight", bool, False, "do not run the sanity checks first"),
    ("finetune", bool, False, "run the fine-tuning demo instead: pretrain on digits 0-4, fine-tune on 5-9 "
     "with and without layer-wise LR decay + freeze-then-unfreeze "
     "(`lightning-recipes demo --finetune --help`)"),
)  # fmt: skip
_FINETUNE_OPTIONS: tuple[Option, ...] = (
    ("seeds", int, [0, 1, 2], "seeds (default: 0 1 2)"),
    ("shots", int, 10, "training images per new digit (default: 10)"),
    ("pretrain_epochs", int, 6, "(default: 6)"),
    ("finetune_epochs", int, 15, "(default: 15; at least 3)"),
    ("threads", int, None, "torch CPU threads (default: torch's)"),
)


def build_parser() -> argparse.ArgumentParser:
    """The parser of ``lightning-recipes demo``."""
    return FlagParser(
        _DEMO_OPTIONS,
        prog="lightning-recipes demo",
        description="Train a small CNN on scikit-learn's handwritten digits (no download) with every "
        "lightning_recipes recipe: preflight sanity checks, a recipe optimizer with warmup-cosine over "
        "weight-decay groups, gradient-norm monitoring, adaptive clipping, input-pipeline monitoring, the "
        "stability guard, early stopping that restores the best weights and a run manifest; then print what "
        f"was used and how well it did. {_DATA_EXTRA}",
    )


def build_finetune_parser() -> argparse.ArgumentParser:
    """The parser of ``lightning-recipes demo --finetune``."""
    return FlagParser(
        _FINETUNE_OPTIONS,
        prog="lightning-recipes demo --finetune",
        description="Pretrain the digits CNN on 0-4, fine-tune on a few images of 5-9: from scratch, plain, "
        "and with layer-wise LR decay + freeze-then-unfreeze; print the validation accuracy per seed. "
        + _DATA_EXTRA,
    )


def parse(argv: Sequence[str]) -> argparse.Namespace:
    """Parse and check ``demo`` (or ``demo --finetune``) arguments; ``finetune`` tells which demo.

    Raises:
        UsageError: For a bad value, or an extra the run needs that is not installed.
    """
    arguments, finetune = split_finetune_flag(normalise_flags(argv))
    args = (build_finetune_parser if finetune else build_parser)().parse_args(arguments)
    needs = None if finetune else LOGGERS[args.logger]
    if needs is not None:
        require_extra(needs[0], needs[1], f"--logger {args.logger}")
    check_demo_args(args)
    args.finetune = finetune
    require_extra("sklearn", "data", "the demo (scikit-learn's digits)", package="scikit-learn")
    return args


def split_finetune_flag(arguments: list[str]) -> tuple[list[str], bool]:
    """``arguments`` without ``--finetune`` (alone, with a value, or ``=value``), and its value."""
    out, finetune, index = [], False, 0
    while index < len(arguments):
        flag, sep, value = arguments[index].partition("=")
        index += 1
        if flag != "--finetune":
            out.append(arguments[index - 1])
            continue
        if not sep and index < len(arguments) and not arguments[index].startswith("-"):
            value, index = arguments[index], index + 1
        try:
            finetune = parse_bool(value) if value or sep else True
        except argparse.ArgumentTypeError as err:
            raise UsageError(f"argument --finetune: {err}") from None
    return out, finetune


def check_demo_args(args: argparse.Namespace) -> None:
    """Raise :class:`UsageError` for a ``demo`` or ``demo --finetune`` value out of range (one table)."""
    for name, least in _AT_LEAST.items():
        value = getattr(args, name, None)
        if value is not None and value < least:
            why = " (a third of them frozen)" if name == "finetune_epochs" else ""
            raise UsageError(f"`--{name}` must be >= {least}{why}, got {value!r}.")


check_finetune_args = check_demo_args
