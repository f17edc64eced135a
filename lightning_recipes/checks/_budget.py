"""A wall-clock budget per check, so a preflight never runs on for minutes without saying so.

``SanityCheck.run`` opens :func:`time_budget` around each check; a check with a loop (training steps, probes)
asks :func:`out_of_time` between iterations and, when it is out of time, ends with a ``skip`` or ``warn`` that
says the budget stopped it (and how far it got) instead of running on.

Example:
    >>> with time_budget(None):
    ...     out_of_time(), time_left() == float("inf")
    (False, True)
    >>> with time_budget(0.0):
    ...     out_of_time()
    True
"""

from __future__ import annotations

import time
from collections.abc import Generator
from contextlib import contextmanager
from contextvars import ContextVar

__all__ = ["budget_seconds", "out_of_time", "time_budget", "time_left"]

_DEADLINE: ContextVar[float | None] = ContextVar("lightning_recipes_check_deadline", default=None)
_BUDGET: ContextVar[float | None] = ContextVar("lightning_recipes_check_budget", default=None)


@contextmanager
def time_budget(seconds: float | None) -> Generator[None, None, None]:
    """Inside the block, :func:`out_of_time` turns true ``seconds`` after entry (``None``: never)."""
    deadline = None if seconds is None else time.perf_counter() + seconds
    token, budget_token = _DEADLINE.set(deadline), _BUDGET.set(seconds)
    try:
        yield
    finally:
        _DEADLINE.reset(token)
        _BUDGET.reset(budget_token)


def time_left() -> float:
    """Seconds left in the innermost budget (``inf`` outside any budget)."""
    deadline = _DEADLINE.get()
    return float("inf") if deadline is None else deadline - time.perf_counter()


def out_of_time() -> bool:
    """Whether the innermost budget is spent."""
    return time_left() <= 0.0


def budget_seconds() -> float | None:
    """The innermost budget's length in seconds (for messages), or ``None``."""
    return _BUDGET.get()
