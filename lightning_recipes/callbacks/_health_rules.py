"""HealthMonitor's decisions: pure host-side rules over one check's numbers and the run's history.

Everything here runs after the one sync of a check, on host floats that are identical on every rank (they
come from one all-gather), so every rank reaches the same findings. No tensors, no Lightning.

Each rule and its threshold, with the source it follows (the defaults of :data:`DEFAULT_THRESHOLDS`):

* ``exploding_gradients``: the sampled gradient norm is non-finite, or above ``explode_factor`` (100) times
  the median of the earlier checks' norms. AutoTrainer (Zhang et al., ICSE 2021) flags gradients that grow
  by orders of magnitude; 100x is two.
* ``vanishing_gradients``: the gradient RMS of the earliest parameter group is below ``vanish_ratio``
  (1e-3, three orders of magnitude) times that of the latest group at ``persist_checks`` (2) checks in a row,
  unless dead or saturated units explain it (AutoTrainer compares early to late layers the same way).
* ``dead_units``: in a ReLU/ReLU6 layer, at least ``dead_fraction`` (0.5) of the units were never active
  on any sampled batch of ``persist_checks`` checks in a row (dying ReLU: Lu et al., 2019).
* ``saturated_activations``: in a tanh/sigmoid layer at least ``saturated_fraction`` (0.5) of outputs lie
  within 1% of the bounds (``|tanh| > 0.99``, sigmoid ``< 0.01`` or ``> 0.99``) at ``persist_checks``
  checks in a row (Glorot & Bengio, AISTATS 2010: saturated top layers stall learning).
* ``lr_too_high``: the median per-group update-to-parameter ratio ``||dW|| / ||W||`` of the sampled step is
  above ``ratio_high`` (0.01: 10x the ~1e-3 of Karpathy's CS231n rule of thumb) while the training loss
  rises (this interval's mean more than ``rise_rtol``, 10%, above the previous one's); Cockpit
  (Schneider et al., NeurIPS 2021) reads
  the same two instruments together.
* ``lr_too_low``: the median ratio is below ``ratio_low`` (1e-5: 100x below 1e-3) and the loss moved less
  than ``plateau_rtol`` (1%) between checks, ``persist_checks`` checks in a row.
* ``loss_plateau``: the best interval-mean training loss of the last ``plateau_checks`` (5) checks is less
  than ``plateau_rtol`` (1%) below the best before them, while the loss is still above half its first
  value (a converged run is not a plateau) and the ratio is in the normal range.
* ``overfitting``: Prechelt (1998)'s generalisation loss ``GL = 100 (E_va / E_opt - 1)`` above
  ``overfit_gl`` (5, his GL5) at ``persist_checks`` validations in a row, while the training loss is below
  its value at the best validation; the finding names the epoch after the best one (where it began).
* ``data_stall``: training waited for data more than ``stall_fraction`` (0.5) of the interval's wall time
  at ``persist_checks`` checks in a row, from ``InputPipelineMonitor`` (steps that wait longer than they
  compute).
* ``nonfinite_activations``: a sampled forward produced ``inf``/``nan`` (the first module doing so is
  named), or a loss was non-finite while the gradients were not sampled non-finite.
"""

from __future__ import annotations

import math
import statistics

from lightning_recipes.callbacks._health_window import (
    DEFAULT_THRESHOLDS,  # noqa: F401  (the doctests)
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
    "overfitting",
    "saturated_activations",
    "vanishing_gradients",
]


def _streak(history: History, name: str, present: bool) -> int:
    history.streaks[name] = history.streaks.get(name, 0) + 1 if present else 0
    return history.streaks[name]


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
    if data.grad_sampled and math.isfinite(data.grad_total):
        history.grad_totals.append(data.grad_total)
    _add(out, "dead_units", dead_units(data, history, t))
    _add(out, "saturated_activations", saturated_activations(data, history, t))
    _add(out, "vanishing_gradients", vanishing_gradients(data, history, t))
    _add(out, "lr_too_high", lr_too_high(data, history, t))
    _add(out, "lr_too_low", lr_too_low(data, history, t))
    if "lr_too_low" not in out:
        _add(out, "loss_plateau", loss_plateau(data, history, t))
    if math.isfinite(data.loss_mean):
        history.losses.append(data.loss_mean)
    _add(out, "overfitting", overfitting(data, history, t))
    _add(out, "data_stall", data_stall(data, history, t))
    return out


def _add(out: dict[str, Decision], problem: str, decision: Decision | None) -> None:
    if decision is not None:
        out[problem] = decision


# ---------------------------------------------------------------------------------------------- the rules
# One function per problem: (this check's numbers, the history, the thresholds) -> (evidence, advice) or
# None. A rule that must persist ``persist_checks`` checks counts its own streak in ``history.streaks``.


def nonfinite_activations(data: CheckData, history: History, t: dict[str, float]) -> Decision | None:
    """A sampled forward produced inf/nan, or a loss did while the sampled gradients were finite.

    Example:
        >>> nonfinite_activations(CheckData(0, 0, loss_nonfinite=2), History(), DEFAULT_THRESHOLDS)[0]
        {'first_module': 'loss', 'modules': [], 'nonfinite_losses': 2}
    """
    grad_bad = data.grad_sampled and not math.isfinite(data.grad_total)
    if not (data.nonfinite_modules or (data.loss_nonfinite and not grad_bad)):
        return None
    first = data.nonfinite_modules[0] if data.nonfinite_modules else "loss"
    return (
        {
            "first_module": first,
            "modules": data.nonfinite_modules[:8],
            "nonfinite_losses": data.loss_nonfinite,
        },
        f"`{first}` produced inf/nan in the forward pass. Check its inputs (data with nan/inf, log of "
        "zero, division by zero, exp overflow); add an epsilon or clamp there, use a normalisation layer "
        "before it, or train in bf16/fp32 instead of fp16.",
    )


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
    return {m: f for m, f in data.dead.items() if f >= t["dead_fraction"]}


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
    if not (data.dead and _streak(history, "dead_units", bool(dead)) >= int(t["persist_checks"])):
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
    sat = _saturated_layers(data, t)
    if not (
        data.saturated and _streak(history, "saturated_activations", bool(sat)) >= int(t["persist_checks"])
    ):
        return None
    return (
        {"saturated_fraction": sat},
        f"{', '.join(f'`{m}` {f:.0%}' for m, f in sat.items())} of outputs are saturated (gradient ~0). "
        "Scale the initialisation down (Xavier/Glorot for tanh/sigmoid), normalise the layer's input, "
        "or use ReLU/GELU.",
    )


def vanishing_gradients(data: CheckData, history: History, t: dict[str, float]) -> Decision | None:
    """The earliest group's gradient RMS is below ``vanish_ratio`` x the latest's, ``persist_checks`` in a
    row, unless dead or saturated units (which cut the gradient path themselves) explain it.

    Example:
        >>> data = CheckData(0, 0, grad_sampled=True, group_grad_rms={"embed": 1e-7, "head": 1.0})
        >>> history = History(streaks={"vanishing_gradients": 1})
        >>> vanishing_gradients(data, history, DEFAULT_THRESHOLDS)[0]["rms_ratio"]
        1e-07
    """
    groups = [g for g, v in data.group_grad_rms.items() if math.isfinite(v)]
    if not (data.grad_sampled and len(groups) >= 2 and data.group_grad_rms[groups[-1]] > 0):
        return None
    first, last = groups[0], groups[-1]
    ratio = data.group_grad_rms[first] / max(data.group_grad_rms[last], 1e-30)
    present = ratio < t["vanish_ratio"] and not (_dead_layers(data, t) or _saturated_layers(data, t))
    streak = _streak(history, "vanishing_gradients", present)
    history.vanish_ratios.append(ratio)
    if streak < int(t["persist_checks"]):
        return None
    return (
        {
            "first_group": first,
            "last_group": last,
            "rms_ratio": ratio,
            "grad_rms": {g: data.group_grad_rms[g] for g in groups},
        },
        f"Gradients reaching `{first}` are {_fmt(ratio)}x those of `{last}`. Use a non-saturating "
        "activation (ReLU/GELU) and He/Kaiming initialisation, add normalisation (BatchNorm, "
        "LayerNorm) or residual connections between them, or give the early layers a larger learning "
        "rate.",
    )


def _median_ratio(data: CheckData) -> tuple[list[float], float]:
    ratios = [r for r in data.update_ratio.values() if math.isfinite(r) and r > 0]
    return ratios, statistics.median(ratios) if ratios else math.nan


def _previous_loss(history: History) -> float:
    return history.losses[-1] if history.losses else math.nan


def _loss_flat(data: CheckData, history: History, t: dict[str, float]) -> bool:
    previous = _previous_loss(history)
    return (
        math.isfinite(data.loss_mean)
        and math.isfinite(previous)
        and abs(data.loss_mean - previous) <= t["plateau_rtol"] * abs(previous)
    )


def _cannot_learn(history: History) -> bool:
    """A layer that cannot learn (vanishing, dead, saturated) explains a small update and a flat loss."""
    return any(
        history.streaks.get(p, 0) > 0 for p in ("vanishing_gradients", "dead_units", "saturated_activations")
    )


def _lr_low(data: CheckData, history: History, t: dict[str, float]) -> bool:
    ratios, median_ratio = _median_ratio(data)
    return (
        bool(ratios)
        and median_ratio < t["ratio_low"]
        and _loss_flat(data, history, t)
        and not _cannot_learn(history)
    )


def lr_too_high(data: CheckData, history: History, t: dict[str, float]) -> Decision | None:
    """The median update/parameter ratio is above ``ratio_high`` while the loss rises by ``rise_rtol``.

    Example:
        >>> data = CheckData(0, 0, loss_mean=2.0, update_ratio={"fc1": 0.1, "fc2": 0.2})
        >>> lr_too_high(data, History(losses=[1.0]), DEFAULT_THRESHOLDS)[0]["median_update_ratio"]
        0.15000000000000002
    """
    ratios, median_ratio = _median_ratio(data)
    previous_loss = _previous_loss(history)
    rising = (
        math.isfinite(data.loss_mean)
        and math.isfinite(previous_loss)
        and data.loss_mean > (1.0 + t["rise_rtol"]) * previous_loss
    )
    if not (ratios and median_ratio > t["ratio_high"] and rising):
        return None
    return (
        {
            "median_update_ratio": median_ratio,
            "update_ratio": dict(sorted(data.update_ratio.items(), key=lambda kv: -kv[1])[:4]),
            "loss": data.loss_mean,
            "previous_loss": previous_loss,
        },
        f"Each step changes the weights by {_fmt(median_ratio)} of their norm (healthy: ~1e-3) and the "
        f"loss rose from {_fmt(previous_loss)} to {_fmt(data.loss_mean)}. Lower the learning rate by "
        f"~{max(3, round(median_ratio / 1e-3 / 10))}x (or run an LR range test), add warm-up, or clip.",
    )


def lr_too_low(data: CheckData, history: History, t: dict[str, float]) -> Decision | None:
    """The median update ratio is below ``ratio_low`` with a flat loss, ``persist_checks`` in a row.

    Example:
        >>> data = CheckData(0, 0, loss_mean=1.0, update_ratio={"fc1": 1e-7})
        >>> history = History(losses=[1.0], streaks={"lr_too_low": 1})
        >>> lr_too_low(data, history, DEFAULT_THRESHOLDS)[0]
        {'median_update_ratio': 1e-07, 'loss': 1.0}
    """
    if _streak(history, "lr_too_low", _lr_low(data, history, t)) < int(t["persist_checks"]):
        return None
    _, median_ratio = _median_ratio(data)
    return (
        {"median_update_ratio": median_ratio, "loss": data.loss_mean},
        f"Each step changes the weights by only {_fmt(median_ratio)} of their norm (healthy: ~1e-3) and "
        f"the loss is flat at {_fmt(data.loss_mean)}. Raise the learning rate ~"
        f"{max(3, round(1e-3 / max(median_ratio, 1e-12) / 10))}x (an LR range test finds it).",
    )


def loss_plateau(data: CheckData, history: History, t: dict[str, float]) -> Decision | None:
    """The best loss of the last ``plateau_checks`` checks is not ``plateau_rtol`` below the best before,
    while the loss is above half its first value and no learning-rate or dead-layer cause explains it.

    Example:
        >>> data, history = CheckData(0, 0, loss_mean=1.0), History(losses=[1.2, 1.0, 1.0, 1.0, 1.0, 1.0])
        >>> loss_plateau(data, history, DEFAULT_THRESHOLDS)[0]["checks"]
        5
    """
    k = int(t["plateau_checks"])
    losses = [v for v in [*history.losses, data.loss_mean] if math.isfinite(v)]
    if len(losses) <= k or _lr_low(data, history, t) or _cannot_learn(history):
        return None
    before, recent = min(losses[:-k]), min(losses[-k:])
    if not (recent > before - t["plateau_rtol"] * abs(before) and data.loss_mean > 0.5 * losses[0]):
        return None
    return (
        {"best_recent": recent, "best_before": before, "checks": k, "first_loss": losses[0]},
        f"The training loss has not improved on {_fmt(before)} for {k} checks, at "
        f"{data.loss_mean / losses[0]:.0%} of its first value. Try a learning-rate schedule with "
        "decay or restarts, a larger model, a different optimizer (AdamW/Lion), or check that the "
        "labels are learnable (`preflight`'s overfit_batch check).",
    )


def overfitting(data: CheckData, history: History, t: dict[str, float]) -> Decision | None:
    """Prechelt's generalisation loss above ``overfit_gl`` at ``persist_checks`` validations in a row while
    the training loss is below its value at the best validation (records each validation in ``history``).

    Example:
        >>> history = History(validations=[(0, 1.0, 1.0)], streaks={"overfitting": 1})
        >>> data = CheckData(0, 1, validations=[(1, 1.2, 0.5)])
        >>> overfitting(data, history, DEFAULT_THRESHOLDS)[0]["began_epoch"]
        1
    """
    found: Decision | None = None
    for entry in data.validations:
        history.validations.append(entry)
        vals = history.validations
        best_index = min(range(len(vals)), key=lambda i: vals[i][1])
        best_epoch, best_val, best_train = vals[best_index][:3]
        val, train = entry[1], entry[2]
        gl = 100.0 * (val / best_val - 1.0) if best_val > 0 else 0.0
        present = gl > t["overfit_gl"] and train < best_train
        if _streak(history, "overfitting", present) >= int(t["persist_checks"]):
            found = (
                {
                    "gl": gl,
                    "val_loss": val,
                    "best_val_loss": best_val,
                    "best_epoch": best_epoch,
                    "train_loss": train,
                    "best_train_loss": best_train,
                    "began_epoch": best_epoch + 1,
                },
                f"Validation loss rose {gl:.1f}% above its best ({_fmt(best_val)} at epoch {best_epoch}) "
                f"while the training loss fell to {_fmt(train)}: overfitting since epoch {best_epoch + 1}. "
                "Use "
                "`EarlyStopping(restore_best_weights=True)`, more weight decay or dropout, data augmentation "
                "or more data.",
            )
    return found


def data_stall(data: CheckData, history: History, t: dict[str, float]) -> Decision | None:
    """Training waited for data more than ``stall_fraction`` of the time, ``persist_checks`` in a row.

    Example:
        >>> history = History(streaks={"data_stall": 1})
        >>> data_stall(CheckData(0, 0, wait_fraction=0.8), history, DEFAULT_THRESHOLDS)[0]
        {'wait_fraction': 0.8}
    """
    stalled = data.wait_fraction is not None and data.wait_fraction > t["stall_fraction"]
    if _streak(history, "data_stall", stalled) < int(t["persist_checks"]) or data.wait_fraction is None:
        return None
    return (
        {"wait_fraction": data.wait_fraction},
        f"Training waited for data {data.wait_fraction:.0%} of the time. Raise the DataLoader's "
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
    overfitting,
    data_stall,
)
