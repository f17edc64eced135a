"""The LR range test's verdict."""

from __future__ import annotations

import itertools
import math
import random

import lightning.pytorch as pl
import pytest
import torch

from lightning_recipes._stats import t_quantile
from lightning_recipes.cli import main
from lightning_recipes.testing import fast_trainer, random_classification_loader
from lightning_recipes.tune import LRRangeTest, find_lr
from lightning_recipes.tune.suggest import centred, curve_verdict
from tests.helpers.loss_recorder import LossRecorder
from tests.tune._flat_models import AdamWClassifier, FlatBert, XorData

pytest.importorskip("transformers", reason="the flat-curve model is a Hugging Face BERT")


def test_curve_verdict_is_its_definition_written_out():
    """Start mean over the first quarter, noise from successive differences up to the minimum's window,
    threshold = t-quantile(1 - 0.01 / candidates, diffs - 1) * noise * sqrt(1/n_start + 1/n_window)."""
    rng = random.Random(3)
    lrs = [1e-7 * 1.2**i for i in range(40)]
    losses = [2.0 - 1.5 * (i > 25) + 0.05 * rng.gauss(0, 1) for i in range(40)]
    verdict = curve_verdict(lrs, losses)
    smoothed = centred(losses, 2)  # 40 points: half window round(40 / 20) = 2
    best = min(range(4, 40), key=smoothed.__getitem__)  # the first tenth skipped
    start = sum(losses[:10]) / 10  # first quarter: 10 points (> the 5-point window)
    seen = losses[: max(10, best + 3)]
    noise = math.sqrt(sum((b - a) ** 2 for a, b in itertools.pairwise(seen)) / (2 * (len(seen) - 1)))
    window = min(best + 3, 40) - max(0, best - 2)
    threshold = t_quantile(1 - 0.01 / 36, len(seen) - 2) * noise * math.sqrt(1 / 10 + 1 / window)
    assert verdict.start_loss == pytest.approx(start) and verdict.best_loss == pytest.approx(smoothed[best])
    assert verdict.noise == pytest.approx(noise) and verdict.threshold == pytest.approx(threshold)
    assert verdict.significant == (start - smoothed[best] > threshold) is True


@pytest.mark.parametrize("steps", [30, 100])
def test_flat_curves_pass_at_most_alpha_of_the_time(steps: int):
    """Simulated flat sweeps (Gaussian and heavy-tailed noise) read as learning at most 1% of the time."""
    rng = random.Random(0)
    lrs = [1e-7 * 1.1**i for i in range(steps)]
    passed = 0
    for trial in range(400):
        if trial % 2:
            chi2 = [sum(rng.gauss(0, 1) ** 2 for _ in range(3)) / 3 for _ in lrs]
            noise = [rng.gauss(0, 1) / math.sqrt(c) for c in chi2]  # Student-t, 3 degrees of freedom
        else:
            noise = [rng.gauss(0, 1) for _ in lrs]
        passed += curve_verdict(lrs, [2.3 + 0.05 * n for n in noise]).significant
    assert passed <= 12, passed


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_flat_sweep_is_inconclusive_with_no_pick_on_every_seed(seed: int):
    pl.seed_everything(seed, verbose=False)
    result = find_lr(FlatBert(), datamodule=XorData(), seed=seed)
    assert result.verdict == "inconclusive", result.reason
    assert result.suggestion is None and result.peak_lr is None and result.suggest("steepest") is None
    assert result.reason.startswith("inconclusive: the smoothed loss fell")
    assert "the sweep's own noise is" in result.reason and "num_steps=300" in result.reason
    with pytest.raises(ValueError, match="no learning rate to write: inconclusive"):
        result.to_yaml()
    if seed == 0:
        pytest.importorskip("matplotlib")
        assert "INCONCLUSIVE: no pick" in result.plot().get_title()


def test_lr_find_on_a_flat_model_stops_before_training_with_the_reason():
    recorder = LossRecorder()
    trainer = fast_trainer(max_steps=5, max_epochs=None, callbacks=[recorder])
    torch.manual_seed(0)
    with pytest.raises(ValueError, match=r"inconclusive, so no learning rate was chosen.*own noise is"):
        trainer.fit(FlatBert(lr="find"), datamodule=XorData())
    assert recorder.losses == []  # no training batch ran


def test_lr_range_test_apply_leaves_the_lrs_alone_when_inconclusive():
    torch.manual_seed(0)
    finder = LRRangeTest(apply=True, print_result=False)
    trainer = fast_trainer(max_steps=3, max_epochs=None, callbacks=[finder])
    with pytest.warns(UserWarning, match="not applied, the run keeps its LRs. inconclusive"):
        trainer.fit(FlatBert(lr=1e-3), datamodule=XorData())
    assert finder.result is not None and finder.result.verdict == "inconclusive"
    assert max(g["initial_lr"] for g in trainer.optimizers[0].param_groups) == pytest.approx(1e-3)


def test_tune_cli_prints_the_inconclusive_verdict_and_exits_1(capsys: pytest.CaptureFixture[str]):
    flat = "tests.tune._flat_models"
    code = main(["tune", "--model", f"{flat}.FlatBert", "--data", f"{flat}.XorData", "--num_steps", "60"])
    out = capsys.readouterr().out
    assert code == 1, out[-2000:]
    assert "no learning rate to suggest" in out and "inconclusive: the smoothed loss" in out
    assert "Paste into" not in out


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_learnable_model_still_gets_a_pick_on_every_seed(seed: int):
    torch.manual_seed(seed)
    loader = random_classification_loader(num_samples=512, shuffle=True)
    result = find_lr(AdamWClassifier(lr=1e-3), train_dataloaders=loader, seed=seed)
    assert result.verdict == "ok" and result.evidence is not None
    assert result.evidence.fall > 3 * result.evidence.threshold, result.reason
    assert result.suggestion is not None and 1e-4 < result.suggestion < 1.0
    assert result.reason.startswith("conclusive: ")
