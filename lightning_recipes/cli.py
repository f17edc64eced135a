"""The ``lightning-recipes`` command: ``demo``, ``preflight``, ``memory``, ``tune``.

Each command's arguments are parsed and checked first, without importing torch or Lightning (``--help``,
``--version`` and an ordinary mistake answer at once); then the command's module is imported and run. A
mistake ends in one line on stderr naming the fix and exit code 2 (``LIGHTNING_RECIPES_TRACEBACK=1``: the
traceback). Flags are snake_case, as LightningCLI's; the kebab-case spelling of a top-level flag is accepted
too.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from lightning_recipes._cli_errors import TRACEBACK_ENV, handle_usage_errors
from lightning_recipes._cli_flags import HELP_FLAGS, VERSION_FLAGS, version_text

__all__ = ["main"]

# command -> (its module:function taking argv and returning an exit code, one-line help)
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


def _front(command: str) -> Callable[[list[str]], Any]:
    """The torch-free first step of ``command``: parse and check its arguments (print ``--help``)."""
    if command == "demo":
        from lightning_recipes._cli_demo_args import parse_demo_args

        return parse_demo_args
    if command == "memory":
        from lightning_recipes._cli_memory_args import parse_memory_args

        return parse_memory_args
    if command == "preflight":
        from lightning_recipes._cli_preflight_args import preflight_front

        return preflight_front
    from lightning_recipes._cli_tune_args import tune_front

    return tune_front


def check_arguments(argv: Sequence[str]) -> int | None:
    """The exit code when ``argv`` is answered without running a command (help, version, a mistake), else
    None. Imports neither torch nor Lightning."""
    args = list(argv)
    if not args or args[0] in HELP_FLAGS:
        print(_usage())
        return 0
    if args[0] in VERSION_FLAGS:
        print(version_text())
        return 0
    command, rest = args[0], args[1:]
    if command not in COMMANDS:
        print(
            f"lightning-recipes: error: unknown command {command!r}; choose one of {', '.join(COMMANDS)} "
            "(see `lightning-recipes --help`)",
            file=sys.stderr,
        )
        return 2

    def front() -> int:
        _front(command)(rest)
        return -1

    try:
        code = handle_usage_errors(command, front)
    except SystemExit as exit_:  # --help / --version printed
        return int(exit_.code or 0)
    return None if code == -1 else code


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
    _import_from_the_current_directory()
    module_name, function_name = COMMANDS[args[0]][0].split(":")
    function = getattr(importlib.import_module(module_name), function_name)
    return int(function(args[1:]) or 0)


def answer_before_importing_torch() -> None:
    """In the ``lightning-recipes`` process (the console script or ``python -m lightning_recipes``), answer
    ``--help``, ``--version`` and a mistake in the arguments before the package imports torch: the package's
    ``__init__`` calls this first. Exits the process when it answered; returns at once in any other process.
    """
    if _started_as_the_command():
        code = check_arguments(sys.argv[1:])
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


def _import_from_the_current_directory() -> None:
    """``--model my_pkg.MyModel`` finds ``./my_pkg.py``, as under ``python -m``: the console script that pip
    writes puts its own folder first on ``sys.path``, not the current directory."""
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        sys.path.insert(0, cwd)
