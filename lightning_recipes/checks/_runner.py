"""Running checks: on a context (``preflight()``) and inside ``trainer.fit`` (one path for one or all)."""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable, Sequence
from typing import Protocol

import lightning.pytorch as pl
from lightning.pytorch.utilities import rank_zero_only
from lightning.pytorch.utilities.rank_zero import rank_zero_debug, rank_zero_warn

from lightning_recipes._progress import ProgressLine
from lightning_recipes.checks._budget import hard_limit
from lightning_recipes.checks._options import PreflightOptions
from lightning_recipes.checks.report import CheckResult, PreflightError, PreflightReport
from lightning_recipes.harness import Harness as CheckContext
from lightning_recipes.harness.isolation import cpu_threads

#: Seconds kept back for each check still to run when a check's budget is cut to fit the total.
RESERVE_PER_CHECK = 0.5
#: No check on the default budget gets less than this, even when the total is spent.
MIN_CHECK_BUDGET = 1.0


class RunnableCheck(Protocol):
    """What the runner needs of a check (importing ``SanityCheck`` here would make an import circle)."""

    @property
    def name(self) -> str: ...

    def resolved_budget(self, default: float | None) -> float | None: ...

    def run(self, context: CheckContext, *, default_budget: float | None) -> CheckResult: ...


def run_checks(
    checks: Sequence[RunnableCheck],
    context: CheckContext,
    options: PreflightOptions,
    *,
    draw: bool = True,
) -> PreflightReport:
    """Run each check on the shared context, within ``options``' threads and budgets; collect a report."""
    started = time.perf_counter()
    results: list[CheckResult] = []
    progress, total_time_budget = options.progress, options.total_time_budget
    line = ProgressLine("preflight", len(checks), enabled=progress and draw)
    with cpu_threads(options.num_threads, context.device), line:
        for index, check in enumerate(checks):
            default = options.time_budget
            if total_time_budget is not None:
                left = total_time_budget - (time.perf_counter() - started)
                share = max(MIN_CHECK_BUDGET, left - RESERVE_PER_CHECK * (len(checks) - index - 1))
                default = share if default is None else min(default, share)
            budget = check.resolved_budget(default)
            if progress:
                line.show(check.name)
                rank_zero_debug(progress_line(index, len(checks), check.name, budget))
            result = check.run(context, default_budget=default)
            if progress:
                line.advance(f"{check.name} {result.status.upper()}")
                rank_zero_debug(progress_line(index, len(checks), check.name, budget, result))
            results.append(result)
    return PreflightReport(results, time.perf_counter() - started)


def progress_line(
    index: int, total: int, name: str, budget: float | None, result: CheckResult | None = None
) -> str:
    """The line logged (DEBUG) as check ``index`` (0-based) of ``total`` starts (``result=None``) or ends."""
    head = f"preflight [{index + 1}/{total}] {name}:"
    if result is None:
        return f"{head} running ({'no budget' if budget is None else f'budget {budget:g} s'})"
    over = budget is not None and result.seconds > hard_limit(budget)
    late = f" (over its {budget:g} s budget)" if result.details.get("stopped_by_budget") or over else ""
    return f"{head} {result.status.upper()} in {result.seconds:.1f} s{late}"


def run_in_trainer(
    checks: Sequence[RunnableCheck],
    trainer: pl.Trainer,
    pl_module: pl.LightningModule,
    options: PreflightOptions,
    *,
    keep: Callable[[PreflightReport], None],
    on_fail: str,
) -> bool:
    """Run ``checks`` in the Trainer, ``keep`` the report, :func:`enforce` ``on_fail``: a fail on any rank?"""
    skipped = [unsupported_strategy(trainer, check.name) for check in checks]
    if all(result is not None for result in skipped):
        report = PreflightReport([result for result in skipped if result is not None])
    else:
        context = CheckContext.from_trainer(trainer, pl_module, **options.harness())
        # the line follows the Trainer's convention: `enable_progress_bar=False` draws none
        report = run_checks(checks, context, options, draw=trainer.progress_bar_callback is not None)
    if options.print_report and trainer.is_global_zero:
        report.print(verbose=options.verbose)
    log_results(trainer, report.results)
    keep(report)
    warn_unjudged(report)
    return enforce(trainer, report.results, on_fail)


def warn_unjudged(report: PreflightReport) -> None:
    """Warn (rank zero) when a check raised an error or no check could judge the model."""
    if report.errors:
        errors = "\n".join(f"- {r.name}: {r.message}" for r in report.errors)
        rank_zero_warn(f"preflight: a check could not finish, so it verified nothing:\n{errors}")
    elif not report.failures and report.not_ok_reason is not None:
        rank_zero_warn(f"preflight: {report.not_ok_reason}.")


def unsupported_strategy(trainer: pl.Trainer, name: str) -> CheckResult | None:
    """A ``skip`` result under sharded strategies, where a deep copy of a module is not a usable model."""
    strategy = type(trainer.strategy).__name__
    if any(word in strategy for word in ("FSDP", "DeepSpeed", "ModelParallel")):
        summary = f"skipped under {strategy}: the parameters are sharded, so a copy cannot run"
        return CheckResult(name, "skip", summary, action="Run preflight(model, ...) on the unsharded model.")
    return None


def enforce(trainer: pl.Trainer, results: list[CheckResult], on_fail: str) -> bool:
    """Reduce "any check failed" across ranks (one collective call), raise on every rank or warn."""
    failures = [r for r in results if r.failed]
    if not trainer.strategy.reduce_boolean_decision(bool(failures), all=False):
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
    for logger in trainer.loggers if metrics else []:
        logger.log_metrics(metrics, step=0)
