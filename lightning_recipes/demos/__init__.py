"""The demos behind ``lightning-recipes demo``: runnable end-to-end examples on scikit-learn's digits.

- :mod:`~lightning_recipes.demos.training`: ``lightning-recipes demo``, every recipe switched on in one run;
- :mod:`~lightning_recipes.demos.finetuning`: ``lightning-recipes demo --finetune``, layer-wise LR decay +
  freeze-then-unfreeze against plain fine-tuning and training from scratch;
- :mod:`~lightning_recipes.demos.model`: ``RecipeDigitsCNN``, the model both train.

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
