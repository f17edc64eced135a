"""Moved to :mod:`lightning_recipes.checks.input_independence_check`; this old path re-exports it.

Example:
    >>> from lightning_recipes.callbacks.input_independence_check import InputIndependenceCheck
    >>> InputIndependenceCheck.__module__
    'lightning_recipes.checks.input_independence_check'
"""

from lightning_recipes.checks.input_independence_check import InputIndependenceCheck

__all__ = ["InputIndependenceCheck"]
