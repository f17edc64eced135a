"""A tiny GPT-2 (``use_cache=True``) trained 3 steps under ``recipes_fsdp2`` on 2 CPU ranks, run by
``fsdp2_train.py``; each rank writes its losses, ``use_cache`` and block APIs to ``OUT_DIR/rank{r}.json``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import lightning.pytorch as pl
import torch
from torch.distributed._composable import _get_registry
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset
from transformers import GPT2Config, GPT2LMHeadModel

from lightning_recipes.strategies import FSDP2Mixin
from lightning_recipes.testing import fast_trainer


def gpt2_config() -> GPT2Config:
    """GPT-2 as shipped (``use_cache=True``), tiny, eager attention, no dropout (so runs compare exactly)."""
    sizes = {"n_layer": 2, "n_embd": 32, "n_head": 2, "vocab_size": 64, "n_positions": 32}
    return GPT2Config(**sizes, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, attn_implementation="eager")


def token_data() -> torch.Tensor:
    return torch.randint(0, 64, (32, 16), generator=torch.Generator().manual_seed(0))


class GPT2Module(FSDP2Mixin, pl.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.model = GPT2LMHeadModel(gpt2_config())
        self.losses: list[float] = []

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.model(input_ids=tokens, labels=tokens).loss

    def training_step(self, batch: list[torch.Tensor], batch_idx: int) -> torch.Tensor:
        (tokens,) = batch
        loss = self(tokens)  # through forward: the FSDP2 root unit (this module) gathers its parameters there
        self.losses.append(float(loss.detach()))  # test script: one sync per step is fine here
        return loss

    def train_dataloader(self) -> DataLoader:
        # rank r takes samples r, r + 2, ...: the two ranks' batches together are samples 8k .. 8k + 7
        dataset = TensorDataset(token_data())
        sampler = DistributedSampler(dataset, self.trainer.world_size, self.global_rank, shuffle=False)
        return DataLoader(dataset, batch_size=4, sampler=sampler)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.AdamW(self.parameters(), lr=1e-2)


def main(out: Path) -> None:
    torch.manual_seed(0)
    model = GPT2Module()
    settings = {"max_steps": 3, "default_root_dir": out}
    # the module's own sampler: a fixed, unshuffled split to compare with
    trainer = fast_trainer(devices=2, strategy="recipes_fsdp2", use_distributed_sampler=False, **settings)
    trainer.fit(model)
    block = model.model.transformer.h[0]
    record = {"losses": model.losses, "global_step": trainer.global_step, "world_size": trainer.world_size}
    record.update(use_cache=model.model.config.use_cache, block_apis=sorted(_get_registry(block) or {}))
    (out / f"rank{trainer.global_rank}.json").write_text(json.dumps(record))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
