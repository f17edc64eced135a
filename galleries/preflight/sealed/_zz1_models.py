"""Sealed gallery ZZ1's models (half ``zz1``): each correct model (a healthy twin) and, next to it, the buggy
variant a user wrote (a subclass that changes the one place the bug lives in). Every model is built from the
global RNG; ``predict`` is what a served model answers and ``loss(batch)`` what it trains on."""

from __future__ import annotations

import lightning.pytorch as pl
import torch
import torch.nn.functional as F
from torch import nn

from galleries.preflight.sealed import _zz1_data as data
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


# --- learning to rank (query groups, NDCG) ------------------------------------------------------------------
class Ranker(_Adam):
    """An MLP that scores each document of a query on its own; the ListNet loss: the cross-entropy between
    the softmax of the grades and the softmax of the scores over each query's real documents (padding
    masked out of both). Served: each query's document indices, best first (padding last)."""

    def __init__(self) -> None:
        super().__init__()
        self.net = mlp(data.FEATS, 64, 64, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)[..., 0]

    def loss(self, batch) -> torch.Tensor:
        x, grade, mask = batch
        scores = self(x).masked_fill(~mask, -1e4)
        target = grade.float().masked_fill(~mask, -1e4).softmax(-1)
        return -(target * scores.log_softmax(-1)).sum(-1).mean()

    def order(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return self(x).masked_fill(~mask, -torch.inf).argsort(-1, descending=True)

    def predict(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return self.order(x, mask)


class RankerServesRanks(Ranker):
    """BUG: ``predict`` applies argsort twice (``order.argsort(-1)``), which gives each document's rank
    position, while its callers read the answer as document indices in ranked order: the served list is the
    inverse permutation of the right one."""

    def predict(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return self.order(x, mask).argsort(-1)


def _pairs(scores: torch.Tensor, grade: torch.Tensor, mask: torch.Tensor):
    """The pairwise logistic loss of every pair (i above j: grade_i > grade_j, both real documents) and the
    pairs' |delta NDCG| weights (LambdaRank: the change in NDCG if i and j swapped places in the current
    ranking), computed without gradient."""
    better = (grade[:, :, None] > grade[:, None, :]) & mask[:, :, None] & mask[:, None, :]
    with torch.no_grad():
        rank = scores.masked_fill(~mask, -torch.inf).argsort(-1, descending=True).argsort(-1)
        discount = 1 / torch.log2(rank.float() + 2)
        gain = 2.0 ** grade.float() - 1
        ideal = (gain.sort(-1, descending=True).values / torch.log2(torch.arange(data.DOCS) + 2.0)).sum(-1)
        swap = (gain[:, :, None] - gain[:, None, :]) * (discount[:, :, None] - discount[:, None, :])
        weight = swap.abs() / ideal.clamp_min(1e-9)[:, None, None]
    logistic = F.softplus(scores[:, None, :] - scores[:, :, None])  # -log sigmoid(s_i - s_j)
    return logistic, weight * better


class LambdaRanker(Ranker):
    """LambdaRank written with manual optimisation: the pairwise logistic loss of each correctly ordered
    pair, weighted by the |delta NDCG| of swapping the pair in the model's own current ranking (computed
    without gradient), summed per query; the optimizer is zeroed, the loss back-propagated and stepped by
    hand."""

    def __init__(self) -> None:
        super().__init__()
        self.automatic_optimization = False

    def loss(self, batch) -> torch.Tensor:
        x, grade, mask = batch
        logistic, weight = _pairs(self(x), grade, mask)
        return (logistic * weight).sum((1, 2)).mean()

    def zero(self, optimizer) -> None:
        optimizer.zero_grad()

    def training_step(self, batch, batch_idx):
        optimizer = self.optimizers()
        self.zero(optimizer)
        loss = self.loss(batch)
        self.manual_backward(loss)
        optimizer.step()
        self.log("train_loss", loss)
        return loss.detach()


class LambdaRankerNoZeroGrad(LambdaRanker):
    """BUG: the hand-written step never calls ``optimizer.zero_grad()``: each step's gradient is the sum of
    every gradient so far, and the updates keep pushing where the first batches pointed."""

    def zero(self, optimizer) -> None:
        pass


# --- graph node classification (a dense two-layer GCN) ------------------------------------------------------
def gcn_norm(adj: torch.Tensor) -> torch.Tensor:
    """D^-1/2 (A + I) D^-1/2 of a batch of dense adjacency matrices."""
    adj = adj + torch.eye(adj.shape[-1])
    d = adj.sum(-1).clamp_min(1).rsqrt()
    return d[..., :, None] * adj * d[..., None, :]


class NodeGCN(_Adam):
    """Two graph convolutions (hidden 32, ReLU, dropout 0.2), each the normalised adjacency with self-loops
    times the projected features plus a root weight on the node's own features; cross-entropy over the
    labelled nodes only. Served: each node's class."""

    def __init__(self) -> None:
        super().__init__()
        self.first, self.second = nn.Linear(data.NODE_FEATS, 32), nn.Linear(32, data.CLASSES)
        self.first_root = nn.Linear(data.NODE_FEATS, 32, bias=False)
        self.second_root = nn.Linear(32, data.CLASSES, bias=False)
        self.dropout = nn.Dropout(0.2)

    def forward(self, x: torch.Tensor, adj: torch.Tensor) -> torch.Tensor:
        a = gcn_norm(adj)
        h = self.dropout(F.relu(a @ self.first(x) + self.first_root(x)))
        return a @ self.second(h) + self.second_root(h)

    def loss(self, batch) -> torch.Tensor:
        x, adj, y, known = batch
        return F.cross_entropy(self(x, adj)[known], y[known])

    def predict(self, x: torch.Tensor, adj: torch.Tensor) -> torch.Tensor:
        return self(x, adj).argmax(-1)


class NodeGCNAllNodes(NodeGCN):
    """BUG: the loss is taken over every node (``cross_entropy(logits.flatten(0, 1), y.flatten())``), the
    labelled-node mask left out: the unlabelled nodes, stored with label 0, are taught to be class 0."""

    def loss(self, batch) -> torch.Tensor:
        x, adj, y, _ = batch
        return F.cross_entropy(self(x, adj).flatten(0, 1), y.flatten())


# --- anomaly detection (an autoencoder on healthy readings, scored by its reconstruction error) -------------
class AutoEncoder(_Adam):
    """An MLP autoencoder 24 -> 64 -> 4 -> 64 -> 24 trained on healthy rows (squared error). Served: each
    row's anomaly score, the mean squared error of its reconstruction."""

    def __init__(self) -> None:
        super().__init__()
        self.encoder = mlp(data.SENSORS, 64, data.STATES + 1)
        self.decoder = mlp(data.STATES + 1, 64, data.SENSORS)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.decoder(self.encoder(x))

    def loss(self, batch) -> torch.Tensor:
        x, target = batch
        return F.mse_loss(self(x), target)

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        return (self(x) - x).pow(2).mean(-1)


class AutoEncoderResidual(AutoEncoder):
    """BUG: the decoder's output is added to the input (``x + decoder(encoder(x))``, a skip connection kept
    from a denoising template): the network reconstructs any row, faulty or not, by passing it through."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.decoder(self.encoder(x))


class AutoEncoderSignedScore(AutoEncoder):
    """BUG: the served score is the mean of the signed residual (``(x - x_hat).mean(-1)``), the square left
    out: errors of opposite signs across the sensors cancel, and faulty rows no longer score above healthy
    ones."""

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        return (x - self(x)).mean(-1)


class AutoEncoderRowScaled(AutoEncoder):
    """BUG: each row is standardised on its own (its mean and spread over the 24 sensors, a per-sample
    normalisation copied from an image pipeline) before it is encoded, and scored in those units: a row
    whose sensor gains all drifted together is rescaled back onto the healthy ones."""

    @staticmethod
    def standardise(x: torch.Tensor) -> torch.Tensor:
        return (x - x.mean(-1, keepdim=True)) / x.std(-1, keepdim=True)

    def loss(self, batch) -> torch.Tensor:
        x, target = batch
        return F.mse_loss(self(self.standardise(x)), self.standardise(target))

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        z = self.standardise(x)
        return (self(z) - z).pow(2).mean(-1)


# --- image super-resolution (2x) ----------------------------------------------------------------------------
class SuperRes(_Adam):
    """A small CNN on the low-resolution image whose 4 output channels are rearranged by pixel shuffle into
    the 2x image's detail, added to the bilinear upsampling of the input; squared error. Served: the 2x
    image."""

    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(1, 32, 3, padding=1),
            nn.ReLU(),
            nn.Conv2d(32, 32, 3, padding=1),
            nn.ReLU(),
            nn.Conv2d(32, 4, 3, padding=1),
        )

    def rearrange(self, detail: torch.Tensor) -> torch.Tensor:
        return F.pixel_shuffle(detail, 2)

    def forward(self, low: torch.Tensor) -> torch.Tensor:
        base = F.interpolate(low, scale_factor=2, mode="bilinear", align_corners=False)
        return base + self.rearrange(self.body(low))

    def loss(self, batch) -> torch.Tensor:
        low, high = batch
        return F.mse_loss(self(low), high)

    def predict(self, low: torch.Tensor) -> torch.Tensor:
        return self(low)


class SuperResViewed(SuperRes):
    """BUG: the 4-channel output is reshaped with ``.view(n, 1, 2h, 2w)`` instead of ``pixel_shuffle``:
    the channels are laid out as bands of rows, not interleaved, and each output pixel's detail comes from
    another part of the image."""

    def rearrange(self, detail: torch.Tensor) -> torch.Tensor:
        n, _, h, w = detail.shape
        return detail.view(n, 1, 2 * h, 2 * w)


class SuperResConsistent(SuperRes):
    """The same network with a second, back-projection term in its loss: the output, averaged back over 2 x 2
    blocks, is compared with the input itself (which is the target's 2 x 2 average: the term agrees with the
    first at the optimum)."""

    def loss(self, batch) -> torch.Tensor:
        low, high = batch
        out = self(low)
        return F.mse_loss(out, high) + F.mse_loss(data.downsample(out), low)


# --- single-object localisation (class and box) -------------------------------------------------------------
class Localiser(_Adam):
    """A CNN (two poolings) whose features are max-pooled over the canvas for the class logits and flattened
    (the box needs the positions) for the box (sigmoid: corners over the canvas's width and height);
    cross-entropy plus 5 x the L1 error of the box (the target is the first box of the row's list). Served:
    the class and the box in pixels."""

    classes = data.KINDS

    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(32, 32, 3, padding=1),
            nn.ReLU(),
        )
        self.classify = nn.Linear(32, self.classes)
        self.locate = mlp(32 * (data.H // 4) * (data.W // 4), 64, 4)

    def forward(self, image: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.features(image)
        return self.classify(h.amax((-2, -1))), torch.sigmoid(self.locate(h.flatten(1)))

    def box_loss(self, box: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return (box - target[:, 0]).abs().sum(-1).mean()

    def loss(self, batch) -> torch.Tensor:
        image, kind, target = batch
        logits, box = self(image)
        return F.cross_entropy(logits, kind) + 5 * self.box_loss(box, target)

    def scale(self) -> torch.Tensor:
        return data.SCALE

    def predict(self, image: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        logits, box = self(image)
        return logits.argmax(-1), box * self.scale()


class LocaliserBoxListBroadcast(Localiser):
    """BUG: the box error is taken against the list of one box as stored (``box - target``, (n, 4) against
    (n, 1, 4)): it broadcasts to every pair of rows in the batch, and each box is fitted to the batch's
    boxes on average."""

    def box_loss(self, box: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return (box - target).abs().sum(-1).mean()


class LocaliserScaledHW(Localiser):
    """BUG: the served box is scaled back to pixels with (height, width, height, width), the image-shape
    order, not (width, height, width, height): on the 24 x 32 canvas every served box is squeezed across and
    stretched down."""

    def scale(self) -> torch.Tensor:
        return torch.tensor([data.H, data.W, data.H, data.W]).float()


class LocaliserWithNothing(Localiser):
    """A fourth class, "nothing", for canvases without a shape; the box error is masked out of the loss on
    those canvases (their box (0, 0, 0, 0) is a placeholder)."""

    classes = data.KINDS + 1

    def loss(self, batch) -> torch.Tensor:
        image, kind, target = batch
        logits, box = self(image)
        has = (kind < data.KINDS).float()
        error = (box - target[:, 0]).abs().sum(-1)
        return F.cross_entropy(logits, kind) + 5 * (error * has).sum() / has.sum().clamp_min(1)


class LocaliserGIoU(Localiser):
    """The box trained with the generalised IoU loss (1 - GIoU) instead of L1, plus cross-entropy; the box
    head's four outputs are read as centre and size (a box that cannot be inverted, as GIoU needs)."""

    def forward(self, image: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        logits, out = super().forward(image)
        centre, size = out[:, :2], out[:, 2:]
        return logits, torch.cat([centre - size / 2, centre + size / 2], -1)

    def box_loss(self, box: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        target = target[:, 0]
        low, high = torch.maximum(box[:, :2], target[:, :2]), torch.minimum(box[:, 2:], target[:, 2:])
        inter = (high - low).clamp_min(0).prod(-1)
        union = (box[:, 2:] - box[:, :2]).prod(-1) + (target[:, 2:] - target[:, :2]).prod(-1) - inter
        hull = (torch.maximum(box[:, 2:], target[:, 2:]) - torch.minimum(box[:, :2], target[:, :2])).prod(-1)
        giou = inter / union.clamp_min(1e-9) - (hull - union) / hull.clamp_min(1e-9)
        return (1 - giou).mean()
