"""HealthMonitor's collected window: one check's numbers combined over ranks (``CheckData``), what the rules
remember between checks (``History``, saved in ``state_dict``), the problems and their default thresholds."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

__all__ = ["DEFAULT_THRESHOLDS", "PROBLEMS", "CheckData", "Decision", "History"]

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
    "not_learning",
)

DEFAULT_THRESHOLDS: dict[str, float] = {
    "explode_factor": 100.0,
    "vanish_ratio": 1e-3,
    "dead_fraction": 0.5,
    "saturated_fraction": 0.5,
    "ratio_high": 1e-2,
    "ratio_stuck": 3e-2,
    "rise_rtol": 0.03,
    "ratio_low": 1e-4,
    "ratio_low_sgd": 1e-6,
    "plateau_checks": 5,
    "plateau_rtol": 0.01,
    "plateau_progress": 0.2,
    "plateau_steps": 150,
    "overfit_gl": 5.0,
    "overfit_persist": 3,
    "stall_fraction": 0.5,
    "stall_min_s": 0.005,
    "persist_checks": 2,
    "confidence_z": 2.326,
    "anneal_fraction": 0.8,
    "growth_high": 2.0,
}


@dataclass
class CheckData:
    """One check's numbers, combined over ranks (host floats)."""

    step: int
    epoch: int
    loss_mean: float = math.nan
    loss_nonfinite: int = 0
    #: finite per-step training losses in the interval (all ranks), their standard deviation, and the
    #: least-squares slope of loss against the step (per optimizer step) with its standard error
    loss_count: int = 0
    loss_std: float = math.nan
    loss_slope: float = math.nan
    loss_slope_se: float = math.nan
    #: the mean of the interval's first 5 losses (the first interval's: the loss at initialisation)
    loss_head: float = math.nan
    grad_sampled: bool = False
    grad_total: float = math.nan
    group_grad_rms: dict[str, float] = field(default_factory=dict)
    update_ratio: dict[str, float] = field(default_factory=dict)
    #: per parameter group (as ``group_grad_rms``): element count, the largest learning rate of the optimizer
    #: param_groups holding it at the sampled step, and its optimizer's family ("adaptive": Adam-family, Lion,
    #: LAMB, RMSprop, Adagrad, Adafactor ...; "sgd": SGD/ASGD; "other")
    group_numel: dict[str, int] = field(default_factory=dict)
    group_lr: dict[str, float] = field(default_factory=dict)
    group_family: dict[str, str] = field(default_factory=dict)
    #: groups holding an embedding table (sparse gradients: left out of the vanishing-gradient comparison)
    sparse_groups: set[str] = field(default_factory=set)
    dead: dict[str, float] = field(default_factory=dict)
    saturated: dict[str, float] = field(default_factory=dict)
    #: per Linear/Conv layer (module name): the fraction of its weight's output rows whose gradient was
    #: exactly zero on the sampled step (a unit that no sample of the batch activated:
    #: dead through ``F.relu`` too)
    dead_rows: dict[str, float] = field(default_factory=dict)
    nonfinite_modules: list[str] = field(default_factory=list)
    #: of ``nonfinite_modules``, those whose inputs were already non-finite on a sampled batch
    nonfinite_inputs: list[str] = field(default_factory=list)
    #: parameter groups whose weights are inf/nan at the sampled step (a step wrote them)
    nonfinite_weights: list[str] = field(default_factory=list)
    #: the tracked parameters' total norm at the sampled step, and at the start of training
    param_norm: float = math.nan
    param_norm_start: float = math.nan
    wait_fraction: float | None = None
    #: where ``wait_fraction`` came from: "InputPipelineMonitor" or "host timing" (the monitor's own clock)
    wait_source: str | None = None
    #: the mean wait for data per training batch, in seconds (host timing; None when not measured)
    wait_per_batch_s: float | None = None
    #: (epoch, val, train, val_se, val_count): the validation loss, the mean training loss of its epoch, the
    #: validation loss's standard error from its per-batch values (NaN when unknown) and the number of
    #: validation samples it averaged (0 when unknown)
    validations: list[tuple[int, float, float, float, int]] = field(default_factory=list)
    #: the run's planned optimizer steps (``trainer.estimated_stepping_batches``; inf when unbounded/unknown)
    planned_steps: float = math.inf


@dataclass
class History:
    """What the rules remember between checks (host floats; saved in ``state_dict``)."""

    losses: list[float] = field(default_factory=list)
    #: per check with a finite loss, parallel to ``losses``: the interval mean's standard error and the step
    loss_ses: list[float] = field(default_factory=list)
    loss_steps: list[int] = field(default_factory=list)
    #: per check with sampled updates: the run's update ratio (parameter-weighted median) and its largest LR
    ratios: list[float] = field(default_factory=list)
    lrs: list[float] = field(default_factory=list)
    #: the loss at initialisation (the first interval's first 5 steps; NaN: not known yet)
    start_loss: float = math.nan
    #: the largest dead fraction at the first check that measured one (-1: not measured yet)
    dead_at_start: float = -1.0
    grad_totals: list[float] = field(default_factory=list)
    vanish_ratios: list[float] = field(default_factory=list)
    validations: list[tuple[int, float, float, float, int]] = field(default_factory=list)
    streaks: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "losses": list(self.losses),
            "loss_ses": list(self.loss_ses),
            "loss_steps": list(self.loss_steps),
            "ratios": list(self.ratios),
            "lrs": list(self.lrs),
            "start_loss": self.start_loss,
            "dead_at_start": self.dead_at_start,
            "grad_totals": list(self.grad_totals),
            "vanish_ratios": list(self.vanish_ratios),
            "validations": [list(v) for v in self.validations],
            "streaks": dict(self.streaks),
        }

    @classmethod
    def from_dict(cls, state: dict[str, Any]) -> History:
        losses = [float(v) for v in state.get("losses", [])]
        return cls(
            losses=losses,
            # states saved before the noise model kept these: unknown error, steps by position
            loss_ses=[float(v) for v in state.get("loss_ses", [math.nan] * len(losses))],
            loss_steps=[int(v) for v in state.get("loss_steps", range(len(losses)))],
            ratios=[float(v) for v in state.get("ratios", [])],
            lrs=[float(v) for v in state.get("lrs", [])],
            start_loss=float(state.get("start_loss", math.nan)),
            dead_at_start=float(state.get("dead_at_start", -1.0)),
            grad_totals=[float(v) for v in state.get("grad_totals", [])],
            vanish_ratios=[float(v) for v in state.get("vanish_ratios", [])],
            validations=[_validation(row) for row in state.get("validations", [])],
            streaks={str(k): int(v) for k, v in state.get("streaks", {}).items()},
        )


def _validation(row: Any) -> tuple[int, float, float, float, int]:
    """A saved validation row; rows saved before the standard error was kept have 3 entries."""
    epoch, val, train, *rest = row
    se, count = (float(rest[0]), int(rest[1])) if len(rest) >= 2 else (math.nan, 0)
    return int(epoch), float(val), float(train), se, count


Decision = tuple[dict[str, Any], str]  # (evidence, advice)
