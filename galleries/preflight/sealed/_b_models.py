"""Sealed gallery B's models: each correct model (a healthy twin) and, next to it, the buggy variant a user
wrote (a subclass that changes the one method the bug lives in). Every model is built from the global RNG."""

from __future__ import annotations

import lightning.pytorch as pl
import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from galleries.preflight.sealed import _b_data as data
from galleries.sealed import AdamModule as _Adam


# --- masked language modelling ------------------------------------------------------------------------------
class MaskedLM(_Adam):
    """A small transformer (a local convolution, then one attention layer) predicting masked tokens; batches
    are dicts with ``labels`` = -100 where no token was masked."""

    def __init__(self, vocab: int = data.MLM_VOCAB, width: int = 32) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.position = nn.Parameter(0.1 * torch.randn(data.MLM_LEN, width))
        self.local = nn.Conv1d(width, width, 3, padding=1)
        layer = nn.TransformerEncoderLayer(width, 4, 64, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 1, enable_nested_tensor=False)
        self.head = nn.Linear(width, vocab)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        h = self.embed(input_ids) + self.position
        h = h + torch.relu(self.local(h.transpose(1, 2))).transpose(1, 2)
        return self.head(self.encoder(h))

    def loss(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        logits = self(batch["input_ids"])
        return F.cross_entropy(logits.flatten(0, 1), batch["labels"].flatten(), ignore_index=-100)


def mlm_collate(batch: list[tuple[torch.Tensor, torch.Tensor]]) -> dict[str, torch.Tensor]:
    ids = torch.stack([ids for ids, _ in batch])
    input_ids, labels = data.mask_tokens(ids)
    return {"input_ids": input_ids, "labels": labels, "seq_id": torch.stack([i for _, i in batch])}


def mlm_collate_real_tokens(batch: list[tuple[torch.Tensor, torch.Tensor]]) -> dict[str, torch.Tensor]:
    """Masks real tokens only (never PAD)."""
    ids = torch.stack([ids for ids, _ in batch])
    input_ids, labels = data.mask_tokens(ids, maskable=ids != data.PAD)
    return {"input_ids": input_ids, "labels": labels, "seq_id": torch.stack([i for _, i in batch])}


def mlm_collate_masks_padding(batch: list[tuple[torch.Tensor, torch.Tensor]]) -> dict[str, torch.Tensor]:
    """BUG: positions to mask are drawn over the whole padded row, so padding is masked and scored too (an
    easy PAD label) and the reported loss mixes real tokens with free ones."""
    ids = torch.stack([ids for ids, _ in batch])
    input_ids, labels = data.mask_tokens(ids)
    return {"input_ids": input_ids, "labels": labels, "seq_id": torch.stack([i for _, i in batch])}


def mlm_collate_labels_after_masking(
    batch: list[tuple[torch.Tensor, torch.Tensor]],
) -> dict[str, torch.Tensor]:
    """BUG: the labels are read from the ids after they were masked in place, so every label is MASK."""
    ids = torch.stack([ids for ids, _ in batch])
    chosen = torch.rand(ids.shape) < 0.15
    ids[chosen] = data.MASK
    labels = torch.where(chosen, ids, torch.full_like(ids, -100))
    return {"input_ids": ids, "labels": labels, "seq_id": torch.stack([i for _, i in batch])}


# --- token tagging ------------------------------------------------------------------------------------------
class GRUTagger(_Adam):
    """Embedding + bidirectional GRU + linear tag head over padded batches (tags padded with -100)."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(data.TAG_VOCAB, 32, padding_idx=data.PAD)
        self.rnn = self.make_rnn()
        self.head = nn.Linear(64, 3)

    def make_rnn(self) -> nn.GRU:
        return nn.GRU(32, 32, bidirectional=True, batch_first=True)

    def forward(self, tokens: torch.Tensor, lengths: torch.Tensor | None = None) -> torch.Tensor:
        out, _ = self.rnn(self.embed(tokens))
        return self.head(out)

    def loss(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        logits = self(batch["tokens"], batch["lengths"])
        return F.cross_entropy(logits.flatten(0, 1), batch["tags"].flatten(), ignore_index=-100)


class GRUTaggerTimeMajor(GRUTagger):
    """BUG: the GRU is built without ``batch_first=True`` but fed (batch, time, features): it runs across the
    batch, mixing sentences, and never along a sentence."""

    def make_rnn(self) -> nn.GRU:
        return nn.GRU(32, 32, bidirectional=True)


class PackedGRUTagger(GRUTagger):
    """Packs the padded batch by its lengths (``pack_padded_sequence`` refuses a length of zero)."""

    enforce_sorted = False

    def forward(self, tokens: torch.Tensor, lengths: torch.Tensor | None = None) -> torch.Tensor:
        assert lengths is not None
        packed = pack_padded_sequence(
            self.embed(tokens), lengths.cpu(), batch_first=True, enforce_sorted=self.enforce_sorted
        )
        out, _ = pad_packed_sequence(self.rnn(packed)[0], batch_first=True, total_length=tokens.shape[1])
        return self.head(out)


class SortedPackedGRUTagger(PackedGRUTagger):
    """Expects batches sorted by decreasing length (``enforce_sorted=True``)."""

    enforce_sorted = True


def tagging_collate_sorted(batch: list[tuple[torch.Tensor, torch.Tensor]]) -> dict[str, torch.Tensor]:
    """Sorts the (tokens, tags) pairs by decreasing length, then pads."""
    return data.pad_tagging(sorted(batch, key=lambda pair: len(pair[0]), reverse=True))


def tagging_collate_sorted_tokens_only(
    batch: list[tuple[torch.Tensor, torch.Tensor]],
) -> dict[str, torch.Tensor]:
    """BUG: the tags are padded in the loader's order, the tokens after sorting them by length."""
    tags = nn.utils.rnn.pad_sequence([y for _, y in batch], batch_first=True, padding_value=-100)
    tokens = sorted((t for t, _ in batch), key=len, reverse=True)
    return {
        "tokens": nn.utils.rnn.pad_sequence(tokens, batch_first=True, padding_value=data.PAD),
        "tags": tags,
        "lengths": torch.tensor([len(t) for t in tokens]),
    }


# --- segmentation -------------------------------------------------------------------------------------------
class SegNet(_Adam):
    """Three 3x3 conv layers and a 1x1 class head: per-pixel logits (B, 3, H, W)."""

    lr = 1e-2

    def __init__(self, class_weights: tuple[float, ...] | None = None, ignore_index: int = -100) -> None:
        super().__init__()
        self.encoder = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(),
            nn.Conv2d(16, 16, 3, padding=1), nn.ReLU(),
            nn.Conv2d(16, 16, 3, padding=1), nn.ReLU(),
        )  # fmt: skip
        self.head = nn.Conv2d(16, 3, 1)
        self.ignore_index = ignore_index
        self.register_buffer("class_weights", None if class_weights is None else torch.tensor(class_weights))

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.head(self.encoder(images))

    def loss(self, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        images, masks = batch
        return F.cross_entropy(self(images), masks, weight=self.class_weights, ignore_index=self.ignore_index)


class SegNetCachedFeatures(SegNet):
    """BUG: the encoder's features are detached (from a linear-probe experiment): only the head learns."""

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.head(self.encoder(images).detach())


# --- quantile regression ------------------------------------------------------------------------------------
def pinball(pred: torch.Tensor, target: torch.Tensor, q: float) -> torch.Tensor:
    diff = target - pred
    return torch.maximum(q * diff, (q - 1) * diff)


class QuantileMLP(_Adam):
    """An MLP trunk with one head per quantile (0.1, 0.5, 0.9); forward gives (B, 3); mean pinball loss."""

    def __init__(self) -> None:
        super().__init__()
        self.trunk = nn.Sequential(nn.Linear(4, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU())
        self.heads = nn.ModuleList(nn.Linear(64, 1) for _ in data.QUANTILES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.trunk(x)
        return torch.cat([head(h) for head in self.heads], dim=1)

    def loss(self, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        x, y = batch
        h = self.trunk(x)
        return sum(pinball(head(h).squeeze(-1), y, q).mean() for head, q in zip(self.heads, data.QUANTILES))


class QuantileMLPBroadcast(QuantileMLP):
    """BUG: each head's (B, 1) output minus the (B,) target broadcasts to (B, B): every prediction is scored
    against every target of the batch."""

    def loss(self, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        x, y = batch
        h = self.trunk(x)
        return sum(pinball(head(h), y, q).mean() for head, q in zip(self.heads, data.QUANTILES))


class QuantileMLPSummed(QuantileMLP):
    """One (B, 3) head; the pinball loss summed over the batch and the quantiles, not averaged."""

    def __init__(self) -> None:
        super().__init__()
        self.heads = nn.ModuleList([nn.Linear(64, len(data.QUANTILES))])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.heads[0](self.trunk(x))

    def loss(self, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        x, y = batch
        q = torch.tensor(data.QUANTILES)
        return pinball(self(x), y[:, None], q).sum()


# --- tabular ------------------------------------------------------------------------------------------------
class TabularNet(_Adam):
    """One embedding per categorical column (its cardinality given), concatenated with the numeric columns,
    into an MLP with one logit. Batches are dicts ``cat`` (long codes), ``num``, ``label``."""

    def __init__(self, cardinalities: tuple[int, ...] = data.CARDINALITIES, dim: int = 4) -> None:
        super().__init__()
        self.embeddings = nn.ModuleList(nn.Embedding(c, dim) for c in cardinalities)
        self.mlp = nn.Sequential(nn.Linear(dim * len(cardinalities) + 3, 32), nn.ReLU(), nn.Linear(32, 1))

    def forward(self, cat: torch.Tensor, num: torch.Tensor) -> torch.Tensor:
        embedded = [embedding(column) for embedding, column in zip(self.embeddings, cat.unbind(1))]
        return self.mlp(torch.cat([*embedded, num], dim=1)).squeeze(-1)

    def loss(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        return F.binary_cross_entropy_with_logits(self(batch["cat"], batch["num"]), batch["label"])


class OneHotTabularNet(TabularNet):
    """One-hot codes as frozen identity embeddings (on purpose), a positive-class weight for a rare target."""

    def __init__(self, pos_weight: float = 8.0) -> None:
        super().__init__()
        self.embeddings = nn.ModuleList(
            nn.Embedding.from_pretrained(torch.eye(c)) for c in data.CARDINALITIES
        )
        self.mlp = nn.Sequential(nn.Linear(sum(data.CARDINALITIES) + 3, 32), nn.ReLU(), nn.Linear(32, 1))
        self.register_buffer("pos_weight", torch.tensor(pos_weight))

    def loss(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        logits = self(batch["cat"], batch["num"])
        return F.binary_cross_entropy_with_logits(logits, batch["label"], pos_weight=self.pos_weight)


class CustomerSpend(_Adam):
    """Spend per visit from (customer id embedding, two numeric columns); MSE. Batches: (ids, nums, spend)."""

    def __init__(self, customers: int = 200) -> None:
        super().__init__()
        self.customer = nn.Embedding(customers + 1, 8, padding_idx=0)  # 0: a customer not seen in training
        self.mlp = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 1))

    def forward(self, ids: torch.Tensor, nums: torch.Tensor) -> torch.Tensor:
        return self.mlp(torch.cat([self.customer(ids), nums], dim=1)).squeeze(-1)

    def loss(self, batch: tuple[torch.Tensor, ...]) -> torch.Tensor:
        ids, nums, y = batch
        return F.mse_loss(self(ids, nums), y)


# --- forecasting --------------------------------------------------------------------------------------------
class Forecaster(_Adam):
    """An MLP from the last LOOKBACK steps to the next ``horizon`` steps; MSE."""

    def __init__(self, horizon: int = 1) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(data.LOOKBACK, 64), nn.ReLU(), nn.Linear(64, horizon))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)

    def loss(self, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        x, y = batch
        return F.mse_loss(self(x), y)


class NormalisedForecaster(Forecaster):
    """Each window scaled by its own input's mean and std (RevIN-style), the forecast scaled back; squared
    error summed over the horizon."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        mean, std = x.mean(1, keepdim=True), x.std(1, keepdim=True) + 1e-3
        return self.net((x - mean) / std) * std + mean

    def loss(self, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        x, y = batch
        return ((self(x) - y) ** 2).sum(1).mean()


# --- ordinal regression -------------------------------------------------------------------------------------
class CoralOrdinal(_Adam):
    """Rank-consistent ordinal regression: one score plus K-1 learned thresholds; binary cross-entropy on
    "grade > k". The predicted grade is the number of thresholds passed."""

    def __init__(self) -> None:
        super().__init__()
        self.score = nn.Sequential(
            nn.Linear(6, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 1)
        )
        self.thresholds = self.make_thresholds()

    def make_thresholds(self) -> torch.Tensor:
        return nn.Parameter(torch.zeros(data.ORDINAL_K - 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.score(x) + self.thresholds

    def loss(self, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        x, y = batch
        above = (y[:, None] > torch.arange(data.ORDINAL_K - 1, device=y.device)).float()
        return F.binary_cross_entropy_with_logits(self(x), above)

    @staticmethod
    def grade(logits: torch.Tensor) -> torch.Tensor:
        return (logits > 0).sum(1)


class CoralOrdinalPlainThresholds(CoralOrdinal):
    """BUG: the thresholds are a plain tensor with ``requires_grad=True``, not an ``nn.Parameter``: they get
    gradients but are not in ``parameters()``, so the optimizer never steps them."""

    def make_thresholds(self) -> torch.Tensor:
        return torch.zeros(data.ORDINAL_K - 1, requires_grad=True)


# --- multi-label --------------------------------------------------------------------------------------------
class MultiLabelMLP(_Adam):
    """Ten features to six independent labels; binary cross-entropy per label."""

    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(10, 64), nn.ReLU(), nn.Linear(64, data.LABELS))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)

    def loss(self, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        x, y = batch
        return F.binary_cross_entropy_with_logits(self(x), y)


class MultiLabelDropoutMLP(MultiLabelMLP):
    """The same MLP with dropout on its hidden layer, written with the functional ``F.dropout``."""

    def __init__(self) -> None:
        super().__init__()
        self.hidden, self.out = self.net[0], self.net[2]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(F.dropout(F.relu(self.hidden(x)), 0.3, training=self.training))


class MultiLabelDropoutAlwaysOn(MultiLabelDropoutMLP):
    """BUG: ``F.dropout`` is called without ``training=self.training`` (its default is True), so dropout stays
    on in evaluation and predictions are random."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(F.dropout(F.relu(self.hidden(x)), 0.3))


# --- counting -----------------------------------------------------------------------------------------------
class BlobCounter(pl.LightningModule):
    """A density CNN summed into a count; Poisson NLL; manual optimisation with a linear warmup stepped every
    batch."""

    def __init__(self) -> None:
        super().__init__()
        self.automatic_optimization = False
        self.net = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1),
            nn.ReLU(),
            nn.Conv2d(16, 16, 3, padding=1),
            nn.ReLU(),
            nn.Conv2d(16, 1, 1),
        )

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return F.softplus(self.net(images) - 4.0).sum((1, 2, 3))  # starts near a typical count (~2.6)

    def loss(self, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        images, counts = batch
        return F.poisson_nll_loss(self(images), counts, log_input=False)

    def configure_optimizers(self):
        optimizer = torch.optim.Adam(self.parameters(), lr=3e-3)
        warmup = torch.optim.lr_scheduler.LinearLR(optimizer, start_factor=0.1, total_iters=40)
        return [optimizer], [{"scheduler": warmup, "interval": "step"}]

    def training_step(self, batch, batch_idx):
        optimizer = self.optimizers()
        optimizer.zero_grad()
        loss = self.loss(batch)
        self.manual_backward(loss)
        optimizer.step()
        self.step_schedule()
        self.log("train_loss", loss)
        return loss

    def step_schedule(self) -> None:
        self.lr_schedulers().step()

    def validation_step(self, batch, batch_idx):
        self.log("val_loss", self.loss(batch))


class BlobCounterWarmupNeverStepped(BlobCounter):
    """BUG: under manual optimisation Lightning does not step schedulers, and this training step does not
    either: the warmup stays at its first value, 10% of the learning rate."""

    def step_schedule(self) -> None:
        pass
