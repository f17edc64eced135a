"""Premise rules of session 47: each check first tests what its verdict assumes, on tiny real modules.

- ``target_leakage`` and ``input_independence``: a target only guessed by the batch convention that the model
  reads is an input (a BPR triple's negative item); a target a loss reads is still judged.
- ``loader``: a sampler whose mix changes with ``set_epoch`` (a curriculum) is judged at the run's last epoch;
  the same sampler that Lightning never advances still fails.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.utils.data import DataLoader, Sampler, TensorDataset

from lightning_recipes.checks import (
    InputIndependenceCheck,
    LoaderCheck,
    TargetLeakageCheck,
    preflight,
)
from lightning_recipes.testing import TinyClassifier

from ._models import AdamModule


class PairwiseRanker(AdamModule):
    """BPR over (user, liked item, random item) triples, a hand-written loss: no torch loss reads a target."""

    def __init__(self) -> None:
        super().__init__()
        self.users, self.items = nn.Embedding(32, 8), nn.Embedding(64, 8)

    def forward(self, user: Tensor, item: Tensor) -> Tensor:
        return (self.users(user) * self.items(item)).sum(-1)

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        user, liked, other = batch
        return -F.logsigmoid(self(user, liked) - self(user, other)).mean()


def _triples(n: int, seed: int) -> DataLoader:
    g = torch.Generator().manual_seed(seed)
    user = torch.randint(0, 32, (n,), generator=g)
    liked = (2 * user + torch.randint(0, 2, (n,), generator=g)) % 64  # each user likes two items
    return DataLoader(TensorDataset(user, liked, torch.randint(0, 64, (n,), generator=g)), batch_size=64)


def test_a_guessed_target_the_model_reads_is_an_input_not_a_leak_nor_a_pairing():
    checks = [TargetLeakageCheck(), InputIndependenceCheck()]
    report = preflight(
        PairwiseRanker(), train_dataloaders=_triples(1024, 0), val_dataloaders=_triples(256, 1), checks=checks
    )
    leakage, pairing = report["target_leakage"], report["input_independence"]
    assert leakage.status != "fail", leakage.summary
    assert leakage.details["target_as_input"]["target_guessed"] is True
    assert pairing.status == "skip" and "read by the model" in pairing.summary, pairing.summary


class TeacherForced(AdamModule):
    """Reads its target through a learned embedding added to the input: a leak a loss-read target shows."""

    def __init__(self) -> None:
        super().__init__()
        self.net, self.answer = nn.Linear(16, 4), nn.Embedding(4, 16)

    def forward(self, x: Tensor) -> Tensor:
        return self.net(x)

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        x, y = batch
        return F.cross_entropy(self(x + self.answer(y)), y)


def test_a_target_the_loss_reads_that_the_model_also_reads_still_fails():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(256, 16, generator=g)
    loader = DataLoader(TensorDataset(x, x[:, :4].argmax(-1)), batch_size=32)
    result = preflight(TeacherForced(), train_dataloaders=loader, checks=[TargetLeakageCheck()])[
        "target_leakage"
    ]
    assert result.status == "fail" and result.details["leaking_test"] == "target_as_input", result.summary


class Curriculum(Sampler[int]):
    """The easiest ``0.2 + 0.25 * epoch`` of the data (drawn with replacement); ``hook`` names the method that
    moves the epoch on (``set_epoch``, which Lightning calls, or ``advance``, which it does not)."""

    def __init__(self, difficulty: Tensor, hook: str) -> None:
        self.order, self.epoch = difficulty.argsort(), 0
        setattr(self, hook, self._move)

    def _move(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        return len(self.order)

    def __iter__(self):
        pool = self.order[: max(1, int(min(1.0, 0.2 + 0.25 * self.epoch) * len(self.order)))]
        g = torch.Generator().manual_seed(self.epoch)
        return iter(pool[torch.randint(len(pool), (len(self.order),), generator=g)].tolist())


def _curriculum(hook: str) -> DataLoader:
    g = torch.Generator().manual_seed(0)
    y = torch.arange(1000) % 4
    x = torch.randn(1000, 16, generator=g)
    difficulty = y.float() + torch.rand(1000, generator=g)  # class 3 is the hardest
    return DataLoader(TensorDataset(x, y), batch_size=50, sampler=Curriculum(difficulty, hook))


def test_a_curriculum_lightning_advances_is_judged_at_its_last_epoch_but_one_it_never_advances_fails():
    model = TinyClassifier(in_features=16, num_classes=4)
    loader = _curriculum("set_epoch")
    advanced = preflight(model, train_dataloaders=loader, checks=[LoaderCheck()])["loader"]
    assert advanced.status == "pass", advanced.summary
    assert advanced.details["epoch_dependent"]["epoch"] == 10
    assert loader.sampler.epoch == 0  # judged on a copy: the user's sampler keeps its epoch
    stuck = preflight(model, train_dataloaders=_curriculum("advance"), checks=[LoaderCheck()])["loader"]
    assert stuck.status == "fail", stuck.summary
