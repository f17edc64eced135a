"""Kill-and-resume with StabilityGuard and EarlyStopping active ends bitwise where an uninterrupted run
ends."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import pytest
import torch
from lightning.pytorch.callbacks import Callback, ModelCheckpoint

from lightning_recipes.callbacks import EarlyStopping, StabilityGuard
from lightning_recipes.testing import TinyClassifier, fast_trainer, random_classification_loader
from tests.callbacks._shared import Kill, ResumableLoader


class ScheduledFaultyClassifier(TinyClassifier):
    """Momentum SGD + per-step StepLR (state everywhere), one NaN loss at ``fault_step``, and a validation
    loss that makes EarlyStopping's best epoch fall before the interruption."""

    def __init__(self, fault_step: int = 3) -> None:
        super().__init__(lr=0.2)
        self.fault_step = fault_step

    def training_step(self, batch: Any, batch_idx: int) -> Any:
        loss = super().training_step(batch, batch_idx)
        return loss * float("nan") if self.trainer.global_step == self.fault_step else loss

    def on_validation_epoch_end(self) -> None:
        # best at epoch 3, after the kill at step 10 (epoch 2): the restored weights are trained after the
        # resume (test_early_stopping covers best weights that predate the interruption)
        scripted = [3.0, 2.0, 2.5, 1.0, 2.7, 2.8]
        self.log("val_score", scripted[self.current_epoch])

    def configure_optimizers(self) -> Any:
        optimizer = torch.optim.SGD(self.parameters(), lr=self.hparams["lr"], momentum=0.9)
        scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=3, gamma=0.7)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}


def _callbacks(directory: Path, checkpoint: str) -> list[Callback]:
    # checks every 3 steps: at the step-8 checkpoint, steps 6 and 7 are still unchecked; the cooldown spans
    # the interruption
    settings = {"snapshot_every_n_steps": 3, "spike_warmup_steps": 2, "lr_factor": 0.5, "verbose": False}
    guard = StabilityGuard(check_every_n_steps=3, cooldown_steps=8, **settings)
    stopper = EarlyStopping("val_score", patience=10, restore_best_weights=True)
    return [guard, stopper, _checkpoint(directory, checkpoint)]


def _checkpoint(directory: Path, checkpoint: str) -> ModelCheckpoint:
    if checkpoint == "mid_epoch":
        # step 10 is the 3rd of the 4 batches of epoch 2: needs a loader that resumes mid-epoch
        return ModelCheckpoint(dirpath=directory, every_n_train_steps=5, save_top_k=-1, filename="{step}")
    # Saved at the end of every epoch, after EarlyStopping's check. (A checkpoint written by
    # `every_n_train_steps` on the last batch of an epoch is taken before that epoch's validation, and
    # Lightning does not re-run that validation on resume, so EarlyStopping would miss one check.)
    return ModelCheckpoint(directory, "{step}", save_top_k=-1, every_n_epochs=1, save_on_train_epoch_end=True)


def _trainer(directory: Path, checkpoint: str, extra: list[Callback] | None = None) -> pl.Trainer:
    callbacks = _callbacks(directory, checkpoint) + (extra or [])
    return fast_trainer(max_epochs=5, callbacks=callbacks, enable_checkpointing=True, limit_val_batches=1)


def _loaders() -> tuple[Any, Any]:
    train = random_classification_loader(num_samples=128, batch_size=32)
    return ResumableLoader(train.dataset, batch_size=32), random_classification_loader(batch_size=32)


@pytest.mark.parametrize(
    ("checkpoint", "kill_at", "resume_from"), [("epoch_end", 10, 8), ("mid_epoch", 11, 10)]
)
def test_kill_and_resume_is_bitwise_identical(
    tmp_path: Path, checkpoint: str, kill_at: int, resume_from: int
) -> None:
    torch.manual_seed(0)
    reference = ScheduledFaultyClassifier()
    trainer = _trainer(tmp_path / "uninterrupted", checkpoint)
    trainer.fit(reference, *_loaders())
    guard = next(cb for cb in trainer.callbacks if isinstance(cb, StabilityGuard))
    stopper = next(cb for cb in trainer.callbacks if isinstance(cb, EarlyStopping))
    assert [(e.step, e.cause) for e in guard.events] == [(3, "nonfinite_loss")]
    assert stopper.best_epoch == 3 and stopper.restored_best_weights

    torch.manual_seed(0)
    with pytest.raises(KeyError, match="killed"):
        _trainer(tmp_path / "killed", checkpoint, [Kill(at_step=kill_at)]).fit(
            ScheduledFaultyClassifier(), *_loaders()
        )
    path = tmp_path / "killed" / f"step={resume_from}.ckpt"
    assert path.is_file()

    torch.manual_seed(123)  # a different initialisation: everything must come from the checkpoint
    resumed = ScheduledFaultyClassifier()
    resumed_trainer = _trainer(tmp_path / "resumed", checkpoint)
    resumed_trainer.fit(resumed, *_loaders(), ckpt_path=path)
    resumed_guard = next(cb for cb in resumed_trainer.callbacks if isinstance(cb, StabilityGuard))
    resumed_stopper = next(cb for cb in resumed_trainer.callbacks if isinstance(cb, EarlyStopping))

    assert resumed_trainer.global_step == trainer.global_step == 20
    assert [(e.step, e.cause) for e in resumed_guard.events] == [(3, "nonfinite_loss")]
    assert (resumed_stopper.best_epoch, resumed_stopper.wait_count) == (
        stopper.best_epoch,
        stopper.wait_count,
    )
    for (name, a), b in zip(reference.state_dict().items(), resumed.state_dict().values()):
        assert torch.equal(a, b), name
    opt_a = trainer.optimizers[0].state_dict()["state"]
    opt_b = resumed_trainer.optimizers[0].state_dict()["state"]
    for index in opt_a:
        assert torch.equal(opt_a[index]["momentum_buffer"], opt_b[index]["momentum_buffer"])
    assert repr(resumed_guard.state_dict()) == repr(guard.state_dict())  # repr: the event value is NaN
