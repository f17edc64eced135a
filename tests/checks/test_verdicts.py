"""Verdicts that can be trusted: "could not run" is never "OK"."""

from __future__ import annotations

import lightning.pytorch as pl
import pytest

from lightning_recipes.checks import (
    CheckContext,
    CheckResult,
    CheckSkipped,
    InitLossCheck,
    Preflight,
    PreflightError,
    PreflightReport,
    SanityCheck,
    preflight,
)
from lightning_recipes.testing import TinyClassifier, fast_trainer, random_classification_loader


class RaisesIndexError(SanityCheck):
    name = "raises_index_error"

    def check(self, context: CheckContext) -> CheckResult:
        return [][3]  # an internal bug of a check


class DoesNotApply(SanityCheck):
    name = "does_not_apply"

    def check(self, context: CheckContext) -> CheckResult:
        raise CheckSkipped("this model has no next-token head")


class Passes(SanityCheck):
    name = "passes"

    def check(self, context: CheckContext) -> CheckResult:
        return CheckResult(self.name, "pass", "fine")


class NeedsATrainer(TinyClassifier):
    def training_step(self, batch, batch_idx):
        x, y = batch
        return self.trainer.lightning_module.loss(self(x), y)  # fails on a copy with no Trainer


def _run(*checks: SanityCheck, model: pl.LightningModule | None = None) -> PreflightReport:
    return preflight(
        model or TinyClassifier(),
        train_dataloaders=random_classification_loader(),
        checks=list(checks),
        progress=False,
    )


def test_an_exception_in_a_check_is_a_visible_error_not_a_skip():
    report = _run(RaisesIndexError(), Passes())
    result = report["raises_index_error"]
    assert result.status == "error"
    assert "IndexError" in result.summary and result.action
    assert result.details["error"] == "IndexError: list index out of range"
    assert "test_verdicts.py" in result.details["where"]  # where it was raised
    assert not report.ok and report.errors == [result]
    assert report.not_ok_reason == "1 check(s) raised an error: raises_index_error"
    with pytest.raises(PreflightError, match="raises_index_error"):
        report.raise_for_failures()


def test_user_code_raising_on_the_copy_makes_the_check_abstain_not_error():
    """User code raising on a copy outside the Trainer: ``inconclusive``, saying where and what to do."""
    report = _run(Passes(), model=NeedsATrainer())
    assert report.ok  # the check that does not run user code judged the model
    result = _run(InitLossCheck(), model=NeedsATrainer())["init_loss"]
    assert result.status == "inconclusive", result.message
    assert result.details["where"] and "test_verdicts.py" in result.summary
    assert "self.trainer" in result.action and len(result.summary) <= 120


def test_a_report_where_nothing_judged_the_model_is_not_ok():
    report = _run(DoesNotApply())
    assert report["does_not_apply"].status == "skip"
    assert not report.ok
    assert report.not_ok_reason == "no check could judge the model (1 skip): nothing was verified"
    with pytest.raises(PreflightError, match="nothing was verified"):
        report.raise_for_failures()
    assert "NOT JUDGED" in str(report)


def test_inconclusive_and_skip_next_to_a_verdict_leave_the_report_ok():
    report = PreflightReport(
        [
            CheckResult("a", "pass", ""),
            CheckResult("b", "inconclusive", "within noise"),
            CheckResult("c", "skip", "n/a"),
        ]
    )
    assert report.ok and report.not_ok_reason is None
    assert report.counts() == {"pass": 1, "warn": 0, "fail": 0, "inconclusive": 1, "skip": 1, "error": 0}
    assert repr(report) == "PreflightReport(ok=True, pass=1, warn=0, fail=0, inconclusive=1, skip=1)"


def test_the_report_names_its_slowest_check():
    report = PreflightReport(
        [CheckResult("a", "pass", "", seconds=0.2), CheckResult("b", "pass", "", seconds=3.0)]
    )
    assert report.slowest is not None and report.slowest.name == "b"
    assert report.to_dict()["slowest"] == "b"
    assert "slowest: b 3.0 s" in " ".join(report.render(verbose=True).split())


def test_the_unknown_status_is_refused():
    with pytest.raises(ValueError, match="inconclusive"):
        CheckResult("a", "maybe", "")  # type: ignore[arg-type]


def test_in_a_trainer_an_error_warns_and_the_fit_goes_on(tmp_path):
    callback = Preflight(checks=[RaisesIndexError(), Passes()], on_fail="raise", progress=False)
    trainer = fast_trainer(max_steps=2, default_root_dir=tmp_path, callbacks=[callback])
    with pytest.warns(UserWarning, match="says nothing about the model"):
        trainer.fit(TinyClassifier(), random_classification_loader())
    assert trainer.global_step == 2
