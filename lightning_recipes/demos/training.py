"""``lightning-recipes demo``: a small CNN on handwritten digits trained with every recipe of the package."""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import torch
from lightning.pytorch.callbacks import LearningRateMonitor
from lightning.pytorch.loggers import CSVLogger, Logger

from lightning_recipes.callbacks import (
    AdaptiveGradClip,
    EarlyStopping,
    GradNormMonitor,
    InputPipelineMonitor,
    RunManifest,
    StabilityGuard,
)
from lightning_recipes.callbacks.health_monitor import HealthMonitor
from lightning_recipes.checks import preflight
from lightning_recipes.cli import handle_usage_errors, normalise_flags
from lightning_recipes.cli.demo import DEMO_SETTINGS, build_parser, check_demo_args, split_finetune_flag
from lightning_recipes.cli.demo import parse as parse_demo_args
from lightning_recipes.data import DigitsDataModule
from lightning_recipes.demos.finetuning import main as finetune_main
from lightning_recipes.demos.model import RecipeDigitsCNN
from lightning_recipes.recipe import OptimizerRecipe

__all__ = ["DEMO_SETTINGS", "build_parser", "main", "run_demo"]


def _make_logger(kind: str, output_dir: Path) -> Logger:
    if kind == "wandb-offline":
        from lightning.pytorch.loggers import WandbLogger

        os.environ["WANDB_MODE"] = "offline"
        return WandbLogger(project="lightning-recipes-demo", save_dir=str(output_dir), offline=True)
    return CSVLogger(save_dir=str(output_dir), name="demo")


def _where_the_logs_are(logger: Logger, manifest: RunManifest) -> str:
    """The files the run wrote: the CSV logger's folder, or wandb's offline run folder and the manifest."""
    if isinstance(logger, CSVLogger):
        return f"{logger.log_dir} (metrics.csv, manifest.json)"
    run_dir = Path(getattr(logger, "experiment").dir).parent  # noqa: B009 (Logger has no .experiment); wandb's <save_dir>/wandb/offline-run-<time>-<id>/files
    return f"{run_dir} (wandb offline run: `wandb sync {run_dir}`); manifest: {manifest.path}"


def run_demo(args: argparse.Namespace) -> dict[str, Any]:
    """Run the preflight, train, restore the best weights, re-validate; returns a summary dict."""
    check_demo_args(args)  # UsageError, a ValueError
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    started = time.perf_counter()
    pl.seed_everything(args.seed, workers=True, verbose=False)
    args.output_dir.mkdir(parents=True, exist_ok=True)
    datamodule = DigitsDataModule(batch_size=args.batch_size, seed=args.seed)
    settings = dict(DEMO_SETTINGS[args.optimizer])
    if args.lr is not None:
        settings["lr"] = args.lr
    model = RecipeDigitsCNN()
    model.recipe = OptimizerRecipe(
        optimizer=args.optimizer,
        lr=settings["lr"],
        weight_decay=settings["weight_decay"],
        warmup_ratio=0.1,
        schedule="cosine",
    )

    report = None
    if not args.skip_preflight:
        report = preflight(
            model, datamodule=datamodule, seed=args.seed, max_epochs=args.epochs, print_report=True
        )
        report.raise_for_failures()

    logger = _make_logger(args.logger, args.output_dir)
    early_stopping = EarlyStopping(
        monitor="val_acc", mode="max", patience=4, start_from_epoch=4, restore_best_weights=True
    )
    health = HealthMonitor(check_every_n_steps=25, repair=True)
    manifest = RunManifest()
    callbacks: list[pl.Callback] = [
        manifest,
        GradNormMonitor(),
        AdaptiveGradClip(percentile=90.0, window=500, warmup_steps=25),
        InputPipelineMonitor(),
        health,  # repairs what its findings name (an LR too high: roll back, lower the LR)
        StabilityGuard(check_every_n_steps=10, snapshot_every_n_steps=50, act_on_findings=False),
        early_stopping,
        LearningRateMonitor(logging_interval="step"),
    ]
    trainer = pl.Trainer(
        accelerator="cpu",
        devices=1,
        max_epochs=args.epochs,
        logger=logger,
        callbacks=callbacks,
        log_every_n_steps=5,
        enable_progress_bar=False,
        enable_model_summary=False,
        enable_checkpointing=False,
        num_sanity_val_steps=0,
        deterministic=True,
    )
    trainer.fit(model, datamodule=datamodule)
    # The weights now in `model` are the best epoch's (EarlyStopping restored them): measure those.
    (final,) = trainer.validate(model, datamodule=datamodule, verbose=False)
    plots = _save_plots(logger, args.output_dir)
    summary_of_recipe = model.recipe_summary
    return {
        "components": [type(c).__name__ for c in callbacks]
        + ["preflight" if report is not None else "(preflight skipped)", "OptimizerRecipeMixin"],
        "preflight": None if report is None else report.to_dict().get("counts"),
        "optimizer": summary_of_recipe["optimizer"],
        "peak_lr": summary_of_recipe["peak_lr"],
        # Lion/Lamb: the path that ran ("native", "foreach", ...); None for torch's AdamW
        "implementation": getattr(trainer.optimizers[0], "implementation_used", None),
        "effective_batch_size": summary_of_recipe.get(
            "global_batch_size", args.batch_size * trainer.world_size * trainer.accumulate_grad_batches
        ),
        "lr_schedule": f"linear warmup {summary_of_recipe['warmup_steps']} steps, cosine to 0 at step "
        f"{summary_of_recipe['total_steps']}",
        "optimizer_steps": trainer.global_step,
        "epochs": trainer.current_epoch,
        "stopping_reason": str(early_stopping.stopping_reason_message or "max_epochs reached"),
        "best_val_acc": float(early_stopping.best_score),
        "val_acc": float(final["val_acc"]),
        "log_dir": logger.log_dir if getattr(logger, "log_dir", None) else str(args.output_dir),
        "logs": _where_the_logs_are(logger, manifest),
        "plots": [str(path) for path in plots],
        "health": [f"{f.problem} at step {f.step}: {f.advice}" for f in health.findings],
        "health_checks": health.checks,
        "seconds": time.perf_counter() - started,
        "threads": torch.get_num_threads(),
    }


def _save_plots(logger: Logger, output_dir: Path) -> list[Path]:
    """Loss/accuracy, LR and gradient-norm history from the CSV log; none without matplotlib or a CSV log."""
    if not isinstance(logger, CSVLogger):
        return []
    try:
        import matplotlib
    except ImportError:
        return []
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from lightning_recipes.plots import plot_grad_norms, plot_metrics

    figure, axes = plt.subplots(1, 3, figsize=(14, 3.6))
    plot_metrics(logger, ["train_loss"], ax=axes[0], smoothing=0.6, title="train loss")
    plot_metrics(logger, ["val_acc"], ax=axes[1], title="validation accuracy")
    plot_grad_norms(logger, ax=axes[2])
    figure.tight_layout()
    path = output_dir / "demo_history.png"
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return [path]


def _print_summary(summary: dict[str, Any]) -> None:
    tally = ", ".join(f"{n} {status}" for status, n in (summary["preflight"] or {}).items() if n)
    ran = f", {summary['implementation']} implementation" if summary.get("implementation") else ""
    findings = summary.get("health") or ["none"]
    rows = [
        ("components used", ", ".join(summary["components"])),
        ("preflight", tally or "skipped"),
        ("optimizer", f"{summary['optimizer']} (peak lr {summary['peak_lr']:g}{ran})"),
        ("effective batch size", summary["effective_batch_size"]),
        ("LR schedule", summary["lr_schedule"]),
        ("optimizer steps", f"{summary['optimizer_steps']} in {summary['epochs']} epochs"),
        ("stopped because", summary["stopping_reason"]),
        ("health findings", f"{findings[0]} ({summary.get('health_checks', 0)} checks)"),
        *(("", line) for line in findings[1:]),
        ("final val accuracy", f"{summary['val_acc']:.4f} (best epoch's weights restored)"),
        ("logs", summary["logs"]),
        ("plots", ", ".join(summary["plots"]) or "(matplotlib not installed or non-CSV logger)"),
        ("wall time", f"{summary['seconds']:.1f} s on {summary['threads']} torch thread(s)"),
    ]
    print("\nlightning-recipes demo: CNN on scikit-learn digits")
    for label, value in rows:
        print(f"  {label:<20} {':' if label else ' '} {value}")


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``lightning-recipes demo`` (``--finetune``: :mod:`lightning_recipes.demos.finetuning`);
    returns 0, or 2 after a one-line message for a mistake in the arguments."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    return handle_usage_errors("demo", lambda: _run(arguments))


def _run(arguments: list[str]) -> int:
    args = parse_demo_args(arguments)
    if args.finetune:
        return finetune_main(split_finetune_flag(normalise_flags(arguments))[0])
    _print_summary(run_demo(args))
    return 0
