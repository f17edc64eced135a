"""The recipe finds the per-device batch size of the training loader, whatever bounds the run or the loader
holds, and the global batch counts every DDP process and accumulation."""

from __future__ import annotations

import logging
import pickle

import lightning.pytorch as pl
import pytest
import torch
from lightning.pytorch.callbacks import Callback
from torch import nn
from torch.nn import functional as F
from torch.utils.data import BatchSampler, DataLoader, Dataset, RandomSampler

from lightning_recipes.mixins import OptimizerRecipeMixin
from lightning_recipes.recipe import OptimizerRecipe
from lightning_recipes.testing import fast_trainer, random_classification_loader


class DictNet(OptimizerRecipeMixin, pl.LightningModule):
    """Trains on `(x, y)` tuples or `{"x": ..., "y": ...}` dicts."""

    def __init__(self, recipe: OptimizerRecipe | None = None) -> None:
        super().__init__()
        self.recipe = recipe
        self.net = nn.Linear(16, 4)

    def training_step(self, batch, batch_idx):
        x, y = (batch["x"], batch["y"]) if isinstance(batch, dict) else batch
        return F.cross_entropy(self.net(x), y)


class DictDataset(Dataset):
    def __init__(self, n: int = 64) -> None:
        generator = torch.Generator().manual_seed(0)
        self.x = torch.randn(n, 16, generator=generator)
        self.y = torch.randint(0, 4, (n,), generator=generator)

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {"x": self.x[i], "y": self.y[i]}


class DataModule(pl.LightningDataModule):
    def train_dataloader(self) -> DataLoader:
        return DataLoader(DictDataset(), batch_size=8)


def _scaled_recipe() -> OptimizerRecipe:
    return OptimizerRecipe(lr=0.01, scale_lr="linear", base_batch_size=4, schedule="none")


def _loaders() -> dict[str, DataLoader]:
    dataset = DictDataset()
    return {
        "tuple batches": random_classification_loader(num_samples=64, batch_size=8),
        "dict batches": DataLoader(dataset, batch_size=8),
        "batch_sampler": DataLoader(dataset, batch_sampler=BatchSampler(RandomSampler(dataset), 8, False)),
    }


@pytest.mark.parametrize("loader_kind", ["tuple batches", "dict batches", "batch_sampler"])
@pytest.mark.parametrize(
    "bounds", [{"max_steps": 3, "max_epochs": None}, {"max_epochs": 1}, {"max_steps": 3, "max_epochs": -1}]
)
def test_batch_size_is_found_however_the_run_is_bounded(loader_kind, bounds, caplog):
    model = DictNet(_scaled_recipe())
    with caplog.at_level(logging.INFO):
        fast_trainer(**bounds).fit(model, _loaders()[loader_kind])
    assert model.recipe_summary["global_batch_size"] == 8
    assert model.recipe_summary["peak_lr"] == pytest.approx(0.02)  # 0.01 x 8 / 4
    summary = next(r.getMessage() for r in caplog.records if r.getMessage().startswith("lightning_recipes:"))
    assert "global batch 8 = 8 x 1 devices x 1 nodes x 1 accumulation" in summary
    assert "unknown" not in summary


def test_batch_size_from_a_datamodule_with_max_steps():
    model = DictNet(_scaled_recipe())
    trainer = fast_trainer(max_steps=2, max_epochs=None, accumulate_grad_batches=3)
    trainer.fit(model, datamodule=DataModule())
    assert model.recipe_summary["global_batch_size"] == 24
    assert trainer.optimizers[0].param_groups[0]["lr"] == pytest.approx(0.06)


def test_batch_size_from_the_model_train_dataloader_with_max_steps():
    class OwnData(DictNet):
        def train_dataloader(self):
            return DataLoader(DictDataset(), batch_size=16)

    model = OwnData(_scaled_recipe())
    fast_trainer(max_steps=2, max_epochs=None).fit(model)
    assert model.recipe_summary["global_batch_size"] == 16


class _AssertGlobalBatch(Callback):
    def on_train_end(self, trainer, pl_module):  # runs in each worker
        assert trainer.world_size == 2
        assert pl_module.recipe_summary["global_batch_size"] == 8 * 2 * 2
        assert trainer.optimizers[0].param_groups[0]["lr"] == pytest.approx(0.01 * 32 / 4)


@pytest.mark.parametrize(
    ("loader_kind", "use_distributed_sampler"),
    # Lightning itself cannot re-create a loader built on a plain torch BatchSampler with a DistributedSampler
    # (the rebuilt loader has no batching and training fails), so that case brings its own sampling
    [("dict batches", True), ("batch_sampler", False)],
)
def test_ddp_global_batch_is_batch_x_processes_x_accumulation_with_max_steps(
    loader_kind, use_distributed_sampler
):
    model = pickle.loads(pickle.dumps(DictNet(_scaled_recipe())))  # what ddp_spawn sends its ranks
    settings = {"max_steps": 2, "max_epochs": None, "strategy": "ddp_fork", "devices": 2}
    sampler = {"use_distributed_sampler": use_distributed_sampler}
    trainer = fast_trainer(accumulate_grad_batches=2, callbacks=[_AssertGlobalBatch()], **settings, **sampler)
    trainer.fit(model, _loaders()[loader_kind])
    assert trainer.state.finished
