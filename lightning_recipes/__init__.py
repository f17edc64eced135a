"""lightning_recipes: training know-how for PyTorch Lightning as parts that drop into a Trainer.

Example:
    >>> import lightning_recipes
    >>> lightning_recipes.__version__
    '0.1.0'
"""

from lightning_recipes.data import CharLMDataModule, DigitsDataModule

__version__ = "0.1.0"

__all__ = ["CharLMDataModule", "DigitsDataModule", "__version__"]
