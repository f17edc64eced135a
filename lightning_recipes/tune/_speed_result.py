"""What :func:`~lightning_recipes.tune.speed_tune` returns: the rows, the choice, and the ways to apply it."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import lightning.pytorch as pl
from torch.utils.data import DataLoader

from lightning_recipes._console import new_table, render
from lightning_recipes.tune._speed_options import ApplySpeedOptions, apply_speed_options, speed_loader

__all__ = ["SpeedRow", "SpeedTuneResult"]

CALLBACK_PATH = "lightning_recipes.tune.ApplySpeedOptions"


@dataclass
class SpeedRow:
    """One row of :func:`~lightning_recipes.tune.speed_tune`'s table. ``status``: ``faster``, ``not faster``,
    ``not faster for this run: ...``, ``slower``, ``skipped: ...`` or ``incorrect: ...``; times in ms / s,
    memory in MiB where measured."""

    option: str
    status: str
    step_ms: float | None = None
    speedup: float | None = None
    loss_deviation: float | None = None
    loss_rtol: float | None = None
    first_step_ms: float | None = None
    activation_mb: float | None = None
    step_peak_mb: float | None = None
    cuda_peak_mb: float | None = None
    baseline_step_ms: float | None = None
    one_off_s: float | None = None
    break_even_steps: int | None = None
    run_s: float | None = None
    run_speedup: float | None = None


@dataclass
class SpeedTuneResult:
    """What :func:`~lightning_recipes.tune.speed_tune` found: ``rows`` (baseline first; a re-measured
    combination ``"a+b"`` last), the ``best`` options with their speed-ups, ``advice``, ``trainer_kwargs`` and
    ``loader_kwargs``. Apply with ``Trainer(**result.trainer_kwargs, callbacks=[result.callback()])`` and
    ``result.loader(loader)``, or ``result.apply(model)``, or ``result.to_yaml()`` for LightningCLI."""

    rows: list[SpeedRow]
    best: list[str] = field(default_factory=list)
    best_speedup: float = 1.0
    advice: dict[str, str] = field(default_factory=dict)
    trainer_kwargs: dict[str, Any] = field(default_factory=dict)
    loader_kwargs: dict[str, Any] = field(default_factory=dict)
    run_steps: int | None = None
    run_steps_source: str = ""
    best_run_speedup: float = 1.0
    module_options: list[str] = field(default_factory=list)
    chosen_options: list[Any] = field(default_factory=list, repr=False)  # the SpeedOption objects of `best`

    def callback(self) -> Any:
        """An :class:`~lightning_recipes.tune.ApplySpeedOptions` for the chosen built-in options, or ``None``.

        Example:
            >>> SpeedTuneResult([], ["channels_last"], module_options=["channels_last"]).callback().options
            ['channels_last']
        """
        return ApplySpeedOptions(self.module_options) if self.module_options else None

    def apply(self, model: pl.LightningModule) -> pl.LightningModule:
        """Apply the chosen module-side options to ``model`` in place (before ``trainer.fit``); returns it."""
        return apply_speed_options(model, self.chosen_options or self.module_options)

    def loader(self, loader: DataLoader) -> DataLoader:
        """``loader`` rebuilt with the chosen loader arguments (the same batches and shuffle)."""
        return speed_loader(loader, self.chosen_options or self.best)

    def cli_config(self) -> dict[str, Any]:
        """The LightningCLI config: the Trainer arguments and the ApplySpeedOptions callback if needed.

        Example:
            >>> SpeedTuneResult([], ["bf16-mixed"], trainer_kwargs={"precision": "bf16-mixed"}).cli_config()
            {'trainer': {'precision': 'bf16-mixed'}}
        """
        trainer: dict[str, Any] = dict(self.trainer_kwargs)
        if self.module_options:
            callback = {"class_path": CALLBACK_PATH, "init_args": {"options": list(self.module_options)}}
            trainer["callbacks"] = [callback]
        return {"trainer": trainer}

    def to_yaml(self) -> str:
        """:meth:`cli_config` as YAML, then comments: each chosen option's advice and the loader arguments.

        Example:
            >>> result = SpeedTuneResult([], ["bf16-mixed"], trainer_kwargs={"precision": "bf16-mixed"})
            >>> print(result.to_yaml())
            trainer:
              precision: bf16-mixed
            <BLANKLINE>
        """
        import yaml

        config = self.cli_config()
        text = yaml.safe_dump(config, sort_keys=False) if config["trainer"] else "trainer: {}\n"
        comments = [f"# {name}: {text}" for name, text in self.advice.items() if text]
        if self.loader_kwargs:
            args = ", ".join(f"{key}={value!r}" for key, value in self.loader_kwargs.items())
            comments.append(f"# the training DataLoader (your datamodule's arguments): {args}")
        return text + "".join(line + "\n" for line in comments)

    def to_dict(self) -> dict[str, Any]:
        """Every field as plain data, but the chosen :class:`SpeedOption` objects (their names: ``best``)."""
        data = dataclasses.asdict(dataclasses.replace(self, chosen_options=[]))
        del data["chosen_options"]
        return data

    def table(self, columns: Sequence[str] | None = None) -> Any:
        """The rows as a ``rich.table.Table`` (``columns``: only these headers); reasons numbered below it.

        Example:
            >>> import io
            >>> from rich.console import Console
            >>> result = SpeedTuneResult([SpeedRow("baseline", "ok", step_ms=5.0)], ["baseline"])
            >>> console = Console(width=80, record=True, file=io.StringIO())
            >>> console.print(result)
            >>> max(len(line) for line in console.export_text().splitlines()) <= 80
            True
        """
        headers, rows = self._cells()
        keep = [i for i, h in enumerate(headers) if columns is None or h in columns or i == 0]
        run = f"{self.run_steps} steps" if self.run_steps is not None else "run length unknown"
        reasons = [row.status.partition(":")[2].strip() for row in self.rows]
        numbered = enumerate(zip(self.rows, reasons), 1)
        notes = [f"[{n}] {row.option}: {why}" for n, (row, why) in numbered if why]
        for n, (cells, why) in enumerate(zip(rows, reasons), 1):
            cells[1] = f"{cells[1].partition(':')[0]}[{n}]" if why else cells[1]
        table = new_table(
            f"speed_tune for a run of {run} ({self.run_steps_source}); best: "
            f"{', '.join(self.best) or 'baseline'}, x{self.best_run_speedup:.2f} projected for the run, "
            f"x{self.best_speedup:.2f} per step",
            caption="\n".join(notes) or None,
            caption_justify="left",
            box="SIMPLE_HEAD",
            fitting=True,
        )
        for i in keep:
            table.add_column(headers[i], justify="left" if i < 2 else "right", no_wrap=i == 0)
        for cells in rows:
            table.add_row(*(cells[i] for i in keep))
        return table

    def __str__(self) -> str:
        return render(self.table())

    def __rich_console__(self, console: Any, options: Any) -> Any:
        yield self.table()

    def _cells(self) -> tuple[list[str], list[list[str]]]:
        memory = [(h, key) for h, key in _MEMORY if any(getattr(row, key) is not None for row in self.rows)]
        rows = []
        for row in self.rows:
            cells = [_fmt(getattr(row, key), spec) for _, key, spec in _NUMBERS]
            baseline = row.step_ms is None or row.option == "baseline"  # "pays after": "never" for None
            cells[4] = "-" if baseline else cells[4].replace("-", "never")
            loss = f"{_fmt(row.loss_deviation, '.2e')} ({_fmt(row.loss_rtol, '.0e')})"
            more = [_fmt(getattr(row, key), ".2f") for _, key in memory]
            rows.append([row.option, row.status, *cells, loss, _fmt(row.first_step_ms, ".0f"), *more])
        headers = ["option", "status", *(h for h, _, _ in _NUMBERS), "loss dev. (tol)", "first step ms"]
        return headers + [h for h, _ in memory], rows


#: The numeric columns: header, SpeedRow field, format.
_NUMBERS = (
    ("step ms", "step_ms", ".2f"),
    ("baseline ms", "baseline_step_ms", ".2f"),
    ("speed-up", "speedup", ".2f"),
    ("one-off s", "one_off_s", ".2f"),
    ("pays after (steps)", "break_even_steps", "d"),
    ("run speed-up", "run_speedup", ".2f"),
)

_MEMORY = (
    ("act. MiB", "activation_mb"),
    ("step peak MiB", "step_peak_mb"),
    ("CUDA peak MiB", "cuda_peak_mb"),
)


def _fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)
