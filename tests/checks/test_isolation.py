"""The checks never change the caller's model, optimizer, RNG streams or data loaders."""

from __future__ import annotations

import hashlib
import random

import numpy as np
import pytest
import torch

from lightning_recipes.checks import InputIndependenceCheck, OverfitBatchCheck, Preflight, preflight
from lightning_recipes.data import DigitsDataModule
from lightning_recipes.testing import DigitsCNN, fast_trainer

from . import _models as M


def _hash_state(model: torch.nn.Module) -> str:
    digest = hashlib.sha256()
    for name, tensor in model.state_dict().items():  # weights and BatchNorm running statistics
        digest.update(name.encode())
        digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    flags = [(n, p.requires_grad, p.grad is None) for n, p in model.named_parameters()]
    digest.update(repr((flags, model.training)).encode())
    return digest.hexdigest()


def _rng_fingerprint() -> str:
    digest = hashlib.sha256()
    digest.update(torch.get_rng_state().numpy().tobytes())
    digest.update(repr(random.getstate()).encode())
    state = np.random.get_state()
    digest.update(state[1].tobytes() + repr(state[2:]).encode())
    return digest.hexdigest()


@pytest.mark.parametrize("broken", [False, True], ids=["healthy", "broken"])
def test_preflight_leaves_weights_rng_and_loader_untouched(broken):
    torch.manual_seed(123)
    np.random.seed(7)
    random.seed(9)
    model = M.DetachedBranch() if broken else DigitsCNN(width=8)
    if broken:
        loader = M.nan_loader()
    else:
        datamodule = DigitsDataModule(batch_size=32)
        datamodule.setup("fit")
        loader = datamodule.train_dataloader()
    model.eval()  # a non-default mode, which must also survive
    before = (_hash_state(model), _rng_fingerprint(), loader.generator.get_state().clone())
    first_batch_before = next(iter(loader))[1].clone()
    loader.generator.set_state(before[2])

    checks = ["data", "init_loss", "grad_flow", "batch_independence", OverfitBatchCheck(max_steps=10)]
    report = preflight(model, train_dataloaders=loader, checks=[*checks, InputIndependenceCheck(max_steps=8)])

    assert len(report) == 6
    assert (not report.ok) is broken
    assert _hash_state(model) == before[0]
    assert _rng_fingerprint() == before[1]
    assert torch.equal(loader.generator.get_state(), before[2])
    assert torch.equal(next(iter(loader))[1], first_batch_before)  # same shuffle order as before


def _fit(with_preflight: bool, tmp_path) -> tuple[torch.Tensor, ...]:
    torch.manual_seed(0)
    model = M.MLP()
    callbacks = [Preflight(print_report=False)] if with_preflight else []
    trainer = fast_trainer(max_steps=6, callbacks=callbacks, default_root_dir=tmp_path)
    loader = M.loader()
    trainer.fit(model, loader)
    optimizer_state = trainer.optimizers[0].state_dict()["state"]
    moments = [optimizer_state[i]["exp_avg"] for i in sorted(optimizer_state)]
    return (*[p.detach().clone() for p in model.parameters()], *moments, torch.rand(3))


def test_fit_with_preflight_callback_is_bit_identical_to_fit_without(tmp_path):
    """Weights, optimizer moments and the RNG stream after training do not depend on the preflight."""
    plain = _fit(False, tmp_path)
    checked = _fit(True, tmp_path)
    assert len(plain) == len(checked)
    for a, b in zip(plain, checked):
        assert torch.equal(a, b)
