"""Moved to :mod:`lightning_recipes.checks.overfit_batch_check`; this old path re-exports it.

Example:
    >>> from lightning_recipes.callbacks.overfit_batch_check import OverfitBatchCheck
    >>> OverfitBatchCheck.__module__
    'lightning_recipes.checks.overfit_batch_check'
"""

from lightning_recipes.checks.overfit_batch_check import OverfitBatchCheck

__all__ = ["OverfitBatchCheck"]
