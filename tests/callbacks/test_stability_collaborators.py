"""StabilityGuard's parts (issue 23) on their own: the LR cut, the snapshot keeper, the event messages."""

from __future__ import annotations

import copy
import math
import pickle

import pytest
import torch

from lightning_recipes.callbacks.stability_guard import (
    LRScaling,
    RollbackSnapshot,
    StabilityEvent,
    give_up_message,
    outcome,
)
from lightning_recipes.testing import TinyClassifier, fast_trainer, random_classification_loader


class _Factor:
    def __init__(self, value: float) -> None:
        self.value = value

    def __call__(self) -> float:
        return self.value


def test_lr_scaling_cuts_each_step_and_restores_the_rate_and_pickles_without_hooks() -> None:
    param = torch.nn.Parameter(torch.zeros(1))
    optimizer = torch.optim.SGD([param], lr=1.0)
    factor = _Factor(0.25)
    scaling = LRScaling(factor)
    scaling.attach([optimizer])
    param.grad = torch.ones(1)
    optimizer.step()
    assert param.item() == pytest.approx(-0.25) and optimizer.param_groups[0]["lr"] == 1.0
    factor.value = 1.0
    optimizer.step()
    assert param.item() == pytest.approx(-1.25)
    clone = pickle.loads(pickle.dumps(scaling))  # ddp_spawn pickles the guard with its collaborators
    assert clone._handles == [] and clone._factor() == 1.0
    scaling.detach()
    factor.value = 0.5
    optimizer.step()
    assert param.item() == pytest.approx(-2.25)  # detached: the full rate


def test_rollback_snapshot_restores_weights_and_a_copy_keeps_timings_but_not_the_snapshot() -> None:
    model = TinyClassifier()
    trainer = fast_trainer(max_steps=2)
    trainer.fit(model, random_classification_loader())
    keeper = RollbackSnapshot()
    window = torch.tensor([1.0, 2.0])
    keeper.take(trainer, model, window, wait=True)
    keeper.take(trainer, model, window, wait=True)  # the second one is timed
    before = {k: v.clone() for k, v in model.state_dict().items()}
    with torch.no_grad():
        for p in model.parameters():
            p.add_(1.0)
    assert keeper.restore(trainer, model) is window
    assert all(torch.equal(model.state_dict()[k], before[k]) for k in before)
    assert keeper.step == 2 and keeper.snapshot_s is not None
    clone = copy.deepcopy(keeper)
    assert clone.snapshot is None and clone.step == -1 and clone.snapshot_s == keeper.snapshot_s
    keeper.release()
    assert keeper.snapshot is None and keeper.snapshot_s is not None


def test_event_messages_name_the_reason() -> None:
    event = StabilityEvent(7, "nonfinite_grad_norm", math.inf, 1, 9, "give_up", 5)
    assert give_up_message(event, None, [event], None).startswith(
        "StabilityGuard gave up: non-finite gradient norm (gradient norm inf) at step 7 on rank 1, "
        "detected at step 9; "
        "no verified snapshot exists yet"
    )
    message = give_up_message(event, ([2, 4], 100, 2), [event], "/tmp/x.ckpt")
    assert "2 rollbacks within 100 steps already (max_rollbacks=2) at steps [2, 4]" in message
    assert "Emergency checkpoint (last good state, step 5): /tmp/x.ckpt." in message
    finding = StabilityEvent(7, "lr_too_high", 0.2, 0, 9, "scale_lr")
    assert outcome(finding, 0.25, 1.0, 0) == "scale_lr, learning rate x0.25 from now on"
