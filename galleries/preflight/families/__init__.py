"""The preflight's first gallery: planted bugs and healthy models, one file per family, written by the checks'
own authors (``legacy.py`` in sessions 1-3, the other families for issue #14: not blind), except
``holdout.py``, a blind hold-out by an engineer who did not read the checks' code. Read by the tests
(``tests/checks/test_gallery.py`` and each check's tests) and by ``benchmarks/preflight_gallery.py``
(precision / recall of the whole preflight).

Each family module defines ``BUGS: list[Case]`` and ``HEALTHY: list[Case]``. A bug names the check meant
to flag it, the status it must get (``"fail"``, or ``"warn"`` where the issue allows only a warning) and words
its message must contain. A healthy case must get no ``fail`` from any check (``check`` is ``None``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import lightning.pytorch as pl

__all__ = ["Case"]


@dataclass(frozen=True)
class Case:
    """One gallery entry.

    Args:
        id: Short unique name (the pytest id).
        family: ``"causality"``, ``"target_leakage"``, ``"split_overlap"``, ``"eval_mode"``, ``"data"``,
            ``"init_loss"``, ``"overfit_batch"``, ``"shapes"``, ... (the bug family, or the healthy shape).
        shape: The model's shape: ``"MLP"``, ``"CNN"``, ``"transformer LM"``, ``"encoder classifier"``,
            ``"regression"``, ``"autoencoder"``, ...
        model: Builds the ``LightningModule`` (a fresh one per call).
        data: Builds the keyword arguments of ``preflight`` that carry the data: ``train_dataloaders``,
            ``val_dataloaders``, ``datamodule``, and any of ``input_key``/``target_key``/``num_classes``.
        check: The check that must flag the bug (its registry name); ``None`` for a healthy model.
        status: What that check must report for a bug; ignored for a healthy model.
        words: Words the check's message must contain.
    """

    id: str
    family: str
    shape: str
    model: Callable[[], pl.LightningModule]
    data: Callable[[], dict[str, Any]]
    check: str | None = None
    status: str = "fail"
    words: tuple[str, ...] = field(default_factory=tuple)
