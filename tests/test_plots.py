"""Plot helpers: what they read from real loggers, what they draw, and where figures are logged."""

from __future__ import annotations

import ast
import functools
import io
import math
import sys
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import pytest
import torch
from lightning.pytorch.callbacks import LearningRateMonitor
from lightning.pytorch.loggers import CSVLogger, TensorBoardLogger, WandbLogger
from torch.optim.lr_scheduler import LambdaLR, StepLR

from lightning_recipes.callbacks.adaptive_grad_clip import AdaptiveGradClip
from lightning_recipes.callbacks.grad_norm_monitor import GradNormMonitor
from lightning_recipes.checks import preflight
from lightning_recipes.mixins import LionRecipe
from lightning_recipes.plots import (
    log_figure,
    plot_comparison,
    plot_grad_norms,
    plot_metrics,
    plot_overfit,
    plot_schedule,
    read_metrics,
    schedule_values,
    smooth,
)
from lightning_recipes.recipe import OPTIMIZER_DEFAULTS, OptimizerRecipe
from lightning_recipes.testing import (
    InMemoryLogger,
    TinyClassifier,
    fast_trainer,
    random_classification_loader,
)
from lightning_recipes.tune import LRRangeResult

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def _png(figure: Any) -> bytes:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    data = buffer.getvalue()
    assert data.startswith(PNG_MAGIC) and len(data) > 2_000  # a real, non-empty image
    return data


def _hf_cosine_with_warmup(step: int, warmup: int, total: int) -> float:
    """Transcribed from Hugging Face's get_cosine_schedule_with_warmup lr_lambda (num_cycles=0.5)."""
    if step < warmup:
        return step / max(1, warmup)
    progress = (step - warmup) / max(1, total - warmup)
    return max(0.0, 0.5 * (1.0 + math.cos(math.pi * 0.5 * 2.0 * progress)))


def _hf_factory(warmup: int, total: int) -> Any:
    """A LambdaLR factory of :func:`_hf_cosine_with_warmup`."""
    lr_lambda = functools.partial(_hf_cosine_with_warmup, warmup=warmup, total=total)
    return functools.partial(LambdaLR, lr_lambda=lr_lambda)


class _AdamWClassifier(TinyClassifier):
    def configure_optimizers(self) -> Any:
        return torch.optim.AdamW(self.parameters(), lr=1e-2)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[InMemoryLogger, CSVLogger]]:
    """A fit with SGD (TinyClassifier's) and one with AdamW, 12 steps, logged to memory and CSV every 2."""
    torch.manual_seed(0)
    found = {}
    for name, model in (("sgd", TinyClassifier()), ("adamw", _AdamWClassifier())):
        folder = tmp_path_factory.mktemp(name)
        found[name] = InMemoryLogger(), CSVLogger(folder, name=name)
        settings = {"logger": list(found[name]), "log_every_n_steps": 2, "default_root_dir": folder}
        fast_trainer(max_steps=12, max_epochs=2, **settings).fit(model, random_classification_loader())
    return found


def test_read_metrics_csv_equals_in_memory(runs) -> None:
    memory, csv_logger = runs["sgd"]
    from_memory, from_csv = read_metrics(memory), read_metrics(csv_logger)
    csv_steps, csv_values = zip(*from_csv["train_loss"])
    memory_steps, memory_values = zip(*from_memory["train_loss"])
    assert csv_steps == memory_steps == (1, 3, 5, 7, 9, 11)
    assert csv_values == pytest.approx(memory_values)
    assert read_metrics(Path(csv_logger.log_dir)) == from_csv
    assert read_metrics(str(Path(csv_logger.log_dir) / "metrics.csv")) == from_csv
    assert read_metrics({"a": [3.0, 2.0], "b": [(5, 1.0)]}) == {"a": [(0, 3.0), (1, 2.0)], "b": [(5, 1.0)]}


def test_read_metrics_from_a_trainer_skips_unreadable_loggers_and_errors_name_the_fix(tmp_path: Path) -> None:
    memory = InMemoryLogger()
    trainer = fast_trainer(max_steps=4, logger=[TensorBoardLogger(tmp_path), memory], log_every_n_steps=1)
    trainer.fit(TinyClassifier(), random_classification_loader())
    assert read_metrics(trainer)["train_loss"] == read_metrics(memory)["train_loss"]
    assert len(read_metrics(trainer)["train_loss"]) == 4
    with pytest.raises(FileNotFoundError, match=r"No metrics.csv"):
        read_metrics(tmp_path / "empty")
    with pytest.raises(TypeError, match="`source`"):
        read_metrics(3)
    with pytest.raises(TypeError, match=r"attach a CSVLogger.*TensorBoardLogger"):
        read_metrics(fast_trainer(logger=TensorBoardLogger(tmp_path)))


def test_schedule_values_of_a_factory_and_a_recipe_match_reference() -> None:
    warmup, total, lr = 10, 50, 3e-3
    factory = _hf_factory(warmup, total)
    values = schedule_values(factory, total, lr=lr)
    assert values == pytest.approx([lr * _hf_cosine_with_warmup(s, warmup, total) for s in range(total)])
    assert values[0] == 0.0 and values[warmup] == pytest.approx(lr)
    step = functools.partial(StepLR, step_size=3, gamma=0.1)
    assert schedule_values(step, 7) == pytest.approx([1, 1, 1, 0.1, 0.1, 0.1, 0.01])
    recipe = OptimizerRecipe("adamw", lr=2e-3, warmup_ratio=0.1, schedule="cosine", min_lr_ratio=0.1)
    # Hugging Face's min-lr variant: warmup from 0 as usual, then cosine * (1 - r) + r.
    multipliers = [s / 10 if s < 10 else _hf_cosine_with_warmup(s, 10, 100) * 0.9 + 0.1 for s in range(100)]
    expected = [2e-3 * m for m in multipliers]
    assert schedule_values(recipe, 100) == pytest.approx(expected)
    lion = schedule_values(OptimizerRecipe(optimizer="lion", schedule="none"), 3)
    assert lion == [OPTIMIZER_DEFAULTS["lion"]["lr"]] * 3  # unset fields take the optimizer's defaults


def test_schedule_preview_equals_what_training_steps(tmp_path: Path) -> None:
    class Model(LionRecipe, TinyClassifier):
        pass

    model = Model()
    model.recipe = OptimizerRecipe(lr=3e-4, warmup_steps=3, schedule="wsd", min_lr_ratio=0.2)
    logger, callbacks = InMemoryLogger(), [LearningRateMonitor(logging_interval="step")]
    trainer = fast_trainer(max_steps=16, max_epochs=2, logger=logger, log_every_n_steps=1,
                           callbacks=callbacks, default_root_dir=tmp_path)  # fmt: skip
    trainer.fit(model, random_classification_loader())
    key = next(k for k in sorted(logger.keys()) if k.startswith("lr-"))
    assert logger.values(key) == pytest.approx(schedule_values(model, 16))
    figure = plot_schedule(model, 16)
    assert figure.axes[0].get_lines()[0].get_label() == "lion, wsd (peak lr 0.0003)"
    assert figure.axes[0].get_ylabel() == "learning rate"


def test_plot_schedule_renders_and_overlays() -> None:
    cosine = _hf_factory(5, 40)
    step = functools.partial(StepLR, step_size=10, gamma=0.5)
    figure = plot_schedule({"cosine": cosine, "step": step}, 40, lr=1e-3)
    lines = figure.axes[0].get_lines()
    assert [line.get_label() for line in lines] == ["cosine", "step"]
    assert lines[0].get_ydata().tolist() == pytest.approx(schedule_values(cosine, 40, lr=1e-3))
    assert figure.axes[0].get_ylabel() == "learning rate"
    _png(figure)
    assert plot_schedule(step, 20).axes[0].get_ylabel() == "LR multiplier"


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "match"),
    [
        ((lambda o: StepLR(o, 1), 0), {}, ValueError, "`total_steps`"),
        ((lambda o: StepLR(o, 1), 5.0), {}, ValueError, "`total_steps`"),
        ((lambda o: StepLR(o, 1), 3), {"lr": -1}, ValueError, "`lr`"),
        (("cosine", 5), {}, TypeError, "`schedule`"),
        ((lambda o: 3, 5), {}, TypeError, "must return an LR scheduler, got int"),
    ],
)
def test_schedule_values_errors(args: tuple, kwargs: dict, error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        schedule_values(*args, **kwargs)


def test_plot_comparison_of_real_runs(runs) -> None:
    sgd, adamw_csv = runs["sgd"][0], runs["adamw"][1]
    figure = plot_comparison({"sgd": sgd, "adamw": adamw_csv}, "train_loss", title="optimizers")
    lines = figure.axes[0].get_lines()
    assert [line.get_label() for line in lines] == ["sgd", "adamw"]
    assert lines[0].get_ydata().tolist() == pytest.approx(sgd.values("train_loss"))
    _png(figure)
    with pytest.raises(KeyError, match="Run 'sgd' never logged 'val_acc'"):
        plot_comparison({"sgd": sgd}, "val_acc")
    with pytest.raises(ValueError, match="`runs` must name at least one run"):
        plot_comparison({})


def test_plot_metrics_patterns_and_errors() -> None:
    logged = {"grad_norm/a": [1.0, 2.0], "grad_norm/b": [3.0, 4.0], "train_loss": [1.0, 0.5]}
    figure = plot_metrics(logged, "grad_norm/*", smoothing=0.5)
    assert [line.get_label() for line in figure.axes[0].get_lines()] == ["grad_norm/a", "grad_norm/b"]
    assert figure.axes[0].get_lines()[1].get_ydata().tolist() == pytest.approx(smooth([3.0, 4.0], 0.5))
    with pytest.raises(KeyError, match=r"No logged key matches \['val_\*'\]; logged keys:"):
        plot_metrics(logged, "val_*")


def test_plot_overfit_from_real_preflight() -> None:
    loader = random_classification_loader(shuffle=True)
    healthy = preflight(TinyClassifier(lr=0.5), train_dataloaders=loader, checks=["overfit_batch"])
    frozen = TinyClassifier(lr=0.5)
    frozen.requires_grad_(False)
    frozen.head.requires_grad_(True)
    stuck = preflight(frozen, train_dataloaders=loader, checks=["overfit_batch"])
    result = healthy["overfit_batch"]
    lines = plot_overfit(healthy).axes[0].get_lines()  # the report
    assert lines[0].get_ydata().tolist() == pytest.approx(result.details["curve"])
    assert lines[1].get_label() == f"target {result.details['target']:.3g}"
    single = plot_overfit(result).axes[0].get_lines()[0]  # one check result
    assert single.get_ydata().tolist() == pytest.approx(result.details["curve"])
    figure = plot_overfit({"healthy": result, "frozen body": stuck["overfit_batch"]})
    labels = [line.get_label() for line in figure.axes[0].get_lines()]
    assert labels == ["healthy", "frozen body", f"target {result.details['target']:.3g}"]  # same ln 4 start
    _png(figure)


def test_plot_overfit_draws_a_shared_target_once_and_each_runs_own_otherwise() -> None:
    figure = plot_overfit({"fixed": [2.3, 1.0, 0.2], "frozen layer": [2.3, 2.29, 2.28]}, target=0.23)
    labels = [line.get_label() for line in figure.axes[0].get_lines()]
    assert labels == ["fixed", "frozen layer", "target 0.23"]
    runs = {"a": {"curve": [2.0, 1.0], "target": 0.6}, "b": {"curve": [3.0, 2.0], "target": 0.9}}
    lines = plot_overfit(runs).axes[0].get_lines()
    assert [line.get_label() for line in lines[::2]] == ["a", "b"]
    assert [line.get_ydata()[0] for line in lines[1::2]] == [0.6, 0.9]  # a dotted target per run
    assert [line.get_color() for line in lines[1::2]] == [lines[0].get_color(), lines[2].get_color()]
    with pytest.raises(TypeError, match="`curve` must be a list of losses"):
        plot_overfit("loss")


def test_plot_grad_norms_from_real_callbacks(tmp_path: Path) -> None:
    logger = InMemoryLogger()
    callbacks = [GradNormMonitor(), AdaptiveGradClip(percentile=50, window=16, warmup_steps=2)]
    trainer = fast_trainer(max_steps=8, logger=logger, log_every_n_steps=2, callbacks=callbacks)
    trainer.fit(TinyClassifier(lr=0.5), random_classification_loader())
    figure = plot_grad_norms(logger)
    main, twin = figure.axes
    labels = [line.get_label() for line in main.get_lines()]
    assert labels == ["grad_norm/total", "grad_norm/total_max", "grad_clip/threshold"]
    assert main.get_lines()[0].get_ydata().tolist() == pytest.approx(logger.values("grad_norm/total"))
    clipped = twin.get_lines()[0].get_ydata().tolist()
    assert clipped == pytest.approx(logger.values("grad_clip/clipped_fraction"))
    assert main.get_yscale() == "log"
    _png(figure)
    assert len(plot_grad_norms({"grad_norm/total": [1.0, 2.0]}).axes) == 1  # no clipping logged: no twin axis
    with pytest.raises(KeyError, match=r"None of .*grad_norm/total.* was logged"):
        plot_grad_norms({"train_loss": [1.0]})


def test_log_figure_to_csv_tensorboard_and_wandb(tmp_path: Path) -> None:
    import wandb
    from tensorboard.backend.event_processing.event_file_loader import LegacyEventFileLoader

    figure = plot_metrics({"train_loss": [2.0, 1.0, 0.5]}, "train_loss")
    csv_logger = CSVLogger(tmp_path, name="csv")
    tb_logger = TensorBoardLogger(tmp_path, name="tb")
    wandb_logger = WandbLogger(project="plots-test", save_dir=str(tmp_path), offline=True)
    memory = InMemoryLogger()
    loggers = [csv_logger, tb_logger, wandb_logger, memory]
    trainer = fast_trainer(max_steps=2, logger=loggers, default_root_dir=tmp_path)
    try:
        trainer.fit(TinyClassifier(), random_classification_loader())
        written = log_figure(figure, trainer, "plots/train loss", step=2)
        png = Path(csv_logger.log_dir) / "figures" / "plots_train_loss-2.png"
        assert written == [str(png), "TensorBoardLogger: plots/train loss", "WandbLogger: plots/train loss"]
        assert png.read_bytes().startswith(PNG_MAGIC)

        images = [
            value.image.encoded_image_string
            for path in Path(tb_logger.log_dir).glob("events.out.tfevents.*")
            for event in LegacyEventFileLoader(str(path)).Load()
            for value in event.summary.value
            if value.tag == "plots/train loss"
        ]
        assert len(images) == 1 and images[0].startswith(PNG_MAGIC)

        run_dir = Path(wandb_logger.experiment.dir)
        media = list((run_dir / "media" / "images").rglob("*.png"))
        assert len(media) == 1 and media[0].read_bytes().startswith(PNG_MAGIC)
        assert "train loss" in str(media[0].relative_to(run_dir))
    finally:
        wandb.finish()
    with pytest.raises(ValueError, match="`key` must be a non-empty string"):
        log_figure(figure, memory, "")


def test_missing_matplotlib_gives_install_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [name for name in sys.modules if name == "matplotlib" or name.startswith("matplotlib.")]:
        monkeypatch.setitem(sys.modules, name, None)  # what an interpreter without matplotlib sees
    assert read_metrics({"a": [1.0]}) == {"a": [(0, 1.0)]}  # reading needs no matplotlib
    with pytest.raises(ImportError, match=r"needs matplotlib: pip install 'lightning-recipes\[plots\]'"):
        plot_metrics({"a": [1.0]}, "a")


def test_matplotlib_is_imported_lazily() -> None:
    """No module of the package imports matplotlib at import time (only inside the functions that draw)."""
    package = Path(__file__).resolve().parents[1] / "lightning_recipes"
    offenders = [
        f"{path.relative_to(package)}: line {node.lineno}"
        for path in package.rglob("*.py")
        if "matplotlib" in (source := path.read_text())  # an import statement names its module literally
        for node in ast.parse(source).body  # top-level statements only
        if isinstance(node, (ast.Import, ast.ImportFrom))
        for name in (
            [node.module or ""] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
        )
        if name.split(".")[0] == "matplotlib"
    ]
    assert not offenders, offenders


def _curve(losses: list[float]) -> LRRangeResult:
    lrs = [1e-5 * 1.5**i for i in range(len(losses))]
    middle = lrs[len(lrs) // 2]
    return LRRangeResult(lrs, losses, losses, middle, middle * 5, "min_div_10", "diverged")


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


@pytest.mark.parametrize(
    ("losses", "low", "top_range", "outliers"),
    [
        ([2.3, 2.2, 2.0, 1.7, 1.5, 1.4, 1.45], 1.4, (2.3, 2.4), 0),  # nothing to cut: shown whole
        ([-7.7, -7.8, -8.0, -8.6, -9.2, -9.4, -9.0, -3.0, 400.0], -9.4, (-7.7, -7.7 + 3 * 1.7 + 1.0), 2),
    ],
)
def test_the_loss_axis_rule_holds_for_a_clean_and_a_negative_curve(losses, low, top_range, outliers):
    axes = _curve(losses).plot()
    bottom, top = axes.get_ylim()
    assert bottom < low and top_range[0] < top < top_range[1]
    assert sum(len(c.get_offsets()) for c in axes.collections) == outliers
