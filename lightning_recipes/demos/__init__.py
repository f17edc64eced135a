"""The demos behind ``lightning-recipes demo`` on scikit-learn's digits: every recipe in one run
(:mod:`~lightning_recipes.demos.training`) and fine-tuning (:mod:`~lightning_recipes.demos.finetuning`).

Example:
    >>> from lightning_recipes.demos import RecipeDigitsCNN, run_demo, run_finetune_demo
    >>> RecipeDigitsCNN(num_classes=5).head.out_features
    5
"""

from lightning_recipes.demos.finetuning import VARIANTS, format_table, run_finetune_demo, split_digits
from lightning_recipes.demos.model import RecipeDigitsCNN
from lightning_recipes.demos.training import DEMO_SETTINGS, main, run_demo

__all__ = [
    "DEMO_SETTINGS",
    "VARIANTS",
    "RecipeDigitsCNN",
    "format_table",
    "main",
    "run_demo",
    "run_finetune_demo",
    "split_digits",
]
