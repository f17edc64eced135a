"""Models and loaders of the loop-stage gallery, part 2: the validation path (EMA, stale copies, a different
normalisation, a head on the wrong tensor) and the healthy shapes (ViT, causal TCN, Hugging Face BERT with
attention masks, warmup + cosine and OneCycle sized by ``trainer.estimated_stepping_batches``).

Each buggy model is a subclass of its healthy twin overriding the one method a user got wrong.
"""

from __future__ import annotations

import copy
import math
from typing import Any

import lightning.pytorch as pl
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from galleries.preflight.stage._loop_stage_models import EPOCHS, DigitsClassifier, digits_split


# ------------------------------------------------------------------------------------------ validation path
class EMAClassifier(DigitsClassifier):
    """Validation reports an exponential moving average of the weights, updated after every training batch."""

    decay = 0.95

    def __init__(self) -> None:
        super().__init__(lr=1e-3)
        self.ema = copy.deepcopy(self.net).requires_grad_(False)

    def validation_logits(self, x: torch.Tensor) -> torch.Tensor:
        return self.ema(x)

    @torch.no_grad()
    def on_train_batch_end(self, outputs: Any, batch: Any, batch_idx: int) -> None:
        for ema_p, p in zip(self.ema.parameters(), self.net.parameters()):
            ema_p.lerp_(p, 1.0 - self.decay)


class EMARebindsInsteadOfUpdating(EMAClassifier):
    """BUG: the EMA update rebinds a local name (``ema_p = decay * ema_p + ...``) instead of writing in place,
    so the averaged weights validation reports stay at their initial values."""

    @torch.no_grad()
    def on_train_batch_end(self, outputs: Any, batch: Any, batch_idx: int) -> None:
        for ema_p, p in zip(self.ema.parameters(), self.net.parameters()):
            ema_p = self.decay * ema_p + (1.0 - self.decay) * p  # the planted bug


class EMADecayTooSlowForRun(EMAClassifier):
    """BUG: the EMA decay 0.9999 (a default copied from a long ImageNet recipe) averages over ~10000 steps; in
    this 228-step run the averaged weights validation reports have moved ~2% of the way from their init."""

    decay = 0.9999


class EvalCopyClassifier(DigitsClassifier):
    """Validation runs a separate inference copy of the network, refreshed at the start of each validation."""

    def __init__(self) -> None:
        super().__init__(lr=1e-3)
        self.eval_net = copy.deepcopy(self.net).requires_grad_(False)

    def on_validation_start(self) -> None:
        self.eval_net.load_state_dict(self.net.state_dict())

    def validation_logits(self, x: torch.Tensor) -> torch.Tensor:
        return self.eval_net(x)

    def configure_optimizers(self) -> Any:
        return torch.optim.Adam(self.net.parameters(), lr=self.lr)


class EvalCopyMadeOnceAtSetup(EvalCopyClassifier):
    """BUG: the inference copy is made once, in ``setup``, and never refreshed: validation reports the weights
    the model had before training."""

    def setup(self, stage: str) -> None:
        self.eval_net.load_state_dict(self.net.state_dict())

    def on_validation_start(self) -> None:
        pass


class StandardisingClassifier(DigitsClassifier):
    """Standardises the pixels with the training set's per-pixel mean and std (buffers), in training and
    validation alike."""

    def __init__(self) -> None:
        super().__init__(lr=1e-3)
        train, _ = digits_split()
        x = train.tensors[0]
        self.register_buffer("mean", x.mean(0))
        self.register_buffer("std", x.std(0).clamp_min(0.05))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(self.standardise(x))

    def standardise(self, x: torch.Tensor) -> torch.Tensor:
        return (x - self.mean) / self.std


class ValidationNormalisesToMinusOneOne(StandardisingClassifier):
    """BUG: validation normalises with ``(x - 0.5) / 0.5`` (a line copied from an image recipe) instead of the
    training statistics; the reported validation accuracy is far below what the trained model achieves."""

    def validation_logits(self, x: torch.Tensor) -> torch.Tensor:
        return self.net((x - 0.5) / 0.5)


SEQ_LEN, SEQ_FEATURES, SEQ_CLASSES = 12, 4, 4


def marker_sequences(n: int, seed: int) -> TensorDataset:
    """Noise sequences ``(n, 12, 4)``; the class's one-hot marker (amplitude 2) at one random time step."""
    g = torch.Generator().manual_seed(seed)
    x = 0.5 * torch.randn(n, SEQ_LEN, SEQ_FEATURES, generator=g)
    y = torch.randint(0, SEQ_CLASSES, (n,), generator=g)
    when = torch.randint(0, SEQ_LEN, (n,), generator=g)
    x[torch.arange(n), when, y] += 2.0
    return TensorDataset(x, y)


def sequence_data() -> dict[str, Any]:
    return {
        "train_dataloaders": DataLoader(
            marker_sequences(640, 0), batch_size=32, shuffle=True, generator=torch.Generator().manual_seed(0)
        ),
        "val_dataloaders": DataLoader(marker_sequences(400, 1), batch_size=200),
        "num_classes": SEQ_CLASSES,
        "max_epochs": EPOCHS,
    }


class GRUClassifier(DigitsClassifier):
    """2-layer GRU sequence classifier reading the last layer's final hidden state."""

    def __init__(self) -> None:
        super().__init__(lr=3e-3)
        self.net = nn.Identity()
        self.gru = nn.GRU(SEQ_FEATURES, 32, num_layers=2, batch_first=True)
        self.head = nn.Linear(32, SEQ_CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _, h = self.gru(x)
        return self.head(h[-1])


class GRUValidationReadsFirstLayer(GRUClassifier):
    """BUG: validation has its own forward code and applies the head to ``h[0]``, the FIRST layer's final
    state (written as for a 1-layer GRU), not the last layer's that training fits."""

    def validation_logits(self, x: torch.Tensor) -> torch.Tensor:
        _, h = self.gru(x)
        return self.head(h[0])


# ------------------------------------------------------------------------------------------- healthy shapes
class TinyViT(DigitsClassifier):
    """Vision transformer on 8x8 digits: pixels standardised, 2x2 patches (16 tokens), learned positions, 2
    pre-norm layers, mean pooling over the tokens."""

    def __init__(self) -> None:
        super().__init__(lr=3e-3)
        dim = 32
        self.net = nn.Identity()
        self.patch = nn.Conv2d(1, dim, kernel_size=2, stride=2)
        self.pos = nn.Parameter(0.02 * torch.randn(1, 16, dim))
        layer = nn.TransformerEncoderLayer(dim, 4, 64, dropout=0.1, batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        tokens = self.patch((x - 0.3) / 0.4).flatten(2).transpose(1, 2) + self.pos
        return self.head(self.norm(self.encoder(tokens)).mean(1))


class CausalConv(nn.Module):
    def __init__(self, channels_in: int, channels_out: int, dilation: int) -> None:
        super().__init__()
        self.pad = 2 * dilation
        self.conv = nn.Conv1d(channels_in, channels_out, kernel_size=3, dilation=dilation)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(F.pad(x, (self.pad, 0)))


def noisy_waves(n: int, seed: int, length: int = 48) -> TensorDataset:
    """Sums of two sines with random frequencies and phases plus noise; input ``x[:, :, :-1]``, target the
    next value ``x[:, :, 1:]`` (shape ``(n, 1, length)``)."""
    g = torch.Generator().manual_seed(seed)
    t = torch.arange(length + 1, dtype=torch.float32)
    freq = 0.1 + 0.4 * torch.rand(n, 2, 1, generator=g)
    phase = 2 * math.pi * torch.rand(n, 2, 1, generator=g)
    wave = torch.sin(freq * t + phase).sum(1, keepdim=True) + 0.05 * torch.randn(
        n, 1, length + 1, generator=g
    )
    return TensorDataset(wave[:, :, :-1], wave[:, :, 1:])


def wave_data() -> dict[str, Any]:
    return {
        "train_dataloaders": DataLoader(
            noisy_waves(800, 0), batch_size=32, shuffle=True, generator=torch.Generator().manual_seed(0)
        ),
        "val_dataloaders": DataLoader(noisy_waves(200, 1), batch_size=100),
        "max_epochs": EPOCHS,
    }


class CausalTCN(pl.LightningModule):
    """Next-value forecaster: dilated causal Conv1d blocks (dilations 1, 2, 4), residuals, MSE per step."""

    def __init__(self) -> None:
        super().__init__()
        self.inp = nn.Conv1d(1, 32, 1)
        self.blocks = nn.ModuleList([CausalConv(32, 32, d) for d in (1, 2, 4)])
        self.out = nn.Conv1d(32, 1, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.inp(x)
        for block in self.blocks:
            h = h + F.gelu(block(h))
        return self.out(h)

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        x, y = batch
        loss = F.mse_loss(self(x), y)
        self.log("train_loss", loss)
        return loss

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        x, y = batch
        self.log("val_loss", F.mse_loss(self(x), y))

    def configure_optimizers(self) -> Any:
        return torch.optim.Adam(self.parameters(), lr=3e-3)


VOCAB, PAD, KEY_TOKEN = 30, 0, 5


class PaddedTokens(torch.utils.data.Dataset):
    """Variable-length token sequences (4 to 24 tokens); label 1 when the key token occurs. Dict samples."""

    def __init__(self, n: int, seed: int) -> None:
        g = torch.Generator().manual_seed(seed)
        self.samples = []
        for _ in range(n):
            length = int(torch.randint(4, 25, (1,), generator=g))
            ids = torch.randint(6, VOCAB, (length,), generator=g)
            label = int(torch.rand(1, generator=g) < 0.5)
            if label:
                ids[int(torch.randint(0, length, (1,), generator=g))] = KEY_TOKEN
            self.samples.append((ids, label))

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        return self.samples[i]


def pad_collate(samples: list[tuple[torch.Tensor, int]]) -> dict[str, torch.Tensor]:
    width = max(len(ids) for ids, _ in samples)
    input_ids = torch.full((len(samples), width), PAD, dtype=torch.long)
    mask = torch.zeros(len(samples), width, dtype=torch.long)
    for row, (ids, _) in enumerate(samples):
        input_ids[row, : len(ids)] = ids
        mask[row, : len(ids)] = 1
    labels = torch.tensor([label for _, label in samples])
    return {"input_ids": input_ids, "attention_mask": mask, "labels": labels}


def token_data() -> dict[str, Any]:
    return {
        "train_dataloaders": DataLoader(
            PaddedTokens(640, 0),
            batch_size=32,
            shuffle=True,
            collate_fn=pad_collate,
            generator=torch.Generator().manual_seed(0),
        ),
        "val_dataloaders": DataLoader(PaddedTokens(200, 1), batch_size=100, collate_fn=pad_collate),
        "input_key": "input_ids",
        "target_key": "labels",
        "num_classes": 2,
        "max_epochs": EPOCHS,
    }


class HFBertClassifier(pl.LightningModule):
    """``transformers`` BertForSequenceClassification from a tiny config (random init, no download), fed
    padded batches with their attention mask."""

    def __init__(self) -> None:
        super().__init__()
        from transformers import BertConfig, BertForSequenceClassification

        config = BertConfig(
            vocab_size=VOCAB,
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=2,
            intermediate_size=64,
            max_position_embeddings=32,
            num_labels=2,
            pad_token_id=PAD,
        )
        self.model = BertForSequenceClassification(config)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        return self.model(input_ids=input_ids, attention_mask=attention_mask).logits

    def training_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> torch.Tensor:
        loss = F.cross_entropy(self(batch["input_ids"], batch["attention_mask"]), batch["labels"])
        self.log("train_loss", loss)
        return loss

    def validation_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> None:
        logits = self(batch["input_ids"], batch["attention_mask"])
        self.log("val_loss", F.cross_entropy(logits, batch["labels"]))
        self.log("val_acc", (logits.argmax(-1) == batch["labels"]).float().mean())

    def configure_optimizers(self) -> Any:
        return torch.optim.AdamW(self.parameters(), lr=3e-3)


class WarmupCosinePerStep(DigitsClassifier):
    """AdamW with 10% linear warmup then cosine decay to 0 over ``trainer.estimated_stepping_batches``."""

    def __init__(self) -> None:
        super().__init__(lr=3e-3)

    def configure_optimizers(self) -> Any:
        opt = torch.optim.AdamW(self.parameters(), lr=self.lr, weight_decay=0.01)
        total = int(self.trainer.estimated_stepping_batches)
        warmup = max(1, total // 10)

        def factor(step: int) -> float:
            if step < warmup:
                return (step + 1) / warmup
            return 0.5 * (1.0 + math.cos(math.pi * min(1.0, (step - warmup) / max(1, total - warmup))))

        sched = torch.optim.lr_scheduler.LambdaLR(opt, factor)
        return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}


class OneCycleCNN(DigitsClassifier):
    """Small CNN on 8x8 digits with OneCycleLR over ``trainer.estimated_stepping_batches``."""

    def __init__(self) -> None:
        super().__init__(lr=0.01)
        self.net = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1),
            nn.BatchNorm2d(16),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1),
            nn.ReLU(),
            nn.AdaptiveAvgPool2d(1),
            nn.Flatten(),
            nn.Linear(32, 10),
        )

    def configure_optimizers(self) -> Any:
        opt = torch.optim.AdamW(self.parameters(), lr=self.lr)
        sched = torch.optim.lr_scheduler.OneCycleLR(
            opt, max_lr=self.lr, total_steps=int(self.trainer.estimated_stepping_batches)
        )
        return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}
