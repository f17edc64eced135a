"""``RecipeDigitsCNN``: the demos' and notebooks' model, the digits CNN with its optimizer from a recipe."""

from __future__ import annotations

from torch import Tensor
from torch.nn import functional as F
from torchmetrics.classification import MulticlassAccuracy

from lightning_recipes.mixins import OptimizerRecipeMixin
from lightning_recipes.testing.digits_cnn import DigitsCNN

__all__ = ["RecipeDigitsCNN"]


class RecipeDigitsCNN(OptimizerRecipeMixin, DigitsCNN):
    """:class:`DigitsCNN` with ``configure_optimizers`` from the recipe mixin (the one-line change a user
    makes) and ``val_acc`` from torchmetrics' ``MulticlassAccuracy`` (micro, synced by the metric).

    Example:
        >>> from lightning_recipes.recipe import OptimizerRecipe
        >>> model = RecipeDigitsCNN()
        >>> model.recipe = OptimizerRecipe(optimizer="lion")
        >>> model.resolve_recipe()["optimizer"]
        'lion'
        >>> type(model.val_accuracy).__name__, model.val_accuracy.average
        ('MulticlassAccuracy', 'micro')
    """

    def __init__(
        self,
        num_classes: int = 10,
        width: int = 32,
        dropout: float = 0.2,
        lr: float = 3e-3,
        weight_decay: float = 0.05,
    ) -> None:
        super().__init__(
            num_classes=num_classes, width=width, dropout=dropout, lr=lr, weight_decay=weight_decay
        )
        self.val_accuracy = MulticlassAccuracy(num_classes=num_classes, average="micro")

    def validation_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> None:
        x, y = batch
        logits = self(x)
        self.log("val_loss", F.cross_entropy(logits, y), sync_dist=True)
        self.val_accuracy(logits, y)
        self.log("val_acc", self.val_accuracy, prog_bar=True)
