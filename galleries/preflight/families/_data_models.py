"""Models and data of the ``data``, ``split_overlap`` and ``eval_mode`` galleries (module level: spawn pickles
them). Real data where it matters: scikit-learn's digits (``DigitsDataModule``'s fixed split)."""

from __future__ import annotations

from functools import cache
from typing import Any

import lightning.pytorch as pl
import torch
from torch import Tensor, nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, Dataset, TensorDataset

from lightning_recipes.data import DigitsDataModule
from lightning_recipes.testing import DigitsCNN, TinyTransformerLM

IN = 16


# ------------------------------------------------------------------ data
@cache
def _digits() -> tuple[Tensor, Tensor, Tensor, Tensor]:
    dm = DigitsDataModule()
    dm.setup("fit")
    assert dm.train_set is not None and dm.val_set is not None
    x_train, y_train = dm.train_set.tensors
    x_val, y_val = dm.val_set.tensors
    return x_train, y_train, x_val, y_val


def digits() -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """``x_train [1438, 1, 8, 8], y_train, x_val [359, 1, 8, 8], y_val`` (fresh clones)."""
    return tuple(t.clone() for t in _digits())  # type: ignore[return-value]


def loaders(
    x_train: Tensor,
    y_train: Tensor,
    x_val: Tensor | None = None,
    y_val: Tensor | None = None,
    batch_size: int = 64,
) -> dict[str, Any]:
    """``preflight`` keyword arguments: a shuffled training loader (own generator) and a validation loader."""
    train = DataLoader(
        TensorDataset(x_train, y_train),
        batch_size=batch_size,
        shuffle=True,
        generator=torch.Generator().manual_seed(0),
    )
    data: dict[str, Any] = {"train_dataloaders": train}
    if x_val is not None and y_val is not None:
        data["val_dataloaders"] = DataLoader(TensorDataset(x_val, y_val), batch_size=256)
    return data


def digits_split() -> dict[str, Any]:
    return loaders(*digits())


def digits_flat_split() -> dict[str, Any]:
    x_train, y_train, x_val, y_val = digits()
    return loaders(x_train.flatten(1), y_train, x_val.flatten(1), y_val)


def gaussian(n: int, seed: int, classes: int = 4) -> tuple[Tensor, Tensor]:
    """Learnable classification data: Gaussian inputs labelled by a fixed linear teacher."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, IN, generator=g)
    teacher = torch.randn(IN, classes, generator=torch.Generator().manual_seed(1234))
    return x, (x @ teacher).argmax(-1)


def regression(n: int, seed: int) -> tuple[Tensor, Tensor]:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, IN, generator=g)
    return x, x @ torch.randn(IN, generator=torch.Generator().manual_seed(99)) + 0.1 * torch.randn(
        n, generator=g
    )


def tokens(n_train: int, n_val: int, vocab: int = 512, seq_len: int = 16) -> tuple[Tensor, ...]:
    """Next-token data ``t[i+1] = (5 t[i] + 3) mod V`` split properly: every sequence starts at a different
    token (one permutation, cut in two), so no sequence repeats within or across the splits.

    Returns ``x_train, y_train, x_val, y_val`` of shape ``[n, seq_len]``.
    """
    starts = torch.randperm(vocab, generator=torch.Generator().manual_seed(0))[: n_train + n_val, None]
    steps = [starts]
    for _ in range(seq_len):
        steps.append((steps[-1] * 5 + 3) % vocab)
    seq = torch.cat(steps, dim=1)
    x, y = seq[:, :-1], seq[:, 1:]
    return x[:n_train], y[:n_train], x[n_train:], y[n_train:]


class IgnoresIndex(Dataset):
    """A dataset whose ``__getitem__`` drops the index for most items (a classic copy-paste bug): it returns
    sample ``i % repeat_every`` (every item in a run of ``repeat_every`` is the same)."""

    def __init__(self, x: Tensor, y: Tensor, repeat_every: int = 4) -> None:
        self.x, self.y, self.repeat_every = x, y, repeat_every

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, index: int) -> tuple[Tensor, Tensor]:
        index = index - index % self.repeat_every
        return self.x[index], self.y[index]


# ------------------------------------------------------------------ models
class MLP(pl.LightningModule):
    """A healthy classifier MLP; ``dropout`` is an ``nn.Dropout`` (train-only)."""

    def __init__(self, in_features: int = IN, classes: int = 4, dropout: float = 0.0, hidden: int = 64):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(in_features, hidden), nn.ReLU(), nn.Dropout(dropout), nn.Linear(hidden, classes)
        )

    def forward(self, x: Tensor) -> Tensor:
        return self.net(x)

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        x, y = batch
        return F.cross_entropy(self(x), y)

    def configure_optimizers(self) -> Any:
        return torch.optim.AdamW(self.parameters(), lr=1e-2)


class HeavyDropoutMLP(MLP):
    """Healthy: dropout 0.9 (random in train, exact identity in eval)."""

    def __init__(self) -> None:
        super().__init__(dropout=0.9, hidden=256)


class FunctionalDropoutMLP(MLP):
    """Bug: ``F.dropout(h, 0.3)`` without ``training=self.training`` (F.dropout defaults to training=True)."""

    def forward(self, x: Tensor) -> Tensor:
        hidden = F.relu(self.net[0](x))
        return self.net[3](F.dropout(hidden, 0.3))


class NoisyCNN(DigitsCNN):
    """Bug: noise injection for regularisation applied at eval too (no ``if self.training``)."""

    def __init__(self) -> None:
        super().__init__(width=8)
        self.noise = GaussianNoise(0.1)

    def forward(self, x: Tensor) -> Tensor:
        return self.head(self.dropout(self.noise(self.features(x)).flatten(1)))


class GaussianNoise(nn.Module):
    def __init__(self, std: float) -> None:
        super().__init__()
        self.std = std

    def forward(self, x: Tensor) -> Tensor:
        return x + self.std * torch.randn_like(x)  # bug: also in eval


class AlwaysUpdatingNorm(nn.Module):
    """Bug: a hand-written batch norm that updates its running statistics whatever the mode."""

    def __init__(self, channels: int, momentum: float = 0.1) -> None:
        super().__init__()
        self.momentum = momentum
        self.register_buffer("running_mean", torch.zeros(channels))
        self.register_buffer("running_var", torch.ones(channels))

    def forward(self, x: Tensor) -> Tensor:
        mean, var = x.mean(dim=(0, 2, 3)), x.var(dim=(0, 2, 3))
        with torch.no_grad():  # bug: should be `if self.training:`
            self.running_mean.lerp_(mean, self.momentum)
            self.running_var.lerp_(var, self.momentum)
        if self.training:
            return (x - mean[:, None, None]) / (var[:, None, None] + 1e-5).sqrt()
        return (x - self.running_mean[:, None, None]) / (self.running_var[:, None, None] + 1e-5).sqrt()


class StatsUpdatedInEvalCNN(DigitsCNN):
    """Bug: its first normalisation layer updates running stats on validation data."""

    def __init__(self) -> None:
        super().__init__(width=8)
        self.features[1] = AlwaysUpdatingNorm(8)


class NormCNN(DigitsCNN):
    """Healthy: GroupNorm and LayerNorm instead of BatchNorm (same in train and eval), dropout 0.5."""

    def __init__(self) -> None:
        super().__init__(width=8, dropout=0.5)
        self.features[1] = nn.GroupNorm(2, 8)
        self.features[4] = nn.GroupNorm(1, 16)  # a LayerNorm over (C, H, W)


class TokenDropLM(TinyTransformerLM):
    """Bug: random token masking ("word dropout") inside forward, at eval too."""

    def __init__(self) -> None:
        super().__init__(vocab_size=512, d_model=32, n_heads=2, n_layers=1)

    def forward(self, tokens: Tensor) -> Tensor:
        keep = torch.rand(tokens.shape, device=tokens.device) > 0.1
        return super().forward(torch.where(keep, tokens, torch.zeros_like(tokens)))


class SmallLM(TinyTransformerLM):
    """Healthy: a one-layer TinyTransformerLM with a 512-token vocabulary."""

    def __init__(self) -> None:
        super().__init__(vocab_size=512, d_model=32, n_heads=2, n_layers=1)


class Regressor(pl.LightningModule):
    """A healthy regression MLP with MSE."""

    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(IN, 32), nn.Tanh(), nn.Linear(32, 1))

    def forward(self, x: Tensor) -> Tensor:
        return self.net(x).squeeze(-1)

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        x, y = batch
        return F.mse_loss(self(x), y)

    def configure_optimizers(self) -> Any:
        return torch.optim.Adam(self.parameters(), lr=1e-2)


class CallCountingRegressor(Regressor):
    """Bug: a buffer counting forward calls (used to anneal an input scale) is advanced in eval too."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("calls", torch.zeros((), dtype=torch.long))

    def forward(self, x: Tensor) -> Tensor:
        self.calls += 1  # bug: should only advance in training
        scale = 1.0 - 0.5 * torch.exp(-self.calls.float() / 100.0)
        return self.net(x * scale).squeeze(-1)
