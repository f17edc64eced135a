"""speed_tune."""

from __future__ import annotations

import copy
from typing import Any

import lightning.pytorch as pl
import pytest
import torch
from torch.utils.data import DataLoader

from lightning_recipes.harness import preserved_loader_rng
from lightning_recipes.testing import TinyClassifier, random_classification_loader
from lightning_recipes.tune.speed import OPTIONS, SpeedOption, planned_steps, speed_tune, timed_loader
from tests.helpers import speed as clock
from tests.helpers.speed import FAST, SleepyClassifier, virtual_time
from tests.tune._flat_models import no_sleep


def _shift_logits(module: pl.LightningModule) -> pl.LightningModule:
    with torch.no_grad():
        module.head.bias.copy_(torch.tensor([3.0, 0.0, 0.0, 0.0]))  # type: ignore[union-attr, operator]
    return module


def test_user_model_rng_and_loader_untouched() -> None:
    model, loader = TinyClassifier(), random_classification_loader()
    before = {key: value.clone() for key, value in model.state_dict().items()}
    rng = torch.get_rng_state()
    result = speed_tune(model, train_dataloaders=loader, options=["fused_optimizer"], **FAST)
    assert all(row.activation_mb is None and row.step_peak_mb is None for row in result.rows)
    assert len(result.table().columns) == 10  # the time columns, no memory ones (none counted)
    assert all(torch.equal(before[key], value) for key, value in model.state_dict().items())
    assert torch.equal(rng, torch.get_rng_state())
    assert "configure_optimizers" not in vars(model)  # the fused patch went to the copy only
    assert loader.num_workers == 0
    assert not model.configure_optimizers().defaults.get("fused")
    prepare = OPTIONS["fused_optimizer"].prepare
    assert prepare is not None  # the module's own optimizer, built fused on the copy
    optimizer = prepare(copy.deepcopy(model)).configure_optimizers()
    assert type(optimizer) is torch.optim.SGD and optimizer.param_groups[0]["fused"] is True


class Batches:
    """A plain iterable of batches, as Lightning accepts: not a DataLoader to rebuild."""

    def __init__(self) -> None:
        self.batches = list(random_classification_loader())

    def __iter__(self) -> Any:
        return iter(self.batches)

    def __len__(self) -> int:
        return len(self.batches)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU skip reasons")
def test_options_that_do_not_apply_are_skipped_with_reason() -> None:
    options = ["pin_memory", "tf32", "channels_last", "num_workers", "fused_optimizer"]
    result = speed_tune(TinyClassifier(), train_dataloaders=Batches(), options=options, **FAST)
    status = {row.option: row.status.partition(": ")[2] for row in result.rows}
    assert status["pin_memory"] == "pin_memory applies on CUDA only (device is cpu)"
    assert status["tf32"] == "TF32 applies on CUDA only (device is cpu)"
    assert status["channels_last"].startswith("no Conv2d")
    assert status["num_workers"] == "the training data is a Batches, not a torch DataLoader to rebuild"
    assert not result.rows[-1].status.startswith("skipped")  # fused_optimizer: measured
    assert result.trainer_kwargs == {} and result.loader_kwargs == {}


def test_option_that_changes_the_loss_is_incorrect_and_never_chosen() -> None:
    broken = SpeedOption("shifted_logits", prepare=_shift_logits)
    loader = random_classification_loader()
    result = speed_tune(SleepyClassifier(), train_dataloaders=loader, options=[broken], **FAST)
    row = result.rows[1]
    assert row.option == "shifted_logits"
    assert row.status.startswith("incorrect: loss deviates")
    assert row.loss_deviation is not None and row.loss_deviation > 0.1
    assert result.best == []


def test_faster_options_are_combined_and_their_kwargs_build_a_trainer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    virtual_time(monkeypatch)  # exact step times: 81 ms, 41 ms per option alone, 1 ms together
    bf16 = {"precision": "bf16-mixed"}
    a = SpeedOption("no_sleep_a", bf16, prepare=no_sleep("sleep_a"), loss_rtol=0.05, advice="a")
    b = SpeedOption("no_sleep_b", prepare=no_sleep("sleep_b"), advice="b")
    loader = random_classification_loader()
    # a long run: the ranking is by step time (no option here costs anything once)
    result = speed_tune(
        SleepyClassifier(), train_dataloaders=loader, options=[a, b], run_steps=10_000, **FAST
    )
    assert [row.step_ms for row in result.rows] == pytest.approx([81.0, 41.0, 41.0, 1.0])  # the virtual clock
    assert [row.status for row in result.rows[1:]] == ["faster", "faster", "faster"]
    assert result.rows[-1].option == "no_sleep_a+no_sleep_b"
    assert result.best == ["no_sleep_a", "no_sleep_b"]  # together faster than either alone
    assert result.trainer_kwargs == {"precision": "bf16-mixed"}
    assert result.to_yaml() == "trainer:\n  precision: bf16-mixed\n# no_sleep_a: a\n# no_sleep_b: b\n"
    trainer = pl.Trainer(logger=False, enable_progress_bar=False, **result.trainer_kwargs)
    assert trainer.precision == "bf16-mixed"
    assert result.to_dict()["best"] == result.best and len(result.table().rows) == 4


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"warmup_steps": 0}, "warmup_steps"),
        ({"measure_steps": 1}, "measure_steps"),
        ({"repeats": 0}, "repeats"),
        ({"loss_rtol": 0.0}, "loss_rtol"),
        ({"min_speedup": 0.9}, "min_speedup"),
        ({"options": ["turbo"]}, "options"),
        ({"options": ["baseline"]}, "options"),
        ({"options": "compile"}, "options"),  # TypeError
        ({"train_dataloaders": None}, "training data"),
        ({"run_steps": 0}, "`run_steps`"),
        ({"trainer": 3}, "`trainer`"),  # TypeError
    ],
)
def test_bad_arguments_raise_naming_them(kwargs: dict[str, Any], name: str) -> None:
    loader = random_classification_loader()
    with pytest.raises((ValueError, TypeError), match=name):
        speed_tune(TinyClassifier(), **{"train_dataloaders": loader, **kwargs})


def test_every_builtin_option_has_advice_or_trainer_kwargs() -> None:
    assert all(option.advice or option.trainer_kwargs for option in OPTIONS.values())


def test_loader_rebuilt_with_workers_keeps_the_shuffled_order_and_the_loss() -> None:
    base = random_classification_loader()
    generator = torch.Generator().manual_seed(0)  # the loader's own stream, as DigitsDataModule's
    loader = DataLoader(base.dataset, batch_size=32, shuffle=True, generator=generator)
    state = generator.get_state()
    twice = FAST | {"repeats": 2}
    result = speed_tune(TinyClassifier(), train_dataloaders=loader, options=["num_workers"], **twice)
    row = result.rows[1]
    assert row.loss_deviation == 0.0 and not row.status.startswith("incorrect"), row
    assert loader.num_workers == 0 and torch.equal(state, generator.get_state())


def test_compile_of_a_model_with_dropout_keeps_the_loss() -> None:
    from lightning_recipes.data import DigitsDataModule
    from lightning_recipes.testing import DigitsCNN

    result = speed_tune(DigitsCNN(width=4), datamodule=DigitsDataModule(), options=["compile"], **FAST)
    row = result.rows[1]
    assert row.loss_deviation is not None and row.loss_deviation < 1e-3, row  # same dropout masks as eager
    assert row.first_step_ms is not None and row.step_ms is not None


def test_an_iterable_datasets_loader_is_rebuilt_with_its_batch_size_and_not_given_workers() -> None:
    from torch.utils.data import IterableDataset

    from lightning_recipes.tune._speed_options import rebuild_loader

    features, labels = random_classification_loader().dataset.tensors  # type: ignore[attr-defined]

    class Stream(IterableDataset):
        def __iter__(self) -> Any:
            yield from zip(features, labels)

    loader = DataLoader(Stream(), batch_size=16, drop_last=True)
    rebuilt = rebuild_loader(loader, {"pin_memory": False})
    assert [len(y) for _, y in rebuilt] == [len(y) for _, y in loader] == [16] * (len(labels) // 16)
    result = speed_tune(TinyClassifier(), train_dataloaders=loader, options=["num_workers"], **FAST)
    assert result.rows[1].status.startswith("skipped: the training data is an IterableDataset")


class CostlyStartClassifier(TinyClassifier):
    """Sleeps ``step_sleep`` every step and ``first_sleep`` once, in its first step."""

    def __init__(self) -> None:
        super().__init__()
        self.step_sleep = 0.15
        self.first_sleep = 0.0
        self.steps_done = 0

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        clock.time.sleep(self.step_sleep + (self.first_sleep if self.steps_done == 0 else 0.0))
        self.steps_done += 1
        return super().training_step(batch, batch_idx)


def _pays_later(module: pl.LightningModule) -> pl.LightningModule:
    module.step_sleep, module.first_sleep = 0.01, 1.5  # type: ignore[assignment]  # 140 ms/step for 1.5 s once
    return module


PAYS_LATER = SpeedOption("pays_later", prepare=_pays_later, advice="x")


def test_an_option_whose_one_off_cost_the_run_does_not_repay_is_not_chosen(monkeypatch: Any) -> None:
    """Issue 22: 1.5 s once for 140 ms a step (virtual clock) pays after 11 steps: not for 4, yes for 1000."""
    virtual_time(monkeypatch)
    loader = random_classification_loader()
    tune = {"train_dataloaders": loader, "options": [PAYS_LATER], **FAST}
    short = speed_tune(CostlyStartClassifier(), run_steps=4, **tune)
    row = short.rows[1]
    assert (row.step_ms, row.baseline_step_ms, row.speedup) == pytest.approx((10.0, 150.0, 15.0))
    assert (row.one_off_s, row.break_even_steps) == (pytest.approx(1.5), 11)
    assert row.run_speedup == pytest.approx(0.6 / 1.54) and row.status.startswith("not faster for this run")
    assert short.best == [] and short.best_run_speedup == 1.0
    long = speed_tune(CostlyStartClassifier(), run_steps=1000, **tune)
    assert long.rows[1].status == "faster" and long.best == ["pays_later"]
    assert long.best_run_speedup == pytest.approx(150 / 11.5) and long.run_steps == 1000


def test_a_rows_speedup_is_its_step_time_against_the_baseline_of_the_same_repeats(monkeypatch: Any) -> None:
    """Issue 22 audit: every row carries its own baseline, and speed-up = baseline / step time."""
    quicker = SpeedOption("quicker", prepare=lambda m: (setattr(m, "step_sleep", 0.03), m)[1])
    options = [quicker, SpeedOption("also", prepare=lambda m: m, advice="nothing")]
    virtual_time(monkeypatch)
    loader = random_classification_loader()
    result = speed_tune(CostlyStartClassifier(), train_dataloaders=loader, options=options, **FAST)
    for row in result.rows:
        if row.step_ms is not None:
            assert row.baseline_step_ms is not None
            assert row.speedup == pytest.approx(row.baseline_step_ms / row.step_ms, rel=1e-12), row


def test_run_length_from_the_trainer_or_one_epoch() -> None:
    loader = random_classification_loader()  # 8 batches
    model = TinyClassifier()
    by_epochs = speed_tune(model, train_dataloaders=loader, options=["pin_memory"], **FAST,
                           trainer=pl.Trainer(max_epochs=3, logger=False))  # fmt: skip
    assert (by_epochs.run_steps, by_epochs.run_steps_source) == (24, "the Trainer's max_steps / max_epochs")
    default = speed_tune(model, train_dataloaders=loader, options=["pin_memory"], **FAST)
    assert default.run_steps == 8 and default.run_steps_source.startswith("one epoch")
    assert default.rows[0].run_s is not None


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({"max_epochs": 3}, 24),
        ({"max_steps": 5}, 5),
        ({"max_steps": 5, "accumulate_grad_batches": 2}, 10),
        ({"max_epochs": 2, "max_steps": 100}, 16),
        ({"max_epochs": 2, "limit_train_batches": 3}, 6),
        ({"max_epochs": 2, "limit_train_batches": 0.5}, 8),
        ({}, 8000),  # Lightning's default: 1000 epochs
    ],
)
def test_planned_steps_follow_lightnings_stopping_rules(kwargs: dict[str, Any], expected: int) -> None:
    trainer = pl.Trainer(logger=False, enable_progress_bar=False, **kwargs)
    assert planned_steps(trainer, random_classification_loader()) == expected


def test_the_timed_run_ends_with_the_epochs_smaller_last_batch() -> None:
    """A new batch shape costs torch.compile a second compile once per run: the timed steps include it."""
    dataset = random_classification_loader(num_samples=100).dataset  # batches of 32, 32, 32, 4
    generator = torch.Generator().manual_seed(0)
    loader = DataLoader(dataset, batch_size=32, shuffle=True, generator=generator)
    with preserved_loader_rng(loader):
        expected = [y.tolist() for _, y in loader]
    with preserved_loader_rng(loader):
        timed = timed_loader(loader, 3)
    batches = [y.tolist() for _, y in timed]
    assert [len(b) for b in batches] == [32, 32, 4]
    assert batches == expected[:2] + expected[-1:]
    assert timed_loader(loader, 4) is loader  # the whole epoch fits in the timed steps: unchanged
