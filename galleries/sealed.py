"""What the sealed galleries (``galleries/preflight/sealed``) and the sealed zoos
(``galleries/health/zoo*``) share, once: data and model building blocks, the plain-Lightning
proof harness of galleries C, D and E, and the zoos' case record and proof tests.

Nothing here imports ``lightning_recipes`` product code: a proof that uses it still proves its fixture with
plain torch and Lightning.

>>> mlp(4, 8, 1)
Sequential(
  (0): Linear(in_features=4, out_features=8, bias=True)
  (1): ReLU()
  (2): Linear(in_features=8, out_features=1, bias=True)
)
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any

import lightning.pytorch as pl
import torch
from sklearn.datasets import load_digits
from torch import nn
from torch.utils.data import DataLoader, Dataset


# --- data ---------------------------------------------------------------------------------------------------
def gen(seed: int) -> torch.Generator:
    """A fresh CPU generator seeded with ``seed`` (a builder's own RNG, apart from the global one)."""
    return torch.Generator().manual_seed(seed)


def loaders(train: Dataset, val: Dataset, batch_size: int = 32, **train_kwargs: Any) -> dict[str, DataLoader]:
    """``train_dataloaders`` (shuffled unless a sampler or ``shuffle`` is given) and ``val_dataloaders``."""
    if "sampler" not in train_kwargs:
        train_kwargs.setdefault("shuffle", True)
    return {
        "train_dataloaders": DataLoader(train, batch_size=batch_size, **train_kwargs),
        "val_dataloaders": DataLoader(val, batch_size=256),
    }


@cache
def _digits() -> tuple[torch.Tensor, torch.Tensor]:
    x, y = load_digits(return_X_y=True)
    return torch.tensor(x / 16.0, dtype=torch.float32), torch.tensor(y)


DIGIT_PARTS = {"train": slice(0, 1000), "val": slice(1000, 1300), "test": slice(1300, None)}


def digits(part: str, shape: tuple[int, ...] = (64,)) -> tuple[torch.Tensor, torch.Tensor]:
    """A fixed part of scikit-learn's 1,797 digits in [0, 1], each pixel row of ``shape``: ``train`` (1,000),
    ``val`` (300) or ``test`` (497, held out)."""
    x, y = _digits()
    rows = DIGIT_PARTS[part]
    return x[rows].view(-1, *shape).clone(), y[rows].clone()


# --- models -------------------------------------------------------------------------------------------------
def mlp(*widths: int, dropout: float = 0.0) -> nn.Sequential:
    """Linear layers of the given widths with ReLU (and dropout) between them."""
    layers: list[nn.Module] = []
    for i, (a, b) in enumerate(itertools.pairwise(widths)):
        layers.append(nn.Linear(a, b))
        if i < len(widths) - 2:
            layers += [nn.ReLU(), nn.Dropout(dropout)] if dropout else [nn.ReLU()]
    return nn.Sequential(*layers)


class AdamModule(pl.LightningModule):
    """Adam on every parameter; ``loss(batch)`` (the subclass's) is logged in training and validation."""

    lr = 3e-3

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.Adam(self.parameters(), lr=self.lr)

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        loss = self.loss(batch)
        self.log("train_loss", loss)
        return loss

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        self.log("val_loss", self.loss(batch))


# --- the proof harness --------------------------------------------------------------------------------------
class TrainLosses(pl.Callback):
    """The training loss of every step."""

    def __init__(self) -> None:
        self.losses: list[float] = []

    def on_train_batch_end(self, trainer: Any, module: Any, outputs: Any, batch: Any, batch_idx: int) -> None:
        loss = outputs["loss"] if isinstance(outputs, dict) else outputs
        self.losses.append(float(loss))

    def fell(self) -> bool:
        """The last 10 steps' mean loss is below the first 10 steps'."""
        return sum(self.losses[-10:]) < sum(self.losses[:10])


def fit(model: pl.LightningModule, loaders: dict[str, Any], epochs: int) -> pl.LightningModule:
    """``model`` fitted on ``loaders["train_dataloaders"]`` for ``epochs`` by a silent CPU ``Trainer`` (no
    validation during the fit), in eval mode, with its :class:`TrainLosses` as ``model.train_losses``."""
    model.train_losses = TrainLosses()
    trainer = pl.Trainer(
        callbacks=[model.train_losses],
        max_epochs=epochs,
        accelerator="cpu",
        devices=1,
        enable_progress_bar=False,
        logger=False,
        enable_checkpointing=False,
        enable_model_summary=False,
        num_sanity_val_steps=0,
        limit_val_batches=0,
    )
    trainer.fit(model, train_dataloaders=loaders["train_dataloaders"])
    return model.eval()


def trained(
    make: Callable[[], pl.LightningModule], data: Callable[[], dict[str, Any]], seed: int, epochs: int
) -> tuple[Any, dict[str, Any]]:
    """``make()`` fitted on ``data()`` (both built after seeding with ``seed``) for ``epochs``: the model in
    eval mode with its ``train_losses``, and the loaders."""
    pl.seed_everything(seed, verbose=False)
    loaders = data()
    return fit(make(), loaders, epochs), loaders


@dataclass(frozen=True)
class Proof:
    """How a bug of galleries C, D and E is proved against its healthy twin ``(model, data)`` builders."""

    twin: tuple[Callable[[], pl.LightningModule], Callable[[], dict[str, Any]]]
    error: Callable[[pl.LightningModule], float]
    min_gap: float
    epochs: int
    lie: Callable[[Any, dict[str, Any]], float] | None = None  # the figure validation reports, in error units
    worse: bool = True  # prove the model is worse than its twin (not for a split bug: same model)


_twins: dict[tuple, tuple[pl.LightningModule, dict[str, Any]]] = {}


def twin_runs(proof: Proof) -> list[tuple[pl.LightningModule, dict[str, Any]]]:
    """The twin trained with seeds 0 and 1 (once per twin and length: bugs may share a twin)."""
    for seed in (0, 1):
        if (proof.twin, proof.epochs, seed) not in _twins:
            _twins[proof.twin, proof.epochs, seed] = trained(*proof.twin, seed, proof.epochs)
    return [_twins[proof.twin, proof.epochs, seed] for seed in (0, 1)]


def check_gallery(gallery: Any, proofs: dict[str, Proof], bugs: int, healthy: int) -> None:
    """Every bug of ``gallery`` has a proof, there are at least ``bugs`` and ``healthy`` cases, ids unique."""
    assert set(proofs) == {case.id for case in gallery.BUGS}
    assert len(gallery.BUGS) >= bugs and len(gallery.HEALTHY) >= healthy
    cases = gallery.BUGS + gallery.HEALTHY
    assert len({case.id for case in cases}) == len(cases)


def check_bug_is_real(case: Any, proof: Proof) -> None:
    """The bug's training loss falls, yet its held-out error exceeds its twin's by more than ``min_gap`` and
    3x the twin's seed noise (or its validation figure overstates the held-out one more than the twin's)."""
    twins = twin_runs(proof)
    buggy, buggy_loaders = trained(case.model, case.data, 0, proof.epochs)
    healthy = [proof.error(model) for model, _ in twins]
    noise = abs(healthy[0] - healthy[1])
    bug_error = proof.error(buggy)
    assert buggy.train_losses.fell(), "a silent bug: its training loss falls"
    print(f"\n{case.id}: bug {bug_error:.4f}  twin {healthy[0]:.4f} / {healthy[1]:.4f} (noise {noise:.4f})")
    if proof.lie:
        claimed = proof.lie(buggy, buggy_loaders)
        twin_lies = [proof.error(model) - proof.lie(model, loaders) for model, loaders in twins]
        lie = bug_error - claimed
        print(f"  validation reports {claimed:.4f}: overstated by {lie:.4f}; the twin's {twin_lies}")
        assert lie > proof.min_gap + max(twin_lies) and lie > 3 * noise, (lie, twin_lies, noise)
    if proof.worse:
        gap = bug_error - healthy[0]
        assert gap > proof.min_gap and gap > 3 * noise, (gap, noise)


def check_healthy_case_fits(case: Any, epochs: int) -> None:
    """Trained for ``epochs``, the case's training loss falls and its validation loss drops by more than 10%
    of its distance from the model's declared constant ``loss_offset`` (0 by default)."""
    pl.seed_everything(0, verbose=False)
    loaders, model = case.data(), case.model()

    @torch.no_grad()
    def val_loss() -> float:
        model.eval()
        loss = torch.stack([model.loss(batch) for batch in loaders["val_dataloaders"]]).mean().item()
        model.train()  # Lightning keeps the mode it finds
        return loss

    before = val_loss()
    model, _ = trained(lambda: model, lambda: loaders, seed=0, epochs=epochs)
    after = val_loss()
    floor = getattr(model, "loss_offset", 0.0)  # a declared constant in the loss is not progress to make
    print(f"\n{case.id}: val loss {before:.4f} -> {after:.4f} (constant offset {floor})")
    assert model.train_losses.fell() and before - after > 0.1 * abs(before - floor)
