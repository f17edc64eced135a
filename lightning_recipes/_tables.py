"""A rich table that never cuts a cell: each column at least as wide as its longest word, and on a console
too narrow for that, its rows stacked one paragraph each (``header value; ...``) under the title.

Example:
    >>> import io
    >>> from rich.console import Console
    >>> table = FittingTable(title="sizes")
    >>> for header in ("preset", "parameters", "gradients", "optimizer"):
    ...     table.add_column(header)
    >>> table.add_row("fsdp_full_shard", "12345.67", "12345.67", "24691.34")
    >>> out = io.StringIO()
    >>> Console(width=40, file=out).print(table)
    >>> print("\\n".join(line.rstrip() for line in out.getvalue().splitlines()))
    sizes
    fsdp_full_shard
      parameters 12345.67; gradients
      12345.67; optimizer 24691.34
"""

from __future__ import annotations

import io
import shutil
from typing import Any

from rich.console import Console
from rich.measure import Measurement
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

__all__ = ["FittingTable"]


class FittingTable(Table):
    """A ``rich.table.Table`` whose cells are never cut (``…``): see the module's docstring. ``str()`` is the
    plain text at the terminal's width (``print(table)`` shows it)."""

    def __str__(self) -> str:
        out = io.StringIO()
        width = shutil.get_terminal_size().columns
        Console(file=out, width=width, no_color=True, force_terminal=False).print(self)
        return out.getvalue().rstrip("\n")

    def __rich_console__(self, console: Any, options: Any) -> Any:
        unbounded = options.update_width(1_000_000)
        ranges = [
            [Measurement.get(console, unbounded, cell) for cell in (column.header, *column.cells)]
            for column in self.columns
        ]
        least = [max(m.minimum for m in cells) for cells in ranges]  # the longest word: a whole number
        most = [max(m.maximum for m in cells) for cells in ranges]
        spare = options.max_width - (Measurement.get(console, unbounded, self).minimum - sum(least))
        spare -= sum(least)
        if spare >= 0:
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
            return
        if self.title:
            yield Text(str(self.title))
        headers = [str(column.header) for column in self.columns]
        for cells in zip(*(column.cells for column in self.columns)):
            texts = [str(cell) for cell in cells]
            yield Text(texts[0], style="bold")
            pairs = (f"{h} {c}" for h, c in zip(headers[1:], texts[1:]) if c.strip() not in ("", "-"))
            yield Padding(Text("; ".join(pairs)), (0, 0, 0, 2))
        if self.caption:
            yield Text(str(self.caption))
