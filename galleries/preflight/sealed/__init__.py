"""The sealed galleries A-F of issue #34: real, silent bugs and healthy look-alikes in task types the checks
were not built on, each written blind by helpers (without reading ``lightning_recipes/checks`` or its tests)
and not run through the preflight until its one scoring run (``python -m galleries.preflight.dev.score
--gallery sealed-a``); each has been used to mend the checks since, so none is blind now.

Each module defines ``BUGS`` and ``HEALTHY`` (lists of :class:`SealedCase`). Every bug is proved real against
its healthy twin with plain torch and Lightning (``test_proofs_*.py`` here, run by ``make gallery-proofs``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import lightning.pytorch as pl


@dataclass(frozen=True)
class SealedCase:
    """One entry.

    Args:
        id: Short unique name (the pytest id).
        task: The task type (``"contrastive"``, ``"VAE"``, ``"seq2seq"``, ``"quantile regression"``, ...).
        model: Builds the ``LightningModule`` (a fresh one per call, from the global RNG).
        data: Builds the keyword arguments of ``preflight`` that carry the data: ``train_dataloaders``,
            ``val_dataloaders`` and, where a user would pass them, ``input_key``, ``target_key``,
            ``num_classes``.
        bug: One sentence: what is wrong, as a user would find it afterwards; ``None`` for a healthy model.
        invariant: The property of a correct training loop the bug breaks (``""`` for a healthy model).
    """

    id: str
    task: str
    model: Callable[[], pl.LightningModule]
    data: Callable[[], dict[str, Any]]
    bug: str | None = None
    invariant: str = ""
