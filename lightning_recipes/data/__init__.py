"""Datasets that ship inside installed packages, never downloaded: :class:`DigitsDataModule` (scikit-learn's
8x8 digits) and :class:`CharLMDataModule` (characters of Python's own reference manual).
"""

from lightning_recipes.data.char_lm import CharLMDataModule
from lightning_recipes.data.digits import DigitsDataModule

__all__ = ["CharLMDataModule", "DigitsDataModule"]
