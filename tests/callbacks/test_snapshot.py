"""The Snapshot object alone (StabilityGuard's rollback and EarlyStopping's best weights share it)."""

from __future__ import annotations

import copy
import pickle
from typing import Any

import pytest
import torch
from torch import nn

from lightning_recipes.callbacks._snapshot import Snapshot


def _setup() -> tuple[nn.Module, torch.optim.Optimizer, torch.optim.lr_scheduler.LRScheduler]:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.Linear(4, 1))
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.1)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)
    return model, optimizer, scheduler


def _train(model: nn.Module, optimizer: torch.optim.Optimizer, scheduler: Any, steps: int) -> None:
    for _ in range(steps):
        model(torch.randn(8, 3)).pow(2).mean().backward()
        optimizer.step()
        optimizer.zero_grad()
        scheduler.step()


def _state(model: nn.Module, optimizer: torch.optim.Optimizer, scheduler: Any) -> dict[str, Any]:
    return copy.deepcopy(
        {"model": model.state_dict(), "opt": optimizer.state_dict(), "sched": scheduler.state_dict()}
    )


def _assert_equal(a: object, b: object) -> None:
    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor) and torch.equal(a, b)
    elif isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys()
        for key in a:
            _assert_equal(a[key], b[key])
    elif isinstance(a, (list, tuple)):
        assert isinstance(b, (list, tuple)) and len(a) == len(b)
        for x, y in zip(a, b):
            _assert_equal(x, y)
    else:
        assert a == b


def test_restore_brings_back_model_buffers_optimizer_and_scheduler_bitwise() -> None:
    model, optimizer, scheduler = _setup()
    _train(model, optimizer, scheduler, 3)
    expected = _state(model, optimizer, scheduler)
    snapshot = Snapshot().capture(model, [optimizer], [scheduler], step=3, extra="window")
    _train(model, optimizer, scheduler, 4)
    snapshot.restore(model, [optimizer], [scheduler])
    _assert_equal(_state(model, optimizer, scheduler), expected)
    assert (snapshot.step, snapshot.extra, snapshot.empty) == (3, "window", False)
    # restoring twice is the same (the snapshot is not consumed by the first restore)
    _train(model, optimizer, scheduler, 2)
    snapshot.restore(model, [optimizer], [scheduler])
    _assert_equal(_state(model, optimizer, scheduler), expected)
    # and training on from the restore is training on from step 3
    model2, optimizer2, scheduler2 = _setup()
    torch.manual_seed(1)
    _train(model, optimizer, scheduler, 2)
    model2.load_state_dict(expected["model"])
    optimizer2.load_state_dict(copy.deepcopy(expected["opt"]))
    scheduler2.load_state_dict(copy.deepcopy(expected["sched"]))
    torch.manual_seed(1)
    _train(model2, optimizer2, scheduler2, 2)
    _assert_equal(_state(model, optimizer, scheduler), _state(model2, optimizer2, scheduler2))


def test_the_copy_is_independent_of_the_live_tensors() -> None:
    model, _, _ = _setup()
    snapshot = Snapshot().capture(model)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(1.0)
    assert snapshot.model is not None
    assert all(snapshot.model[k].data_ptr() != v.data_ptr() for k, v in model.state_dict().items())
    assert not torch.equal(snapshot.model["0.weight"], model.state_dict()["0.weight"])


@pytest.mark.parametrize("reuse_buffers", [True, False])
def test_refresh_reuses_buffers_only_when_asked(reuse_buffers: bool) -> None:
    model, optimizer, scheduler = _setup()
    _train(model, optimizer, scheduler, 1)
    snapshot = Snapshot().capture(model, [optimizer])
    assert snapshot.model is not None
    first = {k: v.data_ptr() for k, v in snapshot.model.items()}
    first_moment = snapshot.optimizers[0]["state"][0]["exp_avg"]
    old_weight = snapshot.model["0.weight"]
    _train(model, optimizer, scheduler, 1)
    snapshot.capture(model, [optimizer], reuse_buffers=reuse_buffers)
    same = {k: v.data_ptr() for k, v in snapshot.model.items()} == first
    assert same is reuse_buffers
    assert (snapshot.optimizers[0]["state"][0]["exp_avg"] is first_moment) is reuse_buffers
    assert torch.equal(snapshot.model["0.weight"], model.state_dict()["0.weight"])
    if not reuse_buffers:  # a reference held elsewhere (a checkpoint) still holds the old values
        assert not torch.equal(old_weight, snapshot.model["0.weight"])


def test_empty_snapshot_refuses_to_restore_and_pickles() -> None:
    model, _, _ = _setup()
    snapshot = Snapshot()
    assert snapshot.empty and snapshot.step == -1
    with pytest.raises(RuntimeError, match="empty: call `capture` before `restore`"):
        snapshot.restore(model)
    clone = pickle.loads(pickle.dumps(Snapshot().capture(model, step=5)))
    assert clone.step == 5 and clone.model is not None
    _assert_equal(clone.model, model.state_dict())


def test_restore_is_strict() -> None:
    model, _, _ = _setup()
    snapshot = Snapshot().capture(nn.Linear(3, 4))
    with pytest.raises(RuntimeError, match="Missing key"):
        snapshot.restore(model)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_capture_is_pinned_and_restores_to_the_device() -> None:
    model = nn.Linear(3, 4).cuda()
    snapshot = Snapshot().capture(model, wait=True)
    assert snapshot.model is not None and all(v.is_pinned() for v in snapshot.model.values())
    expected = {k: v.detach().clone() for k, v in model.state_dict().items()}
    with torch.no_grad():
        model.weight.add_(1.0)
    snapshot.restore(model)
    _assert_equal(model.state_dict(), expected)


def test_snapshots_compare_by_value_so_their_owners_survive_pickling() -> None:
    """Issue 22: ``vars()`` of a pickled EarlyStopping must equal the original's, so a Snapshot equals its
    pickled / deep copies, and differs as soon as a tensor, a dtype, the step or the extra differs."""
    model, optimizer, scheduler = _setup()
    _train(model, optimizer, scheduler, 2)
    snapshot = Snapshot().capture(model, [optimizer], [scheduler], step=2, extra={"window": [1.0]})
    assert Snapshot() == Snapshot() and Snapshot() != snapshot
    for copied in (pickle.loads(pickle.dumps(snapshot)), copy.deepcopy(snapshot)):
        assert copied == snapshot
    nan_model = nn.Linear(2, 1)
    with torch.no_grad():
        nan_model.weight.fill_(float("nan"))
    nan = Snapshot().capture(nan_model)
    assert nan == copy.deepcopy(nan)  # NaN weights equal themselves
    changed = [copy.deepcopy(snapshot) for _ in range(5)]
    changed[0].step = 3
    next(iter(changed[1].model.values())).add_(1e-6)
    first = next(iter(changed[2].model))
    changed[2].model[first] = changed[2].model[first].double()
    changed[3].extra = {"window": [2.0]}
    next(iter(changed[4].optimizers[0]["state"].values()))["exp_avg"].mul_(2)
    assert all(other != snapshot for other in changed)
    with pytest.raises(TypeError, match="unhashable"):
        hash(snapshot)
