"""Real-world model shapes for the preflight (issue 14): modules without ``forward`` that wrap ``self.model``,
dict batches with several tensors, dict / ``ModelOutput`` outputs, Hugging Face models from small configs,
reconstruction models. Module level: ``ddp_spawn`` and the gallery pickle them."""

from __future__ import annotations

from typing import Any

import lightning.pytorch as pl
import torch
from torch import Tensor, nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, Dataset, TensorDataset

VOCAB, SEQ = 32, 16


# ---------------------------------------------------------------------------------------------------- data
class DictDataset(Dataset):
    """Samples as dicts of tensors (what a Hugging Face collator gives)."""

    def __init__(self, **columns: Tensor) -> None:
        self.columns = columns
        self.length = len(next(iter(columns.values())))

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int) -> dict[str, Tensor]:
        return {key: value[index] for key, value in self.columns.items()}


def recurrence_tokens(n: int, seed: int = 0, vocab: int = VOCAB, seq: int = SEQ) -> Tensor:
    """``t[i+1] = (5 t[i] + 3) mod V`` from random starts: the next token is learnable from this one."""
    g = torch.Generator().manual_seed(seed)
    tokens = [torch.randint(0, vocab, (n, 1), generator=g)]
    for _ in range(seq - 1):
        tokens.append((tokens[-1] * 5 + 3) % vocab)
    return torch.cat(tokens, dim=1)


def lm_loaders(n: int = 256, batch_size: int = 16, labels: bool = True) -> dict[str, Any]:
    """Dict batches ``input_ids`` / ``attention_mask`` / ``labels`` (= ``input_ids``, as HF collators do)."""

    def make(seed: int, count: int, shuffle: bool) -> DataLoader:
        ids = recurrence_tokens(count, seed)
        columns = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
        if labels:
            columns["labels"] = ids.clone()
        g = torch.Generator().manual_seed(seed)
        return DataLoader(DictDataset(**columns), batch_size=batch_size, shuffle=shuffle, generator=g)

    return {"train_dataloaders": make(0, n, True), "val_dataloaders": make(1, 64, False)}


def classification_tokens(n: int, seed: int) -> dict[str, Tensor]:
    """Token sequences labelled by a majority vote of their first three tokens (is each in the upper half of
    the vocabulary?): learnable by a position-aware model, and no single position decides the label (one token
    predicts it 75% of the time), so ``target_leakage`` rightly stays quiet. A one-token rule would be a leak
    by that check's definition; label noise would let these small models memorise it instead."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(1, VOCAB, (n, SEQ), generator=g)
    return {
        "input_ids": ids,
        "attention_mask": torch.ones_like(ids),
        "token_type_ids": torch.zeros_like(ids),
        "labels": ((ids[:, :3] >= VOCAB // 2).sum(1) >= 2).long(),
    }


def token_classification_loaders(n: int = 256, batch_size: int = 16, shuffle_labels: bool = False) -> dict:
    def make(seed: int, count: int, shuffle: bool) -> DataLoader:
        columns = classification_tokens(count, seed)
        if shuffle_labels:
            perm = torch.randperm(count, generator=torch.Generator().manual_seed(seed + 7))
            columns["labels"] = columns["labels"][perm]
        g = torch.Generator().manual_seed(seed)
        return DataLoader(DictDataset(**columns), batch_size=batch_size, shuffle=shuffle, generator=g)

    return {"train_dataloaders": make(0, n, True), "val_dataloaders": make(1, 64, False)}


def _digits(size: int | None = None) -> tuple[Tensor, Tensor]:
    from sklearn.datasets import load_digits

    digits = load_digits()
    images = torch.tensor(digits.images, dtype=torch.float32).unsqueeze(1) / 16.0
    if size is not None:
        images = F.interpolate(images, size=(size, size), mode="bilinear", align_corners=False)
    return images, torch.tensor(digits.target, dtype=torch.long)


def digits_loaders(
    size: int | None = None, batch_size: int = 32, as_dict: bool = False, shuffle_labels: bool = False
) -> dict[str, Any]:
    """scikit-learn's digits (``[B, 1, 8, 8]`` or upsampled to ``size``): first 1,500 train, rest val."""
    images, labels = _digits(size)
    if shuffle_labels:
        labels = labels[torch.randperm(len(labels), generator=torch.Generator().manual_seed(3))]

    def make(x: Tensor, y: Tensor, shuffle: bool) -> DataLoader:
        g = torch.Generator().manual_seed(0)
        dataset: Dataset = DictDataset(image=x, label=y) if as_dict else TensorDataset(x, y)
        return DataLoader(dataset, batch_size=batch_size, shuffle=shuffle, generator=g)

    return {
        "train_dataloaders": make(images[:1500], labels[:1500], True),
        "val_dataloaders": make(images[1500:], labels[1500:], False),
    }


def mnist_like_loaders() -> dict[str, Any]:
    """Digits upsampled to 28x28, as MNIST's ``ToTensor()`` gives them (``(x, y)``, ``x: [B, 1, 28, 28]``)."""
    return digits_loaders(size=28)


# ---------------------------------------------------------------------------------------------------- models
class SmallConvNet(nn.Module):
    """A torchvision-style classifier: ``features`` then ``classifier``, logits out."""

    def __init__(self, num_classes: int = 10) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1), nn.GroupNorm(4, 16), nn.ReLU(), nn.AdaptiveAvgPool2d(4)
        )
        self.classifier = nn.Sequential(nn.Flatten(), nn.Linear(16 * 16, num_classes))

    def forward(self, x: Tensor) -> Tensor:
        return self.classifier(self.features(x))


class WrappedCNN(pl.LightningModule):
    """``self.model = SmallConvNet()``, no ``forward``; ``training_step`` returns ``{"loss", "logits"}``."""

    def __init__(self, mix_batch: bool = False) -> None:
        super().__init__()
        self.model = SmallConvNet()
        self.mix_batch = mix_batch

    def training_step(self, batch: Any, batch_idx: int) -> dict[str, Tensor]:
        x, y = batch
        if self.mix_batch:  # the planted bug: a transpose before a reshape mixes the samples
            x = x.flatten(1).t().reshape(x.shape)
        logits = self.model(x)
        return {"loss": F.cross_entropy(logits, y), "logits": logits.detach()}

    def configure_optimizers(self) -> Any:
        return torch.optim.AdamW(self.parameters(), lr=1e-2)


class BackboneHead(pl.LightningModule):
    """``self.head(self.backbone(x))`` with an ``nn.CrossEntropyLoss`` module and dict batches
    ``{"image", "label"}``; logs an accuracy (a scalar a forward hook must not take for the output)."""

    def __init__(self) -> None:
        super().__init__()
        self.backbone = nn.Sequential(nn.Flatten(), nn.Linear(64, 64), nn.ReLU())
        self.head = nn.Linear(64, 10)
        self.criterion = nn.CrossEntropyLoss()

    def training_step(self, batch: dict[str, Tensor], batch_idx: int) -> Tensor:
        logits = self.head(self.backbone(batch["image"]))
        loss = self.criterion(logits, batch["label"])
        self.log("train_acc", (logits.argmax(-1) == batch["label"]).float().mean())
        return loss

    def configure_optimizers(self) -> Any:
        return torch.optim.AdamW(self.parameters(), lr=1e-2)


def gpt2(vocab: int = VOCAB) -> nn.Module:
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(
        n_layer=2,
        n_head=2,
        n_embd=32,
        vocab_size=vocab,
        n_positions=32,
        bos_token_id=0,
        eos_token_id=0,
        loss_type="ForCausalLM",
    )
    return GPT2LMHeadModel(config)


def bert_classifier(vocab: int = VOCAB) -> nn.Module:
    from transformers import BertConfig, BertForSequenceClassification

    config = BertConfig(
        vocab_size=vocab,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=32,
        num_labels=2,
        pad_token_id=0,
    )
    return BertForSequenceClassification(config)


class HFCausalLM(pl.LightningModule):
    """A Hugging Face causal LM wrapped the usual way: ``self.model(**batch).loss``, no ``forward``.

    ``labels_from_inputs=True`` passes ``labels=input_ids`` itself (batches without ``labels``): the loss
    target is then computed from the input.
    """

    def __init__(self, labels_from_inputs: bool = False, lr: float = 3e-3) -> None:
        super().__init__()
        self.model = gpt2()
        self.labels_from_inputs = labels_from_inputs
        self.lr = lr

    def training_step(self, batch: dict[str, Tensor], batch_idx: int) -> Tensor:
        if self.labels_from_inputs:
            return self.model(**batch, labels=batch["input_ids"]).loss
        return self.model(**batch).loss

    def configure_optimizers(self) -> Any:
        return torch.optim.AdamW(self.parameters(), lr=self.lr)


class HFClassifier(pl.LightningModule):
    """A Hugging Face BERT-style sequence classifier wrapped the usual way (dict batches with four integer
    tensors: ``input_ids``, ``attention_mask``, ``token_type_ids``, ``labels``)."""

    def __init__(self, transpose_bug: bool = False, lr: float = 3e-3) -> None:
        super().__init__()
        self.model = bert_classifier()
        self.transpose_bug = transpose_bug
        self.lr = lr

    def training_step(self, batch: dict[str, Tensor], batch_idx: int) -> Tensor:
        if self.transpose_bug:  # the planted bug: [B, S] ids read as [S, B] and reshaped back
            ids = batch["input_ids"]
            batch = {**batch, "input_ids": ids.t().reshape(ids.shape)}
        return self.model(**batch).loss

    def configure_optimizers(self) -> Any:
        return torch.optim.AdamW(self.parameters(), lr=self.lr)


class LitAutoEncoder(pl.LightningModule):
    """Lightning's README autoencoder: encoder/decoder MLPs on 28x28 images, ``mse_loss(x_hat, x)``.

    ``ignore_input=True`` plants a bug: the decoder reads a constant code, so the input is never used.
    """

    def __init__(self, ignore_input: bool = False) -> None:
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(28 * 28, 64), nn.ReLU(), nn.Linear(64, 3))
        self.decoder = nn.Sequential(nn.Linear(3, 64), nn.ReLU(), nn.Linear(64, 28 * 28))
        self.ignore_input = ignore_input

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        x, _ = batch
        x = x.view(x.size(0), -1)
        z = self.encoder(x)
        if self.ignore_input:
            z = torch.zeros_like(z)
        x_hat = self.decoder(z)
        return F.mse_loss(x_hat, x)

    def configure_optimizers(self) -> Any:
        return torch.optim.Adam(self.parameters(), lr=1e-3)


class Denoiser(pl.LightningModule):
    """A convolutional denoiser that adds the noise itself: ``mse_loss(net(x + noise), x)`` on 8x8 digits."""

    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1),
            nn.ReLU(),
            nn.Conv2d(16, 16, 3, padding=1),
            nn.ReLU(),
            nn.Conv2d(16, 1, 3, padding=1),
        )

    def forward(self, x: Tensor) -> Tensor:
        return self.net(x)

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        x, _ = batch
        return F.mse_loss(self(x + 0.3 * torch.randn_like(x)), x)

    def configure_optimizers(self) -> Any:
        return torch.optim.Adam(self.parameters(), lr=3e-3)


class MaskedAutoencoder(pl.LightningModule):
    """Masked modelling on flattened 8x8 digits: a random half of the pixels is hidden and predicted; the
    loss reads only the hidden pixels (a target whose shape depends on the random mask)."""

    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, 64))

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        x, _ = batch
        x = x.flatten(1)
        hidden = torch.rand_like(x) < 0.5
        visible = x.masked_fill(hidden, 0.0)
        prediction = self.net(torch.cat([visible, hidden.float()], dim=1))
        return F.mse_loss(prediction[hidden], x[hidden])

    def configure_optimizers(self) -> Any:
        return torch.optim.Adam(self.parameters(), lr=3e-3)


class WrappedTupleClassifier(pl.LightningModule):
    """Batches ``(x, mask, lengths, y)``: three integer tensors, the loss consumes the last one. With
    ``order="x_y_weight"``, batches ``(x, y, weight)`` whose last entry is a float sample weight."""

    def __init__(self, order: str = "x_mask_lengths_y") -> None:
        super().__init__()
        self.model = nn.Sequential(nn.Embedding(VOCAB, 2), nn.Flatten(), nn.Linear(2 * SEQ, 2))
        self.order = order

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        if self.order == "x_y_weight":
            x, y, weight = batch
            return (F.cross_entropy(self.model(x), y, reduction="none") * weight).mean()
        x, mask, _lengths, y = batch
        return F.cross_entropy(self.model(x * mask), y)

    def configure_optimizers(self) -> Any:
        return torch.optim.AdamW(self.parameters(), lr=1e-2)


def tuple_token_loaders(order: str = "x_mask_lengths_y") -> dict[str, Any]:
    def make(seed: int, count: int) -> DataLoader:
        columns = classification_tokens(count, seed)
        ids, y = columns["input_ids"], columns["labels"]
        if order == "x_y_weight":
            return DataLoader(TensorDataset(ids, y, torch.ones(count)), batch_size=16)
        lengths = torch.full((count,), SEQ)
        return DataLoader(TensorDataset(ids, torch.ones_like(ids), lengths, y), batch_size=16)

    return {"train_dataloaders": make(0, 256), "val_dataloaders": make(1, 64)}


class UnconventionalKeys(pl.LightningModule):
    """A dict batch ``{"sample_id", "pixels", "class_id"}``: no conventional key, an integer id first."""

    def __init__(self) -> None:
        super().__init__()
        self.model = nn.Sequential(nn.Flatten(), nn.Linear(64, 10))

    def training_step(self, batch: dict[str, Tensor], batch_idx: int) -> Tensor:
        return F.cross_entropy(self.model(batch["pixels"]), batch["class_id"])

    def configure_optimizers(self) -> Any:
        return torch.optim.AdamW(self.parameters(), lr=1e-2)


def unconventional_loaders() -> dict[str, Any]:
    images, labels = _digits()
    ids = torch.arange(len(labels))

    def make(part: slice, shuffle: bool) -> DataLoader:
        dataset = DictDataset(sample_id=ids[part], pixels=images[part], class_id=labels[part])
        return DataLoader(dataset, batch_size=32, shuffle=shuffle, generator=torch.Generator().manual_seed(0))

    return {
        "train_dataloaders": make(slice(0, 1500), True),
        "val_dataloaders": make(slice(1500, None), False),
    }
