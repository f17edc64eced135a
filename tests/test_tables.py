"""Tables in a terminal keep numbers whole: columns at their longest word, rows stacked when too narrow."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from lightning_recipes.strategies.memory import render
from lightning_recipes.strategies.recommend import recommend_strategy
from lightning_recipes.tune._speed_result import SpeedRow, SpeedTuneResult


def _text(renderable: object, width: int) -> str:
    out = io.StringIO()
    Console(width=width, file=out).print(renderable)
    return out.getvalue()


@pytest.mark.parametrize("width", [60, 80, 100, 112, 140])
def test_the_memory_table_keeps_every_figure_whole_at_any_width(width: int) -> None:
    recommendation = recommend_strategy(6_738_415_616, devices=8, device_memory_gb=80, host_memory_gb=100)
    text = render(recommendation.table(), width=width)
    assert "…" not in text
    assert max(len(line.rstrip()) for line in text.splitlines()) <= width
    for estimate in recommendation.estimates:  # each row's total, as the table writes it
        assert f"{estimate.total / 2**30:.2f}" in text, text


def _speed_result() -> SpeedTuneResult:
    why = {
        "channels_last": "no Conv2d in the model (channels-last only changes convolutions)",
        "tf32": "TF32 applies on CUDA only (device is cpu)",
        "activation_checkpointing": "no repeated block with sub-modules in the model (the only repeated "
        "type is the leaf Conv1d)",
    }
    rows = [SpeedRow("baseline", "baseline", 22.78, 1.0, 0.0, 2e-2, 25.0)]
    rows += [SpeedRow(name, f"skipped: {reason}") for name, reason in why.items()]
    rows += [SpeedRow("bf16-mixed", "faster", 19.48, 1.17, 5.98e-4, 5e-2, 47.0)]
    rows += [SpeedRow("num_workers", "faster", 12.39, 1.84, 0.0, 2e-2, 110.0)]
    rows += [SpeedRow("bf16-mixed+num_workers", "slower", 31.73, 0.73, 5.98e-4, 5e-2, 30.0)]
    for row in rows:
        if row.step_ms is not None:
            row.baseline_step_ms, row.one_off_s, row.break_even_steps, row.run_speedup = 22.78, 0.06, 18, 1.1
    return SpeedTuneResult(rows, ["num_workers"])


@pytest.mark.parametrize("width", [80, 100, 120, 160])
def test_the_speed_table_keeps_numbers_whole_and_reasons_readable(width: int) -> None:
    result = _speed_result()
    text = _text(result.table(), width)
    assert "…" not in text
    flat = " ".join(text.split())
    for row in result.rows:  # every reason in full, every time whole
        assert row.status.partition(": ")[2] in flat or not row.status.startswith("skipped"), flat
        assert row.step_ms is None or f"{row.step_ms:.2f}" in flat
    assert len(text.splitlines()) <= 40, text  # was 62-64 lines at 120 columns
    assert _text(result, width) == text  # printing the result prints its table


def test_printing_a_table_prints_its_text(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "100")
    text = str(_speed_result().table())  # `print(result.table())` printed the object's repr
    assert "num_workers" in text and "12.39" in text and "…" not in text
    assert max(len(line) for line in text.splitlines()) <= 100
