"""Issue #32: ``StabilityGuard()`` defaults leave a converged classifier alone: its one hard sample's batch
(20-35x a ~0.007 loss, ``finetune_models.one_hard_sample``) is under the spike floor, or the veto holds."""

from __future__ import annotations

import statistics

import pytest
import torch

from lightning_recipes.callbacks import StabilityGuard
from lightning_recipes.callbacks import _rollback as rollback_module
from lightning_recipes.testing import fast_trainer
from tests.helpers.finetune_models import BlobsMLP, loader, one_hard_sample
from tests.helpers.loss_recorder import LossRecorder
from tests.helpers.speed import VirtualTime


@pytest.fixture(autouse=True)
def _frozen_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """Snapshots every check, as on an idle machine: a busy one times a preempted snapshot as costly, spaces
    them out, and changes where rollbacks land (the adaptive interval reads the host clock)."""
    monkeypatch.setattr(rollback_module, "time", VirtualTime())


def _fit(seed: int, guard: StabilityGuard, validate: bool = False) -> list[float]:
    data, recorder = one_hard_sample(seed=seed), LossRecorder()
    torch.manual_seed(seed)
    trainer = fast_trainer(max_steps=340, max_epochs=-1, callbacks=[recorder, guard])
    trainer.fit(BlobsMLP(lr=1e-2), loader(data, 32, seed), loader(data, 288) if validate else None)
    return recorder.losses


@pytest.mark.parametrize("seed", [0, 2, 3])
def test_default_guard_leaves_a_converged_classifier_alone(seed: int) -> None:
    guard = StabilityGuard(verbose=False)  # the defaults under test (no validation: the floor alone)
    losses = _fit(seed, guard)
    assert [(e.step, e.action) for e in guard.events] == [] and guard.rollbacks == 0
    assert len(losses) == 340  # no "gave up"
    level = statistics.median(losses[-60:])
    assert level < 0.01 and max(losses[-60:]) > 15 * level  # converged, with the hard sample's batches


def test_give_up_over_spikes_is_vetoed_while_validation_holds() -> None:
    """Floor off: the rollbacks come, but validation held since the first spike: warn, widen, train on."""
    with pytest.raises(RuntimeError, match="gave up: loss spike"):  # no validation to veto: as before
        _fit(0, StabilityGuard(verbose=False, spike_floor=0.0, val_monitor=None), validate=True)
    guard = StabilityGuard(verbose=False, spike_floor=0.0)
    with pytest.warns(UserWarning, match=r"`val_loss` has not worsened .* Not giving up"):
        losses = _fit(0, guard, validate=True)
    actions = [e.action for e in guard.events]
    assert actions[:4] == ["rollback", "rollback", "rollback", "widen"] and "give_up" not in actions
    assert len(losses) == 340 and guard._veto.floor > 0.1
    clone = StabilityGuard()  # the floor, the reference loss and the validations resume with a checkpoint
    clone.load_state_dict(guard.state_dict())
    assert clone._veto.floor == guard._veto.floor and float(clone._reference) == float(guard._reference) > 1.0
    assert [(s, float(v)) for s, v in clone._veto.values] == [(s, float(v)) for s, v in guard._veto.values]
