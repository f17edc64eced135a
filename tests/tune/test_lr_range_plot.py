"""The LR range test's plot: a real sweep's curve rendered with matplotlib (Agg), its loss axis cut to the
useful range so that one diverged step does not flatten the part that decides the LR."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import pytest

from lightning_recipes.testing import TinyClassifier, random_classification_loader
from lightning_recipes.tune import LRRangeResult, find_lr


@pytest.fixture(autouse=True)
def _close_figures() -> None:
    yield
    plt.close("all")


def _curve(losses: list[float]) -> LRRangeResult:
    lrs = [1e-5 * 1.5**i for i in range(len(losses))]
    return LRRangeResult(
        lrs, losses, losses, lrs[len(lrs) // 2], lrs[len(lrs) // 2] * 5, "min_div_10", "diverged"
    )


def test_a_divergence_to_449_is_cut_off_and_marked(tmp_path: Path):
    """Before: the axis ran to ~470 and the useful range 0.6-2.3 was a flat line at the bottom."""
    losses = [2.3, 2.3, 2.2, 2.0, 1.6, 1.1, 0.8, 0.6, 0.7, 1.4, 5.0, 40.0, 449.0]
    axes = _curve(losses).plot()
    bottom, top = axes.get_ylim()
    assert bottom < 0.6 and 2.3 < top < 3 * 2.3  # the minimum to a few times the start
    assert (top - bottom) > 0.25 * (2.3 - 0.6)  # the useful part fills the axis
    (clipped,) = axes.collections  # the losses above the axis, on its top edge
    offsets = clipped.get_offsets()
    assert len(offsets) == 2 and all(y == pytest.approx(top) for _, y in offsets)
    assert "2 losses above the axis (max 449)" in [t.get_text() for t in axes.get_legend().get_texts()]
    path = tmp_path / "lr.png"
    axes.figure.savefig(path)
    assert path.stat().st_size > 5000


def test_a_curve_without_outliers_is_shown_whole():
    losses = [2.3, 2.2, 2.0, 1.7, 1.5, 1.4, 1.45]
    axes = _curve(losses).plot()
    bottom, top = axes.get_ylim()
    assert bottom < 1.4 and top > 2.3 and not axes.collections


def test_a_negative_loss_gets_the_same_rule():
    losses = [-7.7, -7.8, -8.0, -8.6, -9.2, -9.4, -9.0, -3.0, 400.0]
    bottom, top = _curve(losses).plot().get_ylim()
    assert bottom < -9.4 and -7.7 < top < -7.7 + 3 * 1.7 + 1.0


def test_a_real_sweeps_plot_renders_with_the_cut_axis(tmp_path: Path):
    result = find_lr(
        TinyClassifier(), train_dataloaders=random_classification_loader(), num_steps=60, max_lr=1e3
    )
    axes = result.plot()
    bottom, top = axes.get_ylim()
    start = result.losses[0]
    assert bottom <= min(result.losses) and top <= min(max(result.losses), 3 * start) * 1.1
    axes.figure.savefig(tmp_path / "lr.png")
    assert (tmp_path / "lr.png").stat().st_size > 5000
