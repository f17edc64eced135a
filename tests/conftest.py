"""Shared fixtures: seeding, offline wandb, no leaked process groups or environment variables."""

from __future__ import annotations

import os

import pytest
import torch
import torch.distributed


@pytest.fixture(autouse=True)
def _isolate(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory):
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path_factory.mktemp("wandb")))
    saved_env = dict(os.environ)
    torch.manual_seed(0)
    yield
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()
    for key in set(os.environ) - set(saved_env):
        if key.startswith(("MASTER_", "LOCAL_RANK", "NODE_RANK", "WORLD_SIZE", "RANK", "PL_")):
            del os.environ[key]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if torch.cuda.is_available():
        return
    skip_gpu = pytest.mark.skip(reason="needs a CUDA device; run on a GPU machine")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip_gpu)
