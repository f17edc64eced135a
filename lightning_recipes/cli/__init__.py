"""The ``lightning-recipes`` command: ``demo``, ``preflight``, ``memory``, ``tune``, one module each;
arguments are checked before torch is imported, a mistake is one line on stderr and exit code 2."""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Sequence

from lightning_recipes.cli._args import (
    TRACEBACK_ENV,
    UsageError,
    handle_usage_errors,
    help_or_version,
    normalise_flags,
    version_text,
)

__all__ = [
    "COMMANDS",
    "UsageError",
    "answer_before_importing_torch",
    "check_arguments",
    "handle_usage_errors",
    "main",
    "normalise_flags",
]

# command -> (module:function taking argv, returning the exit code; help); its torch-free step: `.parse`
COMMANDS: dict[str, tuple[str, str]] = {
    "demo": ("lightning_recipes.demos.training:main", "train a CNN on handwritten digits with every recipe"),
    "preflight": (
        "lightning_recipes.cli.preflight:main",
        "run the sanity checks on a model and print a report",
    ),
    "memory": ("lightning_recipes.cli.memory:main", "estimate memory and recommend a strategy"),
    "tune": ("lightning_recipes.cli.tune:main", "find the learning rate (LR range test) before the long run"),
}


def _usage() -> str:
    lines = ["usage: lightning-recipes [-h] [-V] <command> [options]", "", "commands:"]
    lines += [f"  {name:<10} {help_}" for name, (_, help_) in COMMANDS.items()]
    lines += [
        "",
        "options:",
        "  -h, --help     show this help and exit",
        "  -V, --version  print the version and exit",
        "",
        "Run `lightning-recipes <command> --help` for a command's options. Flags are snake_case as in",
        "LightningCLI (--num_params, --max_epochs); --num-params is accepted too. A mistake in the arguments",
        f"ends in one line on stderr and exit code 2; {TRACEBACK_ENV}=1 shows its traceback.",
    ]
    return "\n".join(lines)


def check_arguments(argv: Sequence[str]) -> int | None:
    """The exit code when ``argv`` is answered without running a command (help, version, a mistake), else
    None. Imports neither torch nor Lightning."""
    args = list(argv)
    asked = help_or_version(args[:1])
    if not args or asked is not None:
        print(version_text() if asked in ("-V", "--version") else _usage())
        return 0
    command, rest = args[0], args[1:]
    if command not in COMMANDS:
        print(
            f"lightning-recipes: error: unknown command {command!r}; choose one of {', '.join(COMMANDS)} "
            "(see `lightning-recipes --help`)",
            file=sys.stderr,
        )
        return 2
    parse = importlib.import_module(f"lightning_recipes.cli.{command}").parse

    def front() -> None:
        parse(rest)

    try:
        return handle_usage_errors(command, front)
    except SystemExit as exit_:  # --help / --version printed
        return int(exit_.code or 0)


def main(argv: Sequence[str] | None = None) -> int:
    """Dispatch to a sub-command; returns the process exit code.

    Example:
        >>> main(["--help"])  # doctest: +ELLIPSIS
        usage: lightning-recipes [-h] [-V] <command> [options]
        ...
        0
    """
    args = list(sys.argv[1:] if argv is None else argv)
    code = check_arguments(args)
    if code is not None:
        return code
    module_name, function_name = COMMANDS[args[0]][0].split(":")
    return int(getattr(importlib.import_module(module_name), function_name)(args[1:]) or 0)


def answer_before_importing_torch() -> None:
    """In the ``lightning-recipes`` process (console script or ``python -m``), answer ``--help``,
    ``--version`` and a mistake before the package imports torch (and exit); return in any other."""
    code = check_arguments(sys.argv[1:]) if _started_as_the_command() else None
    if code is not None:
        sys.stdout.flush()
        raise SystemExit(code)


def _started_as_the_command() -> bool:
    if not sys.argv:
        return False
    script = os.path.basename(sys.argv[0]).removesuffix(".exe").removesuffix("-script.py")
    if script == "lightning-recipes":
        return True
    # `python -m lightning_recipes`: while runpy imports the package, sys.argv[0] is "-m"
    original = list(getattr(sys, "orig_argv", []))
    if sys.argv[0] != "-m" or "-m" not in original:
        return False
    return original[original.index("-m") + 1 :][:1] == ["lightning_recipes"]
