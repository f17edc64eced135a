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
