"""The checks by name, in the order a preflight runs them (cheapest and most basic first)."""

from __future__ import annotations

import time
from collections.abc import Sequence

import torch

from lightning_recipes.callbacks._checks.base import CheckResult, SanityCheck
from lightning_recipes.callbacks._checks.context import CheckContext
from lightning_recipes.callbacks._checks.report import PreflightReport
from lightning_recipes.callbacks.batch_independence_check import BatchIndependenceCheck
from lightning_recipes.callbacks.data_check import DataCheck
from lightning_recipes.callbacks.grad_flow_check import GradFlowCheck
from lightning_recipes.callbacks.init_loss_check import InitLossCheck
from lightning_recipes.callbacks.input_independence_check import InputIndependenceCheck
from lightning_recipes.callbacks.overfit_batch_check import OverfitBatchCheck

__all__ = ["CHECKS", "build_checks", "run_checks", "validate_num_threads"]

CHECKS: dict[str, type[SanityCheck]] = {
    cls.name: cls
    for cls in (
        DataCheck,
        InitLossCheck,
        GradFlowCheck,
        BatchIndependenceCheck,
        OverfitBatchCheck,
        InputIndependenceCheck,
    )
}


def build_checks(checks: Sequence[str | SanityCheck] | None) -> list[SanityCheck]:
    """Check objects from names and/or instances; ``None`` means every check with its defaults."""
    if checks is None:
        return [cls() for cls in CHECKS.values()]
    if isinstance(checks, (str, SanityCheck)):
        checks = [checks]
    built: list[SanityCheck] = []
    for item in checks:
        if isinstance(item, SanityCheck):
            built.append(item)
        elif isinstance(item, str) and item in CHECKS:
            built.append(CHECKS[item]())
        else:
            raise ValueError(
                f"`checks` entries must be SanityCheck instances or one of {sorted(CHECKS)}, got {item!r}."
            )
    names = [c.name for c in built]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ValueError(f"`checks` names each check at most once, got {duplicates} more than once.")
    return built


def run_checks(
    checks: list[SanityCheck], context: CheckContext, num_threads: int | None = None
) -> PreflightReport:
    """Run each check on the shared context and collect a report.

    ``num_threads`` sets torch's intra-op threads while the checks run on a CPU, then restores them.
    """
    started = time.perf_counter()
    saved = torch.get_num_threads()
    if num_threads is not None and context.device.type == "cpu":
        torch.set_num_threads(num_threads)
    try:
        results: list[CheckResult] = [check.run(context) for check in checks]
    finally:
        torch.set_num_threads(saved)
    return PreflightReport(results, time.perf_counter() - started)


def validate_num_threads(num_threads: int | None) -> None:
    if num_threads is not None and num_threads < 1:
        raise ValueError(f"`num_threads` must be >= 1 or None, got {num_threads!r}.")
