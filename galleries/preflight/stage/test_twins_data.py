"""Twin tests of the data-stage gallery (``galleries/preflight/stage/data_stages.py``): every planted bug is
real, proved without lightning_recipes.

For each bug, the buggy model and its healthy twin (the same model and data with the bug fixed) are trained
with a real ``lightning.Trainer`` (CPU, fixed seed) and scored on the SAME clean held-out data. The test
asserts that the buggy run trains (its training loss falls; where the bug is that nothing trains, it
asserts zero optimizer steps) and ends measurably worse: the healthy-minus-buggy gap exceeds a stated minimum
and three times the seed noise (the difference between the healthy twin trained with two seeds). For a split
leak the score is how far the validation accuracy overstates the held-out accuracy (optimism; lower is
better).

Healthy look-alikes get one test each: a few epochs with a real ``Trainer`` run without error and the loss
falls.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import lightning.pytorch as pl
import pytest
import torch
from torch.utils.data import DataLoader

from galleries.preflight.stage import _data_stage_data as D
from galleries.preflight.stage import _data_stage_models as M
from galleries.preflight.stage.data_stages import BUGS, HEALTHY


class _Losses(pl.Callback):
    """The training loss of every step (test-only host reads)."""

    def __init__(self) -> None:
        self.losses: list[float] = []

    def on_train_batch_end(
        self, trainer: pl.Trainer, pl_module: Any, outputs: Any, batch: Any, i: int
    ) -> None:
        self.losses.append(float(outputs["loss"]))


def fit(model: pl.LightningModule, data: dict[str, Any], seed: int, epochs: int) -> tuple[list[float], int]:
    """Train ``model`` on ``data["train_dataloaders"]``; the per-step losses and the optimizer steps."""
    pl.seed_everything(seed, verbose=False)
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
        limit_val_batches=0,
        callbacks=[losses],
    )
    trainer.fit(model, train_dataloaders=data["train_dataloaders"])
    return losses.losses, trainer.global_step


@torch.no_grad()
def accuracy(model: Any, loader: DataLoader) -> float:
    """Fraction of held-out samples whose ``predict`` equals the target (last element of the batch)."""
    model.eval()
    right = total = 0
    for batch in loader:
        target = batch["labels"] if isinstance(batch, dict) else batch[-1]
        right += int((model.predict(batch) == target).sum())
        total += len(target)
    return right / total


@torch.no_grad()
def r2(model: Any, loader: DataLoader) -> float:
    """Coefficient of determination of ``predict`` on held-out regression data."""
    model.eval()
    pred = torch.cat([model.predict(b) for b in loader])
    y = torch.cat([b[-1] for b in loader])
    return float(1 - ((pred - y) ** 2).sum() / ((y - y.mean()) ** 2).sum())


def _test_digits(
    images: bool = False, column: bool = False, batch_size: int = 64
) -> Callable[[], DataLoader]:
    def make() -> DataLoader:
        x, y = D.digits("test", images)
        if column:
            x = torch.cat([x, torch.randint(0, 10, (len(y), 1), generator=D.gen(11)).float()], 1)
        return D.loader(x, y, batch_size=batch_size, shuffle=False)

    return make


@dataclass(frozen=True)
class Twin:
    """A bug's buggy and fixed builds, the clean held-out data, the score (higher is better), the budget."""

    buggy: Callable[[], pl.LightningModule]
    fixed: Callable[[], pl.LightningModule]
    data: Callable[..., dict[str, Any]]  # data(fixed=..., seed=...)
    held_out: Callable[[], DataLoader]
    epochs: int
    min_gap: float
    score: Callable[[Any, DataLoader], float] = accuracy
    optimism: bool = False  # score = -(validation accuracy - held-out accuracy)
    trains: bool = True  # False: the bug is that no optimizer step happens
    held_out_fixed: Callable[[], DataLoader] | None = (
        None  # the fixed twin's inference pipeline, if it differs
    )


TWINS: dict[str, Twin] = {
    "st_drop_last_empty_loader": Twin(
        M.DigitsMLP, M.DigitsMLP, D.drop_last_empty, _test_digits(), epochs=40, min_gap=0.3, trains=False
    ),
    "st_sampler_weights_by_frequency": Twin(
        M.DigitsMLP, M.DigitsMLP, D.sampler_frequency_weights, _test_digits(), epochs=8, min_gap=0.08
    ),
    "st_subset_sampler_skips_last_classes": Twin(
        M.DigitsMLP, M.DigitsMLP, D.subset_sampler_first_rows, _test_digits(), epochs=8, min_gap=0.08
    ),
    "st_unshuffled_class_sorted_loader": Twin(
        M.DigitsMLP, M.DigitsMLP, D.unshuffled_sorted, _test_digits(), epochs=8, min_gap=0.05
    ),
    "st_repeat_measurements_split_by_row": Twin(
        M.SubjectMLP,
        M.SubjectMLP,
        D.repeat_measurements_split,
        lambda: D.loader(*D.subjects(100, 4, seed=3)[:2], batch_size=64, shuffle=False),
        epochs=15,
        min_gap=0.1,
        optimism=True,
    ),
    "st_scanner_column_shortcut_train_only": Twin(
        lambda: M.DigitsMLP(in_features=65),
        lambda: M.DigitsMLP(in_features=65),
        D.shortcut_column,
        _test_digits(column=True),
        epochs=8,
        min_gap=0.1,
    ),
    "st_train_images_transposed": Twin(
        M.DigitsCNN, M.DigitsCNN, D.transposed_train_images, _test_digits(images=True), epochs=4, min_gap=0.2
    ),
    "st_val_pipeline_skips_standardisation": Twin(
        M.DigitsMLP,
        M.DigitsMLP,
        D.val_skips_standardisation,
        _test_digits(),
        epochs=8,
        min_gap=0.1,
        held_out_fixed=lambda: D.loader(
            D.standardise_like_train(D.digits("test")[0]), D.digits("test")[1], shuffle=False
        ),
    ),
    "st_batch_statistics_in_eval": Twin(
        M.BatchStatsMLP,
        lambda: M.BatchStatsMLP(batch_stats=False),
        D.digits_loaders,
        _test_digits(batch_size=4),
        epochs=5,
        min_gap=0.07,
    ),
    "st_positions_indexed_by_batch_slot": Twin(
        M.PositionTransformer,
        lambda: M.PositionTransformer(positions_over_batch=False),
        D.first_token_loaders,
        lambda: D.loader(*D.first_token_sequences(512, 3), shuffle=False),
        epochs=5,
        min_gap=0.3,
    ),
    "st_frame_mean_includes_padding": Twin(
        M.FrameMeanClassifier,
        lambda: M.FrameMeanClassifier(read_padding=False),
        D.loudness_loaders,
        lambda: D.loader(*D.loudness_recordings(512, 3), shuffle=False),
        epochs=15,
        min_gap=0.15,
    ),
    "st_ignore_index_drops_class_zero": Twin(
        lambda: M.DigitsMLP(ignore_index=0),
        M.DigitsMLP,
        D.digits_loaders,
        _test_digits(),
        epochs=8,
        min_gap=0.04,
    ),
    "st_regression_targets_raw_units": Twin(
        M.Regressor,
        lambda: M.Regressor(target_scale=1000.0),
        D.raw_unit_regression,
        lambda: D.loader(*D.regression(512, 3, 1000.0), shuffle=False),
        epochs=10,
        min_gap=0.1,
        score=r2,
    ),
    "st_nll_loss_on_raw_logits": Twin(
        M.NllOnLogitsMLP, M.DigitsMLP, D.digits_loaders, _test_digits(), epochs=8, min_gap=0.2
    ),
    "st_sigmoid_head_on_rating_targets": Twin(
        M.RatingRegressor,
        lambda: M.RatingRegressor(sigmoid_head=False),
        D.star_rating_loaders,
        lambda: D.loader(*D.star_ratings(512, 3), shuffle=False),
        epochs=10,
        min_gap=0.3,
        score=r2,
    ),
    "st_gaussian_nll_log_precision_sign": Twin(
        M.GaussianRegressor,
        lambda: M.GaussianRegressor(flipped=False),
        D.heteroscedastic_loaders,
        lambda: D.loader(*D.heteroscedastic(512, 3), shuffle=False),
        epochs=10,
        min_gap=0.2,
        score=r2,
    ),
}


def _score(twin: Twin, model: Any, data: dict[str, Any], fixed: bool) -> float:
    pipeline = twin.held_out_fixed if fixed and twin.held_out_fixed is not None else twin.held_out
    held_out = twin.score(model, pipeline())
    if twin.optimism:
        return -(accuracy(model, data["val_dataloaders"]) - held_out)
    return held_out


def _run(twin: Twin, fixed: bool, seed: int) -> tuple[float, list[float], int]:
    model = (twin.fixed if fixed else twin.buggy)()
    data = twin.data(fixed=fixed, seed=seed)
    losses, steps = fit(model, data, seed, twin.epochs)
    return _score(twin, model, data, fixed), losses, steps


def _falls(losses: list[float]) -> bool:
    k = max(1, len(losses) // 10)
    return sum(losses[-k:]) / k < sum(losses[:k]) / k


def test_every_bug_has_a_twin() -> None:
    assert sorted(case.id for case in BUGS) == sorted(TWINS)


@pytest.mark.parametrize("case_id", sorted(TWINS))
def test_bug_ends_measurably_worse_than_its_healthy_twin(case_id: str) -> None:
    twin = TWINS[case_id]
    healthy, healthy_losses, _ = _run(twin, fixed=True, seed=0)
    healthy_again, _, _ = _run(twin, fixed=True, seed=1)
    buggy, buggy_losses, buggy_steps = _run(twin, fixed=False, seed=0)
    noise = abs(healthy - healthy_again)
    gap = healthy - buggy
    print(f"{case_id}: healthy {healthy:.3f} / {healthy_again:.3f}, buggy {buggy:.3f}, gap {gap:.3f}")
    assert _falls(healthy_losses), "the healthy twin does not train: the comparison means nothing"
    if twin.trains:
        assert _falls(buggy_losses), f"the buggy run's training loss does not fall: {buggy_losses[:3]} ..."
    else:
        assert buggy_steps == 0, f"the buggy run made {buggy_steps} optimizer steps"
    assert gap > twin.min_gap, f"gap {gap:.3f} <= {twin.min_gap} (healthy {healthy:.3f}, buggy {buggy:.3f})"
    assert gap > 3 * noise, f"gap {gap:.3f} is within 3x the seed noise {noise:.3f}"


@pytest.mark.parametrize("case", HEALTHY, ids=lambda case: case.id)
def test_healthy_case_trains(case: Any) -> None:
    losses, steps = fit(case.model(), case.data(), seed=0, epochs=3)
    assert steps > 0
    assert _falls(losses), f"{case.id}: loss does not fall ({losses[0]:.3f} -> {losses[-1]:.3f})"
