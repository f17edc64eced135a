"""A Lightning `Logger` that keeps every logged value in memory."""

from __future__ import annotations

from argparse import Namespace
from collections.abc import Mapping
from typing import Any

from lightning.pytorch.loggers.logger import Logger
from lightning.pytorch.utilities.rank_zero import rank_zero_only
from typing_extensions import override

__all__ = ["InMemoryLogger"]


class InMemoryLogger(Logger):
    """Records every ``log_metrics`` call as ``(step, {key: value})`` and every ``log_hyperparams`` call.

    Use it to assert on what a callback or module really logged, through the real Trainer logging path
    (no mocks). Only rank zero records, as with every Lightning logger; under ``ddp_spawn`` the records
    live in the worker process, so assert inside a hook or on ``trainer.callback_metrics``.

    Args:
        name: Experiment name returned by :attr:`name`.

    Example:
        >>> logger = InMemoryLogger()
        >>> logger.log_metrics({"loss": 1.5}, step=0)
        >>> logger.log_metrics({"loss": 1.0, "lr": 0.1}, step=1)
        >>> logger.history("loss")
        [(0, 1.5), (1, 1.0)]
        >>> logger.last("lr"), sorted(logger.keys())
        (0.1, ['loss', 'lr'])
    """

    def __init__(self, name: str = "in_memory") -> None:
        super().__init__()
        self._name = name
        self.records: list[tuple[int, dict[str, float]]] = []
        self.hyperparams: dict[str, Any] = {}

    @property
    @override
    def name(self) -> str:
        return self._name

    @property
    @override
    def version(self) -> int:
        return 0

    @override
    @rank_zero_only
    def log_hyperparams(self, params: dict[str, Any] | Namespace, *args: Any, **kwargs: Any) -> None:
        if isinstance(params, Namespace):
            params = vars(params)
        self.hyperparams.update(dict(params))

    @override
    @rank_zero_only
    def log_metrics(self, metrics: Mapping[str, float], step: int | None = None) -> None:
        values = {key: _to_float(value) for key, value in metrics.items()}
        self.records.append((-1 if step is None else int(step), values))

    def history(self, key: str) -> list[tuple[int, float]]:
        """All ``(step, value)`` pairs logged under ``key``, in logging order."""
        return [(step, values[key]) for step, values in self.records if key in values]

    def values(self, key: str) -> list[float]:
        """All values logged under ``key``, in logging order."""
        return [value for _, value in self.history(key)]

    def last(self, key: str) -> float:
        """The most recent value logged under ``key``; ``KeyError`` if it was never logged."""
        history = self.history(key)
        if not history:
            raise KeyError(f"{key!r} was never logged; logged keys: {sorted(self.keys())}")
        return history[-1][1]

    def keys(self) -> set[str]:
        """Every key logged at least once."""
        return {key for _, values in self.records for key in values}


def _to_float(value: Any) -> float:
    return float(value.item()) if hasattr(value, "item") else float(value)
