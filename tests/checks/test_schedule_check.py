"""The ``schedule`` check: broken schedules fail, the common healthy ones pass."""

from __future__ import annotations

import math
from typing import Any

import lightning.pytorch as pl
import pytest
import torch
from torch.optim import lr_scheduler as schedulers

from lightning_recipes.checks import Preflight, preflight
from lightning_recipes.checks.loop.schedule_check import ScheduleCheck, judge_curve, lr_curves
from lightning_recipes.cli.preflight import main
from lightning_recipes.data import DigitsDataModule
from lightning_recipes.demos.model import RecipeDigitsCNN
from lightning_recipes.harness.schedulers import SchedulerConfig
from lightning_recipes.testing import TinyClassifier, fast_trainer, random_classification_loader

LOADER_BATCHES = 8  # random_classification_loader(): 256 samples / 32


class Scheduled(TinyClassifier):
    """TinyClassifier whose ``configure_optimizers`` is one of the named recipes below."""

    def __init__(self, recipe: str) -> None:
        super().__init__()
        self.recipe = recipe

    def configure_optimizers(self) -> Any:
        optimizer = torch.optim.SGD(self.parameters(), lr=0.1)
        return RECIPES[self.recipe](self, optimizer)


def _per_step(optimizer: torch.optim.Optimizer, scheduler: Any, **extra: Any) -> Any:
    """The ``configure_optimizers`` return that steps ``scheduler`` per optimizer step."""
    return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step", **extra}}


def _warmup_cosine(model: pl.LightningModule, optimizer: torch.optim.Optimizer) -> Any:
    total = int(model.trainer.estimated_stepping_batches)
    warmup = max(1, total // 10)

    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        return 0.5 * (1 + math.cos(math.pi * (step - warmup) / max(1, total - warmup)))

    return _per_step(optimizer, schedulers.LambdaLR(optimizer, factor))


def _one_cycle(model: pl.LightningModule, optimizer: torch.optim.Optimizer) -> Any:
    total = int(model.trainer.estimated_stepping_batches)
    return _per_step(optimizer, schedulers.OneCycleLR(optimizer, max_lr=0.1, total_steps=total))


def _multistep_per_epoch(model: pl.LightningModule, optimizer: torch.optim.Optimizer) -> Any:
    epochs = model.trainer.max_epochs
    return [optimizer], [schedulers.MultiStepLR(optimizer, [epochs // 2, 3 * epochs // 4])]


def _one_cycle_per_epoch(model: pl.LightningModule, optimizer: torch.optim.Optimizer) -> Any:
    """Sized in optimizer steps, returned as ``[optimizer], [scheduler]``: Lightning steps it per epoch."""
    return [optimizer], [_one_cycle(model, optimizer)["lr_scheduler"]["scheduler"]]


def _warmup_then_cosine(m: pl.LightningModule, o: torch.optim.Optimizer) -> Any:
    warmup = schedulers.LinearLR(o, start_factor=1e-4, total_iters=100)  # built first, as in the list
    cosine = schedulers.CosineAnnealingLR(o, T_max=int(m.trainer.estimated_stepping_batches) - 100)
    return _per_step(o, schedulers.SequentialLR(o, [warmup, cosine], milestones=[100]))


RECIPES = {
    # healthy
    "cosine_30_per_epoch": lambda m, o: ([o], [schedulers.CosineAnnealingLR(o, T_max=30)]),  # a fixed length
    "warmup_cosine_per_step": _warmup_cosine,
    "one_cycle": _one_cycle,
    "multistep_per_epoch": _multistep_per_epoch,
    "constant": lambda m, o: {"optimizer": o, "lr_scheduler": schedulers.LambdaLR(o, lambda s: 1.0)},
    "none": lambda m, o: o,
    "plateau": lambda m, o: {
        "optimizer": o,
        "lr_scheduler": {"scheduler": schedulers.ReduceLROnPlateau(o), "monitor": "val_loss"},
    },
    "warmup_from_1e-4_then_cosine": _warmup_then_cosine,
    "cosine_warm_restarts": lambda m, o: _per_step(o, schedulers.CosineAnnealingWarmRestarts(o, T_0=50)),
    "cyclic": lambda m, o: _per_step(o, schedulers.CyclicLR(o, base_lr=1e-4, max_lr=1e-2, step_size_up=37)),
    "cosine_t_max": lambda m, o: _per_step(o, schedulers.CosineAnnealingLR(o, T_max=40)),
    # broken
    "one_cycle_per_epoch": _one_cycle_per_epoch,
    "exponential_meant_per_epoch_per_step": lambda m, o: _per_step(o, schedulers.ExponentialLR(o, gamma=0.3)),
    "exponential_per_epoch": lambda m, o: {
        "optimizer": o,
        "lr_scheduler": {"scheduler": schedulers.ExponentialLR(o, gamma=0.3), "interval": "epoch"},
    },
    "steplr_meant_per_epoch_per_step": lambda m, o: _per_step(
        o, schedulers.StepLR(o, step_size=3, gamma=0.1)
    ),
    "steplr_2_meant_per_epoch_per_step": lambda m, o: _per_step(
        o, schedulers.StepLR(o, step_size=2, gamma=0.1)
    ),
    "warmup_steps_per_epoch": lambda m, o: (  # 500 warm-up steps, registered per epoch (the default)
        [o],
        [schedulers.LambdaLR(o, lambda s: min(1.0, (s + 1) / 500))],
    ),
    "warmup_60_steps_per_epoch": lambda m, o: (  # a 60-step warm-up, registered per epoch (the default)
        [o],
        [schedulers.LinearLR(o, start_factor=1 / 60, total_iters=60)],
    ),
    "warmup_3_epochs_per_epoch": lambda m, o: (
        [o],
        [schedulers.LinearLR(o, start_factor=0.1, total_iters=3)],
    ),
    "warmup_from_zero_per_epoch": lambda m, o: (  # a 100-step warm-up from 0, registered per epoch
        [o],
        [schedulers.LambdaLR(o, lambda s: min(1.0, s / 100))],
    ),
    "warmup_from_zero_per_step": lambda m, o: _per_step(
        o, schedulers.LambdaLR(o, lambda s: min(1.0, s / 100))
    ),
    "one_cycle_sized_for_ten_times_the_run": lambda m, o: _per_step(
        o, schedulers.OneCycleLR(o, max_lr=0.1, total_steps=10 * int(m.trainer.estimated_stepping_batches))
    ),
    "gamma_above_one": lambda m, o: _per_step(o, schedulers.ExponentialLR(o, gamma=1.05)),
    "one_cycle_too_short": lambda m, o: _per_step(o, schedulers.OneCycleLR(o, max_lr=0.1, total_steps=50)),
    "frequency_two": lambda m, o: [_per_step(o, schedulers.StepLR(o, step_size=1, gamma=0.9), frequency=2)],
}


def _check(model: pl.LightningModule, **kwargs: Any) -> Any:
    """The schedule check's result on ``model`` trained on ``random_classification_loader()``."""
    loader = random_classification_loader()
    report = preflight(model, train_dataloaders=loader, checks=[ScheduleCheck()], progress=False, **kwargs)
    return report["schedule"]


def schedule(recipe: str, **kwargs: Any):
    return _check(Scheduled(recipe), **kwargs)


@pytest.mark.parametrize(
    "recipe",
    [
        "warmup_cosine_per_step",
        "warmup_from_1e-4_then_cosine",
        "one_cycle",
        "multistep_per_epoch",
        "constant",
        "cosine_warm_restarts",  # dips below 1e-3 x base every 50 steps and comes back: not a collapse
        "cyclic",  # ends on a rising phase, below its earlier peaks: not unbounded growth
        "warmup_3_epochs_per_epoch",  # a per-epoch warm-up that finishes within the run
    ],
)
def test_healthy_schedules_pass_over_the_planned_run(recipe):
    result = schedule(recipe, max_epochs=20)
    assert result.status == "pass", result.message
    assert result.details["total_steps"] == 20 * LOADER_BATCHES
    assert result.details["deterministic"] is True
    assert "max_epochs=20" in result.details["length_source"]
    if recipe == "one_cycle":  # ends at the initial LR / 1e4, at the end only
        group = next(iter(result.details["groups"].values()))
        assert group["last"] == pytest.approx(group["base"] / 1e4, rel=1e-3)
        assert group["peak"] == pytest.approx(0.1)


@pytest.mark.parametrize(
    ("recipe", "rule", "words"),
    [
        ("steplr_meant_per_epoch_per_step", "collapse", "falls below 0.001 x base"),
        ("warmup_steps_per_epoch", "never_warms_up", "still rises at step"),
        ("gamma_above_one", "grows", "still grows"),
    ],
)
def test_broken_schedules_fail_with_the_numbers_and_a_fix(recipe, rule, words):
    result = schedule(recipe, max_epochs=20)
    assert result.status == "fail", result.message
    assert result.details["findings"][0]["rule"] == rule
    assert words in result.summary and len(result.summary) <= 120 and result.action


def test_a_warmup_below_one_percent_for_most_of_the_run_never_warms_up():
    # 500-step warm-up registered per epoch over 5 epochs: below 1% of the base LR for 4 of them.
    result = schedule("warmup_steps_per_epoch", max_epochs=5)
    assert result.status == "fail"
    assert result.details["findings"][0]["rule"] == "never_warms_up"
    assert "stays below 0.01 x base for 32 of 40 steps" in result.summary


@pytest.mark.parametrize("recipe", ["warmup_60_steps_per_epoch", "one_cycle_sized_for_ten_times_the_run"])
def test_a_run_that_ends_inside_the_warmup_fails(recipe):
    # The LR starts above 1% of its base (no "below 1%" rule applies) and ends the 6-epoch run at its
    # highest; stepped on past the run, the schedule rises far higher: its peak is never used.
    result = schedule(recipe, max_epochs=6)
    assert result.status == "fail", result.message
    assert result.details["findings"][0]["rule"] == "never_warms_up"
    assert "still rises at step" in result.summary and result.action


def test_a_one_cycle_shorter_than_the_run_fails_where_lightning_would_stop():
    result = schedule("one_cycle_too_short", max_epochs=20)
    assert result.status == "fail", result.message
    assert "Tried to step 51 times" in result.details["error"]
    assert result.details["error_step"] == 51


def test_no_scheduler_skips_saying_why():
    result = schedule("none", max_epochs=20)
    assert result.status == "skip" and "no scheduler configured" in result.message


class Plateau(TinyClassifier):
    """TinyClassifier with only a ReduceLROnPlateau on ``monitor`` (logged: train_loss, val_loss, val_acc)."""

    def __init__(self, mode: str, monitor: str) -> None:
        super().__init__()
        self.mode, self.monitor = mode, monitor

    def configure_optimizers(self) -> Any:
        optimizer = torch.optim.Adam(self.parameters(), lr=1e-2)
        plateau = schedulers.ReduceLROnPlateau(optimizer, mode=self.mode)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": plateau, "monitor": self.monitor}}


def plateau(mode: str, monitor: str):
    return _check(Plateau(mode, monitor))


@pytest.mark.parametrize(
    ("monitor", "improves"), [("train_loss", "min"), ("val_loss", "min"), ("val_acc", "max")]
)
@pytest.mark.parametrize("agrees", [True, False])
def test_a_plateau_passes_when_its_mode_agrees_with_its_metric_and_fails_naming_the_mode_when_not(
    monitor, improves, agrees
):
    mode = improves if agrees else {"min": "max", "max": "min"}[improves]
    result = plateau(mode, monitor)
    found = result.details["plateau"][0]
    assert result.status == ("pass" if agrees else "fail") and found["agrees"] is agrees, result.message
    if agrees:
        assert (found["after"] < found["before"]) == (mode == "min")
    else:
        assert f"mode={improves!r}" in result.action


def test_a_plateau_on_a_metric_no_step_logs_skips_saying_why():
    result = plateau("min", "not_logged")
    assert result.status == "skip", result.message
    assert "ReduceLROnPlateau" in result.message and "not_logged" in result.message


def test_unknown_length_is_inconclusive_asking_for_max_epochs():
    result = schedule("steplr_meant_per_epoch_per_step")
    assert result.status == "inconclusive"
    assert "pass `max_epochs=` or `max_steps=`" in result.message


def test_unknown_length_warns_on_a_collapse_in_epoch_0_that_holds_for_any_run_of_2_to_20_epochs():
    """A per-epoch decay stepped per step collapses in epoch 0: warn with no length, judged with one."""
    result = schedule("exponential_meant_per_epoch_per_step")
    assert result.status == "warn", result.message
    assert result.details["collapse_step"] == 6 and result.details["steps_per_epoch"] == LOADER_BATCHES
    assert result.details["horizon_epochs"] == 20
    assert schedule("exponential_per_epoch").status == "inconclusive"
    assert schedule("exponential_meant_per_epoch_per_step", max_epochs=3).status == "fail"


def test_unknown_length_warns_on_a_collapse_in_epoch_1_that_holds_for_any_run_of_3_to_20_epochs():
    """Sealed T's StepLR meant per epoch, stepped per step: below 0.001 x base in epoch 1, not epoch 0."""
    result = schedule("steplr_2_meant_per_epoch_per_step")
    assert result.status == "warn", result.message
    assert result.details["collapse_step"] == LOADER_BATCHES and "(epoch 1)" in result.summary
    assert "runs of 3 to 20 epochs" in result.summary and len(result.summary) <= 120


def test_unknown_length_warns_on_an_lr_of_0_through_all_of_epoch_0():
    """A warm-up from 0 sized in steps but stepped per epoch: no step of epoch 0 can learn, at any length."""
    result = schedule("warmup_from_zero_per_epoch")
    assert result.status == "warn" and result.details["rule"] == "idle_first_epoch", result.message
    assert result.details["steps"] == LOADER_BATCHES
    assert schedule("warmup_from_zero_per_step").status == "inconclusive"  # 0 at step 0 only


def test_configure_optimizers_reading_the_trainer_is_inconclusive_without_a_length_and_judged_with_one():
    result = schedule("one_cycle")  # reads self.trainer.estimated_stepping_batches: was an error before
    assert result.status == "inconclusive"
    assert "not attached to a `Trainer`" in result.details["error"] and "max_epochs=" in result.action
    assert schedule("one_cycle", max_steps=100).details["total_steps"] == 100


def test_without_a_planned_length_a_scheduler_stating_its_own_is_used():
    result = schedule("cosine_t_max")
    assert result.status == "pass", result.message
    assert result.details["total_steps"] == 40 and "T_max=40" in result.details["length_source"]


def test_max_steps_and_max_epochs_take_the_smaller_as_the_trainer_does():
    assert schedule("constant", max_epochs=20, max_steps=30).details["total_steps"] == 30
    assert schedule("constant", max_epochs=2, max_steps=300).details["total_steps"] == 2 * LOADER_BATCHES


def test_frequency_steps_every_second_step():
    result = schedule("frequency_two", max_steps=6)
    curve = next(iter(result.details["groups"].values()))["curve"]
    assert curve == pytest.approx([0.1, 0.1, 0.09, 0.09, 0.081, 0.081])


class RecordLR(pl.Callback):
    def __init__(self) -> None:
        self.lrs: list[float] = []

    def on_train_batch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule, batch: Any, i: int):
        if i % trainer.accumulate_grad_batches == 0:  # the LR of the optimizer step this batch starts
            self.lrs.append(trainer.optimizers[0].param_groups[0]["lr"])


class OneCycleFromTrainer(TinyClassifier):
    def configure_optimizers(self) -> Any:
        optimizer = torch.optim.SGD(self.parameters(), lr=0.1)
        total = int(self.trainer.estimated_stepping_batches)
        one_cycle = schedulers.OneCycleLR(optimizer, max_lr=0.1, total_steps=total)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": one_cycle, "interval": "step"}}


class EpochDecay(TinyClassifier):
    def configure_optimizers(self) -> Any:
        optimizer = torch.optim.SGD(self.parameters(), lr=0.1)
        decay = schedulers.StepLR(optimizer, step_size=1, gamma=0.5)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": decay, "frequency": 2}}


@pytest.mark.parametrize("model_class", [OneCycleFromTrainer, EpochDecay])
def test_inside_fit_the_planned_length_and_the_curve_are_the_trainers(tmp_path, model_class):
    check = Preflight(checks=[ScheduleCheck()], on_fail="warn", print_report=False, progress=False)
    recorder = RecordLR()
    trainer = fast_trainer(
        max_epochs=4, accumulate_grad_batches=3, callbacks=[check, recorder], default_root_dir=tmp_path
    )
    trainer.fit(model_class(), random_classification_loader())  # 8 batches: 3 optimizer steps per epoch
    result = check.report["schedule"]
    assert result.status == "pass", result.message
    assert result.details["total_steps"] == trainer.estimated_stepping_batches == 12
    assert "estimated_stepping_batches" in result.details["length_source"]
    simulated = next(iter(result.details["groups"].values()))["curve"]
    assert simulated == pytest.approx(recorder.lrs)  # the real run's LR at every optimizer step


class CollapsingInFit(TinyClassifier):
    def configure_optimizers(self) -> Any:
        optimizer = torch.optim.SGD(self.parameters(), lr=0.1)
        decay = schedulers.StepLR(optimizer, step_size=2, gamma=0.1)  # sized in epochs, stepped per step
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": decay, "interval": "step"}}


def test_inside_fit_a_collapsing_schedule_fails_before_training(tmp_path):
    check = Preflight(checks=[ScheduleCheck()], on_fail="raise", print_report=False, progress=False)
    trainer = fast_trainer(max_epochs=10, callbacks=[check], default_root_dir=tmp_path)
    with pytest.raises(Exception, match=r"falls below 0\.001 x base"):
        trainer.fit(CollapsingInFit(), random_classification_loader())
    assert trainer.global_step == 0


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"max_epochs": 0}, "max_epochs"),
        ({"max_steps": "10"}, "max_steps"),
        ({"max_steps": 2.5}, "max_steps"),
    ],
)
def test_bad_run_lengths_fail_at_construction_naming_them(kwargs, match):
    with pytest.raises(ValueError, match=match):
        preflight(TinyClassifier(), train_dataloaders=random_classification_loader(), checks=[], **kwargs)


def test_with_a_planned_length_other_checks_get_the_modules_own_optimizer_too():
    # grad_flow builds the optimizers on a copy; a configure_optimizers reading self.trainer used to fall
    # back to AdamW outside fit. With max_epochs the stand-in answers it.
    model = Scheduled("one_cycle")
    loader = random_classification_loader()
    without = preflight(model, train_dataloaders=loader, checks=["grad_flow"], progress=False)
    planned = preflight(model, train_dataloaders=loader, checks=["grad_flow"], progress=False, max_epochs=3)
    assert "used AdamW" in without["grad_flow"].details["optimizer"]
    assert planned["grad_flow"].details["optimizer"].startswith("the module's configure_optimizers (SGD)")


def test_the_command_line_takes_the_planned_length_and_rejects_a_bad_one(capsys):
    assert main(["--model", "lightning_recipes.testing.DigitsCNN", "--max_epochs", "0"]) == 2
    assert "`max_epochs` must be an integer >= 1, got 0" in capsys.readouterr().err
    assert main(["--help"]) == 0
    assert "--max_steps" in capsys.readouterr().out


class ManualSteps(TinyClassifier):
    def __init__(self) -> None:
        super().__init__()
        self.automatic_optimization = False

    def training_step(self, batch: Any, batch_idx: int) -> None:
        optimizer, scheduler = self.optimizers(), self.lr_schedulers()
        optimizer.zero_grad()
        self.manual_backward(self.loss(self(batch[0]), batch[1]))
        optimizer.step()
        scheduler.step()

    def configure_optimizers(self) -> Any:
        optimizer = torch.optim.SGD(self.parameters(), lr=0.1)
        return [optimizer], [schedulers.StepLR(optimizer, step_size=1, gamma=0.1)]


def test_manual_optimisation_skips_saying_the_step_calls_the_schedulers():
    result = _check(ManualSteps(), max_epochs=3)
    assert result.status == "skip" and "manual optimisation" in result.message


def test_a_recipe_module_that_builds_its_schedule_only_in_a_trainer_is_judged_with_a_planned_length():
    """OptimizerRecipeMixin returns the optimizer alone outside a Trainer: without a planned length the skip
    says so and what to pass; with one, the stand-in Trainer gets its warm-up + cosine, which is judged."""
    unknown = preflight(RecipeDigitsCNN(), datamodule=DigitsDataModule(), checks=[ScheduleCheck()])[
        "schedule"
    ]
    assert unknown.status == "skip" and "max_epochs=" in unknown.message
    planned = preflight(
        RecipeDigitsCNN(), datamodule=DigitsDataModule(), checks=[ScheduleCheck()], max_epochs=3
    )
    result = planned["schedule"]
    assert result.status == "pass", result.message
    assert "LambdaLR" in result.details["schedulers"][0] and result.details["total_steps"] == 3 * 23


class ReadsMoreOfTheTrainer(TinyClassifier):
    """Builds its schedule only inside a Trainer, from an attribute no stand-in for a planned run has."""

    def configure_optimizers(self):
        optimizer = torch.optim.SGD(self.parameters(), lr=0.1)
        if self._trainer is None:
            return optimizer
        steps = int(self.trainer.estimated_stepping_batches) + len(self.trainer.loggers)
        return [optimizer], [schedulers.LinearLR(optimizer, start_factor=0.1, total_iters=steps)]


def test_a_schedule_the_stand_in_cannot_build_is_inconclusive_and_says_to_run_inside_fit():
    result = _check(ReadsMoreOfTheTrainer(), max_epochs=3)
    assert result.status == "inconclusive", result.message
    assert "loggers" in result.message


class SteppedByHandToo(TinyClassifier):
    """A StepLR declared per epoch that ``training_step`` also steps (a kept ``self.scheduler``): Lightning
    steps it once per epoch, the step once per batch. ``by_hand=False`` is its healthy twin."""

    def __init__(self, by_hand: bool = True) -> None:
        super().__init__()
        self.by_hand = by_hand

    def training_step(self, batch: Any, batch_idx: int) -> Any:
        loss = super().training_step(batch, batch_idx)
        if self.by_hand:
            self.scheduler.step()
        return loss

    def configure_optimizers(self) -> Any:
        optimizer = torch.optim.SGD(self.parameters(), lr=0.1)
        self.scheduler = schedulers.StepLR(optimizer, step_size=1, gamma=0.7)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": self.scheduler, "interval": "epoch"}}


@pytest.mark.parametrize(("by_hand", "status"), [(True, "fail"), (False, "pass")], ids=["by-hand", "twin"])
@pytest.mark.filterwarnings("ignore:Detected call of `lr_scheduler.step()`")
def test_a_scheduler_the_step_also_steps_leaves_its_declared_schedule_in_a_trial_fit(by_hand, status):
    """The schedule is observed in the shared trial fit, with or without a planned length."""
    for length in ({"max_epochs": 20}, {}):
        result = _check(SteppedByHandToo(by_hand), **length)
        if not length and status == "pass":
            assert result.status == "inconclusive", result.message  # no planned length: nothing to plan
            continue
        assert result.status == status, result.message
        assert len(result.summary) <= 120
        if status == "fail":
            step, seen, declared = result.details["trial"]["first_difference"]
            assert step == 0 and seen < declared  # stepped before the first optimizer step


def test_a_one_cycle_sized_in_steps_but_stepped_per_epoch_fails_from_the_trial_fit_without_a_length():
    result = schedule("one_cycle_per_epoch")
    assert result.status == "fail", result.message
    assert "stepped per epoch: 1 of its 30 steps" in result.summary and len(result.summary) <= 120
    assert result.details["stated_length_for_twice_the_steps"] == 60
    lr = result.details["trial_lr"]  # what the trial fit used: the cycle's start, never its 0.1 peak
    assert lr["steps"] >= 12 and lr["highest"] == lr["first"] == pytest.approx(0.1 / 25)


def test_a_one_cycle_sized_in_steps_but_stepped_per_epoch_fails_over_the_planned_run():
    result = schedule("one_cycle_per_epoch", max_epochs=20)
    assert result.status == "fail", result.message
    assert result.details["stated_length"] == result.details["run_steps"] == 20 * LOADER_BATCHES
    assert result.details["scheduler_steps_in_run"] == 20
    assert "interval" in result.action


@pytest.mark.parametrize("length", [{}, {"max_steps": 30}], ids=["own-length", "run-of-30-steps"])
def test_a_fixed_per_epoch_length_equal_to_the_runs_steps_is_not_read_as_sized_in_steps(length):
    result = schedule("cosine_30_per_epoch", **length)  # T_max=30 does not follow the run: epochs by design
    assert result.status == "pass", result.message


class ManualWarmup(ManualSteps):
    """Manual optimisation with a linear warm-up declared per step; ``stepped``: ``training_step`` steps it
    (else never, the bug); ``interval``: what the config declares."""

    def __init__(self, stepped: bool, interval: str = "step") -> None:
        super().__init__()
        self.stepped, self.interval = stepped, interval

    def training_step(self, batch: Any, batch_idx: int) -> None:
        optimizer = self.optimizers()
        optimizer.zero_grad()
        self.manual_backward(self.loss(self(batch[0]), batch[1]))
        optimizer.step()
        if self.stepped:
            self.lr_schedulers().step()

    def configure_optimizers(self) -> Any:
        optimizer = torch.optim.SGD(self.parameters(), lr=0.1)
        warmup = schedulers.LinearLR(optimizer, start_factor=0.1, total_iters=40)
        return [optimizer], [{"scheduler": warmup, "interval": self.interval}]


def test_a_manual_loop_that_never_steps_its_per_step_warmup_fails_from_the_trial_fit():
    result = _check(ManualWarmup(stepped=False))
    assert result.status == "fail", result.message
    trial = result.details["trial"]
    assert trial["observed"] == pytest.approx(0.01) and trial["declared_last"] > 2 * trial["observed"]
    assert "lr_schedulers().step()" in result.action and len(result.summary) <= 120


@pytest.mark.parametrize(
    "model",
    [ManualWarmup(stepped=True), ManualWarmup(stepped=False, interval="epoch")],
    ids=["stepped", "per-epoch"],
)
def test_a_manual_warmup_that_moves_or_is_declared_per_epoch_is_not_judged(model):
    result = _check(model)  # per epoch: flat over the one-epoch trial, never stepping cannot be told apart
    assert result.status == "skip", result.message


def test_lr_curves_and_judge_curve() -> None:
    optimizer = torch.optim.SGD(torch.nn.Linear(2, 2).parameters(), lr=1.0)
    step = torch.optim.lr_scheduler.StepLR(optimizer, step_size=2, gamma=0.5)
    curves = lr_curves([SchedulerConfig(step, "epoch")], total=6, batches_per_epoch=1)
    assert curves.values[:, 0].tolist() == [1.0, 1.0, 0.5, 0.5, 0.25, 0.25]
    decayed = 0.5 ** torch.arange(100.0)  # halves every step
    found = judge_curve(decayed, 1.0, 100, collapse=1e-3, low=1e-2, growth=10)
    assert found is not None and found.rule == "collapse"
    assert judge_curve(torch.ones(100), 1.0, 100, collapse=1e-3, low=1e-2, growth=10) is None
    warm_then_flat = torch.linspace(1e-4, 1.0, 100).clamp(max=0.5) * 2  # from 2e-4 x base
    assert judge_curve(warm_then_flat, 1.0, 100, collapse=1e-3, low=1e-2, growth=1000) is None


class EpochMeanPlateau(Plateau):
    """Logs ``train_loss`` with ``on_step=True, on_epoch=True`` (Lightning adds ``train_loss_step`` and
    ``train_loss_epoch``) and the plateau monitors ``train_loss_epoch``."""

    def training_step(self, batch: Any, batch_idx: int) -> Any:
        x, y = batch
        loss = self.loss(self(x), y)
        self.log("train_loss", loss, on_step=True, on_epoch=True)
        return loss


@pytest.mark.parametrize(("mode", "status"), [("min", "pass"), ("max", "fail")])
def test_a_plateau_on_the_epoch_mean_of_a_step_metric_is_judged(mode, status):
    result = _check(EpochMeanPlateau(mode, "train_loss_epoch"))
    assert result.status == status, result.message
    assert result.details["plateau"][0]["monitor"] == "train_loss_epoch"
