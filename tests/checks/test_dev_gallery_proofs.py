"""Proofs of the development gallery (``tests/checks/dev_gallery``): every planted bug is real and every
healthy look-alike trains, shown with plain torch and Lightning (no lightning_recipes code runs).

For each bug, the buggy case and its healthy twin (the same model and data with the bug fixed) are trained
with a real ``lightning.Trainer`` (CPU, fixed seeds) and scored on the SAME clean held-out data (higher is
better). The healthy-minus-buggy gap must exceed a stated minimum and three times the seed noise (the
difference between the healthy twin trained with two seeds). Where the bug is in what validation reports
rather than in what the model learns, the score is minus the reporting error: ``-|validation-path metric -
held-out metric|``.

Healthy cases get one test each: a short fit with a real ``Trainer`` (validation included) runs and the loss
falls.

Skipped unless pytest runs with ``--gallery-proofs``::

    PYTHONPATH=$PWD OMP_NUM_THREADS=1 .venv/bin/python -m pytest tests/checks/test_dev_gallery_proofs.py \\
        -q -p no:cacheprovider -n 0 --gallery-proofs
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import lightning.pytorch as pl
import pytest
import torch
from torch.utils.data import DataLoader

from tests.checks.dev_gallery import _data as D
from tests.checks.dev_gallery import _models as M
from tests.checks.dev_gallery.cases import BUGS, HEALTHY

pytestmark = pytest.mark.gallery_proof


@pytest.fixture(autouse=True)
def _only_with_gallery_proofs(request: pytest.FixtureRequest) -> None:
    if not request.config.getoption("--gallery-proofs"):
        pytest.skip("a gallery proof (~2 CPU-minutes for the whole file): run with --gallery-proofs")


class _Losses(pl.Callback):
    """The training loss of every step."""

    def __init__(self) -> None:
        self.losses: list[float] = []

    def on_train_batch_end(
        self, trainer: pl.Trainer, pl_module: Any, outputs: Any, batch: Any, i: int
    ) -> None:
        self.losses.append(float(outputs["loss"]))


def fit(
    model: pl.LightningModule, data: dict[str, Any], epochs: int, validate: bool = False
) -> tuple[list[float], int]:
    """Train ``model`` on ``data["train_dataloaders"]`` (and validate, if asked); per-step losses, steps."""
    losses = _Losses()
    trainer = pl.Trainer(
        accelerator="cpu",
        devices=1,
        max_epochs=epochs,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=0,
        limit_val_batches=1.0 if validate else 0,
        callbacks=[losses],
    )
    trainer.fit(
        model,
        train_dataloaders=data["train_dataloaders"],
        val_dataloaders=data["val_dataloaders"] if validate else None,
    )
    return losses.losses, trainer.global_step


# ---------------------------------------------------------------- scores (higher is better)


@torch.no_grad()
def accuracy(model: Any, loader: DataLoader) -> float:
    """Fraction of held-out targets (last element of a tuple batch) that ``predict`` gets right."""
    model.eval()
    right = total = 0
    for batch in loader:
        target = batch[-1]
        right += int((model.predict(batch) == target).sum())
        total += target.numel()
    return right / total


@torch.no_grad()
def r2_x(model: Any, loader: DataLoader) -> float:
    """Coefficient of determination of ``predict`` against the first column of the target."""
    model.eval()
    pred = torch.cat([model.predict(b) for b in loader])
    y = torch.cat([b[-1][:, 0] for b in loader])
    return float(1 - ((pred - y) ** 2).sum() / ((y - y.mean()) ** 2).sum())


@dataclass(frozen=True)
class Twin:
    """How a bug is proved: the model and data builders (``fixed`` selects the twin), the clean held-out data,
    the score (higher is better), the training budget and the minimum gap."""

    model: Callable[..., pl.LightningModule]  # model(fixed=...)
    data: Callable[..., dict[str, Any]]  # data(fixed=..., seed=...)
    held_out: Callable[[], DataLoader]
    score: Callable[[Any, DataLoader], float]
    epochs: int
    min_gap: float


TWINS: dict[str, Twin] = {
    "shuffled_labels": Twin(
        M.DigitsCNN, D.shuffled_labels, lambda: D.held_out_digits(images=True), accuracy, 8, min_gap=0.5
    ),
    "hflip_position_target": Twin(
        M.BlobLocator, D.hflip_position_target, D.held_out_blobs, r2_x, 5, min_gap=0.5
    ),
}


def _run(twin: Twin, fixed: bool, seed: int) -> tuple[float, list[float]]:
    pl.seed_everything(seed, verbose=False)
    model = twin.model(fixed=fixed)
    losses, _ = fit(model, twin.data(fixed=fixed, seed=seed), twin.epochs)
    return twin.score(model, twin.held_out()), losses


def _falls(losses: list[float]) -> bool:
    k = max(1, len(losses) // 10)
    return sum(losses[-k:]) / k < 0.9 * sum(losses[:k]) / k


def test_every_bug_has_a_twin() -> None:
    assert sorted(case.id for case in BUGS) == sorted(TWINS)


@pytest.mark.parametrize("case_id", sorted(TWINS))
def test_bug_ends_measurably_worse_than_its_healthy_twin(case_id: str) -> None:
    twin = TWINS[case_id]
    torch.set_num_threads(1)
    healthy, healthy_losses = _run(twin, fixed=True, seed=0)
    healthy_again, _ = _run(twin, fixed=True, seed=1)
    buggy, _ = _run(twin, fixed=False, seed=0)
    noise = abs(healthy - healthy_again)
    gap = healthy - buggy
    print(f"{case_id}: healthy {healthy:.3f} / {healthy_again:.3f}, buggy {buggy:.3f}, gap {gap:.3f}")
    assert _falls(healthy_losses), "the healthy twin does not train: the comparison means nothing"
    assert gap > twin.min_gap, f"gap {gap:.3f} <= {twin.min_gap} (healthy {healthy:.3f}, buggy {buggy:.3f})"
    assert gap > 3 * noise, f"gap {gap:.3f} is within 3x the seed noise {noise:.3f}"


@pytest.mark.parametrize("case", HEALTHY, ids=lambda case: case.id)
def test_healthy_case_trains(case: Any) -> None:
    torch.set_num_threads(1)
    pl.seed_everything(0, verbose=False)
    losses, steps = fit(case.model(), case.data(), epochs=3, validate=True)
    assert steps > 0
    assert _falls(losses), f"{case.id}: loss does not fall ({losses[0]:.3f} -> {losses[-1]:.3f})"
