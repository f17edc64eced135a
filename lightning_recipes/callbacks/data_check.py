"""Moved to :mod:`lightning_recipes.checks.data_check`; this old path re-exports it.

Example:
    >>> from lightning_recipes.callbacks.data_check import DataCheck
    >>> DataCheck.__module__
    'lightning_recipes.checks.data_check'
"""

from lightning_recipes.checks.data_check import DataCheck

__all__ = ["DataCheck"]
