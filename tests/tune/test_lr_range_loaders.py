"""Several training loaders (a dict, a list, a ``CombinedLoader`` in any training mode)."""

from __future__ import annotations

import functools
from typing import Any, ClassVar

import pytest
import torch
from lightning.pytorch.utilities import CombinedLoader

from lightning_recipes.mixins import LionRecipe
from lightning_recipes.recipe import OptimizerRecipe
from lightning_recipes.testing import TinyClassifier, fast_trainer, random_classification_loader
from lightning_recipes.tune import LRRangeTest, find_lr

STEPS = 40  # a sweep long enough to read as conclusive (lr="find" refuses an inconclusive one)
SWEEP = {"num_steps": STEPS, "max_lr": 1e-2}


class MultiSourceClassifier(TinyClassifier):
    """Sums the loss over a combined batch's sources (skipping ``None``s) and records every batch it gets."""

    seen: ClassVar[list[Any]] = []

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        MultiSourceClassifier.seen.append(batch)
        parts = batch.values() if isinstance(batch, dict) else batch
        step = super().training_step
        return sum(step(part, batch_idx) for part in parts if part is not None)


class FindMultiSource(LionRecipe, MultiSourceClassifier):
    """``lr="find"`` on several loaders: the mixin's sweep is the same sweep."""


def _loaders(kind: str) -> Any:
    """A long (8 batches) and a short (3 batches) source, as ``kind``."""
    long = random_classification_loader(num_samples=256, batch_size=32, seed=1)
    short = random_classification_loader(num_samples=48, batch_size=16, seed=2)
    if kind == "dict":
        return {"long": long, "short": short}
    if kind == "list":
        return [long, short]
    return CombinedLoader({"long": long, "short": short}, mode=kind)


def _same(first: Any, second: Any) -> bool:
    if isinstance(first, torch.Tensor):
        return isinstance(second, torch.Tensor) and torch.equal(first, second)
    if isinstance(first, dict):
        same_keys = isinstance(second, dict) and first.keys() == second.keys()
        return same_keys and _same([*first.values()], [*second.values()])
    if isinstance(first, (list, tuple)):
        same_length = isinstance(second, (list, tuple)) and len(first) == len(second)
        return same_length and all(map(_same, first, second))
    return first is second is None


@functools.lru_cache  # the same seeded loaders: one run per kind serves every test that compares with it
def _run_batches(kind: str) -> list[Any]:
    MultiSourceClassifier.seen.clear()
    fast_trainer(max_steps=STEPS, max_epochs=-1).fit(MultiSourceClassifier(), _loaders(kind))
    return list(MultiSourceClassifier.seen)


@pytest.mark.parametrize(
    ("entry", "kind"),
    [
        *(("callback", kind) for kind in ("dict", "list", "max_size_cycle", "max_size", "min_size")),
        ("find_lr", "dict"),
        ("find_lr", "max_size"),
        # max_size_cycle: in max_size a loss of one or two terms is too noisy for 40 steps (inconclusive)
        ("lr_find", "max_size_cycle"),
    ],
)
def test_every_entry_point_sweeps_the_batches_fit_passes(entry: str, kind: str):
    """Before: the sweep read the first loader only, and `batch.values()` failed on its (x, y) tuple."""
    run = _run_batches(kind)
    MultiSourceClassifier.seen.clear()
    if entry == "callback":
        finder = LRRangeTest(**SWEEP, stop=True, print_result=False)
        fast_trainer(max_steps=1, callbacks=[finder]).fit(MultiSourceClassifier(), _loaders(kind))
        result, sweep = finder.result, MultiSourceClassifier.seen
        assert len(sweep) == STEPS
    elif entry == "find_lr":
        result = find_lr(MultiSourceClassifier(), train_dataloaders=_loaders(kind), **SWEEP)
        sweep = MultiSourceClassifier.seen[-STEPS:]  # after the key-inference probe, if any
    else:
        model = FindMultiSource()
        model.recipe = OptimizerRecipe(lr="find", warmup_steps=1, lr_find=SWEEP)
        fast_trainer(max_steps=1).fit(model, _loaders(kind))
        result, sweep = model.lr_find_result, MultiSourceClassifier.seen[:STEPS]
    assert result is not None and len(result.lrs) == STEPS
    assert all(_same(a, b) for a, b in zip(sweep, run))


def test_the_trainers_loader_is_left_for_the_run():
    """The sweep iterates its own view of the Trainer's CombinedLoader: the run then starts at batch 0."""
    run = _run_batches("max_size_cycle")
    MultiSourceClassifier.seen.clear()
    finder = LRRangeTest(num_steps=10, max_lr=1e-2, print_result=False)
    fast_trainer(max_steps=3, callbacks=[finder]).fit(MultiSourceClassifier(), _loaders("max_size_cycle"))
    after_sweep = MultiSourceClassifier.seen[10:]
    assert len(after_sweep) == 3 and all(_same(a, b) for a, b in zip(after_sweep, run))


def test_fit_refuses_the_sequential_mode_and_so_does_find_lr():
    with pytest.raises(ValueError, match="sequential"):
        find_lr(MultiSourceClassifier(), train_dataloaders=_loaders("sequential"), num_steps=STEPS)
