"""Sealed gallery H's models: each correct model (a healthy twin) and, next to it, the buggy variant a user
wrote (a subclass that changes the one place the bug lives in). Every model is built from the global RNG;
``predict`` is what a served model answers and ``loss(batch)`` what it trains on."""

from __future__ import annotations

import lightning.pytorch as pl
import torch
import torch.nn.functional as F
from torch import nn

from galleries.preflight.sealed import _h_data as data
from galleries.sealed import mlp


class _Adam(pl.LightningModule):
    """Adam on every parameter; ``loss(batch)`` is logged in training and validation; ``predict`` is
    ``forward``."""

    lr = 3e-3

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=self.lr)

    def training_step(self, batch, batch_idx):
        loss = self.loss(batch)
        self.log("train_loss", loss)
        return loss

    def validation_step(self, batch, batch_idx):
        self.log("val_loss", self.loss(batch))

    def predict(self, *inputs: torch.Tensor):
        return self(*inputs)


# --- transductive node classification -----------------------------------------------------------------------
class NodeSAGE(_Adam):
    """Two GraphSAGE layers (own features and the mean of the neighbours' through separate weights); the
    batch is the whole graph with the mask of the nodes whose labels count."""

    lr = 1e-2

    def __init__(self) -> None:
        super().__init__()
        self.self1, self.neigh1 = nn.Linear(data.NODE_FEATURES, 32), nn.Linear(data.NODE_FEATURES, 32)
        self.self2, self.neigh2 = nn.Linear(32, data.NODE_CLASSES), nn.Linear(32, data.NODE_CLASSES)
        self.dropout = nn.Dropout(0.3)

    def layer(self, x: torch.Tensor, mean: torch.Tensor, own: nn.Linear, neighbours: nn.Linear):
        return own(x) + neighbours(mean @ x)

    def forward(self, x: torch.Tensor, adj: torch.Tensor) -> torch.Tensor:
        mean = adj / adj.sum(1, keepdim=True).clamp_min(1)
        h = self.dropout(F.relu(self.layer(x, mean, self.self1, self.neigh1)))
        return self.layer(h, mean, self.self2, self.neigh2)

    def loss(self, batch) -> torch.Tensor:
        x, adj, label, mask = (t[0] for t in batch)  # one graph per batch
        return F.cross_entropy(self(x, adj)[mask], label[mask])


class NodeSAGEOverwritten(NodeSAGE):
    """BUG: the layer overwrites ``x`` with the neighbours' mean before the 'own' term reads it, so both
    weights see only the neighbourhood and a node's own features never reach its prediction."""

    def layer(self, x: torch.Tensor, mean: torch.Tensor, own: nn.Linear, neighbours: nn.Linear):
        x = mean @ x
        return own(x) + neighbours(x)


class NodeSAGEUnknownMinusOne(NodeSAGE):
    """Labels outside the split are stored as -1 and skipped by the loss (``ignore_index``): no mask."""

    def loss(self, batch) -> torch.Tensor:
        x, adj, label = (t[0] for t in batch)
        return F.cross_entropy(self(x, adj), label, ignore_index=-1)


# --- CTC: letters from frames without an alignment ----------------------------------------------------------
class CTCNet(_Adam):
    """Three 1-D convolutions over frames to per-frame log-probabilities over the 5 letters and a blank (the
    last index, 5); CTC loss; greedy decoding (collapse repeats, then drop blanks)."""

    blank = data.LETTERS

    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv1d(data.FRAME_DIM, 48, 5, padding=2), nn.ReLU(),
            nn.Conv1d(48, 48, 5, padding=2), nn.ReLU(),
            nn.Conv1d(48, data.LETTERS + 1, 1),
        )  # fmt: skip

    def forward(self, frames: torch.Tensor) -> torch.Tensor:
        return self.net(frames.transpose(1, 2)).transpose(1, 2).log_softmax(-1)  # (n, frames, 6)

    def loss(self, batch) -> torch.Tensor:
        frames, letters, frame_counts, letter_counts = batch
        log_probs = self(frames).transpose(0, 1)  # (frames, n, 6), as ctc_loss wants
        return F.ctc_loss(
            log_probs, letters, frame_counts, letter_counts, blank=self.blank, zero_infinity=True
        )

    def collapse(self, path: list[int]) -> list[int]:
        merged = [p for i, p in enumerate(path) if i == 0 or p != path[i - 1]]
        return [p for p in merged if p != self.blank]

    def predict(self, frames: torch.Tensor) -> list[list[int]]:
        return [self.collapse(path) for path in self(frames).argmax(-1).tolist()]


class CTCNetDefaultBlank(CTCNet):
    """BUG: ``F.ctc_loss``'s default ``blank=0`` is kept, but letter 0 is a real letter: it is scored as
    the blank, and the decoder (reading the same index) never emits it."""

    blank = 0


class CTCNetBlanksDroppedFirst(CTCNet):
    """BUG: decoding drops the blanks first and then merges repeats, so a letter said twice (two runs with
    silence between) comes out once."""

    def collapse(self, path: list[int]) -> list[int]:
        kept = [p for p in path if p != self.blank]
        return [p for i, p in enumerate(kept) if i == 0 or p != kept[i - 1]]


# --- siamese verification on digit pairs --------------------------------------------------------------------
class SiameseNet(_Adam):
    """One shared MLP tower; the contrastive loss (same pairs pulled together, different pairs pushed past the
    margin 2); a pair is served as 'same' when its distance is under 1."""

    margin = 2.0

    def __init__(self) -> None:
        super().__init__()
        self.tower = mlp(64, 128, 32)

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return (self.tower(a) - self.tower(b)).norm(dim=-1)

    def contrastive(self, distance: torch.Tensor, same: torch.Tensor) -> torch.Tensor:
        return same * distance**2 + (1 - same) * F.relu(self.margin - distance) ** 2

    def loss(self, batch) -> torch.Tensor:
        a, b, same = batch
        return self.contrastive(self(a, b), same.float()).mean()

    def predict(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return self(a, b) < self.margin / 2


class SiameseNetNormWithoutDim(SiameseNet):
    """BUG: ``.norm()`` without ``dim``: one distance for the whole batch, broadcast against every pair's
    label, so the tower learns only the batch's overall spread and every served pair of a batch gets the
    same answer."""

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return (self.tower(a) - self.tower(b)).norm()


class SiameseNetPaperConvention(SiameseNet):
    """BUG: the loss is copied from the paper, where Y = 1 marks a *dissimilar* pair; the data's ``same`` is
    1 for a matching pair, so matching digits are pushed apart and different ones pulled together."""

    def contrastive(self, distance: torch.Tensor, same: torch.Tensor) -> torch.Tensor:
        y = same  # the paper's Y
        return (1 - y) * distance**2 + y * F.relu(self.margin - distance) ** 2


# --- multiple-choice scoring --------------------------------------------------------------------------------
class ChoiceScorer(_Adam):
    """An MLP scores each (context, option) pair; a softmax over a question's options (padding masked)."""

    def __init__(self) -> None:
        super().__init__()
        self.score = mlp(2 * data.MC_DIM, 96, 96, 1)

    def contexts(self, context: torch.Tensor) -> torch.Tensor:
        """The context once per option, in the order of ``options.flatten(0, 1)``."""
        return context.repeat_interleave(data.OPTIONS, 0)

    def forward(self, context: torch.Tensor, options: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        pairs = torch.cat([self.contexts(context), options.flatten(0, 1)], -1)
        scores = self.score(pairs).view(-1, data.OPTIONS)
        return scores.masked_fill(~mask, float("-inf"))

    def loss(self, batch) -> torch.Tensor:
        context, options, mask, answer = batch
        return F.cross_entropy(self(context, options, mask), answer)


class ChoiceScorerRepeat(ChoiceScorer):
    """BUG: the context is tiled with ``repeat`` instead of ``repeat_interleave``: the shapes match, but each
    option is scored against another question's context."""

    def contexts(self, context: torch.Tensor) -> torch.Tensor:
        return context.repeat(data.OPTIONS, 1)


class ChoiceScorerWarmup(ChoiceScorer):
    """The lower layers start frozen so that the fresh output layer warms up alone for one epoch, then are
    unfrozen; Adam holds every parameter (it skips the frozen ones, which have no gradient)."""

    def __init__(self) -> None:
        super().__init__()
        self.score[:-1].requires_grad_(False)

    def on_train_epoch_start(self) -> None:
        if self.current_epoch == 1:
            self.score[:-1].requires_grad_(True)


class ChoiceScorerWarmupFilteredOptimizer(ChoiceScorerWarmup):
    """BUG: the optimizer is built from the parameters that require grad when training starts, before the
    unfreezing: the lower layers get gradients from epoch 1 on but are never stepped, so they stay random."""

    def configure_optimizers(self):
        return torch.optim.Adam([p for p in self.parameters() if p.requires_grad], lr=self.lr)


# --- speaker identification ---------------------------------------------------------------------------------
class SpeakerNet(_Adam):
    """A frame encoder, mean-pooled over time to a 32-d speaker embedding, and a linear classifier head."""

    def __init__(self) -> None:
        super().__init__()
        self.frames = nn.Sequential(mlp(data.FEATURE_DIM, 64, 64), nn.ReLU())
        self.embed = nn.Linear(64, 32)
        self.head = nn.Linear(32, data.SPEAKERS)

    def front_end(self, frames: torch.Tensor) -> torch.Tensor:
        return frames

    def embedding(self, frames: torch.Tensor) -> torch.Tensor:
        return self.embed(self.frames(self.front_end(frames)).mean(1))

    def forward(self, frames: torch.Tensor) -> torch.Tensor:
        return self.head(self.embedding(frames))

    def loss(self, batch) -> torch.Tensor:
        frames, speaker = batch
        return F.cross_entropy(self(frames), speaker)


class SpeakerNetMeanNormalised(SpeakerNet):
    """BUG: the front end subtracts each utterance's own mean (cepstral mean normalisation, copied from a
    speech-recognition recipe): it removes the channel, and with it the speaker's mean voice, which is most
    of what tells speakers apart."""

    def front_end(self, frames: torch.Tensor) -> torch.Tensor:
        return frames - frames.mean(1, keepdim=True)


class SpeakerNetMargin(SpeakerNet):
    """A cosine head with an additive margin (scale 30, margin 0.2): logits are 30 (cos - 0.2) on the true
    speaker and 30 cos on the others, so the training loss starts far above ln 16 (about 14)."""

    def forward(self, frames: torch.Tensor) -> torch.Tensor:
        return 30 * F.normalize(self.embedding(frames), dim=-1) @ F.normalize(self.head.weight, dim=-1).T

    def loss(self, batch) -> torch.Tensor:
        frames, speaker = batch
        logits = self(frames) - 30 * 0.2 * F.one_hot(speaker, data.SPEAKERS)
        return F.cross_entropy(logits, speaker)


# --- change-point detection ---------------------------------------------------------------------------------
class ChangeNet(_Adam):
    """1-D convolutions read the series locally; a linear layer over the 64 positions turns their features
    into a logit per step; softmax over the steps; the target is the first step of the new level. Adam with a
    linear warm-up over the first 100 steps."""

    lr, warmup, interval = 3e-3, 100, "step"

    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv1d(1, 24, 9, padding=4), nn.ReLU(), nn.Conv1d(24, 24, 9, padding=4), nn.ReLU(),
            nn.Conv1d(24, 4, 1), nn.Flatten(), nn.Linear(4 * data.SERIES, data.SERIES),
        )  # fmt: skip

    def forward(self, series: torch.Tensor) -> torch.Tensor:
        return self.net(series)

    def loss(self, batch) -> torch.Tensor:
        series, change = batch
        return F.cross_entropy(self(series), change)

    def configure_optimizers(self):
        optimizer = torch.optim.Adam(self.parameters(), lr=self.lr)
        schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: min(1.0, step / self.warmup))
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": schedule, "interval": self.interval}}


class ChangeNetWarmupEachEpoch(ChangeNet):
    """BUG: the warm-up is counted in steps, but the scheduler config keeps Lightning's default interval,
    "epoch": the learning rate is 0 for the first epoch and then 1/100, 2/100, 3/100 of its peak."""

    interval = "epoch"


# --- implicit feedback with a BPR loss ----------------------------------------------------------------------
class BPR(_Adam):
    """User and item embeddings (16-d); score = dot product; loss: -log s(score(u, clicked) - score(u, other))
    over (user, clicked, random item) triples."""

    lr = 1e-2

    def __init__(self) -> None:
        super().__init__()
        self.users, self.items = nn.Embedding(data.USERS, 16), nn.Embedding(data.ITEMS, 16)
        for table in (self.users, self.items):
            nn.init.normal_(table.weight, std=0.1)

    def forward(self, user: torch.Tensor, item: torch.Tensor) -> torch.Tensor:
        return (self.users(user) * self.items(item)).sum(-1)

    def loss(self, batch) -> torch.Tensor:
        user, clicked, other = batch
        return -F.logsigmoid(self(user, clicked) - self(user, other)).mean()

    def all_scores(self, user: torch.Tensor) -> torch.Tensor:
        """Served: every item's score for each user (raw item ids)."""
        return self.users(user) @ self.items.weight.T


# --- probabilistic forecasting with a Gaussian head ---------------------------------------------------------
class GaussianForecaster(_Adam):
    """An MLP from the 24-step window to a mean and a standard deviation (softplus); Gaussian NLL with the
    variance std^2 (negative once the noise is small: the noisy season's std reaches 0.05)."""

    def __init__(self) -> None:
        super().__init__()
        self.net = mlp(data.LOOKBACK, 64, 64, 2)

    def forward(self, window: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        mean, raw = self.net(window).unbind(-1)
        return mean, F.softplus(raw) + 1e-3

    def variance(self, std: torch.Tensor) -> torch.Tensor:
        return std**2

    def loss(self, batch) -> torch.Tensor:
        window, target = batch
        mean, std = self(window)
        return F.gaussian_nll_loss(mean, target, self.variance(std))


class GaussianForecasterStdAsVariance(GaussianForecaster):
    """BUG: the head's standard deviation is passed to ``gaussian_nll_loss`` as its ``var``: training makes
    the output the variance, and the served forecast reads it as the std (0.01 where it should be 0.1)."""

    def variance(self, std: torch.Tensor) -> torch.Tensor:
        return std
