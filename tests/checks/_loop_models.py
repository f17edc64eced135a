"""Tiny LightningModules for the optimisation and validation-path checks: healthy ones and their buggy
twins (module level, so that they pickle)."""

from __future__ import annotations

import copy
from typing import Any

import lightning.pytorch as pl
import torch
from torch import Tensor, nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset

IN, C = 16, 4


#: Per-feature offsets and the scale of the raw inputs of :func:`loader` with ``raw=True``.
OFFSETS = 10.0 * torch.randn(IN, generator=torch.Generator().manual_seed(1))
SCALE = 4.0


def loader(n: int = 128, batch_size: int = 32, *, raw: bool = False) -> DataLoader:
    """Learnable classification data (a linear teacher); with ``raw``, inputs ``SCALE * x + OFFSETS`` that
    need normalising."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(n, IN, generator=g)
    y = (x @ torch.randn(IN, C, generator=g)).argmax(-1)
    return DataLoader(TensorDataset(SCALE * x + OFFSETS if raw else x, y), batch_size=batch_size)


class ManualMLP(pl.LightningModule):
    """Manual optimisation; ``mode`` picks the loop: ``"healthy"``, ``"no_zero_grad"``, ``"step_first"``
    (step before the backward), ``"missing"`` (a used submodule left out of the optimizer),
    ``"accumulate"`` (two micro-batches per step, one clear per step)."""

    def __init__(self, mode: str = "healthy", lr: float = 0.05) -> None:
        super().__init__()
        self.automatic_optimization = False
        self.mode = mode
        self.lr = lr
        self.net = nn.Sequential(nn.Linear(IN, 32), nn.ReLU(), nn.Linear(32, C))
        self.side = nn.Linear(IN, C)

    def forward(self, x: Tensor) -> Tensor:
        return self.net(x) + self.side(x)

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        opt = self.optimizers()
        x, y = batch
        loss = F.cross_entropy(self(x), y)
        if self.mode == "no_zero_grad":
            self.manual_backward(loss)
            opt.step()
        elif self.mode == "step_first":
            opt.zero_grad()
            opt.step()
            self.manual_backward(loss)
        elif self.mode == "accumulate":
            self.manual_backward(loss / 2)
            if batch_idx % 2 == 1:
                opt.step()
                opt.zero_grad()
        else:
            opt.zero_grad()
            self.manual_backward(loss)
            opt.step()
        self.log("train_loss", loss)
        return loss

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        x, y = batch
        self.log("val_loss", F.cross_entropy(self(x), y))

    def configure_optimizers(self) -> Any:
        params = self.net.parameters() if self.mode == "missing" else self.parameters()
        return torch.optim.SGD(params, lr=self.lr, momentum=0.9)


class AutoMLP(pl.LightningModule):
    """Automatic optimisation, cross-entropy, Adam; validation logs ``val_loss`` and ``val_acc``."""

    def __init__(self, lr: float = 1e-2, dropout: float = 0.0, batchnorm: bool = False) -> None:
        super().__init__()
        self.lr = lr
        norm: nn.Module = nn.BatchNorm1d(32) if batchnorm else nn.Identity()
        self.net = nn.Sequential(nn.Linear(IN, 32), norm, nn.ReLU(), nn.Dropout(dropout), nn.Linear(32, C))

    def forward(self, x: Tensor) -> Tensor:
        return self.net(x)

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        x, y = batch
        loss = F.cross_entropy(self(x), y)
        self.log("train_loss", loss)
        return loss

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        x, y = batch
        logits = self(x)
        self.log("val_loss", F.cross_entropy(logits, y))
        self.log("val_acc", (logits.argmax(-1) == y).float().mean())

    def configure_optimizers(self) -> Any:
        return torch.optim.Adam(self.parameters(), lr=self.lr)


class NoOpZeroGrad(AutoMLP):
    """An ``optimizer_zero_grad`` override that does nothing: gradients pile up across steps."""

    def optimizer_zero_grad(self, epoch: int, batch_idx: int, optimizer: Any) -> None:
        pass


class ClippedGradients(AutoMLP):
    """Gradients clipped in place before each step: a healthy look-alike of "not the backward's
    gradients"."""

    def on_before_optimizer_step(self, optimizer: Any) -> None:
        torch.nn.utils.clip_grad_norm_(self.parameters(), 0.05)


class AccuracyOnly(AutoMLP):
    """Validation logs accuracy only, computed without a loss function."""

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        x, y = batch
        self.log("val_acc", (self(x).argmax(-1) == y).float().mean())


class NoValidation(AutoMLP):
    validation_step = pl.LightningModule.validation_step  # type: ignore[assignment]


class EMAModel(AutoMLP):
    """Validation runs an exponential moving average of ``net``; ``update=False`` never updates it."""

    def __init__(self, update: bool = True, decay: float = 0.9, lr: float = 1e-2) -> None:
        super().__init__(lr=lr)
        self.update, self.decay = update, decay
        self.ema = copy.deepcopy(self.net).requires_grad_(False)

    def on_train_batch_end(self, outputs: Any, batch: Any, batch_idx: int) -> None:
        if self.update:
            with torch.no_grad():
                for e, p in zip(self.ema.parameters(), self.net.parameters()):
                    e.lerp_(p, 1 - self.decay)

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        x, y = batch
        self.log("val_loss", F.cross_entropy(self.ema(x), y))


class Normalised(AutoMLP):
    """Inputs normalised with the data's statistics in ``training_step``; ``val_raw=True`` forgets it in
    ``validation_step`` (a validation transform that differs from training's)."""

    def __init__(self, val_raw: bool = False, lr: float = 1e-2) -> None:
        super().__init__(lr=lr)
        self.val_raw = val_raw

    def prep(self, x: Tensor) -> Tensor:
        return (x - OFFSETS) / SCALE

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        x, y = batch
        loss = F.cross_entropy(self(self.prep(x)), y)
        self.log("train_loss", loss)
        return loss

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        x, y = batch
        x = x if self.val_raw else self.prep(x)
        self.log("val_loss", F.cross_entropy(self(x), y))


class TwoHeads(AutoMLP):
    """Two heads on one backbone; training uses ``head``, validation ``aux`` when ``wrong_head``."""

    def __init__(self, wrong_head: bool = False, lr: float = 1e-2) -> None:
        super().__init__(lr=lr)
        self.wrong_head = wrong_head
        self.backbone = nn.Sequential(nn.Linear(IN, 32), nn.ReLU())
        self.head = nn.Linear(32, C)
        self.aux = nn.Linear(32, C)

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        x, y = batch
        loss = F.cross_entropy(self.head(self.backbone(x)), y)
        self.log("train_loss", loss)
        return loss

    def validation_step(self, batch: Any, batch_idx: int) -> Tensor:
        x, y = batch
        head = self.aux if self.wrong_head else self.head
        loss = F.cross_entropy(head(self.backbone(x)), y)
        self.log("val_loss", loss)
        return loss

    def configure_optimizers(self) -> Any:
        return torch.optim.Adam(list(self.backbone.parameters()) + list(self.head.parameters()), lr=self.lr)


class TwoOptimizers(pl.LightningModule):
    """Manual optimisation with two optimizers (``net`` and ``side``); ``shared_backward`` steps both after
    one backward of the summed loss, else each after its own backward (a GAN-like alternation)."""

    def __init__(self, shared_backward: bool = False) -> None:
        super().__init__()
        self.automatic_optimization = False
        self.shared_backward = shared_backward
        self.net = nn.Sequential(nn.Linear(IN, 32), nn.ReLU(), nn.Linear(32, C))
        self.side = nn.Linear(IN, C)

    def training_step(self, batch: Any, batch_idx: int) -> None:
        opt_net, opt_side = self.optimizers()
        x, y = batch
        if self.shared_backward:
            opt_net.zero_grad()
            opt_side.zero_grad()
            self.manual_backward(F.cross_entropy(self.net(x) + self.side(x), y))
            opt_net.step()
            opt_side.step()
            return
        for opt, module in ((opt_net, self.net), (opt_side, self.side)):
            opt.zero_grad()
            self.manual_backward(F.cross_entropy(module(x), y))
            opt.step()

    def configure_optimizers(self) -> Any:
        return torch.optim.SGD(self.net.parameters(), lr=0.05), torch.optim.Adam(self.side.parameters(), 1e-2)


class SwappedEMA(AutoMLP):
    """An EMA kept as plain tensors and swapped into the model's own parameters for validation (as averaging
    callbacks do); ``update=False`` never updates it."""

    def __init__(self, update: bool = True, decay: float = 0.95) -> None:
        super().__init__()
        self.update, self.decay = update, decay
        self.shadow: list[Tensor] | None = None
        self.backup: list[Tensor] = []

    def on_train_start(self) -> None:
        self.shadow = [p.detach().clone() for p in self.parameters()]

    def on_train_batch_end(self, outputs: Any, batch: Any, batch_idx: int) -> None:
        if self.update and self.shadow is not None:
            with torch.no_grad():
                for s, p in zip(self.shadow, self.parameters()):
                    s.lerp_(p, 1 - self.decay)

    def on_validation_start(self) -> None:
        if self.shadow is not None:
            self.backup = [p.detach().clone() for p in self.parameters()]
            with torch.no_grad():
                for s, p in zip(self.shadow, self.parameters()):
                    p.copy_(s)

    def on_validation_end(self) -> None:
        if self.shadow is not None:
            with torch.no_grad():
                for b, p in zip(self.backup, self.parameters()):
                    p.copy_(b)


class FitStartEMA(AutoMLP):
    """``torch.optim.swa_utils.AveragedModel`` built in ``on_fit_start`` (so it exists only inside a fit),
    updated after each batch unless ``update=False``; validation runs it."""

    def __init__(self, update: bool = True) -> None:
        super().__init__()
        self.update = update

    def on_fit_start(self) -> None:
        multi_avg_fn = torch.optim.swa_utils.get_ema_multi_avg_fn(0.9)
        self.ema = torch.optim.swa_utils.AveragedModel(self.net, multi_avg_fn=multi_avg_fn)

    def on_train_batch_end(self, outputs: Any, batch: Any, batch_idx: int) -> None:
        if self.update:
            self.ema.update_parameters(self.net)

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        x, y = batch
        self.log("val_loss", F.cross_entropy(self.ema(x), y))


class StagedMLP(AutoMLP):
    """The first layer frozen for one epoch (the head warms up), unfrozen from the second; ``trainable_only``
    (the BUG): the optimizer holds only the parameters trainable when it is built."""

    def __init__(self, trainable_only: bool = False) -> None:
        super().__init__()
        self.trainable_only = trainable_only
        self.net[0].requires_grad_(False)

    def on_train_epoch_start(self) -> None:
        if self.current_epoch == 1:
            self.net[0].requires_grad_(True)

    def configure_optimizers(self) -> Any:
        params = [p for p in self.parameters() if p.requires_grad or not self.trainable_only]
        return torch.optim.Adam(params, lr=self.lr)


class HeadInitMLP(AutoMLP):
    """A custom head initialisation in ``hook``: ``"on_fit_start"`` (once) or ``"on_train_epoch_start"`` (the
    BUG: every epoch throws the trained head away)."""

    def __init__(self, hook: str = "on_fit_start") -> None:
        super().__init__()
        setattr(self, hook, self._init_head)

    def _init_head(self) -> None:
        nn.init.normal_(self.net[-1].weight, std=0.01)
        nn.init.zeros_(self.net[-1].bias)

    def on_train_epoch_end(self) -> None:  # an epoch hook of its own: the 3-epoch trial runs for both
        self.log("epoch_done", float(self.current_epoch))


class DataModuleStaged(AutoMLP):
    """Advances its datamodule's curriculum from epoch 1 (``self.trainer.datamodule``): a hook the copy's
    trial, which has no datamodule, cannot run past epoch 0."""

    def on_train_epoch_start(self) -> None:
        if self.current_epoch >= 1:
            self.trainer.datamodule.next_stage()  # type: ignore[union-attr]
