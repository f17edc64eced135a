"""Writes ``legacy_callbacks.ckpt`` (StabilityGuard, EarlyStopping, RunManifest; code before issue 13), which
``test_legacy_checkpoint.py`` loads. Never regenerate it with new code; how it was made:
``PYTHONPATH=$PWD python tests/callbacks/data/make_legacy_checkpoint.py OUT.ckpt``."""

from __future__ import annotations

import sys
import tempfile
from typing import Any

import torch

from lightning_recipes.callbacks import EarlyStopping, RunManifest, StabilityGuard
from lightning_recipes.testing import TinyClassifier, fast_trainer, random_classification_loader


class LegacyModel(TinyClassifier):
    """Momentum SGD + per-step StepLR; a NaN loss at step 3 (one rollback); a scripted ``val_score``."""

    def training_step(self, batch: Any, batch_idx: int) -> Any:
        loss = super().training_step(batch, batch_idx)
        return loss * float("nan") if self.trainer.global_step == 3 else loss

    def on_validation_epoch_end(self) -> None:
        self.log("val_score", [3.0, 2.0, 2.5][self.current_epoch])

    def configure_optimizers(self) -> Any:
        optimizer = torch.optim.SGD(self.parameters(), lr=0.1, momentum=0.9)
        scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=3, gamma=0.7)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}


def main(path: str) -> None:
    torch.manual_seed(0)
    guard = StabilityGuard(
        check_every_n_steps=3,
        snapshot_every_n_steps=3,
        spike_warmup_steps=2,
        lr_factor=0.5,
        cooldown_steps=50,
    )
    stopper = EarlyStopping("val_score", patience=3, restore_best_weights=True)
    manifest = RunManifest(fingerprint_batches=1, log_to_loggers=False)
    # 3 epochs x 4 batches = 12 steps; checks after steps 2, 5, 8, 11 -> the final check happens at step 12;
    # stop at 11 steps so that step 9 and 10 are pending (unchecked) in the checkpoint.
    trainer = fast_trainer(
        max_epochs=3,
        max_steps=11,
        callbacks=[guard, stopper, manifest],
        limit_train_batches=4,
        limit_val_batches=1,
        default_root_dir=tempfile.mkdtemp(),
    )
    loader = random_classification_loader(batch_size=16)
    trainer.fit(LegacyModel(), loader, loader)
    trainer.save_checkpoint(path)
    print(guard.state_dict())
    print({k: v for k, v in stopper.state_dict().items() if k != "best_weights"})


if __name__ == "__main__":
    main(sys.argv[1])
