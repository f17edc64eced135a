"""Tiny LightningModules with known properties, and the synthetic data they train on."""

from __future__ import annotations

import math
from typing import Any

import lightning.pytorch as pl
import torch
from torch import Tensor, nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset

from lightning_recipes._validation import check_in_range, check_int, check_positive

__all__ = [
    "TinyClassifier",
    "TinyTransformerLM",
    "TransformerBlock",
    "random_classification_loader",
    "random_token_loader",
]


class TinyClassifier(pl.LightningModule):
    """A two-layer MLP classifier whose cross-entropy at initialisation is exactly ``ln(num_classes)``.

    The output layer starts at zero, so every logit is 0 and the softmax is uniform: the textbook
    "loss at init" value, useful to test init-loss checks and anything that reads the first loss.
    Logs ``train_loss`` every step and ``val_loss`` / ``val_acc`` per validation epoch.

    Args:
        in_features: Input width.
        num_classes: Number of classes ``C``.
        hidden: Hidden width.
        lr: Learning rate of the default SGD optimizer (``configure_optimizers``).

    Example:
        >>> import math, torch
        >>> model = TinyClassifier(in_features=16, num_classes=4)
        >>> x, y = torch.randn(8, 16), torch.randint(0, 4, (8,))
        >>> math.isclose(model.loss(model(x), y).item(), math.log(4), rel_tol=1e-6)
        True
    """

    def __init__(
        self, in_features: int = 16, num_classes: int = 4, hidden: int = 32, lr: float = 0.1
    ) -> None:
        super().__init__()
        for name, value in (("in_features", in_features), ("num_classes", num_classes), ("hidden", hidden)):
            check_int(name, value, minimum=1)
        check_positive("lr", lr)
        self.save_hyperparameters()
        self.hidden = nn.Linear(in_features, hidden)
        self.head = nn.Linear(hidden, num_classes)
        nn.init.zeros_(self.head.weight)
        nn.init.zeros_(self.head.bias)

    def forward(self, x: Tensor) -> Tensor:
        return self.head(F.relu(self.hidden(x)))

    def loss(self, logits: Tensor, target: Tensor) -> Tensor:
        return F.cross_entropy(logits, target)

    def training_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> Tensor:
        x, y = batch
        loss = self.loss(self(x), y)
        self.log("train_loss", loss)
        return loss

    def validation_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> None:
        x, y = batch
        logits = self(x)
        self.log("val_loss", self.loss(logits, y), sync_dist=True)
        self.log("val_acc", (logits.argmax(-1) == y).float().mean(), sync_dist=True)

    def configure_optimizers(self) -> Any:
        return torch.optim.SGD(self.parameters(), lr=self.hparams["lr"])


class TransformerBlock(nn.Module):
    """Pre-norm causal self-attention block: ``x + attn(ln(x))`` then ``x + mlp(ln(x))``."""

    def __init__(self, d_model: int, n_heads: int, mlp_ratio: int = 4, dropout: float = 0.0) -> None:
        super().__init__()
        for name, value in (("d_model", d_model), ("n_heads", n_heads), ("mlp_ratio", mlp_ratio)):
            check_int(name, value, minimum=1)
        check_in_range("dropout", dropout, 0.0, 1.0, high_open=True)
        if d_model % n_heads:
            raise ValueError(
                f"`d_model` must be divisible by `n_heads`, got d_model={d_model}, n_heads={n_heads}."
            )
        self.n_heads = n_heads
        self.ln_1 = nn.LayerNorm(d_model)
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        self.ln_2 = nn.LayerNorm(d_model)
        self.fc = nn.Linear(d_model, mlp_ratio * d_model)
        self.fc_out = nn.Linear(mlp_ratio * d_model, d_model)
        self.dropout = dropout

    def forward(self, x: Tensor) -> Tensor:
        batch, seq, width = x.shape
        q, k, v = self.qkv(self.ln_1(x)).split(width, dim=-1)
        q, k, v = (t.view(batch, seq, self.n_heads, -1).transpose(1, 2) for t in (q, k, v))
        drop = self.dropout if self.training else 0.0
        attn = F.scaled_dot_product_attention(q, k, v, is_causal=True, dropout_p=drop)
        x = x + self.proj(attn.transpose(1, 2).reshape(batch, seq, width))
        return x + self.fc_out(F.gelu(self.fc(self.ln_2(x))))


class TinyTransformerLM(pl.LightningModule):
    """A small causal transformer language model; its loss at init is exactly ``ln(vocab_size)``.

    Token and position embeddings, ``n_layers`` :class:`TransformerBlock` s, a final LayerNorm and a
    zero-initialised output head. Batches are ``(tokens, next_tokens)`` of shape ``[B, S]``; logits are
    ``[B, S, vocab_size]``. Logs ``train_loss`` and ``val_loss``.

    Args:
        vocab_size: Number of tokens ``V``.
        d_model: Width.
        n_heads: Attention heads.
        n_layers: Number of blocks.
        max_seq_len: Longest sequence the position embedding covers.
        lr: Learning rate of the default AdamW optimizer.

    Example:
        >>> import math, torch
        >>> model = TinyTransformerLM(vocab_size=32)
        >>> tokens = torch.randint(0, 32, (2, 16))
        >>> model(tokens).shape
        torch.Size([2, 16, 32])
        >>> math.isclose(model.loss(model(tokens), tokens).item(), math.log(32), rel_tol=1e-6)
        True
    """

    def __init__(
        self,
        vocab_size: int = 64,
        d_model: int = 64,
        n_heads: int = 4,
        n_layers: int = 2,
        max_seq_len: int = 128,
        lr: float = 3e-3,
    ) -> None:
        super().__init__()
        for name, value in dict(
            vocab_size=vocab_size,
            d_model=d_model,
            n_heads=n_heads,
            n_layers=n_layers,
            max_seq_len=max_seq_len,
        ).items():
            check_int(name, value, minimum=1)
        check_positive("lr", lr)
        self.save_hyperparameters()
        self.token_embedding = nn.Embedding(vocab_size, d_model)
        self.position_embedding = nn.Embedding(max_seq_len, d_model)
        self.blocks = nn.ModuleList(TransformerBlock(d_model, n_heads) for _ in range(n_layers))
        self.ln_f = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab_size)
        nn.init.normal_(self.token_embedding.weight, std=0.02)
        nn.init.normal_(self.position_embedding.weight, std=0.02)
        nn.init.zeros_(self.head.weight)
        nn.init.zeros_(self.head.bias)

    def forward(self, tokens: Tensor) -> Tensor:
        positions = torch.arange(tokens.shape[1], device=tokens.device)
        x = self.token_embedding(tokens) + self.position_embedding(positions)
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x))

    def loss(self, logits: Tensor, target: Tensor) -> Tensor:
        return F.cross_entropy(logits.flatten(0, 1), target.flatten())

    def training_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> Tensor:
        tokens, target = batch
        loss = self.loss(self(tokens), target)
        self.log("train_loss", loss)
        return loss

    def validation_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> None:
        tokens, target = batch
        self.log("val_loss", self.loss(self(tokens), target), sync_dist=True)

    def configure_optimizers(self) -> Any:
        return torch.optim.AdamW(self.parameters(), lr=self.hparams["lr"])


def random_classification_loader(
    num_samples: int = 256,
    in_features: int = 16,
    num_classes: int = 4,
    batch_size: int = 32,
    *,
    seed: int = 0,
    shuffle: bool = False,
) -> DataLoader:
    """Gaussian inputs labelled by a fixed random linear teacher, so the labels are learnable.

    Example:
        >>> x, y = next(iter(random_classification_loader(batch_size=8)))
        >>> tuple(x.shape), tuple(y.shape), int(y.max()) < 4
        ((8, 16), (8,), True)
    """
    generator = torch.Generator().manual_seed(seed)
    inputs = torch.randn(num_samples, in_features, generator=generator)
    teacher = torch.randn(in_features, num_classes, generator=generator)
    labels = (inputs @ teacher).argmax(dim=-1)
    return DataLoader(TensorDataset(inputs, labels), batch_size=batch_size, shuffle=shuffle)


def random_token_loader(
    num_samples: int = 128,
    seq_len: int = 32,
    vocab_size: int = 64,
    batch_size: int = 16,
    *,
    seed: int = 0,
    shuffle: bool = False,
) -> DataLoader:
    """Token sequences from a fixed affine recurrence ``t[i+1] = (a*t[i] + b) mod V`` with random starts.

    The next token is a deterministic function of the current one, so a language model can learn it.
    Each batch is ``(tokens, next_tokens)``, both ``[B, seq_len]`` of ``int64``.

    Example:
        >>> tokens, target = next(iter(random_token_loader(batch_size=2, seq_len=8, vocab_size=16)))
        >>> bool((target[:, :-1] == tokens[:, 1:]).all())
        True
    """
    generator = torch.Generator().manual_seed(seed)
    multiplier = 5 if math.gcd(5, vocab_size) == 1 else 1
    starts = torch.randint(0, vocab_size, (num_samples, 1), generator=generator)
    sequence = [starts]
    for _ in range(seq_len):
        sequence.append((sequence[-1] * multiplier + 3) % vocab_size)
    tokens = torch.cat(sequence, dim=1)
    return DataLoader(TensorDataset(tokens[:, :-1], tokens[:, 1:]), batch_size=batch_size, shuffle=shuffle)
