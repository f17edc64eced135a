"""The ``lightning-recipes`` commands' answer to an ordinary mistake: one line on stderr naming the fix.

A command raises :class:`UsageError` for a mistake in its arguments (a missing file, an extra not installed,
a bad value); :func:`handle_usage_errors` turns it into ``lightning-recipes <command>: error: <message>`` and
exit code 2. Set ``LIGHTNING_RECIPES_TRACEBACK=1`` to get the full traceback instead. A genuine bug still
ends in a traceback: only :class:`UsageError` is turned into a line, and :func:`raised_by_us` tells our own
argument checks (``OptimizerRecipe(lr=-1)``) apart from an error inside the user's code.

Example:
    >>> def body() -> int:
    ...     raise UsageError("--config x.yaml: no such file")
    >>> import contextlib, io
    >>> with contextlib.redirect_stderr(io.StringIO()) as err:
    ...     handle_usage_errors("preflight", body)
    2
    >>> err.getvalue()
    'lightning-recipes preflight: error: --config x.yaml: no such file\\n'
"""

from __future__ import annotations

import importlib.util
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path

__all__ = ["TRACEBACK_ENV", "UsageError", "handle_usage_errors", "raised_by_us", "require_extra", "summarise"]

#: Set to 1 to see the full traceback of a usage error (for debugging the command itself).
TRACEBACK_ENV = "LIGHTNING_RECIPES_TRACEBACK"
#: The last line of every command's ``--help``.
TRACEBACK_HINT = (
    f"A mistake in the arguments ends in one line on stderr and exit code 2; {TRACEBACK_ENV}=1 shows its "
    "traceback."
)
_PACKAGE_DIR = Path(__file__).resolve().parent


class UsageError(ValueError):
    """A mistake in a command line: its message is one line that names the fix."""


def handle_usage_errors(command: str, body: Callable[[], int]) -> int:
    """``body()``, or 2 after printing ``lightning-recipes <command>: error: <message>`` for a
    :class:`UsageError` (re-raised when ``LIGHTNING_RECIPES_TRACEBACK`` is set)."""
    try:
        return body()
    except UsageError as err:
        if os.environ.get(TRACEBACK_ENV, "") not in ("", "0"):
            raise
        print(f"lightning-recipes {command}: error: {summarise(str(err))}", file=sys.stderr)
        return 2


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


def raised_by_us(err: BaseException) -> BaseException | None:
    """The innermost ValueError/TypeError in ``err``'s chain of causes when our own code raised it (an
    argument check of the package's, e.g. ``OptimizerRecipe(lr=-1)``), else None (the user's code, or a
    bug: those keep their traceback)."""
    inner: BaseException | None = err
    while inner is not None and (inner.__cause__ or inner.__context__) is not None:
        inner = inner.__cause__ or inner.__context__
    if not isinstance(inner, (ValueError, TypeError)) or inner.__traceback__ is None:
        return None
    tb = inner.__traceback__
    while tb.tb_next is not None:
        tb = tb.tb_next
    return inner if Path(tb.tb_frame.f_code.co_filename).resolve().is_relative_to(_PACKAGE_DIR) else None


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
