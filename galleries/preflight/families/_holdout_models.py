"""Models and data of the blind hold-out gallery (``holdout.py``): bugs written without reading the checks.

Every model is small (a preflight on it takes seconds on a 2-core CPU) and is defined at module level
(copies and spawned processes pickle them). Data is generated here or is scikit-learn's digits.
"""

from __future__ import annotations

import math
from typing import Any

import lightning.pytorch as pl
import torch
from torch import Tensor, nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, Dataset, Subset, TensorDataset

VOCAB, SEQ = 32, 16
FEATURES, CLASSES = 12, 4


# --------------------------------------------------------------------------------------------------- data


def _generator(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _loader(dataset: Dataset, batch_size: int = 32, shuffle: bool = True, seed: int = 0) -> DataLoader:
    generator = _generator(seed) if shuffle else None
    return DataLoader(dataset, batch_size=batch_size, shuffle=shuffle, generator=generator)


def tabular(n: int = 320, seed: int = 0) -> tuple[Tensor, Tensor]:
    """Features and labels from a noisy linear teacher (learnable, not trivially)."""
    g = _generator(seed)
    x = torch.randn(n, FEATURES, generator=g)
    teacher = torch.randn(FEATURES, CLASSES, generator=_generator(1234))
    y = (x @ teacher + 0.5 * torch.randn(n, CLASSES, generator=g)).argmax(-1)
    return x, y


def regression_data(n: int = 320, seed: int = 0) -> tuple[Tensor, Tensor]:
    """A smooth nonlinear regression target, in house-price-like units (scale 50, offset 200)."""
    g = _generator(seed)
    x = torch.randn(n, FEATURES, generator=g)
    w = torch.randn(FEATURES, generator=_generator(99))
    y = 200.0 + 50.0 * torch.tanh(x @ w / 3.0) + 5.0 * torch.randn(n, generator=g)
    return x, y.unsqueeze(-1)


def digits(flatten: bool = False) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """scikit-learn digits split 80/20 (seeded): ``x_train, y_train, x_val, y_val`` in ``[0, 1]``."""
    from sklearn.datasets import load_digits

    d = load_digits()
    x = torch.tensor(d.images, dtype=torch.float32) / 16.0
    x = x.reshape(-1, 64) if flatten else x.unsqueeze(1)
    y = torch.tensor(d.target, dtype=torch.long)
    perm = torch.randperm(len(y), generator=_generator(0))
    cut = int(0.8 * len(y))
    return x[perm[:cut]], y[perm[:cut]], x[perm[cut:]], y[perm[cut:]]


def tokens(n: int = 256, seq: int = SEQ + 1, seed: int = 0) -> Tensor:
    """Sequences of a noisy Markov chain: next = (3 * prev + 1) mod V most of the time, else random."""
    g = _generator(seed)
    out = torch.empty(n, seq, dtype=torch.long)
    out[:, 0] = torch.randint(0, VOCAB, (n,), generator=g)
    for t in range(1, seq):
        rule = (3 * out[:, t - 1] + 1) % VOCAB
        noise = torch.randint(0, VOCAB, (n,), generator=g)
        keep = torch.rand(n, generator=g) < 0.8
        out[:, t] = torch.where(keep, rule, noise)
    return out


class DictDataset(Dataset):
    """A dataset of dict samples (what a tokenizer pipeline yields); the default collate stacks them."""

    def __init__(self, **columns: Tensor) -> None:
        self.columns = columns
        self.n = len(next(iter(columns.values())))

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index: int) -> dict[str, Tensor]:
        return {k: v[index] for k, v in self.columns.items()}


# ---- loaders, healthy


def tabular_loaders() -> dict[str, Any]:
    x, y = tabular(seed=0)
    xv, yv = tabular(n=128, seed=1)
    return {
        "train_dataloaders": _loader(TensorDataset(x, y)),
        "val_dataloaders": _loader(TensorDataset(xv, yv), shuffle=False),
    }


def regression_loaders() -> dict[str, Any]:
    x, y = regression_data(seed=0)
    xv, yv = regression_data(n=128, seed=1)
    return {
        "train_dataloaders": _loader(TensorDataset(x, y)),
        "val_dataloaders": _loader(TensorDataset(xv, yv), shuffle=False),
    }


def digits_loaders(flatten: bool = False) -> dict[str, Any]:
    x, y, xv, yv = digits(flatten)
    return {
        "train_dataloaders": _loader(TensorDataset(x, y)),
        "val_dataloaders": _loader(TensorDataset(xv, yv), shuffle=False),
    }


def lm_loaders() -> dict[str, Any]:
    """Next-token pairs ``(seq[:-1], seq[1:])``, as most LM datasets yield them."""
    s, sv = tokens(seed=0), tokens(n=64, seed=1)
    return {
        "train_dataloaders": _loader(TensorDataset(s[:, :-1], s[:, 1:])),
        "val_dataloaders": _loader(TensorDataset(sv[:, :-1], sv[:, 1:]), shuffle=False),
    }


def hf_lm_loaders() -> dict[str, Any]:
    """Dict batches for a Hugging Face causal LM: ``labels`` are the inputs (the model shifts them)."""
    s, sv = tokens(seed=0)[:, :SEQ], tokens(n=64, seed=1)[:, :SEQ]

    def ds(t: Tensor) -> DictDataset:
        return DictDataset(input_ids=t, attention_mask=torch.ones_like(t), labels=t.clone())

    return {"train_dataloaders": _loader(ds(s)), "val_dataloaders": _loader(ds(sv), shuffle=False)}


def _sentiment(n: int, seed: int) -> tuple[Tensor, Tensor]:
    """Token sequences whose label is whether 'positive' tokens (< V/2) outnumber the others."""
    g = _generator(seed)
    ids = torch.randint(1, VOCAB, (n, SEQ), generator=g)
    labels = ((ids < VOCAB // 2).sum(1) > SEQ // 2).long()
    return ids, labels


def hf_classifier_loaders(label_token: bool = False) -> dict[str, Any]:
    """Dict batches for a BERT-style classifier (``input_ids``, ``attention_mask``, ``labels``)."""

    def ds(seed: int, n: int) -> DictDataset:
        ids, labels = _sentiment(n, seed)
        if label_token:  # BUG: the prompt template "[label] text" was built with the gold label
            ids = torch.cat([labels.unsqueeze(1) + 1, ids[:, 1:]], dim=1)
        return DictDataset(input_ids=ids, attention_mask=torch.ones_like(ids), labels=labels)

    return {"train_dataloaders": _loader(ds(0, 256)), "val_dataloaders": _loader(ds(1, 64), shuffle=False)}


def sequence_class_loaders() -> dict[str, Any]:
    ids, labels = _sentiment(256, 0)
    idv, lv = _sentiment(64, 1)
    return {
        "train_dataloaders": _loader(TensorDataset(ids, labels)),
        "val_dataloaders": _loader(TensorDataset(idv, lv), shuffle=False),
    }


def imbalanced_binary_loaders() -> dict[str, Any]:
    """Binary data with a 1:9 positive rate, float targets ``[B, 1]`` for BCE."""
    g = _generator(0)
    x = torch.randn(400, FEATURES, generator=g)
    score = x[:, 0] + 0.5 * x[:, 1]
    y = (score > torch.quantile(score, 0.9)).float().unsqueeze(-1)
    return {
        "train_dataloaders": _loader(TensorDataset(x[:320], y[:320])),
        "val_dataloaders": _loader(TensorDataset(x[320:], y[320:]), shuffle=False),
    }


# ---- loaders, buggy


def label_column_loaders() -> dict[str, Any]:
    """BUG: the feature matrix was taken from a dataframe that still holds the label column."""

    def build(seed: int, n: int) -> TensorDataset:
        x, y = tabular(n=n, seed=seed)
        return TensorDataset(torch.cat([x, y.float().unsqueeze(1)], dim=1), y)

    return {
        "train_dataloaders": _loader(build(0, 320)),
        "val_dataloaders": _loader(build(1, 128), shuffle=False),
    }


def watermarked_digits_loaders() -> dict[str, Any]:
    """BUG: a preprocessing step writes the class id into the top-left pixel (a debugging overlay left on)."""
    x, y, xv, yv = digits()
    x, xv = x.clone(), xv.clone()
    x[:, 0, 0, 0] = y.float() / 9.0
    xv[:, 0, 0, 0] = yv.float() / 9.0
    return {
        "train_dataloaders": _loader(TensorDataset(x, y)),
        "val_dataloaders": _loader(TensorDataset(xv, yv), shuffle=False),
    }


def target_encoded_loaders() -> dict[str, Any]:
    """BUG: a high-cardinality "customer id" is target-encoded with the mean target over the full table,
    each row included, so the encoded feature is (nearly) the row's own target."""

    def build(seed: int, n: int) -> TensorDataset:
        x, y = regression_data(n=n, seed=seed)
        ids = torch.randint(0, n, (n,), generator=_generator(seed + 7))
        sums = torch.zeros(n).index_add_(0, ids, y.squeeze(1))
        counts = torch.zeros(n).index_add_(0, ids, torch.ones(n))
        encoded = (sums / counts.clamp(min=1))[ids]
        encoded = (encoded - 200.0) / 50.0  # standardised like the other columns
        return TensorDataset(torch.cat([x, encoded.unsqueeze(1)], dim=1), y)

    return {
        "train_dataloaders": _loader(build(0, 320)),
        "val_dataloaders": _loader(build(1, 128), shuffle=False),
    }


def label_normalised_loaders() -> dict[str, Any]:
    """BUG: a feature-engineering step adds a "group mean" column, grouping the rows by the label column
    (the statistic was meant to be grouped by a category, the wrong column name was used)."""

    def build(seed: int, n: int) -> TensorDataset:
        x, y = tabular(n=n, seed=seed)
        class_mean = torch.stack([x[y == c].mean(0) if (y == c).any() else x.mean(0) for c in range(CLASSES)])
        group_feature = class_mean[y].mean(1, keepdim=True)  # "mean of the group", one column
        return TensorDataset(torch.cat([x, group_feature], dim=1), y)

    return {
        "train_dataloaders": _loader(build(0, 320)),
        "val_dataloaders": _loader(build(1, 128), shuffle=False),
    }


def unshifted_lm_loaders() -> dict[str, Any]:
    """BUG: the LM dataset returns ``(seq, seq)``; the shift was forgotten."""
    s, sv = tokens(seed=0)[:, :SEQ], tokens(n=64, seed=1)[:, :SEQ]
    return {
        "train_dataloaders": _loader(TensorDataset(s, s.clone())),
        "val_dataloaders": _loader(TensorDataset(sv, sv.clone()), shuffle=False),
    }


def reversed_shift_lm_loaders() -> dict[str, Any]:
    """BUG: the shift goes the wrong way, ``(seq[1:], seq[:-1])``: the target at t is the input at t - 1."""
    s, sv = tokens(seed=0), tokens(n=64, seed=1)
    return {
        "train_dataloaders": _loader(TensorDataset(s[:, 1:], s[:, :-1])),
        "val_dataloaders": _loader(TensorDataset(sv[:, 1:], sv[:, :-1]), shuffle=False),
    }


def val_from_train_loaders() -> dict[str, Any]:
    """BUG: the validation set is a random subset of the training set."""
    x, y = tabular(seed=0)
    train = TensorDataset(x, y)
    val = Subset(train, torch.randperm(len(train), generator=_generator(5))[:64].tolist())
    return {"train_dataloaders": _loader(train), "val_dataloaders": _loader(val, shuffle=False)}


def augmented_val_loaders() -> dict[str, Any]:
    """BUG: the "validation set" is augmented copies of training images (dimmed + noise)."""
    x, y, _, _ = digits()
    g = _generator(3)
    pick = torch.randperm(len(y), generator=g)[:300]
    xv = (x[pick] * 0.95 + 0.02 * torch.randn(x[pick].shape, generator=g)).clamp(0, 1)
    return {
        "train_dataloaders": _loader(TensorDataset(x, y)),
        "val_dataloaders": _loader(TensorDataset(xv, y[pick]), shuffle=False),
    }


def oversampled_then_split_loaders() -> dict[str, Any]:
    """BUG: the minority classes were oversampled (rows repeated) before the train/validation split."""
    x, y = tabular(n=300, seed=0)
    minority = torch.nonzero(y >= 2).flatten()
    x = torch.cat([x, x[minority], x[minority]])
    y = torch.cat([y, y[minority], y[minority]])
    perm = torch.randperm(len(y), generator=_generator(8))
    cut = int(0.8 * len(y))
    tr, va = perm[:cut], perm[cut:]
    return {
        "train_dataloaders": _loader(TensorDataset(x[tr], y[tr])),
        "val_dataloaders": _loader(TensorDataset(x[va], y[va]), shuffle=False),
    }


def blank_images_loaders() -> dict[str, Any]:
    """BUG: a quarter of the images failed to decode and were replaced by zeros, labels kept."""
    x, y, xv, yv = digits()
    x = x.clone()
    blank = torch.rand(len(y), generator=_generator(4)) < 0.25
    x[blank] = 0.0
    return {
        "train_dataloaders": _loader(TensorDataset(x, y)),
        "val_dataloaders": _loader(TensorDataset(xv, yv), shuffle=False),
    }


def log_counts_inf_loaders() -> dict[str, Any]:
    """BUG: count features log-transformed without +1: zero counts become -inf."""
    g = _generator(0)
    counts = torch.poisson(torch.full((320, FEATURES), 3.0), generator=g)
    y = (counts[:, :3].sum(1) > 9).long()
    x = torch.log(counts)
    return {"train_dataloaders": _loader(TensorDataset(x, y))}


def nan_targets_loaders() -> dict[str, Any]:
    """BUG: missing target values in the table arrive as NaN regression targets."""
    x, y = regression_data(seed=0)
    y = y.clone()
    y[torch.rand(len(y), generator=_generator(6)) < 0.1] = float("nan")
    xv, yv = regression_data(n=128, seed=1)
    return {
        "train_dataloaders": _loader(TensorDataset(x, y)),
        "val_dataloaders": _loader(TensorDataset(xv, yv), shuffle=False),
    }


def one_indexed_val_labels_loaders() -> dict[str, Any]:
    """BUG: the validation CSV stores classes 1..10, the training one 0..9; nobody re-encoded them."""
    x, y, xv, yv = digits(flatten=True)
    return {
        "train_dataloaders": _loader(TensorDataset(x, y)),
        "val_dataloaders": _loader(TensorDataset(xv, yv + 1), shuffle=False),
        "num_classes": 11,
    }


def permuted_val_labels_loaders() -> dict[str, Any]:
    """BUG: train and validation were label-encoded separately (order of first appearance), so the same
    class has a different id in each split."""
    x, y = tabular(seed=0)
    xv, yv = tabular(n=160, seed=1)
    mapping = torch.tensor([2, 0, 3, 1])
    return {
        "train_dataloaders": _loader(TensorDataset(x, y)),
        "val_dataloaders": _loader(TensorDataset(xv, mapping[yv]), shuffle=False),
    }


# ------------------------------------------------------------------------------------------------- models


class _Base(pl.LightningModule):
    """Shared ``configure_optimizers`` (AdamW); every subclass writes its own ``training_step``."""

    lr = 3e-3

    def configure_optimizers(self) -> Any:
        return torch.optim.AdamW(self.parameters(), lr=self.lr)


class TabularMLP(_Base):
    """A healthy MLP classifier; ``in_features`` follows the data."""

    def __init__(self, in_features: int = FEATURES, classes: int = CLASSES, label_smoothing: float = 0.0):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(in_features, 64), nn.ReLU(), nn.Linear(64, classes))
        self.label_smoothing = label_smoothing

    def forward(self, x: Tensor) -> Tensor:
        return self.net(x)

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        x, y = batch
        return F.cross_entropy(self(x), y, label_smoothing=self.label_smoothing)

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        x, y = batch
        self.log("val_loss", F.cross_entropy(self(x), y))


class SoftmaxHeadMLP(TabularMLP):
    """BUG: the network ends in ``nn.Softmax`` (copied from an inference script) and feeds cross-entropy."""

    def __init__(self) -> None:
        super().__init__()
        self.net.append(nn.Softmax(dim=-1))


class Regressor(_Base):
    """A healthy regression MLP on standardised-by-hand targets: a learned output scale and offset."""

    def __init__(self, in_features: int = FEATURES) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(in_features, 64), nn.Tanh(), nn.Linear(64, 1))
        self.log_scale = nn.Parameter(torch.tensor(math.log(50.0)))
        self.offset = nn.Parameter(torch.tensor(200.0))

    def forward(self, x: Tensor) -> Tensor:
        return self.offset + self.net(x) * self.log_scale.exp()

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        x, y = batch
        return F.mse_loss(self(x), y)


class NoisyInputRegressor(Regressor):
    """BUG: Gaussian input noise as regularisation, applied always (no ``if self.training``)."""

    def forward(self, x: Tensor) -> Tensor:
        x = x + 0.1 * torch.randn_like(x)
        return super().forward(x)


class RunningNormRegressor(Regressor):
    """BUG: a hand-written input normaliser that updates its running statistics on every call, eval too."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("mean", torch.zeros(FEATURES))
        self.register_buffer("var", torch.ones(FEATURES))

    def forward(self, x: Tensor) -> Tensor:
        with torch.no_grad():
            self.mean.mul_(0.9).add_(0.1 * x.mean(0))
            self.var.mul_(0.9).add_(0.1 * x.var(0, unbiased=False))
        return super().forward((x - self.mean) / (self.var + 1e-5).sqrt())


class DigitsConvNet(_Base):
    """A small CNN for 8x8 digits, GroupNorm and (heavy) dropout as real modules."""

    def __init__(self, dropout: float = 0.5, in_channels: int = 1) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(in_channels, 16, 3, padding=1),
            nn.GroupNorm(4, 16),
            nn.ReLU(),
            nn.Conv2d(16, 32, 3, padding=1, stride=2),
            nn.GroupNorm(4, 32),
            nn.ReLU(),
        )
        self.head = nn.Sequential(nn.Flatten(), nn.Dropout(dropout), nn.Linear(32 * 4 * 4, 10))

    def forward(self, x: Tensor) -> Tensor:
        return self.head(self.features(x))

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        x, y = batch
        return F.cross_entropy(self(x), y)


class FunctionalDropoutCNN(DigitsConvNet):
    """BUG: ``F.dropout`` without ``training=self.training``: dropout stays on at evaluation."""

    def forward(self, x: Tensor) -> Tensor:
        h = F.dropout(self.features(x).flatten(1), p=0.3)
        return self.head[2](h)


class RandomFlipCNN(DigitsConvNet):
    """BUG: random horizontal-flip augmentation written inside ``forward``, so it also runs in eval."""

    def forward(self, x: Tensor) -> Tensor:
        flip = torch.rand(x.shape[0], 1, 1, 1, device=x.device) < 0.5
        x = torch.where(flip, x.flip(-1), x)
        return super().forward(x)


class BigInitCNN(DigitsConvNet):
    """BUG: a custom ``init_weights`` that draws every weight from N(0, 1) (meant std = 0.02)."""

    def __init__(self) -> None:
        super().__init__(dropout=0.0)
        for m in self.modules():
            if isinstance(m, (nn.Conv2d, nn.Linear)):
                nn.init.normal_(m.weight, std=1.0)


class TanhLogitsCNN(DigitsConvNet):
    """BUG: logits squashed with ``tanh`` "for stability" before cross-entropy: the loss cannot go below
    ``-log(e / (e + 9 / e))`` ~ 0.80 on 10 classes."""

    def forward(self, x: Tensor) -> Tensor:
        return torch.tanh(super().forward(x))


class DigitsMLP(TabularMLP):
    def __init__(self, label_smoothing: float = 0.0, classes: int = 10) -> None:
        super().__init__(in_features=64, classes=classes, label_smoothing=label_smoothing)


class DoubleSigmoidBinary(_Base):
    """BUG: the head ends in ``nn.Sigmoid`` and the loss is ``BCEWithLogitsLoss`` (a second sigmoid)."""

    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(FEATURES, 32), nn.ReLU(), nn.Linear(32, 1), nn.Sigmoid())
        self.loss_fn = nn.BCEWithLogitsLoss()

    def forward(self, x: Tensor) -> Tensor:
        return self.net(x)

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        x, y = batch
        return self.loss_fn(self(x), y)


class PriorBiasBinary(_Base):
    """Healthy: BCE-with-logits binary classifier whose output bias is set to the class prior's log-odds."""

    def __init__(self, prior: float = 0.1) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(FEATURES, 32), nn.ReLU(), nn.Linear(32, 1))
        with torch.no_grad():
            self.net[2].weight.mul_(0.01)
            self.net[2].bias.fill_(math.log(prior / (1 - prior)))

    def forward(self, x: Tensor) -> Tensor:
        return self.net(x)

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        x, y = batch
        return F.binary_cross_entropy_with_logits(self(x), y)


class LSTMClassifier(_Base):
    """A healthy LSTM sequence classifier (last hidden state -> linear)."""

    def __init__(self, reduction: str = "mean") -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, 32)
        self.rnn = nn.LSTM(32, 32, batch_first=True)
        self.head = nn.Linear(32, 2)
        self.reduction = reduction

    def forward(self, ids: Tensor) -> Tensor:
        _, (h, _) = self.rnn(self.embed(ids))
        return self.head(h[-1])

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        ids, y = batch
        return F.cross_entropy(self(ids), y, reduction=self.reduction)


class SummedLossLSTM(LSTMClassifier):
    """BUG: ``reduction="sum"`` (copied from a per-token loss snippet), so the loss scales with the batch."""

    def __init__(self) -> None:
        super().__init__(reduction="sum")


class GRULM(_Base):
    """A next-token GRU language model; ``bidirectional=True`` is the bug variant."""

    def __init__(self, bidirectional: bool = False) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, 32)
        self.rnn = nn.GRU(32, 32, batch_first=True, bidirectional=bidirectional)
        self.head = nn.Linear(64 if bidirectional else 32, VOCAB)

    def forward(self, ids: Tensor) -> Tensor:
        out, _ = self.rnn(self.embed(ids))
        return self.head(out)

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        x, y = batch
        return F.cross_entropy(self(x).reshape(-1, VOCAB), y.reshape(-1))


class BiGRULM(GRULM):
    """BUG: a bidirectional GRU ("more context is better") in a next-token language model."""

    def __init__(self) -> None:
        super().__init__(bidirectional=True)


class _Attention(nn.Module):
    def __init__(self, d: int, heads: int, mask_mode: str) -> None:
        super().__init__()
        self.qkv = nn.Linear(d, 3 * d)
        self.out = nn.Linear(d, d)
        self.heads = heads
        self.mask_mode = mask_mode

    def forward(self, x: Tensor) -> Tensor:
        b, s, d = x.shape
        q, k, v = self.qkv(x).view(b, s, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        ones = torch.ones(s, s, dtype=torch.bool, device=x.device)
        if self.mask_mode == "causal":
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        elif self.mask_mode == "upper":
            # BUG: nn.MultiheadAttention's convention (True = blocked) given to SDPA (True = may attend)
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=torch.triu(ones))
        else:  # "none": BUG, the mask was forgotten
            y = F.scaled_dot_product_attention(q, k, v)
        return self.out(y.transpose(1, 2).reshape(b, s, d))


class _Block(nn.Module):
    def __init__(self, d: int, heads: int, mask_mode: str) -> None:
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = _Attention(d, heads, mask_mode)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x: Tensor) -> Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class SmallGPT(_Base):
    """A hand-written decoder-only LM (learned positions, pre-norm blocks, tied embeddings)."""

    def __init__(self, mask_mode: str = "causal", d: int = 32, layers: int = 2) -> None:
        super().__init__()
        self.tok = nn.Embedding(VOCAB, d)
        self.pos = nn.Parameter(torch.zeros(1, SEQ + 1, d))
        self.blocks = nn.Sequential(*[_Block(d, 2, mask_mode) for _ in range(layers)])
        self.ln = nn.LayerNorm(d)
        nn.init.normal_(self.tok.weight, std=0.02)  # GPT-2's init: tied logits start near uniform

    def forward(self, ids: Tensor) -> Tensor:
        h = self.blocks(self.tok(ids) + self.pos[:, : ids.shape[1]])
        return self.ln(h) @ self.tok.weight.T

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        x, y = batch
        return F.cross_entropy(self(x).flatten(0, 1), y.flatten())


class NoMaskGPT(SmallGPT):
    def __init__(self) -> None:
        super().__init__(mask_mode="none")


class UpperMaskGPT(SmallGPT):
    def __init__(self) -> None:
        super().__init__(mask_mode="upper")


class PatchViT(_Base):
    """Healthy: a ViT-like classifier for 8x8 digits (2x2 patches, class token, one encoder layer)."""

    def __init__(self, d: int = 32) -> None:
        super().__init__()
        self.patch = nn.Conv2d(1, d, kernel_size=2, stride=2)
        self.cls = nn.Parameter(torch.zeros(1, 1, d))
        self.pos = nn.Parameter(0.02 * torch.randn(1, 17, d))
        layer = nn.TransformerEncoderLayer(d, 2, 2 * d, dropout=0.1, batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, 1, enable_nested_tensor=False)
        self.head = nn.Linear(d, 10)

    def forward(self, x: Tensor) -> Tensor:
        p = self.patch(x).flatten(2).transpose(1, 2)
        h = torch.cat([self.cls.expand(x.shape[0], -1, -1), p], dim=1) + self.pos
        return self.head(self.encoder(h)[:, 0])

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        x, y = batch
        return F.cross_entropy(self(x), y)


class DictOutputMLP(_Base):
    """Healthy: ``forward`` returns a dict (logits + embedding), ``training_step`` returns a dict."""

    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(FEATURES, 48), nn.ReLU())
        self.head = nn.Linear(48, CLASSES)

    def forward(self, x: Tensor) -> dict[str, Tensor]:
        emb = self.body(x)
        return {"logits": self.head(emb), "embedding": emb}

    def training_step(self, batch: Any, batch_idx: int) -> dict[str, Any]:
        x, y = batch
        out = self(x)
        loss = F.cross_entropy(out["logits"], y)
        return {"loss": loss, "embedding_norm": out["embedding"].detach().norm(dim=1).mean()}


# ---- Hugging Face models wrapped the usual way (no forward, ``self.model(**batch)``)


def _gpt2_config() -> Any:
    from transformers import GPT2Config

    return GPT2Config(
        vocab_size=VOCAB, n_positions=SEQ + 1, n_embd=32, n_layer=2, n_head=2, bos_token_id=0, eos_token_id=0
    )


def _bert_config(**kwargs: Any) -> Any:
    from transformers import BertConfig

    return BertConfig(
        vocab_size=VOCAB,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=SEQ + 1,
        **kwargs,
    )


class HFCausalLM(_Base):
    """Healthy: GPT-2 from a small config; the HF model shifts ``labels`` itself and returns ``.loss``."""

    def __init__(self) -> None:
        super().__init__()
        from transformers import GPT2LMHeadModel

        self.model = GPT2LMHeadModel(_gpt2_config())

    def training_step(self, batch: dict[str, Tensor], batch_idx: int) -> Tensor:
        return self.model(**batch).loss

    def validation_step(self, batch: dict[str, Tensor], batch_idx: int) -> None:
        self.log("val_loss", self.model(**batch).loss)


class HFCausalLMUnshiftedLoss(HFCausalLM):
    """BUG: the user computes the loss by hand from ``.logits`` and forgets the shift HF does internally:
    position t is trained to output the token it was just given."""

    def training_step(self, batch: dict[str, Tensor], batch_idx: int) -> Tensor:
        logits = self.model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
        return F.cross_entropy(logits.reshape(-1, VOCAB), batch["labels"].reshape(-1))


class HFMaskedLMAsNextToken(_Base):
    """BUG: a BERT masked-LM (bidirectional encoder) trained as a next-token model with shifted labels."""

    def __init__(self) -> None:
        super().__init__()
        from transformers import BertForMaskedLM

        self.model = BertForMaskedLM(_bert_config())

    def training_step(self, batch: dict[str, Tensor], batch_idx: int) -> Tensor:
        ids = batch["input_ids"]
        logits = self.model(input_ids=ids, attention_mask=batch["attention_mask"]).logits
        return F.cross_entropy(logits[:, :-1].reshape(-1, VOCAB), ids[:, 1:].reshape(-1))


class HFSequenceClassifier(_Base):
    """Healthy: BERT for sequence classification from a small config, dict batches with ``labels``."""

    def __init__(self) -> None:
        super().__init__()
        from transformers import BertForSequenceClassification

        self.model = BertForSequenceClassification(_bert_config(num_labels=2))

    def training_step(self, batch: dict[str, Tensor], batch_idx: int) -> Tensor:
        return self.model(**batch).loss
