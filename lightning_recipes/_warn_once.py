"""One warning per distinct message per process, on rank zero."""

from __future__ import annotations

from collections.abc import Callable

from lightning.pytorch.utilities import rank_zero_warn

__all__ = ["say_once", "warn_once"]

_SAID: set[str] = set()


def say_once(say: Callable[[str], object], message: str) -> None:
    """``say(message)`` (``rank_zero_info``, ``rank_zero_warn``) the first time this process sees it."""
    if message not in _SAID:
        _SAID.add(message)
        say(message)


def warn_once(message: str) -> None:
    """``rank_zero_warn(message)`` the first time this process sees ``message``; nothing after."""
    say_once(rank_zero_warn, message)
