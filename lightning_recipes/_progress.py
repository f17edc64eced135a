"""One transient progress line for long work, drawn with rich on a terminal's stderr, on rank zero; erased
when the work ends. No rich or no terminal: nothing drawn."""

from __future__ import annotations

from types import TracebackType
from typing import TYPE_CHECKING

from lightning_recipes._console import has_rich

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress, TaskID

__all__ = ["ProgressLine"]


class ProgressLine:
    """A context manager showing ``description [done/total] label`` on one line updated in place
    (``total=None``: a spinner; ``enabled=False``: nothing) on ``console`` (default stderr).

    Example:
        >>> import io
        >>> from rich.console import Console
        >>> console = Console(file=io.StringIO(), force_terminal=True, width=60)
        >>> with ProgressLine("demo", total=2, console=console) as line:
        ...     line.advance("first")
        ...     line.advance("second")
        >>> line.completed, "demo" in console.file.getvalue()
        (2, True)
    """

    def __init__(
        self, description: str, total: int | None, *, enabled: bool = True, console: Console | None = None
    ) -> None:
        self.description = description
        self.total = total
        self.completed = 0
        self._progress: Progress | None = None
        self._task: TaskID | None = None
        if not enabled or not _rank_zero() or not has_rich():
            return
        from rich.console import Console

        console = console if console is not None else Console(stderr=True)
        if not console.is_terminal:
            return
        from rich import progress as rp

        columns = [rp.SpinnerColumn(), rp.TextColumn("{task.description}")]
        if total is not None:
            columns += [rp.BarColumn(bar_width=20), rp.MofNCompleteColumn()]
        columns += [rp.TimeElapsedColumn(), rp.TextColumn("[dim]{task.fields[label]}")]
        self._progress = rp.Progress(*columns, console=console, transient=True)

    def __enter__(self) -> ProgressLine:
        if self._progress is not None:
            from rich.errors import LiveError

            try:
                self._progress.start()
            except LiveError:  # another live display (a rich progress bar) is on: draw nothing
                self._progress = None
                return self
            self._task = self._progress.add_task(self.description, total=self.total, label="")
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._progress is not None:
            self._progress.stop()

    def show(self, label: str) -> None:
        """Show ``label`` (what runs now) without advancing."""
        if self._progress is not None and self._task is not None:
            self._progress.update(self._task, label=label, refresh=True)

    def advance(self, label: str = "", steps: int = 1) -> None:
        """Count ``steps`` more steps done and show ``label``."""
        self.completed += steps
        if self._progress is not None and self._task is not None:
            self._progress.update(self._task, advance=steps, label=label, refresh=True)


def _rank_zero() -> bool:
    from lightning.pytorch.utilities.rank_zero import rank_zero_only

    return getattr(rank_zero_only, "rank", 0) == 0
