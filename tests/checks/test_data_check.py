"""``DataCheck``'s PASS message states only what it checked (issue 12, item 11)."""

from __future__ import annotations

from collections.abc import Iterator

import torch
from torch import Tensor

from lightning_recipes.checks import CheckContext, DataCheck

from . import _models as M


class UninspectableLoader:
    """An iterable of batches that is not a ``DataLoader``: nothing tells whether it shuffles."""

    def __init__(self, batches: list) -> None:
        self.batches = batches

    def __iter__(self) -> Iterator:
        return iter(self.batches)


def _unlabelled_batches(count: int = 4) -> list[Tensor]:
    generator = torch.Generator().manual_seed(0)
    return [torch.randn(16, M.IN, generator=generator) for _ in range(count)]


def test_pass_without_labels_or_inspectable_loader_claims_neither():
    context = CheckContext(M.MLP(), UninspectableLoader(_unlabelled_batches()))
    result = DataCheck(num_batches=4).run(context)
    assert result.status == "pass"
    assert result.message == (
        "4 batch(es) look sane: finite, inputs vary and are on a sensible scale. Not checked: labels, class "
        "mixing and shuffling (no integer targets in the batches)."
    )


def test_pass_with_float_targets_does_not_claim_labels_or_shuffling():
    result = DataCheck(num_batches=2).run(CheckContext(M.Regressor(), M.regression_loader()))
    assert result.status == "pass"
    assert "labels in range" not in result.message and "loader shuffles" not in result.message
    assert "Not checked: labels, class mixing and shuffling" in result.message


def test_pass_with_labels_from_an_uninspectable_loader_does_not_claim_shuffling():
    generator = torch.Generator().manual_seed(0)
    batches = []
    for _ in range(4):
        x = torch.randn(32, M.IN, generator=generator)
        batches.append((x, torch.randint(0, M.C, (32,), generator=generator)))
    result = DataCheck(num_batches=4).run(CheckContext(M.MLP(), UninspectableLoader(batches)))
    assert result.status == "pass"
    assert result.message == (
        "4 batch(es) look sane: finite, labels in range, inputs vary and are on a sensible scale, classes "
        "mixed. Not checked: shuffling (the loader has no sampler to inspect)."
    )


def test_pass_with_everything_checked_says_so():
    result = DataCheck(num_batches=4).run(CheckContext(M.MLP(), M.loader()))
    assert result.status == "pass"
    assert result.message == (
        "4 batch(es) look sane: finite, labels in range, inputs vary and are on a sensible scale, classes "
        "mixed, loader shuffles."
    )
