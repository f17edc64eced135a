"""The LR range test's curve: loss against the learning rate, the loss axis cut to the part worth reading."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from lightning_recipes.plots.curves import finish, new_axes

__all__ = ["loss_axis_limits", "plot_lr_range"]

#: The axis top sits this many times the fall (start - minimum) above the starting loss.
HEADROOM = 2.0


def loss_axis_limits(losses: Sequence[float], smoothed: Sequence[float] = ()) -> tuple[float, float]:
    """``(bottom, top)`` of the loss axis: the lowest loss to ``HEADROOM`` x the fall above the start (the
    median of the first tenth), capped at the highest loss; 5% padding.

    Example:
        >>> [round(v, 2) for v in loss_axis_limits([2.3, 2.2, 1.5, 0.9, 1.1, 6.0, 449.0])]
        [0.69, 5.31]
        >>> [round(v, 2) for v in loss_axis_limits([2.3, 2.0, 1.8])]  # nothing to cut
        [1.78, 2.32]
    """
    values = [v for v in (*losses, *smoothed) if v == v and abs(v) != float("inf")]
    if not values:
        return 0.0, 1.0
    head = sorted(losses[: max(1, len(losses) // 10)])
    start = head[len(head) // 2] if head else values[0]
    low, high = min(values), max(values)
    fall = max(start - low, 1e-3 * max(abs(start), 1e-12))
    top = min(high, start + HEADROOM * fall)
    pad = 0.05 * max(top - low, 1e-12)
    return low - pad, top + pad


def plot_lr_range(result: Any, *, ax: Any = None) -> Any:
    """Draw an :class:`~lightning_recipes.tune.LRRangeResult`: loss against the LR, suggestion and peak LR
    marked, losses above :func:`loss_axis_limits` as triangles on the top edge.

    Example:
        >>> from lightning_recipes.tune import LRRangeResult
        >>> lrs = [1e-4 * 2**i for i in range(8)]
        >>> losses = [2.3, 2.2, 1.5, 0.9, 0.8, 1.1, 6.0, 449.0]
        >>> result = LRRangeResult(lrs, losses, losses, 1e-3, 5e-3, "min_div_10", "diverged", ["AdamW"])
        >>> axes = plot_lr_range(result).axes[0]
        >>> round(float(axes.get_ylim()[1]), 1), [t.get_text() for t in axes.get_legend().get_texts()][-1]
        (5.5, '2 losses above the axis (max 449)')
    """
    figure, axes = new_axes(ax, figsize=(6.4, 4.0))
    lrs, losses, smoothed = list(result.lrs), list(result.losses), list(result.smoothed)
    axes.plot(lrs, losses, alpha=0.3, label="loss")
    if smoothed:
        axes.plot(lrs, smoothed, label="smoothed")
    if result.suggestion is not None:
        axes.axvline(
            result.suggestion, color="C2", linestyle="--", label=f"suggestion {result.suggestion:.2g}"
        )
    if result.peak_lr is not None and result.peak_lr != result.suggestion:
        axes.axvline(result.peak_lr, color="C3", linestyle=":", label=f"peak_lr {result.peak_lr:.2g}")
    evidence = getattr(result, "evidence", None)
    if evidence is not None:  # the verdict's yardstick: the start, and how far below it counts as a fall
        axes.axhline(evidence.start_loss, color="0.5", linewidth=0.8, label="start")
        axes.axhline(
            evidence.start_loss - evidence.threshold, color="0.5", linestyle=":", label="start - threshold"
        )
    bottom, top = loss_axis_limits(losses, smoothed)
    above = [(lr, loss) for lr, loss in zip(lrs, losses) if not loss <= top]  # NaN counts as above
    if above:
        finite = [loss for _, loss in above if loss == loss]
        most = f" (max {max(finite):.3g})" if finite else ""
        axes.scatter(
            [lr for lr, _ in above],
            [top] * len(above),
            marker="^",
            color="red",
            clip_on=False,
            zorder=3,
            label=f"{len(above)} loss{'es' if len(above) > 1 else ''} above the axis{most}",
        )
    axes.set_ylim(bottom, top)
    axes.set_xscale("log")
    verdict = "; INCONCLUSIVE: no pick" if getattr(result, "verdict", "ok") == "inconclusive" else ""
    title = (
        f"LR range test ({', '.join(result.optimizers)}; {result.rule}; stopped: {result.stopped}{verdict})"
    )
    return finish(axes, figure, xlabel="learning rate", ylabel="training loss", title=title)
