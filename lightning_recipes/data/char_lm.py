"""Character-level language modelling over text that ships with Python."""

from __future__ import annotations

import lightning.pytorch as pl
import torch
from torch import Tensor
from torch.utils.data import DataLoader, Dataset

from lightning_recipes._validation import check_in_range, check_int

__all__ = ["CharLMDataModule", "load_corpus"]


def load_corpus(max_chars: int | None = None) -> str:
    """The text of Python's reference-manual topics (``pydoc_data.topics``), keys in sorted order.

    Example:
        >>> text = load_corpus(max_chars=1000)
        >>> len(text)
        1000
    """
    from pydoc_data.topics import topics

    text = "\n\n".join(topics[key] for key in sorted(topics))
    return text if max_chars is None else text[:max_chars]


class _Windows(Dataset):
    """Non-overlapping windows of ``seq_len + 1`` tokens, returned as ``(tokens, next_tokens)``."""

    def __init__(self, data: Tensor, seq_len: int) -> None:
        self.data = data
        self.seq_len = seq_len

    def __len__(self) -> int:
        return (len(self.data) - 1) // self.seq_len

    def __getitem__(self, index: int) -> tuple[Tensor, Tensor]:
        start = index * self.seq_len
        chunk = self.data[start : start + self.seq_len + 1]
        return chunk[:-1], chunk[1:]


class CharLMDataModule(pl.LightningDataModule):
    """Next-character prediction over Python's bundled documentation (or its first ``max_chars``):
    ``(tokens, next_tokens)`` windows of ``seq_len``; the last ``val_fraction`` held out; shuffle seeded.

    Example:
        >>> dm = CharLMDataModule(seq_len=32, batch_size=4, max_chars=20_000)
        >>> dm.setup("fit")
        >>> tokens, target = next(iter(dm.train_dataloader()))
        >>> tuple(tokens.shape), bool((tokens[:, 1:] == target[:, :-1]).all())
        ((4, 32), True)
        >>> dm.decode(dm.encode("def f():")) == "def f():"
        True
    """

    def __init__(
        self,
        seq_len: int = 64,
        batch_size: int = 32,
        val_fraction: float = 0.1,
        max_chars: int | None = None,
        seed: int = 0,
        num_workers: int = 0,
    ) -> None:
        super().__init__()
        check_int("seq_len", seq_len, minimum=1)
        check_int("batch_size", batch_size, minimum=1)
        check_in_range("val_fraction", val_fraction, 0.0, 1.0, low_open=True, high_open=True)
        check_int("max_chars", max_chars, minimum=1, optional=True)  # the vocabulary: from the whole text
        check_int("seed", seed)
        check_int("num_workers", num_workers, minimum=0)
        self.save_hyperparameters()
        self.seq_len = seq_len
        self.batch_size = batch_size
        self.val_fraction = val_fraction
        self.seed = seed
        self.num_workers = num_workers
        self.text = load_corpus(max_chars)
        self.vocab = sorted(set(load_corpus()))
        self._index = {char: i for i, char in enumerate(self.vocab)}
        self.train_set: _Windows | None = None
        self.val_set: _Windows | None = None

    @property
    def vocab_size(self) -> int:
        """Number of distinct characters (the model's output width)."""
        return len(self.vocab)

    def encode(self, text: str) -> Tensor:
        """Characters → int64 token ids."""
        return torch.tensor([self._index[char] for char in text], dtype=torch.long)

    def decode(self, tokens: Tensor) -> str:
        """Token ids → characters."""
        return "".join(self.vocab[int(i)] for i in tokens.tolist())

    def setup(self, stage: str | None = None) -> None:
        if self.train_set is not None:
            return
        data = self.encode(self.text)
        split = int(len(data) * (1.0 - self.val_fraction))
        self.train_set = _Windows(data[:split], self.seq_len)
        self.val_set = _Windows(data[split:], self.seq_len)

    def train_dataloader(self) -> DataLoader:
        assert self.train_set is not None, "call setup() first"
        generator = torch.Generator().manual_seed(self.seed)
        return DataLoader(
            self.train_set,
            batch_size=self.batch_size,
            shuffle=True,
            drop_last=True,
            generator=generator,
            num_workers=self.num_workers,
        )

    def val_dataloader(self) -> DataLoader:
        assert self.val_set is not None, "call setup() first"
        return DataLoader(self.val_set, batch_size=self.batch_size, num_workers=self.num_workers)
