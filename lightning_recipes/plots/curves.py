"""Plots of a training run (metric curves, gradient norms, overfit curves, comparisons) and the drawing
helpers every ``plot_*`` shares."""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping, Sequence
from typing import Any

from lightning_recipes.plots._history import MetricHistory, read_metrics
from lightning_recipes.tune.suggest import smooth as ema

__all__ = ["plot_comparison", "plot_grad_norms", "plot_metrics", "plot_overfit", "smooth"]

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
    return pyplot().subplots(figsize=figsize, layout="constrained")  # type: ignore[no-any-return]


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


def smooth(values: Sequence[float], weight: float) -> list[float]:
    """Exponential moving average with TensorBoard's debiasing (non-finite values pass through).

    Example:
        >>> smooth([1.0, 0.0, 0.0], 0.5)
        [1.0, 0.333..., 0.142...]
    """
    return ema(values, weight)


def plot_metrics(
    source: Any,
    keys: str | Sequence[str],
    *,
    ax: Any = None,
    smoothing: float = 0.0,
    log_scale: bool = False,
    title: str | None = None,
) -> Any:
    """Plot logged metrics against the step; ``keys`` may hold shell patterns (``"grad_norm/*"``).

    Example:
        >>> figure = plot_metrics({"train_loss": [2.3, 1.7, 1.2], "val_loss": [(2, 1.4)]}, "*_loss")
        >>> sorted(line.get_label() for line in figure.axes[0].get_lines())
        ['train_loss', 'val_loss']
    """
    history = read_metrics(source)
    selected = _select(history, [keys] if isinstance(keys, str) else list(keys))
    figure, axes = new_axes(ax)
    for key in selected:
        _draw(axes, history[key], key, smoothing)
    return finish(axes, figure, log_scale=log_scale, title=title)


def plot_grad_norms(
    source: Any,
    *,
    norm_keys: Sequence[str] = ("grad_norm/total", "grad_norm/total_max"),
    threshold_keys: Sequence[str] = ("grad_clip/threshold", "*clip*threshold*"),
    fraction_keys: Sequence[str] = ("grad_clip/clipped_fraction", "*clip*fraction*"),
    ax: Any = None,
    log_scale: bool = True,
    title: str | None = "Gradient norm",
) -> Any:
    """Gradient norms (each of ``norm_keys`` logged) with ``AdaptiveGradClip``'s threshold (the first of
    ``threshold_keys``, dashed) and clipped fraction (the first of ``fraction_keys``, on a twin axis).

    Example:
        >>> logged = {"grad_norm/total": [(0, 8.0), (10, 2.0)], "grad_clip/threshold": [(0, 5.0), (10, 3.0)]}
        >>> figure = plot_grad_norms(logged)
        >>> [line.get_label() for line in figure.axes[0].get_lines()]
        ['grad_norm/total', 'grad_clip/threshold']
    """
    history = read_metrics(source)
    norms = _select(history, list(norm_keys), required=False)
    if not norms:
        raise KeyError(f"None of {list(norm_keys)} was logged; logged keys: {sorted(history)}")
    figure, axes = new_axes(ax)
    for key in norms:
        _draw(axes, history[key], key)
    threshold = _first(history, threshold_keys)
    if threshold:
        _draw(axes, history[threshold], threshold, 0.0, "--", color="black")
    handles, labels = axes.get_legend_handles_labels()
    fraction = _first(history, fraction_keys)
    if fraction:
        twin = axes.twinx()
        _draw(twin, history[fraction], fraction, 0.0, ":", color="tab:red")
        twin.set_ylim(0, 1.05)
        twin.set_ylabel("fraction of steps clipped")
        more_handles, more_labels = twin.get_legend_handles_labels()
        handles, labels = handles + more_handles, labels + more_labels
    axes.legend(handles, labels, loc="upper right")
    return finish(axes, figure, ylabel="norm", log_scale=log_scale, title=title, legend=False)


def plot_overfit(
    curve: Any,
    *,
    target: float | None = None,
    ax: Any = None,
    title: str | None = "Overfit one batch",
) -> Any:
    """The loss curve of the overfit-one-batch check with its target line. ``curve``: losses, an
    ``OverfitBatchCheck`` result, a preflight report, or ``{label: any of these}``; ``target``: each result's.

    Example:
        >>> figure = plot_overfit({"fixed": [2.3, 0.9, 0.1], "frozen layer": [2.3, 2.3, 2.3]}, target=0.23)
        >>> [line.get_label() for line in figure.axes[0].get_lines()]
        ['fixed', 'frozen layer', 'target 0.23']
    """
    curves = _overfit_curves(curve)
    if target is not None:
        curves = {label: (losses, target) for label, (losses, _) in curves.items()}
    targets = {found for _, found in curves.values()}
    shared = targets.pop() if len(targets) == 1 else None
    figure, axes = new_axes(ax)
    marker = "." if max(len(losses) for losses, _ in curves.values()) < 60 else None
    for label, (losses, own_target) in curves.items():
        (line,) = axes.plot(range(len(losses)), losses, marker=marker, label=label)
        if shared is None and own_target is not None:
            axes.axhline(own_target, linestyle=":", color=line.get_color(), linewidth=1)
    if shared is not None:
        axes.axhline(shared, linestyle="--", color="black", label=f"target {shared:.3g}")
    ylabel = "loss (dotted: each run's target)" if shared is None and len(curves) > 1 else "loss"
    return finish(axes, figure, xlabel="step on the fixed batch", ylabel=ylabel, log_scale=True, title=title)


def plot_comparison(
    runs: Mapping[str, Any],
    key: str = "train_loss",
    *,
    smoothing: float = 0.0,
    ax: Any = None,
    log_scale: bool = False,
    title: str | None = None,
) -> Any:
    """One metric ``key`` of several ``runs`` (``{label: source}``) on one axes, e.g. AdamW vs Lion.

    Example:
        >>> runs = {"adamw": {"train_loss": [2.3, 1.1]}, "lion": {"train_loss": [2.3, 0.9]}}
        >>> figure = plot_comparison(runs)
        >>> [line.get_label() for line in figure.axes[0].get_lines()]
        ['adamw', 'lion']
    """
    if not runs:
        raise ValueError("`runs` must name at least one run, got an empty mapping.")
    figure, axes = new_axes(ax)
    for label, source in runs.items():
        history = read_metrics(source)
        if key not in history:
            raise KeyError(f"Run {label!r} never logged {key!r}; it logged: {sorted(history)}")
        _draw(axes, history[key], label, smoothing)
    return finish(axes, figure, ylabel=key, log_scale=log_scale, title=title or key)


def _draw(
    axes: Any, pairs: list[tuple[int, float]], label: str, smoothing: float = 0.0, *fmt: str, **style: Any
) -> None:
    steps, values = zip(*pairs)
    axes.plot(steps, smooth(values, smoothing) if smoothing else values, *fmt, label=label, **style)


def _select(history: MetricHistory, patterns: list[str], *, required: bool = True) -> list[str]:
    selected: list[str] = []
    for pattern in patterns:
        matches = sorted(key for key in history if fnmatch.fnmatchcase(key, pattern))
        selected.extend(key for key in matches if key not in selected)
    if required and not selected:
        raise KeyError(f"No logged key matches {patterns}; logged keys: {sorted(history)}")
    return selected


def _first(history: MetricHistory, patterns: Sequence[str]) -> str | None:
    return next(iter(_select(history, list(patterns), required=False)), None)


def _overfit_curves(curve: Any) -> dict[str, tuple[list[float], float | None]]:
    if isinstance(curve, Mapping) and curve and not isinstance(curve.get("curve", curve.get("losses")), list):
        return {str(label): next(iter(_overfit_curves(item).values())) for label, item in curve.items()}
    if _is_curve(curve):
        return {"loss": ([float(v) for v in curve], None)}
    details = curve if isinstance(curve, Mapping) else getattr(curve, "details", None)
    if details is None and hasattr(curve, "results"):  # a preflight report: take the overfit check
        for result in curve.results:
            if "overfit" in str(getattr(result, "name", "")):
                details = getattr(result, "details", None)
                break
    if isinstance(details, Mapping):
        for name in ("curve", "losses", "loss_curve"):
            if _is_curve(details.get(name)):
                target = details.get("target")
                return {
                    "loss": ([float(v) for v in details[name]], None if target is None else float(target))
                }
    raise TypeError(
        "`curve` must be a list of losses, a mapping label -> losses, or an overfit check result / preflight "
        f"report whose details hold the curve, got {type(curve).__name__}."
    )


def _is_curve(value: Any) -> bool:
    return (
        isinstance(value, Sequence)
        and not isinstance(value, str)
        and all(isinstance(v, (int, float)) for v in value)
    )
