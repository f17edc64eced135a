"""The LR range test on a CUDA device (skipped without one): the model stays put, the callback applies in a
bf16-mixed run, and the curve matches the CPU's up to float noise."""

from __future__ import annotations

import pytest
import torch

from lightning_recipes.testing import fast_trainer, random_classification_loader
from lightning_recipes.tune import LRRangeTest, find_lr
from tests.tune._flat_models import AdamWClassifier

pytestmark = pytest.mark.gpu


def test_find_lr_on_cuda_leaves_the_model_on_its_device_and_matches_the_cpu_pick() -> None:
    model = AdamWClassifier(lr=1e-3)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    loader = random_classification_loader(num_samples=512, batch_size=32)
    cuda_rng = torch.cuda.get_rng_state()
    on_gpu = find_lr(model, train_dataloaders=loader, num_steps=40, device="cuda")
    on_cpu = find_lr(model, train_dataloaders=loader, num_steps=40, device="cpu")
    assert model.device.type == "cpu"
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert torch.equal(cuda_rng, torch.cuda.get_rng_state())
    assert len(on_gpu.lrs) == len(on_cpu.lrs)
    assert on_gpu.losses == pytest.approx(on_cpu.losses, rel=1e-3, abs=1e-4)
    assert on_gpu.suggestion == pytest.approx(on_cpu.suggestion, rel=0.3)


def test_callback_applies_the_peak_lr_in_a_bf16_mixed_cuda_run() -> None:
    model = AdamWClassifier(lr=1e-3)
    finder = LRRangeTest(num_steps=30, apply=True, print_result=False)
    trainer = fast_trainer(
        accelerator="gpu", devices=1, precision="bf16-mixed", max_steps=3, callbacks=[finder]
    )
    trainer.fit(model, random_classification_loader(num_samples=512, batch_size=32))
    assert finder.result is not None and finder.result.peak_lr > 0
    optimizer = trainer.optimizers[0]
    assert max(group["initial_lr"] for group in optimizer.param_groups) == pytest.approx(
        finder.result.peak_lr
    )
