"""A deviation judged against float noise: the difference between two identical passes, and a bound of a
few hundred ulps of the compared tensor's dtype relative to its scale (a longer or reordered reduction may
move the last bits even when the function is exact). Used by the forward-stage checks
(``batch_independence``'s permutation test, ``padding``)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

__all__ = ["FAIL_FACTOR", "NOISE_FACTOR", "NoiseVerdict", "judge_deviation"]

NOISE_FACTOR = 4.0
"""A deviation up to this many times the measured run-to-run noise (or the dtype bound) is noise."""
FAIL_FACTOR = 10.0
"""A deviation above this many times the tolerance is a verdict; between the two it is ``inconclusive``."""


@dataclass
class NoiseVerdict:
    """``status`` (``"pass"``, ``"inconclusive"`` or ``"fail"``) of a deviation and the numbers behind it."""

    status: str
    deviation: float
    noise: float
    tolerance: float
    scale: float

    @property
    def relative(self) -> float:
        """The deviation relative to the compared quantity's scale (0 for a zero scale)."""
        return self.deviation / self.scale if self.scale > 0 else 0.0

    def describe(self) -> str:
        return (
            f"deviation {self.deviation:.3g} ({self.relative:.2g} of the scale {self.scale:.3g}) vs "
            f"tolerance {self.tolerance:.3g} (run-to-run noise {self.noise:.3g})"
        )


def judge_deviation(
    deviation: float, noise: float, scale: float, dtype: torch.dtype, ulps: float = 64.0
) -> NoiseVerdict:
    """Judge ``deviation`` (max abs difference) against ``noise`` (the same quantity between two identical
    passes) and ``ulps`` x the dtype's epsilon x ``scale`` (max abs value of the compared quantity).

    Example:
        >>> judge_deviation(0.0, 0.0, 1.0, torch.float32).status
        'pass'
        >>> judge_deviation(0.3, 0.0, 1.0, torch.float32).status
        'fail'
        >>> judge_deviation(3e-5, 0.0, 1.0, torch.float32).status  # 1x..10x the 64-ulp bound
        'inconclusive'
    """
    eps = torch.finfo(dtype).eps if dtype.is_floating_point else torch.finfo(torch.float32).eps
    tolerance = max(NOISE_FACTOR * noise, ulps * eps * scale, 1e-30)
    if deviation <= tolerance:
        status = "pass"
    elif deviation <= FAIL_FACTOR * tolerance:
        status = "inconclusive"
    else:
        status = "fail"
    return NoiseVerdict(status, deviation, noise, tolerance, scale)
