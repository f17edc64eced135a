"""The preflight report as text and for rich: its headline, one line per check, the full table."""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass
from typing import Any

from lightning_recipes._console import escape, new_table

STYLE = {
    "pass": "green",
    "warn": "yellow",
    "fail": "bold red",
    "inconclusive": "magenta",
    "skip": "dim",
    "error": "bold magenta",
}
#: The statuses a report's tally always shows; ``inconclusive`` and ``error`` only when some.
ALWAYS_COUNTED = ("pass", "warn", "fail", "skip")
#: Statuses whose whole message the compact report shows (the others get their first sentence).
DETAILED = ("warn", "fail", "error", "inconclusive")

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z(`])")


def first_sentence(message: str) -> str:
    """The message up to its first sentence end (a ``.``, ``!`` or ``?`` before a capital), on one line."""
    return _SENTENCE_END.split(" ".join(message.split()), maxsplit=1)[0]


def title(report: Any, slowest: bool = True) -> str:
    """The report's headline (rich markup): verdict, counts, seconds and (``slowest``) the slowest check."""
    key = "pass" if report.ok else "fail" if report.failures else "error" if report.errors else "inconclusive"
    word = {"pass": "OK", "fail": "FAILED", "error": "ERROR", "inconclusive": "NOT JUDGED"}[key]
    verdict = f"[{STYLE[key]}]{word}[/]"
    tally = ", ".join(f"{n} {s}" for s, n in report.counts().items() if n or s in ALWAYS_COUNTED)
    longest = report.slowest
    slow = f"; slowest: {longest.name} {longest.seconds:.1f} s" if slowest and longest is not None else ""
    return f"Preflight {verdict}: {tally} ({report.seconds:.1f} s{slow})"


def renderable(report: Any, verbose: bool = False) -> Any:
    """``report`` for rich: compact (one line per check) or, with ``verbose``, the full table."""
    from rich.console import Group
    from rich.text import Text

    if verbose:
        return table(report)
    return Group(Text.from_markup(title(report, slowest=False), overflow="fold"), _Lines(report.results))


def compact_lines(results: list[Any], width: int) -> list[str]:
    """One line per check (status, name, first sentence cut to ``width``); :data:`DETAILED` ones whole."""
    status_width = max((len(r.status) for r in results), default=4)
    name_width = max((len(r.name) for r in results), default=4)
    indent = status_width + name_width + 2
    room = max(width - indent, 20)
    lines = []
    for result in results:
        pad = " " * (status_width - len(result.status) + 1)
        head = _status(result) + pad + result.name.ljust(name_width + 1)
        if result.status in DETAILED:
            body = textwrap.wrap(" ".join(result.message.split()), room, break_on_hyphens=False) or [""]
        else:
            verdict = first_sentence(result.message)
            body = [verdict if len(verdict) <= room else verdict[: room - 1] + "…"]
        lines += [(head if i == 0 else " " * indent) + escape(line.rstrip()) for i, line in enumerate(body)]
    return lines


@dataclass
class _Lines:
    """:func:`compact_lines` for rich, at the console's width."""

    results: list[Any]

    def __rich_console__(self, console: Any, options: Any) -> Any:
        from rich.text import Text

        for line in compact_lines(self.results, options.max_width):
            yield Text.from_markup(line)


def table(report: Any) -> Any:
    """Every check's status, time and whole message, in one rich table (or its plain stand-in)."""
    grid = new_table(title(report), show_lines=True, expand=False)
    for column, justify in (("check", "left"), ("status", "left"), ("time", "right")):
        grid.add_column(column, justify=justify, no_wrap=True)
    grid.add_column("message", overflow="fold")
    for result in report.results:
        grid.add_row(result.name, _status(result), f"{result.seconds:.1f}s", escape(result.message))
    return grid


def _status(result: Any) -> str:
    return f"[{STYLE[result.status]}]{result.status.upper()}[/]"
