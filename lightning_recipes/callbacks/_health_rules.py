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
from dataclasses import dataclass, field
from typing import Any

__all__ = ["DEFAULT_THRESHOLDS", "PROBLEMS", "CheckData", "History", "decide"]

PROBLEMS = (
    "exploding_gradients",
    "vanishing_gradients",
    "dead_units",
    "saturated_activations",
    "lr_too_high",
    "lr_too_low",
    "loss_plateau",
    "overfitting",
    "data_stall",
    "nonfinite_activations",
)

DEFAULT_THRESHOLDS: dict[str, float] = {
    "explode_factor": 100.0,
    "vanish_ratio": 1e-3,
    "dead_fraction": 0.5,
    "saturated_fraction": 0.5,
    "ratio_high": 1e-2,
    "rise_rtol": 0.1,
    "ratio_low": 1e-5,
    "plateau_checks": 5,
    "plateau_rtol": 0.01,
    "overfit_gl": 5.0,
    "stall_fraction": 0.5,
    "persist_checks": 2,
}


@dataclass
class CheckData:
    """One check's numbers, combined over ranks (host floats)."""

    step: int
    epoch: int
    loss_mean: float = math.nan
    loss_nonfinite: int = 0
    grad_sampled: bool = False
    grad_total: float = math.nan
    group_grad_rms: dict[str, float] = field(default_factory=dict)
    update_ratio: dict[str, float] = field(default_factory=dict)
    dead: dict[str, float] = field(default_factory=dict)
    saturated: dict[str, float] = field(default_factory=dict)
    nonfinite_modules: list[str] = field(default_factory=list)
    wait_fraction: float | None = None
    validations: list[tuple[int, float, float]] = field(default_factory=list)  # (epoch, val, train)


@dataclass
class History:
    """What the rules remember between checks (host floats; saved in ``state_dict``)."""

    losses: list[float] = field(default_factory=list)
    grad_totals: list[float] = field(default_factory=list)
    vanish_ratios: list[float] = field(default_factory=list)
    validations: list[tuple[int, float, float]] = field(default_factory=list)
    streaks: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "losses": list(self.losses),
            "grad_totals": list(self.grad_totals),
            "vanish_ratios": list(self.vanish_ratios),
            "validations": [list(v) for v in self.validations],
            "streaks": dict(self.streaks),
        }

    @classmethod
    def from_dict(cls, state: dict[str, Any]) -> History:
        return cls(
            losses=[float(v) for v in state.get("losses", [])],
            grad_totals=[float(v) for v in state.get("grad_totals", [])],
            vanish_ratios=[float(v) for v in state.get("vanish_ratios", [])],
            validations=[(int(e), float(v), float(t)) for e, v, t in state.get("validations", [])],
            streaks={str(k): int(v) for k, v in state.get("streaks", {}).items()},
        )


Decision = tuple[dict[str, Any], str]  # (evidence, advice)


def _streak(history: History, name: str, present: bool) -> int:
    history.streaks[name] = history.streaks.get(name, 0) + 1 if present else 0
    return history.streaks[name]


def _fmt(value: float) -> str:
    return f"{value:.3g}"


def decide(data: CheckData, history: History, thresholds: dict[str, float]) -> dict[str, Decision]:
    """The problems present at this check, each with its evidence and advice; updates ``history``.

    Example:
        >>> history = History()
        >>> data = CheckData(step=50, epoch=0, loss_mean=1.0, nonfinite_modules=["encoder.fc1"])
        >>> sorted(decide(data, history, DEFAULT_THRESHOLDS))
        ['nonfinite_activations']
    """
    t = thresholds
    persist = int(t["persist_checks"])
    out: dict[str, Decision] = {}
    finite_loss = math.isfinite(data.loss_mean)

    # ---- non-finite values first: they explain every other symptom of the same check
    grad_bad = data.grad_sampled and not math.isfinite(data.grad_total)
    if data.nonfinite_modules or (data.loss_nonfinite and not grad_bad):
        first = data.nonfinite_modules[0] if data.nonfinite_modules else "loss"
        out["nonfinite_activations"] = (
            {
                "first_module": first,
                "modules": data.nonfinite_modules[:8],
                "nonfinite_losses": data.loss_nonfinite,
            },
            f"`{first}` produced inf/nan in the forward pass. Check its inputs (data with nan/inf, log of "
            "zero, division by zero, exp overflow); add an epsilon or clamp there, use a normalisation layer "
            "before it, or train in bf16/fp32 instead of fp16.",
        )

    if "nonfinite_activations" in out:
        # inf/nan poison every other instrument (a nan is never > 0: every unit looks dead): name only it
        _stall(data, history, t, out)
        return out

    # ---- exploding gradients
    earlier = [g for g in history.grad_totals if math.isfinite(g)]
    if data.grad_sampled and "nonfinite_activations" not in out:
        baseline = statistics.median(earlier) if earlier else math.nan
        if grad_bad or (earlier and data.grad_total > t["explode_factor"] * baseline):
            top = sorted(
                data.group_grad_rms.items(), key=lambda kv: -kv[1] if math.isfinite(kv[1]) else -math.inf
            )
            out["exploding_gradients"] = (
                {
                    "grad_norm": data.grad_total,
                    "baseline_median": baseline,
                    "largest_groups_rms": dict(top[:3]),
                },
                f"Gradient norm {_fmt(data.grad_total)} vs a median of {_fmt(baseline)} at earlier checks. "
                "Clip gradients (`Trainer(gradient_clip_val=1.0)` or `AdaptiveGradClip`), lower the learning "
                f"rate, and check the initialisation of {', '.join(k for k, _ in top[:2]) or 'the largest'}.",
            )
    if data.grad_sampled and math.isfinite(data.grad_total):
        history.grad_totals.append(data.grad_total)

    # ---- dead ReLUs, saturated tanh/sigmoid
    dead = {m: f for m, f in data.dead.items() if f >= t["dead_fraction"]}
    if data.dead and _streak(history, "dead_units", bool(dead)) >= persist:
        out["dead_units"] = (
            {"dead_fraction": dead},
            f"{', '.join(f'`{m}` {f:.0%}' for m, f in dead.items())} of units never fire. Lower the learning "
            "rate, use He/Kaiming initialisation with a small positive bias, or switch to LeakyReLU/GELU.",
        )
    sat = {m: f for m, f in data.saturated.items() if f >= t["saturated_fraction"]}
    if data.saturated and _streak(history, "saturated_activations", bool(sat)) >= persist:
        out["saturated_activations"] = (
            {"saturated_fraction": sat},
            f"{', '.join(f'`{m}` {f:.0%}' for m, f in sat.items())} of outputs are saturated (gradient ~0). "
            "Scale the initialisation down (Xavier/Glorot for tanh/sigmoid), normalise the layer's input, "
            "or use ReLU/GELU.",
        )

    # ---- vanishing gradients: earliest vs latest group's gradient RMS
    groups = [g for g, v in data.group_grad_rms.items() if math.isfinite(v)]
    if data.grad_sampled and len(groups) >= 2 and data.group_grad_rms[groups[-1]] > 0:
        first, last = groups[0], groups[-1]
        ratio = data.group_grad_rms[first] / max(data.group_grad_rms[last], 1e-30)
        # dead or saturated units cut the gradient path themselves: name them, not their symptom
        present = ratio < t["vanish_ratio"] and not (dead or sat)
        if _streak(history, "vanishing_gradients", present) >= persist:
            out["vanishing_gradients"] = (
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
        history.vanish_ratios.append(ratio)

    # ---- learning rate: update/parameter ratio together with the loss
    ratios = [r for r in data.update_ratio.values() if math.isfinite(r) and r > 0]
    median_ratio = statistics.median(ratios) if ratios else math.nan
    previous_loss = history.losses[-1] if history.losses else math.nan
    rising = (
        finite_loss
        and math.isfinite(previous_loss)
        and data.loss_mean > (1.0 + t["rise_rtol"]) * previous_loss
    )
    flat = (
        finite_loss
        and math.isfinite(previous_loss)
        and abs(data.loss_mean - previous_loss) <= t["plateau_rtol"] * abs(previous_loss)
    )
    if ratios and median_ratio > t["ratio_high"] and rising and "nonfinite_activations" not in out:
        out["lr_too_high"] = (
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
    # a layer that cannot learn (vanishing, dead, saturated) explains a small update and a flat loss
    root_cause = any(
        history.streaks.get(p, 0) > 0 for p in ("vanishing_gradients", "dead_units", "saturated_activations")
    )
    low = bool(ratios) and median_ratio < t["ratio_low"] and flat and not root_cause
    if _streak(history, "lr_too_low", low) >= persist:
        out["lr_too_low"] = (
            {"median_update_ratio": median_ratio, "loss": data.loss_mean},
            f"Each step changes the weights by only {_fmt(median_ratio)} of their norm (healthy: ~1e-3) and "
            f"the loss is flat at {_fmt(data.loss_mean)}. Raise the learning rate ~"
            f"{max(3, round(1e-3 / max(median_ratio, 1e-12) / 10))}x (an LR range test finds it).",
        )

    # ---- plateau
    k = int(t["plateau_checks"])
    losses = [v for v in [*history.losses, data.loss_mean] if math.isfinite(v)]
    if len(losses) > k and "lr_too_low" not in out and not low and not root_cause:
        before, recent = min(losses[:-k]), min(losses[-k:])
        if recent > before - t["plateau_rtol"] * abs(before) and data.loss_mean > 0.5 * losses[0]:
            out["loss_plateau"] = (
                {"best_recent": recent, "best_before": before, "checks": k, "first_loss": losses[0]},
                f"The training loss has not improved on {_fmt(before)} for {k} checks, at "
                f"{data.loss_mean / losses[0]:.0%} of its first value. Try a learning-rate schedule with "
                "decay or restarts, a larger model, a different optimizer (AdamW/Lion), or check that the "
                "labels are learnable (`preflight`'s overfit_batch check).",
            )
    if finite_loss:
        history.losses.append(data.loss_mean)

    # ---- overfitting: Prechelt's generalisation loss over validations
    for entry in data.validations:
        history.validations.append(entry)
        vals = history.validations
        best_index = min(range(len(vals)), key=lambda i: vals[i][1])
        best_epoch, best_val, best_train = vals[best_index]
        _, val, train = entry
        gl = 100.0 * (val / best_val - 1.0) if best_val > 0 else 0.0
        present = gl > t["overfit_gl"] and train < best_train
        if _streak(history, "overfitting", present) >= persist:
            out["overfitting"] = (
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

    _stall(data, history, t, out)
    return out


def _stall(data: CheckData, history: History, t: dict[str, float], out: dict[str, Decision]) -> None:
    stalled = data.wait_fraction is not None and data.wait_fraction > t["stall_fraction"]
    if _streak(history, "data_stall", stalled) >= int(t["persist_checks"]) and data.wait_fraction is not None:
        out["data_stall"] = (
            {"wait_fraction": data.wait_fraction},
            f"Training waited for data {data.wait_fraction:.0%} of the time. Raise the DataLoader's "
            "`num_workers`, set `persistent_workers=True` and `pin_memory=True` (GPU), and move per-sample "
            "work (decoding, augmentation) out of `__getitem__` or precompute it.",
        )
