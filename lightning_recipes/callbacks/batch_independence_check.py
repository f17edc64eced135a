"""Moved to :mod:`lightning_recipes.checks.batch_independence_check`; this old path re-exports it.

Example:
    >>> from lightning_recipes.callbacks.batch_independence_check import BatchIndependenceCheck
    >>> BatchIndependenceCheck.__module__
    'lightning_recipes.checks.batch_independence_check'
"""

from lightning_recipes.checks.batch_independence_check import BatchIndependenceCheck

__all__ = ["BatchIndependenceCheck"]
