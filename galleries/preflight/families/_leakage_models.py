"""Models and data of the causality and target-leakage galleries (module level: spawn pickles them).

Real models on real or generated data: sequence models over an affine token recurrence, scikit-learn's digits
for the CNN, Gaussian features for MLPs and regression, and Hugging Face GPT-2 / BERT built from small configs
(random weights, no download).
"""

from __future__ import annotations

import math
from typing import Any

import lightning.pytorch as pl
import torch
from torch import Tensor, nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, Dataset, TensorDataset

from lightning_recipes.testing import DigitsCNN, TinyTransformerLM, random_token_loader

V, S, C, IN = 32, 16, 4, 16  # vocabulary, sequence length, classes, features


# ---------------------------------------------------------------- data
def _loader(*tensors: Tensor, batch_size: int = 32, shuffle: bool = True) -> DataLoader:
    generator = torch.Generator().manual_seed(0) if shuffle else None
    return DataLoader(TensorDataset(*tensors), batch_size=batch_size, shuffle=shuffle, generator=generator)


class _Dicts(Dataset):
    """A dataset of dict samples from named tensors of the same length."""

    def __init__(self, **tensors: Tensor) -> None:
        self.tensors = tensors

    def __len__(self) -> int:
        return len(next(iter(self.tensors.values())))

    def __getitem__(self, index: int) -> dict[str, Tensor]:
        return {key: value[index] for key, value in self.tensors.items()}


def _dict_loader(batch_size: int = 32, shuffle: bool = True, **tensors: Tensor) -> DataLoader:
    generator = torch.Generator().manual_seed(0) if shuffle else None
    return DataLoader(_Dicts(**tensors), batch_size=batch_size, shuffle=shuffle, generator=generator)


def tokens(n: int = 256, seq_len: int = S + 1, seed: int = 0) -> Tensor:
    """Sequences of the recurrence ``t[i+1] = (5 t[i] + 3 + noise) mod V`` (noise in {0, 1}: not trivial)."""
    g = torch.Generator().manual_seed(seed)
    rows = [torch.randint(0, V, (n,), generator=g)]
    for _ in range(seq_len - 1):
        rows.append((rows[-1] * 5 + 3 + torch.randint(0, 2, (n,), generator=g)) % V)
    return torch.stack(rows, 1)


def lm_data() -> dict[str, Any]:
    """Next-token batches ``(tokens[:, :-1], tokens[:, 1:])``, train and validation."""
    train, val = tokens(256, seed=0), tokens(64, seed=1)
    return {
        "train_dataloaders": _loader(train[:, :-1], train[:, 1:]),
        "val_dataloaders": _loader(val[:, :-1], val[:, 1:], shuffle=False),
    }


def unshifted_lm_data() -> dict[str, Any]:
    """The bug: targets are the inputs themselves (the shift was forgotten)."""
    train, val = tokens(256, seed=0), tokens(64, seed=1)
    return {
        "train_dataloaders": _loader(train, train.clone()),
        "val_dataloaders": _loader(val, val.clone(), shuffle=False),
    }


def hf_lm_data() -> dict[str, Any]:
    """Hugging Face style: ``{"input_ids", "attention_mask", "labels"}`` with ``labels == input_ids``."""
    out = {}
    for key, seed, n in (("train_dataloaders", 0, 256), ("val_dataloaders", 1, 64)):
        ids = tokens(n, S, seed)
        out[key] = _dict_loader(
            shuffle=seed == 0, input_ids=ids, attention_mask=torch.ones_like(ids), labels=ids.clone()
        )
    return out


def forecast_data() -> dict[str, Any]:
    """Float sequences ``[B, S, 1]`` of noisy sines; the target is the next value."""
    out = {}
    for key, seed, n in (("train_dataloaders", 0, 256), ("val_dataloaders", 1, 64)):
        g = torch.Generator().manual_seed(seed)
        phase = torch.rand(n, 1, generator=g) * 2 * math.pi
        t = torch.arange(S + 1).float() * 0.4
        series = (torch.sin(t + phase) + 0.05 * torch.randn(n, S + 1, generator=g)).unsqueeze(-1)
        out[key] = _loader(series[:, :-1], series[:, 1:], shuffle=seed == 0)
    return out


def tagging_data() -> dict[str, Any]:
    """Per-token tags ``[B, S]`` (the token's residue mod 3): a tagger reads the whole sentence."""
    train, val = tokens(256, S, 0), tokens(64, S, 1)
    return {
        "train_dataloaders": _loader(train, train % 3),
        "val_dataloaders": _loader(val, val % 3, shuffle=False),
    }


def _sequence_labels(ids: Tensor) -> Tensor:
    """A learnable label spread over the sequence (how many of the first 8 tokens are in the lower half of
    the vocabulary, in 4 buckets): no single position decides it."""
    low = (ids[:, :8] < (V - C) // 2).sum(1)
    return torch.bucketize(low, torch.tensor([2, 4, 6]), right=True).clamp(max=C - 1)


def sequence_classification_data(*, leak_position: int | None = None, hf: bool = False) -> dict[str, Any]:
    """Token sequences labelled by :func:`_sequence_labels`; ``leak_position`` writes ``label + V - C``
    there."""
    out = {}
    for key, seed, n in (("train_dataloaders", 0, 512), ("val_dataloaders", 1, 128)):
        ids = tokens(n, S, seed) % (V - C)
        labels = _sequence_labels(ids)
        if leak_position is not None:
            ids[:, leak_position] = labels + V - C
        if hf:
            out[key] = _dict_loader(
                shuffle=seed == 0, input_ids=ids, attention_mask=torch.ones_like(ids), labels=labels
            )
        else:
            out[key] = _loader(ids, labels, shuffle=seed == 0)
    return out


def features(n: int, seed: int, *, noise: float = 0.0) -> tuple[Tensor, Tensor]:
    """Gaussian features labelled by a fixed linear teacher (the same teacher for every split)."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, IN, generator=g)
    teacher = torch.randn(IN, C, generator=torch.Generator().manual_seed(123))
    y = (x @ teacher + noise * torch.randn(n, C, generator=g)).argmax(-1)
    return x, y


def label_column_data() -> dict[str, Any]:
    """The bug: the label is appended to the features as one more column."""
    out = {}
    for key, seed, n in (("train_dataloaders", 0, 512), ("val_dataloaders", 1, 128)):
        x, y = features(n, seed)
        out[key] = _loader(torch.cat([x, y[:, None].float()], 1), y, shuffle=seed == 0)
    return out


def strong_feature_data() -> dict[str, Any]:
    """Healthy: feature 0 agrees with a binary-ish label 85% of the time (strong, not a copy)."""
    out = {}
    for key, seed, n in (("train_dataloaders", 0, 512), ("val_dataloaders", 1, 128)):
        x, y = features(n, seed)
        g = torch.Generator().manual_seed(seed + 10)
        agree = torch.rand(n, generator=g) < 0.85
        noisy = torch.where(agree, y, torch.randint(0, C, (n,), generator=g))
        x[:, 0] = noisy.float() + 0.3 * torch.randn(n, generator=g)
        out[key] = _loader(x, y, shuffle=seed == 0)
    return out


def label_copy_data() -> dict[str, Any]:
    """The bug: the batch carries ``label_copy`` (a leftover column) and the model reads it."""
    out = {}
    for key, seed, n in (("train_dataloaders", 0, 512), ("val_dataloaders", 1, 128)):
        x, y = features(n, seed)
        out[key] = _dict_loader(shuffle=seed == 0, x=x, label_copy=y.clone(), y=y)
    return out


def regression_data(*, leak: bool = False) -> dict[str, Any]:
    """``{"x", "y"}`` regression; ``leak`` appends ``2 y + 1`` (the target, rescaled) as a feature."""
    out = {}
    for key, seed, n in (("train_dataloaders", 0, 512), ("val_dataloaders", 1, 128)):
        g = torch.Generator().manual_seed(seed)
        x = torch.randn(n, IN, generator=g)
        y = torch.tanh(
            x @ torch.randn(IN, generator=torch.Generator().manual_seed(7)) / 4
        ) + 0.1 * torch.randn(n, generator=g)
        if leak:
            x = torch.cat([x, 2 * y[:, None] + 1], 1)
        out[key] = _dict_loader(shuffle=seed == 0, x=x, y=y)
    return out


def digits_data(*, leak: bool = False) -> dict[str, Any]:
    """scikit-learn's 8x8 digits in ``[0, 1]``; ``leak`` writes ``label / 9`` into pixel (0, 0)."""
    from sklearn.datasets import load_digits

    digits = load_digits()
    images = torch.tensor(digits.images, dtype=torch.float32).unsqueeze(1) / 16.0
    labels = torch.tensor(digits.target, dtype=torch.long)
    if leak:
        images[:, 0, 0, 0] = labels.float() / 9.0
    perm = torch.randperm(len(labels), generator=torch.Generator().manual_seed(0))
    train, val = perm[:1400], perm[1400:]
    return {
        "train_dataloaders": _loader(images[train], labels[train], batch_size=64),
        "val_dataloaders": _loader(images[val], labels[val], batch_size=128, shuffle=False),
    }


def token_lm_data() -> dict[str, Any]:
    """``random_token_loader`` (the library's own LM data), train and validation."""
    return {
        "train_dataloaders": random_token_loader(num_samples=128, seq_len=S, vocab_size=V, shuffle=True),
        "val_dataloaders": random_token_loader(num_samples=32, seq_len=S, vocab_size=V, seed=1),
    }


# ---------------------------------------------------------------- sequence models
class SequenceLM(pl.LightningModule):
    """A small next-token model ``[B, S] -> [B, S, V]`` whose sequence mixer is chosen by name.

    ``causal_attention`` (healthy), ``full_attention`` (no causal mask), ``bigru`` (a bidirectional GRU),
    ``gru`` (healthy), ``causal_conv`` (left padding, healthy), ``centered_conv`` (padded on both sides: the
    output at ``t`` sees ``t + 1``), ``rolled`` (causal attention over inputs rolled one step left: off by
    one).
    """

    def __init__(self, mixer: str = "causal_attention", width: int = 32) -> None:
        super().__init__()
        self.mixer = mixer
        self.embedding = nn.Embedding(V, width)
        self.position = nn.Embedding(64, width)
        if "attention" in mixer or mixer == "rolled":
            self.qkv = nn.Linear(width, 3 * width)
        elif "gru" in mixer:
            self.rnn = nn.GRU(width, width, batch_first=True, bidirectional=mixer == "bigru")
        else:
            self.conv = nn.Conv1d(width, width, 3)
        self.head = nn.Linear(2 * width if mixer == "bigru" else width, V)

    def forward(self, ids: Tensor) -> Tensor:
        if self.mixer == "rolled":
            ids = ids.roll(-1, dims=1)
        h = self.embedding(ids) + self.position(torch.arange(ids.shape[1], device=ids.device))
        if hasattr(self, "qkv"):
            q, k, v = self.qkv(h).chunk(3, dim=-1)
            h = h + F.scaled_dot_product_attention(q, k, v, is_causal=self.mixer != "full_attention")
        elif hasattr(self, "rnn"):
            h = self.rnn(h)[0]
        else:
            pad = (2, 0) if self.mixer == "causal_conv" else (1, 1)
            h = h + F.relu(self.conv(F.pad(h.transpose(1, 2), pad))).transpose(1, 2)
        return self.head(h)

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        ids, target = batch
        return F.cross_entropy(self(ids).flatten(0, 1), target.flatten())

    def configure_optimizers(self) -> Any:
        return torch.optim.AdamW(self.parameters(), lr=3e-3)


class Tagger(pl.LightningModule):
    """A bidirectional GRU tagger (healthy: tagging legitimately reads the whole sentence)."""

    def __init__(self, width: int = 32) -> None:
        super().__init__()
        self.embedding = nn.Embedding(V, width)
        self.rnn = nn.GRU(width, width, batch_first=True, bidirectional=True)
        self.head = nn.Linear(2 * width, 3)

    def forward(self, ids: Tensor) -> Tensor:
        return self.head(self.rnn(self.embedding(ids))[0])

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        ids, tags = batch
        return F.cross_entropy(self(ids).flatten(0, 1), tags.flatten())

    def configure_optimizers(self) -> Any:
        return torch.optim.AdamW(self.parameters(), lr=3e-3)


class Forecaster(pl.LightningModule):
    """An LSTM forecaster ``[B, S, 1] -> [B, S, 1]`` trained on the next value (``bidirectional``: the
    bug)."""

    def __init__(self, bidirectional: bool = False, width: int = 16) -> None:
        super().__init__()
        self.rnn = nn.LSTM(1, width, batch_first=True, bidirectional=bidirectional)
        self.head = nn.Linear(2 * width if bidirectional else width, 1)

    def forward(self, x: Tensor) -> Tensor:
        return self.head(self.rnn(x)[0])

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        x, y = batch
        return F.mse_loss(self(x), y)

    def configure_optimizers(self) -> Any:
        return torch.optim.Adam(self.parameters(), lr=1e-2)


class EncoderClassifier(pl.LightningModule):
    """A bidirectional transformer encoder over tokens, mean-pooled into ``C`` classes (healthy shape)."""

    def __init__(self, width: int = 32) -> None:
        super().__init__()
        self.embedding = nn.Embedding(V, width)
        self.position = nn.Embedding(64, width)
        layer = nn.TransformerEncoderLayer(width, 2, 64, dropout=0.1, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 1, enable_nested_tensor=False)
        self.head = nn.Linear(width, C)

    def forward(self, ids: Tensor) -> Tensor:
        h = self.embedding(ids) + self.position(torch.arange(ids.shape[1], device=ids.device))
        return self.head(self.encoder(h).mean(1))

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        ids, y = batch
        return F.cross_entropy(self(ids), y)

    def configure_optimizers(self) -> Any:
        return torch.optim.AdamW(self.parameters(), lr=3e-3)


def tiny_lm() -> TinyTransformerLM:
    return TinyTransformerLM(vocab_size=V, d_model=32, n_heads=2, n_layers=1)


# ---------------------------------------------------------------- tabular / image models
class MLP(pl.LightningModule):
    """A plain MLP classifier on ``(x, y)`` batches."""

    def __init__(self, in_features: int = IN) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(in_features, 64), nn.ReLU(), nn.Linear(64, C))

    def forward(self, x: Tensor) -> Tensor:
        return self.net(x)

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        x, y = batch
        return F.cross_entropy(self(x), y)

    def configure_optimizers(self) -> Any:
        return torch.optim.AdamW(self.parameters(), lr=1e-2)


class LabelCopyReader(pl.LightningModule):
    """The bug: ``training_step`` feeds ``batch["label_copy"]`` (one-hot) to the network with the features."""

    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(IN + C, 64), nn.ReLU(), nn.Linear(64, C))

    def training_step(self, batch: dict[str, Tensor], batch_idx: int) -> Tensor:
        extra = F.one_hot(batch["label_copy"], C).float()
        return F.cross_entropy(self.net(torch.cat([batch["x"], extra], 1)), batch["y"])

    def configure_optimizers(self) -> Any:
        return torch.optim.AdamW(self.parameters(), lr=1e-2)


class Regressor(pl.LightningModule):
    """An MLP regressor on ``{"x", "y"}`` dict batches (MSE)."""

    def __init__(self, in_features: int = IN) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(in_features, 32), nn.Tanh(), nn.Linear(32, 1))

    def forward(self, x: Tensor) -> Tensor:
        return self.net(x).squeeze(-1)

    def training_step(self, batch: dict[str, Tensor], batch_idx: int) -> Tensor:
        return F.mse_loss(self(batch["x"]), batch["y"])

    def configure_optimizers(self) -> Any:
        return torch.optim.Adam(self.parameters(), lr=1e-2)


def digits_cnn() -> DigitsCNN:
    return DigitsCNN(width=8)


# ---------------------------------------------------------------- Hugging Face (small configs, random init)
def _gpt2_config() -> Any:
    from transformers import GPT2Config

    return GPT2Config(
        n_layer=2, n_head=2, n_embd=32, vocab_size=V, n_positions=32, bos_token_id=0, eos_token_id=0
    )


def _bert_config(**extra: Any) -> Any:
    from transformers import BertConfig

    return BertConfig(
        vocab_size=V,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=32,
        pad_token_id=0,
        **extra,
    )


class HFWrapped(pl.LightningModule):
    """The usual wrapper: ``self.model`` is a Hugging Face model, no ``forward``, ``model(**batch).loss``."""

    def __init__(self, kind: str = "gpt2") -> None:
        super().__init__()
        import transformers

        if kind == "gpt2":
            self.model = transformers.GPT2LMHeadModel(_gpt2_config())
        elif (
            kind == "bert_lm"
        ):  # an encoder used as a causal LM: is_decoder left False, so it is bidirectional
            self.model = transformers.BertLMHeadModel(_bert_config())
        else:
            self.model = transformers.BertForSequenceClassification(_bert_config(num_labels=C))

    def training_step(self, batch: dict[str, Tensor], batch_idx: int) -> Tensor:
        return self.model(**batch).loss

    def configure_optimizers(self) -> Any:
        return torch.optim.AdamW(self.parameters(), lr=1e-3)


class GPT2CustomHead(pl.LightningModule):
    """The bug: a GPT-2 body with a head of one's own, cross-entropy against ``labels`` without the shift
    Hugging Face's LM heads do inside (``labels == input_ids``: output ``t`` is trained to copy input ``t``).
    """

    def __init__(self) -> None:
        super().__init__()
        from transformers import GPT2Model

        self.model = GPT2Model(_gpt2_config())
        self.head = nn.Linear(32, V)

    def training_step(self, batch: dict[str, Tensor], batch_idx: int) -> Tensor:
        hidden = self.model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])
        logits = self.head(hidden.last_hidden_state)
        return F.cross_entropy(logits.flatten(0, 1), batch["labels"].flatten())

    def configure_optimizers(self) -> Any:
        return torch.optim.AdamW(self.parameters(), lr=1e-3)


def plain_features_data() -> dict[str, Any]:
    """Healthy: Gaussian features labelled by a linear teacher."""
    return {"train_dataloaders": _loader(*features(512, 0)), "val_dataloaders": _loader(*features(128, 1))}


def onehot_label_data() -> dict[str, Any]:
    """The bug: a one-hot copy of the label among the features, standardised like every other column (no
    single column decides the label: only the short-training bound sees it)."""
    out = {}
    for key, seed, n in (("train_dataloaders", 0, 512), ("val_dataloaders", 1, 128)):
        x, y = features(n, seed)
        onehot = (F.one_hot(y, C).float() - 1 / C) / math.sqrt((1 / C) * (1 - 1 / C))
        out[key] = _loader(torch.cat([x, onehot], 1), y, shuffle=seed == 0)
    return out


def unread_label_copy_data() -> dict[str, Any]:
    """Healthy: the batch carries ``label_copy`` but the model (a plain MLP on ``x``) never reads it."""
    out = {}
    for key, seed, n in (("train_dataloaders", 0, 512), ("val_dataloaders", 1, 128)):
        x, y = features(n, seed)
        out[key] = _dict_loader(shuffle=seed == 0, x=x, label_copy=y.clone(), y=y)
    return out


class DictMLP(MLP):
    """A plain MLP on ``{"x", ..., "y"}`` dict batches: reads ``x`` only."""

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        return F.cross_entropy(self(batch["x"]), batch["y"])


# ---------------------------------------------------------------- the target reaching the model
class LabelFedToForward(MLP):
    """The bug: ``forward(x, y)`` concatenates the label to the features (a debugging shortcut left in)."""

    def __init__(self) -> None:
        super().__init__(IN + 1)

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        x, y = batch
        return F.cross_entropy(self.net(torch.cat([x, y[:, None].float()], 1)), y)


def demo_transformer() -> pl.LightningModule:
    """Lightning's own demo ``LightningTransformer`` (``lightning.pytorch.demos``), as shipped: its encoder
    ignores the causal ``src_mask`` it builds, and its decoder is fed ``target`` itself (a causal ``tgt_mask``
    still lets position t read target[t]). Both leak."""
    from lightning.pytorch.demos.transformer import LightningTransformer

    return LightningTransformer(vocab_size=V)


class FixedDemoTransformer(pl.LightningModule):
    """Lightning's demo transformer made causal: the encoder uses its mask, the decoder reads the target
    shifted right (teacher forcing: position t sees target[:t] only), cross-attention is masked too."""

    def __init__(self) -> None:
        super().__init__()
        from lightning.pytorch.demos.transformer import Transformer

        self.model = Transformer(vocab_size=V, ninp=32, nhead=2, nhid=64, nlayers=1)

    def forward(self, inputs: Tensor, target: Tensor) -> Tensor:
        m = self.model
        mask = m.generate_square_subsequent_mask(inputs.shape[1]).to(inputs.device)
        shifted = torch.cat([torch.zeros_like(target[:, :1]), target[:, :-1]], 1)
        src = m.pos_encoder(m.embedding(inputs) * math.sqrt(m.ninp))
        tgt = m.pos_encoder(m.embedding(shifted) * math.sqrt(m.ninp))
        out = m.transformer(src, tgt, src_mask=mask, tgt_mask=mask, memory_mask=mask)
        return F.log_softmax(m.decoder(out), dim=-1).view(-1, V)

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        inputs, target = batch
        return F.nll_loss(self(inputs, target), target.view(-1))

    def configure_optimizers(self) -> Any:
        return torch.optim.AdamW(self.parameters(), lr=3e-3)


class DigitsAutoencoder(pl.LightningModule):
    """An autoencoder on ``(image, label)`` batches (Lightning's autoencoder example's shape): the loss
    reconstructs the image and never reads the label."""

    def __init__(self) -> None:
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(64, 16), nn.ReLU(), nn.Linear(16, 3))
        self.decoder = nn.Sequential(nn.Linear(3, 16), nn.ReLU(), nn.Linear(16, 64))

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        x, _ = batch
        x = x.flatten(1)
        return F.mse_loss(self.decoder(self.encoder(x)), x)

    def configure_optimizers(self) -> Any:
        return torch.optim.Adam(self.parameters(), lr=1e-3)
