"""``preflight(model, ...)`` and the ``Preflight`` callback: every check, by name, on a model and its data."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import fields
from typing import Any, Literal

import lightning.pytorch as pl
import torch
from lightning.pytorch.callbacks import Callback
from typing_extensions import override

from lightning_recipes._validation import check_choice
from lightning_recipes.checks._budget import DEFAULT_TIME_BUDGET
from lightning_recipes.checks._options import DEFAULT_TOTAL_TIME_BUDGET, ON_FAIL, PreflightOptions
from lightning_recipes.checks._runner import run_checks, run_in_trainer
from lightning_recipes.checks.base import SanityCheck
from lightning_recipes.checks.data.data_check import DataCheck
from lightning_recipes.checks.data.loader_check import LoaderCheck
from lightning_recipes.checks.data.split_overlap_check import SplitOverlapCheck
from lightning_recipes.checks.data.target_leakage_check import TargetLeakageCheck
from lightning_recipes.checks.data.training_pairs_check import TrainingPairsCheck
from lightning_recipes.checks.loop.optimization_check import OptimizationCheck
from lightning_recipes.checks.loop.schedule_check import ScheduleCheck
from lightning_recipes.checks.loop.validation_path_check import ValidationPathCheck
from lightning_recipes.checks.loss.init_loss_check import InitLossCheck
from lightning_recipes.checks.loss.input_independence_check import InputIndependenceCheck
from lightning_recipes.checks.loss.loss_check import LossCheck
from lightning_recipes.checks.loss.overfit_batch_check import OverfitBatchCheck
from lightning_recipes.checks.model.batch_independence_check import BatchIndependenceCheck
from lightning_recipes.checks.model.causality_check import CausalityCheck
from lightning_recipes.checks.model.eval_mode_check import EvalModeCheck
from lightning_recipes.checks.model.grad_flow_check import GradFlowCheck
from lightning_recipes.checks.model.padding_check import PaddingCheck
from lightning_recipes.checks.report import PreflightReport
from lightning_recipes.harness import Harness as CheckContext
from lightning_recipes.harness import resolve_fit_data
from lightning_recipes.harness.batches import Key

__all__ = ["CHECKS", "Preflight", "build_checks", "preflight"]

#: Every check the preflight runs, name -> class, in the order it runs them.
CHECKS: dict[str, type[SanityCheck]] = {
    cls.name: cls
    for cls in (
        LoaderCheck,
        DataCheck,
        SplitOverlapCheck,
        LossCheck,
        InitLossCheck,
        ScheduleCheck,
        GradFlowCheck,
        BatchIndependenceCheck,
        PaddingCheck,
        EvalModeCheck,
        CausalityCheck,
        TargetLeakageCheck,
        OptimizationCheck,
        ValidationPathCheck,
        OverfitBatchCheck,
        InputIndependenceCheck,
        TrainingPairsCheck,
    )
}


def build_checks(checks: Sequence[str | SanityCheck] | str | SanityCheck | None) -> list[SanityCheck]:
    """Check objects from names and/or instances; ``None`` means every check with its defaults.

    Example:
        >>> [type(c).__name__ for c in build_checks(["init_loss", GradFlowCheck(max_steps=1)])]
        ['InitLossCheck', 'GradFlowCheck']
    """
    if checks is None:
        return [cls() for cls in CHECKS.values()]
    if isinstance(checks, (str, SanityCheck)):
        checks = [checks]
    for item in checks:
        if not isinstance(item, SanityCheck) and not (isinstance(item, str) and item in CHECKS):
            allowed = f"SanityCheck instances or one of {sorted(CHECKS)}"
            raise ValueError(f"`checks` entries must be {allowed}, got {item!r}.")
    built = [item if isinstance(item, SanityCheck) else CHECKS[item]() for item in checks]
    names = [c.name for c in built]
    if duplicates := sorted({n for n in names if names.count(n) > 1}):
        raise ValueError(f"`checks` names each check at most once, got {duplicates} more than once.")
    return built


def preflight(
    model: pl.LightningModule,
    datamodule: pl.LightningDataModule | None = None,
    train_dataloaders: Any = None,
    val_dataloaders: Any = None,
    checks: Sequence[str | SanityCheck] | None = None,
    *,
    input_key: Key = None,
    target_key: Key = None,
    num_classes: int | None = None,
    device: torch.device | str | None = None,
    seed: int = 0,
    num_threads: int | None = 1,
    print_report: bool = False,
    verbose: bool = False,
    time_budget: float | None = DEFAULT_TIME_BUDGET,
    progress: bool = True,
    total_time_budget: float | None = DEFAULT_TOTAL_TIME_BUDGET,
    max_epochs: int | None = None,
    max_steps: int | None = None,
) -> PreflightReport:
    """Run the sanity checks on ``model`` with its data, before training; return a :class:`PreflightReport`.
    The other keyword options are in ``docs/guides/preflight.md`` (*Options*).

    Args:
        model: The ``LightningModule`` to check.
        datamodule: Used for ``train_dataloader()``/``val_dataloader()`` (and its ``num_classes``).
        train_dataloaders: Training loader when there is no datamodule (default: the model's own).
        val_dataloaders: Validation loader, used as held-out data.
        checks: Names from :data:`CHECKS` and/or configured check objects; ``None`` runs all.
        device: Device for the copies and batches; default: the model's.

    Example:
        >>> from lightning_recipes.testing import TinyClassifier, random_classification_loader
        >>> report = preflight(TinyClassifier(lr=0.5), train_dataloaders=random_classification_loader())
        >>> report.ok, round(report["init_loss"].details["measured"], 3)  # ln 4
        (True, 1.386)
    """
    built = build_checks(checks)
    options = _options(locals())
    return run_preflight(model, built, options, datamodule, train_dataloaders, val_dataloaders, device)


def _options(given: dict[str, Any]) -> PreflightOptions:
    """The :class:`PreflightOptions` named among a call's arguments (its ``locals()``)."""
    return PreflightOptions(**{f.name: given[f.name] for f in fields(PreflightOptions) if f.name in given})


def run_preflight(
    model: pl.LightningModule,
    checks: Sequence[SanityCheck],
    options: PreflightOptions,
    datamodule: pl.LightningDataModule | None = None,
    train_dataloaders: Any = None,
    val_dataloaders: Any = None,
    device: torch.device | str | None = None,
) -> PreflightReport:
    """:func:`preflight` with its options as one record and its checks built (what the command line calls)."""
    model = getattr(model, "_orig_mod", model)  # torch.compile(module): the checks run the module eagerly
    data = resolve_fit_data("preflight", model, datamodule, train_dataloaders, val_dataloaders)
    num_classes = options.num_classes if options.num_classes is not None else data.num_classes
    harness = options.harness(device=device, datamodule=datamodule, num_classes=num_classes)
    report = run_checks(checks, CheckContext(model, data.train, data.val, **harness), options)
    if options.print_report:
        report.print(verbose=options.verbose)
    return report


class Preflight(Callback):
    """Run the preflight checks once, at ``on_train_start``, and stop (or warn) before a silently broken run.

    Every rank runs them on copies with the Trainer's device, precision and loaders ("any failed" is reduced);
    resumed runs and sharded strategies skip them. Logged (rank zero, step 0): each result's ``measured`` as
    ``preflight/<name>`` (``preflight/init_loss``, ``preflight/overfit_batch``, ...,
    ``preflight/input_independence``, ``preflight/batch_independence``). Options: the guide's *Options* table.

    Args:
        checks: Names from :data:`CHECKS` and/or configured check objects; ``None`` = all.
        on_fail: ``"raise"`` a :class:`~lightning_recipes.checks.PreflightError` on every rank, or ``"warn"``.

    Example:
        >>> from lightning_recipes.testing import TinyClassifier, fast_trainer, random_classification_loader
        >>> preflight = Preflight(checks=["data", "init_loss", "grad_flow"], print_report=False)
        >>> trainer = fast_trainer(max_steps=1, callbacks=[preflight])
        >>> trainer.fit(TinyClassifier(), random_classification_loader())
        >>> preflight.report.ok, preflight.report["init_loss"].status
        (True, 'pass')
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
        num_threads: int | None = 1,
        time_budget: float | None = DEFAULT_TIME_BUDGET,
        progress: bool = True,
        total_time_budget: float | None = DEFAULT_TOTAL_TIME_BUDGET,
        verbose: bool = False,
    ) -> None:
        check_choice("on_fail", on_fail, ON_FAIL)
        self.options = _options(locals())
        self.checks = build_checks(checks)
        self.on_fail = on_fail
        self.report: PreflightReport | None = None
        self.failed_on_any_rank = False  # the collective decision: True on every rank if any rank failed

    @property
    @override
    def state_key(self) -> str:
        return self._generate_state_key(checks=[c.name for c in self.checks])

    @override
    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if self.report is not None or trainer.ckpt_path is not None:
            return  # checks describe a fresh run; a resumed run already passed them
        self.failed_on_any_rank = run_in_trainer(
            self.checks, trainer, pl_module, self.options, keep=self._keep, on_fail=self.on_fail
        )

    def _keep(self, report: PreflightReport) -> None:
        self.report = report

    @override
    def state_dict(self) -> dict[str, Any]:
        return {"report": None if self.report is None else self.report.to_dict()}

    @override
    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        report = state_dict.get("report")
        self.report = None if report is None else PreflightReport.from_dict(report)
