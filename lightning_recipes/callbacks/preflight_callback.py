"""Moved to :mod:`lightning_recipes.checks.preflight`; this old path re-exports ``Preflight``.

Example:
    >>> from lightning_recipes.callbacks.preflight_callback import Preflight
    >>> Preflight.__module__
    'lightning_recipes.checks.preflight'
"""

from lightning_recipes.checks.preflight import Preflight

__all__ = ["Preflight"]
