"""HealthMonitor names the cause the evidence supports: no overfitting for a diverged run, and more."""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch
from torch import Tensor, nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset

from lightning_recipes.callbacks._health_rules import evidence_of, not_learning, overfitting
from lightning_recipes.callbacks._health_window import DEFAULT_THRESHOLDS, CheckData, History
from lightning_recipes.callbacks.health_monitor import HealthMonitor
from lightning_recipes.testing import TinyClassifier, fast_trainer, random_classification_loader

T = DEFAULT_THRESHOLDS


pytestmark = pytest.mark.usefixtures("one_torch_thread")


# ---------------------------------------------------------------------------------------- 5: overfitting


def test_a_diverged_run_whose_validation_loss_jumps_around_is_not_overfitting() -> None:
    # the field repro (AdamW at LR 1.0, accuracy at chance): (epoch, val, epoch's train loss, val se, samples)
    rows = [(0, 1.638, 5.132), (1, 3.75, 2.13), (2, 4.17, 2.463), (3, 2.238, 3.883), (4, 1.847, 2.709)]
    rows += [(5, 1.657, 2.469), (6, 2.153, 1.821), (7, 2.548, 2.51), (8, 2.888, 1.922), (9, 1.536, 2.168)]
    history = History()
    for epoch, val, train in rows:  # the training loss never gets below the best validation loss: no fit
        data = CheckData(0, epoch, validations=[(epoch, val, train, 0.05, 384)])
        assert overfitting(data, history, T) is None, epoch


def test_a_model_that_fits_its_training_set_while_validation_rises_is_still_overfitting() -> None:
    rows = [(0, 1.2, 1.3), (1, 0.8, 0.75), (2, 0.9, 0.5), (3, 1.0, 0.35), (4, 1.1, 0.25)]
    history, found = History(), None
    for epoch, val, train in rows:
        found = overfitting(CheckData(0, epoch, validations=[(epoch, val, train, 0.01, 1000)]), history, T)
    assert found is not None and found[0]["began_epoch"] == 2


def test_report_prints_the_table_once_and_returns_it_only_when_asked(
    capsys: pytest.CaptureFixture[str],
) -> None:
    monitor = HealthMonitor(check_every_n_steps=4)
    fast_trainer(max_steps=4, callbacks=[monitor]).fit(TinyClassifier(), random_classification_loader())
    capsys.readouterr()
    assert monitor.report() is None  # printed: a notebook cell ending in it shows it once
    assert capsys.readouterr().out.count("HealthMonitor:") == 1
    table = monitor.report(print_table=False)
    assert table is not None and capsys.readouterr().out == ""


# -------------------------------------------------------------------------------------- 6: non-finite


class NanLossAt(TinyClassifier):
    """One batch's loss is NaN (a bad sample, an fp16 overflow): its step writes NaN into every weight."""

    def __init__(self, step: int) -> None:
        super().__init__()
        self.nan_step = step

    def training_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> Tensor:
        loss = super().training_step(batch, batch_idx)
        return loss * float("nan") if self.global_step == self.nan_step else loss

    def configure_optimizers(self) -> Any:
        return torch.optim.Adam(self.parameters(), lr=1e-3)


def _nonfinite_finding(model: TinyClassifier, loader: DataLoader) -> Any:
    monitor = HealthMonitor(check_every_n_steps=8, on_finding=lambda f: None)
    fast_trainer(max_steps=16, max_epochs=-1, callbacks=[monitor]).fit(model, loader)
    return next(f for f in monitor.findings if f.problem == "nonfinite_activations")


def test_nan_weights_after_one_nan_step_are_blamed_on_the_step_not_the_inputs() -> None:
    torch.manual_seed(0)
    finding = _nonfinite_finding(NanLossAt(step=3), random_classification_loader(num_samples=512))
    assert finding.evidence["cause"] == "nonfinite_weights"
    assert set(finding.evidence["nonfinite_weights"]) == {"hidden", "head"}
    assert "optimizer step" in finding.advice and "Check its inputs" not in finding.advice


def test_nan_in_the_data_is_blamed_on_the_inputs() -> None:
    # the blind twin: the same symptom (every forward NaN), the cause in the batches
    torch.manual_seed(0)
    x, y = torch.randn(512, 16), torch.randint(0, 4, (512,))
    x[::7, 3] = float("nan")
    finding = _nonfinite_finding(NanLossAt(step=-1), DataLoader(TensorDataset(x, y), batch_size=32))
    assert finding.evidence["cause"] == "inputs" and finding.evidence["first_module"] == "hidden"
    assert "check the batches" in finding.advice


def test_one_nan_sample_that_poisoned_the_weights_is_blamed_on_its_batch() -> None:
    # sealed zoos 6 and 7: one NaN reading; by the check every weight is NaN and the sampled batch is finite
    torch.manual_seed(0)
    x, y = torch.randn(512, 16), torch.randint(0, 4, (512,))
    x[5 * 32 + 7, 3] = float("nan")  # the batch of step 5 only (read in order)
    finding = _nonfinite_finding(NanLossAt(step=-1), DataLoader(TensorDataset(x, y), batch_size=32))
    assert finding.evidence["cause"] == "inputs" and finding.evidence["nonfinite_batch_step"] == 5
    assert finding.evidence["nonfinite_weights"] and "The batch of step 5 held inf/nan" in finding.advice
    inputs = next(c for c in finding.causes if c.name == "inputs")
    assert inputs.evidence_for == {"nonfinite_batch_step": 5}


class Regressor(NanLossAt):
    """A one-output regressor on float targets (the targets may hold NaN: a count missing in an export)."""

    def __init__(self) -> None:
        super().__init__(step=-1)
        self.head = nn.Linear(self.head.in_features, 1)

    def training_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> Tensor:
        x, y = batch
        return F.mse_loss(self(x).squeeze(-1), y)


def test_one_nan_target_beside_finite_inputs_is_blamed_on_its_batch() -> None:
    """Sealed zoo 15 (blind): a missing count read as NaN; the batch's largest |value| was its inputs', as a
    NaN compares below every number, so the poisoned weights were blamed on the step."""
    torch.manual_seed(0)
    x, y = torch.randn(512, 16), torch.randn(512)
    y[5 * 32 + 7] = float("nan")  # the target of the batch of step 5 only (read in order)
    finding = _nonfinite_finding(Regressor(), DataLoader(TensorDataset(x, y), batch_size=32))
    assert finding.evidence["cause"] == "inputs" and finding.evidence["nonfinite_batch_step"] == 5
    assert "The batch of step 5 held inf/nan" in finding.advice


def test_repair_rolls_back_past_the_nan_sample_batch_and_skips_it() -> None:
    torch.manual_seed(0)
    x, y = torch.randn(512, 16), torch.randint(0, 4, (512,))
    x[5 * 32 + 7, 3] = float("nan")  # the batch of step 5 only (read in order)
    model, monitor = (
        NanLossAt(step=-1),
        HealthMonitor(check_every_n_steps=8, on_finding=lambda f: None, repair=True),
    )
    fast_trainer(max_steps=20, max_epochs=-1, callbacks=[monitor]).fit(
        model, DataLoader(TensorDataset(x, y), batch_size=32)
    )
    [event] = monitor.repairs
    assert (event.problem, event.cause, event.action) == (
        "nonfinite_activations",
        "inputs",
        "rollback_skip_batch",
    )
    assert event.before["nonfinite_step"] == 5 and "batch of step 5 (epoch 0, batch 5)" in event.message
    assert all(torch.isfinite(p).all() for p in model.parameters())


# ------------------------------------------------------------------------------------- 7: not_learning


def _stuck(growth: float, ratio: float, grad: float = 0.07) -> tuple[CheckData, History]:
    """The stuck transformer's numbers (issue #32 item 7): the loss at ~96% of its start for 250 steps."""
    history = History(
        losses=[3.155, 3.097, 3.098, 3.095, 3.093],
        loss_ses=[0.012, 0.001, 0.002, 0.001, 0.001],
        loss_steps=[50, 100, 150, 200, 250],
        ratios=[ratio] * 5,
        start_loss=3.2,
    )
    data = CheckData(300, 9, loss_mean=3.093, loss_count=50, loss_std=0.007, grad_sampled=True)
    data.grad_total, data.param_norm, data.param_norm_start = grad, 29.0 * growth, 29.0
    data.update_ratio, data.group_numel, data.group_lr = {"model": ratio}, {"model": 10_000}, {"model": 0.03}
    data.group_family = {"model": "adaptive"}
    # its cross-entropy measures its input-free level, as a real run of it does
    data.input_free_gap, data.input_free_gap_se, data.input_free_loss = 0.0, 0.003, 3.09
    return data, history


@pytest.mark.parametrize(
    ("growth", "ratio", "grad", "cause"),
    [
        (2.8, 2e-3, 0.07, "lr_too_high"),  # the weights grew 2.8x while the loss sat still
        (1.0, 1e-6, 0.07, "lr_too_low_or_frozen"),
        (1.0, 2e-3, 1e-9, "no_gradient_signal"),
        (1.05, 2e-3, 0.07, "undetermined"),  # a healthy optimizer: the labels first, and how to tell
    ],
)
def test_not_learning_ranks_the_cause_by_the_evidence(
    growth: float, ratio: float, grad: float, cause: str
) -> None:
    data, history = _stuck(growth, ratio, grad)
    evidence, advice = not_learning(evidence_of(data, history, T), named=False)
    assert evidence["cause"] == cause
    if cause == "undetermined":
        assert evidence["ranked_causes"][0] == "labels_do_not_match_inputs"
        assert "What tells them apart" in advice
    else:
        assert evidence["causes"][cause].startswith("for:")


def test_not_learning_stays_silent_when_the_loss_moved_or_another_rule_named_the_cause() -> None:
    data, history = _stuck(2.8, 2e-3)
    assert not_learning(evidence_of(data, history, T), named=True) is None
    data, history = _stuck(2.8, 2e-3)
    history.start_loss = 4.0  # the loss fell to 77% of where it started: it learned
    assert not_learning(evidence_of(data, history, T), named=False) is None
    data, history = _stuck(2.8, 2e-3)
    data.loss_mean = 2.85  # 89% of its start: it left the level of knowing nothing, it learns
    assert not_learning(evidence_of(data, history, T), named=False) is None
    # a slow descent that stays at the level of knowing nothing (94% of the start) is not learning
    data, history = _stuck(2.8, 2e-3)
    data.loss_mean = 3.0
    assert not_learning(evidence_of(data, history, T), named=False) is not None


def test_a_run_whose_labels_do_not_depend_on_its_inputs_is_found_not_learning() -> None:
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    x, y = torch.randn(16384, 16, generator=g), torch.randint(0, 4, (16384,), generator=g)
    model = NanLossAt(step=-1)  # Adam at 1e-3, never NaN
    monitor = HealthMonitor(check_every_n_steps=20, on_finding=lambda f: None)
    loader = DataLoader(TensorDataset(x, y), batch_size=256, shuffle=True)
    fast_trainer(max_steps=200, max_epochs=-1, callbacks=[monitor]).fit(model, loader)
    found = [f for f in monitor.findings if f.problem == "not_learning"]
    assert found, [(f.problem, f.step) for f in monitor.findings]
    assert found[0].evidence["ranked_causes"][0] == "labels_do_not_match_inputs"
    assert math.isclose(found[0].evidence["start_loss"], math.log(4), rel_tol=0.02)
