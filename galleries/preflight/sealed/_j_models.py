"""Sealed gallery J's models: each correct model (a healthy twin) and, next to it, the buggy variant a user
wrote (a subclass, or a flag, that changes the one place the bug lives in). Every model is built from the
global RNG; ``predict`` is what a served model answers and ``loss(batch)`` what it trains on."""

from __future__ import annotations

import copy

import lightning.pytorch as pl
import torch
import torch.nn.functional as F
from torch import nn

from galleries.preflight.sealed import _j_data as data
from galleries.sealed import mlp


class _Adam(pl.LightningModule):
    """Adam on every parameter; ``loss(batch)`` is logged in training and validation."""

    lr = 3e-3

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=self.lr)

    def training_step(self, batch, batch_idx):
        loss = self.loss(batch)
        self.log("train_loss", loss)
        return loss

    def validation_step(self, batch, batch_idx):
        self.log("val_loss", self.loss(batch))


# --- video clip classification ------------------------------------------------------------------------------
class Clip3DCNN(_Adam):
    """Two 3x3x3 convolutions over (channel, time, height, width), global average pooling and a linear head
    over the 4 motion directions; cross-entropy. Served: the most likely direction of a clip."""

    lr = 1e-2

    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv3d(1, 8, 3, stride=(1, 2, 2), padding=1), nn.ReLU(),
            nn.Conv3d(8, 16, 3, padding=1), nn.ReLU(),
            nn.AdaptiveAvgPool3d(1), nn.Flatten(), nn.Linear(16, 4),
        )  # fmt: skip

    def forward(self, clip: torch.Tensor) -> torch.Tensor:
        return self.net(clip)

    def loss(self, batch) -> torch.Tensor:
        clip, label = batch
        return F.cross_entropy(self(clip), label)

    def predict(self, clip: torch.Tensor) -> torch.Tensor:
        return self(clip).argmax(-1)


# --- keyword spotting ---------------------------------------------------------------------------------------
class KeywordNet(_Adam):
    """Two 1-D convolutions over time on 12 filterbank bins, max pooling over time and a linear head over
    silence, unknown and the 5 keywords; cross-entropy. One-cycle learning rate, stepped every batch (the
    schedule spans ``trainer.estimated_stepping_batches``)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Sequential(
            nn.Conv1d(data.BINS, 32, 5, padding=2), nn.ReLU(), nn.Conv1d(32, 32, 5, padding=2), nn.ReLU()
        )
        self.head = nn.Linear(32, data.KEYWORDS + 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.conv(x.transpose(1, 2)).amax(-1))

    def loss(self, batch) -> torch.Tensor:
        x, label = batch
        return F.cross_entropy(self(x), label)

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        return self(x).argmax(-1)

    def one_cycle(self, optimizer: torch.optim.Optimizer) -> torch.optim.lr_scheduler.OneCycleLR:
        return torch.optim.lr_scheduler.OneCycleLR(
            optimizer, max_lr=self.lr, total_steps=int(self.trainer.estimated_stepping_batches)
        )

    def configure_optimizers(self):
        optimizer = torch.optim.Adam(self.parameters(), lr=self.lr)
        schedule = {"scheduler": self.one_cycle(optimizer), "interval": "step"}
        return {"optimizer": optimizer, "lr_scheduler": schedule}


class KeywordNetScheduleByEpoch(KeywordNet):
    """BUG: the one-cycle schedule is sized in batches (``estimated_stepping_batches``) but returned as
    ``[optimizer], [scheduler]``, which Lightning steps once per epoch: the run ends a few steps into the
    warm-up, at about a 25th of the intended learning rate."""

    def configure_optimizers(self):
        optimizer = torch.optim.Adam(self.parameters(), lr=self.lr)
        return [optimizer], [self.one_cycle(optimizer)]


# --- sequential recommendation: the next item of a session --------------------------------------------------
class NextItemTransformer(_Adam):
    """SASRec-style: item and position embeddings, two causal self-attention layers and logits against the
    item embedding table itself (tied weights, so the output has no layer of its own). Loss: cross-entropy
    of the next item at every position. Served: the most likely item after a session."""

    def __init__(self) -> None:
        super().__init__()
        self.items, self.positions = nn.Embedding(data.ITEMS + 1, 32), nn.Embedding(data.SESSION, 32)
        layer = nn.TransformerEncoderLayer(32, 2, 64, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)

    def attention_mask(self, length: int) -> torch.Tensor | None:
        return nn.Transformer.generate_square_subsequent_mask(length)

    def forward(self, items: torch.Tensor) -> torch.Tensor:
        length = items.shape[1]
        h = self.items(items) + self.positions(torch.arange(length))
        h = self.encoder(h, mask=self.attention_mask(length))
        return h @ self.items.weight.T

    def loss(self, batch) -> torch.Tensor:
        (items,) = batch
        logits = self(items[:, :-1])
        return F.cross_entropy(logits.flatten(0, 1), items[:, 1:].flatten())

    def predict(self, history: torch.Tensor) -> torch.Tensor:
        return self(history)[:, -1].argmax(-1)


class NextItemTransformerNoMask(NextItemTransformer):
    """BUG: the encoder runs without the causal mask (as in the bidirectional encoder it was adapted from):
    position t attends to position t + 1, whose item is its own target, so training and validation copy the
    answer, and served after a whole session the model has nothing to copy."""

    def attention_mask(self, length: int) -> torch.Tensor | None:
        return None


class SessionGRU(_Adam):
    """GRU4Rec-style: item embeddings (0 pads), a GRU and a linear head over the items; cross-entropy of the
    next item at every real position (padding ignored). Served: the next item after each session's last real
    item."""

    def __init__(self) -> None:
        super().__init__()
        self.items = nn.Embedding(data.ITEMS + 1, 32, padding_idx=0)
        self.gru, self.head = nn.GRU(32, 64, batch_first=True), nn.Linear(64, data.ITEMS + 1)

    def states(self, items: torch.Tensor) -> torch.Tensor:
        return self.gru(self.items(items))[0]

    def loss(self, batch) -> torch.Tensor:
        items, _ = batch
        logits = self.head(self.states(items[:, :-1]))
        return F.cross_entropy(logits.flatten(0, 1), items[:, 1:].flatten(), ignore_index=0)

    def last_state(self, states: torch.Tensor, length: torch.Tensor) -> torch.Tensor:
        return states[torch.arange(len(states)), length - 1]

    def predict(self, items: torch.Tensor, length: torch.Tensor) -> torch.Tensor:
        return self.head(self.last_state(self.states(items), length)).argmax(-1)


class SessionGRULastColumn(SessionGRU):
    """BUG: served from ``states[:, -1]``, the GRU state after the padding of a short session, not after its
    last real item."""

    def last_state(self, states: torch.Tensor, length: torch.Tensor) -> torch.Tensor:
        return states[:, -1]


# --- link prediction: a graph autoencoder -------------------------------------------------------------------
def normalised_adjacency(src: torch.Tensor, dst: torch.Tensor, symmetric: bool = True) -> torch.Tensor:
    """D^-1/2 (A + I) D^-1/2 of the message edges; row i gathers from the nodes with an edge into i."""
    adj = torch.eye(data.NODES)
    adj[dst, src] = 1.0
    if symmetric:
        adj[src, dst] = 1.0
    scale = adj.sum(1).rsqrt()
    return scale[:, None] * adj * scale[None]


class LinkGCN(_Adam):
    """Two graph convolutions over the observed (training) edges embed every node; an edge is scored by the
    dot product of its ends. Batches are training edges; each step draws as many fresh random node pairs as
    negatives (BCE); validation batches carry fixed negatives and labels. Served: a link's probability."""

    symmetric = True

    def __init__(self) -> None:
        super().__init__()
        graph = data.community_graph()
        edges = self.message_edges(graph)
        self.register_buffer("x", graph["x"])
        self.register_buffer("adj", normalised_adjacency(edges[:, 0], edges[:, 1], self.symmetric))
        self.first, self.second = nn.Linear(data.NODE_FEATURES, 64), nn.Linear(64, 32)

    def message_edges(self, graph: dict[str, torch.Tensor]) -> torch.Tensor:
        return graph["train"]

    def embed(self) -> torch.Tensor:
        return self.adj @ self.second(F.relu(self.adj @ self.first(self.x)))

    def forward(self, src: torch.Tensor, dst: torch.Tensor) -> torch.Tensor:
        z = self.embed()
        return (z[src] * z[dst]).sum(-1)

    def loss(self, batch) -> torch.Tensor:
        if len(batch) == 3:
            src, dst, label = batch
        else:
            pos_src, pos_dst = batch
            neg_src, neg_dst = torch.randint(data.NODES, (2, len(pos_src)))
            src, dst = torch.cat([pos_src, neg_src]), torch.cat([pos_dst, neg_dst])
            label = torch.cat([torch.ones(len(pos_src)), torch.zeros(len(neg_src))])
        return F.binary_cross_entropy_with_logits(self(src, dst), label)

    def predict(self, src: torch.Tensor, dst: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(self(src, dst))


class LinkGCNAllEdges(LinkGCN):
    """BUG: the message graph is built from every edge the user holds, validation edges included, before the
    split: the GCN passes messages along the very links validation asks about."""

    def message_edges(self, graph: dict[str, torch.Tensor]) -> torch.Tensor:
        return torch.cat([graph["train"], graph["val"]])


class LinkGCNOneWay(LinkGCN):
    """BUG: the edge list (stored once per pair, i < j) is not made undirected before the adjacency is built:
    messages flow from lower to higher node ids only, and low-numbered nodes hear almost nothing."""

    symmetric = False


class LinkGCNRanking(LinkGCN):
    """The same encoder trained to rank: each positive edge must outscore a fresh random pair by a margin of
    1 (margin ranking loss, exactly 0 once every margin is met); validation pairs its positives and negatives
    in order."""

    def ranking_loss(self, pos: torch.Tensor, neg: torch.Tensor) -> torch.Tensor:
        return F.margin_ranking_loss(pos, neg, torch.ones_like(pos), margin=1.0)

    def loss(self, batch) -> torch.Tensor:
        if len(batch) == 3:
            src, dst, label = batch
            score = self(src, dst)
            pos, neg = score[label == 1], score[label == 0]
            count = min(len(pos), len(neg))
            return self.ranking_loss(pos[:count], neg[:count])
        src, dst = batch
        neg_src, neg_dst = torch.randint(data.NODES, (2, len(src)))
        return self.ranking_loss(self(src, dst), self(neg_src, neg_dst))


class LinkGCNRankingSwapped(LinkGCNRanking):
    """BUG: ``margin_ranking_loss(neg, pos, ones)``: with target 1 the first argument is the one that must
    rank higher, so the model learns to score random pairs above real links."""

    def ranking_loss(self, pos: torch.Tensor, neg: torch.Tensor) -> torch.Tensor:
        return F.margin_ranking_loss(neg, pos, torch.ones_like(pos), margin=1.0)


# --- 3-D pose lifting ---------------------------------------------------------------------------------------
class PoseLifter(_Adam):
    """An MLP from the 10 pelvis-relative 2-D keypoints to the 10 pelvis-relative 3-D joints (the pelvis
    target is always 0); MSE. An exponential moving average of the weights (decay up to .99, warmed up as
    (1 + step) / (10 + step)) is kept as a frozen copy and served; ``predict`` takes keypoints in image
    coordinates and centres them on the pelvis first."""

    decay = 0.99

    def __init__(self) -> None:
        super().__init__()
        self.net = mlp(2 * len(data.JOINTS), 256, 256, 3 * len(data.JOINTS))
        self.ema = copy.deepcopy(self.net).requires_grad_(False)

    def configure_optimizers(self):
        return torch.optim.Adam(self.net.parameters(), lr=self.lr)

    def forward(self, keypoints: torch.Tensor, net: nn.Module | None = None) -> torch.Tensor:
        return (net or self.net)(keypoints.flatten(1)).view(len(keypoints), -1, 3)

    def loss(self, batch) -> torch.Tensor:
        keypoints, joints = batch
        return F.mse_loss(self(keypoints), joints)

    def ema_decay(self) -> float:
        step = self.global_step
        return min(self.decay, (1 + step) / (10 + step))

    @torch.no_grad()
    def on_train_batch_end(self, outputs, batch, batch_idx) -> None:
        decay = self.ema_decay()
        for average, weight in zip(self.ema.parameters(), self.net.parameters(), strict=True):
            average.lerp_(weight, 1 - decay)

    def centre(self, keypoints: torch.Tensor) -> torch.Tensor:
        return keypoints - keypoints[:, :1]

    @torch.no_grad()
    def predict(self, keypoints: torch.Tensor) -> torch.Tensor:
        return self(self.centre(keypoints), self.ema)


class PoseLifterSlowAverage(PoseLifter):
    """BUG: the weight average uses a fixed decay of .999 from the first step (a recipe for runs a hundred
    times longer): after this run's few hundred steps the served average is still mostly the random init."""

    def ema_decay(self) -> float:
        return 0.999


class PoseLifterUncentred(PoseLifter):
    """BUG: ``predict`` feeds the detector's keypoints as they come; the dataset had centred its keypoints on
    the pelvis, so the served model sees inputs shifted by wherever the person stands in the frame."""

    def centre(self, keypoints: torch.Tensor) -> torch.Tensor:
        return keypoints


# --- multi-label tagging of token documents -----------------------------------------------------------------
class TagNet(_Adam):
    """A mean bag of token embeddings, a hidden layer and 6 independent tag logits; BCE against the multi-hot
    (about a fifth of the documents carry no tag at all). Served: each tag's probability."""

    lr = 1e-2

    def __init__(self) -> None:
        super().__init__()
        self.bag = nn.EmbeddingBag(data.VOCAB, 64, mode="mean")
        self.head = nn.Sequential(nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, data.TAGS))

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.head(self.bag(tokens))

    def loss(self, batch) -> torch.Tensor:
        tokens, tags = batch
        return F.binary_cross_entropy_with_logits(self(tokens), tags)

    def predict(self, tokens: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(self(tokens))


# --- speech enhancement by spectral masking -----------------------------------------------------------------
class MaskEnhancer(_Adam):
    """Two 1-D convolutions over time read the log-compressed mixture and give a mask in [0, 1] per frame and
    band (a sigmoid); the estimate is mask * mixture and the loss its MSE against the clean speech. Served:
    the recording is peak-normalised as in training, enhanced and scaled back to its level."""

    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv1d(data.BANDS, 64, 5, padding=2), nn.ReLU(), nn.Conv1d(64, data.BANDS, 5, padding=2)
        )

    def forward(self, mixture: torch.Tensor) -> torch.Tensor:
        mask = torch.sigmoid(self.net(torch.log1p(mixture).transpose(1, 2))).transpose(1, 2)
        return mask * mixture

    def loss(self, batch) -> torch.Tensor:
        mixture, clean = batch
        return F.mse_loss(self(mixture), clean)

    def predict(self, mixture: torch.Tensor) -> torch.Tensor:
        peak = mixture.amax((1, 2), keepdim=True)
        return self(mixture / peak) * peak
