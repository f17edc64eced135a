"""Token-classification tasks for a tiny BERT (the LR-range tests and the LR-finder benchmark):
``task="first"``, is the first token after ``[CLS]`` in the vocabulary's lower half (learnable); ``"xor"``,
the XOR of that for the first two tokens (a tiny BERT sits at chance on it: a flat LR sweep).

Example:
    >>> batch = TokenTask(8, seed=1, task="xor")[0]
    >>> sorted(batch), tuple(batch["input_ids"].shape)
    (['input_ids', 'labels'], (16,))
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor
from torch.utils.data import Dataset

VOCAB, SEQ = 32, 16
TASKS = ("first", "xor")


class TokenTask(Dataset):
    """``count`` random token sequences after a ``[CLS]`` (id 0), labelled by ``task`` (see the module)."""

    def __init__(self, count: int, seed: int, task: str = "first") -> None:
        if task not in TASKS:
            raise ValueError(f"`task` must be one of {TASKS}, got {task!r}")
        generator = torch.Generator().manual_seed(seed)
        self.ids = torch.randint(1, VOCAB, (count, SEQ), generator=generator)
        self.ids[:, 0] = 0
        low = self.ids < VOCAB // 2
        self.labels = (low[:, 1] if task == "first" else low[:, 1] ^ low[:, 2]).long()

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, index: int) -> dict[str, Tensor]:
        return {"input_ids": self.ids[index], "labels": self.labels[index]}


def tiny_bert_classifier() -> Any:
    """``transformers.BertForSequenceClassification``: a 2-layer, width-32 config, random init, 2 labels."""
    from transformers import BertConfig, BertForSequenceClassification

    config = BertConfig(  # type: ignore[call-arg]
        vocab_size=VOCAB,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=SEQ,
        num_labels=2,
    )
    return BertForSequenceClassification(config)
