"""InputPipelineMonitor: timings of known sleeps, the warning and its advice, state. Tests taking ``clock``
run on a virtual clock only the sleeps here advance: exact timings, whatever the machine's load."""

from __future__ import annotations

import pickle
import sys
import time
import warnings
from typing import Any

import lightning.pytorch as pl
import pytest
import torch
from lightning.pytorch.callbacks import Callback
from torch.utils.data import DataLoader, Dataset, TensorDataset

from lightning_recipes.callbacks import InputPipelineMonitor, input_pipeline_monitor
from lightning_recipes.callbacks.input_pipeline_monitor import loader_advice, time_batch_build_ms
from lightning_recipes.testing import (
    InMemoryLogger,
    TinyClassifier,
    fast_trainer,
    random_classification_loader,
)
from tests.helpers.speed import VirtualTime


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> VirtualTime:
    """The monitor's timer and this module's sleeps on one :class:`VirtualTime`."""
    virtual = VirtualTime()
    monkeypatch.setattr(input_pipeline_monitor, "time", virtual)
    monkeypatch.setattr(sys.modules[__name__], "time", virtual)
    return virtual


class SlowDataset(Dataset):
    """Each item takes ``delay`` seconds to load."""

    def __init__(self, n: int = 64, delay: float = 0.0) -> None:
        self.x = torch.randn(n, 16)
        self.y = torch.randint(0, 4, (n,))
        self.delay = delay

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int):
        if self.delay:
            time.sleep(self.delay)
        return self.x[i], self.y[i]


class SlowStep(TinyClassifier):
    """Each training step takes at least ``delay`` seconds; each validation batch ``val_delay``."""

    def __init__(self, delay: float = 0.0, val_delay: float = 0.0) -> None:
        super().__init__()
        self.delay, self.val_delay = delay, val_delay

    def training_step(self, batch, batch_idx):
        time.sleep(self.delay)
        return super().training_step(batch, batch_idx)

    def validation_step(self, batch, batch_idx):
        time.sleep(self.val_delay)
        return super().validation_step(batch, batch_idx)


def _fit(tmp_path, model, loaders, callbacks, **kwargs) -> tuple[pl.Trainer, InMemoryLogger, list[str]]:
    """Fit (one loader or (train, val); one callback or a list): the Trainer, logger, monitor's warnings."""
    logger = InMemoryLogger()
    callbacks = callbacks if isinstance(callbacks, list) else [callbacks]
    settings = {"logger": logger, "callbacks": callbacks, "default_root_dir": tmp_path}
    trainer = fast_trainer(**{**settings, **kwargs})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trainer.fit(model, *(loaders if isinstance(loaders, tuple) else (loaders,)))
    return trainer, logger, [str(w.message) for w in caught if "InputPipelineMonitor" in str(w.message)]


def test_slow_data_is_measured_and_warned_about_once_with_advice(tmp_path, clock):
    monitor = InputPipelineMonitor(warn_wait_fraction=0.3, min_batches=4)
    loader = DataLoader(SlowDataset(delay=0.06), batch_size=1)
    model = SlowStep(delay=0.005)
    _, logger, messages = _fit(tmp_path, model, loader, monitor, max_steps=9, log_every_n_steps=3)
    assert [s for s, _ in logger.history("input_pipeline/wait_fraction")] == [2, 5, 8]
    assert min(logger.values("input_pipeline/fetch_ms")) >= 59  # the sleep is a lower bound
    assert min(logger.values("input_pipeline/step_ms")) >= 4.9
    assert logger.last("input_pipeline/fetch_ms_max") >= logger.last("input_pipeline/fetch_ms")
    assert logger.last("input_pipeline/wait_fraction") > 0.4
    assert len(messages) == 1, messages
    assert len(messages[0]) <= 350, messages[0]  # issue 32: one or two sentences, not the loader's settings
    assert "set `num_workers` > 0" in messages[0]
    assert monitor.warned


def test_fast_data_is_not_warned_about(tmp_path, clock):
    monitor = InputPipelineMonitor(warn_wait_fraction=0.5, min_batches=3)
    loader = random_classification_loader()
    model = SlowStep(delay=0.04)
    _, logger, messages = _fit(tmp_path, model, loader, monitor, max_steps=6, log_every_n_steps=3)
    assert messages == []
    assert logger.last("input_pipeline/wait_fraction") < 0.5
    assert logger.last("input_pipeline/step_ms") >= 39


def test_validation_between_batches_is_excluded(tmp_path, clock):
    monitor = InputPipelineMonitor(warn_wait_fraction=0.2, min_batches=2)
    loaders = (random_classification_loader(), random_classification_loader())
    _, logger, _ = _fit(tmp_path, SlowStep(delay=0.01, val_delay=0.2), loaders, monitor, max_steps=6,
                     log_every_n_steps=6, val_check_interval=2, limit_val_batches=1)  # fmt: skip
    leaked = "a 200 ms validation run leaked into the data wait"
    assert logger.last("input_pipeline/fetch_ms_max") < 150, leaked


def test_accumulation_and_epoch_start(tmp_path):
    monitor = InputPipelineMonitor(warn_wait_fraction=None)
    _, logger, _ = _fit(tmp_path, TinyClassifier(), random_classification_loader(num_samples=128), monitor,
                     max_epochs=2, accumulate_grad_batches=2, log_every_n_steps=1)  # fmt: skip
    # 4 batches per epoch -> optimizer steps at batches 1 and 3; logs only there
    assert [s for s, _ in logger.history("input_pipeline/step_ms")] == [0, 1, 2, 3]
    assert len(logger.values("input_pipeline/epoch_start_s")) == 4
    assert monitor.total_batches == 6  # 8 batches, the first of each epoch measured separately


def test_state_dict_round_trip_and_pickle():
    monitor = InputPipelineMonitor(warn_wait_fraction=0.3, prefix="data/")
    monitor.warned, monitor.total_fetch_s, monitor.total_step_s, monitor.total_batches = True, 1.5, 2.5, 40
    clone = pickle.loads(pickle.dumps(InputPipelineMonitor(warn_wait_fraction=0.3, prefix="data/")))
    clone.load_state_dict(monitor.state_dict())
    assert clone.state_dict() == monitor.state_dict()
    assert clone.state_key == monitor.state_key != InputPipelineMonitor().state_key
    fresh = InputPipelineMonitor()
    fresh.load_state_dict({})
    assert fresh.warned is False and fresh.total_batches == 0


def test_resume_restores_totals_and_the_warned_flag(tmp_path, clock):
    first = InputPipelineMonitor(warn_wait_fraction=0.3, min_batches=2)
    loader = DataLoader(SlowDataset(n=12, delay=0.02), batch_size=1)
    _fit(tmp_path, TinyClassifier(), loader, first, max_steps=4, enable_checkpointing=True,
         limit_train_batches=4)  # fmt: skip
    assert first.warned and first.total_batches == 3
    ckpt = next(tmp_path.rglob("*.ckpt"))
    resumed = InputPipelineMonitor(warn_wait_fraction=0.3, min_batches=2)
    settings = {"limit_train_batches": 4, "default_root_dir": tmp_path}
    trainer = fast_trainer(max_steps=12, max_epochs=3, callbacks=[resumed], **settings)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trainer.fit(TinyClassifier(), loader, ckpt_path=ckpt)
    assert resumed.total_batches > first.total_batches  # continued from the saved totals
    assert resumed.total_fetch_s > first.total_fetch_s
    assert resumed.total_fetch_s / resumed.total_batches >= 0.019  # every counted batch has its (slow) fetch
    assert not [w for w in caught if "InputPipelineMonitor" in str(w.message)], "warned again after resume"


class SleepIn(Callback):
    """Another callback's work (an EMA update, say): sleeps ``delay`` seconds in the named hook."""

    def __init__(self, hook: str, delay: float = 0.02) -> None:
        self.hook, self.delay = hook, delay

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        if self.hook == "on_train_batch_start":
            time.sleep(self.delay)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        if self.hook == "on_train_batch_end":
            time.sleep(self.delay)


@pytest.mark.parametrize("hook", ["on_train_batch_end", "on_train_batch_start"])
@pytest.mark.parametrize("monitor_first", [True, False])
def test_other_callbacks_work_is_not_data_wait(tmp_path, clock, hook, monitor_first):
    monitor = InputPipelineMonitor(warn_wait_fraction=0.2, min_batches=4)
    sleeper = SleepIn(hook, delay=0.05)
    callbacks = [monitor, sleeper] if monitor_first else [sleeper, monitor]
    loader = random_classification_loader(num_samples=512)
    model = TinyClassifier()
    trainer, _, messages = _fit(tmp_path, model, loader, callbacks, max_steps=10, log_every_n_steps=5)
    assert monitor.total_batches == 9  # the epoch's first batch is reported apart
    assert (monitor.total_fetch_s, monitor.total_step_s) == (0.0, pytest.approx(9 * 0.05))
    assert not messages
    assert [c for c in trainer.callbacks if c not in callbacks] == []  # no helper callback is left behind


@pytest.mark.parametrize("monitor_first", [True, False])
def test_slow_loader_is_still_data_wait_next_to_a_slow_callback(tmp_path, clock, monitor_first):
    monitor = InputPipelineMonitor(warn_wait_fraction=None)
    sleeper = SleepIn("on_train_batch_end", delay=0.005)
    callbacks = [monitor, sleeper] if monitor_first else [sleeper, monitor]
    trainer = fast_trainer(max_steps=8, logger=False, callbacks=callbacks, default_root_dir=tmp_path)
    loader = DataLoader(SlowDataset(delay=0.02), batch_size=1)
    trainer.fit(TinyClassifier(in_features=16, num_classes=4), loader)
    assert monitor.total_batches == 7
    # every loader sleep is data wait, the callback's sleep is not
    assert monitor.total_fetch_s == pytest.approx(7 * 0.02)
    assert monitor.total_step_s == pytest.approx(7 * 0.005)


class HookAfterStep(TinyClassifier):
    """Sleeps in the LightningModule's own ``on_train_batch_end`` (Lightning runs it after every callback's,
    so the monitor counts it in the gap before the next batch): a wait that is not the loader's."""

    def __init__(self, delay: float) -> None:
        super().__init__()
        self.delay = delay

    def on_train_batch_end(self, outputs: Any, batch: Any, batch_idx: int) -> None:
        time.sleep(self.delay)


class OneSlowItem(SlowDataset):
    """Item 40 takes ``delay`` seconds once: one long wait, not a slow pipeline."""

    def __init__(self, delay: float) -> None:
        super().__init__(256)
        self.once, self.slow_done = delay, False

    def __getitem__(self, i: int) -> Any:
        if i == 40 and not self.slow_done:
            self.slow_done = True
            time.sleep(self.once)
        return super().__getitem__(i)


def test_an_in_memory_tensor_dataset_is_not_told_to_use_workers(tmp_path: Any) -> None:
    """Issue 22.3: a TensorDataset (workers make it 1.4-2.5x slower) is not told `num_workers > 0`."""
    dataset = TensorDataset(torch.randn(4096, 16), torch.randint(0, 4, (4096,)))
    loader = DataLoader(dataset, batch_size=512)  # 512 index operations + a stack per batch: a real wait
    monitor = InputPipelineMonitor(warn_wait_fraction=1e-6, min_batches=4)  # any wait warns: read the advice
    messages = _fit(tmp_path, TinyClassifier(), loader, monitor, max_steps=7)[2]
    assert len(messages) == 1, messages
    assert "num_workers` > 0" not in messages[0]
    assert "in-memory TensorDataset" in messages[0] and "num_workers" not in messages[0]
    assert "Building one batch in this process takes" in messages[0]
    assert len(messages[0]) <= 350, messages[0]  # issue 32: short, one change named


def test_a_wait_the_loader_does_not_explain_is_not_blamed_on_it(tmp_path: Any, clock: VirtualTime) -> None:
    """Regression (issue 22.3): with num_workers == 0 the monitor advised workers whatever filled the gap."""
    loader = DataLoader(SlowDataset(256), batch_size=32)
    monitor = InputPipelineMonitor(warn_wait_fraction=0.05, min_batches=4)
    messages = _fit(tmp_path, HookAfterStep(delay=0.03), loader, monitor, max_steps=8)[2]
    assert len(messages) == 1, messages
    assert "num_workers` > 0" not in messages[0]
    assert "most of the wait is not the loader" in messages[0] and "on_train_batch_end" in messages[0]


def test_one_long_wait_is_no_evidence_of_a_slow_pipeline(tmp_path: Any, clock: VirtualTime) -> None:
    """Issue 22.3: one 0.4 s wait among 5 ms steps (the typical batch does not wait) gives no advice."""
    loader = DataLoader(OneSlowItem(delay=0.4), batch_size=8)  # item 40: the 6th batch
    monitor = InputPipelineMonitor(warn_wait_fraction=0.3, min_batches=4)
    messages = _fit(tmp_path, SlowStep(delay=0.005), loader, monitor, max_steps=12)[2]
    assert monitor.total_fetch_s == pytest.approx(0.4) and messages == []


def test_timing_a_batch_restores_the_rng() -> None:
    class Noisy(SlowDataset):
        def __getitem__(self, i: int) -> Any:
            return self.x[i] + torch.randn(16), self.y[i]

    loader = DataLoader(Noisy(), batch_size=4)
    state = torch.get_rng_state()
    assert time_batch_build_ms(loader) is not None
    assert torch.equal(state, torch.get_rng_state())


def test_the_advice_is_short_and_says_only_what_would_help() -> None:
    """Issue 32: the ~900-character warning is one change per advice, <= 250 characters, no won't-help."""
    tensors = TensorDataset(torch.randn(64, 16))
    slow = SlowDataset(256, 0.002)  # ~16 ms a batch of 8
    cases = [  # a loader, its fetch and step time (ms), what the advice says
        (DataLoader(tensors, batch_size=8), 1e-3, 1, "in-memory TensorDataset"),  # the batch build explains
        (DataLoader(tensors, batch_size=8, num_workers=2), 3, 1, "Try `num_workers=0` and compare"),
        (DataLoader(SlowDataset(256), batch_size=8), 1e3, 1, "most of the wait is not the loader"),
        (DataLoader(slow, batch_size=8), 1, 1, "num_workers"),  # per-sample work, no workers
        (DataLoader(slow, batch_size=8, num_workers=2), 8, 1, "cannot keep up"),  # 8 ms per worker
        (DataLoader(slow, batch_size=8, num_workers=2), 8, 100, "inconclusive"),  # enough workers
    ]
    for loader, fetch_ms, step_ms, says in cases:
        text = loader_advice(loader, fetch_ms=fetch_ms, step_ms=step_ms, device_type="cpu")
        assert says in text and len(text) <= 250, text
        assert "not help" not in text and "not indicated" not in text, text
