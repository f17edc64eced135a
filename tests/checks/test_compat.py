"""The ``checks/`` move changed no behaviour: fixtures saved before it load and compare, and every old import
path keeps working."""

from __future__ import annotations

import importlib
import importlib.util
import json
from pathlib import Path

import pytest
import torch

import lightning_recipes
from lightning_recipes import checks
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
    assert fixtures.normalised(report.to_dict()) == saved
    assert PreflightReport.from_dict(saved).to_dict() == saved


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


OLD_PATHS = [
    ("lightning_recipes.preflight", "preflight", checks.preflight),
    ("lightning_recipes.preflight", "Preflight", checks.Preflight),
    ("lightning_recipes.preflight", "CheckContext", checks.CheckContext),
    ("lightning_recipes.preflight", "CheckResult", checks.CheckResult),
    ("lightning_recipes.preflight", "CheckSkipped", checks.CheckSkipped),
    ("lightning_recipes.preflight", "PreflightError", checks.PreflightError),
    ("lightning_recipes.preflight", "PreflightReport", checks.PreflightReport),
    ("lightning_recipes.preflight", "SanityCheck", checks.SanityCheck),
    ("lightning_recipes.preflight", "CHECKS", checks.CHECKS),
    ("lightning_recipes.preflight_cli", "main", importlib.import_module("lightning_recipes.checks.cli").main),
    ("lightning_recipes.callbacks.preflight_callback", "Preflight", checks.Preflight),
    ("lightning_recipes.callbacks.data_check", "DataCheck", checks.DataCheck),
    ("lightning_recipes.callbacks.init_loss_check", "InitLossCheck", checks.InitLossCheck),
    ("lightning_recipes.callbacks.grad_flow_check", "GradFlowCheck", checks.GradFlowCheck),
    (
        "lightning_recipes.callbacks.batch_independence_check",
        "BatchIndependenceCheck",
        checks.BatchIndependenceCheck,
    ),
    ("lightning_recipes.callbacks.overfit_batch_check", "OverfitBatchCheck", checks.OverfitBatchCheck),
    (
        "lightning_recipes.callbacks.input_independence_check",
        "InputIndependenceCheck",
        checks.InputIndependenceCheck,
    ),
    ("lightning_recipes.callbacks", "InitLossCheck", checks.InitLossCheck),
    ("lightning_recipes.callbacks", "Preflight", checks.Preflight),
    ("lightning_recipes", "InitLossCheck", checks.InitLossCheck),
    ("lightning_recipes", "SanityCheck", checks.SanityCheck),
    ("lightning_recipes", "preflight", checks.preflight),
]


@pytest.mark.parametrize(("module", "name", "expected"), OLD_PATHS, ids=[f"{m}.{n}" for m, n, _ in OLD_PATHS])
def test_old_import_paths_keep_working(module, name, expected):
    assert getattr(importlib.import_module(module), name) is expected


def test_loading_the_old_module_does_not_rebind_the_function():
    importlib.import_module("lightning_recipes.preflight")
    assert lightning_recipes.preflight is checks.preflight and callable(lightning_recipes.preflight)


def test_the_cli_command_runs_the_new_module():
    from lightning_recipes.cli import COMMANDS

    assert COMMANDS["preflight"][0] == "lightning_recipes.checks.cli:main"
