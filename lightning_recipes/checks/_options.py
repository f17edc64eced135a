"""How a preflight runs (keys, seed, threads, budgets, output): one record, validated once."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from lightning_recipes._validation import check_bool, check_int, check_positive
from lightning_recipes.checks._budget import DEFAULT_TIME_BUDGET
from lightning_recipes.harness.batches import Key, check_key
from lightning_recipes.harness.run_length import check_run_length

#: What a failed check does when checks run inside ``trainer.fit``.
ON_FAIL = ("raise", "warn")
#: The default safety cap on a whole preflight, in seconds (the checks' fixed work takes <= 30 s on the
#: galleries on a 2-core CPU; the cap is for models and machines far outside that).
DEFAULT_TOTAL_TIME_BUDGET = 120.0

TimeBudget = float | None | Literal["default"]


def check_time_budget(name: str, value: Any, *, allow_default: bool = False) -> None:
    """A budget is a positive number of seconds, ``None`` (unlimited) or, for a check, ``"default"``."""
    if value is None or (allow_default and value == "default"):
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        allowed = "a positive number of seconds, None (unlimited)"
        allowed += ' or "default"' if allow_default else ""
        raise ValueError(f"`{name}` must be {allowed}, got {value!r}.")
    check_positive(name, value)


@dataclass(frozen=True)
class PreflightOptions:
    """One preflight run's options (the guide's *Options* table), validated at construction."""

    input_key: Key = None
    target_key: Key = None
    num_classes: int | None = None
    seed: int = 0
    num_threads: int | None = 1
    time_budget: float | None = DEFAULT_TIME_BUDGET
    total_time_budget: float | None = DEFAULT_TOTAL_TIME_BUDGET
    progress: bool = True
    print_report: bool = False
    verbose: bool = False
    max_epochs: int | None = None
    max_steps: int | None = None

    def __post_init__(self) -> None:
        check_time_budget("time_budget", self.time_budget)
        check_bool("progress", self.progress)
        check_int("num_classes", self.num_classes, minimum=2, optional=True)
        check_int("seed", self.seed)
        check_int("num_threads", self.num_threads, minimum=1, optional=True)
        check_key("input_key", self.input_key)
        check_key("target_key", self.target_key)
        check_time_budget("total_time_budget", self.total_time_budget)
        check_bool("print_report", self.print_report)
        check_bool("verbose", self.verbose)
        check_run_length(self.max_epochs, self.max_steps)

    def harness(self, **more: Any) -> dict[str, Any]:
        """The keyword options of a :class:`~lightning_recipes.harness.Harness` among these, and ``more``."""
        names = ("input_key", "target_key", "num_classes", "seed", "max_epochs", "max_steps")
        return {**{name: getattr(self, name) for name in names}, **more}
