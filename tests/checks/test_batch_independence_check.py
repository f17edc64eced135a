"""``BatchIndependenceCheck``: a ``forward`` needing more than the input, what skips, the permutation test."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch import Tensor, nn
from torch.nn import functional as F
from torch.utils.data import DataLoader

from galleries.preflight.families import _shapes_models as S
from lightning_recipes.checks import BatchIndependenceCheck, CheckContext, preflight

from . import _models as M


class NeedsMask(M.MLP):
    """forward takes the input and a mask: ``model(inputs)`` alone cannot run."""

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:  # type: ignore[override]
        return self.net(x * mask)

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        x, y = batch
        return self.loss(self(x, (x != 0).float()), y)


class NeedsFullBatch(NeedsMask):
    """forward needs a mask and training_step runs only on the loader's full batch: nothing is observable."""

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        x, y = batch
        if len(x) != 32:
            raise RuntimeError("this step only runs on batches of 32")
        return self.loss(self(x, (x != 0).float()), y)


def test_forward_that_needs_a_mask_is_observed_through_training_step():
    result = BatchIndependenceCheck().run(CheckContext(NeedsMask(), M.loader()))
    assert result.status == "pass", result.message
    assert result.details["output_route"] == "training_step"
    assert result.details["permutation"]["output"]["status"] == "pass"


def test_forward_and_step_that_cannot_run_on_a_slice_skip_with_what_to_pass():
    result = BatchIndependenceCheck().run(CheckContext(NeedsFullBatch(), M.loader()))
    assert result.status == "skip"
    assert "pass `input_key=`" in result.message and "TypeError" in result.message


def test_the_advice_names_a_given_input_key_and_other_checks_still_run():
    report = preflight(
        NeedsFullBatch(),
        train_dataloaders=M.loader(),
        checks=["init_loss", "batch_independence"],
        input_key=0,
    )
    assert report["init_loss"].status == "pass"
    assert report["batch_independence"].status == "skip"


# ------------------------------------------------------------------------------- permutation equivariance
class SlotBias(M.MLP):
    """Bug: a learned bias per batch slot (``self.slot[: len(x)]``): each output depends on its own sample
    only, but also on where it sits in the batch."""

    def __init__(self, slot_bias: bool = True) -> None:
        super().__init__()
        self.slot_bias = slot_bias
        self.slot = nn.Parameter(torch.randn(64, M.C))
        self.bias = nn.Parameter(torch.randn(M.C))  # the healthy twin's bias: the same for every slot

    def forward(self, x: Tensor) -> Tensor:
        out = self.net(x)
        return out + (self.slot[: len(x)] if self.slot_bias else self.bias)


class BatchAxisPositions(M.MLP):
    """A token model whose positional table is indexed along the batch axis (``arange(ids.shape[0])``, a
    batch_first mismatch): same shapes, slot-dependent outputs. ``bug=False``: ``arange(ids.shape[1])``."""

    def __init__(self, bug: bool = True) -> None:
        super().__init__()
        self.bug = bug
        self.embed = nn.Embedding(S.VOCAB, 16)
        self.pos = nn.Embedding(64, 16)
        self.head = nn.Linear(16, S.VOCAB)

    def forward(self, ids: Tensor) -> Tensor:
        axis = 0 if self.bug else 1
        positions = self.pos(torch.arange(ids.shape[axis], device=ids.device))
        h = self.embed(ids) + (positions[:, None, :] if self.bug else positions[None])
        return self.head(torch.tanh(h))

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        ids = batch[0]
        logits = self(ids[:, :-1])
        return F.cross_entropy(logits.reshape(-1, S.VOCAB), ids[:, 1:].reshape(-1))


def _tokens() -> DataLoader:
    ids = S.recurrence_tokens(64)
    return DataLoader(torch.utils.data.TensorDataset(ids), batch_size=16)


class DropoutBatchNorm(M.MLP):
    """Healthy: dropout and BatchNorm (eval: running statistics) are permutation equivariant."""

    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(M.IN, 32), nn.BatchNorm1d(32), nn.ReLU(), nn.Dropout(0.5), nn.Linear(32, M.C)
        )


class MaskedDictModel(M.MLP):
    """Dict batches ``{"input_ids", "attention_mask", "labels"}``; a masked mean of embeddings.
    ``slot_bias=True`` adds a per-slot bias (the bug); the batch is permuted consistently across its keys."""

    def __init__(self, slot_bias: bool = False) -> None:
        super().__init__()
        self.slot_bias = slot_bias
        self.embed = nn.Embedding(S.VOCAB, 16)
        self.head = nn.Linear(16, 2)
        self.slot = nn.Parameter(torch.randn(64, 2))

    def forward(self, ids: Tensor, mask: Tensor) -> Tensor:  # type: ignore[override]
        m = mask.unsqueeze(-1).float()
        out = self.head((self.embed(ids) * m).sum(1) / m.sum(1).clamp_min(1))
        return out + self.slot[: len(ids)] if self.slot_bias else out

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        return F.cross_entropy(self(batch["input_ids"], batch["attention_mask"]), batch["labels"])


def _dict_batches() -> DataLoader:
    columns = S.classification_tokens(64, 0)
    lengths = torch.randint(4, S.SEQ + 1, (64,), generator=torch.Generator().manual_seed(0))
    keep = torch.arange(S.SEQ)[None] < lengths[:, None]
    columns["attention_mask"] = keep.long()
    columns["input_ids"] = columns["input_ids"] * keep
    del columns["token_type_ids"]
    return DataLoader(S.DictDataset(**columns), batch_size=16)


@pytest.mark.parametrize(
    ("make", "data", "status"),
    [
        (lambda: SlotBias(slot_bias=True), M.loader, "fail"),
        (lambda: SlotBias(slot_bias=False), M.loader, "pass"),
        (lambda: BatchAxisPositions(bug=True), _tokens, "fail"),
        (lambda: BatchAxisPositions(bug=False), _tokens, "pass"),
        (lambda: MaskedDictModel(slot_bias=True), _dict_batches, "fail"),
        (lambda: MaskedDictModel(slot_bias=False), _dict_batches, "pass"),
        (DropoutBatchNorm, M.loader, "pass"),
    ],
    ids=[
        "slot-bias",
        "shared-bias",
        "positions-on-batch-axis",
        "positions-on-time-axis",
        "dict-slot-bias",
        "dict-masked-mean",
        "dropout-batchnorm",
    ],
)
def test_permutation_equivariance_in_eval(make: Any, data: Any, status: str) -> None:
    report = preflight(make(), train_dataloaders=data(), checks=[BatchIndependenceCheck()])
    result = report["batch_independence"]
    assert result.status == status, result.message
    permutation = result.details["permutation"]
    if status == "fail":
        assert len(result.summary) <= 120 and result.action
        assert permutation["output"]["deviation"] > 10 * permutation["output"]["tolerance"]
    else:
        assert permutation["output"]["deviation"] <= permutation["output"]["tolerance"]


def test_hugging_face_bert_with_attention_mask_is_permutation_equivariant() -> None:
    pytest.importorskip("transformers")
    data = S.token_classification_loaders()
    result = preflight(S.HFClassifier(), **data, checks=[BatchIndependenceCheck()])["batch_independence"]
    assert result.status == "pass", result.message
    assert result.details["permutation"]["output"]["status"] == "pass"


class LengthsGRU(M.MLP):
    """``forward(x, lengths)`` with a packed GRU on ``(x, lengths, y)`` batches; ``slot_bias=True`` adds a
    per-slot bias (the bug). Observed through training_step, permuted with its lengths."""

    def __init__(self, slot_bias: bool = False) -> None:
        super().__init__()
        self.slot_bias = slot_bias
        self.rnn = nn.GRU(4, 16, batch_first=True)
        self.head = nn.Linear(16, 3)
        self.slot = nn.Parameter(torch.randn(64, 3))

    def forward(self, x: Tensor, lengths: Tensor) -> Tensor:  # type: ignore[override]
        packed = nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
        _, h = self.rnn(packed)
        out = self.head(h[-1])
        return out + self.slot[: len(x)] if self.slot_bias else out

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        x, lengths, y = batch
        return F.cross_entropy(self(x, lengths), y)


def _lengths_batches() -> DataLoader:
    g = torch.Generator().manual_seed(0)
    lengths = torch.randint(2, 9, (64,), generator=g)
    x = torch.randn(64, 8, 4, generator=g) * (torch.arange(8)[None] < lengths[:, None]).unsqueeze(-1)
    return DataLoader(torch.utils.data.TensorDataset(x, lengths, torch.randint(0, 3, (64,), generator=g)), 16)


@pytest.mark.parametrize(
    ("slot_bias", "status"), [(False, "pass"), (True, "fail")], ids=["healthy", "slot-bias"]
)
def test_forward_x_lengths_is_permuted_with_its_lengths(slot_bias: bool, status: str) -> None:
    report = preflight(
        LengthsGRU(slot_bias), train_dataloaders=_lengths_batches(), checks=["batch_independence"]
    )
    result = report["batch_independence"]
    assert result.status == status, result.message
    assert result.details["output_route"] == "training_step"
    assert result.details["permutation"]["output"]["status"] == status


class TinySlotEffect(M.MLP):
    """Outputs of scale exactly 1 plus a slot effect of 3 x 64 float32 ulps at most (``slot * 3.3e-6``): above
    the dtype bound, below ten times it, so the permutation test cannot call it either way."""

    def forward(self, x: Tensor) -> Tensor:
        out = x[:, : M.C] / x[:, : M.C].abs().amax(dim=1, keepdim=True)
        slot = torch.arange(len(x), dtype=x.dtype, device=x.device)[:, None]
        return out + slot * 3.3e-6 + 0 * self.net(x)


def test_a_slot_effect_within_ten_times_the_float_bound_is_inconclusive() -> None:
    result = BatchIndependenceCheck().run(CheckContext(TinySlotEffect(), M.loader()))
    assert result.status == "inconclusive", result.message
    output = result.details["permutation"]["output"]
    assert output["tolerance"] < output["deviation"] <= 10 * output["tolerance"]
    assert len(result.summary) <= 120


class SortedLengthsGRU(LengthsGRU):
    """Needs its batch sorted by decreasing length (``enforce_sorted=True``): a reordered batch raises, which
    is the step's contract, not a bug. The permutation test says it could not run; the verdict stays."""

    def forward(self, x: Tensor, lengths: Tensor) -> Tensor:  # type: ignore[override]
        packed = nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=True)
        _, h = self.rnn(packed)
        return self.head(h[-1])


def test_a_step_that_needs_its_order_keeps_the_independence_verdict() -> None:
    x, lengths, y = next(iter(_lengths_batches()))
    order = lengths.argsort(descending=True)
    data = DataLoader([(x[order], lengths[order], y[order])], batch_size=None)
    result = BatchIndependenceCheck().run(CheckContext(SortedLengthsGRU(), data))
    assert result.status == "pass", result.message
    assert result.details["permutation"]["status"] == "not run"
    assert "RuntimeError" in result.details["permutation"]["why"]


class TargetScaling(M.MLP):
    """A regressor of a target in raw units scaled in the step: with the training set's ``"fixed"`` range,
    with each batch's own ``"batch"`` min and max (the BUG: sealed gallery C), or ``"mixup"`` (each row's
    target blended with one partner's: a healthy look-alike)."""

    def __init__(self, scaling: str) -> None:
        super().__init__(classes=1)
        self.scaling = scaling

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        x, y = batch
        if self.scaling == "batch":
            target = (y - y.min()) / (y.max() - y.min())
        elif self.scaling == "mixup":
            partner = torch.randperm(len(y))
            x, target = 0.7 * x + 0.3 * x[partner], (0.7 * y + 0.3 * y[partner]) / 100
        else:
            target = (y - 50.0) / 100.0
        return F.mse_loss(self(x).squeeze(-1), target)


@pytest.mark.parametrize(("scaling", "status"), [("batch", "fail"), ("fixed", "pass"), ("mixup", "pass")])
def test_a_target_scaled_with_each_batchs_statistics_fails(scaling: str, status: str) -> None:
    """Moving one sample's target far moves every other sample's scaled target only under batch statistics."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(256, M.IN, generator=g)
    data = M.loader_from(x, 50 + 100 * torch.rand(256, generator=g) + x[:, 0])
    result = BatchIndependenceCheck().run(CheckContext(TargetScaling(scaling), data))
    assert result.status == status, result.message
    if status == "fail":
        assert result.details["method"] == "target perturbation" and result.details["entry"] == 1
        assert result.details["rows_moved"] >= 6 and len(result.summary) <= 120
        assert "Scale targets with statistics of the training set" in result.action


class LossPath(M.MLP):
    """A classifier whose forward is per sample; between the output and the loss: ``"batch"`` a log-softmax
    over dim 0 (the BUG: sealed gallery R's unmixer), ``"classes"`` over the classes, ``"shift"`` the whole
    batch's largest logit taken off (every row moves the same: cross-entropy does not change), ``"pairs"``
    an (N, N) similarity matrix scored by cross-entropy (contrastive: pairwise by design)."""

    def __init__(self, path: str) -> None:
        super().__init__()
        self.path = path

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        x, y = batch
        out = self(x)
        if self.path == "pairs":
            embedding = F.normalize(out, dim=-1)
            return F.cross_entropy(embedding @ embedding.T / 0.1, torch.arange(len(x)))
        if self.path == "shift":
            return F.cross_entropy(out - out.max(), y)
        return F.nll_loss(out.log_softmax(0 if self.path == "batch" else -1), y)


@pytest.mark.parametrize(
    ("path", "shuffle", "status"),
    [
        ("batch", True, "fail"),
        ("batch", False, "inconclusive"),  # rows in order: a batch may be one list (listwise ranking)
        ("classes", True, "pass"),
        ("shift", True, "pass"),
        ("pairs", True, "pass"),
    ],
)
def test_a_loss_that_mixes_samples_after_the_output_is_caught(path: str, shuffle: bool, status: str) -> None:
    """Each sample's loss, recomputed unreduced, depends on that sample only: moving sample 0's input moves
    every other sample's loss only where the batch is mixed between the output and the loss."""
    result = BatchIndependenceCheck().run(CheckContext(LossPath(path), M.loader(shuffle=shuffle)))
    assert result.status == status, result.message
    if status != "pass":
        assert result.details["function"] == "nll_loss" and result.details["rows_moved"] == 7
        assert len(result.summary) <= 120 and "softmax or normalisation over dim 0" in result.action


class NeighbourContext(M.MLP):
    """Each row also reads the row before it (its context in a sequence served in order: a night of sleep
    epochs): legitimate for a loader that serves rows in order, a leak across samples for a shuffled one."""

    def forward(self, x: Tensor) -> Tensor:
        return self.net(x + 0.5 * torch.cat([x[:1], x[:-1]]))


@pytest.mark.parametrize(("shuffle", "status"), [(True, "fail"), (False, "inconclusive")])
def test_rows_that_read_their_neighbours_are_judged_only_when_the_loader_shuffles(shuffle, status) -> None:
    result = BatchIndependenceCheck().run(CheckContext(NeighbourContext(), M.loader(shuffle=shuffle)))
    assert result.status == status, result.message
    assert len(result.summary) <= 120 and "reshape/view over the batch axis" in result.action


class NodeRegressor(M.AdamModule):
    """Graphs batched as an edge list: node features (nodes, F), ``edges`` (2, E) indexing them, one target
    per node; each node reads its neighbours by design."""

    def __init__(self) -> None:
        super().__init__()
        self.own, self.neighbours = nn.Linear(M.IN, 1), nn.Linear(M.IN, 1)

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        nodes, edges, target = batch
        summed = torch.zeros_like(nodes).index_add_(0, edges[1], nodes[edges[0]])
        return F.mse_loss((self.own(nodes) + self.neighbours(summed)).squeeze(-1), target)


def test_an_edge_list_batch_is_neither_cut_nor_judged_by_row() -> None:
    g = torch.Generator().manual_seed(0)
    nodes, edges = torch.randn(96, M.IN, generator=g), torch.randint(0, 96, (2, 300), generator=g)
    graphs = (nodes, edges, nodes[:, 0] + 0.1 * torch.randn(96, generator=g))
    loader = DataLoader(range(4), batch_size=2, collate_fn=lambda _: graphs)  # a collate of whole graphs
    result = BatchIndependenceCheck(num_samples=8).run(CheckContext(NodeRegressor(), loader))
    assert result.status == "skip" and "not one row per sample" in result.summary, result.message


class BagAttention(M.AdamModule):
    """Attention pooling over a bag's instances, padded ones masked out; the batch is ``((bags, mask), y)``,
    an input of two tensors. ``over_batch``: the softmax runs over dim 0, the bags (single-bag code)."""

    def __init__(self, over_batch: bool) -> None:
        super().__init__()
        self.score, self.head, self.dim = nn.Linear(M.IN, 1), nn.Linear(M.IN, M.C), 0 if over_batch else 1

    def forward(self, x: tuple[Tensor, Tensor]) -> Tensor:
        bags, mask = x
        weights = torch.softmax(self.score(bags)[..., 0].masked_fill(~mask, float("-inf")), dim=self.dim)
        return self.head((weights[..., None] * bags).sum(1))

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        x, y = batch
        return F.cross_entropy(self(x), y)


def _bags() -> DataLoader:
    g = torch.Generator().manual_seed(0)
    bags, sizes = torch.randn(64, 6, M.IN, generator=g), torch.randint(1, 7, (64,), generator=g)
    sizes[::8] = 6  # every batch of 8 holds a full bag: no padded slot is masked in all of them
    mask = torch.arange(6)[None] < sizes[:, None]
    rows = [((bags[i], mask[i]), int(bags[i, 0, 0] > 0)) for i in range(64)]
    return DataLoader(rows, batch_size=8, shuffle=True, generator=torch.Generator().manual_seed(0))


@pytest.mark.parametrize(("over_batch", "status"), [(False, "pass"), (True, "fail")])
def test_an_input_of_several_tensors_is_judged_by_moving_whole_rows(over_batch: bool, status: str) -> None:
    result = BatchIndependenceCheck().run(CheckContext(BagAttention(over_batch), _bags()))
    assert result.status == status, result.message
    assert result.details["samples"] == 8  # the whole batch: its padding is sized to its longest bag
