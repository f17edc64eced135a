"""``preflight(model, ...)``: run every sanity check on a model and its data, and get one report.

Writing a check of your own: subclass :class:`SanityCheck`, set ``name``, implement ``check(context)`` with the
helpers of :class:`CheckContext` (``copy_model``, ``train_batches``, ``training_loss``, ``build_optimizers``,
``optimization_step``), return a :class:`CheckResult` or raise :class:`CheckSkipped`; pass the instance in
``checks=[...]`` or put it in ``Trainer(callbacks=[...])``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import lightning.pytorch as pl
import torch
from lightning.pytorch.utilities.model_helpers import is_overridden

from lightning_recipes.callbacks._checks.base import CheckResult, PreflightError, SanityCheck
from lightning_recipes.callbacks._checks.batches import Key
from lightning_recipes.callbacks._checks.context import CheckContext, CheckSkipped
from lightning_recipes.callbacks._checks.registry import (
    CHECKS,
    build_checks,
    run_checks,
    validate_num_threads,
)
from lightning_recipes.callbacks._checks.report import PreflightReport

__all__ = [
    "CHECKS",
    "CheckContext",
    "CheckResult",
    "CheckSkipped",
    "PreflightError",
    "PreflightReport",
    "SanityCheck",
    "preflight",
]


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
    num_threads: int | None = None,
    print_report: bool = False,
) -> PreflightReport:
    """Run the sanity checks on ``model`` with its data, before training, and return a :class:`PreflightReport`.

    The checks, in order: ``data`` (NaN/Inf, label range, constant or un-normalised inputs, single-class
    batches, an unshuffled loader), ``init_loss`` (the first loss vs ``ln C``), ``grad_flow`` (every trainable
    parameter gets a finite, non-zero gradient and is in the optimizer), ``batch_independence`` (no sample
    sees another), ``overfit_batch`` (the model memorises one small batch) and ``input_independence`` (real
    inputs beat zeroed inputs on held-out data). See each ``*Check`` class for thresholds and cost.

    Nothing of the caller's changes: every check works on a deep copy of the module with an optimizer of
    its own from ``configure_optimizers``; the global RNG states (torch CPU/CUDA, numpy, Python) and the
    loaders' generators are restored; the loaders are only iterated. The loss is what ``training_step``
    returns (see :mod:`lightning_recipes.callbacks._checks.context` for the full contract). A check that
    cannot apply (no classes to infer, manual optimisation, no held-out data) reports ``"skip"`` and says why.

    Args:
        model: The ``LightningModule`` to check.
        datamodule: Its ``prepare_data()`` and ``setup("fit")`` are called, then ``train_dataloader()`` /
            ``val_dataloader()``; its ``num_classes`` attribute is used when present.
        train_dataloaders: Training loader (or collection: the first is used), when there is no datamodule;
            default: the model's own ``train_dataloader()`` if it defines one.
        val_dataloaders: Validation loader, used as held-out data.
        checks: Names from :data:`CHECKS` and/or configured check objects; ``None`` runs all.
        input_key: Index or key of the input tensor in a batch (default: ``batch[0]`` or ``"x"``, ...).
        target_key: Index or key of the target tensor (default: ``batch[-1]`` or ``"y"``, ``"labels"``, ...).
        num_classes: Number of classes, when shapes cannot tell.
        device: Device for the copies and batches; default: the model's.
        seed: Seed the checks run under (isolated from the caller's RNG).
        num_threads: torch intra-op threads while the checks run on a CPU (restored after); ``None`` leaves
            them alone. ``1`` is fastest for small models on a busy CPU (see ``benchmarks/RESULTS.md``).
        print_report: Print the table (rich) before returning.

    Returns:
        The report: ``.ok``, ``.results``, ``report["init_loss"]``, ``to_dict()``, ``raise_for_failures()``.

    Raises:
        ValueError: If no training data is given, or a check name is unknown.

    Example:
        >>> from lightning_recipes.testing import TinyClassifier, random_classification_loader
        >>> loader = random_classification_loader(shuffle=True)
        >>> report = preflight(TinyClassifier(lr=0.5), train_dataloaders=loader, num_threads=1)
        >>> report.ok, [r.status for r in report]
        (True, ['pass', 'pass', 'pass', 'pass', 'pass', 'pass'])
        >>> round(report["init_loss"].details["measured"], 3)  # ln 4
        1.386
    """
    built = build_checks(checks)
    validate_num_threads(num_threads)
    if num_classes is not None and num_classes < 2:
        raise ValueError(f"`num_classes` must be >= 2, got {num_classes!r}.")
    if datamodule is not None:
        datamodule.prepare_data()
        datamodule.setup("fit")
        if train_dataloaders is None:
            train_dataloaders = datamodule.train_dataloader()
        if val_dataloaders is None and is_overridden("val_dataloader", datamodule):
            val_dataloaders = datamodule.val_dataloader()
        if num_classes is None:
            declared = getattr(datamodule, "num_classes", None)
            num_classes = declared if isinstance(declared, int) and declared >= 2 else None
    if train_dataloaders is None and is_overridden("train_dataloader", model):
        train_dataloaders = model.train_dataloader()
        if val_dataloaders is None and is_overridden("val_dataloader", model):
            val_dataloaders = model.val_dataloader()
    if train_dataloaders is None:
        raise ValueError(
            "`preflight` needs training data: pass `datamodule=` or `train_dataloaders=`, or define "
            "`train_dataloader()` on the model (got none of these)."
        )
    context = CheckContext(
        model,
        train_dataloaders,
        val_dataloaders,
        device=device,
        datamodule=datamodule,
        input_key=input_key,
        target_key=target_key,
        num_classes=num_classes,
        seed=seed,
    )
    report = run_checks(built, context, num_threads)
    if print_report:
        from rich.console import Console

        Console().print(report)
    return report
