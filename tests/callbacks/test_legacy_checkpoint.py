"""A checkpoint written before the engines left StabilityGuard / EarlyStopping / RunManifest (issue 13) loads.

``data/legacy_callbacks.ckpt`` was saved by ``data/make_legacy_checkpoint.py`` at commit 392aa66 (before it):
11 steps of momentum SGD + StepLR, a NaN loss at step 3 rolled back at step 6, steps 9 and 10 still unchecked.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import torch

from lightning_recipes.callbacks import EarlyStopping, RunManifest, StabilityGuard
from lightning_recipes.testing import TinyClassifier, fast_trainer, random_classification_loader

CHECKPOINT = Path(__file__).parent / "data" / "legacy_callbacks.ckpt"
GUARD_KEY = "StabilityGuard{'mode': 'rollback'}"
STOPPER_KEY = "EarlyStopping{'monitor': 'val_score', 'mode': 'min'}"


class LegacyModel(TinyClassifier):
    """The model of ``make_legacy_checkpoint.py`` (no fault after the resume), scripted ``val_score``."""

    def on_validation_epoch_end(self) -> None:
        self.log("val_score", [3.0, 2.0, 2.5, 2.6, 2.7, 2.8][self.current_epoch])

    def configure_optimizers(self) -> Any:
        optimizer = torch.optim.SGD(self.parameters(), lr=0.1, momentum=0.9)
        scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=3, gamma=0.7)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}


def _callbacks() -> tuple[StabilityGuard, EarlyStopping, RunManifest]:
    guard = StabilityGuard(
        check_every_n_steps=3,
        snapshot_every_n_steps=3,
        spike_warmup_steps=2,
        lr_factor=0.5,
        cooldown_steps=50,
    )
    return (
        guard,
        EarlyStopping("val_score", patience=3, restore_best_weights=True),
        RunManifest(fingerprint_batches=1),
    )


def test_state_keys_and_states_of_the_legacy_checkpoint_load() -> None:
    states = torch.load(CHECKPOINT, weights_only=False)["callbacks"]
    guard, stopper, manifest = _callbacks()
    assert {guard.state_key, stopper.state_key, manifest.state_key} == set(states)
    guard.load_state_dict(states[GUARD_KEY])
    stopper.load_state_dict(states[STOPPER_KEY])
    manifest.load_state_dict(states["RunManifest"])

    assert (guard.rollbacks, guard.skipped_steps, guard._rollback_steps, guard._cooldown_left) == (
        1,
        0,
        [3],
        45,
    )
    [event] = guard.events
    assert (
        event.step,
        event.cause,
        event.rank,
        event.detected_at_step,
        event.action,
        event.restored_step,
    ) == (
        3,
        "nonfinite_loss",
        0,
        6,
        "rollback",
        3,
    )
    assert math.isnan(event.value)
    assert guard._window.tolist() == pytest.approx(
        [1.3862946, 1.3765929, 1.3259969, 1.2436283, 1.3486193, 1.2554368], abs=1e-6
    )
    assert [
        (step, pytest.approx(loss), pytest.approx(norm)) for step, loss, norm in guard.state_dict()["pending"]
    ] == [
        (9, 1.2277668, 0.5139912),
        (10, 1.1211301, 0.6085490),
    ]
    assert guard._snapshot_step == 9

    assert (stopper.wait_count, stopper.best_epoch, stopper.best_step, float(stopper.best_score)) == (
        1,
        1,
        8,
        2.0,
    )
    assert stopper.min_delta_mode == "abs" and stopper.stopped_step == 0
    best = states[STOPPER_KEY]["best_weights"]
    assert stopper.state_dict()["best_weights"].keys() == best.keys()
    assert all(torch.equal(stopper.state_dict()["best_weights"][k], best[k]) for k in best)

    assert manifest._previous is not None
    assert (
        manifest._previous["data_fingerprint"]
        == states["RunManifest"]["manifest"]["data_fingerprint"]["sha256"]
    )


def test_a_real_trainer_resumes_from_the_legacy_checkpoint(tmp_path: Path) -> None:
    """Resume for 4 more steps: the two pending steps are checked with the next one (check at step 12), the
    event history and counters carry on, and the best weights (from before the interruption) are restored."""
    states = torch.load(CHECKPOINT, weights_only=False)["callbacks"]
    guard, stopper, manifest = _callbacks()
    trainer = fast_trainer(
        max_epochs=6,
        max_steps=15,
        callbacks=[guard, stopper, manifest],
        limit_train_batches=4,
        limit_val_batches=1,
        default_root_dir=tmp_path,
    )
    loader = random_classification_loader(batch_size=16)
    model = LegacyModel()
    trainer.fit(model, loader, loader, ckpt_path=CHECKPOINT)
    assert trainer.global_step == 15
    assert guard.rollbacks == 1 and [e.step for e in guard.events] == [3]
    # steps 9, 10 (unchecked in the checkpoint) and 11 passed the check at 12, steps 12-14 the check at 15
    assert guard._window.numel() == 6 + 6
    assert guard._window[6:8].tolist() == pytest.approx([1.2277668, 1.1211301], abs=1e-6)
    assert stopper.best_epoch == 1 and stopper.restored_best_weights
    best = states[STOPPER_KEY]["best_weights"]
    assert all(torch.equal(model.state_dict()[k], best[k]) for k in best)
    assert (
        manifest.manifest["resumed_from"]["data_fingerprint"]
        == (states["RunManifest"]["manifest"]["data_fingerprint"]["sha256"])
    )
