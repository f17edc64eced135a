"""HealthMonitor's ``not_learning`` rule: the loss sits where it started and nothing moves it; causes ranked
by the evidence the monitor holds.

The symptom: over ``plateau_checks`` checks and ``plateau_steps`` steps every interval mean stays above
``1 - plateau_progress`` of the loss at initialisation and the trend's drop is under ``plateau_rtol`` (yet
significant at ``confidence_z``: a loss flat within its noise is ``loss_plateau``'s), with no other problem
named in the run. The causes: LR too high (ratio above ``ratio_stuck``, or weights grown ``growth_high`` x
since step 0), too low or frozen, no gradient signal, else labels that may not match the inputs; one is
named only when its evidence stands alone (``docs/guides/health_monitor.md``).
"""

from __future__ import annotations

import math

from lightning_recipes._stats import trend
from lightning_recipes.callbacks._health_loss_rules import loss_window, update_ratios
from lightning_recipes.callbacks._health_window import (
    DEFAULT_THRESHOLDS,  # noqa: F401  (the doctests)
    CheckData,
    Decision,
    History,
)

__all__ = ["not_learning"]

_NO_GRADIENT = 1e-8  # gradient RMS per element below which the loss does not depend on the weights
_TELL_APART = (
    "What tells them apart: `preflight`'s overfit_batch check (a model that cannot fit one fixed batch at "
    "this LR: the LR or the model; one that fits it: the labels of the stream do not follow its inputs), or "
    "~150 steps at a 10x lower LR (the loss falls: the LR)."
)


def _fmt(value: float) -> str:
    return f"{value:.3g}"


def not_learning(data: CheckData, history: History, t: dict[str, float], named: bool) -> Decision | None:
    """The loss stays at its level at initialisation for ``plateau_checks`` checks and ``plateau_steps``
    steps, no other problem named in the run (``named``); the causes ranked by evidence.

    Example:
        >>> history = History(losses=[3.15, 3.097, 3.098, 3.095, 3.093], loss_ses=[0.01] + [0.001] * 4,
        ...                   loss_steps=[50, 100, 150, 200, 250], ratios=[2e-3] * 5, start_loss=3.2)
        >>> data = CheckData(300, 5, loss_mean=3.092, loss_count=50, loss_std=0.008, param_norm=81.0,
        ...                  param_norm_start=29.0, update_ratio={"model": 2e-3}, grad_sampled=True,
        ...                  grad_total=0.07, group_numel={"model": 10_000})
        >>> evidence, advice = not_learning(data, history, DEFAULT_THRESHOLDS, named=False)
        >>> evidence["cause"], round(evidence["weight_growth"], 2)
        ('lr_too_high', 2.79)
    """
    if math.isnan(history.start_loss) and math.isfinite(data.loss_head):
        history.start_loss = data.loss_head
    start, k = history.start_loss, int(t["plateau_checks"])
    if named or not (math.isfinite(start) and start > 0 and math.isfinite(data.loss_mean)):
        return None
    if len(history.losses) < k - 1:
        return None
    k = next(
        (
            j
            for j in range(k, len(history.losses) + 2)
            if data.step - _first(history, j) >= t["plateau_steps"]
        ),
        0,
    )
    if not k:
        return None
    steps, means, ses = loss_window(history, data, k)
    span = data.step - steps[0]
    slope, slope_se = trend(steps, means, ses)
    slope_t = slope / slope_se
    level = sum(means) / len(means)
    drop = -slope * span if math.isfinite(slope) else 0.0
    if min(means) <= (1.0 - t["plateau_progress"]) * start or drop > t["plateau_rtol"] * abs(level):
        return None
    if not slope_t < -t["confidence_z"]:  # flat within its noise: ``loss_plateau`` judges that
        return None
    return _diagnose(data, history, t, span, start, k)


def _first(history: History, k: int) -> int:
    """The step of the window's first check when it holds ``k`` checks (this one included)."""
    return history.loss_steps[-(k - 1)] if k > 1 and len(history.loss_steps) >= k - 1 else 1 << 62


def _diagnose(
    data: CheckData, history: History, t: dict[str, float], span: float, start: float, k: int
) -> Decision:
    ratios = update_ratios(data)
    seen = [r for r in [*history.ratios[-(k - 1) :], ratios.median] if math.isfinite(r)]
    top, now = max(seen, default=math.nan), ratios.median
    growth = data.param_norm / data.param_norm_start if data.param_norm_start > 0 else math.nan
    numel = sum(data.group_numel.values()) or 1
    grad_rms = data.grad_total / math.sqrt(numel) if data.grad_sampled else math.nan
    floor, lr = ratios.low(t), ratios.largest_lr()
    high = top > t["ratio_stuck"] or growth > t["growth_high"]
    low = math.isfinite(now) and now < floor
    silent = math.isfinite(grad_rms) and grad_rms < _NO_GRADIENT
    causes = {
        "lr_too_high": (
            f"for: update ratio up to {_fmt(top)} (above {_fmt(t['ratio_stuck'])}), weights {_fmt(growth)}x "
            "their size at step 0"
            if high
            else f"against: update ratio up to {_fmt(top)}, weights {_fmt(growth)}x their size at step 0"
        ),
        "lr_too_low_or_frozen": (
            f"for: update ratio {_fmt(now)} below {_fmt(floor)}"
            if low
            else f"against: update ratio {_fmt(now)} (floor {_fmt(floor)})"
        ),
        "no_gradient_signal": (
            f"for: gradient RMS {_fmt(grad_rms)}" if silent else f"against: gradient RMS {_fmt(grad_rms)}"
        ),
        "labels_do_not_match_inputs": (
            "for: the optimizer moves the weights at a healthy rate and the loss does not follow"
            if not (high or low or silent)
            else "not excluded: nothing in the monitor's numbers measures it"
        ),
    }
    supported = [
        c
        for c, flag in (("lr_too_high", high), ("lr_too_low_or_frozen", low), ("no_gradient_signal", silent))
        if flag
    ]
    cause = supported[0] if len(supported) == 1 else "undetermined"
    ranked = supported or ["labels_do_not_match_inputs", "lr_too_high"]
    evidence = {
        "loss": data.loss_mean,
        "start_loss": start,
        "cause": cause,
        "window_steps": round(span),
        "update_ratio": now,
        "weight_growth": growth,
        "grad_rms": grad_rms,
        "lr": lr,
        "ranked_causes": ranked,
        "causes": causes,
    }
    said = (
        f"The training loss has stayed at {_fmt(data.loss_mean)}, {data.loss_mean / start:.0%} of its "
        f"{_fmt(start)} at initialisation (the level of knowing nothing), for {span:.0f} steps: the run is "
        "not learning. "
    )
    target = f" (from {_fmt(lr)} to about {_fmt(lr / 10)})" if math.isfinite(lr) else ""
    advice = {
        "lr_too_high": f"The weights grew {_fmt(growth)}x since step 0 (update ratio up to {_fmt(top)}) "
        f"while the loss did not move: the steps throw them around. Lower the learning rate about "
        f"10x{target}, add warm-up, or run an LR range test.",
        "lr_too_low_or_frozen": f"Each step changes the weights by only {_fmt(now)} of their norm: raise the "
        "learning rate (an LR range test), and check that the parameters are trainable (`requires_grad`, a "
        "freeze that was never undone) and that the schedule does not hold the LR at ~0.",
        "no_gradient_signal": f"The gradients are ~0 (RMS {_fmt(grad_rms)}): the loss does not depend on the "
        "weights. Look for a detached output (`.detach()`, `.item()`, `torch.no_grad`), a constant target, "
        "or labels all ignored (`ignore_index`, a mask).",
        "undetermined": "Candidates, most likely first: "
        + ", ".join(c.replace("_", " ") for c in ranked)
        + " (inputs and labels shuffled apart, a wrong label column, a transform applied to one of them). "
        + _TELL_APART,
    }[cause]
    return evidence, said + advice
