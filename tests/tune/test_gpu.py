"""The tuners on a CUDA device (skipped without one)."""

from __future__ import annotations

import pytest
import torch

from lightning_recipes.testing import (
    TinyTransformerLM,
    fast_trainer,
    random_classification_loader,
    random_token_loader,
)
from lightning_recipes.tune import LRRangeTest, find_lr
from lightning_recipes.tune.speed import speed_tune
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


FAST = {"warmup_steps": 3, "measure_steps": 5, "repeats": 1}


def _lm(seq_len: int = 128, n_layers: int = 4) -> tuple[TinyTransformerLM, torch.utils.data.DataLoader]:
    torch.manual_seed(0)
    model = TinyTransformerLM(vocab_size=128, d_model=128, n_layers=n_layers, max_seq_len=seq_len)
    return model, random_token_loader(vocab_size=128, seq_len=seq_len, batch_size=32)


@pytest.mark.parametrize("name", ["tf32", "pin_memory", "bf16-mixed", "compile_cudagraphs", "compile"])
def test_cuda_option_runs_keeps_the_loss_and_reports_the_peak(name: str) -> None:
    model, loader = _lm()
    before = {key: value.clone() for key, value in model.state_dict().items()}
    precision = torch.get_float32_matmul_precision()
    result = speed_tune(model, train_dataloaders=loader, options=[name], device="cuda", **FAST)
    base, row = result.rows
    assert not row.status.startswith(("skipped", "incorrect")), row
    assert base.cuda_peak_mb is not None and base.cuda_peak_mb > 0
    assert row.cuda_peak_mb is not None and row.cuda_peak_mb > 0
    assert model.device.type == "cpu"
    assert all(torch.equal(before[key], value) for key, value in model.state_dict().items())
    assert torch.get_float32_matmul_precision() == precision  # TF32 switched back


def test_activation_checkpointing_lowers_the_cuda_peak() -> None:
    model, loader = _lm(seq_len=256, n_layers=6)
    result = speed_tune(
        model, train_dataloaders=loader, options=["activation_checkpointing"], device="cuda", **FAST
    )
    base, row = result.rows
    assert row.loss_deviation is not None and row.loss_deviation < 1e-4, row
    assert base.cuda_peak_mb is not None and row.cuda_peak_mb is not None
    assert row.cuda_peak_mb < base.cuda_peak_mb, (base, row)
    assert row.activation_mb is not None and base.activation_mb is not None
    assert row.activation_mb < base.activation_mb / 3


def test_every_option_applies_on_cuda_and_the_choice_builds_a_trainer() -> None:
    import lightning.pytorch as pl

    model, loader = _lm()
    result = speed_tune(model, train_dataloaders=loader, device="cuda", **FAST)
    skipped = {row.option for row in result.rows if row.status.startswith("skipped")}
    assert skipped <= {"channels_last"}, skipped  # no Conv2d in a transformer; everything else applies
    trainer = pl.Trainer(accelerator="gpu", devices=1, logger=False, **result.trainer_kwargs)
    assert trainer.precision == result.trainer_kwargs.get("precision", "32-true")
