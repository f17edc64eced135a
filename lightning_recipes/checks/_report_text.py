"""How a preflight report looks in a terminal: one line per check by default, the full table when verbose.

The compact form gives each check its status, name and a short verdict (the message's first sentence, cut to
the terminal's width); a check that did not pass cleanly (``warn``, ``fail``, ``error``, ``inconclusive``)
gets its whole message, wrapped. The verbose form is the table of every message and time.
"""

from __future__ import annotations

import re
import shutil
import textwrap
from typing import Any

from lightning_recipes._console import escape, has_rich, new_table, render, strip_markup

# The report and its results are typed ``Any`` here: ``report.py`` imports this module (no import circle).

__all__ = ["DETAILED", "STYLE", "compact_lines", "first_sentence", "renderable", "title", "to_text"]

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
    """A rich renderable of ``report`` (needs rich): compact (one line per check) or, with ``verbose``, the
    full table."""
    from rich.console import Group
    from rich.text import Text

    if verbose:
        return _table(report)
    return Group(Text.from_markup(title(report, slowest=False), overflow="fold"), _Lines(report.results))


def compact_lines(results: list[Any], width: int) -> list[str]:
    """One line per check (status, name, first sentence cut to the width with an ellipsis), the whole
    message, wrapped under the verdict's column, for the detailed statuses; rich markup colours the status."""
    status_width = max((len(r.status) for r in results), default=4)
    name_width = max((len(r.name) for r in results), default=4)
    indent = status_width + name_width + 2
    room = max(width - indent, 20)
    lines = []
    for result in results:
        head = (
            _status(result)
            + " " * (status_width - len(result.status) + 1)
            + result.name.ljust(name_width + 1)
        )
        if result.status in DETAILED:
            body = textwrap.wrap(" ".join(result.message.split()), room, break_on_hyphens=False) or [""]
        else:
            verdict = first_sentence(result.message)
            body = [verdict if len(verdict) <= room else verdict[: room - 1] + "…"]
        lines += [(head if i == 0 else " " * indent) + escape(line.rstrip()) for i, line in enumerate(body)]
    return lines


class _Lines:
    """:func:`compact_lines` for rich, at the console's width."""

    def __init__(self, results: list[Any]) -> None:
        self.results = results

    def __rich_console__(self, console: Any, options: Any) -> Any:
        from rich.text import Text

        for line in compact_lines(self.results, options.max_width):
            yield Text.from_markup(line)


def to_text(report: Any, verbose: bool = False, width: int | None = None) -> str:
    """``report`` rendered as plain text ``width`` columns wide (default: the terminal's width)."""
    width = width if width is not None else shutil.get_terminal_size().columns
    if has_rich() or verbose:
        text = render(renderable(report, verbose) if has_rich() else _table(report), width=width)
    else:
        text = "\n".join(
            map(strip_markup, [title(report, slowest=False), *compact_lines(report.results, width)])
        )
    return "\n".join(line.rstrip() for line in text.rstrip("\n").splitlines())


def _table(report: Any) -> Any:
    table = new_table(title(report), show_lines=True, expand=False)
    table.add_column("check", no_wrap=True)
    table.add_column("status", no_wrap=True)
    table.add_column("time", justify="right", no_wrap=True)
    table.add_column("message", overflow="fold")
    for result in report.results:
        table.add_row(result.name, _status(result), f"{result.seconds:.1f}s", escape(result.message))
    return table


def _status(result: Any) -> str:
    return f"[{STYLE[result.status]}]{result.status.upper()}[/]"
