"""``lightning-recipes demo``: a small CNN on handwritten digits, trained with the package's recipes.

The project's living end-to-end example: every recipe the package has is switched on here.
"""

from __future__ import annotations

import argparse
import csv
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import torch
from lightning.pytorch.callbacks import LearningRateMonitor
from lightning.pytorch.loggers import CSVLogger, Logger
from torch import Tensor, nn
from torch.nn import functional as F

from lightning_recipes.data import DigitsDataModule

__all__ = ["DigitsCNN", "main", "run_demo"]


class DigitsCNN(pl.LightningModule):
    """A small CNN for 8x8 digits: two conv blocks with BatchNorm, then dropout and a linear head.

    Logs ``train_loss``, ``val_loss`` and ``val_acc``.

    Args:
        num_classes: Output classes.
        width: Channels of the first conv block (the second has twice as many).
        dropout: Dropout before the head.
        lr: Peak learning rate.
        weight_decay: Weight decay.

    Example:
        >>> import torch
        >>> DigitsCNN()(torch.zeros(2, 1, 8, 8)).shape
        torch.Size([2, 10])
    """

    def __init__(
        self,
        num_classes: int = 10,
        width: int = 32,
        dropout: float = 0.2,
        lr: float = 3e-3,
        weight_decay: float = 0.05,
    ) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.features = nn.Sequential(
            nn.Conv2d(1, width, 3, padding=1, bias=False),
            nn.BatchNorm2d(width),
            nn.ReLU(),
            nn.Conv2d(width, 2 * width, 3, padding=1, bias=False),
            nn.BatchNorm2d(2 * width),
            nn.ReLU(),
            nn.MaxPool2d(2),
        )
        self.dropout = nn.Dropout(dropout)
        self.head = nn.Linear(2 * width * 16, num_classes)

    def forward(self, x: Tensor) -> Tensor:
        return self.head(self.dropout(self.features(x).flatten(1)))

    def training_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> Tensor:
        x, y = batch
        loss = F.cross_entropy(self(x), y)
        self.log("train_loss", loss)
        return loss

    def validation_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> None:
        x, y = batch
        logits = self(x)
        self.log("val_loss", F.cross_entropy(logits, y), sync_dist=True)
        self.log("val_acc", (logits.argmax(-1) == y).float().mean(), sync_dist=True, prog_bar=True)

    def configure_optimizers(self) -> Any:
        return torch.optim.AdamW(
            self.parameters(), lr=self.hparams["lr"], weight_decay=self.hparams["weight_decay"]
        )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lightning-recipes demo",
        description="Train a small CNN on scikit-learn's handwritten digits (no download) with every "
        "lightning_recipes recipe, then print what was used and how well it did.",
    )
    parser.add_argument("--epochs", type=int, default=12, help="training epochs (default: 12)")
    parser.add_argument("--optimizer", choices=["adamw"], default="adamw", help="optimizer (default: adamw)")
    parser.add_argument("--lr", type=float, default=None, help="peak learning rate (default: per optimizer)")
    parser.add_argument("--batch-size", type=int, default=64, help="per-device batch size (default: 64)")
    parser.add_argument("--seed", type=int, default=0, help="global seed (default: 0)")
    parser.add_argument(
        "--output-dir",
        type=Path,
        default=Path("demo_output"),
        help="logs and plots go here (default: demo_output)",
    )
    parser.add_argument(
        "--logger",
        choices=["csv", "wandb-offline"],
        default="csv",
        help="csv, or wandb in offline mode (needs the wandb extra; never contacts a server)",
    )
    return parser


def _make_logger(kind: str, output_dir: Path) -> Logger:
    if kind == "wandb-offline":
        from lightning.pytorch.loggers import WandbLogger

        os.environ["WANDB_MODE"] = "offline"
        return WandbLogger(project="lightning-recipes-demo", save_dir=str(output_dir), offline=True)
    return CSVLogger(save_dir=str(output_dir), name="demo")


def run_demo(args: argparse.Namespace) -> dict[str, Any]:
    """Train and evaluate; returns a summary dict (also what the command prints)."""
    if args.epochs < 1:
        raise ValueError(f"`--epochs` must be >= 1, got {args.epochs!r}.")
    started = time.perf_counter()
    pl.seed_everything(args.seed, workers=True, verbose=False)
    torch.set_num_threads(max(1, min(4, os.cpu_count() or 1)))
    args.output_dir.mkdir(parents=True, exist_ok=True)
    datamodule = DigitsDataModule(batch_size=args.batch_size, seed=args.seed)
    lr = args.lr if args.lr is not None else 3e-3
    model = DigitsCNN(lr=lr)
    logger = _make_logger(args.logger, args.output_dir)
    callbacks: list[pl.Callback] = [LearningRateMonitor(logging_interval="step")]
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
    val_acc = float(trainer.callback_metrics["val_acc"])
    plot_path = _plot_history(logger, args.output_dir)
    summary: dict[str, Any] = {
        "components": ["DigitsDataModule", "torch.optim.AdamW", "LearningRateMonitor"],
        "optimizer": args.optimizer,
        "peak_lr": lr,
        "effective_batch_size": args.batch_size * trainer.world_size * trainer.accumulate_grad_batches,
        "lr_schedule": "constant",
        "optimizer_steps": trainer.global_step,
        "val_acc": val_acc,
        "log_dir": logger.log_dir if getattr(logger, "log_dir", None) else str(args.output_dir),
        "plot": str(plot_path) if plot_path else None,
        "seconds": time.perf_counter() - started,
    }
    return summary


def _plot_history(logger: Logger, output_dir: Path) -> Path | None:
    """Plot train loss and val accuracy from the CSV log; ``None`` without matplotlib or a CSV log."""
    if not isinstance(logger, CSVLogger):
        return None
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    with open(Path(logger.log_dir) / "metrics.csv") as handle:
        rows = list(csv.DictReader(handle))
    series: dict[str, list[tuple[int, float]]] = {"train_loss": [], "val_acc": []}
    for row in rows:
        for key, points in series.items():
            if row.get(key):
                points.append((int(row["step"]), float(row[key])))
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.2))
    for axis, (key, points) in zip(axes, series.items()):
        axis.plot([s for s, _ in points], [v for _, v in points], marker="." if key == "val_acc" else None)
        axis.set_title(key)
        axis.set_xlabel("step")
    fig.tight_layout()
    path = output_dir / "demo_history.png"
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def _print_summary(summary: dict[str, Any]) -> None:
    print("\nlightning-recipes demo: CNN on scikit-learn digits")
    print(f"  components used      : {', '.join(summary['components'])}")
    print(f"  optimizer            : {summary['optimizer']} (peak lr {summary['peak_lr']:g})")
    print(f"  effective batch size : {summary['effective_batch_size']}")
    print(f"  LR schedule          : {summary['lr_schedule']}")
    print(f"  optimizer steps      : {summary['optimizer_steps']}")
    print(f"  final val accuracy   : {summary['val_acc']:.4f}")
    print(f"  logs                 : {summary['log_dir']}")
    print(f"  plot                 : {summary['plot'] or '(matplotlib not installed or non-CSV logger)'}")
    print(f"  wall time            : {summary['seconds']:.1f} s")


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``lightning-recipes demo``; returns 0 on success."""
    args = build_parser().parse_args(argv)
    summary = run_demo(args)
    _print_summary(summary)
    return 0
