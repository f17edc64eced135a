"""Twin tests of the loop-stage gallery (``galleries/preflight/stage/loop_stages.py``), without the library.

Each planted bug is trained with a real ``Trainer`` for the run its case plans, next to its healthy twin (the
same model with the bug fixed): the twin with two seeds, the bug with the first. Optimisation and schedule
bugs must end with a held-out accuracy below the twin's; validation-path bugs must make validation REPORT an
accuracy below what the twin reports, while the buggy model itself (its training forward) is as good as the
twin. The gap must exceed 3x the twin's seed-to-seed difference and the case's stated minimum.
"""

from __future__ import annotations

import warnings
from typing import Any

import lightning.pytorch as pl
import pytest
import torch
from lightning.pytorch.callbacks import Callback

from galleries.preflight.stage.loop_stages import BUGS, HEALTHY, HELDOUT, TWINS

SEEDS = (0, 1)
BATCHES = 60  # healthy cases: training batches (2 epochs of 30)
# bugs whose training loss still falls (the others stop the fit itself: nothing moves, or it oscillates)
LOSS_FALLS = {
    "st_param_groups_miss_stem",
    "st_warmup_registered_per_epoch",
    "st_onecycle_steps_per_epoch_is_dataset_size",
    "st_ema_rebinds_instead_of_updating",
    "st_ema_decay_too_slow_for_run",
    "st_eval_copy_made_once_at_setup",
    "st_val_normalises_differently",
    "st_val_head_on_first_gru_layer",
}


class _Losses(Callback):
    def __init__(self) -> None:
        self.values: list[float] = []

    def on_train_batch_end(
        self, trainer: pl.Trainer, module: Any, outputs: Any, batch: Any, idx: int
    ) -> None:
        loss = outputs["loss"] if isinstance(outputs, dict) else outputs
        self.values.append(float(loss))


def _trainer(**kwargs: Any) -> pl.Trainer:
    return pl.Trainer(
        accelerator="cpu",
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=0,
        **kwargs,
    )


def _heldout_accuracy(model: pl.LightningModule, loader: Any) -> float:
    model.eval()
    right = total = 0
    with torch.no_grad():
        for x, y in loader:
            right += int((model(x).argmax(-1) == y).sum())
            total += len(y)
    return right / total


def _fit(build: Any, data: dict[str, Any], seed: int) -> tuple[float, float, list[float]]:
    """Trains one model for the planned epochs; returns (held-out accuracy of the trained model, the
    validation accuracy its own validation_step reports, the training losses)."""
    pl.seed_everything(seed, verbose=False)
    model = build()
    losses = _Losses()
    epochs = data["max_epochs"]
    trainer = _trainer(max_epochs=epochs, check_val_every_n_epoch=epochs, callbacks=[losses])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer.fit(model, data["train_dataloaders"], data["val_dataloaders"])
    reported = float(trainer.callback_metrics["val_acc"])  # what validation reported at the end of the fit
    return _heldout_accuracy(model, data["val_dataloaders"]), reported, losses.values


@pytest.mark.parametrize("case", BUGS, ids=lambda c: c.id)
def test_bug_costs_more_than_seed_noise(case: Any) -> None:
    twin, compared, minimum = TWINS[case.id]
    healthy = [_fit(twin, case.data(), seed) for seed in SEEDS]
    buggy = [_fit(case.model, case.data(), SEEDS[0])]
    index = 0 if compared == HELDOUT else 1
    healthy_acc = [run[index] for run in healthy]
    buggy_acc = [run[index] for run in buggy]
    noise = abs(healthy_acc[0] - healthy_acc[1])
    gap = sum(healthy_acc) / 2 - buggy_acc[0]
    print(f"{case.id}: healthy {healthy_acc} buggy {buggy_acc} gap {gap:.3f} noise {noise:.3f}")
    assert gap > 3 * noise, (case.id, healthy_acc, buggy_acc)
    assert gap > minimum, (case.id, healthy_acc, buggy_acc)
    if compared != HELDOUT:
        # the model trained fine: only what validation reports is wrong
        true_gap = abs(sum(run[0] for run in healthy) / 2 - buggy[0][0])
        assert true_gap < max(0.03, 3 * abs(healthy[0][0] - healthy[1][0])), (case.id, healthy, buggy)
    if case.id in LOSS_FALLS:
        losses = buggy[0][2]
        assert sum(losses[-10:]) / 10 < 0.8 * sum(losses[:10]) / 10, (case.id, losses[:10], losses[-10:])


@pytest.mark.parametrize("case", HEALTHY, ids=lambda c: c.id)
def test_healthy_trains_and_loss_falls(case: Any) -> None:
    data = case.data()
    pl.seed_everything(0, verbose=False)
    model = case.model()
    losses = _Losses()
    trainer = _trainer(
        max_epochs=2, limit_train_batches=BATCHES // 2, limit_val_batches=1, callbacks=[losses]
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer.fit(model, data["train_dataloaders"], data["val_dataloaders"])
    assert len(losses.values) >= 40  # 2 epochs of min(30, the loader's length) batches, one loss each
    assert sum(losses.values[-10:]) / 10 < 0.9 * sum(losses.values[:10]) / 10, (
        losses.values[:10],
        losses.values[-10:],
    )
