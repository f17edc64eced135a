"""Schedules: value tables (Hugging Face parity: test_hf_schedule_parity.py), pickling, resume, errors."""

from __future__ import annotations

import math
import pickle

import pytest
import torch

from lightning_recipes.optim import (
    scale_lr,
    warmup_constant,
    warmup_cosine,
    warmup_linear,
    warmup_stable_decay,
)


def _lrs(scheduler, steps):
    out = []
    for _ in range(steps):
        out.append(scheduler.get_last_lr()[0])
        scheduler.optimizer.step()
        scheduler.step()
    return out


def _optimizer(lr=2.0):
    return torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=lr)


def test_linear_constant_and_wsd_value_tables():
    linear = warmup_linear(_optimizer(), 2, 6)
    assert _lrs(linear, 9) == pytest.approx([0.0, 1.0, 2.0, 1.5, 1.0, 0.5, 0.0, 0.0, 0.0])
    floored = warmup_linear(_optimizer(), 0.5, 4, min_lr_ratio=0.5)
    assert _lrs(floored, 6) == pytest.approx([0.0, 1.0, 2.0, 1.5, 1.0, 1.0])
    assert _lrs(warmup_constant(_optimizer(), 3), 6) == pytest.approx([0.0, 2 / 3, 4 / 3, 2.0, 2.0, 2.0])
    wsd = {
        "linear": [0.0, 2.0, 2.0, 2.0, 2.0, 1.0, 0.0, 0.0],
        "cosine": [0.0, 2.0, 2.0, 2.0, 2.0, 1.0, 0.0, 0.0],
        "1-sqrt": [0.0, 2.0, 2.0, 2.0, 2.0, 2.0 * (1 - math.sqrt(0.5)), 0.0, 0.0],
    }
    for shape, want in wsd.items():
        got = _lrs(warmup_stable_decay(_optimizer(), 1, 6, decay_steps=2, decay_shape=shape), 8)
        assert got == pytest.approx(want, abs=1e-12), shape
    ratio = _lrs(warmup_stable_decay(_optimizer(), 0.25, 8, decay_steps=0.25, min_lr_ratio=0.1), 10)
    # Hugging Face's get_wsd_schedule: the warm-up starts at min_lr_ratio too (issue 12 item 9)
    assert ratio == pytest.approx([0.2, 1.1, 2.0, 2.0, 2.0, 2.0, 2.0, 1.1, 0.2, 0.2])


def test_schedulers_pickle_and_resume_from_last_epoch_alone():
    optimizer = _optimizer()
    scheduler = warmup_cosine(optimizer, 3, 10)
    _lrs(scheduler, 5)
    clone = pickle.loads(pickle.dumps(scheduler))
    assert clone.get_last_lr() == scheduler.get_last_lr()
    # a new run built the same way, then loading the state dict, continues identically
    fresh = warmup_cosine(_optimizer(), 3, 10)
    fresh.load_state_dict(scheduler.state_dict())
    fresh.optimizer.param_groups[0]["lr"] = optimizer.param_groups[0]["lr"]
    assert _lrs(fresh, 5) == _lrs(scheduler, 5)


_W = {"warmup_steps": 1, "total_steps": 10}


@pytest.mark.parametrize(
    ("factory", "kwargs", "argument"),
    [
        (warmup_cosine, {"warmup_steps": 11, "total_steps": 10}, "warmup_steps"),
        (warmup_cosine, {"warmup_steps": 1.0, "total_steps": 10}, "warmup_steps"),
        (warmup_cosine, {"warmup_steps": 1, "total_steps": 0}, "total_steps"),
        (warmup_cosine, {**_W, "min_lr_ratio": 1.5}, "min_lr_ratio"),
        (warmup_cosine, {**_W, "num_cycles": 0}, "num_cycles"),
        (warmup_linear, {"warmup_steps": "10", "total_steps": 10}, "warmup_steps"),
        (warmup_constant, {"warmup_steps": 0.1}, "total_steps"),
        (warmup_stable_decay, {"warmup_steps": 6, "total_steps": 10, "decay_steps": 5}, "decay_steps"),
        (warmup_stable_decay, {**_W, "decay_shape": "exp"}, "decay_shape"),
    ],
)
def test_errors_name_the_argument(factory, kwargs, argument):
    with pytest.raises(ValueError, match=f"`{argument}`"):
        factory(_optimizer(), **kwargs)


def test_scale_lr():
    assert scale_lr(0.1, 256, 512) == pytest.approx(0.2)
    assert scale_lr(0.1, 256, 64, rule="sqrt") == pytest.approx(0.05)
    with pytest.raises(ValueError, match="`rule`"):
        scale_lr(0.1, 256, 512, rule="cube")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="`global_batch_size`"):
        scale_lr(0.1, 256, 0)
    with pytest.raises(ValueError, match="`base_lr`"):
        scale_lr(float("inf"), 256, 512)
