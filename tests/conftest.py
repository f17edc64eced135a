"""Shared fixtures: seeding, offline wandb, no leaked process groups, ranks or environment variables."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
import torch
import torch.distributed
from lightning.fabric.utilities.rank_zero import rank_zero_only as fabric_rank_zero_only
from lightning.pytorch.utilities.rank_zero import rank_zero_only

from tests.helpers.floor import mark_floor

# Variables that Lightning itself writes into the test process while it sets up a multi-process strategy
# in-process (`ddp_spawn` / `ddp_fork` launchers and the cluster environments export the rendezvous for their
# workers). They are removed after each test; any other variable a test leaves behind fails that test.
LIGHTNING_OWNED_ENV = frozenset(
    {
        "MASTER_ADDR",
        "MASTER_PORT",
        "PL_GLOBAL_SEED",
        "PL_SEED_WORKERS",
        "LOCAL_RANK",
        "NODE_RANK",
        "WORLD_SIZE",
        "RANK",
        "OMP_NUM_THREADS",  # set to 1 for multi-process strategies when unset (_set_num_threads_if_needed)
        "CUBLAS_WORKSPACE_CONFIG",  # set by Trainer(deterministic=True)
        "CUDA_DEVICE_ORDER",  # set to PCI_BUS_ID by Lightning's CUDA accelerator
        "TRITON_CACHE_DIR",  # set by torch's Inductor at its first Triton (CUDA) compile
        "TRITON_PTXAS_PATH",  # likewise
    }
)
# Written by the tools themselves: pytest between the phases of every test; wandb when it starts its service;
# scikit-learn (and joblib) at their first import, for the OpenMP runtime; torch.compile's Inductor.
TOOL_OWNED_ENV = frozenset(
    {
        "PYTEST_CURRENT_TEST",
        "WANDB_SERVICE",
        "KMP_DUPLICATE_LIB_OK",
        "KMP_INIT_AT_FORK",
        "_TORCHINDUCTOR_PYOBJECT_TENSOR_DATA_PTR",
    }
)


@pytest.fixture(autouse=True)
def _isolate(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory):
    saved_env = dict(os.environ)
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path_factory.mktemp("wandb")))
    # A Trainer built for a cluster environment (SLURM, torchrun with 2 nodes ...) sets the process-global
    # `rank_zero_only.rank`; left at 1 it silences every later logger in this process.
    saved_ranks = [getattr(fn, "rank", 0) for fn in (rank_zero_only, fabric_rank_zero_only)]
    torch.manual_seed(0)
    yield
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()
    for fn, rank in zip((rank_zero_only, fabric_rank_zero_only), saved_ranks):
        fn.rank = rank  # type: ignore[attr-defined]
    monkeypatch.undo()  # what the test set through `monkeypatch` is restored, not a leak
    leaked = _env_changes(saved_env, dict(os.environ))
    os.environ.clear()
    os.environ.update(saved_env)
    unexpected = sorted(name for name in leaked if name not in LIGHTNING_OWNED_ENV | TOOL_OWNED_ENV)
    if unexpected:
        pytest.fail(
            f"the test changed environment variables and left them changed: {unexpected}. Set them through "
            "`monkeypatch.setenv` (restored after the test) or restore them in the test.",
            pytrace=False,
        )


def _env_changes(before: dict[str, str], after: dict[str, str]) -> set[str]:
    return {name for name in before.keys() | after.keys() if before.get(name) != after.get(name)}


@pytest.fixture
def one_torch_thread() -> Iterator[None]:
    """One intra-op thread for the test, restored after it (tiny models; no oversubscribed cores)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by marker
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    mark_floor(config, items)
    if torch.cuda.is_available():
        return
    skip_gpu = pytest.mark.skip(reason="needs a CUDA device; run on a GPU machine")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip_gpu)


def pytest_configure(config: pytest.Config) -> None:
    """Under pytest-xdist, each worker an equal share of the cores for torch's intra-op threads."""
    workers = os.environ.get("PYTEST_XDIST_WORKER_COUNT")
    if workers:
        torch.set_num_threads(max(1, len(os.sched_getaffinity(0)) // int(workers)))
