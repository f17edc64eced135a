"""What every ``lightning-recipes`` command shares, importing neither torch nor Lightning: one flag spelling,
:class:`UsageError` answered in one line, the LightningCLI-style parser of ``preflight`` and ``tune``."""

from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.util
import os
import re
import sys
import textwrap
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

if TYPE_CHECKING:
    from jsonargparse import ArgumentParser


#: Set to 1 to see the full traceback of a usage error.
TRACEBACK_ENV = "LIGHTNING_RECIPES_TRACEBACK"
#: The last line of every command's ``--help``.
TRACEBACK_HINT = (
    f"A mistake in the arguments ends in one line on stderr and exit code 2; {TRACEBACK_ENV}=1 shows its "
    "traceback."
)
#: Every boolean option takes both forms: ``--verbose`` alone (true) or ``--verbose false``.
BOOL_FLAG: dict[str, Any] = {"nargs": "?", "const": True}
_TRUE, _FALSE = ("true", "yes", "on", "1"), ("false", "no", "off", "0")
_PACKAGE_DIR = Path(__file__).resolve().parents[1]
#: An option of a command: (name, type or choices, default, help).
Option = tuple[str, Any, Any, str]
_T = TypeVar("_T")


class UsageError(ValueError):
    """A mistake in a command line: its message is one line that names the fix."""


def handle_usage_errors(command: str, body: Callable[[], _T]) -> _T | int:
    """``body()``, or 2 after printing ``lightning-recipes <command>: error: <message>`` for a
    :class:`UsageError` (re-raised when ``LIGHTNING_RECIPES_TRACEBACK`` is set)."""
    try:
        return body()
    except UsageError as err:
        if os.environ.get(TRACEBACK_ENV, "") not in ("", "0"):
            raise
        print(f"lightning-recipes {command}: error: {summarise(str(err))}", file=sys.stderr)
        return 2


def command_main(command: str, run: Callable[[list[str]], int], argv: Sequence[str] | None) -> int:
    """A command's entry point: ``run(argv)`` with its mistakes as one line (exit 2); ``--help``,
    ``--version`` and ``--print_config`` exit 0; ``--model my_pkg.MyModel`` finds ``./my_pkg.py`` (the
    console script puts its own folder first on ``sys.path``, not the current directory)."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        return handle_usage_errors(command, lambda: run(arguments))
    except SystemExit as exit_:
        return int(exit_.code or 0)


def require_extra(module: str, extra: str, needed_for: str, package: str | None = None) -> None:
    """Raise :class:`UsageError` naming ``pip install "lightning-recipes[extra]"`` when ``module`` cannot be
    imported (checked without importing it)."""
    try:
        found = importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a broken parent package, or sys.modules[module] is None
        found = False
    if not found:
        raise UsageError(
            f"{needed_for} needs {package or module}, which is not installed"
            f': pip install "lightning-recipes[{extra}]"'
        )


@contextlib.contextmanager
def our_errors_as_usage_errors() -> Iterator[None]:
    """Turn a ValueError/TypeError whose innermost error the package's own code raised (an argument check,
    ``OptimizerRecipe(lr=-1)``) into a :class:`UsageError`; one from the user's code keeps its traceback."""
    try:
        yield
    except (ValueError, TypeError) as err:
        inner: BaseException = err
        while (inner.__cause__ or inner.__context__) is not None:
            inner = inner.__cause__ or inner.__context__  # type: ignore[assignment]
        tb = inner.__traceback__
        while tb is not None and tb.tb_next is not None:
            tb = tb.tb_next
        ours = tb is not None and Path(tb.tb_frame.f_code.co_filename).resolve().is_relative_to(_PACKAGE_DIR)
        if not ours or not isinstance(inner, (ValueError, TypeError)):
            raise
        raise UsageError(str(inner)) from err


_PARSER_KEY = re.compile(r'Parser key "([^"]+)"')
_EXPECTED_LITERAL = re.compile(r"Expected a typing\.Literal\[(.*)\]")


def summarise(message: str) -> str:
    """One line from a (jsonargparse) message of many: the nested key it is about and the first reason.

    Example:
        >>> summarise('Parser key "model":\\n  Problem ...\\n    Parser key "optimizer":\\n'
        ...           "  - Expected a typing.Literal['adamw', 'lion']\\n  - Expected a <class 'NoneType'>")
        "--model.optimizer: expected one of 'adamw', 'lion'"
    """
    lines = [line.strip() for line in message.strip().splitlines() if line.strip()]
    if not any(_PARSER_KEY.search(line) or line.startswith("- ") for line in lines):
        return " ".join(lines) or message
    keys = [match.group(1) for line in lines if (match := _PARSER_KEY.search(line))]
    reasons = [i for i, line in enumerate(lines) if line.startswith("- ") and "NoneType" not in line]
    direct = [i for i in reasons if not lines[i].startswith(("- Problem with", "- Does not validate"))]
    index = (direct or reasons or [len(lines) - 1])[0]
    reason = lines[index].lstrip("- ")
    while reason.endswith(":") and index + 1 < len(lines):  # "Problem with given class_path 'x.Y':" + why
        index += 1
        reason = f"{reason} {lines[index].lstrip('- ')}"
    literal = _EXPECTED_LITERAL.match(reason)
    if literal:
        reason = f"expected one of {literal.group(1)}"
    where = f"--{'.'.join(keys)}: " if keys else ""
    return f"{where}{reason}"


def parse_bool(text: str) -> bool:
    """``true``/``false`` (also yes/no, on/off, 1/0): the value of a boolean flag.

    Example:
        >>> parse_bool("False"), parse_bool("yes")
        (False, True)
    """
    if text.lower() in _TRUE + _FALSE:
        return text.lower() in _TRUE
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def as_names(value: str | Sequence[str] | None) -> list[str] | None:
    """A list option given as a list (``[loss,data]``), one name or names with commas.

    Example:
        >>> as_names("loss"), as_names("loss, data"), as_names(["loss"]), as_names(None)
        (['loss'], ['loss', 'data'], ['loss'], None)
    """
    if value is None or not isinstance(value, str):
        return None if value is None else list(value)
    return [name.strip() for name in value.split(",") if name.strip()]


def normalise_flags(argv: Sequence[str]) -> list[str]:
    """``argv`` with each ``--flag-name`` written ``--flag_name``: only the top-level name (before the first
    ``.`` or ``=``); values, nested keys and anything after ``--`` stay."""
    out: list[str] = []
    for index, arg in enumerate(argv):
        if arg == "--":
            return out + list(argv[index:])
        if arg.startswith("--") and len(arg) > 2:
            cut = min((i for i in (arg.find(".", 2), arg.find("=", 2)) if i != -1), default=len(arg))
            arg = "--" + arg[2:cut].replace("-", "_") + arg[cut:]
        out.append(arg)
    return out


def help_or_version(argv: Sequence[str]) -> str | None:
    """The first ``--help``/``--version`` flag in ``argv`` (before any ``--``), if any."""
    before = argv[: list(argv).index("--")] if "--" in argv else argv
    return next((arg for arg in before if arg in ("-h", "--help", "-V", "--version")), None)


def version_text() -> str:
    """``lightning-recipes X.Y.Z``: the installed distribution's version, else the package's."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        number = version("lightning-recipes")
    except PackageNotFoundError:  # run from a source tree
        number = getattr(sys.modules.get("lightning_recipes"), "__version__", "unknown")
    return f"lightning-recipes {number}"


class FlagParser(argparse.ArgumentParser):
    """An ``argparse`` parser that accepts both spellings of a flag, has ``-V/--version``, raises
    :class:`UsageError` instead of exiting, and adds ``options`` (:meth:`add_options`)."""

    def __init__(self, options: Sequence[Option] = (), **kwargs: Any) -> None:
        kwargs.setdefault("epilog", TRACEBACK_HINT)
        super().__init__(**kwargs)
        self.add_argument("-V", "--version", action="version", version=version_text())
        self.add_options(options)

    def add_options(self, options: Sequence[Option]) -> None:
        """Add ``--name`` for each :data:`Option` (a tuple type: the choices; a list default: one or more
        values; ``bool``: ``--flag`` alone or ``--flag false``)."""
        for name, type_, default, help_ in options:
            how: dict[str, Any] = {"type": type_}
            if isinstance(type_, tuple):
                how = {"choices": list(type_)}
            elif type_ is bool:
                how = {"type": parse_bool, "metavar": "{true,false}", **BOOL_FLAG}
            if isinstance(default, list):
                how["nargs"] = "+"
            self.add_argument(f"--{name}", default=default, help=help_, **how)

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        return super().parse_known_args(normalise_flags(sys.argv[1:] if args is None else args), namespace)

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (see `{self.prog} --help`)")


#: Stand-ins for Lightning's two classes in the ``--help`` parser, named in the help as the real ones are.
_STAND_INS: tuple[type, type] = tuple(  # type: ignore[assignment]
    type(name, (), {"__module__": "lightning", "__doc__": f"Stand-in for ``lightning.{name}``."})
    for name in ("LightningModule", "LightningDataModule")
)


def new_parser(
    prog: str, description: str, fast: bool, config_keys: str, options: Sequence[Option], epilog: str = ""
) -> ArgumentParser:
    """A jsonargparse parser that raises its errors: ``-V/--version``, ``--config`` (``config_keys``: the
    trainer keys it reads), ``--model``, ``--data`` (``fast``: stand-ins, for ``--help`` without torch),
    then ``options``."""
    from jsonargparse import ActionConfigFile, ArgumentParser, DefaultHelpFormatter

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
    parser.add_argument(
        "--config",
        action=ActionConfigFile,
        help="YAML file with these arguments, or the config your LightningCLI writes (its model and data "
        f"sections and trainer.{{{config_keys}}} are used; the rest is ignored)",
    )
    module, datamodule = _STAND_INS
    if not fast:
        import lightning.pytorch as pl

        module, datamodule = pl.LightningModule, pl.LightningDataModule
    # as_group=False: a group would be headed by the first paragraph of the class's docstring
    parser.add_subclass_arguments(
        module, "model", as_group=False, help="the LightningModule class (my_pkg.MyModel) and its init_args"
    )
    parser.add_subclass_arguments(
        datamodule, "data", as_group=False, help="the LightningDataModule class and its init_args"
    )
    for name, type_, default, help_ in options:
        flag = BOOL_FLAG if type_ is bool else {}
        parser.add_argument(f"--{name}", type=type_, default=default, help=help_, **flag)
    return parser


def front(
    command: str,
    build: Callable[..., ArgumentParser],
    argv: Sequence[str],
    options: Sequence[Option],
    trainer: Sequence[str],
) -> list[str]:
    """The torch-free first step of a LightningCLI-style command: flags in snake_case, ``--help`` and
    ``--version`` answered (exit), no model refused, each ``--config`` cut to what the command reads (its
    ``options`` and ``trainer`` keys)."""
    args = normalise_flags(argv)
    asked = help_or_version(args)
    if asked is not None:
        parse(build(fast=True), [asked])
    if not any(a.split("=")[0] in ("--model", "--config") for a in args):
        raise UsageError(
            f"no model given: pass --model my_pkg.MyModel (and --data my_pkg.MyDataModule), or "
            f"--config config.yaml (see `lightning-recipes {command} --help`)"
        )
    return with_lightning_cli_config(args, ("model", "data", *(name for name, *_ in options)), trainer)


def parse(parser: ArgumentParser, args: Sequence[str]) -> Any:
    """``parser.parse_args(args)``; a parse error becomes a :class:`UsageError` of one line."""
    try:
        return parser.parse_args(list(args))
    except argparse.ArgumentError as err:
        raise UsageError(f"{summarise(str(err))} (see `{parser.prog} --help`)") from err


def parse_and_build(
    parser: ArgumentParser, args: list[str], check: Callable[[Any], None] = lambda config: None
) -> tuple[Any, Any]:
    """The parsed config (``check``-ed) and its instantiated classes; ``--print_config`` prints the config
    once the classes were built (a value only a class checks is refused, not printed) and exits."""
    check_class_paths(args)
    printing = [a for a in args if a.split("=")[0] == "--print_config"]
    config = parse(parser, [a for a in args if a not in printing])
    check(config)
    if config.model is None:
        raise UsageError("no model given: pass --model my_pkg.MyModel, or a --config with a model section")
    objects = instantiate(parser, config)
    if printing:
        print(parser.dump(config), end="")
        raise SystemExit(0)
    return config, objects


def instantiate(parser: ArgumentParser, config: Any) -> Any:
    """``parser.instantiate(config)`` under :func:`our_errors_as_usage_errors`."""
    # `instantiate` since jsonargparse 4.49 (`instantiate_classes` then warns); the older name before
    build = getattr(parser, "instantiate", None) or parser.instantiate_classes
    with our_errors_as_usage_errors():
        return build(config)


def check_class_paths(args: Sequence[str]) -> None:
    """:func:`import_class` each ``--model`` / ``--data`` import path (a short class name, a YAML mapping or a
    file is left to jsonargparse)."""
    for index in range(len(args)):
        flag, value = flag_at(args, index, ("--model", "--data"))
        if value is not None and "." in value and value.replace(".", "").replace("_", "").isalnum():
            import_class(flag, value)


def flag_at(args: Sequence[str], index: int, flags: Sequence[str]) -> tuple[str, str | None]:
    """``(flag, value)`` when ``args[index]`` is one of ``flags`` with its value (``--flag=value``, or
    ``--flag value``), else ``("", None)``."""
    flag, sep, value = args[index].partition("=")
    if flag not in flags or not (sep or index + 1 < len(args)):
        return "", None
    return flag, value if sep else args[index + 1]


def import_class(flag: str, path: str) -> Any:
    """The class at the import ``path`` given to ``flag``; :class:`UsageError` for a path without a module, a
    module that is not found or a class it lacks."""
    module_name, _, class_name = path.rpartition(".")
    if not module_name:
        raise UsageError(f"{flag} must be a full import path like 'pkg.module.Class', got {path!r}.")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as err:
        raise UsageError(
            f"{flag} {path}: no module named {err.name!r}; give the import path of the class "
            "(my_pkg.MyModel), run from the folder that holds its module, or install its package"
        ) from None
    if not hasattr(module, class_name):
        raise UsageError(f"{flag} {path}: module {module_name!r} has no class {class_name!r}")
    return getattr(module, class_name)


def with_lightning_cli_config(
    args: Sequence[str], own_keys: Sequence[str], trainer_keys: Sequence[str] = ()
) -> list[str]:
    """``args`` with each ``--config FILE`` (a LightningCLI config) cut to its ``own_keys`` and the
    ``trainer_keys`` of its ``trainer`` section (as top-level keys); a section without ``class_path`` takes
    its class from ``--model`` / ``--data``. ``UsageError`` for a missing or malformed file.

    Example:
        >>> import pathlib, tempfile, yaml
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "config.yaml"
        >>> _ = path.write_text("trainer:\\n  precision: bf16-mixed\\nmodel:\\n  class_path: pkg.Net\\n")
        >>> args = with_lightning_cli_config(["--config", str(path)], ("model",), ("precision",))
        >>> args[0], yaml.safe_load(args[1])
        ('--config', {'model': {'class_path': 'pkg.Net'}, 'precision': 'bf16-mixed'})
    """
    args, out, index = list(args), [], 0
    while index < len(args):
        path = flag_at(args, index, ("--config",))[1]
        own = None if path is None else _own_sections(path, args, own_keys, trainer_keys)
        out += [args[index]] if own is None else ["--config", own]
        index += 1 if path is None or "=" in args[index] else 2
    return out


def _own_sections(path: str, args: list[str], own_keys: Sequence[str], trainer_keys: Sequence[str]) -> str:
    import yaml

    file = Path(path)
    if not file.is_file():
        if "\n" in path or ":" in path or path.lstrip().startswith("{"):
            return path  # a YAML string: jsonargparse reads it
        raise UsageError(f"--config {path}: no such file (give the path of a YAML config file)")
    try:
        data: Any = yaml.safe_load(file.read_text()) or {}
    except yaml.YAMLError as err:
        where = getattr(err, "problem_mark", None)
        line = f" at line {where.line + 1}" if where is not None else ""
        problem = getattr(err, "problem", None) or "not YAML"
        raise UsageError(f"--config {path} is not valid YAML{line}: {problem}; fix the file") from None
    if not isinstance(data, dict):
        raise UsageError(f"`--config` {path} must hold a YAML mapping, got {type(data).__name__}.")
    if set(data) == {"fit"} and isinstance(data["fit"], dict):
        data = data["fit"]
    kept = {key: value for key, value in data.items() if key in own_keys and value is not None}
    trainer = data.get("trainer")
    if isinstance(trainer, dict):
        kept.update({key: trainer[key] for key in trainer_keys if trainer.get(key) not in (None, -1)})
    for section in ("model", "data"):
        value = kept.get(section)
        if isinstance(value, dict) and "class_path" not in value:
            values = (flag_at(args, index, (f"--{section}",))[1] for index in range(len(args)))
            class_path = next((value for value in values if value is not None), None)
            if class_path is None:
                raise UsageError(
                    f"the `{section}` section of {path} has no `class_path` (LightningCLI with a fixed "
                    f"{section} class writes only its arguments): pass the class too, e.g. "
                    f"`--{section} my_pkg.MyClass`."
                )
            kept[section] = {"class_path": class_path, "init_args": value}
    return yaml.safe_dump(kept, sort_keys=False)
