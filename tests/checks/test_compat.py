"""Reports and a checkpoint saved before the ``checks/`` move and the ``PreflightOptions`` record load."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest
import torch

from lightning_recipes.checks import InitLossCheck, Preflight, PreflightReport, preflight
from lightning_recipes.testing import fast_trainer

DATA = Path(__file__).resolve().parent / "data"


def _fixtures_module():
    spec = importlib.util.spec_from_file_location("make_fixtures", DATA / "make_fixtures.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_report_matches_the_one_saved_before_the_move():
    fixtures = _fixtures_module()
    model, loader = fixtures.fixture_inputs()
    saved = json.loads((DATA / "preflight_report.json").read_text())
    # the checks that existed when the fixture was saved (checks added since have no saved result)
    names = [result["name"] for result in saved["results"]]
    report = preflight(model, train_dataloaders=loader, checks=names, num_threads=1)
    # statuses and evidence (details), numbers to 12 significant digits (one ulp moved); not the wording
    now = fixtures.normalised(report.to_dict())
    assert [(r["name"], r["status"]) for r in now["results"]] == [
        (r["name"], r["status"]) for r in saved["results"]
    ]
    # every saved field of the evidence keeps its saved value; fields added since are not compared
    saved_details = _to_12_digits([r["details"] for r in saved["results"]])
    now_details = _to_12_digits([r["details"] for r in now["results"]])
    assert _only_saved_fields(now_details, saved_details) == saved_details
    assert {k: v for k, v in now.items() if k != "results"} == {
        k: v for k, v in saved.items() if k != "results"
    }
    loaded = PreflightReport.from_dict(saved)  # a report saved before summaries and actions still loads
    assert [(r.name, r.status, r.message, r.action) for r in loaded] == [
        (r["name"], r["status"], r["message"], "") for r in saved["results"]
    ]


def _only_saved_fields(now, saved):
    """``now`` cut to the dict keys ``saved`` has (recursively; lists item by item)."""
    if isinstance(now, dict) and isinstance(saved, dict):
        return {key: _only_saved_fields(now[key], saved[key]) if key in now else "<missing>" for key in saved}
    if isinstance(now, list) and isinstance(saved, list) and len(now) == len(saved):
        return [_only_saved_fields(a, b) for a, b in zip(now, saved)]
    return now


def _to_12_digits(value):
    if isinstance(value, float):
        return float(f"{value:.12g}")
    if isinstance(value, dict):
        return {key: _to_12_digits(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_to_12_digits(item) for item in value]
    return value


def test_checkpoint_written_before_the_move_restores_the_check_callbacks(tmp_path):
    fixtures = _fixtures_module()
    model, loader = fixtures.fixture_inputs()
    check, flight = InitLossCheck(), Preflight(checks=["init_loss", "grad_flow"], print_report=False)
    trainer = fast_trainer(max_steps=2, max_epochs=2, callbacks=[check, flight], default_root_dir=tmp_path)
    trainer.fit(model, loader, ckpt_path=DATA / "check_callbacks.ckpt")
    assert trainer.global_step == 2  # resumed from step 1, trained one more
    assert check.result is not None and check.result.status == "pass"
    assert check.result.details["expected"] == pytest.approx(1.3862944)
    assert flight.report is not None and [r.name for r in flight.report] == ["init_loss", "grad_flow"]
    assert flight.report.ok
    saved = torch.load(DATA / "check_callbacks.ckpt", weights_only=False)["callbacks"]
    assert set(saved) == {check.state_key, flight.state_key}


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


#: Checks registered after ``preflight_report_all_checks.json`` was written (issue #34's ``training_pairs``).
ADDED_SINCE_THE_RECORD = {"training_pairs"}


def _without_details(report: dict[str, Any]) -> dict[str, Any]:
    return {**report, "results": [{k: v for k, v in r.items() if k != "details"} for r in report["results"]]}


def test_to_dict_keeps_the_keys_and_verdicts_of_the_report_written_before_the_record() -> None:
    fixtures = _fixtures_module()
    saved = json.loads((DATA / "preflight_report_all_checks.json").read_text())
    model, loader = fixtures.fixture_inputs()
    report = preflight(model, train_dataloaders=loader, num_threads=1, progress=False)
    now = fixtures.normalised(report.to_dict())
    # checks registered after the record was written: their results are new rows, the old ones unchanged
    added = [r for r in now["results"] if r["name"] in ADDED_SINCE_THE_RECORD]
    assert [r["name"] for r in added] == sorted(ADDED_SINCE_THE_RECORD)
    now["results"] = [r for r in now["results"] if r["name"] not in ADDED_SINCE_THE_RECORD]
    for result in added:
        now["counts"][result["status"]] -= 1
    # every key a consumer read is still there; the evidence (details) is each check's own: not compared
    assert _keys(_without_details(saved)) <= _keys(_without_details(now))
    assert [(r["name"], r["status"]) for r in now["results"]] == [
        (r["name"], r["status"]) for r in saved["results"]
    ]
    assert now["ok"] == saved["ok"] and now["counts"] == saved["counts"]
    loaded = PreflightReport.from_dict(saved)
    assert [(r.name, r.status) for r in loaded] == [(r["name"], r["status"]) for r in saved["results"]]
    assert [r.message for r in loaded] == [r["message"] for r in saved["results"]]
