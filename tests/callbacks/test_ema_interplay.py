"""Lightning's EMAWeightAveraging next to our EarlyStopping(restore_best_weights), StabilityGuard and the
preflight: which weights are "best", who wins at the end of training, what a rollback does to the average."""

from __future__ import annotations

import math
from typing import Any

import lightning.pytorch as pl
import pytest
import torch
from lightning.pytorch.callbacks import EMAWeightAveraging
from torch import Tensor

from lightning_recipes.callbacks import EarlyStopping, StabilityGuard
from lightning_recipes.testing import TinyClassifier, fast_trainer, random_classification_loader
from tests.helpers.weights import same, weights


class ValidationRecorder(TinyClassifier):
    """Keeps a copy of the weights every validation run evaluated, by epoch, and its mean loss."""

    def __init__(self, lr: float = 0.5) -> None:
        super().__init__(lr=lr)
        self.validated: dict[int, dict[str, Tensor]] = {}
        self.val_losses: dict[int, list[float]] = {}

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        if batch_idx == 0 and not self.trainer.sanity_checking:
            self.validated[self.current_epoch] = {k: v.detach().clone() for k, v in self.state_dict().items()}
        super().validation_step(batch, batch_idx)


def _val_loss(model: TinyClassifier, loader: Any) -> float:
    x, y = next(iter(loader))
    with torch.no_grad():
        return float(model.loss(model(x), y))


@pytest.mark.parametrize("stopper_first", [True, False])
def test_restore_best_weights_restores_the_averaged_weights_validation_scored(stopper_first: bool) -> None:
    """Validation scores the EMA weights (the callback swaps them in); the best are those, in either order."""
    torch.manual_seed(0)
    model = ValidationRecorder()
    stopper = EarlyStopping("val_loss", patience=2, restore_best_weights=True)
    ema = EMAWeightAveraging(decay=0.5)
    train = random_classification_loader(num_samples=64, batch_size=16, seed=0)
    val = random_classification_loader(num_samples=64, batch_size=64, seed=1)
    callbacks = [stopper, ema] if stopper_first else [ema, stopper]
    trainer = fast_trainer(max_epochs=6, callbacks=callbacks, limit_val_batches=1)
    trainer.fit(model, train, val)
    assert stopper.restored_best_weights
    last_epoch = max(model.validated)
    assert stopper.best_epoch < last_epoch, "the test needs a best epoch before the last one"
    best = model.validated[stopper.best_epoch]
    assert not same(best, model.validated[last_epoch])
    assert same(weights(model), best)
    assert math.isclose(_val_loss(model, val), float(stopper.best_score), rel_tol=1e-6)


class StageRecorder(ValidationRecorder):
    """Also keeps the weights the first batch of a ``validate`` / ``test`` / ``predict`` call saw."""

    def __init__(self, lr: float = 0.5) -> None:
        super().__init__(lr=lr)
        self.seen: dict[str, dict[str, Tensor]] = {}

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        if batch_idx == 0 and self.trainer.state.fn == "validate":
            self.seen["validate"] = weights(self)
        super().validation_step(batch, batch_idx)

    def test_step(self, batch: Any, batch_idx: int) -> None:
        if batch_idx == 0:
            self.seen["test"] = weights(self)
        x, y = batch
        self.log("test_loss", self.loss(self(x), y))

    def predict_step(self, batch: Any, batch_idx: int) -> Tensor:
        if batch_idx == 0:
            self.seen["predict"] = weights(self)
        return self(batch[0])


@pytest.mark.parametrize("stopper_first", [True, False])
def test_validate_test_predict_and_checkpoint_after_fit_use_the_restored_best_weights(
    stopper_first: bool, tmp_path: Any
) -> None:
    """Issue 22: EMAWeightAveraging's average after fit is the best weights too (validate swaps it in)."""
    torch.manual_seed(0)
    model = StageRecorder()
    stopper = EarlyStopping("val_loss", patience=2, restore_best_weights=True)
    ema = EMAWeightAveraging(decay=0.5)
    train = random_classification_loader(num_samples=64, batch_size=16, seed=0)
    val = random_classification_loader(num_samples=64, batch_size=64, seed=1)
    trainer = fast_trainer(max_epochs=6, callbacks=[stopper, ema] if stopper_first else [ema, stopper],
                           limit_val_batches=1)  # fmt: skip
    trainer.fit(model, train, val)
    best = model.validated[stopper.best_epoch]
    assert stopper.best_epoch < max(model.validated), "the test needs a best epoch before the last one"
    assert not same(best, model.validated[max(model.validated)])
    assert same(weights(model), best)

    (result,) = trainer.validate(model, val, verbose=False)
    assert same(model.seen["validate"], best)
    assert math.isclose(result["val_loss"], float(stopper.best_score), rel_tol=1e-6)
    assert same(weights(model), best)  # the swap back leaves them in the module
    trainer.test(model, val, verbose=False)
    trainer.predict(model, val)
    assert same(model.seen["test"], best) and same(model.seen["predict"], best)
    trainer.save_checkpoint(tmp_path / "after_fit.ckpt")
    saved = torch.load(tmp_path / "after_fit.ckpt", weights_only=False)["state_dict"]
    assert same(saved, best)


def test_without_restore_the_ema_average_is_the_final_model() -> None:
    torch.manual_seed(0)
    model = ValidationRecorder()
    ema = EMAWeightAveraging(decay=0.5)
    stopper = EarlyStopping("val_loss", patience=5)
    trainer = fast_trainer(max_epochs=2, callbacks=[stopper, ema], limit_val_batches=1)
    loader = random_classification_loader(num_samples=64, batch_size=16)
    trainer.fit(model, loader, loader)
    assert not stopper.restored_best_weights
    assert same(weights(model), model.validated[1])  # the last validation saw the final average


class NaNAtStep(TinyClassifier):
    """A NaN loss at ``global_step == 3`` (poisons the update and, through it, the weights)."""

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        loss = super().training_step(batch, batch_idx)
        return loss * float("nan") if self.trainer.global_step == 3 else loss


@pytest.mark.parametrize("guard_first", [True, False])
def test_rollback_keeps_the_ema_average_finite(guard_first: bool) -> None:
    """The guard's snapshot holds every weight average too (``_snapshot.capture_averages``), so a rollback
    undoes what the bad steps did to it, in either order (it once failed with EMA listed first)."""
    torch.manual_seed(0)
    model = NaNAtStep()
    guard = StabilityGuard(check_every_n_steps=1, snapshot_every_n_steps=1, spike_k=None)
    ema = EMAWeightAveraging(decay=0.5)
    trainer = fast_trainer(max_steps=6, callbacks=[guard, ema] if guard_first else [ema, guard])
    trainer.fit(model, random_classification_loader(num_samples=64, batch_size=16))
    assert [event.action for event in guard.events] == ["rollback"]
    assert all(torch.isfinite(v).all() for v in weights(model).values())  # the EMA average, copied in


def test_preflight_leaves_the_ema_average_at_the_initial_weights() -> None:
    from lightning_recipes import Preflight

    class Probe(pl.Callback):
        def on_train_batch_start(
            self, trainer: pl.Trainer, pl_module: pl.LightningModule, *args: Any
        ) -> None:
            if trainer.global_step == 0:
                self.first_step_weights = weights(pl_module)

    torch.manual_seed(0)
    model = ValidationRecorder()
    initial = weights(model)
    probe = Probe()
    ema = EMAWeightAveraging(decay=0.0)  # decay 0: the average is the last weights it was updated with
    preflight = Preflight(checks=["init_loss", "overfit_batch"], on_fail="raise", print_report=False)
    trainer = fast_trainer(max_steps=1, callbacks=[ema, preflight, probe])
    trainer.fit(model, random_classification_loader(num_samples=32, batch_size=16))
    assert preflight.report is not None and not preflight.report.failures
    assert same(probe.first_step_weights, initial)  # the checks ran on copies
