"""HealthMonitor's layer, gradient and data rules; each reads the check's :class:`Evidence`.

Each returns ``(evidence, advice)`` (:class:`Diagnosed` when it weighed causes) or ``None``.

Example:
    >>> history, T = History(streaks={"dead_units": 1}), DEFAULT_THRESHOLDS
    >>> dead_units(evidence_of(CheckData(0, 0, dead={"fc1": 0.9}), history, T))[0]
    {'dead_fraction': {'fc1': 0.9}}
"""

from __future__ import annotations

import math
import statistics

from lightning_recipes._stats import difference_noise
from lightning_recipes.callbacks._health_causes import ranked, weighed
from lightning_recipes.callbacks._health_evidence import Evidence, streak
from lightning_recipes.callbacks._health_evidence import evidence_of as evidence_of  # the doctests
from lightning_recipes.callbacks._health_window import (
    DEFAULT_THRESHOLDS,  # noqa: F401  (the doctests)
    Cause,
    CheckData,
    Decision,
    Diagnosed,
    Diagnosis,
    History,  # noqa: F401  (the doctests)
    fmt,
    headline,
)

__all__ = [
    "SATURATED_GAIN",
    "data_stall",
    "dead_units",
    "exploded_into_nonfinite",
    "exploding_from_start",
    "exploding_gradients",
    "nonfinite_activations",
    "outlier_batches",
    "saturated_activations",
    "stall_noise",
    "vanishing_gradients",
]

#: A saturated layer's mean slope relative to its peak below which ~no gradient passes through it.
SATURATED_GAIN = 0.25

#: A layer whose steps are this many times ``ratio_high`` (an order of magnitude above the healthy ceiling)
#: is thrown around, whatever the layers below it do.
THROWN = 10.0


def _names(groups: list[str], top: int = 3) -> str:
    extra = len(groups) - top
    return ", ".join(f"`{g}`" for g in groups[:top]) + (f" (+{extra} more)" if extra > 0 else "")


def _shares(fractions: dict[str, float]) -> str:
    return ", ".join(f"`{m}` {f:.0%}" for m, f in fractions.items())


def nonfinite_activations(e: Evidence) -> Decision | None:
    """A sampled forward, a loss or the weights are inf/nan; the cause by evidence: the first module's inputs
    (the data), else non-finite weights (the step that wrote them), else the module's own operation.

    Example:
        >>> e = evidence_of(CheckData(0, 0, loss_nonfinite=2), History(), DEFAULT_THRESHOLDS)
        >>> nonfinite_activations(e)[0]
        {'first_module': 'loss', 'cause': 'operation', 'modules': [], 'nonfinite_losses': 2}
    """
    data, history = e.data, e.history
    grad_bad = data.grad_sampled and not math.isfinite(data.grad_total)
    weights = data.nonfinite_weights
    if not (data.nonfinite_modules or weights or (data.loss_nonfinite and not grad_bad)):
        return None
    first = data.nonfinite_modules[0] if data.nonfinite_modules else "loss"
    bad_step, finite_at = history.streaks.get("first_nonfinite_loss_step", -1), history.finite_weights_step
    step_named = bad_step >= 0 and bad_step >= finite_at
    # the first non-finite loss came from a batch holding inf/nan: the data, whatever the weights are now
    batch_bad = step_named and history.streaks.get("first_nonfinite_loss_on_nonfinite_batch") == 1
    inputs_bad = first in data.nonfinite_inputs or batch_bad
    cause = "inputs" if inputs_bad else "nonfinite_weights" if weights else "operation"
    evidence: dict[str, object] = {"first_module": first, "cause": cause}
    if batch_bad:
        evidence["nonfinite_batch_step"] = bad_step
    elif inputs_bad and step_named:  # a finite batch the step cannot compute (a 0/0 on its values)
        evidence["nonfinite_loss_step"] = bad_step
    if weights:
        evidence["nonfinite_weights"] = weights[:8]
    evidence |= {"modules": data.nonfinite_modules[:8], "nonfinite_losses": data.loss_nonfinite}
    lr = max((v for v in data.group_lr.values() if math.isfinite(v)), default=math.nan)
    if (step_named or math.isnan(lr)) and history.lrs:
        lr = history.lrs[-1]  # the last check's: the LR nearest before the step that wrote the weights
    optimizer = "/".join(data.optimizers) or "the optimizer"
    named_step = {"nonfinite_loss_step": bad_step, "weights_finite_at_step": finite_at} if step_named else {}
    if cause == "nonfinite_weights" and step_named:
        evidence |= named_step | {"optimizer": optimizer, "lr": lr}
    update = weighed("nonfinite_weights", bool(weights), {"nonfinite_weights": weights[:8], **named_step})
    if not weights:
        update.evidence_against = {"weights_finite": True}
    data_cause = Cause("inputs")
    operation = Cause("operation", {}, {"nonfinite_weights": len(weights)} if weights else {})
    if batch_bad:
        data_cause.evidence_for["nonfinite_batch_step"] = bad_step
        update.evidence_against = {"nonfinite_batch_step": bad_step}  # the step's gradient was the data's
    if first in data.nonfinite_inputs:
        data_cause.evidence_for["first_module_inputs_nonfinite"] = first
        operation.evidence_against["first_module_inputs_nonfinite"] = first
    elif batch_bad:
        operation.evidence_against["nonfinite_batch_step"] = bad_step
    elif data.nonfinite_modules:
        data_cause.evidence_against["first_module_inputs_finite"] = first
        if not weights:
            operation.evidence_for["nonfinite_outputs_from_finite_inputs"] = first
    elif not weights:
        operation.evidence_for["nonfinite_losses"] = data.loss_nonfinite
    at, lr_text = (
        f" step {bad_step}" if step_named else " a step",
        f", lr {fmt(lr)}," if math.isfinite(lr) else "",
    )
    if cause == "nonfinite_weights":
        advice = (
            f"The weights of {_names(weights)} are inf/nan: an optimizer step wrote them (the {optimizer} "
            f"update of{at}{lr_text} was non-finite), and every forward after it is non-finite whatever the "
            f"data (`{first}`'s inputs were finite). "
            + (
                f"The loss of step {bad_step} was already non-finite (the weights were finite at step "
                f"{finite_at}): find why that batch's loss was (a bad sample, an fp16 overflow, a log of 0), "
                "skip such steps (`StabilityGuard`, a GradScaler in fp16), and resume from a checkpoint "
                "before it."
                if step_named
                else "No loss was non-finite before it: the update itself overflowed with finite "
                "gradients (learning rate too high, an optimizer eps too small, a division by ~0 in the "
                "update); resume from a checkpoint before it with clipping or a lower LR."
            )
        )
        line = f"weights inf/nan since the {optimizer} update of{at}{lr_text.rstrip(',')}; inputs finite"
    elif batch_bad and first not in data.nonfinite_inputs:
        advice = (
            f"The batch of step {bad_step} held inf/nan values: its loss and gradient were non-finite and "
            f"the {optimizer} step wrote them into the weights. Clean or drop such samples (or skip such "
            "steps: `StabilityGuard`) and resume from a checkpoint before that step."
        )
        line = f"the batch of step {bad_step} held inf/nan (the data); the weights followed"
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
        line = f"`{first}` received inf/nan inputs (the data)"
    else:
        advice = (
            f"`{first}` produced inf/nan in the forward pass from finite inputs and weights: log of zero, "
            "division by zero, exp overflow there; add an epsilon or clamp, use a normalisation layer before "
            "it, or train in bf16/fp32 instead of fp16."
        )
        line = f"`{first}` made inf/nan from finite inputs"
    line = headline(f"nonfinite_activations at step {data.step}: {line}")
    return Diagnosed(
        evidence, advice, Diagnosis(line, ranked([update, data_cause, operation], cause), cause, advice)
    )


def exploded_into_nonfinite(e: Evidence) -> Decision | None:
    """Weights went inf/nan after the interval's finite gradient norms reached ``explode_factor`` x the
    weights' norm at step 0: the gradients exploded (reported with ``nonfinite_activations``, as its cause).

    Example:
        >>> data = CheckData(10, 0, nonfinite_weights=["rnn"], param_norm_start=8.0,
        ...                  step_records=[(0, 3330.0, 0, 0, 0, 1.0), (1, 7210.0, 1, 0, 0, 1.0)])
        >>> e = evidence_of(data, History(), DEFAULT_THRESHOLDS)
        >>> exploded_into_nonfinite(e)[0]["grad_norm_vs_weights"]
        901.25
    """
    data = e.data
    finite = [r for r in data.step_records if math.isfinite(r[1])]
    if not (data.nonfinite_weights and finite and data.param_norm_start > 0):
        return None
    largest = max(finite, key=lambda r: r[1])
    times = largest[1] / data.param_norm_start
    if not times >= e.t["explode_factor"]:
        return None
    e.history.streaks["exploded_at_step"] = data.step
    evidence: dict[str, object] = {
        "grad_norm": largest[1],
        "grad_norm_vs_weights": times,
        "weights_norm_at_start": data.param_norm_start,
        "step_grad_norms": [round(r[1], 3) for r in finite[:8]],
        "nonfinite_weights": data.nonfinite_weights[:8],
        "cause_of": "nonfinite_activations",
    }
    return (
        evidence,
        f"Gradient norms reached {fmt(largest[1])}, {fmt(times)}x the weights' norm at step 0, before the "
        f"weights of {_names(data.nonfinite_weights)} went inf/nan: the gradients exploded. Clip gradients "
        "(`Trainer(gradient_clip_val=1.0)` or `AdaptiveGradClip`), check the initialisation (a recurrent "
        "weight's gain above 1, no normalisation), and lower the learning rate.",
    )


#: The loss's relative change, for a step of the weights' whole norm, below which a gradient is rounding.
NUMERICAL_ZERO = 1e-5
#: A first interval's mean loss under this share of its start: the large first gradients did their work.
STEEP_START = 0.5


def exploding_gradients(e: Evidence) -> Decision | None:
    """The sampled gradient norm non-finite or ``explode_factor`` x earlier checks', or a
    step's that much above the calm steps on an ordinary batch; an outlier batch that began it is the cause.

    Example:
        >>> data = CheckData(0, 0, grad_sampled=True, grad_total=500.0)
        >>> e = evidence_of(data, History(grad_totals=[1.0, 3.0]), DEFAULT_THRESHOLDS)
        >>> exploding_gradients(e)[0]["grad_norm"]
        500.0
    """
    data, found = e.data, e.spikes
    earlier = [g for g in e.history.grad_totals if math.isfinite(g)]
    baseline = statistics.median(earlier) if earlier else math.nan
    # a gradient whose step of the weights' whole norm moves the loss by under ``NUMERICAL_ZERO`` of it is
    # rounding, not a signal: a ratio against one means nothing (a model at its optimum: 1e-15, then 1e-8)
    if math.isfinite(data.param_norm) and data.param_norm > 0 and math.isfinite(data.loss_mean):
        baseline = max(baseline, NUMERICAL_ZERO * abs(data.loss_mean) / data.param_norm)
    # the sampled step is the interval's last: on an outlier batch its gradient is that batch's spike
    last = data.step_records[-1] if data.step_records else None
    outlier = last is not None and last[5] > e.t["outlier_factor"] * found.typical_input
    sampled = data.grad_sampled and (
        not math.isfinite(data.grad_total)
        or (earlier and data.grad_total > e.t["explode_factor"] * baseline and not outlier)
    )
    if not (sampled or found.exploded):
        return None
    if not sampled and e.history.streaks.get("outliers_named"):
        return None  # single steps spiking amid calm ones after outlier batches were named: theirs (a target)
    top = sorted(data.group_grad_rms.items(), key=lambda kv: -kv[1] if math.isfinite(kv[1]) else -math.inf)
    evidence: dict[str, object] = {
        "grad_norm": data.grad_total,
        "baseline_median": baseline,
        "largest_groups_rms": dict(top[:3]),
    }
    if found.exploded:
        evidence |= {
            "exploded_steps": [int(r[0]) for r in found.exploded][:8],
            "step_grad_norm_vs_before": max(r[3] for r in found.exploded),
        }
    if not found.triggers:
        at = found.exploded[0] if found.exploded else None
        return evidence, (
            f"Gradient norm {fmt(data.grad_total)} vs a median of {fmt(baseline)} at earlier checks"
            + (f"; at step {int(at[0])} {fmt(at[3])}x the steps before it" if at else "")
            + ". Clip gradients (`Trainer(gradient_clip_val=1.0)` or `AdaptiveGradClip`), lower the learning "
            f"rate, and check the initialisation of {', '.join(k for k, _ in top[:2]) or 'the largest'}."
        )
    e.history.streaks["outliers_named"] = 1  # the explosion began on outlier batches: the rows, not the LR
    trigger, steps = found.triggers[0], [int(r[0]) for r in found.triggers]
    rows = "; ".join(
        f"batch {int(r[2])} row {int(r[5])} |input| {fmt(r[4])}" for r in found.triggers[:3] if r[5] >= 0
    )
    evidence |= {"cause": "outlier_batches", "outlier_steps": steps}
    data_cause = Cause(
        "outlier_batches",
        {
            "outlier_steps": steps,
            "grad_norm_x_before": trigger[3],
            "largest_input": trigger[4],
            "typical_largest_input": found.typical_input,
        },
    )
    dynamics = Cause("training_dynamics", {}, {"began_on_outlier_batch": int(trigger[0])})
    action = (
        f"Find the samples of the batch at step {int(trigger[0])} ({rows}) and fix them (sentinels such as "
        "-999, unscaled columns, corrupt rows): the gradients exploded right after it, on ordinary batches "
        "at an LR that had been calm. Keep the LR; clip (`gradient_clip_val`) so one batch cannot throw the "
        "weights."
    )
    line = headline(
        f"exploding_gradients at step {data.step}: gradient {fmt(max(r[3] for r in found.exploded))}x the "
        f"steps before, set off by batch {int(trigger[2])} at step {int(trigger[0])} "
        f"(|input| {fmt(trigger[4])})"
    )
    return Diagnosed(evidence, action, Diagnosis(line, [data_cause, dynamics], "outlier_batches", action))


def exploding_from_start(e: Evidence) -> Decision | None:
    """At the first check: the first step's gradient norm and the loss's sensitivity
    ``||g|| ||W|| / |loss|`` both ``explode_factor`` x at step 0, before any update: the initialisation's.

    Example:
        >>> data = CheckData(20, 0, loss_head=2.8e6, grad_sampled=True, grad_total=1.3e6,
        ...                  param_norm_start=44.6, step_records=[(0, 1.8e8, 0, 0, 0, 1.0)])
        >>> e = evidence_of(data, History(), DEFAULT_THRESHOLDS)
        >>> round(exploding_from_start(e)[0]["loss_sensitivity"])
        2867
    """
    data, history, factor = e.data, e.history, e.t["explode_factor"]
    first = next((r for r in data.step_records if r[0] == 0 and math.isfinite(r[1])), None)
    w0, start = data.param_norm_start, e.start
    if history.losses or history.grad_totals or first is None or not (w0 > 0 and math.isfinite(start)):
        return None  # only the run's first check holds its first step
    g0, now = first[1], data.grad_total if data.grad_sampled else math.nan
    sensitivity = g0 * w0 / max(abs(start), 1e-12)
    if not (g0 > factor * w0 and sensitivity > factor):
        return None  # the check's own gradient is not asked: an adaptive optimizer tames it within steps
    if data.loss_mean < STEEP_START * start and not e.level_known:
        return None  # a loss of unknown scale fell to a fraction of its start with them: a steep start
    if data.input_free_gap - e.t["confidence_z"] * data.input_free_gap_se > 0:
        return None  # outputs an initialisation blew up vary far beyond the targets: a model that already
        # beats its own input-free guess did not explode (a loss scaled by hand makes its gradients large)
    history.streaks["exploded_at_step"] = data.step
    evidence: dict[str, object] = {
        "grad_norm_step0": g0,
        "grad_norm": now,
        "weights_norm_at_start": w0,
        "grad_norm_vs_weights": g0 / w0,
        "loss_sensitivity": sensitivity,
        "start_loss": start,
        "lr": e.lr,
        "cause": "initialisation",
    }
    action = (
        f"The gradient norm was {fmt(g0)} at the first step, {fmt(g0 / w0)}x the weights' norm, before any "
        "update: the initialisation makes the outputs and gradients explode, not the learning rate. Scale "
        "the initialisation down (residual branches: zero-init or 1/sqrt(depth) their last layer), add "
        "normalisation, and clip gradients (`gradient_clip_val`) meanwhile."
    )
    line = headline(
        f"exploding_gradients at step {data.step}: gradient {fmt(g0)} at step 0 = {fmt(g0 / w0)}x the "
        f"weights' norm, before any update (initialisation)"
    )
    causes = [
        Cause("initialisation", {"grad_norm_step0": g0, "grad_norm_vs_weights": g0 / w0}),
        Cause("lr_too_high", {}, {"present_before_any_update": True, "lr": e.lr}),
        Cause("loss_scale", {}, {"loss_sensitivity": sensitivity}),
    ]
    return Diagnosed(evidence, action, Diagnosis(line, causes, "initialisation", action))


def dead_layers(data: CheckData, t: dict[str, float]) -> dict[str, float]:
    """Layers with ``dead_fraction`` of units never active (``nn.ReLU`` modules, then Linear/Conv rows)."""
    dead = {m: f for m, f in data.dead.items() if f >= t["dead_fraction"]}
    return dead | {m: f for m, f in data.dead_rows.items() if f >= t["dead_fraction"] and m not in dead}


def saturated_layers(data: CheckData, t: dict[str, float]) -> dict[str, float]:
    """tanh/sigmoid layers with ``saturated_fraction`` of outputs in their flat part."""
    return {m: f for m, f in data.saturated.items() if f >= t["saturated_fraction"]}


#: The share of a layer's units alive with which it still passes its input on (``dead_units``).
_ALIVE = 0.1


def dead_units(e: Evidence) -> Decision | None:
    """A layer with ``dead_fraction`` of units never active, ``persist_checks`` checks in a row, in a run that
    does not learn well (``decide`` then names the cause: ``_health_causes.dead_unit_causes``)."""
    data, history, t = e.data, e.history, e.t
    dead = dead_layers(data, t)
    measured = bool(data.dead or data.dead_rows)
    if measured and history.dead_at_start < 0:
        history.dead_at_start = max([*data.dead.values(), *data.dead_rows.values()])
    if e.spikes.outliers:  # the interval's loss is its outlier batches': no verdict on learning, streak held
        return None
    # dead units impair no run that learns; units dying while it learns a constant are ``not_learning``'s
    alive = measured and max([*data.dead.values(), *data.dead_rows.values()]) <= 1.0 - _ALIVE
    died = bool(history.dead_step0) and all(history.dead_step0.get(m, 1.0) < t["dead_fraction"] for m in dead)
    present = bool(dead) and not e.learning and not (e.input_free and alive and died)
    if not (measured and streak(history, "dead_units", present) >= int(t["persist_checks"])):
        return None
    return (
        {"dead_fraction": dead},
        f"{_shares(dead)} of units never fire. Lower the learning rate, use He/Kaiming initialisation with a "
        "small positive bias, or switch to LeakyReLU/GELU.",
    )


def saturated_activations(e: Evidence) -> Decision | None:
    """tanh/sigmoid outputs flat since initialisation, or ``saturated_fraction`` at the
    bounds ``persist_checks`` in a row while the layers below starve or the loss falls slowly.

    Example:
        >>> e = evidence_of(CheckData(0, 0, saturated={"act": 0.2}), History(), DEFAULT_THRESHOLDS)
        >>> saturated_activations(e)
    """
    stuck = _saturated_from_start(e)
    if stuck is not None:
        return stuck
    data, history, t = e.data, e.history, e.t
    moved = e.ratios.moved
    first = next(iter(moved), None)
    starved = first is not None and (
        moved[first] < 1e-2 * max(moved.values()) or max(moved.values()) < t["ratio_high"] / 10
    )
    fast = data.loss_mean < 0.95 * e.previous and e.below_previous
    # a recurrent layer's gates (measured from the input side) only as flat since the first batch: gates that
    # saturate later followed weights the steps moved (the LR's, zoo 9's LSTM at SGD 200), not the input
    sat = saturated_layers(data, t) if (starved or not fast) and not e.converging else {}
    sat = {m: f for m, f in sat.items() if not m.endswith(":gates")}
    count = streak(history, "saturated_activations", bool(sat))
    if count == 1:
        history.streaks["saturated_since"] = data.step
    span = data.step - history.streaks.get("saturated_since", data.step)
    enough = count >= int(t["persist_checks"]) if starved else count > 1 and span >= t["plateau_steps"]
    if not (data.saturated and sat and enough):
        return None
    return (
        {"saturated_fraction": sat},
        f"{_shares(sat)} of outputs are saturated (gradient ~0). Scale the initialisation down "
        "(Xavier/Glorot for tanh/sigmoid), normalise the layer's input, or use ReLU/GELU.",
    )


def _saturated_from_start(e: Evidence) -> Decision | None:
    """Layers flat on the first batch and still now, ``persist_checks`` in a row."""
    data, history, t = e.data, e.history, e.t

    def flat(fraction: float, gain: float) -> bool:
        return fraction >= t["saturated_fraction"] and gain < SATURATED_GAIN

    for name, (fraction, gain) in data.saturated_init.items():
        history.streaks[f"saturated_at_init:{name}"] = int(flat(fraction, gain))
    stuck = {
        name: fraction
        for name, fraction in data.saturated.items()
        if history.streaks.get(f"saturated_at_init:{name}")
        and flat(fraction, data.saturation_gain.get(name, math.nan))
    }
    if streak(history, "saturated_from_start", bool(stuck)) < int(t["persist_checks"]):
        return None
    gains = {m: data.saturation_gain[m] for m in stuck}
    layers = {m.rsplit(":", 1)[0] for m in stuck if ":" in m}
    grads = {g: r for g, r in data.group_grad_rms.items() if g in layers}
    others = {g: r for g, r in data.group_grad_rms.items() if g not in layers and math.isfinite(r)}
    top = max(others, key=lambda g: others[g], default=None)
    # flat on the first batch, before any update, and flat since: the initialisation's (as dead at step 0)
    evidence: dict[str, object] = {"saturated_fraction": stuck, "gain": gains, "cause": "initialisation"}
    feeding = ""
    if grads and top is not None:
        evidence |= {"grad_rms": grads, "largest_grad_rms": {top: others[top]}}
        feeding = f" (gradient RMS of the layers feeding them {fmt(max(grads.values()))} vs "
        feeding += f"{fmt(others[top])} in `{top}`)"
    action = (
        f"{_shares(stuck)} of outputs have sat in the flat part of their sigmoid/tanh since the first check; "
        f"on average {fmt(max(gains.values()))} of the gradient passes through{feeding}: those units do not "
        "learn. Check their initialisation (a gate bias far from 0, weights too large for tanh/sigmoid: "
        "Xavier/Glorot) and normalise their inputs."
    )
    line = headline(f"saturated_activations at step {data.step}: {_shares(stuck)} flat since the first batch")
    causes = [Cause("initialisation", {"saturated_on_the_first_batch": stuck})]
    return Diagnosed(evidence, action, Diagnosis(line, causes, "initialisation", action))


def _shrinks_before_blocked(e: Evidence) -> bool:
    """The steps already shrink ~30x across the living layers before the first dead
    or saturated one (False when none is among the groups).

    Example:
        >>> data = CheckData(0, 0, update_ratio={"net.0": 1e-9, "net.2": 1e-7, "net.4": 1e-5, "net.6": 1e-3},
        ...                  dead_rows={"net.4": 0.6})
        >>> _shrinks_before_blocked(evidence_of(data, History(), DEFAULT_THRESHOLDS))
        True
    """
    data, t, moved = e.data, e.t, e.ratios.moved
    blocked = [*dead_layers(data, t), *saturated_layers(data, t)]
    names = list(moved)
    at = next((i for i, g in enumerate(names) if any(g == b or g.startswith(b + ".") for b in blocked)), None)
    if not at:
        return False
    live = [moved[g] for g in names[:at]]
    return max(live) > 0 and live[0] < math.sqrt(t["vanish_ratio"]) * max(live)


def vanishing_gradients(e: Evidence) -> Decision | None:
    """The earliest non-embedding group moves less than ``vanish_ratio`` x the group moving most (update
    ratios), ``persist_checks`` in a row, unless dead or saturated units explain it or the run converges.

    Example:
        >>> data = CheckData(0, 0, grad_sampled=True, update_ratio={"stem": 1e-9, "mid": 1e-5, "head": 1e-2},
        ...                  group_grad_rms={"stem": 1e-8, "mid": 1e-4, "head": 1.0})
        >>> e = evidence_of(data, History(streaks={"vanishing_gradients": 1}), DEFAULT_THRESHOLDS)
        >>> vanishing_gradients(e)[0]["update_ratio_vs_largest"]
        1e-07
    """
    data, history, t, moved = e.data, e.history, e.t, e.ratios.moved
    if not (data.grad_sampled and len(moved) >= 2):
        return None
    first, top = next(iter(moved)), max(moved, key=lambda g: moved[g])
    if moved[top] <= 0:
        return None
    ratio = moved[first] / moved[top]
    blocked = bool(dead_layers(data, t) or saturated_layers(data, t)) and not _shrinks_before_blocked(e)
    # a group with a gradient that does not move at all is not stepped, and one with a gradient of exactly 0
    # is cut off from the loss (no path reaches it): neither is a gradient that vanishes on its way
    unstepped = moved[first] == 0 and data.group_grad_rms.get(first, 0.0) > 0
    unstepped |= data.group_grad_rms.get(first, math.nan) == 0.0
    # the top layer's steps far too large (the LR's), not the first layer's too small
    thrown = moved[top] > THROWN * t["ratio_high"]
    count = streak(
        history,
        "vanishing_gradients",
        ratio < t["vanish_ratio"] and not blocked and not e.converging and not unstepped and not thrown,
    )
    history.vanish_ratios.append(ratio)
    if count < int(t["persist_checks"]):
        return None
    grad_first, grad_top = data.group_grad_rms.get(first, math.nan), data.group_grad_rms.get(top, math.nan)
    # a larger LR for the early layers is no safe advice while any layer moves more than ~1e-3 per step
    safe = max(moved.values()) <= t["ratio_high"] / 10
    return (
        {
            "first_group": first,
            "most_moved_group": top,
            "update_ratio_vs_largest": ratio,
            "update_ratio": {first: moved[first], top: moved[top]},
            "grad_rms": {first: grad_first, top: grad_top},
        },
        f"`{first}` moves {fmt(ratio)}x as much per step as `{top}` (gradient RMS {fmt(grad_first)} vs "
        f"{fmt(grad_top)}): the early layers barely learn. Use a non-saturating activation (ReLU/GELU) and "
        "He/Kaiming initialisation, or add normalisation (BatchNorm, LayerNorm) or residual connections"
        + (", or give the early layers a larger learning rate (layer-wise LR, e.g. LAMB)." if safe else "."),
    )


def data_stall(e: Evidence) -> Decision | None:
    """Training waited for data more than ``stall_fraction`` of the time and ``stall_min_s`` per batch,
    ``persist_checks`` in a row, the stalled checks' mean beyond the timing's own noise (:func:`stall_noise`).

    Example:
        >>> history = History(streaks={"data_stall": 1}, waits=[[0.53, 50]])
        >>> data = CheckData(100, 0, wait_fraction=0.53, wait_per_batch_s=0.04, wait_source="host timing")
        >>> data_stall(evidence_of(data, history, DEFAULT_THRESHOLDS)) is None  # 53% twice: within the noise
        True
    """
    data, history, t = e.data, e.history, e.t
    per_batch = data.wait_per_batch_s
    timed = per_batch is not None and per_batch >= 0
    stalled = data.wait_fraction is not None and data.wait_fraction > t["stall_fraction"]
    stalled = stalled and (not timed or per_batch >= t["stall_min_s"])  # type: ignore[operator]
    batches = max(data.step - history.streaks.get("stall_previous_step", 0), 1)
    history.streaks["stall_previous_step"] = data.step
    if data.wait_fraction is not None:
        history.waits.append([data.wait_fraction, float(batches)])
    count = streak(history, "data_stall", stalled)
    if count < int(t["persist_checks"]) or data.wait_fraction is None:
        return None
    mean, se = stall_noise(history.waits, count)
    if not mean - t["stall_fraction"] > t["confidence_z"] * se:
        return None
    ms = 1000 * per_batch if timed else None  # type: ignore[operator]
    return (
        {
            "wait_fraction": data.wait_fraction,
            "wait_per_batch_ms": round(ms, 3) if ms is not None else None,
            "measured_by": data.wait_source,
            "mean_wait_fraction": mean,
            "wait_fraction_se": se,
            "checks": count,
        },
        f"Training waited for data {data.wait_fraction:.0%} of the time"
        + (f" ({ms:.3g} ms per batch)" if ms is not None else "")
        + f", {mean:.0%} +- {se:.0%} over {count} checks. Raise the DataLoader's `num_workers`, set "
        "`persistent_workers=True` and `pin_memory=True` (GPU), and move per-sample work (decoding, "
        "augmentation) out of `__getitem__` or precompute it.",
    )


def stall_noise(waits: list[list[float]], k: int) -> tuple[float, float]:
    """The mean wait fraction of the last ``k`` checks (``[fraction, batches]`` each) and its standard error:
    the larger of the bound ``sqrt(f (1 - f) / batches)`` and the run's check-to-check scatter.

    Example:
        >>> mean, se = stall_noise([[0.4, 50], [0.53, 50], [0.52, 50]], 2)
        >>> round(mean, 3), round(se, 3)
        (0.525, 0.05)
    """
    recent = waits[-k:]
    batches = sum(b for _, b in recent)
    mean = sum(f * b for f, b in recent) / batches if batches else math.nan
    bound = math.sqrt(max(mean * (1.0 - mean), 0.0) / batches) if batches else math.nan
    scatter = difference_noise([f for f, _ in waits]) / math.sqrt(len(recent)) if recent else math.nan
    return mean, max(bound, scatter)


def outlier_batches(e: Evidence) -> Decision | None:
    """A few steps' gradient norms ``outlier_factor`` x the calm steps', on batches with an
    extreme value (``gradient_spikes``); quiet once a finding named the run's outlier batches.

    Example:
        >>> records = [(k, 1.0 + 0.1 * (k % 3), k, 0, 0, 3.0) for k in range(20)]
        >>> records[7] = (7, 3000.0, 7, 5, 0, 999.0)
        >>> e = evidence_of(CheckData(20, 0, step_records=records), History(), DEFAULT_THRESHOLDS)
        >>> evidence = outlier_batches(e)[0]
        >>> evidence["steps"], evidence["batches"], evidence["rows"]
        ([7], [7], ['batch 7 row 5 (|input| 999)'])
    """
    found, history = e.spikes, e.history
    if not found.outliers or history.streaks.get("outliers_named"):
        return None
    history.streaks["outliers_named"] = 1
    rows = [
        f"batch {int(r[2])} row {int(r[5])}" + (f" (|input| {fmt(r[4])})" if math.isfinite(r[4]) else "")
        for r in found.outliers
        if r[5] >= 0
    ]
    steps, batches = [int(r[0]) for r in found.outliers], [int(r[2]) for r in found.outliers]
    largest = max(r[3] for r in found.outliers)
    evidence: dict[str, object] = {
        "steps": steps,
        "batches": batches,
        "grad_norm_vs_before": largest,
        "typical_grad_norm": found.typical_norm,
        "rows": rows,
        "typical_largest_input": found.typical_input,
    }
    return (
        evidence,
        f"{len(steps)} of {found.steps} steps had a gradient {fmt(largest)}x the calm steps' before them "
        f"(step {', '.join(map(str, steps[:3]))}; batch {', '.join(map(str, batches[:3]))}"
        f"{'; ' + ', '.join(rows[:3]) if rows else ''}): a few samples dominate those updates. Inspect those "
        "rows for sentinels (-999), unit errors or corrupt records; clean or clip them (robust scaling, "
        "`gradient_clip_val`), rather than lowering the learning rate for all batches.",
    )
