"""HealthMonitor's findings read well: a one-line summary, short evidence lines, a table that fits."""

from __future__ import annotations

import io
import math
import re
import warnings

import pytest
import torch
from rich.console import Console

from lightning_recipes.callbacks._health_window import evidence_lines, format_value
from lightning_recipes.callbacks.health_monitor import Finding, HealthMonitor
from lightning_recipes.testing import fast_trainer
from tests.helpers.health_gallery import MLP, classification, loader

ADVICE = (
    "Stop at the best epoch (EarlyStopping on val_loss), or regularise: weight decay, dropout, "
    "augmentation or more data."
)


def _overfit() -> Finding:
    evidence = {
        "gl": 8.123456,
        "val_loss": 1.0812345,
        "best_epoch": 1,
        "began_epoch": 2.0,
        "update_ratio": {f"encoder.layer.{i}.attention.self.query": 10.0**-i for i in range(8)},
    }
    return Finding("overfitting", 300, 7, evidence, ADVICE)


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (0.0123456, "0.0123"),
        (123456.7, "1.23e+05"),
        (1e-7, "1e-07"),
        (8.0, "8"),
        (300, "300"),
        (math.nan, "nan"),
        (math.inf, "inf"),
        ("net.0", "net.0"),
        ({"a": 0.1, "b": 0.5, "c": math.nan, "d": 0.3}, "c nan, b 0.5, d 0.3 (+1 more)"),
        ([1.23456, 2, 3, 4, 5], "[1.23, 2, 3 (+2 more)]"),
    ],
)
def test_values_read_to_three_significant_digits_and_three_entries(value: object, text: str) -> None:
    assert format_value(value) == text


def test_summary_names_problem_when_numbers_and_advice_in_words() -> None:
    finding = _overfit()
    summary = finding.summary()
    assert str(finding) == summary
    assert summary.startswith("overfitting at step 300 (epoch 7): the validation loss rises")
    assert "gl 8.12; val loss 1.08; best epoch 1." in summary
    assert summary.endswith(ADVICE)
    assert "{" not in summary and "'" not in summary  # no JSON / dict repr
    assert evidence_lines(finding.evidence)[-1] == (
        "update ratio encoder.layer.0.attention.self.query 1, encoder.layer.1.attention.self.query 0.1, "
        "encoder.layer.2.attention.self.query 0.01 (+5 more)"
    )


@pytest.mark.parametrize("width", [72, 120])
def test_report_fits_the_terminal_and_keeps_words_whole(width: int) -> None:
    monitor = HealthMonitor()
    monitor.findings = [_overfit()]
    console = Console(width=width, record=True, file=io.StringIO())
    console.print(monitor.report(print_table=False))
    text = console.export_text()
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= width
    cells = " ".join(re.sub(r"[│┃║|]", " ", line) for line in lines)
    for word in ADVICE.split():
        assert word in cells.split(), word  # wrapped between words, never inside one
    assert "step 300" in text and "gl 8.12" in text and "(+5 more)" in text


def test_the_warning_is_the_summary_in_a_real_run() -> None:
    monitor = HealthMonitor(check_every_n_steps=10)
    torch.manual_seed(0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fast_trainer(max_steps=30, max_epochs=-1, callbacks=[monitor], limit_val_batches=0).fit(
            MLP(bias_init=-6.0), loader(classification())
        )
    messages = [str(w.message) for w in caught if str(w.message).startswith("HealthMonitor:")]
    assert messages == [f"HealthMonitor: {monitor.findings[0].summary()}"]
    assert "units that never activate" in messages[0] and "dead fraction net." in messages[0]
