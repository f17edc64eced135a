"""The validation_path check on real tiny LightningModules: after a real-Trainer fit of a copy on one
batch, validation_step on that batch must see the fit."""

from __future__ import annotations

import lightning.pytorch as pl
import pytest
import torch
from torch.nn import functional as F

from lightning_recipes._stats import difference_noise
from lightning_recipes.checks import preflight
from lightning_recipes.checks.loop.optimization_check import OptimizationCheck
from lightning_recipes.checks.loop.validation_path_check import ValidationPathCheck
from lightning_recipes.testing import fast_trainer
from tests.checks import _loop_models as M


def _run(model, *, raw: bool = False, **kwargs):
    data = M.loader(raw=raw)
    report = preflight(
        model,
        train_dataloaders=data,
        val_dataloaders=data,
        checks=[ValidationPathCheck(**kwargs)],
        progress=False,
    )
    return report["validation_path"]


@pytest.mark.parametrize(
    ("factory", "raw"),
    [
        (M.AutoMLP, False),
        (lambda: M.AutoMLP(dropout=0.5), False),
        (lambda: M.AutoMLP(batchnorm=True), False),
        (M.ManualMLP, False),
        (lambda: M.Normalised(val_raw=False), True),
        (lambda: M.TwoHeads(wrong_head=False), False),
        (lambda: M.EMAModel(update=True, decay=0.9), False),
    ],
    ids=["plain", "dropout", "batchnorm", "manual", "same-normalisation", "right-head", "ema-updated"],
)
def test_healthy_validation_paths_pass(factory, raw):
    torch.manual_seed(0)
    result = _run(factory(), raw=raw)
    assert result.status == "pass", result.message


class DeepBatchNorm(M.AutoMLP):
    """Four Linear + BatchNorm layers at a large LR: the weights move so fast that the running statistics
    (averages over the trial's steps) lag them, and eval mode scores worse than the start. Sealed X (blind):
    a bearing-fault CNN's healthy twins failed so."""

    def __init__(self, wrong_head: bool = False) -> None:
        super().__init__(lr=0.2)
        blocks = [
            torch.nn.Sequential(torch.nn.Linear(a, 32), torch.nn.BatchNorm1d(32), torch.nn.ReLU())
            for a in (M.IN, 32, 32, 32)
        ]
        self.net = torch.nn.Sequential(*blocks, torch.nn.Linear(32, M.C))
        self.aux = torch.nn.Linear(32, M.C) if wrong_head else None

    def validation_step(self, batch, batch_idx):
        x, y = batch
        head = self.net[-1] if self.aux is None else self.aux  # the bug: a head training never fits
        self.log("val_loss", F.cross_entropy(head(self.net[:-1](x)), y))


def test_batchnorm_statistics_that_lag_a_fast_fit_pass_and_a_wrong_head_beside_them_fails():
    torch.manual_seed(0)
    result = _run(DeepBatchNorm())
    assert result.status == "pass", result.message
    assert (
        result.details["after_batch_statistics"]
        < result.details["before"] - 0.5 * result.details["train_drop"]
    )
    torch.manual_seed(0)
    result = _run(DeepBatchNorm(wrong_head=True))
    assert result.status == "fail", result.message
    assert result.details["stale"] == ["aux.bias", "aux.weight"]


def test_a_slow_ema_that_is_updated_passes_and_reports_its_lag():
    torch.manual_seed(0)
    result = _run(M.EMAModel(update=True, decay=0.99))
    assert result.status == "pass", result.message
    assert result.details["share"] < 0.5  # the average lags ...
    assert 0 < result.details["lag"] < 1  # ... but moved towards the trained weights
    assert "averaged weights" in result.message


def test_an_ema_never_updated_fails_naming_its_parameters():
    torch.manual_seed(0)
    result = _run(M.EMAModel(update=False))
    assert result.status == "fail", result.message
    assert result.details["val_drop"] == 0.0  # validation saw exactly the initial weights
    assert result.details["stale"] == ["ema.0.bias", "ema.0.weight", "ema.4.bias", "ema.4.weight"]
    assert "stale" in result.summary and len(result.summary) <= 120


@pytest.mark.parametrize("decay", [0.95, 0.99])
def test_averaged_weights_swapped_in_for_validation_pass(decay):
    torch.manual_seed(0)
    result = _run(M.SwappedEMA(update=True, decay=decay))
    assert result.status == "pass", result.message
    assert result.details["averaged"] == ["net.0.bias", "net.0.weight", "net.4.bias", "net.4.weight"]


def test_averaged_weights_swapped_in_but_never_updated_fail():
    torch.manual_seed(0)
    result = _run(M.SwappedEMA(update=False))
    assert result.status == "fail", result.message
    assert result.details["stale"] == ["net.0.bias", "net.0.weight", "net.4.bias", "net.4.weight"]


def test_an_averaged_model_built_in_on_fit_start_is_seen():
    """Hooks that only run inside a fit (``on_fit_start``) run before validation, as in a real run."""
    torch.manual_seed(0)
    assert _run(M.FitStartEMA(update=True)).status == "pass"
    torch.manual_seed(0)
    result = _run(M.FitStartEMA(update=False))
    assert result.status == "fail", result.message
    assert "ema.module.0.weight" in result.details["stale"]


def test_a_validation_normalisation_that_differs_fails():
    torch.manual_seed(0)
    result = _run(M.Normalised(val_raw=True), raw=True)
    assert result.status == "fail", result.message
    assert result.details["input_difference"] > 1.0
    assert "gets inputs" in result.summary and result.details["stale"] == []


class _MildlyRenormalised(M.Normalised):
    """Validation divides by another scale (x 0.7): it judges other inputs than training fits."""

    def validation_step(self, batch, batch_idx):
        x, y = batch
        self.log("val_loss", torch.nn.functional.cross_entropy(self(0.7 * self.prep(x)), y))


def test_a_large_deterministic_input_difference_fails_even_when_validation_follows_the_fit():
    torch.manual_seed(0)
    result = _run(_MildlyRenormalised(), raw=True)
    assert result.status == "fail", result.message
    assert result.details["input_difference"] >= 0.1 and result.action


def test_a_validation_loss_on_the_wrong_head_fails():
    torch.manual_seed(0)
    result = _run(M.TwoHeads(wrong_head=True))
    assert result.status == "fail", result.message
    assert result.details["stale"] == ["aux.bias", "aux.weight"]
    assert result.details["source"] == "returned"


@pytest.mark.filterwarnings("ignore:You defined a `validation_step` but have no `val_dataloader`")
def test_the_bugs_are_real_in_a_plain_trainer_fit():
    """Without the library: after fitting, the buggy twins' validation loss on the training data stays far
    above the healthy twins'."""

    def val_loss(model, raw=False):
        torch.manual_seed(0)
        data = M.loader(raw=raw)
        fast_trainer(max_epochs=8).fit(model, data)
        return fast_trainer().validate(model, data, verbose=False)[0]["val_loss"]

    torch.manual_seed(0)
    assert val_loss(M.EMAModel(update=False)) > 1.5 * val_loss(M.EMAModel(update=True))
    torch.manual_seed(0)
    assert val_loss(M.Normalised(val_raw=True), raw=True) > 2 * val_loss(M.Normalised(), raw=True)
    torch.manual_seed(0)
    assert val_loss(M.TwoHeads(wrong_head=True)) > 1.5 * val_loss(M.TwoHeads())


def test_accuracy_only_validation_is_skipped_saying_what_to_log():
    result = _run(M.AccuracyOnly())
    assert result.status == "skip"
    assert "val_loss" in result.message and "val_acc" in result.message


def test_no_validation_step_is_skipped():
    result = _run(M.NoValidation())
    assert result.status == "skip" and "no `validation_step`" in result.message


class _TinyLR(M.AutoMLP):
    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=1e-6)


def test_a_copy_that_did_not_fit_is_inconclusive_and_blames_nothing():
    result = _run(_TinyLR())
    assert result.status == "inconclusive", result.message
    assert "did not fit the batch" in result.message


class _ReturnsLossDict(pl.LightningModule):
    """Validation returns ``{"loss": ...}`` and logs nothing; training uses ``self.trainer``."""

    def __init__(self):
        super().__init__()
        self.net = torch.nn.Linear(M.IN, M.C)

    def training_step(self, batch, batch_idx):
        assert self.trainer.global_step == batch_idx
        x, y = batch
        return F.cross_entropy(self.net(x), y)

    def validation_step(self, batch, batch_idx):
        x, y = batch
        return {"loss": F.cross_entropy(self.net(x), y)}

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=0.05)


def test_a_returned_loss_dict_is_read_and_hooks_that_need_a_trainer_run():
    result = _run(_ReturnsLossDict())
    assert result.status == "pass", result.message
    assert result.details["source"] == "returned"


def test_both_checks_share_one_trial_fit():
    data = M.loader()
    report = preflight(
        M.AutoMLP(),
        train_dataloaders=data,
        val_dataloaders=data,
        checks=[OptimizationCheck(), ValidationPathCheck()],
        progress=False,
    )
    trial = report["optimization"].details["seconds_trial"]
    assert trial == report["validation_path"].details["seconds_trial"]


def test_loss_noise_of_a_noisy_curve():
    torch.manual_seed(0)
    curve = (torch.linspace(2, 1, 200) + 0.1 * torch.randn(200)).tolist()
    assert 0.08 < difference_noise(curve, order=2) < 0.12
    assert difference_noise([1.0, 0.5], order=2) == 0.0
