"""speed_tune's CUDA paths (skipped without a GPU): each option runs, keeps the loss, leaves the user's model
and the TF32 switch as they were, and reports the allocator's peak; checkpointing lowers it."""

from __future__ import annotations

import pytest
import torch

from lightning_recipes.testing import TinyTransformerLM, random_token_loader
from lightning_recipes.tune.speed import speed_tune

pytestmark = pytest.mark.gpu

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
