"""What the preflight shows in a terminal: a line per check, a silenceable progress line, no warning flood."""

from __future__ import annotations

import warnings

import pytest
import torch
import torch._dynamo.utils as dynamo_utils

from lightning_recipes.checks import CheckResult, Preflight, PreflightReport, SanityCheck, preflight
from lightning_recipes.cli.preflight import main
from lightning_recipes.testing import TinyClassifier, fast_trainer, random_classification_loader

LONG = (
    "the training loader yields 23 batch(es) per epoch; it serves all 10 classes at no less than their "
    "dataset share beyond noise (rarest class 8: 9.67% of the dataset, 9.67% of 1438 served samples). "
    "Read: 359 validation vs 1024 training samples."
)
WARNED = (
    "the training loader does not shuffle (SequentialSampler): every epoch sees the same order, which biases "
    "SGD if the data has any order. Try: DataLoader(shuffle=True)."
)


def _report() -> PreflightReport:
    return PreflightReport(
        [
            CheckResult("loader", "pass", LONG, seconds=0.1),
            CheckResult("data", "warn", WARNED, seconds=0.2),
            CheckResult("padding", "skip", "skipped: the batch does not say what is padding. Pass x."),
        ],
        seconds=0.3,
    )


def test_the_compact_report_is_one_line_per_check_and_details_only_for_warnings() -> None:
    lines = _report().render(width=80).splitlines()
    assert lines[0] == "Preflight OK: 1 pass, 1 warn, 0 fail, 1 skip (0.3 s)"
    assert lines[1].startswith("PASS loader ") and lines[1].endswith("…") and len(lines[1]) == 80
    assert "Read:" not in "\n".join(lines)  # a pass shows its first sentence only, cut to the width
    assert lines[2].startswith("WARN data ")
    words = [line.split()[2:] if i == 0 else line.split() for i, line in enumerate(lines[2:-1])]
    warned = " ".join(" ".join(w) for w in words)
    assert warned == WARNED  # the whole message of a warning, wrapped
    assert lines[-1] == "SKIP padding skipped: the batch does not say what is padding."
    assert all(len(line) <= 80 for line in lines)


def test_verbose_is_the_full_table_with_every_message_and_time() -> None:
    report = _report()
    text = report.render(verbose=True, width=100)
    flat = " ".join(text.replace("│", " ").split())
    assert "Read: 359 validation vs 1024 training samples." in flat and "slowest: data 0.2 s" in flat
    assert " time " in text and "0.1s" in text and max(len(line) for line in text.splitlines()) <= 100
    assert str(report) == report.render()  # print(report) is the compact form


def test_preflight_prints_compact_by_default_and_the_table_when_verbose(capsys, monkeypatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    kwargs = {"train_dataloaders": random_classification_loader(), "checks": ["data", "init_loss"]}
    report = preflight(TinyClassifier(), print_report=True, progress=False, **kwargs)
    compact = capsys.readouterr()
    assert compact.err == ""  # progress=False: nothing on stderr
    lines = [line.rstrip() for line in compact.out.splitlines()]
    assert lines == report.render(width=80).splitlines() and report["data"].status == "warn"
    assert len(lines) >= 1 + 2  # the headline, a line per check (a long warning wraps)
    assert all(len(line) <= 80 for line in lines)
    preflight(TinyClassifier(), print_report=True, progress=False, verbose=True, **kwargs)
    verbose = capsys.readouterr().out
    assert "┃ check" in verbose and len(verbose.splitlines()) > len(compact.out.splitlines())


def test_progress_draws_one_line_on_a_terminal_and_nothing_when_off(capsys, monkeypatch) -> None:
    monkeypatch.setenv("TTY_COMPATIBLE", "1")  # rich treats stderr as a terminal
    kwargs = {"train_dataloaders": random_classification_loader(), "checks": ["data", "init_loss"]}
    preflight(TinyClassifier(), progress=True, **kwargs)
    drawn = capsys.readouterr()
    assert drawn.out == "" and "preflight" in drawn.err and "2/2" in drawn.err  # advanced to the end
    assert "init_loss" in drawn.err and "\x1b[" in drawn.err  # redrawn in place, then erased
    preflight(TinyClassifier(), progress=False, **kwargs)
    assert capsys.readouterr() == ("", "")
    monkeypatch.setenv("TTY_COMPATIBLE", "0")  # a pipe or a file: progress=True draws nothing either
    preflight(TinyClassifier(), progress=True, **kwargs)
    assert capsys.readouterr().err == ""


def test_inside_fit_the_progress_line_follows_enable_progress_bar(capsys, monkeypatch) -> None:
    monkeypatch.setenv("TTY_COMPATIBLE", "1")
    callback = Preflight(checks=["init_loss"], print_report=False)
    fast_trainer(max_steps=1, callbacks=[callback]).fit(TinyClassifier(), random_classification_loader())
    assert callback.report is not None and "preflight" not in capsys.readouterr().err  # no progress bar


class _CompiledClassifier(TinyClassifier):
    def __init__(self) -> None:
        super().__init__()
        self.hidden = torch.compile(self.hidden, backend="eager")  # dynamo traces; no C++ compile


def test_a_compiled_model_gets_no_global_hook_no_warning_flood_and_no_graph_break() -> None:
    torch._dynamo.reset()
    dynamo_utils.counters.clear()
    model = _CompiledClassifier()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        report = preflight(
            model,
            train_dataloaders=random_classification_loader(),
            checks=["init_loss", "grad_flow"],
            progress=False,
        )
    assert report.ok, report.render(verbose=True)
    messages = [str(w.message) for w in caught]
    assert not [m for m in messages if "global hooks" in m or "recompile" in m], messages[:3]
    assert len(messages) <= 3, messages
    assert sum(dynamo_utils.counters["graph_break"].values()) == 0, dict(dynamo_utils.counters["graph_break"])
    # the checks run the copies eagerly: dynamo compiles no frame
    assert not dynamo_utils.counters["frames"], dict(dynamo_utils.counters["frames"])
    assert not torch.nn.modules.module._global_forward_pre_hooks  # nothing process-wide left behind
    assert all(not m._forward_pre_hooks for m in model.modules())  # the per-module hooks were removed


@pytest.mark.parametrize("how", ["in_place", "whole"])
def test_a_model_compiled_in_place_or_whole_is_checked_as_the_module_itself(how: str) -> None:
    """A module compiled in place (``module.compile()``) or whole (``torch.compile``) is checked as itself."""
    torch._dynamo.reset()
    dynamo_utils.counters.clear()
    model = TinyClassifier()
    if how == "in_place":
        model.compile(backend="eager")
    compiled = torch.compile(model, backend="eager") if how == "whole" else model
    report = preflight(
        compiled,  # type: ignore[arg-type]
        train_dataloaders=random_classification_loader(),
        checks=["grad_flow", "overfit_batch"],
        progress=False,
    )
    assert report.ok and report["grad_flow"].status == "pass", report.render(verbose=True)
    assert not dynamo_utils.counters["frames"], dict(dynamo_utils.counters["frames"])


def test_the_hard_stop_still_ends_a_check_on_a_compiled_model(clock) -> None:
    class Stubborn(SanityCheck):
        name = "stubborn"

        def check(
            self, context
        ):  # never asks the budget; runs copies of the model, 10 ms each, until stopped
            copy, x = context.copy_model(), torch.randn(2, 16)
            for _ in range(10**4):
                copy(x)
                clock.sleep(0.01)
            return CheckResult(self.name, "pass", "ran to the end")

    torch._dynamo.reset()
    loader = random_classification_loader()
    report = preflight(_CompiledClassifier(), train_dataloaders=loader, checks=[Stubborn(time_budget=0.05)])
    stopped = report["stubborn"]
    assert stopped.status == "inconclusive" and stopped.details["stopped_by_budget"] is True
    assert stopped.seconds < 4.0  # the hard limit of a 0.05 s budget is 2.05 s


@pytest.mark.parametrize("width", [80])
def test_memory_and_speed_tables_fit_the_terminal(capsys, monkeypatch, width: int) -> None:
    from rich.console import Console

    from lightning_recipes.cli.memory import main as memory_main
    from lightning_recipes.tune import SpeedRow, SpeedTuneResult

    monkeypatch.setenv("COLUMNS", str(width))
    assert memory_main(["--num-params", "7B", "--devices", "8"]) == 0
    out = capsys.readouterr().out
    assert "7,000,000,000" in out and max(len(line) for line in out.splitlines()) <= width
    rows = [
        SpeedRow("baseline", "ok", step_ms=5.0, baseline_step_ms=5.0, speedup=1.0, first_step_ms=120.0),
        SpeedRow(
            "activation_checkpointing",
            "not faster for this run: pays after 5000 steps",
            step_ms=4.0,
            baseline_step_ms=5.0,
            speedup=1.25,
            one_off_s=2.5,
            loss_deviation=1.2e-5,
            loss_rtol=1e-3,
            activation_mb=12.5,
            step_peak_mb=40.25,
        ),
    ]
    Console().print(SpeedTuneResult(rows, ["activation_checkpointing"], run_steps=1000))
    out = capsys.readouterr().out
    assert max(len(line) for line in out.splitlines()) <= width
    for shown in ("activation_checkpointing", "1.25", "40.25", "1.20e-05", "pays after 5000 steps"):
        assert shown in " ".join(out.split()), out


def test_the_preflight_command_is_compact_unless_verbose(capsys, monkeypatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    args = [
        "--model=lightning_recipes.testing.TinyClassifier",
        "--data=lightning_recipes.data.DigitsDataModule",
        "--model.in_features=64",
        "--model.num_classes=10",
        "--data.flatten=true",
        "--checks=[init_loss]",
    ]
    assert main(args) == 0
    compact = capsys.readouterr()
    assert compact.out.splitlines()[1].startswith("PASS init_loss loss at init")
    assert len(compact.out.splitlines()) == 2 and compact.err == ""  # stderr is no terminal: no progress
    assert main([*args, "--verbose"]) == 0
    verbose = capsys.readouterr().out
    assert "┃ check" in verbose and "init_loss" in verbose and "PASS" in verbose
    assert max(len(line) for line in verbose.splitlines()) <= 80
