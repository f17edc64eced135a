"""HealthMonitor on issue #35's misses (a large MLP overfitting, a borderline stall), with look-alikes."""

from __future__ import annotations

import math
from typing import Any

import lightning.pytorch as pl
import pytest
import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.utils.data import DataLoader, Dataset, TensorDataset

from galleries.health.field._field_models import FieldModule
from lightning_recipes.callbacks import input_pipeline_monitor
from lightning_recipes.callbacks.health_monitor import Finding, HealthMonitor
from lightning_recipes.testing import fast_trainer
from tests.helpers.speed import VirtualTime

pytestmark = pytest.mark.usefixtures("one_torch_thread")


# ---------------------------------------------------------------------------------------------- overfitting


def _classify(net: nn.Module, lr: float, sgd: bool = False) -> FieldModule:
    """Cross-entropy on ``net``; SGD with momentum or AdamW."""
    return FieldModule(
        net, lambda p: torch.optim.SGD(p, lr=lr, momentum=0.9) if sgd else torch.optim.AdamW(p, lr=lr)
    )


def _rows(n: int, seed: int, d: int = 20, noise: float = 0.2) -> TensorDataset:
    """A linear rule with noise on the score (~7% of labels flip)."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, d, generator=g)
    w = torch.randn(d, generator=torch.Generator().manual_seed(99))
    y = ((x @ w + noise * math.sqrt(d) * torch.randn(n, generator=g)) > 0).long()
    return TensorDataset(x, y)


def _tabular(width: int, lr: float, n: int) -> tuple[list[Finding], HealthMonitor]:
    torch.manual_seed(0)
    found: list[Finding] = []
    monitor = HealthMonitor(check_every_n_steps=10, on_finding=found.append)
    trainer = fast_trainer(max_epochs=12, max_steps=-1, callbacks=[monitor], num_sanity_val_steps=0)
    train = DataLoader(_rows(n, 1), batch_size=32, shuffle=True)
    net = nn.Sequential(
        nn.Linear(20, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU(), nn.Linear(width, 2)
    )
    trainer.fit(_classify(net, lr), train, DataLoader(_rows(n, 2), batch_size=8))
    return found, monitor


def test_a_large_mlp_memorising_a_hundred_rows_is_overfitting() -> None:
    found, monitor = _tabular(width=1024, lr=3e-3, n=100)
    vals = [v[1] for v in monitor._history.validations]
    trains = [v[2] for v in monitor._history.validations]
    assert max(vals[-3:]) > 1.8 * min(vals) and trains[-1] < 0.01  # validation doubled, training at ~0
    assert [f.problem for f in found] == ["overfitting"], [(f.problem, f.step, f.evidence) for f in found]
    evidence = found[0].evidence
    assert evidence["gl"] > 50 and evidence["train_loss"] < 0.01


def test_a_small_mlp_on_four_hundred_rows_that_generalises_is_left_alone() -> None:
    found, monitor = _tabular(width=64, lr=1e-3, n=400)
    vals = [v[1] for v in monitor._history.validations]
    assert vals[-1] < 0.5 * vals[0]  # it learns, and validation follows
    assert found == [], [(f.problem, f.step, f.evidence) for f in found]


# ---------------------------------------------------------------------------------------------- data_stall


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> VirtualTime:
    """The monitors' timer on a clock only the sleeps here advance: the test decides every wait and step."""
    virtual = VirtualTime()
    monkeypatch.setattr(input_pipeline_monitor, "time", virtual)
    return virtual


STEP_S = 0.02


class TimedBatches(Dataset):
    """Whole batches (``batch_size=None``); loading batch ``i`` takes ``waits[i]`` seconds of the clock."""

    def __init__(self, waits: list[float], clock: VirtualTime) -> None:
        self.waits, self.clock = waits, clock
        g = torch.Generator().manual_seed(0)
        self.x = torch.randn(len(waits), 16, 8, generator=g)
        self.y = torch.randint(0, 2, (len(waits), 16), generator=g)

    def __len__(self) -> int:
        return len(self.waits)

    def __getitem__(self, i: int) -> tuple[Tensor, Tensor]:
        self.clock.sleep(self.waits[i])
        return self.x[i], self.y[i]


class TimedStep(pl.LightningModule):
    """A linear classifier whose step takes ``STEP_S`` seconds of the clock."""

    def __init__(self, clock: VirtualTime) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 2)
        self.clock = clock

    def training_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> Tensor:
        self.clock.sleep(STEP_S)
        x, y = batch
        return F.cross_entropy(self.fc(x), y)

    def configure_optimizers(self) -> Any:
        return torch.optim.SGD(self.parameters(), lr=0.01)


def _waits_for(fractions: list[float], per_check: int = 10) -> list[float]:
    """Per batch, the wait that makes each check's wait fraction ``fractions[k]`` (with ``STEP_S`` steps)."""
    return [f / (1.0 - f) * STEP_S for f in fractions for _ in range(per_check)]


def _stall_run(fractions: list[float], clock: VirtualTime) -> list[Finding]:
    found: list[Finding] = []
    monitor = HealthMonitor(check_every_n_steps=10, activation_samples=0, on_finding=found.append)
    trainer = fast_trainer(max_steps=10 * len(fractions), max_epochs=1, callbacks=[monitor])
    trainer.fit(TimedStep(clock), DataLoader(TimedBatches(_waits_for(fractions), clock), batch_size=None))
    return [f for f in found if f.problem == "data_stall"]


def test_a_busy_machines_borderline_wait_is_not_a_data_stall(clock: VirtualTime) -> None:
    # a large-batch run on a busy machine: 40-48% waiting, twice 53% in a row (the old rule's alarm)
    found = _stall_run([0.45, 0.40, 0.53, 0.53, 0.48, 0.42], clock)
    assert found == [], [(f.step, f.evidence) for f in found]


def test_a_loader_that_cannot_keep_up_is_a_data_stall(clock: VirtualTime) -> None:
    found = _stall_run([0.75] * 6, clock)
    assert [f.step for f in found] == [20]  # at the second check: 0.75 +- 0.1 over 19 batches
    assert found[0].evidence["mean_wait_fraction"] == pytest.approx(0.75, abs=0.03)


# ---------------------------------------------------------------------------------- saturated_activations


class Highway(nn.Module):
    """``x <- g * silu(H x) + (1 - g) * x`` with ``g = torch.sigmoid(G x)`` (a function, not a module)."""

    def __init__(self, gate_bias: float, width: int = 32, depth: int = 4) -> None:
        super().__init__()
        self.stem = nn.Linear(16, width)
        self.transforms = nn.ModuleList(nn.Linear(width, width) for _ in range(depth))
        self.gates = nn.ModuleList(nn.Linear(width, width) for _ in range(depth))
        for gate in self.gates:
            nn.init.constant_(gate.bias, gate_bias)
        self.head = nn.Linear(width, 4)

    def forward(self, x: Tensor) -> Tensor:
        x = self.stem(x)
        for transform, gate in zip(self.transforms, self.gates):
            g = torch.sigmoid(gate(x))
            x = g * F.silu(transform(x)) + (1 - g) * x
        return self.head(x)


def sigmoid_mlp(init_std: float | None) -> nn.Sequential:
    """16 -> 64 -> 64 -> 4 with ``nn.Sigmoid`` modules; weights ``N(0, init_std)`` when given."""
    layers: list[nn.Module] = []
    for a, b in ((16, 64), (64, 64)):
        layer = nn.Linear(a, b)
        if init_std is not None:
            nn.init.normal_(layer.weight, std=init_std)
        layers += [layer, nn.Sigmoid()]
    return nn.Sequential(*layers, nn.Linear(64, 4))


def _teacher_rows(n: int = 2048) -> TensorDataset:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(n, 16, generator=g)
    w = torch.randn(16, 4, generator=g)
    return TensorDataset(x, (torch.tanh(x @ w) + 0.1 * x[:, :4]).argmax(1))


def _fit(
    model: pl.LightningModule, steps: int = 60, loader: Any = None
) -> tuple[list[Finding], HealthMonitor]:
    """``steps`` on ``loader`` (shuffled teacher rows by default) under a monitor checking every 20 steps."""
    found: list[Finding] = []
    monitor = HealthMonitor(check_every_n_steps=20, on_finding=found.append)
    trainer = fast_trainer(max_steps=steps, max_epochs=-1, callbacks=[monitor], limit_val_batches=0)
    trainer.fit(model, loader or DataLoader(_teacher_rows(), batch_size=64, shuffle=True))
    return found, monitor


def test_a_highway_net_whose_gates_start_closed_has_saturated_gates() -> None:
    torch.manual_seed(0)
    found, _ = _fit(_classify(Highway(gate_bias=-10.0), 1e-3))
    assert [f.problem for f in found] == ["saturated_activations"], [(f.problem, f.evidence) for f in found]
    evidence = found[0].evidence
    assert set(evidence["saturated_fraction"]) == {f"net.gates.{i}:sigmoid" for i in range(4)}
    assert max(evidence["gain"].values()) < 1e-3  # ~4 sigmoid(-10): no gradient passes the gates
    assert max(evidence["grad_rms"].values()) < 1e-3 * max(evidence["largest_grad_rms"].values())


def test_a_highway_net_with_the_usual_gate_bias_is_left_alone() -> None:
    torch.manual_seed(0)
    found, monitor = _fit(_classify(Highway(gate_bias=-1.0), 1e-3))
    assert found == [], [(f.problem, f.evidence) for f in found]
    assert monitor._history.losses[-1] < 0.9 * monitor._history.losses[0]  # it learns


def test_a_sigmoid_mlp_initialised_too_large_is_saturated_even_while_its_loss_falls() -> None:
    torch.manual_seed(0)
    found, monitor = _fit(_classify(sigmoid_mlp(init_std=3.0), 0.1, sgd=True))
    assert monitor._history.losses[-1] < 0.8 * monitor._history.losses[0]  # the head still learns
    assert [f.problem for f in found] == ["saturated_activations"], [(f.problem, f.evidence) for f in found]
    assert set(found[0].evidence["saturated_fraction"]) == {"net.1", "net.3"}


def test_a_sigmoid_mlp_with_the_default_init_is_left_alone() -> None:
    torch.manual_seed(0)
    found, _ = _fit(_classify(sigmoid_mlp(init_std=None), 0.1, sgd=True))
    assert found == [], [(f.problem, f.evidence) for f in found]


class GRUClassifier(nn.Module):
    """A one-layer GRU over ``[B, T, 3]`` sequences, its last state to 4 classes."""

    def __init__(self) -> None:
        super().__init__()
        self.gru = nn.GRU(3, 32, batch_first=True)
        self.head = nn.Linear(32, 4)

    def forward(self, x: Tensor) -> Tensor:
        return self.head(self.gru(x)[0][:, -1])


def _sequences(scale: float, offset: float) -> DataLoader:
    """Class = which quarter the first channel's mean falls in; sensor units ``x * scale + offset``."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(1024, 12, 3, generator=g)
    y = torch.bucketize(x[:, :, 0].mean(1), torch.tensor([-0.2, 0.0, 0.2]))
    return DataLoader(TensorDataset(x * scale + offset, y), batch_size=32, shuffle=True)


def test_a_gru_fed_raw_sensor_units_has_saturated_gates() -> None:
    torch.manual_seed(0)
    found, _ = _fit(_classify(GRUClassifier(), 3e-3), loader=_sequences(40.0, 250.0))
    assert [f.problem for f in found] == ["saturated_activations"], [(f.problem, f.evidence) for f in found]
    assert set(found[0].evidence["saturated_fraction"]) == {"net.gru:gates"}


def test_a_gru_fed_standardised_inputs_is_left_alone() -> None:
    torch.manual_seed(0)
    found, monitor = _fit(_classify(GRUClassifier(), 3e-3), loader=_sequences(1.0, 0.0))
    assert found == [], [(f.problem, f.evidence) for f in found]
    assert monitor._history.losses[-1] < 0.9 * monitor._history.losses[0]  # it learns


# ----------------------------------------------------------------------------------------- outlier batches


def _sentinel_rows(sentinel: bool) -> tuple[TensorDataset, list[int]]:
    """Standardised rows; with ``sentinel``, six rows hold -999 in column 3 (a missing value's code)."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2048, 16, generator=g)
    y = x[:, :4].argmax(1)
    rows = torch.randperm(2048, generator=g)[:6].tolist() if sentinel else []
    x[rows, 3] = -999.0
    return TensorDataset(x, y), rows


def _outlier_run(sentinel: bool) -> tuple[list[Finding], list[int]]:
    data, rows = _sentinel_rows(sentinel)
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 4))
    return _fit(_classify(net, 1e-3), steps=40, loader=DataLoader(data, batch_size=64))[0], rows


def test_a_few_rows_with_a_sentinel_are_named_as_outlier_batches_with_their_rows() -> None:
    found, rows = _outlier_run(sentinel=True)
    assert [f.problem for f in found] == ["outlier_batches"], [(f.problem, f.evidence) for f in found]
    evidence = found[0].evidence
    assert evidence["grad_norm_vs_before"] > 30
    named = {(b, int(r.split()[3])) for b, r in zip(evidence["batches"], evidence["rows"])}
    assert named and named <= {divmod(row, 64) for row in rows}  # batch, row within it: the sentinel rows
    assert all("999" in r for r in evidence["rows"])
    assert evidence["steps"] == evidence["batches"]  # one epoch of 32 batches, not shuffled: step = batch


def test_the_same_rows_cleaned_get_no_finding() -> None:
    found, _ = _outlier_run(sentinel=False)
    assert found == [], [(f.problem, f.evidence) for f in found]
