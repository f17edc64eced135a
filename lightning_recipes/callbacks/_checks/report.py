"""The preflight report: every check's result, a rich table, JSON, and ``raise_for_failures``."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from typing import Any

from lightning_recipes.callbacks._checks.base import CheckResult, PreflightError

__all__ = ["PreflightReport"]

_STYLE = {"pass": "green", "warn": "yellow", "fail": "bold red", "skip": "dim"}


class PreflightReport:
    """The results of a preflight run, in the order the checks ran.

    ``ok`` is ``True`` when no check failed (warnings and skips do not fail a report). Index by check name
    (``report["init_loss"]``); print it for a table (rich renders colours in a terminal); ``to_dict()`` /
    ``to_json()`` for machines; ``raise_for_failures()`` to stop a script.

    Args:
        results: One :class:`CheckResult` per check.
        seconds: Wall time of the whole run.

    Raises:
        PreflightError: From :meth:`raise_for_failures` when a check failed.

    Example:
        >>> report = PreflightReport([CheckResult("init_loss", "pass", "ok"), CheckResult("data", "warn", "hm")])
        >>> report.ok, report["data"].status, [r.name for r in report]
        (True, 'warn', ['init_loss', 'data'])
        >>> report.raise_for_failures()
        >>> report.to_dict()["counts"]
        {'pass': 1, 'warn': 1, 'fail': 0, 'skip': 0}
    """

    def __init__(self, results: list[CheckResult], seconds: float = 0.0) -> None:
        self.results = list(results)
        self.seconds = seconds

    @property
    def ok(self) -> bool:
        return not self.failures

    @property
    def failures(self) -> list[CheckResult]:
        return [r for r in self.results if r.status == "fail"]

    @property
    def warnings(self) -> list[CheckResult]:
        return [r for r in self.results if r.status == "warn"]

    def __getitem__(self, name: str | int) -> CheckResult:
        if isinstance(name, int):
            return self.results[name]
        for result in self.results:
            if result.name == name:
                return result
        raise KeyError(f"no check named {name!r} in this report; it has {[r.name for r in self.results]}.")

    def __contains__(self, name: object) -> bool:
        return any(r.name == name for r in self.results)

    def __iter__(self) -> Iterator[CheckResult]:
        return iter(self.results)

    def __len__(self) -> int:
        return len(self.results)

    def counts(self) -> dict[str, int]:
        counts = {"pass": 0, "warn": 0, "fail": 0, "skip": 0}
        for result in self.results:
            counts[result.status] += 1
        return counts

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "seconds": round(self.seconds, 3),
            "counts": self.counts(),
            "results": [r.to_dict() for r in self.results],
        }

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PreflightReport:
        return cls(
            [CheckResult.from_dict(r) for r in data.get("results", [])], float(data.get("seconds", 0.0))
        )

    def raise_for_failures(self) -> None:
        """Raise :class:`PreflightError` listing every failed check; do nothing when :attr:`ok`."""
        if self.failures:
            raise PreflightError(self.failures)

    def __rich__(self) -> Any:
        from rich.table import Table

        counts = self.counts()
        verdict = "[green]OK[/]" if self.ok else "[bold red]FAILED[/]"
        table = Table(
            title=f"Preflight {verdict}: {counts['pass']} pass, {counts['warn']} warn, {counts['fail']} fail, "
            f"{counts['skip']} skip ({self.seconds:.1f} s)",
            show_lines=True,
            expand=False,
        )
        table.add_column("check", no_wrap=True)
        table.add_column("status", no_wrap=True)
        table.add_column("time", justify="right", no_wrap=True)
        table.add_column("message")
        for result in self.results:
            style = _STYLE[result.status]
            table.add_row(
                result.name, f"[{style}]{result.status.upper()}[/]", f"{result.seconds:.1f}s", result.message
            )
        return table

    def __str__(self) -> str:
        from rich.console import Console

        buffer = io.StringIO()
        Console(file=buffer, width=120, force_terminal=False, color_system=None).print(self)
        return buffer.getvalue().rstrip("\n")

    def __repr__(self) -> str:
        counts = ", ".join(f"{k}={v}" for k, v in self.counts().items())
        return f"PreflightReport(ok={self.ok}, {counts})"
