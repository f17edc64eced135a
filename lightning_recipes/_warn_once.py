"""One warning per distinct message per process, on rank zero: for set-up facts (tied weights, a degenerate
layer decay) that every optimizer build would otherwise repeat (``lr="find"`` builds the groups twice).

Example:
    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     warn_once("doctest: said once")
    ...     warn_once("doctest: said once")
    >>> len(caught)
    1
"""

from __future__ import annotations

from lightning.pytorch.utilities import rank_zero_warn

__all__ = ["warn_once"]

_SAID: set[str] = set()


def warn_once(message: str) -> None:
    """``rank_zero_warn(message)`` the first time this process sees ``message``; nothing after."""
    if message in _SAID:
        return
    _SAID.add(message)
    rank_zero_warn(message)
