"""HealthMonitor's findings and how they read: the :class:`Finding` record and the report table.

Example:
    >>> finding = Finding("data_stall", 40, 1, evidence={"wait_fraction": 0.8}, advice="More workers.")
    >>> finding.problem, finding.step
    ('data_stall', 40)
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from lightning_recipes._jsonable import jsonable

__all__ = ["Finding", "findings_table"]


@dataclass
class Finding:
    """One problem the monitor found.

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


def findings_table(findings: list[Finding], checks: int, print_table: bool = True) -> Any:
    """A ``rich`` table of ``findings`` (problem, step, epoch, evidence, advice), printed by default."""
    from rich.console import Console
    from rich.table import Table

    title = f"HealthMonitor: {len(findings)} finding(s) in {checks} check(s)"
    table = Table(title=title, show_lines=True)
    for column in ("problem", "step", "epoch", "evidence", "advice"):
        table.add_column(column, overflow="fold")
    for f in findings:
        evidence = json.dumps(jsonable(f.evidence, nonfinite_as_str=True), default=str)
        table.add_row(f.problem, str(f.step), str(f.epoch), evidence[:300], f.advice)
    if print_table:
        Console().print(table)
    return table
