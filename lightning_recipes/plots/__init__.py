"""Plots of schedules and training runs (matplotlib, the ``plots`` extra, imported on first use). Every
``plot_*`` reads what :func:`read_metrics` reads, returns a ``Figure`` and takes ``ax`` and ``title``.

Example:
    >>> from lightning_recipes.plots import plot_comparison
    >>> figure = plot_comparison({"adamw": {"train_loss": [2.3, 1.0]}, "lion": {"train_loss": [2.3, 0.8]}})
    >>> figure.axes[0].get_title()
    'train_loss'
"""

from lightning_recipes.plots._history import MetricHistory, read_metrics
from lightning_recipes.plots.curves import (
    plot_comparison,
    plot_grad_norms,
    plot_metrics,
    plot_overfit,
    smooth,
)
from lightning_recipes.plots.log_figure import log_figure
from lightning_recipes.plots.lr_range import plot_lr_range
from lightning_recipes.plots.schedule import plot_schedule, schedule_values

__all__ = [
    "MetricHistory",
    "log_figure",
    "plot_comparison",
    "plot_grad_norms",
    "plot_lr_range",
    "plot_metrics",
    "plot_overfit",
    "plot_schedule",
    "read_metrics",
    "schedule_values",
    "smooth",
]
