"""Running checks: on a context (``preflight()``), and inside ``trainer.fit`` (one path for one check or all).

``run_in_trainer`` is what every check callback and the ``Preflight`` callback call at ``on_train_start``:
build the context from the Trainer, run the checks (or skip them under sharded strategies), log, print, then
reduce "any check failed" across ranks once and raise or warn on every rank together.
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import lightning.pytorch as pl
from lightning.pytorch.utilities import rank_zero_only
from lightning.pytorch.utilities.rank_zero import rank_zero_info, rank_zero_warn

from lightning_recipes.checks._budget import DEFAULT_TIME_BUDGET, hard_limit
from lightning_recipes.checks.report import CheckResult, PreflightError, PreflightReport
from lightning_recipes.harness import Harness as CheckContext
from lightning_recipes.harness.isolation import cpu_threads

if TYPE_CHECKING:
    from lightning_recipes.checks.base import SanityCheck

__all__ = [
    "DEFAULT_TOTAL_TIME_BUDGET",
    "ON_FAIL",
    "enforce",
    "log_results",
    "progress_line",
    "run_checks",
    "run_in_trainer",
    "unsupported_strategy",
]

ON_FAIL = ("raise", "warn")
#: The default cap on a whole preflight, in seconds (issue #14's bar: <= 30 s on a 2-core CPU).
DEFAULT_TOTAL_TIME_BUDGET = 30.0
#: Seconds kept back for each check still to run when a check's budget is cut to fit the total.
RESERVE_PER_CHECK = 0.5
#: No check on the default budget gets less than this, even when the total is spent.
MIN_CHECK_BUDGET = 1.0


def run_checks(
    checks: Sequence[SanityCheck],
    context: CheckContext,
    num_threads: int | None = None,
    *,
    time_budget: float | None = DEFAULT_TIME_BUDGET,
    progress: bool = False,
    total_time_budget: float | None = DEFAULT_TOTAL_TIME_BUDGET,
) -> PreflightReport:
    """Run each check on the shared context and collect a report.

    ``num_threads`` sets torch's intra-op threads while the checks run on a CPU, then restores them.
    ``time_budget`` is the seconds each check whose own ``time_budget`` is ``"default"`` gets (``None``:
    unlimited). ``total_time_budget`` caps the whole run: a check on the default budget gets at most what is
    left of it, less :data:`RESERVE_PER_CHECK` seconds for each check still to come (never less than
    :data:`MIN_CHECK_BUDGET`); a check given its own ``time_budget`` keeps it. ``progress`` logs a line as
    each check starts and one as it ends (rank zero, Lightning's ``rank_zero_info``, as the package logs
    elsewhere).
    """
    started = time.perf_counter()
    results: list[CheckResult] = []
    with cpu_threads(num_threads, context.device):
        for index, check in enumerate(checks):
            default = time_budget
            if total_time_budget is not None:
                left = total_time_budget - (time.perf_counter() - started)
                share = max(MIN_CHECK_BUDGET, left - RESERVE_PER_CHECK * (len(checks) - index - 1))
                default = share if default is None else min(default, share)
            budget = check.resolved_budget(default)
            if progress:
                rank_zero_info(progress_line(index, len(checks), check.name, budget))
            result = check.run(context, default_budget=default)
            if progress:
                rank_zero_info(progress_line(index, len(checks), check.name, budget, result))
            results.append(result)
    return PreflightReport(results, time.perf_counter() - started)


def progress_line(
    index: int, total: int, name: str, budget: float | None, result: CheckResult | None = None
) -> str:
    """The line logged as check ``index`` (0-based) of ``total`` starts (``result=None``) or ends.

    Example:
        >>> progress_line(4, 6, "overfit_batch", 8.0)
        'preflight [5/6] overfit_batch: running (budget 8 s)'
        >>> progress_line(4, 6, "overfit_batch", 8.0, CheckResult("overfit_batch", "pass", "", seconds=2.34))
        'preflight [5/6] overfit_batch: PASS in 2.3 s'
    """
    head = f"preflight [{index + 1}/{total}] {name}:"
    if result is None:
        return f"{head} running ({'no budget' if budget is None else f'budget {budget:g} s'})"
    line = f"{head} {result.status.upper()} in {result.seconds:.1f} s"
    if result.details.get("stopped_by_budget") or (
        budget is not None and result.seconds > hard_limit(budget)
    ):
        line += f" (over its {budget:g} s budget)"
    return line


def run_in_trainer(
    checks: Sequence[SanityCheck],
    trainer: pl.Trainer,
    pl_module: pl.LightningModule,
    *,
    keep: Callable[[PreflightReport], None],
    on_fail: str,
    print_report: bool = False,
    num_classes: int | None = None,
    input_key: Any = None,
    target_key: Any = None,
    seed: int = 0,
    num_threads: int | None = None,
    time_budget: float | None = DEFAULT_TIME_BUDGET,
    progress: bool = False,
    total_time_budget: float | None = DEFAULT_TOTAL_TIME_BUDGET,
) -> bool:
    """Run ``checks`` with the Trainer's device, precision and loaders, log and print the report, then call
    ``keep(report)`` (the caller stores it) and :func:`enforce` ``on_fail``. Returns whether a check failed on
    any rank (the collective decision); raises :class:`PreflightError` on every rank when one did and
    ``on_fail="raise"``.

    Cost: the checks' own; one collective call (``reduce_boolean_decision``).
    """
    skipped = [unsupported_strategy(trainer, check.name) for check in checks]
    if all(result is not None for result in skipped):
        report = PreflightReport([result for result in skipped if result is not None])
    else:
        context = CheckContext.from_trainer(
            trainer,
            pl_module,
            input_key=input_key,
            target_key=target_key,
            num_classes=num_classes,
            seed=seed,
        )
        report = run_checks(
            checks,
            context,
            num_threads,
            time_budget=time_budget,
            progress=progress,
            total_time_budget=total_time_budget,
        )
    if print_report and trainer.is_global_zero:
        from rich.console import Console

        Console().print(report)
    log_results(trainer, report.results)
    keep(report)
    return enforce(trainer, report.results, on_fail)


def unsupported_strategy(trainer: pl.Trainer, name: str) -> CheckResult | None:
    """A ``skip`` result under sharded strategies, where a deep copy of a module is not a usable model."""
    strategy = type(trainer.strategy).__name__
    if any(word in strategy for word in ("FSDP", "DeepSpeed", "ModelParallel")):
        return CheckResult(
            name,
            "skip",
            f"skipped under {strategy}: the parameters are sharded, so a copy is not a runnable model. Run "
            "`lightning_recipes.preflight(model, ...)` on the unsharded model before fitting.",
        )
    return None


def enforce(trainer: pl.Trainer, results: list[CheckResult], on_fail: str) -> bool:
    """Reduce "any check failed" across ranks (one collective call), then raise on every rank or warn.

    Returns whether a check failed on any rank.
    """
    failures = [r for r in results if r.failed]
    any_failed = bool(trainer.strategy.reduce_boolean_decision(bool(failures), all=False))
    if not any_failed:
        return False
    note = "" if failures else f"(rank {trainer.global_rank} passed; the failure is on another rank)"
    if on_fail == "raise":
        raise PreflightError(failures, note)
    if failures:
        prefix = f"[rank {trainer.global_rank}] " if trainer.world_size > 1 else ""
        warnings.warn(prefix + str(PreflightError(failures)), stacklevel=2)
    else:
        rank_zero_warn(f"a preflight check failed on another rank {note}")
    return True


@rank_zero_only
def log_results(trainer: pl.Trainer, results: list[CheckResult]) -> None:
    """Log each result's ``measured`` value as ``preflight/<name>`` to the Trainer's loggers."""
    metrics = {
        f"preflight/{r.name}": float(r.details["measured"])
        for r in results
        if isinstance(r.details.get("measured"), (int, float)) and math.isfinite(r.details["measured"])
    }
    if not metrics:
        return
    for logger in trainer.loggers:
        logger.log_metrics(metrics, step=0)
