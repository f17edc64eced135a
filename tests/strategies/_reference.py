"""Single-process references that see exactly the batches of a 2-rank run."""

from __future__ import annotations

import functools

import torch
from torch.utils.data import DataLoader

from lightning_recipes.testing import TinyTransformerLM, fast_trainer, random_token_loader

NUM_SAMPLES, PER_RANK_BATCH, WORLD_SIZE, EPOCHS = 64, 8, 2, 2
CLIP = 0.1  # gradient_clip_val of every run: active, so a per-shard norm would show as a different loss


def train_loader_per_rank() -> DataLoader:
    """The loader each rank is given; Lightning shards it with a shuffling DistributedSampler (seed 0)."""
    return random_token_loader(num_samples=NUM_SAMPLES, batch_size=PER_RANK_BATCH, seed=0)


def val_loader() -> DataLoader:
    return random_token_loader(num_samples=NUM_SAMPLES, batch_size=16, seed=1)


def distributed_order_loader() -> DataLoader:
    """Batch k of epoch e is what ranks 0 and 1 see at that step under Lightning's ``DistributedSampler``
    (``randperm`` seeded ``e``, rank r takes ``perm[r::2]``); epochs end to end: train with ``max_steps``."""
    dataset = train_loader_per_rank().dataset
    batches = []
    for epoch in range(EPOCHS):
        perm = torch.randperm(NUM_SAMPLES, generator=torch.Generator().manual_seed(epoch)).tolist()
        ranks = [perm[r::WORLD_SIZE] for r in range(WORLD_SIZE)]
        for k in range(len(ranks[0]) // PER_RANK_BATCH):
            batches.append([i for rank in ranks for i in rank[k * PER_RANK_BATCH : (k + 1) * PER_RANK_BATCH]])
    return DataLoader(dataset, batch_sampler=batches)


def eval_loss(model: TinyTransformerLM) -> float:
    with torch.no_grad():
        return float(torch.stack([model.loss(model(x), y) for x, y in val_loader()]).mean())


@functools.lru_cache(maxsize=4)  # shared by the DDP and FSDP2 tests of one session
def single_process_reference(gradient_clip_val: float | None = CLIP) -> float:
    """Validation loss of TinyTransformerLM (seed 0) trained in one process on the 2-rank batches."""
    torch.manual_seed(0)
    model = TinyTransformerLM()
    steps = EPOCHS * NUM_SAMPLES // (PER_RANK_BATCH * WORLD_SIZE)
    trainer = fast_trainer(max_steps=steps, max_epochs=-1, gradient_clip_val=gradient_clip_val)
    trainer.fit(model, distributed_order_loader())
    return eval_loss(model)
