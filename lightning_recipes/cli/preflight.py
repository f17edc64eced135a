"""``lightning-recipes preflight``: the sanity checks on a model class and a datamodule from a shell
(LightningCLI-style arguments; ``--config`` reads a LightningCLI YAML's model, data and run length)."""

from __future__ import annotations

import ast
import re
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lightning_recipes._names import DEFAULT_TIME_BUDGET
from lightning_recipes.cli._args import (
    Option,
    UsageError,
    as_names,
    command_main,
    front,
    new_parser,
    our_errors_as_usage_errors,
    parse_and_build,
)

if TYPE_CHECKING:
    from jsonargparse import ArgumentParser

__all__ = ["build_parser", "check_summaries", "main", "parse"]

#: The Trainer's arguments read from a LightningCLI config's ``trainer`` section.
RUN_LENGTH_KEYS = ("max_epochs", "max_steps")


def check_summaries() -> list[tuple[str, str]]:
    """The preflight's checks in the order they run, each with the first paragraph of its docstring, read
    from the source of ``checks/preflight.py`` (its ``CHECKS``) and its imports: no torch for ``--help``."""
    package = Path(__file__).resolve().parents[1]
    registry = ast.parse((package / "checks" / "preflight.py").read_text())
    where = {
        alias.name: package.joinpath(*node.module.split(".")[1:]).with_suffix(".py")
        for node in registry.body
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("lightning_recipes.")
        for alias in node.names
    }
    assigned = next(n for n in registry.body if isinstance(n, ast.AnnAssign) and _name(n.target) == "CHECKS")
    summaries = []
    classes = ast.walk(assigned.value or ast.Tuple([]))  # the values, in order, not the annotation
    for name in [n.id for n in classes if isinstance(n, ast.Name) and n.id in where]:
        cls = next(
            n
            for n in ast.parse(where[name].read_text()).body
            if isinstance(n, ast.ClassDef) and n.name == name
        )
        check = next(s.value for s in cls.body if isinstance(s, ast.Assign) and _name(s.targets[0]) == "name")
        doc = (ast.get_docstring(cls) or "").split("\n\n")[0].replace("\n", " ")
        summaries.append((ast.literal_eval(check), re.sub(r"``|\*\*", "", doc)))
    return summaries


def _name(node: ast.expr) -> str | None:
    return node.id if isinstance(node, ast.Name) else None


_OPTIONS: tuple[Option, ...] = (
    ("checks", list[str] | str | None, None,
     "checks to run (default: all): one name, names with commas or a list (the names below)"),
    ("num_classes", int | None, None, "number of classes, if not inferable"),
    ("seed", int, 0, "seed the checks run under (default: 0)"),
    ("input_key", int | str | None, None,
     "index or key of the input tensor in a batch (default: batch[0], or 'x', 'input_ids', ...)"),
    ("target_key", int | str | None, None,
     "index or key of the target tensor in a batch (default: batch[-1], or 'y', 'labels', ...)"),
    ("num_threads", int | None, 1, "torch CPU threads during the checks (default 1: fastest for trial fits)"),
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


def build_parser(fast: bool = False) -> ArgumentParser:
    """The parser of ``lightning-recipes preflight``; ``fast``: with stand-ins for Lightning's classes (for
    ``--help`` without torch)."""
    summaries = check_summaries()
    epilog = [f"The {len(summaries)} checks, in the order they run (--checks picks some):"]
    for name, summary in summaries:
        epilog += textwrap.wrap(f"{name}: {summary}", 79, initial_indent="  ", subsequent_indent="      ")
    return new_parser(
        "lightning-recipes preflight",
        f"Run the preflight's {len(summaries)} sanity checks (listed below) on a LightningModule and a "
        "LightningDataModule, print the report, and exit 1 unless it is ok (a check failed or raised an "
        "error, or no check could judge the model). Arguments as LightningCLI's: --model my_pkg.MyModel "
        "--model.init_args.width 8 (or --model.width 8), or --config with the YAML your LightningCLI writes.",
        fast,
        ",".join(RUN_LENGTH_KEYS),
        _OPTIONS,
        epilog="\n".join(epilog),
    )


def parse(argv: Sequence[str]) -> list[str]:
    """The command line checked as far as it can be without the model (``_args.front``)."""
    return front("preflight", build_parser, argv, _OPTIONS, RUN_LENGTH_KEYS)


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
    with our_errors_as_usage_errors():  # an option out of range
        report = preflight(objects.model, objects.data, checks=checks, print_report=True, **options)
    if config.json is not None:
        config.json.write_text(report.to_json())
    return 0 if report.ok and not (config.strict and report.warnings) else 1


_OPTION_KEYS = ("input_key", "target_key", "num_classes", "seed", "num_threads", "time_budget", "progress",
                "verbose", *RUN_LENGTH_KEYS)  # fmt: skip
