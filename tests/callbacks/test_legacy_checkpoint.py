"""Checkpoints written by older code load: ``data/legacy_callbacks.ckpt`` (main at 392aa66: momentum SGD +
StepLR, a NaN at step 3 rolled back at 6, steps 9-10 unchecked) and issue 23's. The scripts that wrote them
live in git: ``git show 76b164b:tests/callbacks/data/make_legacy_checkpoint.py`` and
``git show 0f25dff:tests/callbacks/data/make_issue23_checkpoints.py`` (run against the old tree)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import torch

from lightning_recipes.callbacks import EarlyStopping, HealthMonitor, RunManifest, StabilityGuard
from lightning_recipes.testing import TinyClassifier, fast_trainer, random_classification_loader

CHECKPOINT = Path(__file__).parent / "data" / "legacy_callbacks.ckpt"
GUARD_KEY = "StabilityGuard{'mode': 'rollback'}"
STOPPER_KEY = "EarlyStopping{'monitor': 'val_score', 'mode': 'min'}"


class LegacyModel(TinyClassifier):
    """The model of the scripts that wrote the checkpoints (no fault after the resume: momentum SGD +
    StepLR), with a scripted ``val_score``."""

    def on_validation_epoch_end(self) -> None:
        self.log("val_score", [3.0, 2.0, 2.5, 2.6, 2.7, 2.8][self.current_epoch])

    def configure_optimizers(self) -> Any:
        optimizer = torch.optim.SGD(self.parameters(), lr=0.1, momentum=0.9)
        scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=3, gamma=0.7)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}


def _callbacks() -> tuple[StabilityGuard, EarlyStopping, RunManifest]:
    settings = {"snapshot_every_n_steps": 3, "spike_warmup_steps": 2, "lr_factor": 0.5, "cooldown_steps": 50}
    guard = StabilityGuard(check_every_n_steps=3, **settings)
    stopper = EarlyStopping("val_score", patience=3, restore_best_weights=True)
    return guard, stopper, RunManifest(fingerprint_batches=1)


def test_state_keys_and_states_of_the_legacy_checkpoint_load() -> None:
    states = torch.load(CHECKPOINT, weights_only=False)["callbacks"]
    guard, stopper, manifest = _callbacks()
    assert {guard.state_key, stopper.state_key, manifest.state_key} == set(states)
    guard.load_state_dict(states[GUARD_KEY])
    stopper.load_state_dict(states[STOPPER_KEY])
    manifest.load_state_dict(states["RunManifest"])

    counters = (guard.rollbacks, guard.skipped_steps, guard._rollback_steps, guard._cooldown_left)
    assert counters == (1, 0, [3], 45)
    [e] = guard.events
    expected = (3, "nonfinite_loss", 0, 6, "rollback", 3)
    assert (e.step, e.cause, e.rank, e.detected_at_step, e.action, e.restored_step) == expected
    assert math.isnan(e.value)
    window = [1.3862946, 1.3765929, 1.3259969, 1.2436283, 1.3486193, 1.2554368]
    assert guard._window.tolist() == pytest.approx(window, abs=1e-6)
    pending = [(s, pytest.approx(loss), pytest.approx(n)) for s, loss, n in guard.state_dict()["pending"]]
    assert pending == [(9, 1.2277668, 0.5139912), (10, 1.1211301, 0.6085490)]
    assert guard._snapshot_step == 9

    restored = (stopper.wait_count, stopper.best_epoch, stopper.best_step, float(stopper.best_score))
    assert restored == (1, 1, 8, 2.0)
    assert stopper.min_delta_mode == "abs" and stopper.stopped_step == 0
    best = states[STOPPER_KEY]["best_weights"]
    assert stopper.state_dict()["best_weights"].keys() == best.keys()
    assert all(torch.equal(stopper.state_dict()["best_weights"][k], best[k]) for k in best)

    assert manifest._previous is not None
    fingerprint = states["RunManifest"]["manifest"]["data_fingerprint"]["sha256"]
    assert manifest._previous["data_fingerprint"] == fingerprint


def test_a_real_trainer_resumes_from_the_legacy_checkpoint(tmp_path: Path) -> None:
    """Resume for 4 more steps: the two pending steps are checked with the next one (check at step 12), the
    event history and counters carry on, and the best weights (from before the interruption) are restored."""
    states = torch.load(CHECKPOINT, weights_only=False)["callbacks"]
    guard, stopper, manifest = _callbacks()
    trainer = fast_trainer(max_epochs=6, max_steps=15, callbacks=[guard, stopper, manifest],
                           limit_train_batches=4, limit_val_batches=1, default_root_dir=tmp_path)  # fmt: skip
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
    fingerprint = states["RunManifest"]["manifest"]["data_fingerprint"]["sha256"]
    assert manifest.manifest["resumed_from"]["data_fingerprint"] == fingerprint


# Written by ``make_issue23_checkpoints.py`` with main at 1c012ec (before StabilityGuard's step skipping
# and findings repair, and HealthMonitor's rules, became collaborators).

GUARD_CHECKPOINT = Path(__file__).parent / "data" / "issue23_stability_guard.ckpt"
STOPPER_CHECKPOINT = Path(__file__).parent / "data" / "issue23_early_stopping.ckpt"


class Issue23StoppingModel(TinyClassifier):
    def on_validation_epoch_end(self) -> None:
        self.log("val_score", [3.0, 2.0, 2.5, 2.6, 2.7, 2.8, 2.9][self.current_epoch])


def _issue23_guard_callbacks() -> tuple[HealthMonitor, StabilityGuard]:
    monitor = HealthMonitor(check_every_n_steps=4, activation_samples=1)
    settings = {"snapshot_every_n_steps": 2, "spike_warmup_steps": 2, "spike_window": 8, "cooldown_steps": 20}
    guard = StabilityGuard(check_every_n_steps=2, lr_factor=0.5, **settings)
    return monitor, guard


def test_the_issue23_stability_guard_checkpoint_loads_with_every_key() -> None:
    states = torch.load(GUARD_CHECKPOINT, weights_only=False)["callbacks"]
    monitor, guard = _issue23_guard_callbacks()
    assert {monitor.state_key, guard.state_key} == set(states)
    guard.load_state_dict(states[guard.state_key])
    monitor.load_state_dict(states[monitor.state_key])
    saved = states[guard.state_key]
    # the checkpoint format is unchanged: the same keys, the same values back out (plus issue #32's two, at
    # their defaults: no reference loss yet, no veto)
    again = guard.state_dict()
    assert again.keys() - saved.keys() == {"reference", "veto"} and saved.keys() <= again.keys()
    assert again["reference"] == 0.0 and again["veto"] == {"floor": 0.0, "validations": []}
    counters = (again["rollbacks"], again["rollback_steps"], again["cooldown_left"], again["snapshot_step"])
    assert counters == (1, [4], 13, 12)
    assert again["window"] == pytest.approx(saved["window"]) and len(again["window"]) == 8
    pending = [(s, pytest.approx(loss), pytest.approx(norm)) for s, loss, norm in again["pending"]]
    assert pending == [(12, 1.3419027, 0.5116671)]
    [event] = guard.events
    expected = (4, "nonfinite_loss", 6, "rollback", 4)
    assert (event.step, event.cause, event.detected_at_step, event.action, event.restored_step) == expected
    # everything the old monitor saved comes back unchanged; issue #25's noise model added history entries,
    # which an old checkpoint fills with "unknown" (no standard errors, steps by position, no ratios yet)
    reloaded, old = monitor.state_dict(), states[monitor.state_key]
    assert {k: v for k, v in reloaded.items() if k != "history"} == {k: old[k] for k in old if k != "history"}
    history = reloaded["history"]
    assert {k: history[k] for k in old["history"]} == old["history"]
    added = {k: v for k, v in history.items() if k not in old["history"]}
    assert set(added) == {"loss_ses", "loss_steps", "ratios", "lrs", "dead_at_start", "start_loss"}
    assert math.isnan(added["start_loss"])  # issue #32's not_learning: the loss at initialisation, unknown
    assert all(math.isnan(v) for v in added["loss_ses"]) and len(added["loss_ses"]) == len(history["losses"])
    assert added["loss_steps"] == list(range(len(history["losses"])))
    assert (added["ratios"], added["lrs"], added["dead_at_start"]) == ([], [], -1.0)
    assert [f.problem for f in monitor.findings] == ["nonfinite_activations"] and monitor.checks == 4


def test_a_real_trainer_resumes_from_the_issue23_stability_guard_checkpoint(tmp_path: Path) -> None:
    """4 more steps: the pending step 12 is checked with step 13 (check at 14), then 14-15; the cooldown, the
    event history and the monitor's history carry on."""
    states = torch.load(GUARD_CHECKPOINT, weights_only=False)["callbacks"]
    monitor, guard = _issue23_guard_callbacks()
    trainer = fast_trainer(max_epochs=5, max_steps=17, callbacks=[monitor, guard], default_root_dir=tmp_path)
    trainer.fit(LegacyModel(), random_classification_loader(batch_size=16), ckpt_path=GUARD_CHECKPOINT)
    assert trainer.global_step == 17
    assert guard.rollbacks == 1 and [(e.step, e.cause) for e in guard.events] == [(4, "nonfinite_loss")]
    assert guard.state_dict()["cooldown_left"] == 13 - 4
    window = guard.state_dict()["window"]
    # the 8-step window moved on by steps 12-15; the checkpoint's pending loss of step 12 entered it
    assert window[:4] == pytest.approx(states[guard.state_key]["window"][4:])
    assert window[4] == pytest.approx(1.3419027, abs=1e-6)
    assert [p[0] for p in guard.state_dict()["pending"]] == [16]
    assert guard._snapshot_step == 16
    saved_history = states[monitor.state_key]["history"]["losses"]
    assert monitor.checks == 5 + 1  # one at step 16, one at the end of training (step 17's loss)
    assert monitor.state_dict()["history"]["losses"][: len(saved_history)] == saved_history
    assert [f.problem for f in monitor.findings] == ["nonfinite_activations"]


def test_a_real_trainer_resumes_from_the_issue23_early_stopping_checkpoint(tmp_path: Path) -> None:
    """Saved after epoch 2 with one bad epoch counted (best epoch 1, ``min_delta_mode='rel'``): two more bad
    epochs stop the run at epoch 4 (patience 3) and put the saved best weights back."""
    states = torch.load(STOPPER_CHECKPOINT, weights_only=False)["callbacks"]
    stopper = EarlyStopping("val_score", patience=3, restore_best_weights=True, min_delta_mode="rel")
    [key] = states
    assert key == stopper.state_key
    stopper.load_state_dict(states[key])
    restored = (stopper.wait_count, stopper.best_epoch, stopper.best_step, float(stopper.best_score))
    assert restored == (1, 1, 4, 2.0)
    assert stopper.min_delta_mode == "rel"
    callbacks = [EarlyStopping("val_score", patience=3, restore_best_weights=True, min_delta_mode="rel")]
    trainer = fast_trainer(max_epochs=7, callbacks=callbacks, limit_train_batches=2, limit_val_batches=1,
                           default_root_dir=tmp_path)  # fmt: skip
    resumed = trainer.early_stopping_callback
    assert isinstance(resumed, EarlyStopping)
    loader = random_classification_loader(batch_size=16)
    model = Issue23StoppingModel()
    trainer.fit(model, loader, loader, ckpt_path=STOPPER_CHECKPOINT)
    assert trainer.current_epoch == 5 and resumed.stopped_epoch == 4
    assert resumed.best_epoch == 1 and resumed.restored_best_weights
    best = states[key]["best_weights"]
    assert all(torch.equal(model.state_dict()[k], best[k]) for k in best)
