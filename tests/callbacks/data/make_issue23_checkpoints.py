"""Writes ``issue23_*.ckpt``: real runs saved by the code before issue 23 (main at 1c012ec), which
``test_legacy_checkpoint.py`` resumes. Never regenerate them with new code; against the old tree:
``git archive 1c012ec | tar -x -C /tmp/old && PYTHONPATH=/tmp/old python
tests/callbacks/data/make_issue23_checkpoints.py tests/callbacks/data``."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Any

import torch

from lightning_recipes.callbacks import EarlyStopping, HealthMonitor, StabilityGuard
from lightning_recipes.testing import TinyClassifier, fast_trainer, random_classification_loader


class GuardModel(TinyClassifier):
    """Momentum SGD + per-step StepLR; a NaN loss at step 4 (one rollback, then an LR cooldown)."""

    def training_step(self, batch: Any, batch_idx: int) -> Any:
        loss = super().training_step(batch, batch_idx)
        return loss * float("nan") if self.trainer.global_step == 4 else loss

    def configure_optimizers(self) -> Any:
        optimizer = torch.optim.SGD(self.parameters(), lr=0.1, momentum=0.9)
        scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=3, gamma=0.7)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}


class StoppingModel(TinyClassifier):
    """A scripted ``val_score``: best at epoch 1, then worse."""

    def on_validation_epoch_end(self) -> None:
        self.log("val_score", [3.0, 2.0, 2.5, 2.6, 2.7, 2.8, 2.9][self.current_epoch])


def guard_callbacks() -> tuple[HealthMonitor, StabilityGuard]:
    monitor = HealthMonitor(check_every_n_steps=4, activation_samples=1)
    guard = StabilityGuard(
        check_every_n_steps=2,
        snapshot_every_n_steps=2,
        spike_warmup_steps=2,
        spike_window=8,
        lr_factor=0.5,
        cooldown_steps=20,
    )
    return monitor, guard


def stopper_callback() -> EarlyStopping:
    return EarlyStopping("val_score", patience=3, restore_best_weights=True, min_delta_mode="rel")


def main(out: Path) -> None:
    torch.manual_seed(0)
    monitor, guard = guard_callbacks()
    # 13 steps: checks after steps 1, 3, 5 (finds the NaN of step 4), ..., 11; step 12 is pending.
    trainer = fast_trainer(max_steps=13, callbacks=[monitor, guard], default_root_dir=tempfile.mkdtemp())
    trainer.fit(GuardModel(), random_classification_loader(batch_size=16))
    trainer.save_checkpoint(out / "issue23_stability_guard.ckpt")
    print(guard.state_dict())
    print(monitor.state_dict())

    torch.manual_seed(0)
    stopper = stopper_callback()
    trainer = fast_trainer(
        max_epochs=3,
        callbacks=[stopper],
        limit_train_batches=2,
        limit_val_batches=1,
        default_root_dir=tempfile.mkdtemp(),
    )
    loader = random_classification_loader(batch_size=16)
    trainer.fit(StoppingModel(), loader, loader)
    trainer.save_checkpoint(out / "issue23_early_stopping.ckpt")
    print({k: v for k, v in stopper.state_dict().items() if k != "best_weights"})


if __name__ == "__main__":
    main(Path(sys.argv[1]))
