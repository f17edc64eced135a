"""Datasets that ship inside installed packages, so tutorials, tests and benchmarks never download.

- :class:`DigitsDataModule`: scikit-learn's 8x8 handwritten digits (1,797 images, 10 classes).
- :class:`CharLMDataModule`: character-level language modelling over Python's own reference manual
  (``pydoc_data.topics``, ~465k characters, part of the standard library).
"""

from lightning_recipes.data.char_lm import CharLMDataModule
from lightning_recipes.data.digits import DigitsDataModule

__all__ = ["CharLMDataModule", "DigitsDataModule"]
