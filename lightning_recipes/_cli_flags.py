"""One flag spelling for every ``lightning-recipes`` command: snake_case, as LightningCLI writes
(``--trainer.max_epochs``, ``--print_config``); the kebab-case spelling of a top-level flag is accepted too.

Imports neither torch nor Lightning, so that ``--help`` and ``--version`` answer at once.

Example:
    >>> normalise_flags(["--num-params", "7B", "--output-dir=out-dir", "--model.init_args.n-layers", "2"])
    ['--num_params', '7B', '--output_dir=out-dir', '--model.init_args.n-layers', '2']
    >>> parser = FlagParser(prog="demo")
    >>> _ = parser.add_argument("--batch_size", type=int, default=64)
    >>> parser.parse_args(["--batch-size", "32"]).batch_size
    32
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from lightning_recipes._cli_errors import TRACEBACK_HINT, UsageError

__all__ = [
    "BOOL_FLAG",
    "HELP_AND_VERSION",
    "FlagParser",
    "as_names",
    "asks_for_help",
    "normalise_flags",
    "parse_bool",
    "version_text",
]

HELP_FLAGS = frozenset({"-h", "--help"})
VERSION_FLAGS = frozenset({"-V", "--version"})
HELP_AND_VERSION = HELP_FLAGS | VERSION_FLAGS
_TRUE, _FALSE = ("true", "yes", "on", "1"), ("false", "no", "off", "0")


def parse_bool(text: str) -> bool:
    """``true``/``false`` (also yes/no, on/off, 1/0) as a bool: the value of a boolean flag.

    Example:
        >>> parse_bool("False"), parse_bool("yes")
        (False, True)
    """
    if text.lower() in _TRUE + _FALSE:
        return text.lower() in _TRUE
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


#: Every boolean option of every command takes both forms: ``--verbose`` alone (true) or ``--verbose false``
#: (``add_argument("--verbose", type=bool, default=False, **BOOL_FLAG)``; argparse: ``type=parse_bool``).
BOOL_FLAG: dict[str, Any] = {"nargs": "?", "const": True}


def as_names(value: str | Sequence[str] | None) -> list[str] | None:
    """A list option given as a list (``[loss,data]``), one name (``loss``) or names with commas
    (``loss,data``).

    Example:
        >>> as_names("loss"), as_names("loss, data"), as_names(["loss"]), as_names(None)
        (['loss'], ['loss', 'data'], ['loss'], None)
    """
    if value is None or not isinstance(value, str):
        return None if value is None else list(value)
    return [name.strip() for name in value.split(",") if name.strip()]


def normalise_flags(argv: Sequence[str]) -> list[str]:
    """``argv`` with each ``--flag-name`` written ``--flag_name``: only the top-level name (before the first
    ``.`` or ``=``); values, nested keys (``--model.init_args.foo-bar``) and anything after ``--`` stay."""
    out: list[str] = []
    for index, arg in enumerate(argv):
        if arg == "--":
            return out + list(argv[index:])
        if arg.startswith("--") and len(arg) > 2:
            cut = min((i for i in (arg.find(".", 2), arg.find("=", 2)) if i != -1), default=len(arg))
            arg = "--" + arg[2:cut].replace("-", "_") + arg[cut:]
        out.append(arg)
    return out


def asks_for_help(argv: Sequence[str]) -> bool:
    """Whether ``argv`` asks for ``--help`` or ``--version`` (before any ``--``)."""
    for arg in argv:
        if arg == "--":
            return False
        if arg in HELP_FLAGS or arg in VERSION_FLAGS:
            return True
    return False


def version_text() -> str:
    """``lightning-recipes X.Y.Z``: the installed distribution's version, else the package's
    ``__version__``."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        number = version("lightning-recipes")
    except PackageNotFoundError:  # run from a source tree: the package's own (imported: this is its module)
        number = getattr(sys.modules.get("lightning_recipes"), "__version__", "unknown")
    return f"lightning-recipes {number}"


class FlagParser(argparse.ArgumentParser):
    """An ``argparse`` parser that accepts both spellings of a flag (snake_case documented), has
    ``-V/--version``, and raises :class:`UsageError` instead of printing usage and exiting."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("epilog", TRACEBACK_HINT)
        super().__init__(**kwargs)
        self.add_argument("-V", "--version", action="version", version=version_text())

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        return super().parse_known_args(normalise_flags(sys.argv[1:] if args is None else args), namespace)

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (see `{self.prog} --help`)")
