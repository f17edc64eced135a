"""The ``lightning-recipes`` command: ``demo``, ``preflight``, ``memory``, ``tune``."""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Sequence

__all__ = ["main"]

# command -> (module:function taking argv and returning an exit code, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "demo": ("lightning_recipes.demos.training:main", "train a CNN on handwritten digits with every recipe"),
    "preflight": (
        "lightning_recipes.checks.cli:main",
        "run the sanity checks on a model and print a report",
    ),
    "memory": ("lightning_recipes.strategies.memory_cli:main", "estimate memory and recommend a strategy"),
    "tune": ("lightning_recipes.tune.cli:main", "find the learning rate (LR range test) before the long run"),
}


def _usage() -> str:
    lines = ["usage: lightning-recipes <command> [options]", "", "commands:"]
    lines += [f"  {name:<10} {help_}" for name, (_, help_) in COMMANDS.items()]
    lines += ["", "Run `lightning-recipes <command> --help` for a command's options."]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Dispatch to a sub-command; returns the process exit code.

    Example:
        >>> main(["--help"])  # doctest: +ELLIPSIS
        usage: lightning-recipes <command> [options]
        ...
        0
    """
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in {"-h", "--help"}:
        print(_usage())
        return 0
    command, rest = args[0], args[1:]
    if command not in COMMANDS:
        print(
            f"lightning-recipes: unknown command {command!r}; choose one of {sorted(COMMANDS)}.\n",
            file=sys.stderr,
        )
        print(_usage(), file=sys.stderr)
        return 2
    _import_from_the_current_directory()
    module_name, function_name = COMMANDS[command][0].split(":")
    function = getattr(importlib.import_module(module_name), function_name)
    return int(function(rest) or 0)


def _import_from_the_current_directory() -> None:
    """``--model my_pkg.MyModel`` finds ``./my_pkg.py``, as under ``python -m``: the console script that pip
    writes puts its own folder first on ``sys.path``, not the current directory."""
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        sys.path.insert(0, cwd)
