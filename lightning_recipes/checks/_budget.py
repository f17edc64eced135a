"""A safety cap per check (:func:`time_budget`) on the checking thread's CPU time (rules: the guide)."""

from __future__ import annotations

import threading
import time
from collections.abc import Generator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import torch
from torch import nn
from torch.nn.modules.module import register_module_forward_pre_hook

from lightning_recipes._names import DEFAULT_TIME_BUDGET as DEFAULT_TIME_BUDGET

WALL_FACTOR = 4.0  # the wall-clock backstop, in multiples of the CPU-time cap

#: The innermost budget: (CPU-time deadline, (CPU-time, wall-clock) hard deadlines, seconds), or ``None``s.
_Open = tuple[float | None, tuple[float, float] | None, float | None]
_OPEN: ContextVar[_Open] = ContextVar("lightning_recipes_check_budget", default=(None, None, None))
_HOOK_LOCK = threading.Lock()
_HOOK: dict[str, Any] = {"users": 0, "handle": None}  # the global pre-hook, shared by every open budget


class BudgetExceeded(BaseException):
    """Raised from a forward past the hard deadline; a ``BaseException``: ``except Exception`` misses it."""


def hard_limit(seconds: float) -> float:
    """Seconds after which a check that ignores its ``seconds`` budget is stopped: ``B + max(2, B / 2)``."""
    return seconds + max(2.0, seconds / 2)


@contextmanager
def time_budget(seconds: float | None, model: nn.Module | None = None) -> Generator[None, None, None]:
    """:func:`out_of_time` after ``seconds`` (``None``: never); forwards raise past :func:`hard_limit`."""
    now = time.thread_time()
    deadline = None if seconds is None else now + seconds
    cap = None if seconds is None else hard_limit(seconds)
    hard = None if cap is None else (now + cap, time.perf_counter() + WALL_FACTOR * cap)
    local = hard is not None and model is not None and holds_compiled_module(model)
    handles = []
    if local and model is not None:
        handles = [m.register_forward_pre_hook(_stop_when_past_hard_deadline) for m in model.modules()]
    elif hard is not None:
        _hook_users(+1)
    token = _OPEN.set((deadline, hard, seconds))
    try:
        yield
    finally:
        _OPEN.reset(token)
        for handle in handles:
            handle.remove()
        if hard is not None and not local:
            _hook_users(-1)


def holds_compiled_module(model: nn.Module) -> bool:
    """Whether ``model`` or a submodule is compiled (``torch.compile(module)`` or ``module.compile()``)."""
    from torch._dynamo.eval_frame import OptimizedModule

    return any(
        isinstance(m, OptimizedModule) or getattr(m, "_compiled_call_impl", None) is not None
        for m in model.modules()
    )


def out_of_time() -> bool:
    """Whether the innermost budget is spent."""
    deadline = _OPEN.get()[0]
    return deadline is not None and time.thread_time() >= deadline


def budget_seconds() -> float | None:
    """The innermost budget's length in seconds (for messages), or ``None``."""
    return _OPEN.get()[2]


def _stop_when_past_hard_deadline(module: nn.Module, args: Any) -> None:
    if torch.compiler.is_compiling():  # traced into a compiled graph: a no-op there, not a graph break
        return
    _, hard, seconds = _OPEN.get()
    if hard is not None and (time.thread_time() > hard[0] or time.perf_counter() > hard[1]):
        where = f"in {type(module).__name__}.forward"
        raise BudgetExceeded(f"past the hard limit of its {seconds} s time budget ({where})")


def _hook_users(change: int) -> None:
    """Count open budgets; register the global forward pre-hook for the first, remove it after the last."""
    with _HOOK_LOCK:
        _HOOK["users"] += change
        if _HOOK["users"] > 0 and _HOOK["handle"] is None:
            _HOOK["handle"] = register_module_forward_pre_hook(_stop_when_past_hard_deadline)
        elif _HOOK["users"] == 0 and _HOOK["handle"] is not None:
            _HOOK["handle"].remove()
            _HOOK["handle"] = None
