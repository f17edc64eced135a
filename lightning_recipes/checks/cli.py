"""``lightning-recipes preflight``: run the sanity checks on a model class and a datamodule from the command line.

Arguments follow LightningCLI: ``--model pkg.Class --data pkg.DataModule --model.init_args.x 1`` (or the short
``--model.x 1``), or a YAML file with ``--config``.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

import lightning.pytorch as pl

from lightning_recipes.checks.preflight import CHECKS

__all__ = ["build_parser", "main"]


def build_parser():  # -> jsonargparse.ArgumentParser (imported lazily: jsonargparse is slow to import)
    """The jsonargparse parser behind ``lightning-recipes preflight``."""
    from jsonargparse import ActionConfigFile, ArgumentParser

    parser = ArgumentParser(
        prog="lightning-recipes preflight",
        description="Run the sanity checks (data, init loss, gradient flow, batch independence, overfit one "
        "batch, input independence) on a LightningModule and a LightningDataModule, print the report, and "
        "exit 1 if any check fails.",
        env_prefix="LR_PREFLIGHT",
    )
    parser.add_argument("--config", action=ActionConfigFile, help="YAML file with these arguments")
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
        "--num_threads",
        type=int | None,
        default=None,
        help="torch CPU threads during the checks (default: torch's)",
    )
    parser.add_argument("--json", type=Path | None, default=None, help="also write the report as JSON here")
    parser.add_argument("--strict", type=bool, default=False, help="exit 1 on warnings too")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns 0 when no check failed, 1 when one did, 2 on bad arguments.

    Example:
        >>> main(["--help"])  # doctest: +ELLIPSIS
        usage: lightning-recipes preflight ...
        0
    """
    from lightning_recipes.checks.preflight import preflight

    parser = build_parser()
    args = list(sys.argv[1:] if argv is None else argv)
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
    objects = parser.instantiate_classes(config)
    report = preflight(
        objects.model,
        datamodule=objects.data,
        checks=config.checks,
        num_classes=config.num_classes,
        seed=config.seed,
        num_threads=config.num_threads,
        print_report=True,
    )
    if config.json is not None:
        config.json.write_text(report.to_json())
    if not report.ok:
        return 1
    return 1 if config.strict and report.warnings else 0
