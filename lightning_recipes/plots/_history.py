"""Read logged metric histories from a logger, a ``metrics.csv`` file or a mapping."""

from __future__ import annotations

import csv
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["MetricHistory", "read_metrics"]

MetricHistory = dict[str, list[tuple[int, float]]]
"""A run's logged metrics: ``{key: [(step, value), ...]}`` in logging order."""


def read_metrics(source: Any) -> MetricHistory:
    """Every logged metric of a run as ``{key: [(step, value), ...]}``, from an
    :class:`~lightning_recipes.testing.InMemoryLogger`, a ``CSVLogger``, a ``metrics.csv`` path or its
    directory, a ``Trainer`` (its first such logger) or a mapping (``{key: [values]}``: steps from 0).

    Example:
        >>> from lightning_recipes.testing import InMemoryLogger
        >>> logger = InMemoryLogger()
        >>> logger.log_metrics({"train_loss": 2.0}, step=0)
        >>> logger.log_metrics({"train_loss": 1.5, "lr": 0.1}, step=1)
        >>> read_metrics(logger)
        {'train_loss': [(0, 2.0), (1, 1.5)], 'lr': [(1, 0.1)]}
    """
    records = getattr(source, "records", None)
    if isinstance(records, list):  # InMemoryLogger
        history: MetricHistory = {}
        for step, values in records:
            for key, value in values.items():
                history.setdefault(key, []).append((int(step), float(value)))
        return history
    if isinstance(source, Mapping):
        return {str(key): _pairs(values) for key, values in source.items()}
    if isinstance(source, (str, os.PathLike)):
        return _read_csv(_csv_path(Path(source)))
    loggers = getattr(source, "loggers", None)
    if isinstance(loggers, list):  # a Trainer
        for logger in loggers:
            try:
                return read_metrics(logger)
            except TypeError:
                continue
        raise TypeError(
            "None of the trainer's loggers keeps a readable metric table; attach a CSVLogger or an "
            f"InMemoryLogger (loggers: {[type(logger).__name__ for logger in loggers]})."
        )
    if type(source).__name__ == "CSVLogger" and hasattr(source, "log_dir"):
        # flush only if this process writes the log: `.experiment` in a ddp_spawn parent deletes the workers'
        if getattr(source, "_experiment", None) is not None:
            source.save()
        return _read_csv(_csv_path(Path(source.log_dir)))
    raise TypeError(
        "`source` must be an InMemoryLogger, a CSVLogger, a Trainer, a path to metrics.csv (or its "
        f"directory) or a mapping of key -> [(step, value)], got {type(source).__name__}."
    )


def _pairs(values: Sequence[Any]) -> list[tuple[int, float]]:
    pairs = [
        item if isinstance(item, (tuple, list)) and len(item) == 2 else (i, item)
        for i, item in enumerate(values)
    ]
    return [(int(step), float(value)) for step, value in pairs]


def _csv_path(path: Path) -> Path:
    candidate = path / "metrics.csv" if path.is_dir() else path
    if not candidate.is_file():
        raise FileNotFoundError(
            f"No metrics.csv at {str(path)!r}; pass a CSVLogger's log_dir or its metrics.csv."
        )
    return candidate


def _read_csv(path: Path) -> MetricHistory:
    history: MetricHistory = {}
    with path.open(newline="") as handle:
        for row in csv.DictReader(handle):
            step = int(float(row["step"])) if row.get("step") else -1
            for key, text in row.items():
                if key == "step" or key is None or text in (None, ""):
                    continue
                try:
                    value = float(text)
                except ValueError:
                    continue
                history.setdefault(key, []).append((step, value))
    return history
