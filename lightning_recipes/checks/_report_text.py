"""How a preflight report looks in a terminal: one line per check by default, the full table when verbose.

The compact form gives each check its status, name and a short verdict (the message's first sentence, cut to
the terminal's width); a check that did not pass cleanly (``warn``, ``fail``, ``error``, ``inconclusive``)
gets its whole message, wrapped. The verbose form is the table of every message and time.
"""

from __future__ import annotations

import io
import re
import shutil
from typing import Any

# The report and its results are typed ``Any`` here: ``report.py`` imports this module (no import circle).

__all__ = ["DETAILED", "STYLE", "first_sentence", "renderable", "title", "to_text"]

STYLE = {
    "pass": "green",
    "warn": "yellow",
    "fail": "bold red",
    "inconclusive": "magenta",
    "skip": "dim",
    "error": "bold magenta",
}
#: Statuses whose whole message the compact report shows (the others get their first sentence).
DETAILED = ("warn", "fail", "error", "inconclusive")

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z(`])")


def first_sentence(message: str) -> str:
    """The message up to its first sentence end (a ``.``, ``!`` or ``?`` before a capital), on one line.

    Example:
        >>> first_sentence("loss 2.30 at init. Target values: every one moves the loss.")
        'loss 2.30 at init.'
        >>> first_sentence("0.2% expected by chance; e.g. 3 of 359")
        '0.2% expected by chance; e.g. 3 of 359'
    """
    return _SENTENCE_END.split(" ".join(message.split()), maxsplit=1)[0]


def title(report: Any, slowest: bool = True) -> str:
    """The report's headline (rich markup): verdict, counts, seconds and (``slowest``) the slowest check."""
    counts = report.counts()
    if report.ok:
        verdict = "[green]OK[/]"
    elif report.failures:
        verdict = "[bold red]FAILED[/]"
    elif report.errors:
        verdict = "[bold magenta]ERROR[/]"
    else:
        verdict = "[magenta]NOT JUDGED[/]"
    tally = ", ".join(f"{n} {s}" for s, n in counts.items() if n or s in ("pass", "warn", "fail", "skip"))
    longest = report.slowest
    slow = f"; slowest: {longest.name} {longest.seconds:.1f} s" if slowest and longest is not None else ""
    return f"Preflight {verdict}: {tally} ({report.seconds:.1f} s{slow})"


def renderable(report: Any, verbose: bool = False) -> Any:
    """A rich renderable of ``report``: compact (one line per check) or, with ``verbose``, the full table."""
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    if verbose:
        table = Table(title=title(report), show_lines=True, expand=False)
        table.add_column("check", no_wrap=True)
        table.add_column("status", no_wrap=True)
        table.add_column("time", justify="right", no_wrap=True)
        table.add_column("message", overflow="fold")
        for result in report.results:
            table.add_row(result.name, _status(result), f"{result.seconds:.1f}s", result.message)
        return table
    return Group(Text.from_markup(title(report, slowest=False), overflow="fold"), _Lines(report.results))


class _Lines:
    """One line per check (status, name, first sentence cut to the width with an ellipsis), the whole
    message, wrapped under the verdict's column, for the detailed statuses; no trailing spaces."""

    def __init__(self, results: list[Any]) -> None:
        self.results = results

    def __rich_console__(self, console: Any, options: Any) -> Any:
        from rich.text import Text

        status_width = max((len(r.status) for r in self.results), default=4)
        name_width = max((len(r.name) for r in self.results), default=4)
        indent = status_width + name_width + 2
        width = max(options.max_width - indent, 20)
        for result in self.results:
            head = Text.from_markup(_status(result) + " " * (status_width - len(result.status) + 1))
            head.append(result.name.ljust(name_width + 1))
            lines: list[Text]
            if result.status in DETAILED:
                lines = list(Text(" ".join(result.message.split())).wrap(console, width, overflow="fold"))
            else:
                verdict = Text(first_sentence(result.message))
                verdict.truncate(width, overflow="ellipsis")
                lines = [verdict]
            for number, line in enumerate(lines):
                line.rstrip()
                yield (head if number == 0 else Text(" " * indent)) + line


def to_text(report: Any, verbose: bool = False, width: int | None = None) -> str:
    """``report`` rendered as plain text ``width`` columns wide (default: the terminal's width)."""
    from rich.console import Console

    width = width if width is not None else shutil.get_terminal_size().columns
    buffer = io.StringIO()
    console = Console(file=buffer, width=width, force_terminal=False, color_system=None)
    console.print(renderable(report, verbose))
    return "\n".join(line.rstrip() for line in buffer.getvalue().rstrip("\n").splitlines())


def _status(result: Any) -> str:
    return f"[{STYLE[result.status]}]{result.status.upper()}[/]"
