"""Short ``ddp_spawn`` fits of 2 gloo CPU workers (``python ddp_spawn_fits.py N [lightning|recipes]``), run by
test_ddp_spawn_teardown.py; each worker prints whether its process group was alive at exit. Imports nothing
from ``lightning_recipes.testing`` (that registers the same protection for our test workers).
"""

from __future__ import annotations

import atexit
import multiprocessing
import sys
import tempfile

import lightning.pytorch as pl
import torch
import torch.distributed as dist
from lightning.pytorch.strategies import DDPStrategy
from torch.utils.data import DataLoader, TensorDataset


def _report_at_exit() -> None:
    # registered on import, before the strategy's own handler: atexit runs handlers last-in first-out, so this
    # one sees the process group as the worker's shutdown (and gloo's teardown) will
    print(f"worker exit: process group alive={dist.is_initialized()}", flush=True)


if multiprocessing.current_process().name != "MainProcess":  # a spawned worker re-imports this file
    atexit.register(_report_at_exit)


class Tiny(pl.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(4, 1)

    def training_step(self, batch: list[torch.Tensor], batch_idx: int) -> torch.Tensor:
        x, y = batch
        return torch.nn.functional.mse_loss(self.layer(x), y)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.1)


def fit_once(kind: str, root: str) -> None:
    if kind == "recipes":
        from lightning_recipes.strategies import preset

        strategy = preset("ddp_spawn")
    else:
        strategy = DDPStrategy(start_method="spawn")
    data = TensorDataset(torch.randn(8, 4), torch.randn(8, 1))
    trainer = pl.Trainer(
        accelerator="cpu",
        devices=2,
        strategy=strategy,
        max_steps=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir=root,
    )
    trainer.fit(Tiny(), DataLoader(data, batch_size=4))


def main(runs: int, kind: str) -> None:
    failures = 0
    for i in range(runs):
        try:
            with tempfile.TemporaryDirectory() as root:
                fit_once(kind, root)
            print(f"fit {i} ok", flush=True)
        except Exception as err:
            failures += 1
            print(f"fit {i} failed: {type(err).__name__}: {str(err)[:200]}", flush=True)
    print(f"failures {failures} of {runs}", flush=True)


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2])
