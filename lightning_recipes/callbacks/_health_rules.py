"""HealthMonitor's decisions: pure host-side rules over one check's numbers and the run's history.

They run after the check's one sync, on host floats identical on every rank, so every rank reaches the same
findings. Each rule, its default threshold (:data:`DEFAULT_THRESHOLDS`), its source and when it stays quiet:
``docs/guides/health_monitor.md``. The loss and LR rules are in ``_health_loss_rules.py``, ``not_learning``
in ``_health_not_learning.py``. Root cause first: units that die while the update ratio is above
``ratio_high`` are ``lr_too_high`` (the dead units are its evidence).
"""

from __future__ import annotations

import math
import statistics

from lightning_recipes._stats import significantly_above
from lightning_recipes.callbacks._health_loss_rules import (
    interval_se,
    loss_plateau,
    lower_lr_by,
    lr_too_high,
    lr_too_low,
    overfitting,
    streak,
    update_ratios,
)
from lightning_recipes.callbacks._health_not_learning import not_learning
from lightning_recipes.callbacks._health_window import (
    DEFAULT_THRESHOLDS,  # noqa: F401  (the doctests)
    PROBLEMS,
    CheckData,
    Decision,
    History,
)

__all__ = [
    "RULES",
    "data_stall",
    "dead_units",
    "decide",
    "exploding_gradients",
    "loss_plateau",
    "lr_too_high",
    "lr_too_low",
    "nonfinite_activations",
    "not_learning",
    "overfitting",
    "saturated_activations",
    "settle",
    "vanishing_gradients",
]


_streak = streak


def _fmt(value: float) -> str:
    return f"{value:.3g}"


def decide(data: CheckData, history: History, thresholds: dict[str, float]) -> dict[str, Decision]:
    """The problems present at this check, each with its evidence and advice; updates ``history``.

    Runs the rules of :data:`RULES` in order; a rule's streak (``persist_checks``) and the loss/gradient
    histories are updated here or by the rule itself, exactly once per check.

    Example:
        >>> history = History()
        >>> data = CheckData(step=50, epoch=0, loss_mean=1.0, nonfinite_modules=["encoder.fc1"])
        >>> sorted(decide(data, history, DEFAULT_THRESHOLDS))
        ['nonfinite_activations']
    """
    t = thresholds
    out: dict[str, Decision] = {}
    found = nonfinite_activations(data, history, t)
    if found is not None:
        # inf/nan poison every other instrument (a nan is never > 0: every unit looks dead): name only it
        out["nonfinite_activations"] = found
        _add(out, "data_stall", data_stall(data, history, t))
        return out
    _add(out, "exploding_gradients", exploding_gradients(data, history, t))
    if "exploding_gradients" in out:
        history.streaks["exploded_at_step"] = data.step
    if data.grad_sampled and math.isfinite(data.grad_total):
        history.grad_totals.append(data.grad_total)
    _add(out, "dead_units", dead_units(data, history, t))
    if not history.streaks.get("dead_units", 0):
        history.streaks["dead_by_lr"] = 0
    _add(out, "saturated_activations", saturated_activations(data, history, t))
    _add(out, "vanishing_gradients", vanishing_gradients(data, history, t))
    _add(out, "lr_too_high", lr_too_high(data, history, t))
    if "dead_units" in out and (history.streaks.get("dead_by_lr", 0) or _killed_by_the_lr(data, history, t)):
        history.streaks["dead_by_lr"] = 1  # the same units stay the LR's symptom while they stay dead
        evidence, _ = out.pop("dead_units")
        high = out.get("lr_too_high") or _lr_kills_units(data, history, t)
        out["lr_too_high"] = ({**high[0], "dead_fraction": evidence["dead_fraction"]}, high[1])
    ratios = update_ratios(data)
    learn_blocked = _cannot_learn(history)
    _add(out, "lr_too_low", lr_too_low(data, history, t, cannot_learn=learn_blocked))
    lr_explains = math.isfinite(ratios.median) and not (
        ratios.low(t) <= ratios.median <= t["ratio_stuck"]
    )  # an update ratio outside the healthy range: the LR rules judge it, a plateau would misname it
    if not ({"lr_too_low", "lr_too_high"} & set(out) or learn_blocked or lr_explains):
        _add(out, "loss_plateau", loss_plateau(data, history, t, family=ratios.family))
    if ratios.by_group:  # after the LR rules: they compare this check's LR with the previous one's
        history.ratios.append(ratios.median)
        history.lrs.append(ratios.largest_lr())
    if set(out) - {"data_stall"}:
        history.streaks["named"] = 1  # a rule named a cause: not_learning is for the runs none explains
    _add(out, "not_learning", not_learning(data, history, t, named=bool(history.streaks.get("named"))))
    if math.isfinite(data.loss_mean):
        history.losses.append(data.loss_mean)
        history.loss_ses.append(interval_se(data))
        history.loss_steps.append(data.step)
    _add(out, "overfitting", overfitting(data, history, t))
    _add(out, "data_stall", data_stall(data, history, t))
    return out


def _cannot_learn(history: History) -> bool:
    """A layer that cannot learn (vanishing, dead, saturated) explains a small update and a flat loss."""
    return any(
        history.streaks.get(p, 0) > 0 for p in ("vanishing_gradients", "dead_units", "saturated_activations")
    )


def _killed_by_the_lr(data: CheckData, history: History, t: dict[str, float]) -> bool:
    """Units died while the update ratio was above ``ratio_high`` (now or at an earlier check)."""
    ratio = update_ratios(data).median
    high_now = math.isfinite(ratio) and ratio > t["ratio_high"]
    return high_now or any(r > t["ratio_high"] for r in history.ratios[-int(t["persist_checks"]) - 1 :])


def _lr_kills_units(data: CheckData, history: History, t: dict[str, float]) -> Decision:
    ratios = update_ratios(data)
    seen = max([r for r in [ratios.median, *history.ratios] if math.isfinite(r)], default=math.nan)
    lr = ratios.largest_lr()
    factor = lower_lr_by(seen) if math.isfinite(seen) else 10
    target = f" (from {_fmt(lr)} to about {_fmt(lr / factor)})" if math.isfinite(lr) else ""
    return (
        {"update_ratio": seen, "lr": lr, "optimizer_family": ratios.family, "loss": data.loss_mean},
        f"Steps changed the weights by up to {_fmt(seen)} of their norm (healthy: ~1e-3) and units died: the "
        f"learning rate is too high. Lower it about {factor}x{target}, add warm-up, or clip.",
    )


def settle(active: set[str], present: set[str], history: History, persist: int) -> tuple[set[str], list[str]]:
    """``(still active, newly found)``: a problem stays active until it has been absent ``persist`` checks in
    a row, so one check of flicker does not raise the same finding twice. The absence counts live in
    ``history.streaks`` (saved with it).

    Example:
        >>> history, active, found = History(), set(), []
        >>> for present in ({"dead_units"}, set(), {"dead_units"}, set(), set(), {"dead_units"}):
        ...     active, new = settle(active, present, history, 2)
        ...     found += new
        >>> found  # absent one check (2): the same finding; absent two (4, 5), then back: a new one
        ['dead_units', 'dead_units']
    """
    new = [p for p in PROBLEMS if p in present and p not in active]
    kept = set(new)
    for problem in active:
        key = f"absent:{problem}"
        absent = 0 if problem in present else history.streaks.get(key, 0) + 1
        if absent < persist:
            kept.add(problem)
            history.streaks[key] = absent
        else:
            history.streaks.pop(key, None)
    return kept, new


def _add(out: dict[str, Decision], problem: str, decision: Decision | None) -> None:
    if decision is not None:
        out[problem] = decision


# ---------------------------------------------------------------------------------------------- the rules
# One function per problem: (this check's numbers, the history, the thresholds) -> (evidence, advice) or
# None. A rule that must persist ``persist_checks`` checks counts its own streak in ``history.streaks``.


def nonfinite_activations(data: CheckData, history: History, t: dict[str, float]) -> Decision | None:
    """A sampled forward produced inf/nan, or a loss did while the sampled gradients were finite, or the
    weights are inf/nan. Attributed by evidence: non-finite weights (a step wrote them: every forward after is
    non-finite whatever the data), else the first module's non-finite inputs (the batch), else the module's
    own operation on finite inputs.

    Example:
        >>> nonfinite_activations(CheckData(0, 0, loss_nonfinite=2), History(), DEFAULT_THRESHOLDS)[0]
        {'first_module': 'loss', 'cause': 'operation', 'modules': [], 'nonfinite_losses': 2}
        >>> data = CheckData(40, 0, nonfinite_modules=["stem.0"], nonfinite_weights=["stem.0", "head"])
        >>> nonfinite_activations(data, History(), DEFAULT_THRESHOLDS)[0]["cause"]
        'nonfinite_weights'
    """
    grad_bad = data.grad_sampled and not math.isfinite(data.grad_total)
    weights = data.nonfinite_weights
    if not (data.nonfinite_modules or weights or (data.loss_nonfinite and not grad_bad)):
        return None
    first = data.nonfinite_modules[0] if data.nonfinite_modules else "loss"
    inputs_bad = first in data.nonfinite_inputs
    # non-finite inputs of the first module come first (their gradient then wrote the weights)
    cause = "inputs" if inputs_bad else "nonfinite_weights" if weights else "operation"
    evidence: dict[str, object] = {"first_module": first, "cause": cause}
    if weights:
        evidence["nonfinite_weights"] = weights[:8]
    evidence |= {"modules": data.nonfinite_modules[:8], "nonfinite_losses": data.loss_nonfinite}
    if cause == "nonfinite_weights":
        advice = (
            f"The weights of {_names(weights)} are inf/nan: an optimizer step wrote them, and every forward "
            f"after it is non-finite whatever the data (`{first}`'s inputs were finite). The step applied a "
            "non-finite update: from a non-finite loss or gradient at that step (skip such steps: "
            "`StabilityGuard`, a GradScaler in fp16), or from the update itself overflowing with finite "
            "gradients (learning rate too high, an optimizer eps too small, a division by ~0 in the update). "
            "Find the first non-finite loss/gradient, and resume from a checkpoint before it."
        )
    elif inputs_bad:
        advice = (
            f"`{first}` received inf/nan inputs: check the batches (data with nan/inf, a bad sample or "
            "column) and any operation before it outside a module; clean or clamp the data"
            + (
                f" (the weights of {_names(weights)} are non-finite too: a step applied its gradient)."
                if weights
                else "."
            )
        )
    else:
        advice = (
            f"`{first}` produced inf/nan in the forward pass from finite inputs and weights: log of zero, "
            "division by zero, exp overflow there; add an epsilon or clamp, use a normalisation layer before "
            "it, or train in bf16/fp32 instead of fp16."
        )
    return evidence, advice


def _names(groups: list[str], top: int = 3) -> str:
    extra = len(groups) - top
    return ", ".join(f"`{g}`" for g in groups[:top]) + (f" (+{extra} more)" if extra > 0 else "")


def exploding_gradients(data: CheckData, history: History, t: dict[str, float]) -> Decision | None:
    """The sampled gradient norm is non-finite or ``explode_factor`` x the median of earlier checks'.

    Example:
        >>> data = CheckData(0, 0, grad_sampled=True, grad_total=500.0)
        >>> history = History(grad_totals=[1.0, 3.0])
        >>> exploding_gradients(data, history, DEFAULT_THRESHOLDS)[0]["grad_norm"]
        500.0
    """
    if not data.grad_sampled:
        return None
    earlier = [g for g in history.grad_totals if math.isfinite(g)]
    grad_bad = not math.isfinite(data.grad_total)
    baseline = statistics.median(earlier) if earlier else math.nan
    if not (grad_bad or (earlier and data.grad_total > t["explode_factor"] * baseline)):
        return None
    top = sorted(data.group_grad_rms.items(), key=lambda kv: -kv[1] if math.isfinite(kv[1]) else -math.inf)
    return (
        {
            "grad_norm": data.grad_total,
            "baseline_median": baseline,
            "largest_groups_rms": dict(top[:3]),
        },
        f"Gradient norm {_fmt(data.grad_total)} vs a median of {_fmt(baseline)} at earlier checks. "
        "Clip gradients (`Trainer(gradient_clip_val=1.0)` or `AdaptiveGradClip`), lower the learning "
        f"rate, and check the initialisation of {', '.join(k for k, _ in top[:2]) or 'the largest'}.",
    )


def _dead_layers(data: CheckData, t: dict[str, float]) -> dict[str, float]:
    dead = {m: f for m, f in data.dead.items() if f >= t["dead_fraction"]}
    dead.update({m: f for m, f in data.dead_rows.items() if f >= t["dead_fraction"] and m not in dead})
    return dead


def _saturated_layers(data: CheckData, t: dict[str, float]) -> dict[str, float]:
    return {m: f for m, f in data.saturated.items() if f >= t["saturated_fraction"]}


def dead_units(data: CheckData, history: History, t: dict[str, float]) -> Decision | None:
    """A ReLU layer with ``dead_fraction`` of units never active, ``persist_checks`` checks in a row.

    Example:
        >>> history, data = History(streaks={"dead_units": 1}), CheckData(0, 0, dead={"fc1": 0.9})
        >>> dead_units(data, history, DEFAULT_THRESHOLDS)[0]
        {'dead_fraction': {'fc1': 0.9}}
    """
    dead = _dead_layers(data, t)
    measured = bool(data.dead or data.dead_rows)
    if measured and history.dead_at_start < 0:
        history.dead_at_start = max([*data.dead.values(), *data.dead_rows.values()])
    if not (measured and _streak(history, "dead_units", bool(dead)) >= int(t["persist_checks"])):
        return None
    return (
        {"dead_fraction": dead},
        f"{', '.join(f'`{m}` {f:.0%}' for m, f in dead.items())} of units never fire. Lower the learning "
        "rate, use He/Kaiming initialisation with a small positive bias, or switch to LeakyReLU/GELU.",
    )


def saturated_activations(data: CheckData, history: History, t: dict[str, float]) -> Decision | None:
    """A tanh/sigmoid layer with ``saturated_fraction`` of outputs at its bounds, ``persist_checks`` in a row.

    Example:
        >>> data = CheckData(0, 0, saturated={"act": 0.2})
        >>> saturated_activations(data, History(), DEFAULT_THRESHOLDS) is None
        True
    """
    moved = _moved(data)
    first = next(iter(moved), None)
    # starved: the layers below barely move, relative to the layer moving most, or no layer moves at a
    # healthy rate (~1e-3) at all
    starved = first is not None and (
        moved[first] < 1e-2 * max(moved.values()) or max(moved.values()) < t["ratio_high"] / 10
    )
    slow = not _learning_fast(data, history, t)
    sat = _saturated_layers(data, t) if (starved or slow) and not _converging(data, history) else {}
    count = _streak(history, "saturated_activations", bool(sat))
    if count == 1:
        history.streaks["saturated_since"] = data.step
    # starved layers are direct evidence (persist_checks); a slow loss alone must last as long as a plateau
    # (plateau_steps): a saturated net at chance often breaks out after ~100 steps and then learns
    span = data.step - history.streaks.get("saturated_since", data.step)
    enough = count >= int(t["persist_checks"]) if starved else count > 1 and span >= t["plateau_steps"]
    if not (data.saturated and sat and enough):
        return None
    return (
        {"saturated_fraction": sat},
        f"{', '.join(f'`{m}` {f:.0%}' for m, f in sat.items())} of outputs are saturated (gradient ~0). "
        "Scale the initialisation down (Xavier/Glorot for tanh/sigmoid), normalise the layer's input, "
        "or use ReLU/GELU.",
    )


def _converging(data: CheckData, history: History) -> bool:
    """The training loss is below half its first interval's: the run learns, whatever a layer shows (a
    memorising or converged run's early layers stop moving, a confident classifier's sigmoids saturate)."""
    return bool(history.losses) and math.isfinite(data.loss_mean) and data.loss_mean < 0.5 * history.losses[0]


def _learning_fast(data: CheckData, history: History, t: dict[str, float]) -> bool:
    """The loss fell significantly and by 5% or more since the previous check: nothing stalls it (a confident
    classifier saturates its sigmoids as it learns; Glorot & Bengio's saturation is a problem when it
    stalls)."""
    if not (history.losses and math.isfinite(data.loss_mean)):
        return False
    previous, previous_se = history.losses[-1], history.loss_ses[-1] if history.loss_ses else math.nan
    return data.loss_mean < 0.95 * previous and significantly_above(
        previous, previous_se, data.loss_mean, interval_se(data), t["confidence_z"]
    )


def _moved(data: CheckData) -> dict[str, float]:
    """Each non-embedding group's update ratio, in model order (what each layer actually learned this
    step)."""
    return {
        g: r
        for g, r in data.update_ratio.items()
        if math.isfinite(r) and r >= 0 and g not in data.sparse_groups
    }


def vanishing_gradients(data: CheckData, history: History, t: dict[str, float]) -> Decision | None:
    """The earliest group moves less than ``vanish_ratio`` x the group that moves most (update-to-weight
    ratios), ``persist_checks`` in a row, unless dead or saturated units (which cut the gradient path
    themselves) explain it. Update ratios, not gradient norms: an Adam-family optimizer rescales small
    gradients, so only an update that stays small is a layer that does not learn; and a classifier head's
    gradient is naturally far larger than a LayerNorm's. Embedding tables (sparse rows) are left out.

    Example:
        >>> data = CheckData(0, 0, grad_sampled=True, update_ratio={"stem": 1e-9, "mid": 1e-5, "head": 1e-2},
        ...                  group_grad_rms={"stem": 1e-8, "mid": 1e-4, "head": 1.0})
        >>> history = History(streaks={"vanishing_gradients": 1})
        >>> vanishing_gradients(data, history, DEFAULT_THRESHOLDS)[0]["update_ratio_vs_largest"]
        1e-07
    """
    moved = _moved(data)
    if not (data.grad_sampled and len(moved) >= 2):
        return None
    first = next(iter(moved))
    top = max(moved, key=lambda g: moved[g])
    if moved[top] <= 0:
        return None
    ratio = moved[first] / moved[top]
    present = (
        ratio < t["vanish_ratio"]
        and not (_dead_layers(data, t) or _saturated_layers(data, t))
        and not _converging(data, history)
    )
    streak = _streak(history, "vanishing_gradients", present)
    history.vanish_ratios.append(ratio)
    if streak < int(t["persist_checks"]):
        return None
    grad_first = data.group_grad_rms.get(first, math.nan)
    grad_top = data.group_grad_rms.get(top, math.nan)
    return (
        {
            "first_group": first,
            "most_moved_group": top,
            "update_ratio_vs_largest": ratio,
            "update_ratio": {first: moved[first], top: moved[top]},
            "grad_rms": {first: grad_first, top: grad_top},
        },
        f"`{first}` moves {_fmt(ratio)}x as much per step as `{top}` (gradient RMS {_fmt(grad_first)} vs "
        f"{_fmt(grad_top)}): the early layers barely learn. Use a non-saturating activation (ReLU/GELU) and "
        "He/Kaiming initialisation, or add normalisation (BatchNorm, LayerNorm) or residual connections"
        + (
            "."
            if _lr_highish(data, t)
            else ", or give the early layers a larger learning rate (layer-wise LR, e.g. LAMB)."
        ),
    )


def _lr_highish(data: CheckData, t: dict[str, float]) -> bool:
    """Some group moves more than ``ratio_high / 10`` (~1e-3, the healthy update ratio) per step: a larger LR
    would not be safe advice (unknown ratios: not safe either)."""
    moved = _moved(data)
    return not moved or max(moved.values()) > t["ratio_high"] / 10


def data_stall(data: CheckData, history: History, t: dict[str, float]) -> Decision | None:
    """Training waited for data more than ``stall_fraction`` of the time and ``stall_min_s`` (5 ms) per batch,
    ``persist_checks`` in a row. The absolute floor keeps a toy model's few milliseconds of Lightning's own
    between-batch work (hooks, logging: timed as waiting by the host clock) from reading as a stall.

    Example:
        >>> history = History(streaks={"data_stall": 1})
        >>> data = CheckData(0, 0, wait_fraction=0.8, wait_per_batch_s=0.04, wait_source="host timing")
        >>> data_stall(data, history, DEFAULT_THRESHOLDS)[0]
        {'wait_fraction': 0.8, 'wait_per_batch_ms': 40.0, 'measured_by': 'host timing'}
    """
    per_batch = data.wait_per_batch_s
    stalled = (
        data.wait_fraction is not None
        and data.wait_fraction > t["stall_fraction"]
        and (per_batch is None or per_batch < 0 or per_batch >= t["stall_min_s"])
    )
    if _streak(history, "data_stall", stalled) < int(t["persist_checks"]) or data.wait_fraction is None:
        return None
    return (
        {
            "wait_fraction": data.wait_fraction,
            "wait_per_batch_ms": round(1000 * per_batch, 3)
            if per_batch is not None and per_batch >= 0
            else None,
            "measured_by": data.wait_source,
        },
        f"Training waited for data {data.wait_fraction:.0%} of the time"
        + (f" ({1000 * per_batch:.3g} ms per batch)" if per_batch is not None and per_batch >= 0 else "")
        + ". Raise the DataLoader's "
        "`num_workers`, set `persistent_workers=True` and `pin_memory=True` (GPU), and move per-sample "
        "work (decoding, augmentation) out of `__getitem__` or precompute it.",
    )


RULES = (
    nonfinite_activations,
    exploding_gradients,
    dead_units,
    saturated_activations,
    vanishing_gradients,
    lr_too_high,
    lr_too_low,
    loss_plateau,
    not_learning,
    overfitting,
    data_stall,
)
