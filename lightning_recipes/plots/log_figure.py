"""Send a matplotlib figure to the run's loggers: wandb image, TensorBoard figure, PNG beside a CSV log."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

__all__ = ["log_figure"]


def log_figure(figure: Any, target: Any, key: str, *, step: int | None = None) -> list[str]:
    """Log ``figure`` under ``key`` to every logger of ``target`` (a Trainer, a logger or a list) that stores
    images (wandb, TensorBoard, a PNG under ``<log_dir>/figures/``); one line per destination. Rank zero only.

    Example:
        >>> import tempfile
        >>> from lightning.pytorch.loggers import CSVLogger
        >>> from lightning_recipes.plots import plot_metrics
        >>> figure = plot_metrics({"train_loss": [2.3, 1.2]}, "train_loss")
        >>> paths = log_figure(figure, CSVLogger(tempfile.mkdtemp()), "plots/loss")
        >>> paths[0].endswith("figures/plots_loss.png")
        True
    """
    if not key:
        raise ValueError(f"`key` must be a non-empty string, got {key!r}.")
    loggers = getattr(target, "loggers", None)
    if loggers is None:
        loggers = list(target) if isinstance(target, (list, tuple)) else [target]
    written: list[str] = []
    for logger in loggers:
        kind = type(logger).__name__
        if kind == "WandbLogger":
            import wandb

            logger.log_image(key=key, images=[wandb.Image(figure)], step=step)
            written.append(f"{kind}: {key}")
        elif kind == "TensorBoardLogger":
            logger.experiment.add_figure(key, figure, global_step=step or 0, close=False)
            logger.experiment.flush()
            written.append(f"{kind}: {key}")
        elif getattr(logger, "log_dir", None):
            name = re.sub(r"[^A-Za-z0-9_.-]+", "_", key) + ("" if step is None else f"-{step}")
            path = Path(logger.log_dir) / "figures" / f"{name}.png"
            path.parent.mkdir(parents=True, exist_ok=True)
            figure.savefig(path, dpi=100)
            written.append(str(path))
    return written
