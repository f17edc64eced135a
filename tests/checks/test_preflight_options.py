"""``PreflightOptions``: the one record of a preflight's options, validated once; the report is what it was
before (``data/preflight_report_all_checks.json``, from ``make_fixtures.fixture_inputs()``)."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest

from lightning_recipes.checks import Preflight, PreflightReport, preflight
from lightning_recipes.checks._options import PreflightOptions
from lightning_recipes.testing import TinyClassifier, fast_trainer, random_classification_loader

DATA = Path(__file__).resolve().parent / "data"


def _fixtures() -> Any:
    spec = importlib.util.spec_from_file_location("make_fixtures", DATA / "make_fixtures.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _keys(value: Any, prefix: str = "") -> set[str]:
    """Every key path of a JSON value (lists of results indexed by position)."""
    if isinstance(value, dict):
        found = set()
        for key, item in value.items():
            found |= {f"{prefix}/{key}"} | _keys(item, f"{prefix}/{key}")
        return found
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        return set().union(*(_keys(v, f"{prefix}[{i}]") for i, v in enumerate(value)))
    return set()


def _without_details(report: dict[str, Any]) -> dict[str, Any]:
    return {**report, "results": [{k: v for k, v in r.items() if k != "details"} for r in report["results"]]}


def test_to_dict_keeps_the_keys_and_verdicts_of_the_report_written_before_the_record() -> None:
    fixtures = _fixtures()
    saved = json.loads((DATA / "preflight_report_all_checks.json").read_text())
    model, loader = fixtures.fixture_inputs()
    report = preflight(model, train_dataloaders=loader, num_threads=1, progress=False)
    now = fixtures.normalised(report.to_dict())
    # every key a consumer read is still there (#34 added summary/action/guide); a result's evidence (its
    # details) is each check's own and was rebuilt by #34, so only the record's keys are compared
    assert _keys(_without_details(saved)) <= _keys(_without_details(now))
    assert [(r["name"], r["status"]) for r in now["results"]] == [
        (r["name"], r["status"]) for r in saved["results"]
    ]
    assert now["ok"] == saved["ok"] and now["counts"] == saved["counts"]
    loaded = PreflightReport.from_dict(saved)
    assert [(r.name, r.status) for r in loaded] == [(r["name"], r["status"]) for r in saved["results"]]
    assert [r.message for r in loaded] == [r["message"] for r in saved["results"]]


def test_the_record_is_frozen_and_validated_once_at_construction() -> None:
    options = PreflightOptions(input_key="x", seed=3, num_threads=1, time_budget=None)
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.seed = 4  # type: ignore[misc]
    assert dataclasses.replace(options, seed=5).seed == 5
    for bad, match in [
        ({"num_classes": 1}, "`num_classes` must be an integer >= 2, got 1"),
        ({"seed": 0.5}, "`seed` must be an integer"),
        ({"num_threads": 0}, "`num_threads` must be an integer >= 1"),
        ({"input_key": 1.5}, "`input_key` must be an int index"),
        ({"time_budget": 0}, "`time_budget`"),
        ({"total_time_budget": "default"}, "`total_time_budget` must be a positive number"),
    ]:
        with pytest.raises(ValueError, match=match):
            PreflightOptions(**bad)
    with pytest.raises(TypeError, match="`print_report`"):
        PreflightOptions(print_report="yes")  # type: ignore[arg-type]


def test_preflight_and_the_callback_build_the_same_record_from_their_keyword_arguments() -> None:
    kwargs: dict[str, Any] = {"input_key": 0, "target_key": 1, "num_classes": 4, "seed": 2, "num_threads": 1}
    callback = Preflight(checks=["init_loss"], print_report=False, progress=False, **kwargs)
    assert callback.options == PreflightOptions(print_report=False, progress=False, **kwargs)
    with pytest.raises(ValueError, match="`num_threads`"):
        Preflight(num_threads=0)
    with pytest.raises(ValueError, match="`num_threads`"):
        preflight(TinyClassifier(), train_dataloaders=random_classification_loader(), num_threads=0)


def test_the_callback_runs_with_its_record_in_a_real_trainer() -> None:
    callback = Preflight(checks=["init_loss"], print_report=False, progress=False, seed=1, num_threads=1)
    trainer = fast_trainer(max_steps=1, callbacks=[callback])
    trainer.fit(TinyClassifier(), random_classification_loader())
    assert callback.report is not None and callback.report["init_loss"].status == "pass"
