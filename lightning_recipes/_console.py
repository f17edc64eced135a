"""Terminal output: rich where it is installed (an extra), else plain text; one table API,
:func:`new_table`, whose cells are never cut (too wide a table is stacked, ``header: value`` per cell)."""

from __future__ import annotations

import functools
import importlib.util
import io
import re
import shutil
import textwrap
from typing import Any

__all__ = ["PlainTable", "escape", "has_rich", "new_table", "print_rich", "render", "strip_markup"]

# rich's markup tags: ``[bold red]``, ``[/]``, ``[/bold]``; ``\[`` is a literal bracket
_TAG = re.compile(r"\\(\[[a-z#/@][^[]*?\])|\[[a-z#/@][^[]*?\]")
_GAP = "  "


def has_rich() -> bool:
    """Whether rich can be imported."""
    return importlib.util.find_spec("rich") is not None


def escape(text: str) -> str:
    """``text`` with every ``[`` that would open a markup tag escaped (as ``rich.markup.escape``).

    Example:
        >>> strip_markup("[bold]" + escape("[red] stays") + "[/bold]")
        '[red] stays'
    """
    return re.sub(r"(\[[a-z#/@][^[]*?\])", r"\\\1", text)


def strip_markup(text: str) -> str:
    """``text`` without its markup tags, escaped brackets kept as brackets.

    Example:
        >>> strip_markup("[green]OK[/]: [1, 2]")
        'OK: [1, 2]'
    """
    return _TAG.sub(lambda match: match.group(1) or "", text)


class PlainTable:
    """What :func:`new_table` makes without rich: ``add_column`` / ``add_row`` as rich's ``Table`` (styling
    ignored); :meth:`render` is the text.

    Example:
        >>> table = PlainTable("memory")
        >>> table.add_column("per device")
        >>> table.add_column("GiB", justify="right")
        >>> table.add_row("parameters", "13.04")
        >>> print(table.render(40))
        memory
        per device    GiB
        parameters  13.04
        >>> print(table.render(12))
        memory
        parameters
          GiB: 13.04
    """

    def __init__(self, title: str = "", caption: str | None = None, **_: Any) -> None:
        self.title = strip_markup(title)
        self.caption = strip_markup(caption) if caption else ""
        self.headers: list[str] = []
        self.right: list[bool] = []
        self.rows: list[list[str]] = []

    def add_column(self, header: str, justify: str = "left", **_: Any) -> None:
        self.headers.append(strip_markup(header))
        self.right.append(justify == "right")

    def add_row(self, *cells: Any) -> None:
        self.rows.append([strip_markup(str(cell)) for cell in cells])

    def render(self, width: int) -> str:
        """The table ``width`` columns wide: aligned columns when they fit, else stacked per row."""
        lines = _wrap(self.title, width) if self.title else []
        widths = [max(_longest(cell) for cell in column) for column in zip(self.headers, *self.rows)]
        if sum(widths) + len(_GAP) * (len(widths) - 1) <= width:
            for cells in [self.headers, *self.rows]:
                split = [cell.splitlines() or [""] for cell in cells]
                for depth in range(max(len(parts) for parts in split)):
                    parts = [p[depth] if depth < len(p) else "" for p in split]
                    padded = (
                        part.rjust(w) if right else part.ljust(w)
                        for part, w, right in zip(parts, widths, self.right)
                    )
                    lines.append(_GAP.join(padded).rstrip())
        else:
            lines += _stacked(self.headers, self.rows, width)
        for note in self.caption.splitlines():
            lines += _wrap(note, width)
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.render(shutil.get_terminal_size().columns)


def new_table(title: str = "", *, box: str | None = None, fitting: bool = False, **options: Any) -> Any:
    """A ``rich.table.Table`` (``box``: a ``rich.box`` style name; ``fitting``: cells never cut, rows stacked
    on a console too narrow) or, without rich, a :class:`PlainTable`; ``options`` are rich's.

    Example:
        >>> table = new_table("sizes", fitting=True)
        >>> for header in ("preset", "parameters", "gradients"):
        ...     table.add_column(header)
        >>> table.add_row("fsdp_full_shard", "12345.67", "12345.67")
        >>> print(render(table, width=30).rstrip())
        sizes
        fsdp_full_shard
          parameters: 12345.67
          gradients: 12345.67
    """
    if not has_rich():
        return PlainTable(title, caption=options.get("caption"))
    from rich import box as boxes
    from rich.table import Table

    if box is not None:
        options["box"] = getattr(boxes, box)
    return (_fitting_table() if fitting else Table)(title=title, **options)


@functools.cache
def _fitting_table() -> type:
    from rich.measure import Measurement
    from rich.table import Table
    from rich.text import Text

    class FittingTable(Table):
        """A ``rich.table.Table`` whose cells are never cut (``…``); ``str()`` is its plain text."""

        def __str__(self) -> str:
            return render(self).rstrip("\n")

        def __rich_console__(self, console: Any, options: Any) -> Any:
            unbounded = options.update_width(1_000_000)
            ranges = [
                [Measurement.get(console, unbounded, cell) for cell in (column.header, *column.cells)]
                for column in self.columns
            ]
            least = [max(m.minimum for m in cells) for cells in ranges]  # the longest word: a whole number
            most = [max(m.maximum for m in cells) for cells in ranges]
            spare = options.max_width - Measurement.get(console, unbounded, self).minimum
            if spare < 0:  # stacked
                headers = [str(column.header) for column in self.columns]
                rows = [[str(cell) for cell in cells] for cells in zip(*(c.cells for c in self.columns))]
                lines = [str(self.title or ""), *_stacked(headers, rows, options.max_width)]
                yield Text("\n".join(lines + ([str(self.caption)] if self.caption else [])))
                return
            # each column its longest word, then the spare width to the columns that need least to fit whole
            widths = list(least)
            for i in sorted(range(len(widths)), key=lambda i: most[i] - least[i]):
                grow = min(spare, most[i] - least[i])
                widths[i], spare = widths[i] + grow, spare - grow
            given = [column.width for column in self.columns]
            for column, width in zip(self.columns, widths):
                column.width = width
            yield from super().__rich_console__(console, options)
            for column, before in zip(self.columns, given):
                column.width = before

    return FittingTable


def render(renderable: Any, *notes: str, width: int | None = None) -> str:
    """``renderable`` (anything rich prints) and ``notes`` as plain text ``width`` columns wide (default: the
    terminal's)."""
    width = width if width is not None else shutil.get_terminal_size().columns
    if has_rich():
        from rich.console import Console

        buffer = io.StringIO()
        console = Console(file=buffer, width=width, no_color=True, force_terminal=False)
        console.print(renderable)
        for note in notes:
            console.print(f"note: {note}")
        return buffer.getvalue()
    if isinstance(renderable, PlainTable):
        text = renderable.render(width)
    else:
        text = "\n".join(_wrap(strip_markup(str(renderable)), width))
    return "".join(f"{line}\n" for line in [text, *("\n".join(_wrap(f"note: {n}", width)) for n in notes)])


def print_rich(renderable: Any) -> None:
    """Print ``renderable`` on stdout: with rich's colours when rich is installed, else as :func:`render`."""
    if has_rich():
        from rich.console import Console

        Console().print(renderable)
    else:
        print(render(renderable), end="")


def _wrap(text: str, width: int, indent: str = "") -> list[str]:
    """Word-wrapped lines; a word wider than ``width`` stays whole (a number is never cut)."""
    wrapper = textwrap.TextWrapper(width, indent, indent + "  ", break_long_words=False)
    return [line for part in text.splitlines() or [""] for line in wrapper.wrap(part) or [""]]


def _stacked(headers: list[str], rows: list[list[str]], width: int) -> list[str]:
    """Each row's first cell, then its ``header: value`` pairs, indented, as many on a line as fit."""
    lines: list[str] = []
    for cells in rows:
        lines += _wrap(" ".join(cells[0].split()), width)
        groups: list[str] = []
        for h, c in zip(headers[1:], cells[1:]):
            if c.strip() not in ("", "-"):
                pair = f"{h}: {' '.join(c.split())}"
                if groups and len(groups[-1]) + len(pair) + 4 <= width:
                    groups[-1] += f"; {pair}"
                else:
                    groups.append(pair)
        for group in groups:
            lines += _wrap(group, width, indent="  ")
    return lines


def _longest(cell: str) -> int:
    return max((len(line) for line in cell.splitlines()), default=0)
