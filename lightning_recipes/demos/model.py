"""``RecipeDigitsCNN``: the demos' model, the digits CNN with its optimizer written by a recipe.

Both demos (:mod:`~lightning_recipes.demos.training`, :mod:`~lightning_recipes.demos.finetuning`) and the
notebooks train it.
"""

from __future__ import annotations

from lightning_recipes.mixins import OptimizerRecipeMixin
from lightning_recipes.testing.digits_cnn import DigitsCNN

__all__ = ["RecipeDigitsCNN"]


class RecipeDigitsCNN(OptimizerRecipeMixin, DigitsCNN):
    """:class:`DigitsCNN` with its ``configure_optimizers`` supplied by the recipe mixin — the one-line change
    a user makes to an existing module.

    Example:
        >>> from lightning_recipes.recipe import OptimizerRecipe
        >>> model = RecipeDigitsCNN()
        >>> model.recipe = OptimizerRecipe(optimizer="lion")
        >>> model.resolve_recipe()["optimizer"]
        'lion'
    """
