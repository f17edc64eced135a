"""``lightning-recipes preflight``: the sanity checks on a model class and a datamodule, from a shell.

Arguments follow LightningCLI: ``--model pkg.Class --data pkg.DataModule --model.init_args.x 1`` (or the short
``--model.x 1``). ``--config`` takes the YAML your LightningCLI writes (``python train.py fit
--print_config``): its ``model`` and ``data`` sections and ``trainer.max_epochs``/``max_steps`` are used (as
``tune --config`` reads them); the rest (``optimizer``, ``seed_everything``, ...) is ignored. Modules are
imported from the current directory, as ``python -m`` would, without ``PYTHONPATH=.``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from lightning_recipes._cli_errors import UsageError, handle_usage_errors
from lightning_recipes._cli_flags import as_names
from lightning_recipes._cli_jsonargparse import check_class_paths, instantiate, parse
from lightning_recipes._cli_preflight_args import build_preflight_parser, preflight_front

if TYPE_CHECKING:
    from jsonargparse import ArgumentParser

__all__ = ["build_parser", "main"]


def build_parser() -> ArgumentParser:
    """The jsonargparse parser behind ``lightning-recipes preflight``
    (:mod:`lightning_recipes._cli_preflight_args`)."""
    return build_preflight_parser()


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns 0 when no check failed, 1 when one did, 2 on bad arguments (one line on stderr).

    Example:
        >>> main(["--help"])  # doctest: +ELLIPSIS
        usage: lightning-recipes preflight ...
        0
    """
    arguments = list(sys.argv[1:] if argv is None else argv)
    try:
        return handle_usage_errors("preflight", lambda: _run(arguments))
    except SystemExit as exit_:  # --help, --version, --print_config, --model.help
        return int(exit_.code or 0)


def _run(arguments: list[str]) -> int:
    from lightning_recipes.checks._options import PreflightOptions
    from lightning_recipes.checks.preflight import CHECKS, build_checks, run_preflight

    cwd = os.getcwd()
    if (
        cwd not in sys.path and "" not in sys.path
    ):  # the console script does not put it there; `python -m` does
        sys.path.insert(0, cwd)
    args = preflight_front(arguments)
    check_class_paths(args)
    parser = build_parser()
    config = parse(parser, args)
    names = as_names(config.checks)
    unknown = [name for name in (names or []) if name not in CHECKS]
    if unknown:
        raise UsageError(f"unknown check(s) {unknown}; choose from {list(CHECKS)}.")
    try:
        checks = build_checks(names)
    except ValueError as err:  # a check named twice
        raise UsageError(str(err)) from err
    if config.time_budget is not None and not config.time_budget > 0:
        raise UsageError(
            "`--time_budget` must be a number of seconds > 0 or null (unlimited), "
            f"got {config.time_budget!r}."
        )
    if config.model is None:
        raise UsageError("no model given: pass --model my_pkg.MyModel, or a --config with a model section")
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
        raise UsageError(str(err)) from err
    objects = instantiate(parser, config)
    report = run_preflight(objects.model, checks, options, datamodule=objects.data)
    if config.json is not None:
        config.json.write_text(report.to_json())
    if not report.ok:
        return 1
    return 1 if config.strict and report.warnings else 0
