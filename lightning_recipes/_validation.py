"""Argument checks shared by every public constructor: one wording (``ValueError: `patience` must be an
integer >= 0, got -1.``); a ``bool`` is never a number."""

from __future__ import annotations

import difflib
import math
from collections.abc import Collection
from typing import Any

__all__ = [
    "check_beta",
    "check_betas",
    "check_bool",
    "check_choice",
    "check_in_range",
    "check_int",
    "check_non_negative",
    "check_positive",
    "did_you_mean",
    "is_number",
]


def did_you_mean(name: str, candidates: Collection[str]) -> str:
    """`` (close matches: 'a', 'b')`` for a misspelt ``name`` among ``candidates``, else ``""``.

    Example:
        >>> did_you_mean("stemm", ["stem", "gru", "head"])
        " (close matches: 'stem')"
    """
    depth = name.count(".")  # a module path: its siblings first ('stem', not 'stem.3', for 'stemm')
    same = [c for c in candidates if c.count(".") == depth]
    close = difflib.get_close_matches(name, same, n=3, cutoff=0.6) or difflib.get_close_matches(
        name, list(candidates), n=3, cutoff=0.6
    )
    return f" (close matches: {', '.join(repr(c) for c in close)})" if close else ""


def is_number(value: Any) -> bool:
    """A finite real number that is not a ``bool``."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def check_positive(name: str, value: Any, *, optional: bool = False) -> None:
    """A finite number > 0 (``optional``: or ``None``)."""
    if optional and value is None:
        return
    if not is_number(value) or value <= 0:
        raise ValueError(f"`{name}` must be a finite number > 0, got {value!r}.")


def check_non_negative(name: str, value: Any) -> None:
    if not is_number(value) or value < 0:
        raise ValueError(f"`{name}` must be a finite number >= 0, got {value!r}.")


def check_in_range(
    name: str,
    value: Any,
    low: float,
    high: float,
    *,
    low_open: bool = False,
    high_open: bool = False,
    optional: bool = False,
) -> None:
    """``value`` in the interval from ``low`` to ``high``; ``*_open`` excludes that end (``optional``: or
    ``None``)."""
    if optional and value is None:
        return
    ok = is_number(value) and (value > low if low_open else value >= low)
    ok = ok and (value < high if high_open else value <= high)
    if not ok:
        interval = f"{'(' if low_open else '['}{low:g}, {high:g}{')' if high_open else ']'}"
        raise ValueError(f"`{name}` must be a number in {interval}, got {value!r}.")


def check_int(name: str, value: Any, *, minimum: int | None = None, optional: bool = False) -> None:
    """An ``int`` (not a ``bool``), at least ``minimum`` when given (``optional``: or ``None``).

    Example:
        >>> check_int("max_steps", None, minimum=1, optional=True)
        >>> check_int("max_steps", 0, minimum=1, optional=True)
        Traceback (most recent call last):
        ...
        ValueError: `max_steps` must be an integer >= 1, got 0.
    """
    if optional and value is None:
        return
    if not isinstance(value, int) or isinstance(value, bool) or (minimum is not None and value < minimum):
        bound = f" >= {minimum}" if minimum is not None else ""
        raise ValueError(f"`{name}` must be an integer{bound}, got {value!r}.")


def check_bool(name: str, value: Any) -> None:
    if not isinstance(value, bool):
        raise TypeError(f"`{name}` must be True or False, got {value!r}.")


def check_choice(name: str, value: Any, allowed: Collection[Any]) -> None:
    if value not in allowed:
        raise ValueError(f"`{name}` must be one of {tuple(allowed)!r}, got {value!r}.")


def check_beta(name: str, value: Any) -> None:
    if not is_number(value) or not 0.0 <= value < 1.0:
        raise ValueError(f"`{name}` must be in [0, 1), got {value!r}.")


def check_betas(betas: Any) -> None:
    if not isinstance(betas, (tuple, list)) or len(betas) != 2:
        raise ValueError(f"`betas` must be a pair (beta1, beta2) with each in [0, 1), got {betas!r}.")
    check_beta("betas[0]", betas[0])
    check_beta("betas[1]", betas[1])
