"""The arguments of ``lightning-recipes preflight``: one parser builder for ``--help`` (no torch imported)
and for the run, and the checks of the command line that need no model.

Example:
    >>> parser = build_preflight_parser(fast=True)
    >>> "input_independence:" in parser.format_help()
    True
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from lightning_recipes._check_catalog import CHECK_SUMMARIES
from lightning_recipes._cli_flags import BOOL_FLAG, HELP_AND_VERSION, asks_for_help, normalise_flags
from lightning_recipes._cli_jsonargparse import add_model_and_data, new_parser, parse, require_model
from lightning_recipes._lightning_cli_config import with_lightning_cli_config

if TYPE_CHECKING:
    from jsonargparse import ArgumentParser

__all__ = ["OWN_KEYS", "build_preflight_parser", "preflight_front"]

#: ``checks._budget.DEFAULT_TIME_BUDGET``, written here so that the help needs no torch (a test keeps
#: it equal).
DEFAULT_TIME_BUDGET = 8.0
CHECK_NAMES = tuple(name for name, _ in CHECK_SUMMARIES)
#: The Trainer's arguments read from a LightningCLI config's ``trainer`` section (as ``tune --config`` does).
RUN_LENGTH_KEYS = ("max_epochs", "max_steps")
# Top-level keys of this command's own parser; a LightningCLI config's other keys are dropped.
OWN_KEYS = (
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


def _checks_epilog() -> str:
    lines = [f"The {len(CHECK_SUMMARIES)} checks, in the order they run (--checks picks some):"]
    for name, summary in CHECK_SUMMARIES:
        lines += textwrap.wrap(f"{name}: {summary}", 79, initial_indent="  ", subsequent_indent="      ")
    return "\n".join(lines)


def build_preflight_parser(fast: bool = False) -> ArgumentParser:
    """The parser behind ``lightning-recipes preflight``; ``fast``: with stand-ins for Lightning's classes,
    for ``--help`` (the same options; it cannot build the model)."""
    from jsonargparse import ActionConfigFile

    parser = new_parser(
        "lightning-recipes preflight",
        f"Run the preflight's {len(CHECK_SUMMARIES)} sanity checks (listed below) on a LightningModule and a "
        "LightningDataModule, print the report, and exit 1 unless it is ok (a check failed or raised an "
        "error, or no check could judge the model). Arguments as LightningCLI's: --model my_pkg.MyModel "
        "--model.init_args.width 8 (or --model.width 8), or --config with the YAML your LightningCLI writes.",
        fast,
        epilog=_checks_epilog(),
    )
    parser.add_argument(
        "--config",
        action=ActionConfigFile,
        help="YAML file with these arguments, or the config your LightningCLI writes (its model and data "
        f"sections and trainer.{{{','.join(RUN_LENGTH_KEYS)}}} are used; the rest is ignored)",
    )
    add_model_and_data(parser, fast)
    parser.add_argument(
        "--checks",
        type=list[str] | str | None,
        default=None,
        help=f"checks to run (default: all): one name, names with commas or a list: {', '.join(CHECK_NAMES)}",
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
        **BOOL_FLAG,
        help="show one progress line while the checks run (on a terminal; default: true)",
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
    parser.add_argument("--strict", type=bool, default=False, **BOOL_FLAG, help="exit 1 on warnings too")
    parser.add_argument(
        "--verbose",
        type=bool,
        default=False,
        **BOOL_FLAG,
        help="print every check's whole message and time (default: one line per check, details for "
        "warn/fail)",
    )
    return parser


def preflight_front(argv: Sequence[str]) -> list[str]:
    """The command line checked as far as it can be without the model, ready for the parser: flags in
    snake_case, each ``--config`` replaced by the parts of the file the command reads. ``--help`` and
    ``--version`` print and exit here.

    Raises:
        UsageError: For no model, a missing or malformed ``--config`` file, an unknown check.
    """
    args = normalise_flags(argv)
    if asks_for_help(args):
        parse(build_preflight_parser(fast=True), [a for a in args if a in HELP_AND_VERSION][:1])
    require_model(args, "preflight")
    return with_lightning_cli_config(args, OWN_KEYS, RUN_LENGTH_KEYS)
