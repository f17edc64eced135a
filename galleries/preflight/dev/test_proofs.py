"""Proofs of the development gallery (``galleries/preflight/dev``): every planted bug is real and every
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

    PYTHONPATH=$PWD OMP_NUM_THREADS=1 .venv/bin/python -m pytest galleries/preflight/dev/test_proofs.py \\
        -q -p no:cacheprovider -n 0 --gallery-proofs
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import lightning.pytorch as pl
import pytest
import torch
from torch.utils.data import DataLoader

from galleries.preflight.dev import _data as D
from galleries.preflight.dev import _models as M
from galleries.preflight.dev.cases import BUGS, HEALTHY


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


def _target(batch: Any, key: str | None) -> torch.Tensor:
    return batch[key] if key is not None else batch[-1]


def accuracy(key: str | None = None) -> Callable[[Any, DataLoader], float]:
    """Fraction of held-out targets (``batch[key]``, default the last element) that ``predict`` gets right;
    targets of -100 (padding) are left out."""

    @torch.no_grad()
    def score(model: Any, loader: DataLoader) -> float:
        model.eval()
        right = total = 0
        for batch in loader:
            target = _target(batch, key)
            real = target != D.IGNORE
            right += int((model.predict(batch) == target)[real].sum())
            total += int(real.sum())
        return right / total

    return score


@torch.no_grad()
def r2(model: Any, loader: DataLoader, key: str | None = None, column: int | None = None) -> float:
    """Coefficient of determination of ``predict`` on held-out regression targets."""
    model.eval()
    pred = torch.cat([model.predict(b) for b in loader])
    y = torch.cat([_target(b, key) for b in loader])
    y = y[:, column] if column is not None else y
    return float(1 - ((pred - y) ** 2).sum() / ((y - y.mean()) ** 2).sum())


@torch.no_grad()
def neg_mse(model: Any, loader: DataLoader) -> float:
    """Minus the mean squared error of ``predict`` against the last element of the batch."""
    model.eval()
    return -float(torch.cat([((model.predict(b) - b[-1]) ** 2).flatten() for b in loader]).mean())


@torch.no_grad()
def iou(model: Any, loader: DataLoader) -> float:
    """Intersection over union of the predicted and true masks, over all held-out pixels."""
    model.eval()
    inter = union = 0.0
    for batch in loader:
        pred, mask = model.predict(batch).bool(), batch[-1].bool()
        inter += float((pred & mask).sum())
        union += float((pred | mask).sum())
    return inter / union


@torch.no_grad()
def validation_report_error(model: Any, loader: DataLoader) -> float:
    """Minus how far the accuracy ``validation_step`` reports is from the model's real accuracy."""
    model.eval()
    reported = real = total = 0
    for x, y in loader:
        reported += int((model.validation_logits(x).argmax(-1) == y).sum())
        real += int((model.predict((x, y)) == y).sum())
        total += len(y)
    return -abs(reported - real) / total


def _same(make: Callable[[], DataLoader]) -> Callable[[bool], DataLoader]:
    return lambda fixed: make()


@dataclass(frozen=True)
class Twin:
    """How a bug is proved: the model and data builders (``fixed`` selects the twin), the clean held-out
    data (``held_out(fixed)``: the serving pipeline of each twin), the score (higher is better), the training
    budget and the minimum gap. ``optimism``: the score is minus how far the validation accuracy overstates
    the held-out accuracy."""

    model: Callable[..., pl.LightningModule]  # model(fixed=...)
    data: Callable[..., dict[str, Any]]  # data(fixed=..., seed=...)
    held_out: Callable[[bool], DataLoader]
    score: Callable[[Any, DataLoader], float]
    epochs: int
    min_gap: float
    optimism: bool = False


TWINS: dict[str, Twin] = {
    "shuffled_labels": Twin(
        M.DigitsCNN, D.shuffled_labels, _same(lambda: D.held_out_digits(images=True)), accuracy(), 8, 0.5
    ),
    "hflip_position_target": Twin(
        M.BlobLocator, D.hflip_position_target, _same(D.held_out_blobs), partial(r2, column=0), 5, 0.5
    ),
    "siamese_partners_reshuffled_in_collate": Twin(
        M.SiameseDigits, D.siamese_pairs, _same(D.held_out_pairs), accuracy(), 10, 0.2
    ),
    "denoising_noise_added_in_place": Twin(
        M.DenoisingAE, D.denoising, _same(D.held_out_noisy_digits), neg_mse, 15, 0.02
    ),
    "multitask_loss_weight_key_typo": Twin(
        M.DigitAndParity, D.multitask, _same(D.held_out_two_tasks), accuracy("parity"), 8, 0.3
    ),
    "tagging_tags_padded_left": Twin(
        M.BiGRUTagger, D.tagging, _same(D.held_out_tagging), accuracy("tags"), 3, 0.2
    ),
    "segmentation_crop_offset_drawn_twice": Twin(
        M.TinyFCN, D.segmentation, _same(D.held_out_scenes), iou, 5, 0.3
    ),
    "forecast_window_ends_at_target": Twin(
        M.WindowForecaster, D.forecast, _same(D.held_out_forecast), r2, 10, 0.2
    ),
    "batch_statistics_at_eval": Twin(
        M.SensorClassifier,
        D.sensor_loaders,
        _same(lambda: D.held_out_sensors(batch_size=8)),
        accuracy(),
        8,
        0.05,
    ),
    "validation_step_skips_normalisation": Twin(
        M.NormalisedSensorClassifier,
        D.sensor_loaders,
        _same(lambda: D.sensor_loaders()["val_dataloaders"]),
        validation_report_error,
        5,
        0.2,
    ),
    "split_shares_patients": Twin(
        M.PatientMLP, D.patient_split, _same(D.held_out_patients), accuracy(), 15, 0.1, optimism=True
    ),
    "scheduler_stepped_every_batch": Twin(
        M.StepLRDigitsMLP, D.digits_flat, _same(D.held_out_digits), accuracy(), 8, 0.2
    ),
    "rezero_gate_not_a_parameter": Twin(
        M.ReZeroRegressor, D.wavy_loaders, _same(D.held_out_wavy), r2, 10, 0.3
    ),
    "metadata_input_never_used": Twin(
        M.CodeMatcher, D.code_matching, _same(D.held_out_code_matches), accuracy("match"), 10, 0.2
    ),
    "masked_lm_labels_read_after_masking": Twin(
        M.MaskedLM, D.masked_lm, _same(D.held_out_masked_lm), accuracy("labels"), 3, 0.3
    ),
    "categorical_codes_per_file": Twin(
        M.StoreSales, D.store_codes, D.held_out_sales, partial(r2, key="sales"), 10, 0.15
    ),
}


def _run(twin: Twin, fixed: bool, seed: int) -> tuple[float, list[float]]:
    pl.seed_everything(seed, verbose=False)
    model = twin.model(fixed=fixed)
    data = twin.data(fixed=fixed, seed=seed)
    losses, _ = fit(model, data, twin.epochs)
    score = twin.score(model, twin.held_out(fixed))
    if twin.optimism:
        score = -(twin.score(model, data["val_dataloaders"]) - score)
    return score, losses


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
