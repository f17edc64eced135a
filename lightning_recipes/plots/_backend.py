"""Lazy matplotlib import with an install hint (matplotlib is the optional ``plots`` extra)."""

from __future__ import annotations

from typing import Any

__all__ = ["finish", "new_axes", "pyplot"]

_HINT = (
    "lightning_recipes.plots needs matplotlib: pip install 'lightning-recipes[plots]' "
    "(or pip install matplotlib)."
)


def pyplot() -> Any:
    """``matplotlib.pyplot``, imported on first use; ``ImportError`` with the install command without it."""
    try:
        import matplotlib.pyplot as plt
    except ImportError as err:  # pragma: no cover - exercised only without the extra
        raise ImportError(_HINT) from err
    return plt


def new_axes(ax: Any = None, *, figsize: tuple[float, float] = (6.4, 3.6)) -> tuple[Any, Any]:
    """``(figure, axes)``: the given axes and its figure, or a new single-axes figure."""
    if ax is not None:
        return ax.figure, ax
    figure, axes = pyplot().subplots(figsize=figsize, layout="constrained")
    return figure, axes


def finish(
    axes: Any,
    figure: Any,
    *,
    xlabel: str = "step",
    ylabel: str | None = None,
    log_scale: bool = False,
    title: str | None = None,
    legend: bool = True,
) -> Any:
    """Label, scale, title, legend and grid an axes the ``plot_*`` helpers drew; returns ``figure``."""
    axes.set_xlabel(xlabel)
    if ylabel:
        axes.set_ylabel(ylabel)
    if log_scale:
        axes.set_yscale("log")
    if title:
        axes.set_title(title)
    if legend:
        axes.legend()
    axes.grid(alpha=0.3)
    return figure
