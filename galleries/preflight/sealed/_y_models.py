"""Sealed gallery Y's models (half ``y``): each correct model (a healthy twin) and, next to it, the buggy
variant a user wrote (a subclass that changes the one place the bug lives in). Every model is built from the
global RNG; ``predict`` is what a served model answers and ``loss(batch)`` what it trains on."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from galleries.preflight.sealed import _y_data as data
from galleries.sealed import AdamModule, mlp


# --- explicit ratings: biased matrix factorisation ----------------------------------------------------------
class RatingMF(AdamModule):
    """A global mean, user and item biases and a dot product of 16 factors (dropout on the factors in
    training); mean squared error on the rating. Served: the rating clipped to 1..5. Reads batches as
    (user, item, rating)."""

    def __init__(self) -> None:
        super().__init__()
        self.user, self.item = nn.Embedding(data.USERS, 16), nn.Embedding(data.ITEMS, 16)
        self.user_bias, self.item_bias = nn.Embedding(data.USERS, 1), nn.Embedding(data.ITEMS, 1)
        for table in (self.user, self.item):
            nn.init.normal_(table.weight, std=0.1)
        for table in (self.user_bias, self.item_bias):
            nn.init.zeros_(table.weight)
        self.mean = nn.Parameter(torch.tensor(3.5))
        self.dropout = nn.Dropout(0.1)

    def forward(self, users: torch.Tensor, items: torch.Tensor) -> torch.Tensor:
        taste = (self.dropout(self.user(users)) * self.dropout(self.item(items))).sum(1)
        return self.mean + self.user_bias(users)[:, 0] + self.item_bias(items)[:, 0] + taste

    def loss(self, batch) -> torch.Tensor:
        users, items, rating = batch
        return F.mse_loss(self(users, items), rating)

    def predict(self, users: torch.Tensor, items: torch.Tensor) -> torch.Tensor:
        return self(users, items).clamp(1, 5)


# --- listwise learning to rank (ListNet) --------------------------------------------------------------------
class ListRanker(AdamModule):
    """A per-document MLP scorer; ListNet's cross-entropy between the softmax of the relevance grades and the
    softmax of the scores over each list (it never reaches 0). Served: the candidates ranked by score, best
    first."""

    def __init__(self) -> None:
        super().__init__()
        self.scorer = mlp(data.QFEATS, 32, 32, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.scorer(x)[..., 0]

    def loss(self, batch) -> torch.Tensor:
        x, relevance = batch
        return -(F.softmax(relevance, -1) * F.log_softmax(self(x), -1)).sum(-1).mean()

    def rank(self, x: torch.Tensor) -> torch.Tensor:
        return self(x).argsort(-1, descending=True)


class ListRankerAscending(ListRanker):
    """BUG: the served ranking is ``scores.argsort(-1)``, ascending by default: the worst candidates come
    first."""

    def rank(self, x: torch.Tensor) -> torch.Tensor:
        return self(x).argsort(-1)


class ListRankerQueryNormalised(ListRanker):
    """The ranker on features standardised within each list (the query's own mean and spread): a list's
    absolute feature level is thrown away on purpose."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = (x - x.mean(-2, keepdim=True)) / (x.std(-2, keepdim=True) + 1e-5)
        return self.scorer(x)[..., 0]


# --- survival: a neural Cox model ---------------------------------------------------------------------------
class CoxNet(AdamModule):
    """An MLP log-risk (no intercept: the partial likelihood cancels it); the negative Cox partial
    log-likelihood of the batch, the risk set of each event being the patients still at risk (observed at
    least as long), through a cumulative log-sum-exp over the batch sorted by time, longest first. Reads
    (covariates, time, event flag, ...). Served: the log-risk."""

    lr = 2e-3
    descending = True

    def __init__(self) -> None:
        super().__init__()
        self.net = mlp(data.COVARIATES, 32, 32, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)[:, 0]

    def loss(self, batch) -> torch.Tensor:
        x, time, event = batch[:3]
        order = time.argsort(descending=self.descending)
        risk, event = self(x)[order], event[order]
        at_risk = torch.logcumsumexp(risk, 0)
        return -((risk - at_risk) * event).sum() / event.sum().clamp_min(1)

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        return self(x)


class CoxNetAscending(CoxNet):
    """BUG: the batch is sorted by ``time.argsort()`` (ascending): the cumulative sum gathers, for each event,
    the patients who left earlier instead of those still at risk."""

    descending = False


# --- transductive node classification (two-layer GCN) -------------------------------------------------------
class GCN(AdamModule):
    """A two-layer graph convolution on the symmetric-normalised adjacency with self-loops,
    D^-1/2 (A + I) D^-1/2, over the whole graph each step (dropout 0.5, weight decay); cross-entropy on the
    training nodes only, validation on the validation nodes. Served: every node's class."""

    lr = 1e-2
    self_loops = True
    val_mask = "val_mask"

    def __init__(self) -> None:
        super().__init__()
        self.first = nn.Linear(data.NODE_FEATS, 32)
        self.second = nn.Linear(32, data.NODE_CLASSES)
        self.dropout = nn.Dropout(0.5)

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=self.lr, weight_decay=5e-4)

    def propagate(self, adj: torch.Tensor) -> torch.Tensor:
        if self.self_loops:
            adj = adj + torch.eye(len(adj))
        scale = adj.sum(1).clamp_min(1).rsqrt()
        return scale[:, None] * adj * scale[None, :]

    def forward(self, graph) -> torch.Tensor:
        a = self.propagate(graph["adj"])
        h = F.relu(a @ self.first(self.dropout(graph["x"])))
        return a @ self.second(self.dropout(h))

    def loss(self, graph, mask: str = "train_mask") -> torch.Tensor:
        return F.cross_entropy(self(graph)[graph[mask]], graph["y"][graph[mask]])

    def validation_step(self, batch, batch_idx) -> None:
        self.log("val_loss", self.loss(batch, self.val_mask))

    def predict(self, graph) -> torch.Tensor:
        return self(graph).argmax(-1)


class GCNNoSelfLoops(GCN):
    """BUG: the adjacency is normalised without adding the identity: a node's own description never reaches
    its representation, only its neighbours'."""

    self_loops = False


class GCNValidatesOnTrainNodes(GCN):
    """BUG: ``validation_step`` was copied from ``training_step`` and still selects ``batch["train_mask"]``:
    the validation figure is measured on the 120 nodes the model was fitted to."""

    val_mask = "train_mask"


# --- hierarchical topics: fine softmax with consistent coarse probabilities ---------------------------------
class TopicNet(AdamModule):
    """An MLP on log word counts with one softmax over the 20 fine topics; the coarse probabilities are the
    sums of their children's (through the parent map); loss: fine cross-entropy plus coarse negative
    log-likelihood. Served top-down: the most probable coarse topic, then its most probable child. Reads
    (counts, coarse, fine)."""

    parent = data.PARENT

    def __init__(self) -> None:
        super().__init__()
        self.net = mlp(data.VOCAB, 128, data.FINE, dropout=0.2)
        self.register_buffer("children_of", F.one_hot(self.parent, data.COARSE).float())  # (fine, coarse)

    def forward(self, counts: torch.Tensor) -> torch.Tensor:
        return F.log_softmax(self.net(torch.log1p(counts)), -1)

    def loss(self, batch) -> torch.Tensor:
        counts, coarse, fine = batch
        log_fine = self(counts)
        log_coarse = torch.log(log_fine.exp() @ self.children_of + 1e-9)
        return F.nll_loss(log_fine, fine) + F.nll_loss(log_coarse, coarse)

    def predict(self, counts: torch.Tensor) -> torch.Tensor:
        fine = self(counts).exp()
        coarse = (fine @ self.children_of).argmax(-1)
        return (fine * self.children_of[:, coarse].T).argmax(-1)


class TopicNetSortedParents(TopicNet):
    """BUG: the parent map was built from the topic names sorted alphabetically (fine id f -> coarse f % 5)
    while the label ids follow the taxonomy's order (f -> f // 4): the coarse term rewards the wrong
    children, and top-down serving picks a child among the wrong siblings."""

    parent = data.SORTED_NAMES_PARENT


# --- tabular regression with categorical embeddings ---------------------------------------------------------
class TabularNet(AdamModule):
    """An embedding per categorical column (8 wide) concatenated with the numeric columns, then an MLP;
    mean squared error on the log price. Reads (categories, numbers, row id, log price); the row id is carried
    for joining predictions back and not used. Served: the log price."""

    def __init__(self) -> None:
        super().__init__()
        self.embeddings = nn.ModuleList(nn.Embedding(k, 8) for k in data.CARDINALITY)
        self.net = mlp(8 * len(data.CARDINALITY) + data.NUMERIC, 64, 64, 1)

    def forward(self, cats: torch.Tensor, num: torch.Tensor) -> torch.Tensor:
        parts = [table(cats[:, j]) for j, table in enumerate(self.embeddings)]
        return self.net(torch.cat([*parts, num], 1))[:, 0]

    def loss(self, batch) -> torch.Tensor:
        cats, num, _, price = batch
        return F.mse_loss(self(cats, num), price)

    def predict(self, cats: torch.Tensor, num: torch.Tensor) -> torch.Tensor:
        return self(cats, num)


class TabularNetPlateauPerStep(TabularNet):
    """BUG: ``ReduceLROnPlateau(patience=2, factor=0.5)`` is returned with ``"interval": "step"`` and
    monitors the per-step ``train_loss``: a noisy batch loss 'plateaus' every few steps, and the rate halves
    towards 0 within the first epoch."""

    def configure_optimizers(self):
        optimizer = torch.optim.Adam(self.parameters(), lr=self.lr)
        plateau = torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer, factor=0.5, patience=2)
        scheduler = {"scheduler": plateau, "interval": "step", "monitor": "train_loss"}
        return {"optimizer": optimizer, "lr_scheduler": scheduler}


# --- multiple-instance learning: gated attention over a bag -------------------------------------------------
class AttentionMIL(AdamModule):
    """Instances encoded by an MLP, pooled by attention (a softmax over the bag's real instances; padding
    masked out), then a bag classifier; binary cross-entropy on the bag label. The instances' own labels come
    with the batch and are not used. Served: the bag's probability."""

    def __init__(self) -> None:
        super().__init__()
        self.encoder = mlp(data.INSTANCE, 32, 32)
        self.attention = mlp(32, 16, 1)
        self.head = nn.Linear(32, 1)

    pool_dim = -1

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        h = F.relu(self.encoder(x))
        weight = self.attention(h)[..., 0].masked_fill(~mask, -1e9).softmax(self.pool_dim)
        return self.head((weight[..., None] * h).sum(1))[:, 0]

    def loss(self, batch) -> torch.Tensor:
        x, mask, label, _ = batch
        return F.binary_cross_entropy_with_logits(self(x, mask), label)

    def predict(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(self(x, mask))


class AttentionMILSoftmaxOverBatch(AttentionMIL):
    """BUG: the attention is normalised with ``softmax(0)``: over the bags of the batch at each instance slot
    instead of over the instances of each bag. Training batches of 64 look fine; a bag's representation
    depends on the other bags of its batch, and served in other batch sizes its scale is wrong."""

    pool_dim = 0
