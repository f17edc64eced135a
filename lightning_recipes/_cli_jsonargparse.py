"""What ``preflight`` and ``tune`` share as LightningCLI-style (jsonargparse) commands: one parser builder for
``--help`` (stand-ins for Lightning's classes: no torch is imported) and for the run (Lightning's classes);
``tests/test_cli_help.py`` checks that both list the same options.

Example:
    >>> parser = new_parser("lightning-recipes x", "Do x.", fast=True)
    >>> add_model_and_data(parser, fast=True)
    >>> sorted(s for a in parser._actions for s in a.option_strings if s.startswith("--model"))
    ['--model', '--model.help']
"""

from __future__ import annotations

import argparse
import textwrap
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from lightning_recipes._cli_errors import TRACEBACK_HINT, UsageError, raised_by_us, summarise
from lightning_recipes._cli_flags import version_text

if TYPE_CHECKING:
    from jsonargparse import ArgumentParser

__all__ = [
    "add_model_and_data",
    "check_class_paths",
    "instantiate",
    "new_parser",
    "parse",
    "parse_object",
    "require_model",
]


class _LightningModule:
    """Stand-in for ``lightning.LightningModule`` in the ``--help`` parser."""


class _LightningDataModule:
    """Stand-in for ``lightning.LightningDataModule`` in the ``--help`` parser."""


for _stand_in in (_LightningModule, _LightningDataModule):  # named in the help as the real ones are
    _stand_in.__module__, _stand_in.__qualname__ = "lightning", _stand_in.__name__.lstrip("_")
    _stand_in.__name__ = _stand_in.__qualname__


def new_parser(prog: str, description: str, fast: bool, epilog: str = "") -> ArgumentParser:
    """A jsonargparse parser with ``--config``-free defaults of ours: ``-V/--version``, errors raised (not
    printed), a raw epilog that ends with how to see a traceback."""
    from jsonargparse import ArgumentParser, DefaultHelpFormatter

    class Formatter(argparse.RawDescriptionHelpFormatter, DefaultHelpFormatter):
        """jsonargparse's help, with the epilog's lines kept as written."""

    parser = ArgumentParser(
        prog=prog,
        description=textwrap.fill(description, 79),
        epilog=(epilog + "\n\n" if epilog else "") + textwrap.fill(TRACEBACK_HINT, 79),
        formatter_class=Formatter,
        exit_on_error=False,
    )
    parser.add_argument("-V", "--version", action="version", version=version_text())
    return parser


def add_model_and_data(parser: ArgumentParser, fast: bool) -> None:
    """``--model`` and ``--data``: a LightningModule and a LightningDataModule with their init_args."""
    if fast:
        module: type = _LightningModule
        datamodule: type = _LightningDataModule
    else:
        import lightning.pytorch as pl

        module, datamodule = pl.LightningModule, pl.LightningDataModule
    # as_group=False: a group would be headed by the first paragraph of the class's docstring
    parser.add_subclass_arguments(
        module, "model", as_group=False, help="the LightningModule class (my_pkg.MyModel) and its init_args"
    )
    parser.add_subclass_arguments(
        datamodule, "data", as_group=False, help="the LightningDataModule class and its init_args"
    )


def parse(parser: ArgumentParser, args: Sequence[str]) -> Any:
    """``parser.parse_args(args)``; a parse error becomes a :class:`UsageError` of one line; ``--help``
    prints and exits as usual."""
    try:
        return parser.parse_args(list(args))
    except argparse.ArgumentError as err:
        raise UsageError(f"{summarise(str(err))} (see `{parser.prog} --help`)") from err


def parse_object(parser: ArgumentParser, values: dict[str, Any]) -> Any:
    """``parser.parse_object(values)``; a type error becomes a :class:`UsageError` of one line."""
    try:
        return parser.parse_object(values)
    except argparse.ArgumentError as err:
        raise UsageError(summarise(str(err))) from err


def require_model(args: Sequence[str], command: str) -> None:
    """Raise :class:`UsageError` when neither ``--model`` nor ``--config`` is given."""
    if not any(a.split("=")[0] in ("--model", "--config") for a in args):
        raise UsageError(
            f"no model given: pass --model my_pkg.MyModel (and --data my_pkg.MyDataModule), or "
            f"--config config.yaml (see `lightning-recipes {command} --help`)"
        )


def instantiate(parser: ArgumentParser, config: Any) -> Any:
    """``parser.instantiate_classes(config)``; a ValueError/TypeError that one of our own argument checks
    raised while building the model or the data (``OptimizerRecipe(lr=-1)``) becomes a :class:`UsageError`;
    an error in the user's code keeps its traceback."""
    # `instantiate` since jsonargparse 4.49 (`instantiate_classes` then warns); the older name before
    build = getattr(parser, "instantiate", None) or parser.instantiate_classes
    try:
        return build(config)
    except (ValueError, TypeError) as err:
        ours = raised_by_us(err)
        if ours is None:
            raise
        raise UsageError(str(ours)) from err


def check_class_paths(args: Sequence[str]) -> None:
    """Raise :class:`UsageError` for a ``--model`` / ``--data`` import path (``pkg.module.Class``) on the
    command line whose module or class cannot be found (a short name, ``DigitsDataModule``, is left to
    jsonargparse). Imports the module: call it where importing the user's code is fine."""
    import importlib

    for index, arg in enumerate(args):
        flag, sep, value = arg.partition("=")
        if flag not in ("--model", "--data"):
            continue
        if not sep:
            value = args[index + 1] if index + 1 < len(args) else ""
        module_name, _, class_name = value.rpartition(".")
        if not module_name or not value.replace(".", "").replace("_", "").isalnum():
            continue  # a short class name, a YAML mapping or a file: jsonargparse reads it
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as err:
            raise UsageError(
                f"{flag} {value}: no module named {err.name!r}; give the import path of the class "
                "(my_pkg.MyModel), run from the folder that holds its module, or install its package"
            ) from None
        if not hasattr(module, class_name):
            raise UsageError(f"{flag} {value}: module {module_name!r} has no class {class_name!r}")
