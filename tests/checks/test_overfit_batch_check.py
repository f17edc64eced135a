"""overfit_batch: a provable loss floor above the target fails with the floor; a failed memorisation runs a
warm-up LR probe that tells a bad learning rate from a model that cannot fit; the loops obey the budget."""

from __future__ import annotations

import math
import time
from typing import Any

import lightning.pytorch as pl
import pytest
import torch
from torch import nn
from torch.nn import functional as F

from lightning_recipes.callbacks import FinetuneSchedule
from lightning_recipes.checks import CheckContext, OverfitBatchCheck, Preflight, preflight
from lightning_recipes.checks._budget import time_budget
from lightning_recipes.checks.loss._expected_loss import record_loss_calls
from lightning_recipes.checks.loss._loss_probe import ce_floor, input_bounds, loss_floor
from lightning_recipes.mixins import OptimizerRecipeMixin
from lightning_recipes.recipe import OptimizerRecipe
from lightning_recipes.testing import fast_trainer, random_classification_loader

from . import _models
from .gallery import _existing_models as M
from .gallery.overfit import BUGS


@pytest.mark.parametrize("case", BUGS, ids=[c.id for c in BUGS])
def test_overfit_gallery_bug_is_flagged(case):
    result = preflight(case.model(), **case.data(), checks=[OverfitBatchCheck()])[case.check]
    assert result.status == case.status, result.message
    for word in case.words:
        assert word in result.message, result.message


def _brute_force_ce_floor(classes: int, smoothing: float, spread: float) -> float:
    """Smoothed cross-entropy minimised over a fine grid of (target logit - other logits) in [0, spread]."""
    gaps = torch.linspace(0, spread, 200_001, dtype=torch.float64)
    top, rest = 1 - smoothing + smoothing / classes, smoothing / classes
    log_z = torch.log(gaps.exp() + classes - 1)
    return float((-top * (gaps - log_z) - (classes - 1) * rest * (-log_z)).min())


@pytest.mark.parametrize(("classes", "smoothing", "spread"), [(10, 0.0, 1.0), (10, 0.0, 2.0), (4, 0.1, 1.0)])
def test_ce_floor_matches_a_brute_force_minimum(classes, smoothing, spread):
    assert ce_floor(classes, smoothing, spread) == pytest.approx(
        _brute_force_ce_floor(classes, smoothing, spread), abs=1e-8
    )


def test_softmax_into_cross_entropy_floor_is_ln_e_plus_c_minus_1_minus_1():
    logits = torch.randn(8, 10, requires_grad=True)
    with record_loss_calls() as calls:
        F.cross_entropy(logits.softmax(-1), torch.arange(8))
    floor = loss_floor(calls[0])
    assert floor is not None and floor.bounded
    assert floor.value == pytest.approx(math.log(math.e + 9) - 1, rel=1e-12)  # one-hot probabilities


def test_double_sigmoid_floor_per_element_from_the_formula():
    logits = torch.randn(6, requires_grad=True)
    target = torch.tensor([1.0, 0.0, 1.0, 1.0, 0.0, 0.0])
    with record_loss_calls() as calls:
        F.binary_cross_entropy_with_logits(torch.sigmoid(logits), target)
    floor = loss_floor(calls[0])
    # the input is in [0, 1]: a positive is best at x = 1 (log(1 + e^-1)), a negative at x = 0 (ln 2)
    reference = (3 * math.log1p(math.exp(-1)) + 3 * math.log(2)) / 6
    assert floor is not None and floor.bounded and floor.value == pytest.approx(reference, rel=1e-12)


def test_bounds_are_read_through_reshapes_and_a_scalar_scale():
    x = torch.randn(2, 3, 4, requires_grad=True)
    assert input_bounds((3 * torch.tanh(x)).flatten(0, 1)) is not None
    bounds = input_bounds((3 * torch.tanh(x)).flatten(0, 1))
    assert (bounds.low, bounds.high) == (-3.0, 3.0)
    bounds = input_bounds(x.clamp(-2, 5).transpose(1, 2))
    assert (bounds.low, bounds.high) == (-2.0, 5.0)
    assert input_bounds(x * 2 + 1) is None  # unknown op: no claim
    assert input_bounds(torch.relu(x)) is None  # bounded only below: no floor for a logits loss


def test_soft_capped_logits_are_not_flagged():
    """Gemma-style soft capping (30 tanh(z / 30)) bounds the logits, but its floor is ~0: a healthy model."""

    class SoftCapped(M.MLPClassifier):
        def forward(self, x):
            return 30 * torch.tanh(super().forward(x) / 30)

    result = preflight(SoftCapped(), **M.classification_data(), checks=[OverfitBatchCheck()])["overfit_batch"]
    assert result.status == "pass", result.message


def test_label_smoothing_target_is_measured_from_the_floor():
    """Smoothing 0.3 over 4 classes has a floor of 0.78 = 0.56 x ln 4: above 0.3 x initial, so before this
    a healthy model could never pass. The target is now floor + 0.3 x (initial - floor)."""

    class Smoothed(M.MLPClassifier):
        def loss(self, output, target):
            return F.cross_entropy(output, target, label_smoothing=0.3)

    result = preflight(Smoothed(), **M.classification_data(), checks=[OverfitBatchCheck()])["overfit_batch"]
    assert result.status == "pass", result.message
    floor = -(0.775 * math.log(0.775) + 3 * 0.075 * math.log(0.075))
    assert result.details["floor"] == pytest.approx(floor, rel=1e-9)
    initial = result.details["initial"]
    assert result.details["target"] == pytest.approx(floor + 0.3 * (initial - floor), rel=1e-9)


def test_a_clamped_loss_skips_the_probe_because_nothing_moves():
    result = OverfitBatchCheck().run(CheckContext(_models.ClampedLoss(), _models.loader()))
    assert result.status == "fail" and "cannot memorise" in result.message
    assert "LR probe not run" in result.message and "lr_probe" not in result.details


def test_a_model_that_cannot_fit_is_not_blamed_on_the_learning_rate():
    """Random labels on 16 samples with a 2-unit bottleneck: no learning rate memorises them."""

    class Bottleneck(M.MLPClassifier):
        def __init__(self):
            super().__init__(classes=10, hidden=1)

    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(64, M.IN, generator=g), torch.randint(0, 10, (64,), generator=g)
    result = OverfitBatchCheck(max_steps=40).run(CheckContext(Bottleneck(), _models.loader_from(x, y)))
    assert result.status == "fail", result.message
    assert "no LR in [" in result.message and "cannot fit it" in result.message
    assert result.details["lr_probe"]["fit"] == []


def test_time_budget_stops_the_training_loop_inconclusive():
    """Issue #24: a fit the budget did not let finish is `inconclusive` (was a `warn`), not a verdict."""
    context = CheckContext(M.SGDClassifier(lr=1e-4), M.classification_data()["train_dataloaders"])
    with time_budget(0.0):
        result = OverfitBatchCheck().check(context)
    assert result.status == "inconclusive", result.message
    assert "time budget" in result.message and "after 1 of 150 steps" in result.message
    assert result.details["stopped_by_time_budget"] is True


_SLOW_AFTER = {"calls": 0}


class _SlowProbe(M.SGDClassifier):
    """Fast for the check's own 150 steps, then 50 ms a step: the LR probe runs into the time budget."""

    def __init__(self) -> None:
        super().__init__(lr=1e-4)

    def training_step(self, batch, batch_idx):
        _SLOW_AFTER["calls"] += 1
        if _SLOW_AFTER["calls"] > 150:
            time.sleep(0.05)
        return super().training_step(batch, batch_idx)


def test_time_budget_stops_the_lr_probe_and_says_how_far_it_got():
    _SLOW_AFTER["calls"] = 0
    context = CheckContext(_SlowProbe(), M.classification_data()["train_dataloaders"])
    with time_budget(3.0):
        result = OverfitBatchCheck().check(context)
    assert result.status == "fail", result.message
    assert "time budget" in result.message and "stopped the LR probe after" in result.message
    assert len(result.details["lr_probe"]["tried"]) < 12


class _Bottleneck(OptimizerRecipeMixin, pl.LightningModule):
    """A 2-wide backbone and a head: the head alone cannot memorise 16 samples of 4 classes."""

    def __init__(self) -> None:
        super().__init__()
        self.recipe = OptimizerRecipe(lr=0.01, schedule="constant", warmup_steps=0)
        self.backbone, self.head = nn.Linear(16, 2), nn.Linear(2, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.backbone(x))

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        x, y = batch
        return F.cross_entropy(self(x), y)


def test_weights_frozen_by_finetune_schedule_are_named_not_the_learning_rate() -> None:
    """Issue 32 #9: before, the fit short of its target with the backbone frozen by FinetuneSchedule read
    "Likely causes: a small learning rate ... Try: ... a larger learning rate" (or ran the LR probe)."""
    torch.manual_seed(0)
    pre = Preflight(checks=["overfit_batch"], print_report=False, on_fail="warn")
    schedule = FinetuneSchedule(["backbone"], unfreeze_at_epoch=1)
    trainer = fast_trainer(max_steps=1, callbacks=[pre, schedule])
    trainer.fit(_Bottleneck(), random_classification_loader(batch_size=16))
    assert pre.report is not None
    result = pre.report["overfit_batch"]
    assert result.status == "warn", result.message
    assert "FinetuneSchedule" in result.message and "backbone.weight" in result.message, result.message
    assert "learning rate" not in result.message.replace("says nothing about the learning rate", "")
    assert "lr_probe" not in result.details and result.details["untrained_share"] > 0.7


class _WithEMA(_Bottleneck):
    """The bottleneck model trained whole, with a frozen EMA copy that training_step never runs."""

    def __init__(self) -> None:
        super().__init__()
        self.recipe = OptimizerRecipe(lr=1e-4, schedule="constant", warmup_steps=0)  # too small to fit
        self.ema = nn.Sequential(nn.Linear(16, 64), nn.Linear(64, 4)).requires_grad_(False)


def test_frozen_weights_the_loss_does_not_use_are_not_blamed() -> None:
    """Untrained weights count only where training_step runs their module: an EMA copy (70% of the weights
    here) is not why the fit falls short."""
    torch.manual_seed(0)
    result = preflight(_WithEMA(), train_dataloaders=random_classification_loader(), checks=["overfit_batch"])
    assert result["overfit_batch"].status in ("warn", "fail")
    assert (
        "untrained_share" not in result["overfit_batch"].details
        and "ema" not in result["overfit_batch"].message
    )
