"""Run the sanity checks at the start of ``fit`` with the real Trainer's device, precision and data."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import lightning.pytorch as pl
from lightning.pytorch.callbacks import Callback
from typing_extensions import override

from lightning_recipes.callbacks._checks.base import ON_FAIL, enforce, log_results, unsupported_strategy
from lightning_recipes.callbacks._checks.batches import Key
from lightning_recipes.callbacks._checks.context import context_from_trainer
from lightning_recipes.callbacks._checks.registry import build_checks, run_checks, validate_num_threads
from lightning_recipes.callbacks._checks.report import PreflightReport

__all__ = ["Preflight"]


class Preflight(Callback):
    """Run the preflight checks once, at ``on_fit_start``, and stop (or warn) before a silently broken run.

    Every check works on deep copies of the module with the Trainer's device and precision (the precision
    plugin's autocast and input conversion) and the data ``fit`` is about to use; the model, its optimizer,
    the RNG streams and the loaders are left exactly as they were. Each rank runs the checks on its own
    data, then "did any check fail" is reduced across ranks once (``reduce_boolean_decision``), so every rank
    raises together or none does. The report prints on rank zero. A resumed run (``ckpt_path``) or a
    restored callback state skips the checks: they describe a run's start. Under sharded strategies (FSDP,
    DeepSpeed, ModelParallel) the checks skip: run :func:`lightning_recipes.preflight` on the unsharded model.

    Cost: what the chosen checks cost, once per ``fit`` (about 1 s for all six on the demo CNN on one CPU
    thread, see ``benchmarks/RESULTS.md``); memory of two to three copies of the model.

    Args:
        checks: Names (``"data"``, ``"init_loss"``, ``"grad_flow"``, ``"batch_independence"``,
            ``"overfit_batch"``, ``"input_independence"``) and/or configured check objects; ``None`` = all.
        on_fail: ``"raise"`` a :class:`~lightning_recipes.preflight.PreflightError` on every rank, or ``"warn"``.
        print_report: Print the report table on rank zero.
        input_key: Index or key of the input tensor in a batch.
        target_key: Index or key of the target tensor.
        num_classes: Number of classes, when the output shapes cannot tell.
        seed: Seed the checks run under (their RNG is isolated from the run's).
        num_threads: torch intra-op threads while the checks run on a CPU (restored before training);
            ``None`` leaves them alone.

    Raises:
        ValueError: If ``on_fail`` or a check name is unknown, or ``num_threads < 1``.

    Example:
        >>> from lightning_recipes.testing import TinyClassifier, fast_trainer, random_classification_loader
        >>> preflight = Preflight(checks=["data", "init_loss", "grad_flow"], print_report=False)
        >>> trainer = fast_trainer(max_steps=1, callbacks=[preflight])
        >>> trainer.fit(TinyClassifier(), random_classification_loader())
        >>> preflight.report.ok, preflight.report["init_loss"].status
        (True, 'pass')

    Logged keys (rank zero, step 0): ``preflight/<check>`` for every check that measured a number
    (``preflight/init_loss``: the initial loss; ``preflight/overfit_batch``: best / initial loss;
    ``preflight/input_independence``: relative gain over zeroed inputs; ``preflight/batch_independence``:
    cross-sample / own-sample effect).
    """

    def __init__(
        self,
        checks: Sequence[str | Any] | None = None,
        on_fail: Literal["raise", "warn"] = "raise",
        print_report: bool = True,
        input_key: Key = None,
        target_key: Key = None,
        num_classes: int | None = None,
        seed: int = 0,
        num_threads: int | None = None,
    ) -> None:
        if on_fail not in ON_FAIL:
            raise ValueError(f"`on_fail` must be one of {ON_FAIL}, got {on_fail!r}.")
        if num_classes is not None and num_classes < 2:
            raise ValueError(f"`num_classes` must be >= 2, got {num_classes!r}.")
        validate_num_threads(num_threads)
        self.num_threads = num_threads
        self.checks = build_checks(checks)
        self.on_fail = on_fail
        self.print_report = print_report
        self.input_key = input_key
        self.target_key = target_key
        self.num_classes = num_classes
        self.seed = seed
        self.report: PreflightReport | None = None
        self.failed_on_any_rank = False  # the collective decision: True on every rank if any rank failed

    @property
    @override
    def state_key(self) -> str:
        return self._generate_state_key(checks=[c.name for c in self.checks])

    @override
    def on_fit_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if self.report is not None or trainer.ckpt_path is not None:
            return
        skipped = [unsupported_strategy(trainer, check.name) for check in self.checks]
        if all(r is not None for r in skipped):
            report = PreflightReport([r for r in skipped if r is not None])
        else:
            context = context_from_trainer(
                trainer,
                pl_module,
                input_key=self.input_key,
                target_key=self.target_key,
                num_classes=self.num_classes,
                seed=self.seed,
            )
            report = run_checks(self.checks, context, self.num_threads)
        self.report = report
        if self.print_report and trainer.is_global_zero:
            from rich.console import Console

            Console().print(report)
        log_results(trainer, report.results)
        self.failed_on_any_rank = enforce(trainer, report.results, self.on_fail)

    @override
    def state_dict(self) -> dict[str, Any]:
        return {"report": None if self.report is None else self.report.to_dict()}

    @override
    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        report = state_dict.get("report")
        self.report = None if report is None else PreflightReport.from_dict(report)
