"""``lightning-recipes preflight``: the sanity checks on a model class and a datamodule, from a shell.

Arguments follow LightningCLI: ``--model pkg.Class --data pkg.DataModule --model.init_args.x 1`` (or the short
``--model.x 1``). ``--config`` takes the YAML your LightningCLI writes (``python train.py fit
--print_config``): its ``model`` and ``data`` sections are used and the rest (``trainer``, ``optimizer``,
``seed_everything``, ...) is ignored. Modules are imported from the current directory, as ``python -m``
would, without ``PYTHONPATH=.``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import lightning.pytorch as pl

from lightning_recipes._lightning_cli_config import with_lightning_cli_config
from lightning_recipes.checks._budget import DEFAULT_TIME_BUDGET
from lightning_recipes.checks.preflight import CHECKS

if TYPE_CHECKING:
    from jsonargparse import ArgumentParser

__all__ = ["build_parser", "main"]


def build_parser() -> ArgumentParser:  # jsonargparse is imported lazily: it is slow to import
    """The jsonargparse parser behind ``lightning-recipes preflight``."""
    from jsonargparse import ActionConfigFile, ArgumentParser

    parser = ArgumentParser(
        prog="lightning-recipes preflight",
        description="Run the sanity checks (data, init loss, gradient flow, batch independence, overfit one "
        "batch, input independence, ...) on a LightningModule and a LightningDataModule, print the report, "
        "and exit 1 unless it is ok (a check failed or raised an error, or no check could judge the model).",
        env_prefix="LR_PREFLIGHT",
    )
    parser.add_argument(
        "--config",
        action=ActionConfigFile,
        help="YAML file with these arguments, or the config your LightningCLI writes (its model and data "
        "sections are used; trainer, optimizer, seed_everything, ... are ignored)",
    )
    parser.add_subclass_arguments(
        pl.LightningModule, "model", help="the LightningModule class and its init_args"
    )
    parser.add_subclass_arguments(
        pl.LightningDataModule, "data", help="the LightningDataModule class and its init_args"
    )
    parser.add_argument(
        "--checks",
        type=list[str] | None,
        default=None,
        help=f"checks to run (default: all): {', '.join(CHECKS)}",
    )
    parser.add_argument(
        "--num_classes", type=int | None, default=None, help="number of classes, if not inferable"
    )
    parser.add_argument("--seed", type=int, default=0, help="seed the checks run under (default: 0)")
    parser.add_argument(
        "--input_key",
        type=int | str | None,
        default=None,
        help="index or key of the input tensor in a batch (default: batch[0], or 'x', 'input_ids', ...)",
    )
    parser.add_argument(
        "--target_key",
        type=int | str | None,
        default=None,
        help="index or key of the target tensor in a batch (default: batch[-1], or 'y', 'labels', ...)",
    )
    parser.add_argument(
        "--num_threads",
        type=int | None,
        default=None,
        help="torch CPU threads during the checks (default: torch's)",
    )
    parser.add_argument(
        "--time_budget",
        type=float | None,
        default=DEFAULT_TIME_BUDGET,
        help=f"wall-clock seconds per check; null = unlimited (default: {DEFAULT_TIME_BUDGET:g})",
    )
    parser.add_argument(
        "--progress",
        type=bool,
        default=True,
        help="log a line per check as it starts and ends (default: true)",
    )
    parser.add_argument(
        "--max_epochs",
        type=int | None,
        default=None,
        help="the planned run's epochs, for checks of the whole run (LR schedule) (default: unknown)",
    )
    parser.add_argument(
        "--max_steps",
        type=int | None,
        default=None,
        help="the planned run's optimizer steps (default: unknown)",
    )
    parser.add_argument("--json", type=Path | None, default=None, help="also write the report as JSON here")
    parser.add_argument("--strict", type=bool, default=False, help="exit 1 on warnings too")
    parser.add_argument(
        "--verbose",
        action="store_true",
        help="print every check's whole message and time (default: one line per check, details for "
        "warn/fail)",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns 0 when no check failed, 1 when one did, 2 on bad arguments.

    Example:
        >>> main(["--help"])  # doctest: +ELLIPSIS
        usage: lightning-recipes preflight ...
        0
    """
    from lightning_recipes.checks._options import PreflightOptions
    from lightning_recipes.checks.preflight import build_checks, run_preflight

    cwd = os.getcwd()
    if (
        cwd not in sys.path and "" not in sys.path
    ):  # the console script does not put it there; `python -m` does
        sys.path.insert(0, cwd)
    parser = build_parser()
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        args = with_lightning_cli_config(args, _OWN_KEYS)
    except ValueError as err:
        print(f"lightning-recipes preflight: {err}", file=sys.stderr)
        return 2
    try:
        config = parser.parse_args(args)
    except SystemExit as exit_:  # --help, or a parse error (already printed by jsonargparse)
        return int(exit_.code or 0)
    unknown = [name for name in (config.checks or []) if name not in CHECKS]
    if unknown:
        print(
            f"lightning-recipes preflight: unknown check(s) {unknown}; choose from {list(CHECKS)}.",
            file=sys.stderr,
        )
        return 2
    if config.time_budget is not None and not config.time_budget > 0:
        print(
            f"lightning-recipes preflight: `--time_budget` must be a number of seconds > 0 or null "
            f"(unlimited), got {config.time_budget!r}.",
            file=sys.stderr,
        )
        return 2
    try:
        options = PreflightOptions(
            input_key=config.input_key,
            target_key=config.target_key,
            num_classes=config.num_classes,
            seed=config.seed,
            num_threads=config.num_threads,
            time_budget=config.time_budget,
            progress=config.progress,
            print_report=True,
            verbose=config.verbose,
            max_epochs=config.max_epochs,
            max_steps=config.max_steps,
        )
    except (TypeError, ValueError) as err:
        print(f"lightning-recipes preflight: {err}", file=sys.stderr)
        return 2
    objects = parser.instantiate_classes(config)
    report = run_preflight(objects.model, build_checks(config.checks), options, datamodule=objects.data)
    if config.json is not None:
        config.json.write_text(report.to_json())
    if not report.ok:
        return 1
    return 1 if config.strict and report.warnings else 0


# Top-level keys of this command's own parser; a LightningCLI config's other keys are dropped.
_OWN_KEYS = (
    "model",
    "data",
    "checks",
    "num_classes",
    "seed",
    "input_key",
    "target_key",
    "num_threads",
    "time_budget",
    "progress",
    "max_epochs",
    "max_steps",
    "json",
    "strict",
    "verbose",
)
