"""Moved to :mod:`lightning_recipes.checks.init_loss_check`; this old path re-exports it.

Example:
    >>> from lightning_recipes.callbacks.init_loss_check import InitLossCheck
    >>> InitLossCheck.__module__
    'lightning_recipes.checks.init_loss_check'
"""

from lightning_recipes.checks.init_loss_check import InitLossCheck

__all__ = ["InitLossCheck"]
