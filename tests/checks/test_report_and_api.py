"""PreflightReport, CheckResult, argument validation, the public import paths, and the batch/shape helpers."""

from __future__ import annotations

import importlib
import importlib.machinery
import json
import math

import pytest
import torch

from lightning_recipes.checks import (
    CHECKS,
    CheckContext,
    CheckResult,
    InitLossCheck,
    Preflight,
    PreflightError,
    PreflightReport,
    SanityCheck,
    perturbed,
    preflight,
)
from lightning_recipes.checks._num_classes import infer_num_classes
from lightning_recipes.harness.batches import replace_inputs, slice_batch, split_batch
from lightning_recipes.testing import fast_trainer

from . import _models as M


@pytest.fixture(scope="module")
def report() -> PreflightReport:
    return preflight(
        M.SumReduction(), train_dataloaders=M.loader(), checks=["data", "init_loss", "grad_flow"]
    )


def test_report_api(report):
    assert not report.ok
    assert [r.name for r in report] == ["data", "init_loss", "grad_flow"]
    assert report["init_loss"].status == "fail" and report["data"].status == "pass"
    assert "init_loss" in report and "overfit_batch" not in report and len(report) == 3
    assert report[1] is report["init_loss"] and report[-1].name == "grad_flow"
    assert [r.name for r in report.failures] == ["init_loss"] and report.warnings == []
    with pytest.raises(KeyError, match="no check named 'nope'"):
        report["nope"]
    assert repr(report) == "PreflightReport(ok=False, pass=2, warn=0, fail=1, skip=0)"


def test_report_json_round_trip(report):
    data = json.loads(report.to_json())
    counts = {"pass": 2, "warn": 0, "fail": 1, "inconclusive": 0, "skip": 0, "error": 0}  # issue #24: 6
    assert data["ok"] is False and data["counts"] == counts
    init = data["results"][1]
    assert init["name"] == "init_loss" and init["status"] == "fail"
    assert init["details"]["expected"] == pytest.approx(math.log(4))
    assert PreflightReport.from_dict(data).to_dict() == report.to_dict()


def test_report_prints_a_table_with_every_check(report):
    text = " ".join(str(report).split())  # the compact lines wrap at the terminal's width
    assert "Preflight FAILED: 2 pass, 0 warn, 1 fail, 0 skip (" in text
    for name in ("data", "init_loss", "grad_flow", "FAIL", "PASS", "summed instead of averaged"):
        assert name in text


def test_raise_for_failures_lists_failures(report):
    with pytest.raises(PreflightError, match="1 preflight check") as info:
        report.raise_for_failures()
    assert [r.name for r in info.value.results] == ["init_loss"]


def test_check_result_validates_status_and_serialises_non_finite():
    with pytest.raises(ValueError, match="`status` must be one of"):
        CheckResult("x", "ok", "")  # type: ignore[arg-type]
    record = CheckResult("x", "fail", "m", {"v": math.nan, "t": torch.tensor([1.0])}).to_dict()
    assert record["details"] == {"v": "nan", "t": [1.0]}


def test_preflight_requires_training_data_and_a_lightning_module():
    with pytest.raises(ValueError, match="needs training data"):
        preflight(M.MLP())
    with pytest.raises(TypeError, match="`model` must be a LightningModule"):
        CheckContext(torch.nn.Linear(2, 2), M.loader())  # type: ignore[arg-type]


def test_registry_order():
    order = "loader data split_overlap loss init_loss schedule grad_flow batch_independence padding eval_mode"
    order += " causality target_leakage optimization validation_path overfit_batch input_independence"
    order += " training_pairs"
    assert list(CHECKS) == order.split()


@pytest.mark.parametrize(
    ("output", "targets", "expected"),
    [
        (torch.zeros(4, 10), torch.zeros(4, dtype=torch.long), 10),  # [B, C]
        (torch.zeros(2, 8, 32), torch.zeros(2, 8, dtype=torch.long), 32),  # [B, S, V]
        (torch.zeros(2, 5, 6, 6), torch.zeros(2, 6, 6, dtype=torch.long), 5),  # segmentation [B, C, H, W]
        (torch.zeros(16, 32), torch.zeros(2, 8, dtype=torch.long), 32),  # flattened [B*S, V]
        (torch.zeros(4, 3), torch.full((4, 3), 1 / 3), 3),  # soft targets
        (torch.zeros(4), torch.zeros(4), None),  # regression
        (torch.zeros(4, 1), torch.zeros(4, 1), None),  # binary / regression: ambiguous
        (torch.zeros(4, 3), torch.rand(4, 3) + 1, None),  # float targets that are not distributions
    ],
)
def test_infer_num_classes(output, targets, expected):
    inferred = infer_num_classes(output, targets)
    assert (inferred[0] if inferred else None) == expected


def test_batch_helpers_keep_containers_and_do_not_mutate():
    x, y = torch.ones(4, 3), torch.arange(4)
    batch = {"input_ids": x, "labels": y, "meta": "keep"}
    inputs, targets = split_batch(batch)
    assert inputs is x and targets is y
    new = replace_inputs(batch, torch.zeros(4, 3))
    assert new["meta"] == "keep" and float(new["input_ids"].sum()) == 0
    assert float(batch["input_ids"].sum()) == 12
    assert split_batch((x, torch.zeros(4), y), target_key=1)[1].dtype == torch.float32
    assert split_batch([x, y], input_key=1)[0] is y
    sliced = slice_batch([x, y], 2, 4)
    assert isinstance(sliced, list) and sliced[0].shape == (2, 3) and sliced[1].shape == (2,)
    beside = [x, y, torch.zeros(2)]  # not one row per sample (an edge list's layout): cutting rows breaks it
    assert slice_batch(beside, 2, 4) is beside


def test_custom_check_plugs_into_preflight():
    class LossBelowTen(SanityCheck):
        name = "loss_below_10"

        def check(self, context):
            model = context.copy_model()
            loss = float(context.training_loss(model, context.train_batches(1)[0]))
            status = "pass" if loss < 10 else "fail"
            return CheckResult(self.name, status, f"loss {loss:.3g}", {"measured": loss})

    report = preflight(M.MLP(), train_dataloaders=M.loader(), checks=["data", LossBelowTen()])
    assert [r.name for r in report] == ["data", "loss_below_10"] and report.ok
    report = preflight(M.SumReduction(), train_dataloaders=M.loader(), checks=[LossBelowTen()])
    assert report["loss_below_10"].status == "fail"


def test_user_code_that_raises_on_a_perturbed_input_makes_the_check_abstain_not_error():
    """#34: user code raising on a perturbed input: `inconclusive`; outside `perturbed`: an `error`."""

    class ZeroedInputs(SanityCheck):
        name = "zeroed"

        def __init__(self, guarded: bool) -> None:
            super().__init__()
            self.guarded = guarded

        def check(self, context):
            model = context.copy_model()
            x, _y = context.train_batches(1)[0]

            def run() -> None:
                if not x.mul(0).abs().sum().gt(0):  # what a user's packing code does on all-zero lengths
                    raise RuntimeError("Length of all samples has to be greater than 0")

            if self.guarded:
                with perturbed("zeroed inputs"):
                    run()
            else:
                run()
            return CheckResult(self.name, "pass", "unreachable", {"model": type(model).__name__})

    checks = [[ZeroedInputs(True)], [ZeroedInputs(False)]]
    guarded, unguarded = (
        preflight(M.MLP(), train_dataloaders=M.loader(), checks=c)["zeroed"] for c in checks
    )
    assert guarded.status == "inconclusive"
    assert "RuntimeError on zeroed inputs" in guarded.details["abstained"]
    assert unguarded.status == "error"


def test_a_result_is_a_summary_evidence_and_one_action():
    summary = "loss 4.1 at init, expected 2.30"
    result = CheckResult("init_loss", "fail", summary, {"measured": 4.1}, action="Fix it.")
    record = result.to_dict()
    assert (record["summary"], record["action"], record["details"]) == (summary, "Fix it.", {"measured": 4.1})
    assert record["message"] == f"{summary}. Fix it." and record["guide"].endswith("#init_loss")
    assert CheckResult.from_dict(record) == result


@pytest.mark.gpu
def test_preflight_on_cuda_with_mixed_precision(tmp_path):
    """On a GPU: copies and batches live on CUDA, autocast reaches the checks, the report passes."""
    report = preflight(M.MLP().cuda(), train_dataloaders=M.loader())
    assert report.ok, report
    preflight_cb = Preflight(print_report=False)
    settings = {"accelerator": "cuda", "precision": "16-mixed", "default_root_dir": tmp_path}
    trainer = fast_trainer(max_steps=2, callbacks=[preflight_cb], **settings)
    trainer.fit(M.MLP(), M.loader())
    assert preflight_cb.report.ok, preflight_cb.report


def test_copies_share_data_the_module_refers_to_instead_of_duplicating_it():
    loader = M.loader()
    model = M.MLP()
    model.held_loader = loader  # some modules keep a reference to their data
    copy = CheckContext(model, loader).copy_model()
    assert copy.held_loader is loader
    assert copy.net[0].weight is not model.net[0].weight
    assert torch.equal(copy.net[0].weight, model.net[0].weight)


def test_init_loss_infers_classes_when_training_step_calls_a_submodule():
    class CallsNet(M.MLP):
        def training_step(self, batch, batch_idx):
            x, y = batch
            return self.loss(self.net(x), y)  # never calls self(x)

    result = InitLossCheck().run(CheckContext(CallsNet(), M.loader()))
    assert result.status == "pass" and result.details["num_classes"] == 4


def test_num_threads_applies_during_the_checks_and_is_restored():
    seen: list[int] = []

    class Spy(M.MLP):
        def forward(self, x):
            seen.append(torch.get_num_threads())
            return super().forward(x)

    torch.set_num_threads(2)
    preflight(Spy(), train_dataloaders=M.loader(), checks=["init_loss"], num_threads=1)
    assert seen and set(seen) == {1}
    assert torch.get_num_threads() == 2


@pytest.mark.parametrize(
    ("module", "name"),
    [("lightning_recipes", n) for n in ("preflight", "Preflight", "SanityCheck", "InitLossCheck")]
    + [("lightning_recipes.callbacks", n) for n in ("Preflight", "InitLossCheck")],
)
def test_the_public_names_are_the_checks_wing_objects(module, name):
    checks = importlib.import_module("lightning_recipes.checks")
    assert getattr(importlib.import_module(module), name) is getattr(checks, name)


def test_lightning_recipes_preflight_is_the_function_and_no_module_shadows_it():
    import lightning_recipes
    from lightning_recipes import preflight as imported

    assert lightning_recipes.preflight is imported is preflight and callable(imported)
    # no submodule of that name (it would rebind the attribute), searched in the package's own folder
    finder = importlib.machinery.PathFinder
    found = finder.find_spec("lightning_recipes.preflight", lightning_recipes.__path__)
    assert found is None
