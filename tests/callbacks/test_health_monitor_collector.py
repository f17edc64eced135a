"""HealthMonitor's collected window: every field the rules read is filled by a real run, one sync a check."""

from __future__ import annotations

import math
import pickle
from dataclasses import asdict
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from lightning.pytorch.callbacks import Callback
from torch import Tensor, nn
from torch.utils.data import DataLoader, Dataset, TensorDataset

from lightning_recipes.callbacks import InputPipelineMonitor
from lightning_recipes.callbacks import health_monitor as health_monitor_module
from lightning_recipes.callbacks._health_collector import (
    KEEP_BYTES,
    LOSS_PIECES,
    StepRecords,
    loss_statistics,
    loss_vector,
    optimizer_family,
    weight_and_update_powers,
)
from lightning_recipes.callbacks._health_window import CheckData
from lightning_recipes.callbacks.health_monitor import HealthMonitor
from lightning_recipes.norms import group_powers
from lightning_recipes.optim import Lamb, Lion
from lightning_recipes.testing import fast_trainer
from tests.callbacks._shared import CountedForward, OpCounter, SyncCounting, counted, per_rank
from tests.helpers.health_gallery import MLP, StallClock, classification, loader


class Windows:
    """Records every check's :class:`CheckData` (wraps the monitor's real ``combine``)."""

    def __init__(self) -> None:
        self.checks: list[CheckData] = []
        self._real = health_monitor_module.combine

    def __call__(self, *args: Any, **kwargs: Any) -> CheckData:
        data = self._real(*args, **kwargs)
        self.checks.append(data)
        return data


@pytest.fixture
def windows(monkeypatch: pytest.MonkeyPatch) -> Windows:
    recorder = Windows()
    monkeypatch.setattr(health_monitor_module, "combine", recorder)
    return recorder


class TrainLosses(Callback):
    """A plain recorder of (global step at batch start, training loss)."""

    def __init__(self) -> None:
        self.rows: list[tuple[int, float]] = []
        self._step = 0

    def on_train_batch_start(self, trainer: pl.Trainer, *args: Any) -> None:
        self._step = trainer.global_step

    def on_train_batch_end(self, trainer: pl.Trainer, pl_module: Any, outputs: Any, *args: Any) -> None:
        self.rows.append((self._step, float(outputs["loss"])))


# ------------------------------------------------------------------------- loss trend, groups, planned steps


def test_loss_trend_group_numbers_and_planned_steps_match_the_run(windows: Windows) -> None:
    torch.manual_seed(0)
    losses = TrainLosses()
    monitor = HealthMonitor(check_every_n_steps=20)
    model = MLP(lr=0.2)
    fast_trainer(max_steps=40, max_epochs=-1, callbacks=[monitor, losses], limit_val_batches=0).fit(
        model, loader(classification())
    )
    first = windows.checks[0]
    steps = np.array([s for s, _ in losses.rows[:20]], dtype=float)
    values = np.array([v for _, v in losses.rows[:20]])
    slope, intercept = np.polyfit(steps, values, 1)
    residual = values - (slope * steps + intercept)
    slope_se = math.sqrt((residual**2).sum() / 18 / ((steps - steps.mean()) ** 2).sum())
    assert first.loss_count == 20
    assert first.loss_mean == pytest.approx(values.mean(), rel=1e-6)
    assert first.loss_std == pytest.approx(values.std(ddof=1), rel=1e-5)
    assert first.loss_slope == pytest.approx(slope, rel=1e-5) and first.loss_slope < 0  # the loss falls
    assert first.loss_slope_se == pytest.approx(slope_se, rel=1e-4)
    second = windows.checks[1]  # t counts from the interval's start: same slope formula on steps 20..39
    steps2 = np.array([s for s, _ in losses.rows[20:40]], dtype=float)
    values2 = np.array([v for _, v in losses.rows[20:40]])
    assert second.loss_slope == pytest.approx(np.polyfit(steps2, values2, 1)[0], rel=1e-5)
    sizes = {name: p.numel() for name, p in model.named_parameters()}
    assert first.group_numel == {
        f"net.{i}": sizes[f"net.{i}.weight"] + sizes[f"net.{i}.bias"] for i in (0, 2, 4)
    }
    assert first.group_lr == {name: 0.2 for name in first.group_numel}
    assert set(first.group_family.values()) == {"sgd"}
    assert first.planned_steps == 40.0


class StepGradients(Callback):
    """A plain recorder of each optimizer step: (step, squared gradient norm, batch index, batch number)."""

    def __init__(self) -> None:
        self.rows: list[tuple[int, float, int, int]] = []
        self._batch = (-1, -1)

    def on_train_batch_start(self, trainer: pl.Trainer, pl_module: Any, batch: Any, batch_idx: int) -> None:
        self._batch = (batch_idx, self._batch[1] + 1)

    def on_before_optimizer_step(self, trainer: pl.Trainer, pl_module: Any, optimizer: Any) -> None:
        grads = [p.grad for g in optimizer.param_groups for p in g["params"] if p.grad is not None]
        squared = float(sum(g.double().square().sum() for g in grads))
        self.rows.append((trainer.global_step, squared, *self._batch))


class TwoOptimizerMLP(MLP):
    """Manual optimization: two optimizers (the hidden layers, the head), each stepping once per batch."""

    def __init__(self) -> None:
        super().__init__()
        self.automatic_optimization = False

    def training_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> Tensor:
        loss = super().training_step(batch, batch_idx)
        hidden, head = self.optimizers()  # type: ignore[misc]
        hidden.zero_grad()
        head.zero_grad()
        self.manual_backward(loss)
        hidden.step()
        head.step()
        return loss

    def configure_optimizers(self) -> Any:
        return (
            torch.optim.SGD(self.net[:-1].parameters(), lr=0.1),
            torch.optim.SGD(self.net[-1].parameters(), lr=0.1),
        )


@pytest.mark.parametrize("mode", ["accumulate", "manual"])
def test_step_records_follow_the_optimizer_steps_under_accumulation_and_manual_optimization(
    windows: Windows, mode: str
) -> None:
    """Each optimizer step's gradient norm, inputs and loss land at its step (accumulation, manual)."""
    torch.manual_seed(0)
    recorder = StepGradients()
    monitor = HealthMonitor(check_every_n_steps=4)
    model = TwoOptimizerMLP() if mode == "manual" else MLP()
    extra = {"accumulate_grad_batches": 2} if mode == "accumulate" else {}
    trainer = fast_trainer(
        max_steps=8, max_epochs=-1, callbacks=[monitor, recorder], limit_val_batches=0, **extra
    )
    trainer.fit(model, loader(classification()))
    assert [c.step for c in windows.checks] == [4, 8]
    last_step = {number: step for step, _, _, number in recorder.rows}  # each batch's last optimizer step
    for check, start in zip(windows.checks, (0, 4)):
        rows = [r for r in recorder.rows if start <= r[0] < start + 4]
        assert [r[0] for r in check.step_records] == [step - start for step, _, _, _ in rows]
        norms = [r[1] for r in check.step_records]
        assert norms == pytest.approx([math.sqrt(squared) for _, squared, _, _ in rows], rel=1e-5)
        batches = [index if last_step[number] == step else -1 for step, _, index, number in rows]
        assert [r[2] for r in check.step_records] == batches
        assert check.loss_count == (8 if mode == "accumulate" else 2)  # every batch's loss, stepping or not


class OptimizerMLP(MLP):
    def __init__(self, make: Any) -> None:
        super().__init__()
        self.make = make

    def configure_optimizers(self) -> Any:
        return self.make(self.parameters())


def _two_lrs(params: list[nn.Parameter]) -> torch.optim.Optimizer:
    return torch.optim.SGD([{"params": params[0::2], "lr": 0.01}, {"params": params[1::2], "lr": 0.03}])


@pytest.mark.parametrize(
    ("make", "family", "lr"),
    [
        (lambda p: torch.optim.Adam(p, lr=torch.tensor(3e-3), foreach=False), "adaptive", 3e-3),  # tensor LR
        (lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9), "sgd", 0.05),
        (lambda p: Lion(p, lr=1e-4), "adaptive", 1e-4),
        (lambda p: Lamb(p, lr=1e-3), "adaptive", 1e-3),
        # weights 0.01, biases 0.03: a layer's group takes the largest LR of the param_groups holding it
        (lambda p: _two_lrs(list(p)), "sgd", 0.03),
    ],
    ids=["adam-tensor-lr", "sgd", "lion", "lamb", "largest-of-two-param-groups"],
)
def test_group_family_and_lr_of_the_underlying_optimizer(
    windows: Windows, make: Any, family: str, lr: float
) -> None:
    monitor = HealthMonitor(check_every_n_steps=4, activation_samples=0)
    fast_trainer(max_steps=4, callbacks=[monitor], limit_val_batches=0).fit(
        OptimizerMLP(make), loader(classification(n=128))
    )
    data = windows.checks[0]
    assert set(data.group_family.values()) == {family}
    assert data.group_lr == pytest.approx({name: lr for name in data.group_numel})


def test_optimizer_family_rule_by_class_name() -> None:
    params = [nn.Parameter(torch.zeros(2))]

    class Muon(torch.optim.SGD):  # orthogonalised updates: not per-element adaptive, whatever its base
        pass

    class MyAdamW(torch.optim.AdamW):  # named by a base
        pass

    class Wrapper:  # as Lightning's LightningOptimizer: the optimizer under `_optimizer`
        def __init__(self, inner: torch.optim.Optimizer) -> None:
            self._optimizer = inner

    assert optimizer_family(torch.optim.RMSprop(params)) == "adaptive"
    assert optimizer_family(torch.optim.Adagrad(params)) == "adaptive"
    assert optimizer_family(torch.optim.ASGD(params)) == "sgd"
    assert optimizer_family(torch.optim.LBFGS(params)) == "other"
    assert optimizer_family(Muon(params, lr=0.1)) == "other"
    assert optimizer_family(MyAdamW(params)) == "adaptive"
    assert optimizer_family(Wrapper(torch.optim.SGD(params, lr=0.1))) == "sgd"


# ------------------------------------------------------------------------------------------------ dead rows


class FunctionalRelu(pl.LightningModule):
    """Dead units through ``F.relu`` (no ReLU module): 80% of the hidden units have a -6 bias."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(16, 64), nn.Linear(64, 4)
        with torch.no_grad():
            self.fc1.bias[: int(0.8 * 64)] = -6.0

    def forward(self, x: Tensor) -> Tensor:
        return self.fc2(F.relu(self.fc1(x)))

    def training_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> Tensor:
        x, y = batch
        return F.cross_entropy(self(x), y)

    def validation_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> None:
        x, y = batch
        self.log("val_loss", F.cross_entropy(self(x), y))

    def configure_optimizers(self) -> Any:
        return torch.optim.SGD(self.parameters(), lr=0.1)


def test_dead_rows_see_units_dead_through_functional_relu(windows: Windows) -> None:
    torch.manual_seed(0)
    monitor = HealthMonitor(check_every_n_steps=10)
    fast_trainer(max_steps=20, max_epochs=-1, callbacks=[monitor], limit_val_batches=0).fit(
        FunctionalRelu(), loader(classification())
    )
    for data in windows.checks:
        assert data.dead == {}  # no ReLU module to hook
        assert data.dead_rows["fc1"] >= 0.7
        assert data.dead_rows["fc2"] == 0.0


def test_dead_rows_skip_layers_without_gradient(windows: Windows) -> None:
    monitor = HealthMonitor(check_every_n_steps=4)
    fast_trainer(max_steps=4, callbacks=[monitor], limit_val_batches=0).fit(
        MLP(freeze_base=True), loader(classification(n=128))
    )
    # the frozen layers have no gradient; no ReLU follows the trained head `net.4` (its rows cannot die)
    assert set(windows.checks[0].dead_rows) == set()


class SharedRelu(pl.LightningModule):
    """One ``nn.ReLU`` module after layers of 64 and 32 units (a common shortcut), then a head."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.fc2, self.head, self.act = (
            nn.Linear(16, 64),
            nn.Linear(64, 32),
            nn.Linear(32, 4),
            nn.ReLU(),
        )

    def forward(self, x: Tensor) -> Tensor:
        return self.head(self.act(self.fc2(self.act(self.fc1(x)))))

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        x, y = batch
        return F.cross_entropy(self(x), y)

    def configure_optimizers(self) -> Any:
        return torch.optim.SGD(self.parameters(), lr=0.1)


def test_a_relu_module_shared_by_layers_of_two_widths_is_not_measured_and_the_run_trains(
    windows: Windows,
) -> None:
    """Zoo 12 (blind): the shared ReLU's masks of 64 and 32 units were OR-ed together, and the run raised."""
    torch.manual_seed(0)
    monitor = HealthMonitor(check_every_n_steps=10)
    fast_trainer(max_steps=20, max_epochs=-1, callbacks=[monitor], limit_val_batches=0).fit(
        SharedRelu(), loader(classification())
    )
    assert len(windows.checks) == 2 and all(data.dead == {} for data in windows.checks)  # no one layer's
    assert all({"fc1", "fc2"} <= set(data.dead_rows) for data in windows.checks)  # the layers still are
    assert monitor.findings == []


class SharedTanh(SharedRelu):
    """One ``nn.Tanh`` module after both layers, the first layer's weights 100x too large (saturated)."""

    def __init__(self) -> None:
        super().__init__()
        self.act = nn.Tanh()
        with torch.no_grad():
            self.fc1.weight.mul_(100.0)


def test_a_tanh_module_shared_by_two_layers_is_measured_per_layer(windows: Windows) -> None:
    """Zoo 12 (blind): a shared ``nn.Tanh`` averaged a saturated layer with a healthy one (~50%), and the
    saturation went unnamed; each call is now its layer's, as a function's call on that layer's output is."""
    torch.manual_seed(0)
    monitor = HealthMonitor(check_every_n_steps=10)
    fast_trainer(max_steps=20, max_epochs=-1, callbacks=[monitor], limit_val_batches=0).fit(
        SharedTanh(), loader(classification())
    )
    for data in windows.checks:
        assert "act" not in data.saturated  # no average over the two layers
        assert data.saturated["fc1:tanh"] > 0.9 > 0.1 > data.saturated["fc2:tanh"]
    assert [f.problem for f in monitor.findings] == ["saturated_activations"]
    assert list(monitor.findings[0].evidence["saturated_fraction"]) == ["fc1:tanh"]


# ------------------------------------------------------------------------------------------------ data wait


class SlowBatches(Dataset):
    """Whole batches (``batch_size=None``), each taking ``delay`` seconds of a StallClock to load."""

    def __init__(self, batches: int, delay: float, clock: StallClock, seed: int = 0) -> None:
        data = classification(n=32 * batches, seed=seed)
        self.x, self.y = data.tensors
        self.batches, self.delay, self.sleep = batches, delay, clock.sleep

    def __len__(self) -> int:
        return self.batches

    def __getitem__(self, i: int) -> tuple[Tensor, Tensor]:
        if self.delay:
            self.sleep(self.delay)
        return self.x[32 * i : 32 * (i + 1)], self.y[32 * i : 32 * (i + 1)]


def _wait_fit(
    delay: float, clock: StallClock, val_delay: float = 0.0, callbacks: tuple[Callback, ...] = ()
) -> HealthMonitor:
    monitor = HealthMonitor(check_every_n_steps=4, activation_samples=0)
    train = DataLoader(SlowBatches(8, delay, clock), batch_size=None)
    val = DataLoader(SlowBatches(2, val_delay, clock, seed=1), batch_size=None)
    trainer = fast_trainer(
        max_steps=8,
        max_epochs=-1,
        callbacks=[monitor, *callbacks],
        limit_val_batches=2 if val_delay else 0,
        val_check_interval=4,
    )
    trainer.fit(MLP(widths=(16, 8, 4)), train, val)
    return monitor


@pytest.mark.parametrize("pipeline", [False, True], ids=["host-timing", "input-pipeline-monitor"])
def test_wait_fraction_is_timed_under_the_clock_the_gallery_patches(windows: Windows, pipeline: bool) -> None:
    """Stalls counted under the gallery's StallClock, by the monitor or an InputPipelineMonitor."""
    clock = StallClock()
    with clock.installed():
        _wait_fit(delay=0.5, clock=clock, callbacks=(InputPipelineMonitor(),) if pipeline else ())
    assert clock.slept == pytest.approx(8 * 0.5)
    source = "InputPipelineMonitor" if pipeline else "host timing"
    assert [d.wait_source for d in windows.checks[:2]] == [source] * 2
    assert all(d.wait_fraction is not None and d.wait_fraction > 0.5 for d in windows.checks[:2])


def test_wait_fraction_leaves_out_validation_between_batches(windows: Windows) -> None:
    """2 x 200 ms of validation loading (counted, not slept) is no wait for training data."""
    clock = StallClock()
    with clock.installed():
        _wait_fit(delay=0.0, clock=clock, val_delay=0.2)
    assert clock.slept == pytest.approx(2 * 2 * 0.2)  # both validations (steps 4 and 8) stalled
    assert all(d.wait_per_batch_s is not None and 0 <= d.wait_per_batch_s < 0.05 for d in windows.checks[:2])


# ------------------------------------------------------------------------------------------------ validation


def _per_sample_error(model: nn.Module, data: TensorDataset) -> float:
    x, y = data.tensors
    with torch.no_grad():
        losses = F.cross_entropy(model(x), y, reduction="none")
    return float(losses.std() / math.sqrt(len(losses)))


class MaxLoggedLoss(MLP):
    """Logs ``val_loss`` with a max reduction (no running mean to read), returns it from validation_step."""

    def validation_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> dict[str, Tensor]:
        x, y = batch
        loss = F.cross_entropy(self(x), y)
        self.log("val_loss", loss, reduce_fx="max")
        return {"val_loss": loss}


@pytest.mark.parametrize("model_class", [MLP, MaxLoggedLoss], ids=["logged-mean", "returned-loss"])
def test_validation_standard_error_and_count(windows: Windows, model_class: type[MLP]) -> None:
    torch.manual_seed(0)
    val = classification(n=60, seed=3)  # 8 batches of 8, the last of 4
    monitor = HealthMonitor(check_every_n_steps=50)
    model = model_class(lr=0.05)
    trainer = fast_trainer(max_epochs=1, callbacks=[monitor])
    trainer.fit(model, loader(classification()), DataLoader(val, batch_size=8))
    (row,) = [v for d in windows.checks for v in d.validations]
    _, _, _, se, count = row
    assert count == 60
    assert math.isfinite(se) and 0.5 < se / _per_sample_error(model, val) < 2.0


# ------------------------------------------------------------------------- per-step records (outlier batches)


def _scan_rows(batch: Any) -> tuple[int, float]:
    """The row with the batch's largest |value| and that value, by a plain scan (``(-1, nan)``: none)."""
    best_row, best = -1, math.nan
    tensors = [t for t in (batch.values() if isinstance(batch, dict) else batch) if isinstance(t, Tensor)]
    for t in tensors:
        if not t.is_floating_point():
            continue
        rows = [max(abs(float(v)) for v in t[r].reshape(-1)) for r in range(t.shape[0])]
        row = max(range(len(rows)), key=lambda r: rows[r])
        if best_row < 0 or rows[row] > best:
            best_row, best = row, rows[row]
    return best_row, best


def test_step_records_are_the_squared_norms_and_the_rows_a_plain_scan_finds() -> None:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(3, 4, 6, generator=g).permute(2, 0, 1)  # 6 samples, not contiguous
    x[4, 1, 2] = -50.0
    target = torch.randn(6, generator=g).half()
    target[2] = 7.0
    louder = target.clone()
    louder[1] = 999.0
    labels = torch.arange(6)
    # each batch its own tensors, as a loader yields them (one buffer refilled: the test below)
    batches = [(x, target, labels), {"x": x.clone(), "y": louder}, (labels, labels)]
    grads = [torch.randn(5, 3, generator=g), torch.randn(5, generator=g), torch.randn(2, generator=g)]
    records = StepRecords()
    for position, batch in enumerate(batches):
        records.gradients(position, grads[:2])
        records.inputs(position, batch, 10 + position)
    records.gradients(1, grads[2:])  # a second optimizer in the same step adds up
    packed = records.pack(4, torch.device("cpu")).reshape(4, 4).tolist()
    squared = [float(sum(t.double().square().sum() for t in grads[:n])) for n in (2, 3, 2)]
    for position, batch in enumerate(batches):
        row, value = _scan_rows(batch)
        assert packed[position][:3] == [pytest.approx(squared[position]), 10 + position, row]
        assert packed[position][3] == value or (math.isnan(value) and math.isnan(packed[position][3]))
    assert [packed[0][2], packed[1][2], packed[2][2]] == [4, 1, -1]  # x's -50, then y's 999, then none
    assert math.isnan(packed[3][0]) and packed[3][1:3] == [-1, -1] and math.isnan(packed[3][3])
    records.clear()
    assert all(math.isnan(v) for v in records.pack(4, torch.device("cpu"))[0::4].tolist())


def test_step_records_of_one_tensor_batches_of_two_shapes_are_what_a_plain_scan_finds() -> None:
    """One tensor per batch, a shorter last batch, a step without a batch, one without gradients."""
    g = torch.Generator().manual_seed(2)
    batches = [(torch.randn(n, 5, generator=g), torch.zeros(n, dtype=torch.long)) for n in (8, 8, 3, 8)]
    batches[2][0][1, 4] = -40.0
    grads = [torch.randn(4, generator=g), torch.randn(2, 3, generator=g)]
    records = StepRecords()
    for position, batch in enumerate(batches):
        if position != 1:
            records.gradients(position, grads)
        records.inputs(position, batch, 20 + position)
    packed = records.pack(5, torch.device("cpu")).reshape(5, 4).tolist()
    squared = float(sum(t.double().square().sum() for t in grads))
    for position, batch in enumerate(batches):
        row, value = _scan_rows(batch)
        assert packed[position][1:] == [20 + position, row, value]
        assert (
            math.isnan(packed[position][0])
            if position == 1
            else packed[position][0] == pytest.approx(squared)
        )
    assert packed[2][2:] == [1, 40.0]
    assert math.isnan(packed[4][0]) and packed[4][1:3] == [-1, -1] and math.isnan(packed[4][3])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
def test_weight_and_update_powers_are_norms_group_powers_per_group(dtype: torch.dtype) -> None:
    """The same numbers as ``group_powers``; a non-finite weight only in its own group."""
    g = torch.Generator().manual_seed(3)
    shapes = [(70, 1000), (7,), (3, 4), (5,), (2, 2, 2)]  # one above norms.py's BLAS size, then small ones
    weights = [torch.randn(*shape, generator=g).to(dtype) for shape in shapes]
    updates = [1e-3 * torch.randn(*shape, generator=g).to(dtype) for shape in shapes]
    owners = [2, 0, 2, 1, 0]
    with OpCounter() as counter:
        weight, update = weight_and_update_powers(weights, updates, owners, 4)
    if dtype == torch.float32:
        assert counter.ops.count("aten._foreach_norm.Scalar") == 1
        assert counter.ops.count("aten.index_add_.default") == 1
    assert weight.dtype == update.dtype == torch.float64
    for got, tensors in ((weight, weights), (update, updates)):
        want = group_powers(tensors, owners, 4).double()
        assert got.tolist() == pytest.approx(want.tolist(), rel=1e-5)
    assert weight[3].item() == update[3].item() == 0.0  # a group without tensors
    weights[3][1] = math.nan
    weight, _ = weight_and_update_powers(weights, updates, owners, 4)
    assert [math.isfinite(v) for v in weight.tolist()] == [True, False, True, True]


@pytest.mark.parametrize("length", [0, 1, 5, 7, 8, 9, 50])
def test_loss_statistics_are_the_sums_head_first_and_first_nonfinite_a_plain_loop_finds(length: int) -> None:
    g = torch.Generator().manual_seed(length)
    values = torch.randn(length, generator=g).exp()
    if length > 3:
        values[2], values[length - 1] = math.nan, math.inf
    steps = list(range(0, 2 * length, 2))
    losses = loss_vector(list(values.unbind()))
    with OpCounter() as counter:
        packed = loss_statistics(losses, steps, torch.device("cpu")).tolist()
    assert len(counter.ops) <= 18, counter.ops  # one matrix product for the nine sums (was 30 ops)
    assert len(packed) == sum(size for _, size in LOSS_PIECES)
    finite = [(t, v) for t, v in zip(steps, values.double().tolist()) if math.isfinite(v)]
    # [finite, loss, loss^2] times [1, t, t^2], over the finite losses
    sums = [sum(v**a * t**b for t, v in finite) for a in (0, 1, 2) for b in (0, 1, 2)]
    assert packed[:9] == pytest.approx(sums, rel=1e-12) and packed[0] == len(finite)
    head = values[:5].double().mean().item() if length else math.nan
    assert packed[9] == pytest.approx(head, nan_ok=True)
    assert packed[10] == pytest.approx(values[0].item() if length else math.nan, nan_ok=True)  # the first
    if length > 3:  # the first loss that is not finite; where all are, the count tells (0 here)
        assert packed[11] == 2
    else:
        assert packed[0] == length and packed[11] == 0


def test_step_records_keep_batches_for_one_scan_at_the_check_and_fall_back_where_that_is_unsafe() -> None:
    """Batches scanned at the check unless changed in place, refilled, or over ``KEEP_BYTES``."""
    g = torch.Generator().manual_seed(1)
    xs = [torch.randn(8, 5, generator=g) for _ in range(4)]
    for k, x in enumerate(xs):
        x[k + 1, k] = 100.0 + k  # the extreme row of step k is k + 1
    records, labels = StepRecords(), torch.zeros(8, dtype=torch.long)
    with OpCounter() as counter:
        for k, x in enumerate(xs):
            records.inputs(k, (x, labels), k)
    assert counter.ops == []  # nothing scanned at the steps
    xs[2].mul_(2.0)  # changed in place after its step: not what the step saw
    packed = records.pack(4, torch.device("cpu")).reshape(4, 4).tolist()
    assert [r[2] for r in packed] == [1, 2, -1, 4] and [r[3] for r in packed][:2] == [100.0, 101.0]
    assert math.isnan(packed[2][3]) and records.keep_batches

    records = StepRecords()
    buffer = torch.zeros(8, 5)
    for k, x in enumerate(xs[:3]):
        buffer.numpy()[:] = x.numpy()  # refilled outside torch: no version bump, the same address
        records.inputs(k, (buffer,), k)
    packed = records.pack(3, torch.device("cpu")).reshape(3, 4).tolist()
    assert not records.keep_batches  # from the second step on, each step scans its batch
    assert [r[2] for r in packed] == [-1, 2, 3] and math.isnan(packed[0][3]) and packed[2][3] == 204.0

    records = StepRecords()
    big = torch.zeros(KEEP_BYTES // 4 + 1)
    big[7] = -3.0
    with OpCounter() as counter:
        records.inputs(0, big.reshape(1, -1), 0)
    assert "aten.max.dim" in counter.ops and records.keep_batches  # too large to keep: scanned now
    assert records.pack(1, torch.device("cpu")).tolist()[2:] == [0.0, 3.0]


# ------------------------------------------------------------------------------------------------ syncs


ValidationSyncCounting = counted(SyncCounting, ("on_validation_batch_end", "on_validation_end"), "val_syncs")


def test_new_fields_add_no_sync_between_checks(windows: Windows) -> None:
    monitor = ValidationSyncCounting(check_every_n_steps=5, activation_samples=2)
    model = CountedForward()
    fast_trainer(
        max_steps=10, max_epochs=-1, callbacks=[monitor], limit_val_batches=2, val_check_interval=5
    ).fit(model, loader(classification()), loader(classification(n=64)))
    assert model.forward_syncs == [0] * 10
    assert monitor.syncs == [0, 0, 0, 0, 1, 0, 0, 0, 0, 1]
    assert monitor.val_syncs and sum(monitor.val_syncs) == 0
    data = windows.checks[1]
    assert data.dead_rows and data.group_lr and data.loss_count == 5 and data.validations


# ------------------------------------------------------------------------------------------------- DDP


class RecordWindows(Callback):
    """In each spawned process: wrap the monitor's ``combine`` and save the checks' windows per rank."""

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self.recorder: Windows | None = None

    def setup(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        self.recorder = Windows()
        health_monitor_module.combine = self.recorder  # type: ignore[assignment]

    def on_train_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        assert self.recorder is not None
        health_monitor_module.combine = self.recorder._real  # type: ignore[assignment]
        rows = [asdict(d) for d in self.recorder.checks]
        torch.save(rows, Path(self.directory) / f"rank{trainer.global_rank}.pt")


def test_ddp_new_fields_are_identical_on_every_rank(tmp_path: Path) -> None:
    """Forked ranks with a pickled monitor and model, as ddp_spawn's (no fresh interpreters)."""
    monitor = pickle.loads(pickle.dumps(HealthMonitor(check_every_n_steps=8, activation_samples=1)))
    trainer = fast_trainer(
        max_steps=8,
        max_epochs=-1,
        strategy="ddp_fork",
        devices=2,
        limit_val_batches=2,
        val_check_interval=4,
        callbacks=[monitor, RecordWindows(str(tmp_path))],
    )
    data = DataLoader(classification(), batch_size=16)
    model = pickle.loads(pickle.dumps(FunctionalRelu()))
    trainer.fit(model, data, DataLoader(classification(n=64, seed=2), batch_size=16))
    ranks = per_rank(tmp_path)
    assert repr(ranks[0]) == repr(ranks[1])  # NaN-safe equality
    first = ranks[0][0]
    assert first["loss_count"] == 16  # 8 steps x 2 ranks
    assert first["dead_rows"]["fc1"] >= 0.7 and first["group_lr"] == {"fc1": 0.1, "fc2": 0.1}
    assert first["wait_source"] == "host timing" and first["planned_steps"] == 8.0
    assert [v[4] for v in first["validations"]] == [64]  # 2 batches of 16 on each of 2 ranks


# ------------------------------------------------ the model's own input-free guess (issue #35, zoo 3)


class BlindMLP(MLP):
    """An MLP fed zeros: its prediction is the same for every row, whatever the input."""

    def forward(self, x: Tensor) -> Tensor:
        return super().forward(torch.zeros_like(x))


@pytest.mark.parametrize("blind", [False, True], ids=["learns", "input-free"])
def test_the_input_free_gain_is_the_loss_of_the_models_batch_mean_prediction_minus_its_own(
    windows: Windows, blind: bool
) -> None:
    """A learning classifier beats its batch-mean prediction; a blind one does exactly as well."""
    torch.manual_seed(0)
    monitor = HealthMonitor(check_every_n_steps=20)
    model = (BlindMLP if blind else MLP)(lr=0.2)
    fast_trainer(max_steps=60, max_epochs=-1, callbacks=[monitor], limit_val_batches=0).fit(
        model, loader(classification())
    )
    last = windows.checks[-1]
    assert last.input_free_loss == pytest.approx(math.log(4), rel=0.1)  # about the prior's entropy
    if blind:
        assert abs(last.input_free_gap) < 1e-5 and last.input_free_gap_se < 1e-5
    else:
        assert last.input_free_gap > 0.1 * last.input_free_loss
        assert last.input_free_gap > 3 * last.input_free_gap_se


def test_the_input_free_guess_replaces_every_prediction_and_keeps_the_loss_options() -> None:
    """``gaussian_nll_loss``'s variance is a prediction too; a class weight and ``label_smoothing`` stay."""
    from lightning_recipes.callbacks._health_collector import InputFreeLoss

    mu, var, y = torch.tensor([0.0, 2.0]), torch.tensor([1.0, 3.0]), torch.tensor([0.0, 2.0])
    mode = InputFreeLoss()
    mode.start()
    F.gaussian_nll_loss(mu, y, var)
    mode.stop()
    own = F.gaussian_nll_loss(mu, y, var, reduction="none")
    guess = F.gaussian_nll_loss(torch.ones(2), y, torch.full((2,), 2.0), reduction="none")
    total, _, count, level, *_ = mode.pack(torch.device("cpu")).tolist()
    assert count == 2 and total == pytest.approx(float((guess - own).sum()))
    assert level == pytest.approx(float(guess.sum()))
    logits, labels, weight = (
        torch.randn(6, 3),
        torch.tensor([0, 1, 2, 0, 1, 2]),
        torch.tensor([1.0, 2.0, 3.0]),
    )
    mode = InputFreeLoss()
    mode.start()
    nn.CrossEntropyLoss(weight=weight, label_smoothing=0.1)(logits, labels)
    mode.stop()
    mean = logits.mean(0, keepdim=True).expand_as(logits)
    expected = F.cross_entropy(mean, labels, weight=weight, label_smoothing=0.1, reduction="none")
    expected = expected - F.cross_entropy(
        logits, labels, weight=weight, label_smoothing=0.1, reduction="none"
    )
    assert mode.pack(torch.device("cpu"))[0].item() == pytest.approx(float(expected.sum()), rel=1e-5)
