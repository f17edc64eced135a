"""Small ``transformers`` models (random init from a config, nothing downloaded) and synthetic data for the
transformer part of the field gallery.

- :func:`markov_text`: sequences from a fixed sparse Markov chain (each token has four likely successors), a
  next-token task a 2-layer GPT-2 learns from ``ln VOCAB`` (4.16) towards the chain's entropy (~1.1).
- :class:`TinyGPT2LM`: ``GPT2LMHeadModel`` (2 layers, width 32), AdamW at a constant LR, a warm-up + cosine or
  an LR that collapses at a given step; logs ``val_loss`` when given a validation set.
- :class:`ValidatedBert`: ``TinyBertFinetune`` that also logs ``val_loss`` (for the overfitting and validation
  cases).

Example:
    >>> tokens, = markov_text(4, seed=0)[0:1]
    >>> tuple(tokens.shape)
    (1, 32)
"""

from __future__ import annotations

import math
from typing import Any

import lightning.pytorch as pl
import torch
from torch import Tensor
from torch.utils.data import TensorDataset

from tests.helpers.finetune_models import TinyBertFinetune

VOCAB, CONTEXT = 64, 32
SUCCESSOR_PROBS = (0.6, 0.25, 0.1, 0.05)  # entropy ~1.08 nats: the loss a perfect model reaches


def markov_text(n: int, seed: int = 0, chain_seed: int = 0) -> TensorDataset:
    """``n`` sequences of ``CONTEXT`` tokens from one fixed Markov chain (``chain_seed``): every token is
    followed by one of four tokens with probabilities ``SUCCESSOR_PROBS``."""
    chain = torch.Generator().manual_seed(chain_seed)
    successors = torch.stack([torch.randperm(VOCAB, generator=chain)[:4] for _ in range(VOCAB)])
    generator = torch.Generator().manual_seed(seed)
    tokens = torch.empty(n, CONTEXT, dtype=torch.long)
    tokens[:, 0] = torch.randint(0, VOCAB, (n,), generator=generator)
    probs = torch.tensor(SUCCESSOR_PROBS)
    for t in range(1, CONTEXT):
        pick = torch.multinomial(probs.expand(n, -1), 1, generator=generator).squeeze(1)
        tokens[:, t] = successors[tokens[:, t - 1], pick]
    return TensorDataset(tokens)


class TinyGPT2LM(pl.LightningModule):
    """``GPT2LMHeadModel`` from a tiny config, AdamW at ``lr`` and one of three schedules (per step):

    - ``"constant"``;
    - ``"warmup_cosine"``: linear warm-up over ``warmup_steps``, cosine to 0 at ``total_steps``;
    - ``"collapse"``: constant, then times ``gamma`` from ``collapse_step`` on (a step decay gone wrong).
    """

    def __init__(
        self,
        lr: float,
        schedule: str = "constant",
        warmup_steps: int = 0,
        total_steps: int = 0,
        collapse_step: int = 0,
        gamma: float = 1.0,
        n_embd: int = 32,
        n_layer: int = 2,
        weight_decay: float = 0.01,
    ) -> None:
        super().__init__()
        from transformers import GPT2Config, GPT2LMHeadModel

        if schedule not in ("constant", "warmup_cosine", "collapse"):
            raise ValueError(
                f"`schedule` must be 'constant', 'warmup_cosine' or 'collapse', got {schedule!r}."
            )
        self.lr, self.weight_decay, self.schedule = lr, weight_decay, schedule
        self.warmup_steps, self.total_steps = warmup_steps, total_steps
        self.collapse_step, self.gamma = collapse_step, gamma
        config = GPT2Config(
            vocab_size=VOCAB,
            n_positions=CONTEXT,
            n_embd=n_embd,
            n_layer=n_layer,
            n_head=2,
            resid_pdrop=0.0,
            embd_pdrop=0.0,
            attn_pdrop=0.0,
            bos_token_id=0,
            eos_token_id=0,
        )
        self.model = GPT2LMHeadModel(config)

    def training_step(self, batch: tuple[Tensor], batch_idx: int) -> Tensor:
        (tokens,) = batch
        return self.model(input_ids=tokens, labels=tokens).loss

    def validation_step(self, batch: tuple[Tensor], batch_idx: int) -> None:
        (tokens,) = batch
        self.log("val_loss", self.model(input_ids=tokens, labels=tokens).loss, batch_size=len(tokens))

    def _factor(self, step: int) -> float:
        if self.schedule == "warmup_cosine":
            if step < self.warmup_steps:
                return (step + 1) / self.warmup_steps
            progress = (step - self.warmup_steps) / max(1, self.total_steps - self.warmup_steps)
            return 0.5 * (1 + math.cos(math.pi * min(1.0, progress)))
        if self.schedule == "collapse":
            return self.gamma if step >= self.collapse_step else 1.0
        return 1.0

    def configure_optimizers(self) -> Any:
        optimizer = torch.optim.AdamW(self.parameters(), lr=self.lr, weight_decay=self.weight_decay)
        if self.schedule == "constant":
            return optimizer
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, self._factor)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}


class ValidatedBert(TinyBertFinetune):
    """:class:`TinyBertFinetune` that logs ``val_loss`` (the epoch's mean) on its validation set."""

    def validation_step(self, batch: tuple[Tensor, Tensor, Tensor], batch_idx: int) -> None:
        tokens, mask, labels = batch
        loss = self.model(input_ids=tokens, attention_mask=mask, labels=labels).loss
        self.log("val_loss", loss, batch_size=len(labels))
