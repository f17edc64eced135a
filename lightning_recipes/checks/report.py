"""What a check run produces: :class:`CheckResult`, :class:`PreflightReport` and the exceptions."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

from lightning_recipes._console import has_rich, print_rich, render, strip_markup
from lightning_recipes._jsonable import jsonable
from lightning_recipes._report_text import ALWAYS_COUNTED, compact_lines, renderable, table, title

__all__ = [
    "GUIDE",
    "JUDGED",
    "STATUSES",
    "SUMMARY_LIMIT",
    "CheckInconclusive",
    "CheckResult",
    "CheckSkipped",
    "PreflightError",
    "PreflightReport",
    "Status",
]


Status = Literal["pass", "warn", "fail", "inconclusive", "skip", "error"]
STATUSES: tuple[str, ...] = ("pass", "warn", "fail", "inconclusive", "skip", "error")
#: The statuses that are a verdict on the model; ``inconclusive``, ``skip`` and ``error`` are not.
JUDGED: tuple[str, ...] = ("pass", "warn", "fail")


class CheckSkipped(Exception):
    """Raised inside a check that cannot run on this model or data; the message says why and what to pass."""


class CheckInconclusive(Exception):
    """Raised inside a check that ran but cannot judge (so ``inconclusive``); the message says why."""


#: Where each check's long explanation lives: the preflight guide, one section per check (``#<name>``).
GUIDE = "docs/guides/preflight.md"
#: The longest summary a built-in check writes (characters): one sentence with its numbers.
SUMMARY_LIMIT = 120


@dataclass
class CheckResult:
    """The outcome of one check: a one-sentence summary with the numbers, the evidence as fields, one action.

    Attributes:
        name: The check's short name (``"init_loss"``, ``"grad_flow"``, ...).
        status: One of :data:`STATUSES` (the guide's *Verdicts* table says what each one means).
        summary: One sentence, with the numbers (built-in checks keep it to :data:`SUMMARY_LIMIT` characters).
        details: The evidence: JSON-serialisable fields (measured/expected values, noise, names).
        seconds: Wall time the check took.
        action: What to do, one sentence (``""`` when there is nothing to do).

    Example:
        >>> r = CheckResult("init_loss", "fail", "loss 4.1 at init, expected ln 10 = 2.30 ± 0.05",
        ...                 {"measured": 4.1, "expected": 2.30}, action="Zero the last layer's bias.")
        >>> r.failed, r.message
        (True, "loss 4.1 at init, expected ln 10 = 2.30 ± 0.05. Zero the last layer's bias.")
        >>> r.guide
        'docs/guides/preflight.md#init_loss'
    """

    name: str
    status: Status
    summary: str
    details: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0
    action: str = ""

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"`status` must be one of {STATUSES}, got {self.status!r}.")

    @property
    def message(self) -> str:
        """The summary, then the action (one line of text)."""
        if not self.action:
            return self.summary
        summary = self.summary.rstrip()
        return f"{summary}{'' if summary.endswith(('.', '!', '?')) else '.'} {self.action}"

    @property
    def guide(self) -> str:
        """The guide section that explains this check at length."""
        return f"{GUIDE}#{self.name}"

    @property
    def failed(self) -> bool:
        return self.status == "fail"

    @property
    def judged(self) -> bool:
        """Whether this result is a verdict on the model (``pass``, ``warn`` or ``fail``)."""
        return self.status in JUDGED

    def to_dict(self) -> dict[str, Any]:
        keys = ("name", "status", "summary", "action", "message", "guide")
        details = jsonable(self.details, nonfinite_as_str=True, max_tensor_elements=None, fallback=str)
        return {**{k: getattr(self, k) for k in keys}, "details": details, "seconds": round(self.seconds, 4)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CheckResult:
        """The result :meth:`to_dict` wrote (also one written before results had a summary and an action)."""
        return cls(
            name=str(data.get("name", "?")),
            status=data.get("status", "skip"),
            summary=str(data.get("summary", data.get("message", ""))),
            details=dict(data.get("details", {})),
            seconds=float(data.get("seconds", 0.0)),
            action=str(data.get("action", "")),
        )


class PreflightError(RuntimeError):
    """Raised when a sanity check fails and ``on_fail="raise"``; ``.results`` holds the failing results.

    Example:
        >>> error = PreflightError([CheckResult("grad_flow", "fail", "2 parameters get no gradient")])
        >>> print(error)
        1 preflight check(s) failed:
        - grad_flow: 2 parameters get no gradient
    """

    def __init__(self, results: list[CheckResult], note: str = "") -> None:
        self.results = results
        lines = [f"{len(results)} preflight check(s) failed:" if results else "a preflight check failed:"]
        lines += [f"- {r.name}: {r.message}" for r in results] + ([note] if note else [])
        super().__init__("\n".join(lines))


class PreflightReport:
    """The results of a preflight run, in the order the checks ran; index by name, print, ``to_dict()``.

    Args:
        results: One :class:`CheckResult` per check.
        seconds: Wall time of the whole run.

    Example:
        >>> results = [CheckResult("init_loss", "pass", "ok"), CheckResult("data", "warn", "hm")]
        >>> report = PreflightReport(results)
        >>> report.ok, report["data"].status, [r.name for r in report]
        (True, 'warn', ['init_loss', 'data'])
        >>> report.raise_for_failures()
        >>> report.to_dict()["counts"]
        {'pass': 1, 'warn': 1, 'fail': 0, 'inconclusive': 0, 'skip': 0, 'error': 0}
    """

    def __init__(self, results: list[CheckResult], seconds: float = 0.0) -> None:
        self.results = list(results)
        self.seconds = seconds

    @property
    def ok(self) -> bool:
        return self.not_ok_reason is None

    @property
    def not_ok_reason(self) -> str | None:
        """Why :attr:`ok` is ``False`` (``None`` when it is ``True``).

        Example:
            >>> PreflightReport([CheckResult("data", "skip", "no loader")]).not_ok_reason
            'no check could judge the model (1 skip): nothing was verified'
        """
        for listed, what in ((self.failures, "failed"), (self.errors, "raised an error")):
            if listed:
                return f"{len(listed)} check(s) {what}: {', '.join(r.name for r in listed)}"
        if not any(r.judged for r in self.results):
            counts = ", ".join(f"{n} {s}" for s, n in self.counts().items() if n)
            return f"no check could judge the model ({counts or 'no checks'}): nothing was verified"
        return None

    @property
    def errors(self) -> list[CheckResult]:
        return [r for r in self.results if r.status == "error"]

    @property
    def slowest(self) -> CheckResult | None:
        """The check that took longest (``None`` for an empty report)."""
        return max(self.results, key=lambda r: r.seconds, default=None)

    @property
    def failures(self) -> list[CheckResult]:
        return [r for r in self.results if r.status == "fail"]

    @property
    def warnings(self) -> list[CheckResult]:
        return [r for r in self.results if r.status == "warn"]

    def __getitem__(self, name: str | int) -> CheckResult:
        if isinstance(name, int):
            return self.results[name]
        if name in self:
            return next(r for r in self.results if r.name == name)
        raise KeyError(f"no check named {name!r} in this report; it has {[r.name for r in self.results]}.")

    def __contains__(self, name: object) -> bool:
        return any(r.name == name for r in self.results)

    def __iter__(self) -> Iterator[CheckResult]:
        return iter(self.results)

    def __len__(self) -> int:
        return len(self.results)

    def counts(self) -> dict[str, int]:
        return {status: sum(r.status == status for r in self.results) for status in STATUSES}

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "not_ok_reason": self.not_ok_reason,
            "seconds": round(self.seconds, 3),
            "slowest": None if self.slowest is None else self.slowest.name,
            "counts": self.counts(),
            "results": [r.to_dict() for r in self.results],
        }

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PreflightReport:
        results = [CheckResult.from_dict(r) for r in data.get("results", [])]
        return cls(results, float(data.get("seconds", 0.0)))

    def raise_for_failures(self) -> None:
        """Raise :class:`PreflightError` unless :attr:`ok`: the failed and errored checks, else the reason."""
        if (reason := self.not_ok_reason) is not None:
            listed = self.failures + self.errors
            raise PreflightError(listed, "" if listed else f"the preflight is not ok: {reason}.")

    def render(self, verbose: bool = False, width: int | None = None) -> str:
        """The report as plain text ``width`` columns wide: one line per check (``verbose``: every message).

        Example:
            >>> passed = CheckResult("init_loss", "pass", "loss 2.30 = ln 10. As expected at init.")
            >>> print(PreflightReport([passed], seconds=0.1).render(width=60))
            Preflight OK: 1 pass, 0 warn, 0 fail, 0 skip (0.1 s)
            PASS init_loss loss 2.30 = ln 10.
        """
        width = width if width is not None else shutil.get_terminal_size().columns
        if has_rich() or verbose:
            text = render(renderable(self, verbose) if has_rich() else table(self), width=width)
        else:
            lines = [title(self, slowest=False), *compact_lines(self.results, width)]
            text = "\n".join(map(strip_markup, lines))
        return "\n".join(line.rstrip() for line in text.rstrip("\n").splitlines())

    def print(self, verbose: bool = False, console: Any = None) -> None:
        """Print the report with rich on ``console`` (default: stdout's), compact unless ``verbose``."""
        if console is None and not has_rich():
            print(self.render(verbose))
        else:
            (print_rich if console is None else console.print)(renderable(self, verbose))

    def __rich__(self) -> Any:
        return renderable(self, verbose=False)

    def __str__(self) -> str:
        return self.render()

    def __repr__(self) -> str:
        counts = ", ".join(f"{k}={v}" for k, v in self.counts().items() if v or k in ALWAYS_COUNTED)
        return f"PreflightReport(ok={self.ok}, {counts})"
