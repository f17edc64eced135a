"""The optimizer and schedule names (:data:`OPTIMIZERS`, defined in ``lightning_recipes/_names.py``) and the
optimizers' implementations.

Example:
    >>> OPTIMIZERS["lion"].state_tensors, OPTIMIZERS["lion"].defaults["lr"], RECIPE_OPTIMIZERS
    (1, 0.0001, ('adamw', 'lion', 'lamb'))
"""

from __future__ import annotations

from typing import Any, Literal

from lightning_recipes._deprecation import warn_deprecated
from lightning_recipes._names import (
    OPTIMIZERS,
    RECIPE_OPTIMIZERS,
    SCHEDULES,
    OptimizerName,
    OptimizerSpec,
    ScheduleName,
)
from lightning_recipes._validation import check_choice

__all__ = [
    "IMPLEMENTATIONS",
    "OPTIMIZERS",
    "RECIPE_OPTIMIZERS",
    "SCHEDULES",
    "OptimizerName",
    "OptimizerSpec",
    "ScheduleName",
    "check_implementation",
]

Implementation = Literal["auto", "for_loop", "foreach", "native", "compiled"]
IMPLEMENTATIONS: tuple[str, ...] = ("auto", "for_loop", "foreach", "native")


def check_implementation(implementation: Any) -> None:
    """Raise for an unknown implementation; warn for the removed ``"compiled"`` (it runs as ``"auto"``)."""
    if implementation == "compiled":
        warn_deprecated(
            "implementation='compiled' is deprecated and runs as 'auto' (the torch.compile path was never "
            "the fastest: benchmarks/RESULTS.md); pass 'auto', 'native', 'foreach' or 'for_loop'.",
            stacklevel=4,
        )
        return
    check_choice("implementation", implementation, IMPLEMENTATIONS)
