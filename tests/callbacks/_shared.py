"""Helpers the callback tests share: per-rank dumps, hook counters, a kill switch, a resumable loader."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import torch
from lightning.pytorch.callbacks import Callback
from torch import Tensor
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.data import DataLoader

from lightning_recipes.callbacks import HealthMonitor
from lightning_recipes.testing import HostSyncCounter
from tests.helpers.health_gallery import MLP


class DumpPerRank(Callback):
    """At the end of training, each rank saves ``dump(trainer, pl_module)`` to ``directory/rank{r}.pt``."""

    def __init__(self, directory: Path, dump: Callable[[pl.Trainer, pl.LightningModule], Any]) -> None:
        self.directory, self.dump = directory, dump

    def on_train_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        torch.save(self.dump(trainer, pl_module), Path(self.directory, f"rank{trainer.global_rank}.pt"))


def per_rank(directory: Path) -> list[Any]:
    """What ranks 0 and 1 saved in ``directory``."""
    return [torch.load(Path(directory, f"rank{r}.pt"), weights_only=False) for r in (0, 1)]


def callback_of(trainer: pl.Trainer, kind: type) -> Any:
    return next(cb for cb in trainer.callbacks if isinstance(cb, kind))  # type: ignore[attr-defined]


def counted(base: type, hooks: tuple[str, ...], into: str = "syncs", counter: type = HostSyncCounter) -> type:
    """``base`` whose ``hooks`` each run under a ``counter``: ``self.<into>`` gets an entry at each call of
    the first hook, to which the others' counts (``counter.count``) add (one entry per step when the first
    opens a step; a count that is a list of ops is extended)."""

    def wrap(name: str) -> Callable[..., None]:
        def hook(self: Any, *args: Any, **kwargs: Any) -> None:
            with counter() as c:
                getattr(base, name)(self, *args, **kwargs)
            counts = self.__dict__.setdefault(into, [])
            if name == hooks[0]:
                counts.append(type(c.count)())
            counts[-1] += c.count

        return hook

    return type(f"Counted{base.__name__}", (base,), {name: wrap(name) for name in hooks})


class AppliedGradient(Callback):
    """The gradient SGD applied, ``(p_before - p_after) / lr`` (not ``.grad``): accumulated, unscaled."""

    def __init__(self, lr: float) -> None:
        self.lr, self.grads, self._before = lr, [], None  # type: ignore[var-annotated]

    def on_before_optimizer_step(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, *args: Any
    ) -> None:
        self._before = torch.cat([p.detach().flatten() for p in pl_module.parameters()]).clone()

    def on_train_batch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule, *args: Any) -> None:
        if self._before is not None:
            after = torch.cat([p.detach().flatten() for p in pl_module.parameters()])
            self.grads.append((self._before - after) / self.lr)
            self._before = None

    @property
    def norms(self) -> list[float]:
        return [float(g.double().norm()) for g in self.grads]


class OpCounter(TorchDispatchMode):
    """The device ops dispatched while active, by name (a work count: no clock)."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: list[str] = []

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        self.ops.append(str(func))
        return func(*args, **(kwargs or {}))

    @property
    def count(self) -> list[str]:
        return self.ops


STEP_HOOKS = tuple(
    ["on_train_batch_start", "on_before_backward", "on_before_optimizer_step", "on_train_batch_end"]
)
#: a HealthMonitor counting host syncs in its hooks, per optimizer step (``syncs``)
SyncCounting = counted(HealthMonitor, STEP_HOOKS)


class CountedForward(MLP):
    """The forward pass (with the monitor's hooks on sampled steps) under a sync counter."""

    def __init__(self) -> None:
        super().__init__(act="tanh", widths=(16, 32, 4))
        self.net.append(torch.nn.ReLU())  # a ReLU hook too
        self.forward_syncs: list[int] = []

    def training_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> Tensor:
        with HostSyncCounter() as counter:
            loss = super().training_step(batch, batch_idx)
        self.forward_syncs.append(counter.count)
        return loss


class Kill(Callback):
    """Simulates the process dying at the start of optimizer step ``at_step``."""

    def __init__(self, at_step: int) -> None:
        self.at_step = at_step

    def on_train_batch_start(self, trainer: pl.Trainer, *args: Any) -> None:
        if trainer.global_step == self.at_step:
            raise KeyError("killed")  # not a RuntimeError: must not be mistaken for a guard error


class ResumableLoader(DataLoader):
    """A DataLoader that can resume mid-epoch (Lightning saves and restores its ``state_dict``)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._served = 0
        self._skip = 0

    def __iter__(self) -> Iterator[Any]:
        skip, self._skip = self._skip, 0
        self._served = skip
        for index, batch in enumerate(super().__iter__()):
            if index >= skip:
                self._served += 1
                yield batch

    def state_dict(self) -> dict[str, int]:
        return {"served": self._served}

    def load_state_dict(self, state_dict: dict[str, int]) -> None:
        self._skip = state_dict["served"]
