"""``PaddingCheck``: marked padding changes neither the loss nor the real outputs; each bug has a healthy
twin."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch import Tensor, nn
from torch.nn import functional as F
from torch.nn.utils.rnn import pack_padded_sequence
from torch.utils.data import DataLoader, TensorDataset

from galleries.preflight.families import _shapes_models as S
from lightning_recipes.checks import CheckContext, preflight
from lightning_recipes.checks.model.padding_check import PaddingCheck, find_padding

from . import _models as M

N, T, FEATURES, CLASSES = 64, 10, 6, 3


def _padded_sequences(seed: int = 0) -> tuple[Tensor, Tensor, Tensor]:
    """``x`` [N, T, F] zero past each length, lengths in [3, T - 1] (every row padded), labels."""
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(3, T, (N,), generator=g)
    real = torch.arange(T)[None] < lengths[:, None]
    x = torch.randn(N, T, FEATURES, generator=g) * real.unsqueeze(-1)
    y = (x.sum((1, 2)) > 0).long() + (x[:, 0, 0] > 1).long()
    return x, lengths, y


def mask_loader(style: str = "attention_mask") -> DataLoader:
    """Dict batches ``{"x", <mask>, "y"}``: ``attention_mask`` (1 = keep) or ``padding_mask`` (True = pad)."""
    x, lengths, y = _padded_sequences()
    real = torch.arange(T)[None] < lengths[:, None]
    mask = real.long() if style == "attention_mask" else ~real
    return DataLoader(S.DictDataset(x=x, **{style: mask}, y=y), batch_size=16)


def lengths_loader() -> DataLoader:
    """Tuple batches ``(x, lengths, y)``."""
    return DataLoader(TensorDataset(*_padded_sequences()), batch_size=16)


class MeanPool(M.AdamModule):
    """Pools the time steps of dict batches; ``masked=False`` (the bug) averages the padding in."""

    def __init__(self, masked: bool = True, key: str = "attention_mask") -> None:
        super().__init__()
        self.masked, self.key = masked, key
        self.encode = nn.Sequential(nn.Linear(FEATURES, 32), nn.Tanh(), nn.Dropout(0.3))
        self.head = nn.Linear(32, CLASSES)

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        h = self.encode(x)
        keep = (mask == 0 if self.key == "padding_mask" else mask != 0).unsqueeze(-1).float()
        pooled = (h * keep).sum(1) / keep.sum(1) if self.masked else h.mean(1)
        return self.head(pooled)

    def training_step(self, batch: dict[str, Tensor], batch_idx: int) -> Tensor:
        return F.cross_entropy(self(batch["x"], batch[self.key]), batch["y"])


class GRUClassifier(M.AdamModule):
    """``forward(x, lengths)``; ``packed=False`` (the bug) runs the GRU over the padding and reads ``h_n``."""

    def __init__(self, packed: bool = True) -> None:
        super().__init__()
        self.packed = packed
        self.rnn = nn.GRU(FEATURES, 16, batch_first=True)
        self.head = nn.Linear(16, CLASSES)

    def forward(self, x: Tensor, lengths: Tensor) -> Tensor:
        if self.packed:
            x = pack_padded_sequence(x, lengths.cpu(), batch_first=True, enforce_sorted=False)  # type: ignore[assignment]
        _, h = self.rnn(x)
        return self.head(h[-1])

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        x, lengths, y = batch
        return F.cross_entropy(self(x, lengths), y)


class Encoder(M.AdamModule):
    """A transformer encoder on dict batches with ``padding_mask`` (True = pad), BatchNorm and dropout;
    ``use_mask=False`` (the bug) never gives the mask to attention."""

    def __init__(self, use_mask: bool = True) -> None:
        super().__init__()
        self.use_mask = use_mask
        self.inp = nn.Linear(FEATURES, 16)
        self.norm = nn.BatchNorm1d(16)
        layer = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.2, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 1, enable_nested_tensor=False)
        self.head = nn.Linear(16, CLASSES)

    def forward(self, x: Tensor, padding_mask: Tensor) -> Tensor:
        h = self.norm(self.inp(x).transpose(1, 2)).transpose(1, 2)
        h = self.encoder(h, src_key_padding_mask=padding_mask if self.use_mask else None)
        keep = (~padding_mask).unsqueeze(-1).float()
        return self.head((h * keep).sum(1) / keep.sum(1))

    def training_step(self, batch: dict[str, Tensor], batch_idx: int) -> Tensor:
        return F.cross_entropy(self(batch["x"], batch["padding_mask"]), batch["y"])


class Tagger(M.AdamModule):
    """Sequence labelling: a label per position, -100 at padded positions (``ignore=True``); the bug twin's
    data pads labels with 0 and its loss averages over every position."""

    def __init__(self, ignore: bool = True) -> None:
        super().__init__()
        self.ignore = ignore
        self.net = nn.Sequential(nn.Linear(FEATURES, 16), nn.ReLU(), nn.Linear(16, CLASSES))

    def training_step(self, batch: dict[str, Tensor], batch_idx: int) -> Tensor:
        logits = self.net(batch["x"])
        return F.cross_entropy(
            logits.transpose(1, 2), batch["labels"], ignore_index=-100 if self.ignore else 7
        )


def tagging_loader(pad_label: int) -> DataLoader:
    x, lengths, _ = _padded_sequences()
    real = torch.arange(T)[None] < lengths[:, None]
    labels = torch.where(real, (x[..., 0] > 0).long(), torch.full_like(real, pad_label, dtype=torch.long))
    return DataLoader(S.DictDataset(x=x, attention_mask=real.long(), labels=labels), batch_size=16)


@pytest.mark.parametrize(
    ("make", "data", "status", "kind"),
    [
        (lambda: MeanPool(masked=True), mask_loader, "pass", "mask"),
        (lambda: MeanPool(masked=False), mask_loader, "fail", "mask"),
        (
            lambda: MeanPool(masked=True, key="padding_mask"),
            lambda: mask_loader("padding_mask"),
            "pass",
            "mask",
        ),
        (
            lambda: MeanPool(masked=False, key="padding_mask"),
            lambda: mask_loader("padding_mask"),
            "fail",
            "mask",
        ),
        (lambda: GRUClassifier(packed=True), lengths_loader, "pass", "lengths"),
        (lambda: GRUClassifier(packed=False), lengths_loader, "fail", "lengths"),
        (lambda: Encoder(use_mask=True), lambda: mask_loader("padding_mask"), "pass", "mask"),
        (lambda: Encoder(use_mask=False), lambda: mask_loader("padding_mask"), "fail", "mask"),
        (lambda: Tagger(ignore=True), lambda: tagging_loader(-100), "pass", "mask"),
        (lambda: Tagger(ignore=False), lambda: tagging_loader(0), "fail", "mask"),
        (lambda: LastStep(gather=True), lengths_loader, "pass", "lengths"),
        (lambda: LastStep(gather=False), lengths_loader, "fail", "lengths"),
        (lambda: CausalLM(pool=False), lambda: causal_loader(), "pass", "mask"),
        (lambda: CausalLM(pool=True), lambda: causal_loader(), "fail", "mask"),
    ],
    ids=[
        "masked-mean",
        "mean-over-padding",
        "masked-mean-true-is-pad",
        "mean-over-padding-true-is-pad",
        "packed-gru-lengths",
        "gru-over-padding-lengths",
        "encoder-with-key-padding-mask",
        "encoder-without-mask",
        "tagger-ignore-index",
        "tagger-loss-over-padding",
        "lstm-gather-last-real",
        "lstm-last-padded-step",
        "causal-lm-bool-mask",
        "causal-lm-pools-padding",
    ],
)
def test_padding_is_ignored_or_reported(make: Any, data: Any, status: str, kind: str) -> None:
    torch.manual_seed(0)
    report = preflight(make(), train_dataloaders=data(), val_dataloaders=data(), checks=[PaddingCheck()])
    result = report["padding"]
    assert result.status == status, result.message
    assert result.details["padding"]["kind"] == kind
    quantities = result.details["quantities"]
    if status == "fail":
        assert result.summary.startswith("the model reads padding:") and len(result.summary) <= 120
        assert max(q["deviation"] / q["tolerance"] for q in quantities.values()) > 10
    else:
        assert all(q["deviation"] <= q["tolerance"] for q in quantities.values()), quantities


def test_the_mask_convention_and_the_fill_values_are_read_from_the_batch() -> None:
    result = PaddingCheck().run(CheckContext(MeanPool(key="padding_mask"), mask_loader("padding_mask")))
    assert "True = padding" in result.details["padding"]["convention"]
    tagged = PaddingCheck().run(CheckContext(Tagger(), tagging_loader(-100)))
    assert tagged.details["padding"]["fill"] == {"x": 0.0, "labels": -100.0}
    assert sorted(tagged.details["quantities"]) == ["loss", "output at real positions"]


def test_find_padding_reads_an_attention_mask() -> None:
    ids = torch.tensor([[5, 6, 0], [7, 0, 0]])
    padding, _ = find_padding({"input_ids": ids, "attention_mask": (ids != 0).long()}, "input_ids", None)
    assert padding is not None  # a mask (1 = keep), whose pad value is 0
    assert (padding.pad_value, padding.sequence_keys, padding.real.sum().item()) == (0.0, ["input_ids"], 3)


def test_batches_without_a_padding_indicator_skip_with_what_to_pass() -> None:
    result = preflight(M.MLP(), train_dataloaders=M.loader(), checks=[PaddingCheck()])["padding"]
    assert result.status == "skip"
    assert "padding_key=" in result.message


# --------------------------------------------------------------------------------------------- Hugging Face
class HFBert(S.HFClassifier):
    """BERT wrapped the usual way; ``drop_mask=True`` (the bug) never passes ``attention_mask``."""

    def __init__(self, drop_mask: bool = False) -> None:
        super().__init__()
        self.drop_mask = drop_mask

    def training_step(self, batch: dict[str, Tensor], batch_idx: int) -> Tensor:
        if self.drop_mask:
            batch = {k: v for k, v in batch.items() if k != "attention_mask"}
        return self.model(**batch).loss


def padded_token_loaders() -> dict[str, DataLoader]:
    """BERT batches with real padding: pad id 0 past random lengths, attention_mask 0 there."""
    columns = S.classification_tokens(64, 0)
    lengths = torch.randint(4, S.SEQ, (64,), generator=torch.Generator().manual_seed(1))
    keep = torch.arange(S.SEQ)[None] < lengths[:, None]
    columns["input_ids"] = columns["input_ids"] * keep
    columns["attention_mask"] = keep.long()
    loader = DataLoader(S.DictDataset(**columns), batch_size=16)
    return {"train_dataloaders": loader, "val_dataloaders": loader}


@pytest.mark.parametrize(("drop_mask", "status"), [(False, "pass"), (True, "fail")], ids=["mask", "no-mask"])
def test_hugging_face_bert_must_get_its_attention_mask(drop_mask: bool, status: str) -> None:
    pytest.importorskip("transformers")
    torch.manual_seed(0)
    result = preflight(HFBert(drop_mask), **padded_token_loaders(), checks=[PaddingCheck()])["padding"]
    assert result.status == status, result.message
    assert result.details["padding"]["key"] == "attention_mask"
    assert result.details["padding"]["fill"]["input_ids"] == 0.0


def test_hugging_face_causal_lm_pads_its_labels_with_ignore_index() -> None:
    pytest.importorskip("transformers")
    result = preflight(S.HFCausalLM(), **S.lm_loaders(), checks=[PaddingCheck()])["padding"]
    assert result.status == "pass", result.message
    assert result.details["padding"]["fill"]["labels"] == -100.0


# ----------------------------------------------------------------------------------- more shapes and twins
class LastStep(M.AdamModule):
    """An LSTM on ``(x, lengths, y)``: ``gather=True`` reads the output at ``lengths - 1``; the bug reads
    ``out[:, -1]``, the last timestep of the padded batch."""

    def __init__(self, gather: bool = True) -> None:
        super().__init__()
        self.gather = gather
        self.rnn = nn.LSTM(FEATURES, 16, batch_first=True)
        self.head = nn.Linear(16, CLASSES)

    def forward(self, x: Tensor, lengths: Tensor) -> Tensor:
        out, _ = self.rnn(x)
        if self.gather:
            last = out[torch.arange(len(x)), lengths - 1]
        else:
            last = out[:, -1]
        return self.head(last)

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        x, lengths, y = batch
        return F.cross_entropy(self(x, lengths), y)


class CausalLM(M.AdamModule):
    """A causal transformer LM on ``(ids, padding_mask, labels)``; ``pool=True`` (the bug) mixes in the
    padding."""

    def __init__(self, pool: bool = False) -> None:
        super().__init__()
        self.pool = pool
        self.embed = nn.Embedding(S.VOCAB, 16)
        self.pos = nn.Embedding(64, 16)
        layer = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.1, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 1, enable_nested_tensor=False)
        self.head = nn.Linear(16, S.VOCAB)

    def forward(self, ids: Tensor, padding_mask: Tensor) -> Tensor:
        h = self.embed(ids) + self.pos(torch.arange(ids.shape[1], device=ids.device))
        causal = nn.Transformer.generate_square_subsequent_mask(ids.shape[1], device=ids.device)
        h = self.encoder(
            h, mask=causal, src_key_padding_mask=padding_mask.float().masked_fill(padding_mask, -1e9)
        )
        if self.pool:
            h = h + h.mean(1, keepdim=True)
        return self.head(h)

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        ids, padding_mask, labels = batch
        logits = self(ids, padding_mask)
        return F.cross_entropy(logits[:, :-1].reshape(-1, S.VOCAB), labels[:, 1:].reshape(-1))


def causal_loader() -> DataLoader:
    ids = S.recurrence_tokens(64)
    lengths = torch.randint(6, S.SEQ + 1, (64,), generator=torch.Generator().manual_seed(2))
    pad = torch.arange(S.SEQ)[None] >= lengths[:, None]
    return DataLoader(TensorDataset(ids.masked_fill(pad, 0), pad, ids.masked_fill(pad, -100)), batch_size=16)


class MaskedTokens(M.AdamModule):
    """Dict batches with a ``mask`` that marks random positions to predict (not padding): no padding check."""

    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Linear(FEATURES, CLASSES)

    def training_step(self, batch: dict[str, Tensor], batch_idx: int) -> Tensor:
        logits = self.net(batch["x"]).mean(1)
        return F.cross_entropy(logits, batch["y"]) * batch["mask"].float().mean()


def test_a_scattered_mask_is_not_read_as_padding() -> None:
    x, _, y = _padded_sequences()
    mask = torch.rand(N, T, generator=torch.Generator().manual_seed(0)) < 0.3
    data = DataLoader(S.DictDataset(x=x, mask=mask.long(), y=y), batch_size=16)
    result = preflight(MaskedTokens(), train_dataloaders=data, checks=[PaddingCheck()])["padding"]
    assert result.status == "skip", result.message
    assert "does not say what is padding" in result.message


class ShortBert(HFBert):
    """BERT whose position table holds exactly ``T`` positions: the batch cannot grow, so the check makes room
    by cutting the batch to ``T - extra`` positions and padding it back to ``T``."""

    def __init__(self, drop_mask: bool = False) -> None:
        super().__init__(drop_mask)
        from transformers import BertConfig, BertForSequenceClassification

        config = BertConfig(
            vocab_size=S.VOCAB,
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=2,
            intermediate_size=64,
            max_position_embeddings=S.SEQ,
            num_labels=2,
            pad_token_id=0,
        )
        self.model = BertForSequenceClassification(config)


@pytest.mark.parametrize(("drop_mask", "status"), [(False, "pass"), (True, "fail")], ids=["mask", "no-mask"])
def test_a_model_at_its_position_limit_is_padded_inside_its_length(drop_mask: bool, status: str) -> None:
    pytest.importorskip("transformers")
    torch.manual_seed(0)
    result = preflight(ShortBert(drop_mask), **padded_token_loaders(), checks=[PaddingCheck()])["padding"]
    assert result.status == status, result.message
    assert result.details["cut_to"] == S.SEQ - 3


def test_labels_copied_from_unpadded_inputs_warn_that_padding_would_be_read() -> None:
    pytest.importorskip("transformers")
    model = S.HFCausalLM(labels_from_inputs=True)  # labels=input_ids: pad tokens would become targets
    result = preflight(model, **S.lm_loaders(labels=False), checks=[PaddingCheck()])["padding"]
    assert result.status == "warn", result.message
    assert result.details["latent"] is True and "hold none yet" in result.summary
    assert "ignore_index=-100" in result.action


def test_lengths_with_the_pad_value_on_the_left_must_be_read_from_the_left() -> None:
    """A tokenizer that pads on the left, a `pack_padded_sequence` that assumes the right: the packed GRU
    reads the leading zeros and never the last real steps (changing them moves nothing), a fail. A GRU over
    every position ends on the real steps and passes."""
    x, lengths, y = _padded_sequences()
    left = torch.stack([row.roll(T - int(n), 0) for row, n in zip(x, lengths, strict=True)])
    data = DataLoader(TensorDataset(left, lengths, y), batch_size=16)
    packed = preflight(GRUClassifier(packed=True), train_dataloaders=data, checks=[PaddingCheck()])["padding"]
    assert packed.status == "fail" and "padded on the left" in packed.details["padding"]["convention"]
    assert "read as padded on the right" in packed.summary and len(packed.summary) <= 120, packed.summary
    whole = preflight(GRUClassifier(packed=False), train_dataloaders=data, checks=[PaddingCheck()])["padding"]
    assert whole.status == "pass", whole.message
