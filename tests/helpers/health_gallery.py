"""HealthMonitor's gallery: tiny runs that go wrong in each named way, and healthy runs of several shapes.

:func:`run_case` times data waits on a :class:`StallClock` (thread CPU time plus counted stalls), so a busy
machine cannot change a verdict. Used by the gallery test and ``benchmarks/health_overhead.py``.

Example:
    >>> case = next(c for c in CASES if c.name == "loader_slows_down")
    >>> case.expected, case.onset_step
    (('data_stall',), 60)
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import lightning.pytorch as pl
import torch
from torch import Tensor, nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, Dataset, TensorDataset

from lightning_recipes.callbacks import input_pipeline_monitor
from lightning_recipes.callbacks.health_monitor import HealthMonitor
from lightning_recipes.callbacks.input_pipeline_monitor import InputPipelineMonitor
from lightning_recipes.testing.digits_cnn import DigitsCNN
from lightning_recipes.testing.models import (
    TinyTransformerLM,
    random_classification_loader,
    random_token_loader,
)
from lightning_recipes.testing.trainers import fast_trainer

__all__ = ["CASES", "MLP", "Case", "StallClock", "classification", "loader", "run_case"]


class StallClock:
    """This thread's CPU time plus the stalls :meth:`sleep` counted (outside :meth:`installed` it sleeps)."""

    def __init__(self) -> None:
        self.slept = 0.0
        self.virtual = False

    def perf_counter(self) -> float:
        return time.thread_time() + self.slept

    def sleep(self, seconds: float) -> None:
        if self.virtual:
            self.slept += seconds
        else:
            time.sleep(seconds)

    @contextlib.contextmanager
    def installed(self) -> Iterator[None]:
        """Within the block, ``InputPipelineMonitor`` times with this clock and :meth:`sleep` only counts."""
        saved = input_pipeline_monitor.time
        input_pipeline_monitor.time = self  # type: ignore[assignment]
        self.virtual = True
        try:
            yield
        finally:
            input_pipeline_monitor.time = saved
            self.virtual = False


CLOCK = StallClock()

CHECK_EVERY = 20


def _lr_multiplier(step: int, jump_at: int | None, factor: float) -> float:
    return factor if jump_at is not None and step >= jump_at else 1.0


class MLP(pl.LightningModule):
    """A configurable MLP classifier (activation modules, so the monitor's hooks see them)."""

    def __init__(
        self,
        widths: tuple[int, ...] = (16, 64, 64, 4),
        act: str = "relu",
        optimizer: str = "sgd",
        lr: float = 0.1,
        init_std: float | None = None,
        bias_init: float | None = None,
        lr_jump: tuple[int, float] | None = None,
        input_scale: tuple[int, float] | None = None,
        freeze_base: bool = False,
    ) -> None:
        super().__init__()
        acts = {"relu": nn.ReLU, "tanh": nn.Tanh, "sigmoid": nn.Sigmoid, "gelu": nn.GELU}
        layers: list[nn.Module] = []
        for i, (a, b) in enumerate(itertools.pairwise(widths)):
            linear = nn.Linear(a, b)
            if init_std is not None:
                nn.init.normal_(linear.weight, std=init_std / a**0.5)
            if bias_init is not None and i < len(widths) - 2:
                nn.init.constant_(linear.bias, bias_init)
            layers.append(linear)
            if i < len(widths) - 2:
                layers.append(acts[act]())
        self.net = nn.Sequential(*layers)
        if freeze_base:
            for param in self.net[:-1].parameters():
                param.requires_grad_(False)
        self.optimizer, self.lr, self.lr_jump, self.input_scale = optimizer, lr, lr_jump, input_scale

    def forward(self, x: Tensor) -> Tensor:
        if self.input_scale is not None and self.global_step >= self.input_scale[0]:
            x = x * self.input_scale[1]
        return self.net(x)

    def training_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> Tensor:
        x, y = batch
        return F.cross_entropy(self(x), y)

    def validation_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> None:
        x, y = batch
        self.log("val_loss", F.cross_entropy(self(x), y))

    def configure_optimizers(self) -> Any:
        params = [p for p in self.parameters() if p.requires_grad]
        if self.optimizer == "adam":
            optimizer: torch.optim.Optimizer = torch.optim.Adam(params, lr=self.lr)
        else:
            optimizer = torch.optim.SGD(params, lr=self.lr)
        jump_at, factor = self.lr_jump if self.lr_jump is not None else (None, 1.0)
        schedule = functools.partial(_lr_multiplier, jump_at=jump_at, factor=factor)
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, schedule)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}


class ImageCNN(DigitsCNN):
    """``DigitsCNN`` (conv + BatchNorm + ReLU) on synthetic 8x8 images, loss not logged (fast)."""

    def training_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> Tensor:
        x, y = batch
        return F.cross_entropy(self(x), y)


class LM(TinyTransformerLM):
    def training_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> Tensor:
        tokens, target = batch
        return self.loss(self(tokens), target)


class SlowAfter(Dataset):
    """A dataset that becomes slow (``delay_s`` per sample) after ``after`` samples were read."""

    def __init__(self, base: TensorDataset, after: int, delay_s: float) -> None:
        self.base, self.after, self.delay_s, self.reads = base, after, delay_s, 0

    def __len__(self) -> int:
        return len(self.base)  # type: ignore[arg-type]

    def __getitem__(self, index: int) -> Any:
        self.reads += 1
        if self.reads > self.after:
            CLOCK.sleep(self.delay_s)
        return self.base[index]


class CorruptAfter(Dataset):
    """A dataset whose samples carry an ``inf`` feature after ``after`` reads (a corrupted shard)."""

    def __init__(self, base: TensorDataset, after: int) -> None:
        self.base, self.after, self.reads = base, after, 0

    def __len__(self) -> int:
        return len(self.base)  # type: ignore[arg-type]

    def __getitem__(self, index: int) -> Any:
        self.reads += 1
        x, y = self.base[index]
        if self.reads > self.after:
            x = x.clone()
            x[0] = float("inf")
        return x, y


def classification(n: int = 256, batch: int = 32, seed: int = 0, random_labels: float = 0.0) -> TensorDataset:
    base = random_classification_loader(num_samples=n, batch_size=batch, seed=seed)
    x, y = base.dataset.tensors  # type: ignore[attr-defined]
    if random_labels:
        generator = torch.Generator().manual_seed(seed + 1)
        flip = torch.rand(n, generator=generator) < random_labels
        y = torch.where(flip, torch.randint(0, 4, (n,), generator=generator), y)
    return TensorDataset(x, y)


def _images(n: int = 256, seed: int = 0) -> TensorDataset:
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 1, 8, 8, generator=generator)
    teacher = torch.randn(64, 10, generator=generator)
    return TensorDataset(x, (x.flatten(1) @ teacher).argmax(-1))


@dataclass
class Case:
    """One gallery run: how to build it, what it must be diagnosed with."""

    name: str
    build: Any  # () -> (model, train loader, val loader or None, max_steps, max_epochs)
    expected: tuple[str, ...]  # problems that must be found (empty: healthy)
    allowed: tuple[str, ...] = ()  # problems it may show as well
    onset_step: int = 0  # where the problem is introduced (mid-run cases)
    trainer_kwargs: dict[str, Any] = field(default_factory=dict)


def loader(dataset: Dataset, batch: int = 32, shuffle: bool = True) -> DataLoader:
    return DataLoader(dataset, batch_size=batch, shuffle=shuffle, generator=torch.Generator().manual_seed(0))


CASES = [
    # ---- healthy runs of several shapes
    Case("healthy_mlp", lambda: (MLP(), loader(classification()), None, 200, None), ()),
    Case(
        "healthy_cnn_bn",
        lambda: (ImageCNN(width=8, dropout=0.0), loader(_images()), None, 120, None),
        (),
    ),
    Case(
        "healthy_transformer_lm",
        lambda: (
            LM(vocab_size=32, d_model=32, n_layers=2, max_seq_len=16),
            loader(random_token_loader(num_samples=256, seq_len=16, vocab_size=32).dataset, batch=16),
            None,
            120,
            None,
        ),
        (),
    ),
    Case(
        "healthy_finetune_frozen_base",
        lambda: (
            MLP(optimizer="adam", lr=1e-2, freeze_base=True),
            loader(classification()),
            None,
            160,
            None,
        ),
        (),
    ),
    # ---- broken from the start
    Case(
        "vanishing_deep_sigmoid",
        lambda: (
            MLP(widths=(16,) + (32,) * 8 + (4,), act="sigmoid"),
            loader(classification()),
            None,
            120,
            None,
        ),
        ("vanishing_gradients",),
    ),
    Case(
        "dead_relu_negative_bias",
        lambda: (MLP(bias_init=-6.0), loader(classification()), None, 120, None),
        ("dead_units",),
    ),
    Case(
        "saturated_tanh_large_init",
        lambda: (MLP(act="tanh", init_std=12.0, lr=0.01), loader(classification()), None, 120, None),
        ("saturated_activations",),
    ),
    Case(
        "lr_too_low",
        lambda: (MLP(lr=1e-7), loader(classification()), None, 120, None),
        ("lr_too_low",),
    ),
    Case(
        "plateau_random_labels",
        lambda: (
            MLP(optimizer="adam", lr=1e-3, widths=(16, 8, 4)),
            loader(classification(n=2048, random_labels=1.0)),
            None,
            200,
            None,
        ),
        ("loss_plateau",),
    ),
    # ---- healthy at first, then broken mid-run
    Case(
        "lr_jumps_mid_run",
        lambda: (
            MLP(act="gelu", optimizer="adam", lr=1e-3, lr_jump=(100, 50.0)),
            loader(classification()),
            None,
            200,
            None,
        ),
        ("lr_too_high",),
        allowed=("exploding_gradients",),
        onset_step=100,
    ),
    Case(
        "exploding_input_scale_mid_run",
        lambda: (
            MLP(optimizer="adam", lr=1e-3, input_scale=(100, 1e4)),
            loader(classification()),
            None,
            200,
            None,
        ),
        ("exploding_gradients",),
        onset_step=100,
    ),
    Case(
        "overfitting_onset",
        lambda: (
            MLP(widths=(16, 256, 256, 4), optimizer="adam", lr=1e-3),
            loader(classification(n=96, random_labels=0.3), batch=32),
            loader(classification(n=256, seed=7), shuffle=False),
            None,
            40,
        ),
        ("overfitting",),
        onset_step=0,
    ),
    Case(
        "loader_slows_down",
        lambda: (MLP(), loader(SlowAfter(classification(), after=32 * 60, delay_s=0.002)), None, 120, None),
        ("data_stall",),
        onset_step=60,
    ),
    Case(
        "nonfinite_input_mid_run",
        lambda: (MLP(), loader(CorruptAfter(classification(), after=32 * 100)), None, 160, None),
        ("nonfinite_activations",),
        onset_step=100,
    ),
]


def run_case(case: Case, **monitor_kwargs: Any) -> HealthMonitor:
    """Train ``case`` with a HealthMonitor (and an InputPipelineMonitor on the :class:`StallClock`)."""
    torch.manual_seed(0)
    model, train, val, max_steps, max_epochs = case.build()
    monitor = HealthMonitor(check_every_n_steps=CHECK_EVERY, on_finding=lambda f: None, **monitor_kwargs)
    trainer = fast_trainer(
        max_steps=max_steps or -1,
        max_epochs=max_epochs or 1000,
        callbacks=[InputPipelineMonitor(warn_wait_fraction=None), monitor],
        limit_val_batches=1.0 if val is not None else 0,
        **case.trainer_kwargs,
    )
    with CLOCK.installed():
        trainer.fit(model, train, val)
    return monitor
