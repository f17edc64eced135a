"""Real FSDP1 / DeepSpeed runs and a CUDA check of the activation estimate (skipped without a CUDA device)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import pytest
import torch

from lightning_recipes.strategies import deepspeed_available, estimate_memory, preset
from lightning_recipes.testing import TinyTransformerLM, TransformerBlock, fast_trainer, random_token_loader

pytestmark = pytest.mark.gpu


def _gpu_trainer(tmp_path: Path, **settings: Any) -> pl.Trainer:
    gpu = {"accelerator": "gpu", "devices": 1, "precision": "bf16-mixed"}
    return fast_trainer(**gpu, default_root_dir=tmp_path, **settings)


def test_fsdp1_preset_wraps_checkpoints_and_resumes_on_gpu(tmp_path: Path) -> None:
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import CheckpointWrapper
    from torch.distributed.fsdp import FullyShardedDataParallel

    torch.manual_seed(0)
    model = TinyTransformerLM()
    trainer = _gpu_trainer(tmp_path, strategy=preset("fsdp_full_shard"), max_steps=4)
    trainer.fit(model, random_token_loader())
    wrapped = trainer.strategy.model
    assert sum(isinstance(m, FullyShardedDataParallel) for m in wrapped.modules()) == 1 + len(model.blocks)
    assert sum(isinstance(m, CheckpointWrapper) for m in wrapped.modules()) == len(model.blocks)
    assert trainer.strategy.mixed_precision_config.param_dtype == torch.bfloat16
    ckpt = tmp_path / "sharded.ckpt"
    trainer.save_checkpoint(ckpt)
    assert ckpt.is_dir()  # sharded checkpoint
    # max_epochs=2: Lightning counts the epoch as finished once fit stopped at max_steps
    resumed = _gpu_trainer(tmp_path, strategy=preset("fsdp_full_shard"), max_steps=6, max_epochs=2)
    resumed.fit(TinyTransformerLM(), random_token_loader(), ckpt_path=ckpt)
    assert resumed.global_step == 6


@pytest.mark.skipif(not deepspeed_available(), reason="DeepSpeed is not installed")
def test_deepspeed_preset_takes_batch_accumulation_clipping_precision_from_trainer(tmp_path: Path) -> None:
    settings = {"accumulate_grad_batches": 2, "gradient_clip_val": 0.5, "limit_train_batches": 8}
    trainer = _gpu_trainer(tmp_path, strategy=preset("deepspeed_zero2"), max_epochs=1, **settings)
    trainer.fit(TinyTransformerLM(), random_token_loader(batch_size=4))
    config = trainer.strategy.config
    assert config["train_micro_batch_size_per_gpu"] == 4
    assert config["train_batch_size"] == 4 * 2 * 1
    assert config["gradient_accumulation_steps"] == 2
    assert config["gradient_clipping"] == 0.5
    assert config["bf16"]["enabled"] is True
    assert trainer.global_step == 4  # 8 batches, accumulation 2: the Trainer's accumulation is honoured


def test_activation_estimate_is_close_to_the_cuda_peak() -> None:
    torch.manual_seed(0)
    model = TinyTransformerLM(d_model=256, n_layers=4, max_seq_len=256).cuda()
    tokens, target = (t.cuda() for t in next(iter(random_token_loader(batch_size=16, seq_len=256))))
    estimate = estimate_memory(model, sample_batch=(tokens, target), activation_checkpointing=False)
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    logits = model(tokens)
    loss = model.loss(logits, target)
    loss.backward()
    torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated() - base - estimate.gradients
    assert estimate.activations is not None
    assert 0.5 * peak <= estimate.activations <= 2.0 * peak, (estimate.activations, peak)
    assert isinstance(model.blocks[0], TransformerBlock)
