"""``lightning-recipes preflight``: the sanity checks on a model class and a datamodule, from a shell.

Arguments follow LightningCLI: ``--model pkg.Class --data pkg.DataModule --model.init_args.x 1`` (or
``--model.x 1``). ``--config`` takes the YAML your LightningCLI writes (``fit --print_config``): its
``model`` and ``data`` sections and ``trainer.max_epochs``/``max_steps``; the rest is ignored.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lightning_recipes.cli._args import (
    BOOL_FLAG,
    UsageError,
    as_names,
    command_main,
    front,
    new_parser,
    parse_and_build,
    raised_by_us,
)

if TYPE_CHECKING:
    from jsonargparse import ArgumentParser

__all__ = ["CHECK_SUMMARIES", "build_parser", "main", "parse"]

#: ``checks._budget.DEFAULT_TIME_BUDGET``, written here so that the help needs no torch (a test keeps them
#: equal).
DEFAULT_TIME_BUDGET = 8.0
#: The Trainer's arguments read from a LightningCLI config's ``trainer`` section.
RUN_LENGTH_KEYS = ("max_epochs", "max_steps")
#: The preflight's checks in the order they run, each with the first paragraph of its docstring, for
#: ``--help`` without torch. ``tests/test_cli_help.py`` fails when it differs from ``checks.preflight.CHECKS``
#: and prints the text to paste here.
CHECK_SUMMARIES: tuple[tuple[str, str], ...] = (
    (
        "loader",
        "The training (and validation) loader yields batches, and serves every class at least about as "
        "often as the dataset holds it.",
    ),
    (
        "data",
        "Look at the first num_batches training batches (and validation batches) before training does.",
    ),
    (
        "split_overlap",
        "Look for validation samples that are also in the training data: a validation set drawn from the "
        "training set, augmented copies of training samples, a split done after duplication.",
    ),
    (
        "loss",
        "Check the loss itself on one or two batches, without training: what every correct loss satisfies.",
    ),
    (
        "init_loss",
        "Compare the loss at initialisation with what an untrained model should score: ln C for C "
        "classes, ln 2 per output for binary cross-entropy, the label prior's entropy for a prior-"
        "initialised bias.",
    ),
    (
        "schedule",
        "Step copies of the configured LR schedulers over the planned run, as Lightning would, and check "
        "the LR curve of every optimizer param group.",
    ),
    (
        "grad_flow",
        "After a backward pass, every trainable parameter must have a finite, non-zero gradient.",
    ),
    (
        "batch_independence",
        "Verify that output i depends on input i only (no reshape, reduction or attention mixes the "
        "batch) and not on the slot it sits in (permuting the batch permutes the outputs).",
    ),
    (
        "padding",
        "Verify that extra padding, marked as padding, changes neither the loss nor the outputs at real "
        "positions.",
    ),
    (
        "eval_mode",
        "In eval(), the same input must give the same output, and a forward pass must change no state.",
    ),
    (
        "causality",
        "Verify that an autoregressive model's output at position t does not depend on inputs after t.",
    ),
    (
        "target_leakage",
        "Verify that the target is not recoverable from the inputs without learning (target leakage).",
    ),
    (
        "optimization",
        "Fit a copy with a real Trainer on one batch and check each optimizer.step() against the backward"
        " passes before it, under automatic and manual optimisation.",
    ),
    (
        "validation_path",
        "After a trial fit has fitted one batch through training_step, validation_step on the same batch "
        "(in eval mode, in Lightning's own validation loop) must see the fit too.",
    ),
    (
        "overfit_batch",
        "Train a copy of the model on one fixed small batch and require the loss to fall to a target.",
    ),
    (
        "input_independence",
        "Train on real inputs and on zeroed inputs; the real-input model must score better on held-out data.",
    ),
)
# (name, type, default, help) of the options after --config, --model and --data
_OPTIONS: tuple[tuple[str, Any, Any, str], ...] = (
    ("checks", list[str] | str | None, None, "checks to run (default: all): one name, names with commas or a "
     f"list: {', '.join(name for name, _ in CHECK_SUMMARIES)}"),
    ("num_classes", int | None, None, "number of classes, if not inferable"),
    ("seed", int, 0, "seed the checks run under (default: 0)"),
    ("input_key", int | str | None, None,
     "index or key of the input tensor in a batch (default: batch[0], or 'x', 'input_ids', ...)"),
    ("target_key", int | str | None, None,
     "index or key of the target tensor in a batch (default: batch[-1], or 'y', 'labels', ...)"),
    ("num_threads", int | None, None, "torch CPU threads during the checks (default: torch's)"),
    ("time_budget", float | None, DEFAULT_TIME_BUDGET,
     f"wall-clock seconds per check; null = unlimited (default: {DEFAULT_TIME_BUDGET:g})"),
    ("progress", bool, True, "show one progress line while the checks run (on a terminal; default: true)"),
    ("max_epochs", int | None, None,
     "the planned run's epochs, for checks of the whole run (LR schedule) (default: unknown)"),
    ("max_steps", int | None, None, "the planned run's optimizer steps (default: unknown)"),
    ("json", Path | None, None, "also write the report as JSON here"),
    ("strict", bool, False, "exit 1 on warnings too"),
    ("verbose", bool, False,
     "print every check's whole message and time (default: one line per check, details for warn/fail)"),
)  # fmt: skip
#: Top-level keys of this command's parser; a LightningCLI config's other keys are dropped.
OWN_KEYS = ("model", "data", *(name for name, *_ in _OPTIONS))


def build_parser(fast: bool = False) -> ArgumentParser:
    """The parser behind ``lightning-recipes preflight``; ``fast``: with stand-ins for Lightning's classes,
    for ``--help`` without torch (the same options; it cannot build the model)."""
    epilog = [f"The {len(CHECK_SUMMARIES)} checks, in the order they run (--checks picks some):"]
    for name, summary in CHECK_SUMMARIES:
        epilog += textwrap.wrap(f"{name}: {summary}", 79, initial_indent="  ", subsequent_indent="      ")
    parser = new_parser(
        "lightning-recipes preflight",
        f"Run the preflight's {len(CHECK_SUMMARIES)} sanity checks (listed below) on a LightningModule and a "
        "LightningDataModule, print the report, and exit 1 unless it is ok (a check failed or raised an "
        "error, or no check could judge the model). Arguments as LightningCLI's: --model my_pkg.MyModel "
        "--model.init_args.width 8 (or --model.width 8), or --config with the YAML your LightningCLI writes.",
        fast,
        ",".join(RUN_LENGTH_KEYS),
        epilog="\n".join(epilog),
    )
    for name, type_, default, help_ in _OPTIONS:
        flag = BOOL_FLAG if type_ is bool else {}
        parser.add_argument(f"--{name}", type=type_, default=default, help=help_, **flag)
    return parser


def parse(argv: Sequence[str]) -> list[str]:
    """The command line checked as far as it can be without the model (``--help`` prints and exits).

    Raises:
        UsageError: For no model, a missing or malformed ``--config`` file.
    """
    return front("preflight", build_parser, argv, OWN_KEYS, RUN_LENGTH_KEYS)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; 0 when no check failed, 1 when one did, 2 on bad arguments (one line on stderr).

    Example:
        >>> main(["--help"])  # doctest: +ELLIPSIS
        usage: lightning-recipes preflight ...
        0
    """
    return command_main("preflight", _run, argv)


def _run(arguments: list[str]) -> int:
    from lightning_recipes.checks.preflight import CHECKS, build_checks, preflight

    checks: list[Any] = []  # checked before the model is built

    def check(config: Any) -> None:
        unknown = [name for name in (as_names(config.checks) or []) if name not in CHECKS]
        if unknown:
            raise UsageError(f"unknown check(s) {unknown}; choose from {list(CHECKS)}.")
        if config.time_budget is not None and not config.time_budget > 0:
            raise UsageError(
                "`--time_budget` must be a number of seconds > 0 or null (unlimited), "
                f"got {config.time_budget!r}."
            )
        try:
            checks.extend(build_checks(as_names(config.checks)))
        except ValueError as err:  # a check named twice
            raise UsageError(str(err)) from err

    config, objects = parse_and_build(build_parser(), parse(arguments), check)
    options = {key: config[key] for key in _OPTION_KEYS}
    try:
        report = preflight(objects.model, objects.data, checks=checks, print_report=True, **options)
    except (TypeError, ValueError) as err:  # an option out of range
        ours = raised_by_us(err)
        if ours is None:
            raise
        raise UsageError(str(ours)) from err
    if config.json is not None:
        config.json.write_text(report.to_json())
    return 0 if report.ok and not (config.strict and report.warnings) else 1


_OPTION_KEYS = ("input_key", "target_key", "num_classes", "seed", "num_threads", "time_budget", "progress",
                "verbose", *RUN_LENGTH_KEYS)  # fmt: skip
