"""Moved to :mod:`lightning_recipes.checks.grad_flow_check`; this old path re-exports it.

Example:
    >>> from lightning_recipes.callbacks.grad_flow_check import GradFlowCheck
    >>> GradFlowCheck.__module__
    'lightning_recipes.checks.grad_flow_check'
"""

from lightning_recipes.checks.grad_flow_check import GradFlowCheck

__all__ = ["GradFlowCheck"]
