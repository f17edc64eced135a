"""Zoo 16's networks and trainers (plain torch and Lightning): a two-layer graph convolutional network over a
dense normalised adjacency, a per-document scorer for listwise learning to rank, a tabular regression MLP, and
the :class:`Task` that trains each of them (its loss, its optimizer and its optional per-step schedule)."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import lightning.pytorch as pl
import torch
import torch.nn.functional as F
from torch import Tensor, nn

__all__ = ["GCN", "MLP", "GraphTask", "RankTask", "RegressionTask", "Scorer", "Task"]

MakeOptimizer = Callable[[Any], torch.optim.Optimizer]
MakeSchedule = Callable[[torch.optim.Optimizer], Any]
ParamGroups = Callable[[nn.Module], Any]


class MLP(nn.Sequential):
    """``Linear`` layers of the given widths with ``activation`` (a module class) between them."""

    def __init__(self, widths: list[int], activation: type[nn.Module] = nn.ReLU) -> None:
        layers: list[nn.Module] = []
        for i, (a, b) in enumerate(itertools.pairwise(widths)):
            layers.append(nn.Linear(a, b))
            if i < len(widths) - 2:
                layers.append(activation())
        super().__init__(*layers)


class GCN(nn.Module):
    """Kipf and Welling (2017): ``A relu(A X W1) W2`` over a dense normalised adjacency ``A``; ``dropout``
    on the hidden layer (0: none)."""

    def __init__(self, features: int, hidden: int, classes: int, dropout: float = 0.0) -> None:
        super().__init__()
        self.conv1 = nn.Linear(features, hidden)
        self.out = nn.Linear(hidden, classes)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor, adjacency: Tensor) -> Tensor:
        h = torch.relu(adjacency @ self.conv1(x))
        return adjacency @ self.out(self.dropout(h))


class Scorer(nn.Module):
    """A per-document relevance scorer for ranking: an ``encoder`` layer, ``depth`` hidden layers and a
    linear ``out`` layer, ``activation`` between them; ``(queries, documents, features) -> (queries,
    documents)``."""

    def __init__(self, features: int, width: int = 64, depth: int = 1,
                 activation: type[nn.Module] = nn.ReLU) -> None:  # fmt: skip
        super().__init__()
        self.encoder = nn.Linear(features, width)
        self.hidden = nn.ModuleList(nn.Linear(width, width) for _ in range(depth))
        self.out = nn.Linear(width, 1)
        self.act = activation()

    def forward(self, x: Tensor) -> Tensor:
        h = self.act(self.encoder(x))
        for layer in self.hidden:
            h = self.act(layer(h))
        return self.out(h).squeeze(-1)


class Task(pl.LightningModule):
    """Trains ``net`` on :meth:`loss_of` (a subclass's), logs ``val_loss`` on validation; ``make_optimizer``
    gets ``self.parameters()`` (or ``param_groups(net)`` when given), ``make_schedule`` the optimizer for an
    optional scheduler stepped every optimizer step."""

    def __init__(
        self,
        net: nn.Module,
        make_optimizer: MakeOptimizer,
        make_schedule: MakeSchedule | None = None,
        param_groups: ParamGroups | None = None,
    ) -> None:
        super().__init__()
        self.net = net
        self.make_optimizer, self.make_schedule = make_optimizer, make_schedule
        self.param_groups = param_groups

    def loss_of(self, batch: Any) -> Tensor:
        raise NotImplementedError

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        return self.loss_of(batch)

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        self.log("val_loss", self.loss_of(batch), prog_bar=False)

    def configure_optimizers(self) -> Any:
        params = self.param_groups(self.net) if self.param_groups is not None else self.parameters()
        optimizer = self.make_optimizer(params)
        if self.make_schedule is None:
            return optimizer
        schedule = {"scheduler": self.make_schedule(optimizer), "interval": "step"}
        return {"optimizer": optimizer, "lr_scheduler": schedule}


class RegressionTask(Task):
    """Mean squared error of ``net(x)`` against ``y``, as the batch holds them (the shapes as given)."""

    def loss_of(self, batch: Any) -> Tensor:
        x, y = batch
        return F.mse_loss(self.net(x), y)


class GraphTask(Task):
    """Full-batch node classification: a batch is the whole graph ``(features, adjacency, labels, mask)``
    (a leading batch axis of 1); the cross-entropy over the nodes of ``mask``."""

    def loss_of(self, batch: Any) -> Tensor:
        x, adjacency, y, mask = (t[0] for t in batch)
        logits = self.net(x, adjacency)
        return F.cross_entropy(logits[mask], y[mask])


class RankTask(Task):
    """Listwise learning to rank (ListNet, Cao et al. 2007): a batch is ``(features, grades)`` of
    ``(queries, documents, ...)``; the cross-entropy of the score softmax against the softmax of the
    relevance grades within each query group, averaged over the queries (``log(documents)`` for equal
    scores)."""

    def loss_of(self, batch: Any) -> Tensor:
        x, grades = batch
        target = torch.softmax(grades, dim=-1)
        return -(target * torch.log_softmax(self.net(x), dim=-1)).sum(-1).mean()
