"""overfit_batch: a provable loss floor above the target fails with the floor; a fit that diverges or falls
short fails; frozen weights are named; the work is fixed (steps), the time budget only a safety cap."""

from __future__ import annotations

import math
import time
from typing import Any

import lightning.pytorch as pl
import pytest
import torch
from torch import nn
from torch.nn import functional as F

from galleries.preflight.families import _existing_models as M
from galleries.preflight.families.overfit import BUGS
from lightning_recipes.callbacks import FinetuneSchedule
from lightning_recipes.checks import CheckContext, OverfitBatchCheck, Preflight, preflight
from lightning_recipes.checks.loss._expected_loss import ce_floor, known_floor, record_loss_calls
from lightning_recipes.checks.loss._loss_probe import input_bounds, loss_floor
from lightning_recipes.checks.report import SUMMARY_LIMIT
from lightning_recipes.mixins import OptimizerRecipeMixin
from lightning_recipes.recipe import OptimizerRecipe
from lightning_recipes.testing import fast_trainer, random_classification_loader

from . import _models


@pytest.mark.parametrize("case", BUGS, ids=[c.id for c in BUGS])
def test_overfit_gallery_bug_is_flagged(case):
    result = preflight(case.model(), **case.data(), checks=[OverfitBatchCheck()])[case.check]
    assert result.status == case.status, result.message
    assert len(result.summary) <= SUMMARY_LIMIT and result.action
    if "floor" in case.words:  # the floor cases name the op that bounds the input
        assert result.details["floor"] > result.details["target"]
        assert case.words[-1] in result.details["floor_from"], result.details["floor_from"]
    else:  # the learning-rate cases: diverged (not finite) or far short of the target
        assert result.details["best"] > result.details["target"] or "nan" in result.summary


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
    """Smoothing 0.3 over 4 classes (floor 0.78): the target is floor + 0.3 x (initial - floor)."""

    class Smoothed(M.MLPClassifier):
        def loss(self, output, target):
            return F.cross_entropy(output, target, label_smoothing=0.3)

    result = preflight(Smoothed(), **M.classification_data(), checks=[OverfitBatchCheck()])["overfit_batch"]
    assert result.status == "pass", result.message
    floor = -(0.775 * math.log(0.775) + 3 * 0.075 * math.log(0.075))
    assert result.details["floor"] == pytest.approx(floor, rel=1e-9)
    initial = result.details["initial"]
    assert result.details["target"] == pytest.approx(floor + 0.3 * (initial - floor), rel=1e-9)


def test_a_clamped_loss_fails_saying_the_loss_never_moved():
    result = OverfitBatchCheck().run(CheckContext(_models.ClampedLoss(), _models.loader()))
    assert result.status == "fail" and result.details["never_moved"] is True, result.message


def test_a_model_that_cannot_fit_fails():
    """Random labels on 16 samples with a 1-unit bottleneck: nothing memorises them."""

    class Bottleneck(M.MLPClassifier):
        def __init__(self):
            super().__init__(classes=10, hidden=1)

    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(64, M.IN, generator=g), torch.randint(0, 10, (64,), generator=g)
    result = OverfitBatchCheck(max_steps=40).run(CheckContext(Bottleneck(), _models.loader_from(x, y)))
    assert result.status == "fail", result.message
    assert result.details["best"] > result.details["target"] and result.details["never_moved"] is False


class _SlowStep(M.SGDClassifier):
    """50 ms a step (on the ``clock``): 150 steps run far past a tiny budget's safety cap."""

    def training_step(self, batch, batch_idx):
        time.sleep(0.05)
        return super().training_step(batch, batch_idx)


def test_the_time_budget_is_a_safety_cap_that_ends_inconclusive_never_a_verdict_on_partial_work(clock):
    context = CheckContext(_SlowStep(lr=1e-4), M.classification_data()["train_dataloaders"])
    result = OverfitBatchCheck(time_budget=0.01).run(context)
    assert result.status == "inconclusive", result.message
    assert result.details["stopped_by_budget"] is True


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
    torch.manual_seed(0)
    pre = Preflight(checks=["overfit_batch"], print_report=False, on_fail="warn")
    schedule = FinetuneSchedule(["backbone"], unfreeze_at_epoch=1)
    trainer = fast_trainer(max_steps=1, callbacks=[pre, schedule])
    trainer.fit(_Bottleneck(), random_classification_loader(batch_size=16))
    assert pre.report is not None
    result = pre.report["overfit_batch"]
    assert result.status == "warn", result.message
    assert "backbone.weight" in result.details["untrained"] and result.details["untrained_share"] > 0.7


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
    result = result["overfit_batch"]
    assert result.status in ("warn", "fail")
    assert "untrained_share" not in result.details and "ema" not in result.message


# ------------------------------------------------------------------ judged only against a known floor


def _soft_target_data(seed: int = 0) -> dict[str, Any]:
    """Probability targets of high entropy (a tempered linear teacher over 4 classes): the floor of the
    cross-entropy is their entropy, ~1.2 nats, far above 0.3 x its initial value."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(256, M.IN, generator=g)
    target = (x @ torch.randn(M.IN, 4, generator=g) / 8).softmax(-1)
    return M._split(x, target)


class _SoftTargetCE(M.MLPClassifier):
    """Cross-entropy against probability targets through ``F.cross_entropy``: a loss the check knows."""

    def loss(self, output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(output, target)


class _HandWrittenSoftTargetCE(M.MLPClassifier):
    """The same loss written out (ListNet's form): the check cannot know its floor."""

    def loss(self, output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return -(target * output.log_softmax(-1)).sum(-1).mean()


def test_probability_targets_are_fitted_to_their_entropy_not_to_zero():
    torch.manual_seed(0)
    result = preflight(_SoftTargetCE(), **_soft_target_data(), checks=[OverfitBatchCheck()])["overfit_batch"]
    assert result.status == "pass", result.message
    floor, initial = result.details["floor"], result.details["initial"]
    assert result.details["floor_from"] == "cross_entropy (the targets' entropy)"
    assert 1.0 < floor < initial and result.details["best"] > 0.3 * initial  # 0.3 x initial: out of reach
    assert result.details["target"] == pytest.approx(floor + 0.3 * (initial - floor), rel=1e-9)


def test_a_hand_written_loss_that_falls_short_of_a_fixed_share_abstains_never_fails():
    """ListNet: the soft cross-entropy written by hand, its floor unknown to the check."""
    torch.manual_seed(0)
    data = _soft_target_data()
    result = preflight(_HandWrittenSoftTargetCE(), **data, checks=[OverfitBatchCheck()])["overfit_batch"]
    assert result.status == "inconclusive", result.message
    assert result.details["floor"] is None and "floor is unknown" in result.summary
    assert len(result.summary) <= SUMMARY_LIMIT and result.action


class _OffsetRegressor(pl.LightningModule):
    """Mean squared error plus a constant 8 (a flow's dequantisation constant): correct gradients, floor
    unknown to the check; ``lr=0`` makes a loss that cannot fall."""

    def __init__(self, lr: float = 1e-2) -> None:
        super().__init__()
        self.lr, self.net = lr, nn.Sequential(nn.Linear(M.IN, 64), nn.ReLU(), nn.Linear(64, 1))

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        x, y = batch
        return F.mse_loss(self.net(x).squeeze(-1), y) + 8.0

    def configure_optimizers(self) -> Any:
        return torch.optim.Adam(self.parameters(), lr=self.lr)


def _regression_data() -> dict[str, Any]:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(256, M.IN, generator=g)
    return M._split(x, x @ torch.randn(M.IN, generator=g))


def test_an_offset_loss_that_learns_abstains_and_one_that_cannot_fall_fails():
    torch.manual_seed(0)
    learns = preflight(_OffsetRegressor(), **_regression_data(), checks=[OverfitBatchCheck()])[
        "overfit_batch"
    ]
    assert learns.status == "inconclusive", learns.message
    assert learns.details["best"] < learns.details["initial"] - 1.0  # it learnt: only the floor is unknown
    torch.manual_seed(0)
    stuck = preflight(_OffsetRegressor(lr=0.0), **_regression_data(), checks=[OverfitBatchCheck()])
    assert stuck["overfit_batch"].status == "fail", stuck["overfit_batch"].message
    assert stuck["overfit_batch"].details["never_moved"] is True


def test_known_floor_of_probability_targets_is_reached_at_their_logits_and_never_undercut():
    g = torch.Generator().manual_seed(0)
    soft = torch.rand(6, 5, generator=g).softmax(-1)
    multi_hot = (torch.rand(6, 5, generator=g) < 0.5).float()
    multi_hot[:, 0] = 1.0  # every row has a label: the floor of a row with m labels is m ln m
    labels = multi_hot.sum(-1)
    entropy = float(-(soft * soft.log()).sum(-1).mean())
    for target, expected in ((soft, entropy), (multi_hot, float((labels * labels.log()).mean()))):
        logits = torch.randn(6, 5, generator=g, requires_grad=True)
        with record_loss_calls() as calls:
            loss = F.cross_entropy(logits, target)
        floor = known_floor(calls, loss)
        assert floor is not None and floor.value == pytest.approx(expected, rel=1e-6)  # float32 targets
        minimiser = (target / target.sum(-1, keepdim=True)).clamp_min(1e-30).log()
        assert float(F.cross_entropy(minimiser, target)) == pytest.approx(floor.value, rel=1e-6)
        assert float(loss.detach()) > floor.value


def test_known_floor_sums_known_terms_and_refuses_rescaled_or_offset_ones():
    x, y = torch.randn(8, 3, requires_grad=True), torch.randn(8, 3)
    with record_loss_calls() as calls:
        loss = F.mse_loss(x, y) + F.l1_loss(x, y)
    floor = known_floor(calls, loss)
    assert floor is not None and floor.value == 0.0 and floor.how == "sum of mse_loss (0) + l1_loss (0)"
    assert known_floor(calls, 0.5 * loss) is None and known_floor(calls, loss + 8) is None
    with record_loss_calls() as calls:
        loss = F.binary_cross_entropy_with_logits(x, torch.full((8, 3), 0.25))
    expected = -(0.25 * math.log(0.25) + 0.75 * math.log(0.75))
    assert known_floor(calls, loss).value == pytest.approx(expected, rel=1e-9)  # type: ignore[union-attr]


# ------------------------------------------------------------------ the user's own loop


class _ClipsInItsHook(M.SGDClassifier):
    """Clips the gradient norm to ``max_norm`` in its own ``on_before_optimizer_step`` (sealed gallery F:
    ``1e-3``, a typo for ``1.0``, leaves each SGD step a thousandth of the planned one)."""

    def __init__(self, max_norm: float) -> None:
        super().__init__(lr=0.1)
        self.max_norm = max_norm

    def on_before_optimizer_step(self, optimizer: Any) -> None:
        nn.utils.clip_grad_norm_(self.parameters(), self.max_norm)


@pytest.mark.parametrize(("max_norm", "status"), [(1.0, "pass"), (1e-4, "fail")])
def test_the_fit_runs_the_users_clipping_hook(max_norm, status):
    """The fit goes through a real Trainer, so a clip to ~0 in the module's own hook cannot fit one batch."""
    torch.manual_seed(0)
    data = M.classification_data()
    result = preflight(_ClipsInItsHook(max_norm), **data, checks=[OverfitBatchCheck()])["overfit_batch"]
    assert result.status == status, result.message


class _LongWarmUp(M.SGDClassifier):
    """A linear warm-up over 10,000 steps: the trial's steps run at under 2% of the peak lr."""

    def configure_optimizers(self) -> Any:
        optimizer = torch.optim.SGD(self.parameters(), lr=self.lr, momentum=0.9)
        warm_up = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: min(1.0, step / 10_000))
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": warm_up, "interval": "step"}}


def test_a_fit_held_back_by_a_warm_up_abstains_never_fails():
    torch.manual_seed(0)
    result = preflight(_LongWarmUp(lr=0.1), **M.classification_data(), checks=[OverfitBatchCheck()])
    assert result["overfit_batch"].status == "inconclusive", result["overfit_batch"].message
    assert "of its peak" in result["overfit_batch"].summary


class _ValidatesOtherBatches(M.SGDClassifier):
    """A ``validation_step`` written for batches of another layout (sealed gallery A's distillation: its
    training batches hold no labels): the fit of the training loop never runs it."""

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        raise ValueError("not enough values to unpack")


def test_a_validation_step_that_cannot_take_the_training_batch_does_not_stop_the_fit():
    torch.manual_seed(0)
    result = preflight(
        _ValidatesOtherBatches(lr=0.1), **M.classification_data(), checks=[OverfitBatchCheck()]
    )
    assert result["overfit_batch"].status == "pass", result["overfit_batch"].message


def test_probabilities_into_cross_entropy_have_a_bounded_floor():
    with record_loss_calls() as calls:
        F.cross_entropy(torch.zeros(6, 3, requires_grad=True).softmax(-1), torch.tensor([0, 1, 2, 0, 1, 2]))
    floor = loss_floor(calls[0])
    assert floor is not None and (round(floor.value, 4), floor.bounded) == (0.5514, True)  # logits in [0, 1]


def test_known_floor_of_a_sum_names_each_term_and_refuses_a_rescaled_one():
    soft = torch.tensor([[0.5, 0.5], [1.0, 0.0]])  # probability targets: entropies ln 2 and 0
    with record_loss_calls() as calls:
        loss = F.cross_entropy(torch.zeros(2, 2), soft) + F.mse_loss(torch.zeros(3), torch.ones(3))
    floor = known_floor(calls, loss)
    assert floor is not None and round(floor.value, 4) == 0.3466
    assert floor.how == "sum of cross_entropy (the targets' entropy) + mse_loss (0)"
    assert known_floor(calls, 2 * loss) is None  # rescaled: not known
