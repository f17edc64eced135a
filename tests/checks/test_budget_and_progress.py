"""The per-check time budget (a soft deadline loops ask, a hard stop for those that don't), progress lines."""

from __future__ import annotations

import logging
import sys
import time
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import pytest
import torch
from lightning.pytorch.callbacks import Callback
from torch import nn

from lightning_recipes.checks import (
    CheckContext,
    CheckResult,
    Preflight,
    SanityCheck,
    _budget,
    _runner,
    preflight,
)
from lightning_recipes.checks import base as _base
from lightning_recipes.checks._budget import (
    BudgetExceeded,
    budget_seconds,
    hard_limit,
    out_of_time,
    time_budget,
)
from lightning_recipes.testing import TinyClassifier, fast_trainer, random_classification_loader
from tests.helpers.speed import VirtualTime

from . import _models as M


class CooperativeCheck(SanityCheck):
    """Loops over forward passes, asks ``out_of_time()`` each time, says where the budget stopped it."""

    name = "cooperative"

    def __init__(self, iterations: int = 10**7, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.iterations = iterations
        self.done = 0

    def check(self, context: CheckContext) -> CheckResult:
        layer = nn.Linear(4, 4)
        x = torch.randn(2, 4)
        for done in range(1, self.iterations + 1):
            self.done = done
            layer(x)
            if out_of_time():
                message = f"the {budget_seconds():g} s time budget stopped it after {self.done} iterations"
                return CheckResult(self.name, "warn", message)
        return CheckResult(self.name, "pass", f"{self.done} iterations")


class StubbornCheck(SanityCheck):
    """Never asks the budget: forwards of 10 ms each (on the ``clock``), far longer than any budget here."""

    name = "stubborn"

    def __init__(self) -> None:
        super().__init__()
        self.done = 0

    def check(self, context: CheckContext) -> CheckResult:
        layer = nn.Linear(4, 4)
        x = torch.randn(2, 4)
        for done in range(1, 10**4):
            self.done = done
            layer(x)
            time.sleep(0.01)
        return CheckResult(self.name, "pass", "ran to the end")


class SleepyCheck(SanityCheck):
    """Sleeps past its hard limit without a module forward (nothing can stop it), then passes."""

    name = "sleepy"

    def check(self, context: CheckContext) -> CheckResult:
        time.sleep(hard_limit(0.05) + 0.2)
        return CheckResult(self.name, "pass", "slept")


def _data() -> dict[str, object]:
    return {"train_dataloaders": M.loader(n=64)}


def _tiny(**kwargs: Any) -> Any:
    """``preflight`` of a ``TinyClassifier`` on its random classification data."""
    return preflight(TinyClassifier(), train_dataloaders=random_classification_loader(), **kwargs)


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda: CooperativeCheck(time_budget=0), "`time_budget` must be a finite number > 0, got 0."),
        (lambda: CooperativeCheck(time_budget=-1.0), "`time_budget` must be a finite number > 0"),
        (
            lambda: CooperativeCheck(time_budget="fast"),
            "`time_budget` must be a positive number of seconds, None .unlimited. or \"default\", got 'fast'",
        ),
        (lambda: CooperativeCheck(time_budget=True), "`time_budget` must be a positive number"),
        (lambda: Preflight(time_budget=0.0), "`time_budget` must be a finite number > 0"),
        (
            lambda: Preflight(time_budget="default"),
            "`time_budget` must be a positive number of seconds, None .unlimited., got 'default'",
        ),
        (lambda: preflight(M.MLP(), **_data(), time_budget=-2), "`time_budget` must be a finite number > 0"),
        (lambda: preflight(M.MLP(), **_data(), total_time_budget=0), "`total_time_budget`"),
        (lambda: Preflight(total_time_budget=-1.0), "`total_time_budget`"),
        (lambda: Preflight(progress="yes"), "`progress` must be True or False"),  # a TypeError
        (lambda: preflight(M.MLP(), **_data(), progress=1), "`progress` must be True or False"),
    ],
)
def test_time_budget_and_progress_are_validated_before_any_work(make, match):
    with pytest.raises(TypeError if "`progress`" in match else ValueError, match=match):
        make()


def test_a_cooperative_check_ends_at_its_budget_and_says_so():
    check = CooperativeCheck()
    report = preflight(M.MLP(), **_data(), checks=[check], time_budget=0.3, progress=False)
    result = report["cooperative"]
    assert result.status == "warn" and "0.3 s time budget stopped it" in result.message
    assert 0 < check.done < check.iterations
    assert result.seconds < hard_limit(0.3)  # ended by itself, not by the hard stop
    assert "over_budget_s" not in result.details and "stopped_by_budget" not in result.details


def test_a_check_that_ignores_its_budget_is_stopped_at_the_hard_limit_inconclusive(clock):
    check = StubbornCheck()
    model, data = M.MLP(), _data()
    hooks_before = len(nn.modules.module._global_forward_pre_hooks)
    rng_before = torch.get_rng_state()
    report = preflight(model, **data, checks=[check, "init_loss"], time_budget=0.1, progress=False)
    result = report["stubborn"]
    assert result.status == "inconclusive" and result.details["stopped_by_budget"] is True
    assert result.details["time_budget_s"] == 0.1 and "safety cap" in result.summary
    assert "time_budget=" in result.action
    assert 0 < check.done < 10**4 - 1
    assert result.seconds >= hard_limit(0.1)
    assert report.ok and report["init_loss"].status == "pass"  # the next check runs normally
    assert len(nn.modules.module._global_forward_pre_hooks) == hooks_before
    assert torch.equal(rng_before, torch.get_rng_state())
    nn.Linear(2, 2)(torch.zeros(1, 2))


def test_a_check_that_overruns_without_a_forward_keeps_its_status_and_says_by_how_much(clock):
    report = preflight(M.MLP(), **_data(), checks=[SleepyCheck(time_budget=0.05)], progress=False)
    result = report["sleepy"]
    assert result.status == "pass"
    assert result.details["over_budget_s"] > hard_limit(0.05) - 0.05
    assert result.summary == "slept"  # its own verdict; the overrun is evidence, not a rewrite of it


def test_a_check_budget_overrides_the_preflight_default():
    unlimited = CooperativeCheck(iterations=300, time_budget=None)
    own = CooperativeCheck(iterations=10**7, time_budget=0.2)
    own.name = "own"  # type: ignore[misc]
    report = preflight(M.MLP(), **_data(), checks=[unlimited, own], time_budget=1e-6, progress=False)
    assert report["cooperative"].status == "pass" and unlimited.done == 300
    assert report["own"].status == "warn" and "0.2 s time budget" in report["own"].message


def test_no_budget_means_no_deadline():
    check = CooperativeCheck(iterations=50)
    report = preflight(M.MLP(), **_data(), checks=[check], time_budget=None, progress=False)
    assert report["cooperative"].status == "pass"


def test_the_hard_stop_applies_only_to_the_thread_that_opened_the_budget(clock):
    import threading

    errors: list[BaseException] = []

    def other_thread() -> None:
        try:
            nn.Linear(2, 2)(torch.zeros(1, 2))
        except BaseException as err:
            errors.append(err)

    with time_budget(0.0):
        time.sleep(hard_limit(0.0) + 0.05)
        worker = threading.Thread(target=other_thread)
        worker.start()
        worker.join()
        with pytest.raises(BudgetExceeded, match=r"hard limit of its 0\.0 s time budget"):
            nn.Linear(2, 2)(torch.zeros(1, 2))
    assert errors == []


def test_progress_lines_name_each_check_its_status_and_seconds(caplog):
    with caplog.at_level(logging.DEBUG, logger="lightning.pytorch"):
        report = _tiny(checks=["data", "init_loss"])
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("preflight [")]
    assert lines == [
        "preflight [1/2] data: running (budget 30 s)",
        f"preflight [1/2] data: {report['data'].status.upper()} in {report['data'].seconds:.1f} s",
        "preflight [2/2] init_loss: running (budget 30 s)",
        f"preflight [2/2] init_loss: PASS in {report['init_loss'].seconds:.1f} s",
    ]


def test_progress_can_be_switched_off(caplog):
    with caplog.at_level(logging.DEBUG, logger="lightning.pytorch"):
        _tiny(checks=["data"], progress=False)
    assert not [r for r in caplog.records if r.getMessage().startswith("preflight [")]


def test_the_callback_logs_progress_and_applies_its_budget(caplog, clock):
    callback = Preflight(checks=[StubbornCheck(), "init_loss"], time_budget=0.1, print_report=False)
    with caplog.at_level(logging.DEBUG, logger="lightning.pytorch"):
        fast_trainer(max_steps=1, callbacks=[callback]).fit(TinyClassifier(), random_classification_loader())
    assert callback.report is not None
    stubborn, init_loss = callback.report["stubborn"], callback.report["init_loss"]
    assert stubborn.status == "inconclusive" and init_loss.status == "pass"  # was "skip" before issue #24
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("preflight [")]
    assert lines[0] == "preflight [1/2] stubborn: running (budget 0.1 s)"
    assert lines[1].startswith("preflight [1/2] stubborn: INCONCLUSIVE in ")
    assert lines[1].endswith("(over its 0.1 s budget)")
    assert callback.report.to_dict()["results"][0]["seconds"] >= hard_limit(0.1) - 1e-3


def test_a_check_callback_on_its_own_gets_the_default_budget(caplog):
    check = CooperativeCheck(iterations=20)
    with caplog.at_level(logging.DEBUG, logger="lightning.pytorch"):
        fast_trainer(max_steps=1, callbacks=[check]).fit(TinyClassifier(), random_classification_loader())
    assert check.result is not None and check.result.status == "pass"
    assert "preflight [1/1] cooperative: running (budget 30 s)" in caplog.text


def test_per_check_seconds_are_in_the_table_and_in_to_dict():
    report = _tiny(checks=["data", CooperativeCheck(iterations=2000)], progress=False)
    data = report.to_dict()
    seconds = [r["seconds"] for r in data["results"]]
    assert all(s > 0 for s in seconds) and data["seconds"] >= sum(seconds) - 1e-3
    text = report.render(verbose=True)  # issue #26: the times are in the verbose table
    assert " time " in text  # the column header
    for result in report:
        assert f"{result.seconds:.1f}s" in text


class StubbornOnRankOne(SanityCheck):
    """Ignores its budget on rank 1 only (module level: the DDP test forks)."""

    name = "stubborn_on_rank_one"

    def check(self, context: CheckContext) -> CheckResult:
        assert context.trainer is not None
        if context.trainer.global_rank == 1:
            layer, x = nn.Linear(4, 4), torch.randn(2, 4)
            for _ in range(10**8):
                layer(x)
        return CheckResult(self.name, "pass", "done")


class ReportWriter(Callback):
    """Writes each rank's preflight statuses after training (module level: the DDP test forks)."""

    def __init__(self, flight: Preflight, out: Path) -> None:
        self.flight, self.out = flight, out

    def on_train_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        assert self.flight.report is not None
        statuses = {r.name: r.status for r in self.flight.report}
        (self.out / f"rank{trainer.global_rank}.txt").write_text(repr((statuses, trainer.global_step)))


def test_ddp_a_check_stopped_by_its_budget_on_one_rank_does_not_block_the_others(tmp_path):
    flight = Preflight(checks=[StubbornOnRankOne(), "init_loss"], time_budget=0.1, print_report=False)
    callbacks = [flight, ReportWriter(flight, tmp_path)]
    trainer = fast_trainer(max_steps=2, strategy="ddp_fork", devices=2, callbacks=callbacks)
    trainer.fit(M.MLP(), M.loader())
    outcomes = {path.name: path.read_text() for path in tmp_path.glob("rank*.txt")}
    assert outcomes == {
        "rank0.txt": repr(({"stubborn_on_rank_one": "pass", "init_loss": "pass"}, 2)),
        "rank1.txt": repr(({"stubborn_on_rank_one": "inconclusive", "init_loss": "pass"}, 2)),  # was skip
    }


class _WaitsForItsBudget(SanityCheck):
    """Runs until its budget is spent (a check with a long loop that asks the budget), recording it."""

    def check(self, context: CheckContext) -> CheckResult:
        while not out_of_time():
            time.sleep(0.01)
        return CheckResult(self.name, "warn", "stopped by its budget", {"budget": budget_seconds()})


def _waiting_checks(count: int) -> list[SanityCheck]:
    return [type(f"Wait{i}", (_WaitsForItsBudget,), {"name": f"wait_{i}"})() for i in range(count)]


def test_the_total_budget_caps_the_whole_preflight_and_keeps_time_for_the_checks_still_to_come(clock):
    report = _tiny(checks=_waiting_checks(4), time_budget=8.0, total_time_budget=4.0, progress=False)
    budgets = [r.details["budget"] for r in report]
    # first: 4 s less 0.5 s for each of the 3 checks to come; then what is left; never below 1 s
    assert budgets[0] == pytest.approx(2.5, abs=0.05)
    assert all(b == pytest.approx(1.0, abs=0.05) for b in budgets[1:]), budgets
    assert report.seconds < 4.0 + 3 * 0.5 + 1.0


def test_a_check_with_its_own_budget_keeps_it_under_the_total(clock):
    (check,) = _waiting_checks(1)
    check.time_budget = 1.5
    report = _tiny(checks=[check], time_budget=8.0, total_time_budget=1.0, progress=False)
    assert report.results[0].details["budget"] == pytest.approx(1.5)


class WaitingClock(VirtualTime):
    """Sleep advances the wall clock only: the checking thread waits (a busy machine) without computing."""

    def __init__(self) -> None:
        super().__init__()
        self.cpu = 1000.0

    def thread_time(self) -> float:
        return self.cpu


def test_waiting_does_not_spend_the_cpu_cap_only_the_wall_clock_backstop(monkeypatch):
    waiting = WaitingClock()
    for module in (_budget, _runner, _base, sys.modules[__name__]):
        monkeypatch.setattr(module, "time", waiting, raising=False)
    check = StubbornCheck()
    result = preflight(M.MLP(), **_data(), checks=[check], time_budget=0.1, progress=False)["stubborn"]
    assert result.status == "inconclusive" and result.details["stopped_by_budget"] is True
    assert check.done * 0.01 >= _budget.WALL_FACTOR * hard_limit(0.1) - 0.011  # not at the 2.1 s CPU cap
