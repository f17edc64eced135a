"""Shared fixtures: seeding, offline wandb, no leaked process groups, ranks or environment variables."""

from __future__ import annotations

import os

import pytest
import torch
import torch.distributed
from lightning.fabric.utilities.rank_zero import rank_zero_only as fabric_rank_zero_only
from lightning.pytorch.utilities.rank_zero import rank_zero_only


@pytest.fixture(autouse=True)
def _isolate(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory):
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path_factory.mktemp("wandb")))
    saved_env = dict(os.environ)
    # A Trainer built for a cluster environment (SLURM, torchrun with 2 nodes ...) sets the process-global
    # `rank_zero_only.rank`; left at 1 it silences every later logger in this process.
    saved_ranks = [getattr(fn, "rank", 0) for fn in (rank_zero_only, fabric_rank_zero_only)]
    torch.manual_seed(0)
    yield
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()
    for fn, rank in zip((rank_zero_only, fabric_rank_zero_only), saved_ranks):
        fn.rank = rank  # type: ignore[attr-defined]
    if dict(os.environ) != saved_env:
        os.environ.clear()
        os.environ.update(saved_env)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if torch.cuda.is_available():
        return
    skip_gpu = pytest.mark.skip(reason="needs a CUDA device; run on a GPU machine")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip_gpu)
