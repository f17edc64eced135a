"""Tuning before the long run: the LR range test (:func:`find_lr`, :class:`LRRangeTest`).

Example:
    >>> from lightning_recipes.tune import LRRangeTest, find_lr
"""

from lightning_recipes.tune.lr_range import LRRangeResult, LRRangeTest, find_lr, sweep_lr

__all__ = ["LRRangeResult", "LRRangeTest", "find_lr", "sweep_lr"]
