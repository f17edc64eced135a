"""`LRFindPolicy` (issue #23)."""

from __future__ import annotations

import io

import torch

from lightning_recipes.tune.lr_find_policy import CHECKPOINT_KEY, LRFindPolicy
from lightning_recipes.tune.lr_range import LRRangeResult


def _found() -> LRFindPolicy:
    policy = LRFindPolicy()
    policy.lr, policy.choice = 0.02, "peak_lr"
    policy.key = {"optimizer": "lion", "lr_find": {"num_steps": 30}}
    policy.result = LRRangeResult(
        [1e-3, 1e-2], [2.0, 1.5], [2.0, 1.5], 4e-3, 0.02, "min_div_10", "max_lr", ["Lion"]
    )
    return policy


def test_the_record_round_trips_through_a_weights_only_checkpoint():
    checkpoint: dict = {}
    _found().save(checkpoint)
    buffer = io.BytesIO()
    torch.save(checkpoint, buffer)
    buffer.seek(0)
    loaded = LRFindPolicy()
    loaded.load(torch.load(buffer, weights_only=True))
    original = _found()
    assert (loaded.lr, loaded.choice, loaded.key) == (original.lr, original.choice, original.key)
    assert loaded.result is not None and original.result is not None
    assert loaded.result.to_dict() == original.result.to_dict()


def test_nothing_found_saves_nothing_and_a_checkpoint_without_a_record_changes_nothing():
    checkpoint: dict = {}
    LRFindPolicy().save(checkpoint)
    assert CHECKPOINT_KEY not in checkpoint
    policy = _found()
    policy.load({})
    policy.load({CHECKPOINT_KEY: {"lr": None}})
    assert policy.lr == 0.02 and policy.choice == "peak_lr"
