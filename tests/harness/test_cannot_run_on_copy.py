"""The harness's own exception: raised where a model cannot be tried on a copy, read by each wing its way."""

from __future__ import annotations

import pytest
import torch

from lightning_recipes.checks import CheckSkipped, GradFlowCheck, OverfitBatchCheck, preflight
from lightning_recipes.harness import CannotRunOnCopy, Harness
from lightning_recipes.testing import TinyClassifier, random_classification_loader
from lightning_recipes.tune import find_lr


class _NoLoss(TinyClassifier):
    """A ``training_step`` that logs and returns nothing: no loss to read."""

    def training_step(self, batch, batch_idx):
        super().training_step(batch, batch_idx)


class _Manual(TinyClassifier):
    def __init__(self) -> None:
        super().__init__()
        self.automatic_optimization = False


NO_LOSS = "`training_step` returned no loss (None, or a dict without 'loss')"
MANUAL = "the module uses manual optimisation (`automatic_optimization = False`)"


def test_the_harness_raises_its_own_exception_not_a_check_skip():
    harness = Harness(_NoLoss(), random_classification_loader())
    model = harness.copy_model()
    with pytest.raises(CannotRunOnCopy, match="returned no loss") as caught:
        harness.training_loss(model, harness.train_batches(1)[0])
    assert not isinstance(caught.value, CheckSkipped)
    with pytest.raises(CannotRunOnCopy, match="manual optimisation"):
        harness.require_automatic_optimization(_Manual())
    with pytest.raises(CannotRunOnCopy, match="no training data"):
        Harness(TinyClassifier()).train_batches(1)


@pytest.mark.parametrize(
    ("model", "check", "message"),
    [(_NoLoss(), GradFlowCheck(), NO_LOSS), (_Manual(), OverfitBatchCheck(max_steps=2), MANUAL)],
    ids=["no-loss", "manual"],
)
def test_a_real_check_reports_the_harness_exception_as_a_skip_with_its_message(model, check, message):
    report = preflight(model, train_dataloaders=random_classification_loader(), checks=[check])
    result = report[check.name]
    assert result.status == "skip", result.message
    assert result.message.startswith(f"skipped: {message}"), result.message


def test_find_lr_turns_the_harness_exception_into_a_value_error():
    with pytest.raises(ValueError, match="find_lr cannot sweep _NoLoss: `training_step` returned no loss"):
        find_lr(_NoLoss(), train_dataloaders=random_classification_loader(), num_steps=10)


def test_a_copy_that_fails_says_why():
    model = TinyClassifier()
    model.lock = torch.Generator().manual_seed(0)  # deep-copies fine
    model.unpicklable = (x for x in ())  # a generator cannot be deep-copied
    with pytest.raises(CannotRunOnCopy, match="could not deep-copy the model"):
        Harness(model, random_classification_loader()).copy_model()
