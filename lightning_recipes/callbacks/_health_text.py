"""HealthMonitor's findings and how they read, in a terminal and in a log: the :class:`Finding` record, its
one-line :meth:`Finding.summary`, the evidence as short ``name value`` lines, and the report table.

Numbers are shown to 3 significant digits (counts, steps and epochs whole); a dict of per-layer numbers shows
its 3 largest values and how many more there are; nothing is cut mid-word (long text wraps).

Example:
    >>> finding = Finding(
    ...     "dead_units", 20, 1, {"dead_fraction": {"fc1": 0.96875, "fc2": 0.5}}, "Lower the learning rate."
    ... )
    >>> import textwrap
    >>> print(textwrap.fill(str(finding), 100))
    dead_units at step 20 (epoch 1): units that never activate (never a positive output, no gradient);
    dead fraction fc1 0.969, fc2 0.5. Lower the learning rate.
    >>> evidence_lines({"gl": 8.0, "update_ratio": {"a": 0.5, "b": 0.02, "c": 0.3, "d": 0.1}, "epoch": 2})
    ['gl 8', 'update ratio a 0.5, c 0.3, d 0.1 (+1 more)', 'epoch 2']
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from lightning_recipes._console import escape as _escape
from lightning_recipes._console import new_table, print_rich

__all__ = ["PROBLEM_WORDS", "Finding", "evidence_lines", "findings_table", "format_value"]

#: Each problem in words: what is wrong, for a reader who does not know the monitor's names.
PROBLEM_WORDS = {
    "exploding_gradients": "the gradient norm jumped far above its earlier level",
    "vanishing_gradients": "the first layers barely learn: their updates are orders of magnitude smaller",
    "dead_units": "units that never activate (never a positive output, no gradient)",
    "saturated_activations": "tanh/sigmoid units stuck at their limits (their gradient is near zero)",
    "lr_too_high": "the learning rate is too high: large updates, and the loss does not fall or units die",
    "lr_too_low": "the learning rate is too low: the updates are tiny and the loss barely moves",
    "loss_plateau": "the training loss stopped improving",
    "overfitting": "the validation loss rises while the training loss falls",
    "data_stall": "the training loop spends most of its time waiting for data",
    "nonfinite_activations": "a layer produced NaN or inf outputs",
    "not_learning": "the loss sits where it started (the level of knowing nothing) and nothing moves it",
}

_TOP = 3  # entries shown of a dict or a list
_SUMMARY_ITEMS = 3  # evidence entries in a summary
_WHOLE = ("step", "epoch", "checks", "count", "batches", "nonfinite_losses")


@dataclass
class Finding:
    """One problem the monitor found.

    ``str(finding)`` is :meth:`summary`.

    Attributes:
        problem: One of :data:`HealthMonitor.PROBLEMS`.
        step: ``trainer.global_step`` at the check that found it.
        epoch: ``trainer.current_epoch`` then.
        evidence: The numbers that triggered it (per layer where relevant).
        advice: What to change, concretely.
    """

    problem: str
    step: int
    epoch: int
    evidence: dict[str, Any] = field(default_factory=dict)
    advice: str = ""

    def summary(self) -> str:
        """One or two sentences: the problem, when, the key numbers (the first 3 evidence entries, 2 per
        dict), and the advice."""
        words = PROBLEM_WORDS.get(self.problem, self.problem.replace("_", " "))
        numbers = [_line(k, v, top=2) for k, v in list(self.evidence.items())[:_SUMMARY_ITEMS]]
        text = f"{self.problem} at step {self.step} (epoch {self.epoch}): {words}"
        if numbers:
            text += "; " + "; ".join(numbers)
        text += "."
        if self.advice:
            text += " " + self.advice.strip()
        return text

    def __str__(self) -> str:
        return self.summary()


def format_value(value: Any, key: str = "", top: int = _TOP) -> str:
    """``value`` short: a float to 3 significant digits, a whole count as is, a dict of numbers as its ``top``
    largest ``name value`` pairs (``+N more``), a list as its first ``top`` items (``+N more``)."""
    if isinstance(value, bool) or value is None:
        return str(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isfinite(value) and value.is_integer() and (abs(value) < 1e6 or _whole(key)):
            return str(int(value))
        return f"{value:.3g}"
    if isinstance(value, Mapping):
        items = list(value.items())
        if all(isinstance(v, (int, float)) and not isinstance(v, bool) for _, v in items):
            items.sort(key=lambda kv: -abs(kv[1]) if math.isfinite(kv[1]) else -math.inf)
        shown = ", ".join(f"{k} {format_value(v, str(k), top)}" for k, v in items[:top])
        return shown + _more(len(items) - top)
    if isinstance(value, Sequence) and not isinstance(value, str):
        shown = ", ".join(format_value(v, key, top) for v in value[:top])
        return f"[{shown}{_more(len(value) - top)}]"
    return str(value)


def evidence_lines(evidence: Mapping[str, Any], top: int = _TOP) -> list[str]:
    """The evidence as short ``name value`` lines (underscores in names read as spaces)."""
    return [_line(key, value, top) for key, value in evidence.items()]


def findings_table(findings: Sequence[Finding], checks: int, print_table: bool = True) -> Any:
    """A ``rich`` table of ``findings`` (plain text without rich): problem (and what it means), when (step,
    epoch), the evidence as ``name value`` lines, the advice; it fits the terminal's width (text wraps between
    words; only a word wider than its column is folded). Printed by default, and then not returned
    (``None``: a notebook cell ending in ``monitor.report()`` shows it once); ``print_table=False``
    returns it."""
    title = f"HealthMonitor: {len(findings)} finding(s) in {checks} check(s)"
    table = new_table(title, show_lines=True)
    table.add_column("problem", overflow="fold", ratio=2, min_width=12)
    table.add_column("when", no_wrap=True)
    table.add_column("evidence", overflow="fold", ratio=3, min_width=14)
    table.add_column("advice", overflow="fold", ratio=3, min_width=14)
    for f in findings:
        words = PROBLEM_WORDS.get(f.problem, "")
        problem = f"[bold]{_escape(f.problem)}[/bold]" + (f"\n{words}" if words else "")
        evidence = "\n".join(evidence_lines(f.evidence))
        when = f"step {f.step}\nepoch {f.epoch}"
        table.add_row(problem, when, _escape(evidence), _escape(f.advice))
    if print_table:
        print_rich(table)
        return None
    return table


def _line(key: str, value: Any, top: int) -> str:
    return f"{key.replace('_', ' ')} {format_value(value, key, top)}"


def _more(extra: int) -> str:
    return f" (+{extra} more)" if extra > 0 else ""


def _whole(key: str) -> bool:
    return any(word in key for word in _WHOLE)
