"""Datasets that ship inside installed packages, never downloaded: scikit-learn's 8x8 digits
(:class:`DigitsDataModule`) and Python's reference manual (:class:`CharLMDataModule`)."""

from lightning_recipes.data.char_lm import CharLMDataModule
from lightning_recipes.data.digits import DigitsDataModule

__all__ = ["CharLMDataModule", "DigitsDataModule"]
