"""Sealed gallery C's models: each correct model (a healthy twin) and, next to it, the buggy variant a user
wrote (a subclass that changes the one method the bug lives in). Every model is built from the global RNG."""

from __future__ import annotations

import copy
from functools import cache

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from galleries.preflight.sealed import _c_data as data
from galleries.sealed import AdamModule as _Adam


# --- digits classification ----------------------------------------------------------------------------------
class DigitNet(_Adam):
    """An MLP (64-64-10) on 1x8x8 digits; cross-entropy with optional class weights and label smoothing;
    Adam, or SGD with momentum (``sgd``)."""

    def __init__(
        self, class_weights: torch.Tensor | None = None, smoothing: float = 0.0, sgd: bool = False
    ) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Flatten(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))
        self.smoothing, self.sgd = smoothing, sgd
        self.register_buffer("class_weights", class_weights)

    def configure_optimizers(self):
        if self.sgd:
            return torch.optim.SGD(self.parameters(), lr=0.05, momentum=0.9)
        return super().configure_optimizers()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)

    def loss(self, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        x, y = batch
        return F.cross_entropy(self.scores(x), y, weight=self.class_weights, label_smoothing=self.smoothing)

    def scores(self, x: torch.Tensor) -> torch.Tensor:
        return self(x)


class DigitNetSoftmaxTwice(DigitNet):
    """BUG: the loss gets the softmax probabilities (the network's output for serving) where
    ``cross_entropy`` expects logits: a second softmax squashes the gradients towards zero."""

    def scores(self, x: torch.Tensor) -> torch.Tensor:
        return self(x).softmax(dim=-1)


def class_weights(y: torch.Tensor, inverse: bool = True) -> torch.Tensor:
    """Per-class loss weights from the training labels: inverse frequency (mean 1); with ``inverse=False``
    (the BUG) the frequencies themselves, which favour the frequent classes further."""
    counts = torch.bincount(y, minlength=10).float()
    weights = counts.sum() / counts if inverse else counts / counts.sum()
    return weights / weights.mean()


class EmaDigitNet(DigitNet):
    """Keeps an exponential moving average of the weights, updated after every batch and used whenever the
    model is in eval mode (validation, serving)."""

    def __init__(self, decay: float = 0.9) -> None:
        super().__init__()
        self.decay = decay
        self.ema = copy.deepcopy(self.net).requires_grad_(False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (self.net if self.training else self.ema)(x)

    @torch.no_grad()
    def on_train_batch_end(self, outputs, batch, batch_idx) -> None:
        for average, weight in zip(self.ema.parameters(), self.net.parameters(), strict=True):
            average.lerp_(weight, 1 - self.decay)


class EmaDigitNetRebinds(EmaDigitNet):
    """BUG: the update assigns to the loop variable (``average = ...``) instead of writing into the tensor, so
    the average never moves and evaluation uses the random initial weights."""

    @torch.no_grad()
    def on_train_batch_end(self, outputs, batch, batch_idx) -> None:
        for average, weight in zip(self.ema.parameters(), self.net.parameters(), strict=True):
            average = self.decay * average + (1 - self.decay) * weight  # the BUG: rebinds the name


class PlateauDigitNet(DigitNet):
    """Divides the learning rate by 10 when the epoch's training loss stops falling (ReduceLROnPlateau)."""

    lr = 1e-3
    mode = "min"

    def configure_optimizers(self):
        optimizer = torch.optim.Adam(self.parameters(), lr=self.lr)
        plateau = torch.optim.lr_scheduler.ReduceLROnPlateau(
            optimizer, mode=self.mode, factor=0.1, patience=0
        )
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": plateau, "monitor": "epoch_loss"}}

    def training_step(self, batch, batch_idx):
        loss = super().training_step(batch, batch_idx)
        self.log("epoch_loss", loss, on_step=False, on_epoch=True)
        return loss


class PlateauDigitNetModeMax(PlateauDigitNet):
    """BUG: ``mode="max"`` (copied from a set-up that monitored accuracy) on a loss: every epoch whose loss
    falls counts as no improvement, so the rate is cut tenfold after every epoch from the second on."""

    mode = "max"


class AccumulatingDigitNet(DigitNet):
    """Manual optimisation with gradient accumulation over 4 batches (the loss divided by 4)."""

    def __init__(self, accumulate: int = 4, sgd: bool = False) -> None:
        super().__init__(sgd=sgd)
        self.automatic_optimization = False
        self.accumulate = accumulate

    def training_step(self, batch, batch_idx):
        optimizer = self.optimizers()
        loss = self.loss(batch)
        self.manual_backward(loss / self.accumulate)
        if (batch_idx + 1) % self.accumulate == 0:
            optimizer.step()
            optimizer.zero_grad()
        self.log("train_loss", loss)
        return loss


class AccumulatingDigitNetClearsEveryBatch(AccumulatingDigitNet):
    """BUG: ``zero_grad()`` at the top of every step (a habit from a loop without accumulation): an update
    holds only the last batch's gradient, divided by 4, so three batches in four are thrown away and every
    step is 4x too small."""

    def training_step(self, batch, batch_idx):
        self.optimizers().zero_grad()
        return super().training_step(batch, batch_idx)


@cache
def pretrained_encoder() -> dict[str, torch.Tensor]:
    """A checkpoint of a 64-16 encoder pretrained (with a classifier head, on the training digits), as
    another project saved it: keys ``encoder.0.weight``, ``encoder.0.bias``."""
    with torch.random.fork_rng():
        torch.manual_seed(0)
        encoder = nn.Sequential(nn.Linear(64, 16), nn.ReLU())
        model = nn.Sequential(encoder, nn.Linear(16, 10))
        x, y = data.digits("train")
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
        for _ in range(150):
            optimizer.zero_grad()
            F.cross_entropy(model(x.flatten(1)), y).backward()
            optimizer.step()
    return {f"encoder.{name}": value.detach().clone() for name, value in encoder.state_dict().items()}


class ProbeDigitNet(_Adam):
    """A linear probe: the pretrained encoder, frozen, and a trainable linear head."""

    def __init__(self) -> None:
        super().__init__()
        self.backbone = nn.Sequential(nn.Linear(64, 16), nn.ReLU())
        self.head = nn.Linear(16, 10)
        self.load_pretrained(pretrained_encoder())
        self.backbone.requires_grad_(False)

    def load_pretrained(self, checkpoint: dict[str, torch.Tensor]) -> None:
        self.backbone.load_state_dict({k.removeprefix("encoder."): v for k, v in checkpoint.items()})

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.backbone(x.flatten(1)))

    def loss(self, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        x, y = batch
        return F.cross_entropy(self(x), y)


class ProbeDigitNetNothingLoaded(ProbeDigitNet):
    """BUG: the checkpoint is loaded into the whole model with ``strict=False`` (to skip the missing head):
    its ``encoder.*`` keys match none of the model's ``backbone.*`` keys, nothing loads, and the probe trains
    on a frozen random encoder."""

    def load_pretrained(self, checkpoint: dict[str, torch.Tensor]) -> None:
        self.load_state_dict(checkpoint, strict=False)


# --- entity tagging -----------------------------------------------------------------------------------------
class EntityTagger(_Adam):
    """Token and position embeddings, one self-attention layer that skips padding, an MLP tag head."""

    def __init__(self, width: int = 32) -> None:
        super().__init__()
        self.embed = nn.Embedding(data.TAG_VOCAB, width, padding_idx=data.PAD)
        self.position = nn.Parameter(0.1 * torch.randn(data.TAG_LEN, width))
        self.attention = nn.MultiheadAttention(width, 2, batch_first=True)
        self.head = nn.Sequential(nn.Linear(width, 64), nn.ReLU(), nn.Linear(64, 3))

    def ignored_keys(self, tokens: torch.Tensor) -> torch.Tensor:
        return tokens == data.PAD  # key_padding_mask: True = ignore

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        h = self.embed(tokens) + self.position
        context, _ = self.attention(h, h, h, key_padding_mask=self.ignored_keys(tokens), need_weights=False)
        return self.head(h + context)

    def loss(self, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        tokens, tags = batch
        return F.cross_entropy(self(tokens).flatten(0, 1), tags.flatten(), ignore_index=-100)


class EntityTaggerMaskInverted(EntityTagger):
    """BUG: a tokenizer-style attention mask (True = real token) is passed as ``key_padding_mask`` (True =
    ignore): every token attends to padding only and no tag can use the rest of the sentence."""

    def ignored_keys(self, tokens: torch.Tensor) -> torch.Tensor:
        return tokens != data.PAD


# --- causal language model ----------------------------------------------------------------------------------
class ChainLM(_Adam):
    """A one-layer causal transformer predicting the next token; batches are (inputs, labels) with the labels
    already shifted by one in the dataset."""

    def __init__(self, width: int = 32) -> None:
        super().__init__()
        self.embed = nn.Embedding(data.LM_VOCAB, width)
        self.position = nn.Parameter(0.1 * torch.randn(data.LM_LEN, width))
        self.attention = nn.MultiheadAttention(width, 2, batch_first=True)
        self.head = nn.Sequential(nn.Linear(width, 64), nn.ReLU(), nn.Linear(64, data.LM_VOCAB))

    def future_mask(self, n: int) -> torch.Tensor | None:
        return torch.ones(n, n, dtype=torch.bool, device=self.device).triu(1)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        h = self.embed(ids) + self.position[: ids.shape[1]]
        context, _ = self.attention(h, h, h, attn_mask=self.future_mask(ids.shape[1]), need_weights=False)
        return self.head(h + context)

    def loss(self, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        inputs, labels = batch
        return F.cross_entropy(self(inputs).flatten(0, 1), labels.flatten())


class ChainLMNoFutureMask(ChainLM):
    """BUG: no causal mask is passed (the layer is bidirectional), so each position reads the token it must
    predict; teacher-forced validation looks near perfect while generation is not."""

    def future_mask(self, n: int) -> torch.Tensor | None:
        return None


class ChainLMShiftsAgain(ChainLM):
    """BUG: the loss shifts logits and labels by one (as a Hugging Face causal-LM head does) although the
    dataset already did: the model learns the token after next."""

    def loss(self, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        inputs, labels = batch
        logits = self(inputs)[:, :-1]
        return F.cross_entropy(logits.flatten(0, 1), labels[:, 1:].flatten())


# --- recommendation -----------------------------------------------------------------------------------------
class MatrixFactorisation(_Adam):
    """User and item embeddings with an item bias; BPR loss on (user, liked item) rows against a uniformly
    sampled item."""

    lr = 1e-2

    def __init__(self, dim: int = 16) -> None:
        super().__init__()
        self.users, self.items = self.tables(dim)
        self.item_bias = nn.Embedding(data.ITEMS, 1)
        for table in (self.users, self.items, self.item_bias):
            nn.init.normal_(table.weight, std=0.1)

    def tables(self, dim: int) -> tuple[nn.Embedding, nn.Embedding]:
        return nn.Embedding(data.USERS, dim), nn.Embedding(data.ITEMS, dim)

    def forward(self, users: torch.Tensor, items: torch.Tensor) -> torch.Tensor:
        return (self.users(users) * self.items(items)).sum(-1) + self.item_bias(items).squeeze(-1)

    def margin(self, users: torch.Tensor, liked: torch.Tensor, other: torch.Tensor) -> torch.Tensor:
        return self(users, liked) - self(users, other)

    def loss(self, batch: list[torch.Tensor]) -> torch.Tensor:
        users, liked = batch[0].unbind(1)
        other = torch.randint(data.ITEMS, liked.shape, device=liked.device)
        return -F.logsigmoid(self.margin(users, liked, other)).mean()


class MatrixFactorisationReversed(MatrixFactorisation):
    """BUG: the BPR margin is written sampled-minus-liked: the loss falls as the model learns to rank the
    sampled items above the liked ones."""

    def margin(self, users: torch.Tensor, liked: torch.Tensor, other: torch.Tensor) -> torch.Tensor:
        return self(users, other) - self(users, liked)


class MatrixFactorisationOneTable(MatrixFactorisation):
    """BUG: one embedding table sized for the larger id range serves users and items: user 7 and item 7
    share a vector, so the score of (u, i) equals that of (i, u)."""

    def tables(self, dim: int) -> tuple[nn.Embedding, nn.Embedding]:
        table = nn.Embedding(max(data.USERS, data.ITEMS), dim)
        return table, table


# --- multi-label --------------------------------------------------------------------------------------------
class TagMLP(_Adam):
    """Twelve features to five independent labels; binary cross-entropy over the known labels (-1 =
    unknown)."""

    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(12, 64), nn.ReLU(), nn.Linear(64, data.TAGS))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)

    def loss(self, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        x, y = batch
        known = y >= 0
        return F.binary_cross_entropy_with_logits(self(x)[known], y[known])


class TagMLPSoftmax(TagMLP):
    """BUG: ``cross_entropy`` with the multi-hot rows as soft targets: a softmax over the labels makes them
    compete and leaves every logit's offset free, so thresholding each label at 0 is meaningless."""

    def loss(self, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        x, y = batch
        return F.cross_entropy(self(x), y)


# --- regression ---------------------------------------------------------------------------------------------
class PriceRegressor(_Adam):
    """An MLP predicting a scaled target; the scaling (``zscore``, ``minmax`` or ``log``) uses the training
    targets' statistics, kept as buffers; ``predict`` maps back to raw units."""

    def __init__(self, scaling: str = "zscore") -> None:
        super().__init__()
        self.scaling = scaling
        y = (data.positive_amounts if scaling == "log" else data.prices)(1500, 1)[1]
        shift, scale = {"zscore": (y.mean(), y.std()), "minmax": (y.min(), y.max() - y.min())}.get(
            scaling, (torch.tensor(0.0), torch.tensor(1.0))
        )
        self.register_buffer("shift", shift)
        self.register_buffer("scale", scale)
        self.net = self.network()

    def network(self) -> nn.Sequential:
        return nn.Sequential(nn.Linear(6, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x).squeeze(-1)

    def scaled(self, y: torch.Tensor) -> torch.Tensor:
        return y.log() if self.scaling == "log" else (y - self.shift) / self.scale

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        out = self(x)
        return out.exp() if self.scaling == "log" else out * self.scale + self.shift

    def loss(self, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        x, y = batch
        return F.mse_loss(self(x), self.scaled(y))


class PriceRegressorReluHead(PriceRegressor):
    """BUG: the network ends in a ReLU (from a template for counts), but the standardised target is negative
    for half the rows: those predictions are stuck at 0 (the mean)."""

    def network(self) -> nn.Sequential:
        return nn.Sequential(*super().network(), nn.ReLU())


class PriceRegressorBatchMinMax(PriceRegressor):
    """BUG: the target is min-max scaled with the batch's own minimum and maximum instead of the training
    set's, so a row's target depends on its batch, and predictions are unscaled with the set's range."""

    def scaled(self, y: torch.Tensor) -> torch.Tensor:
        return (y - y.min()) / (y.max() - y.min())


# --- time-series classification -----------------------------------------------------------------------------
class SequenceClassifier(_Adam):
    """A GRU over packed variable-length sequences; the class from the final hidden state."""

    def __init__(self) -> None:
        super().__init__()
        self.rnn = nn.GRU(3, 32, batch_first=True)
        self.head = nn.Linear(32, 4)

    def forward(self, x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        packed = pack_padded_sequence(x, lengths.cpu(), batch_first=True, enforce_sorted=False)
        outputs, final = self.rnn(packed)
        return self.head(self.summary(outputs, final))

    def summary(self, outputs, final: torch.Tensor) -> torch.Tensor:
        return final[-1]

    def loss(self, batch: tuple[torch.Tensor, ...]) -> torch.Tensor:
        x, lengths, y = batch
        return F.cross_entropy(self(x, lengths), y)


class SequenceClassifierLastPadded(SequenceClassifier):
    """BUG: the summary is the unpacked output at the last time step, which ``pad_packed_sequence`` fills with
    zeros for every sequence shorter than the longest in its batch."""

    def summary(self, outputs, final: torch.Tensor) -> torch.Tensor:
        return pad_packed_sequence(outputs, batch_first=True)[0][:, -1]


# --- online event detection (1-D convolution) ---------------------------------------------------------------
class PulseDetector(_Adam):
    """Three 1-D convolutions (kernel 5) giving a per-step event logit; causal: padded on the left only."""

    def __init__(self) -> None:
        super().__init__()
        self.convs = nn.ModuleList([nn.Conv1d(1, 16, 5), nn.Conv1d(16, 16, 5), nn.Conv1d(16, 1, 5)])

    def pad(self, h: torch.Tensor) -> torch.Tensor:
        return F.pad(h, (4, 0))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for i, conv in enumerate(self.convs):
            x = conv(self.pad(x))
            x = torch.relu(x) if i < len(self.convs) - 1 else x
        return x.squeeze(1)

    def loss(self, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        x, y = batch
        return F.binary_cross_entropy_with_logits(self(x), y)


class PulseDetectorCentred(PulseDetector):
    """BUG: "same" padding (2 steps each side), so every step's output reads 6 steps of the future, which an
    online detector does not have."""

    def pad(self, h: torch.Tensor) -> torch.Tensor:
        return F.pad(h, (2, 2))


# --- point sets ---------------------------------------------------------------------------------------------
class DeepSets(_Adam):
    """A per-point MLP, a max over the set's real points, an MLP classifier; each set is first centred on its
    own centroid (translation invariance)."""

    def __init__(self) -> None:
        super().__init__()
        self.phi = nn.Sequential(nn.Linear(2, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU())
        self.rho = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 4))

    def centre(self, points: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        real = mask[..., None].float()
        return (points * real).sum(1, keepdim=True) / real.sum(1, keepdim=True)

    def forward(self, points: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        h = self.phi(points - self.centre(points, mask))
        return self.rho(h.masked_fill(~mask[..., None], float("-inf")).amax(1))

    def loss(self, batch: tuple[torch.Tensor, ...]) -> torch.Tensor:
        points, mask, y = batch
        return F.cross_entropy(self(points, mask), y)


class DeepSetsBatchCentred(DeepSets):
    """BUG: the centroid is taken over every real point of the batch, not per set: a set's input depends on
    the other sets in its batch, and no set is centred on itself."""

    def centre(self, points: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return points[mask].mean(0)


# --- tabular with a target-encoded category -----------------------------------------------------------------
class ShopNet(_Adam):
    """An MLP on (target-encoded shop, 3 numeric columns) giving one logit."""

    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(4, 32), nn.ReLU(), nn.Linear(32, 1))

    def forward(self, encoded: torch.Tensor, nums: torch.Tensor) -> torch.Tensor:
        return self.net(torch.cat([encoded[:, None], nums], dim=1)).squeeze(-1)

    def loss(self, batch: tuple[torch.Tensor, ...]) -> torch.Tensor:
        encoded, nums, y = batch
        return F.binary_cross_entropy_with_logits(self(encoded, nums), y)
