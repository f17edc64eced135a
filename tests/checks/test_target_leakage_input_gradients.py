"""TargetLeakageCheck abstains from "the target is fed to the model" when the step differentiates with
respect to its input (adversarial training: the input moves along the loss's gradient, which reads the
target); a target added to the input with no input gradient still fails."""

from __future__ import annotations

from typing import Any

import pytest
import torch
import torch.nn.functional as F

from lightning_recipes.checks import preflight
from lightning_recipes.harness import ForwardCapture
from lightning_recipes.testing import TinyClassifier, random_classification_loader

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


class _Adversarial(TinyClassifier):
    """Half clean, half FGSM inputs (eps 0.1): healthy adversarial training."""

    def __init__(self) -> None:
        super().__init__()
        torch.nn.init.normal_(self.head.weight, std=0.5)  # a zero head has no input gradient

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        x, y = batch
        with torch.enable_grad():
            leaf = x.clone().requires_grad_()
            (grad,) = torch.autograd.grad(self.loss(self(leaf), y), leaf)
        adversarial = (x + 0.1 * grad.sign()).detach()
        return 0.5 * (self.loss(self(x), y) + self.loss(self(adversarial), y))


class _TargetAddedToInput(_Adversarial):
    """The leak: the label's one-hot is added to the input."""

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        x, y = batch
        return self.loss(self(x + F.one_hot(y, x.shape[-1]).float()), y)


def _target_leakage(model: TinyClassifier) -> Any:
    loader = random_classification_loader(num_samples=256, batch_size=32)
    report = preflight(model, train_dataloaders=loader, checks=["target_leakage"], progress=False)
    return report["target_leakage"]


def test_adversarial_training_is_not_a_target_fed_to_the_model():
    result = _target_leakage(_Adversarial())
    assert result.status != "fail", result.message
    fed = result.details["target_as_input"]
    assert fed["input_gradients"] is True and "differentiates with respect to its input" in fed["reason"]
    assert max(fed["changes"]) > 0  # the output did move with the target: the abstention is what kept it


def test_a_target_added_to_the_input_still_fails():
    result = _target_leakage(_TargetAddedToInput())
    assert result.status == "fail" and result.details["leaking_test"] == "target_as_input"
    assert "input_gradients" not in result.details["target_as_input"]


def test_forward_capture_sees_a_forward_on_an_input_that_requires_grad():
    net, capture = torch.nn.Linear(3, 2), ForwardCapture()
    net.register_forward_hook(capture.hook(0))
    net(torch.zeros(4, 3))
    assert capture.input_gradients is False  # parameters requiring grad do not count
    net(torch.zeros(4, 3).requires_grad_())
    assert capture.input_gradients is True
