"""param_groups: which parameters decay, names, counts, frozen and tied parameters, errors."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from lightning_recipes.optim import Lamb, Lion, param_groups
from lightning_recipes.testing import TinyTransformerLM


class _Custom(nn.Module):
    def __init__(self):
        super().__init__()
        self.pos_embed = nn.Parameter(torch.zeros(1, 4, 8))
        self.cls_token = nn.Parameter(torch.zeros(1, 1, 8))
        self.proj = nn.Linear(8, 8)

    def no_weight_decay(self):
        return {"pos_embed"}


class _Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(20, 8)
        self.conv = nn.Conv2d(3, 4, 3)
        self.bn = nn.BatchNorm2d(4)
        self.gn = nn.GroupNorm(2, 4)
        self.inorm = nn.InstanceNorm1d(4, affine=True)
        self.ln = nn.LayerNorm(8)
        self.rms = nn.RMSNorm(8)
        self.custom = _Custom()
        self.head = nn.Linear(8, 5)
        self.frozen = nn.Linear(8, 8)
        self.frozen.requires_grad_(False)


def _names(model, group):
    ids = {id(p) for p in group["params"]}
    return sorted(n for n, p in model.named_parameters() if id(p) in ids)


def test_decay_only_weight_matrices():
    model = _Model()
    decay, no_decay = param_groups(model, 0.1, no_decay=["head.*"])
    assert decay["name"] == "decay" and decay["weight_decay"] == 0.1
    assert no_decay["name"] == "no_decay" and no_decay["weight_decay"] == 0.0
    assert no_decay["layer_adaptation"] is False
    assert _names(model, decay) == ["conv.weight", "custom.cls_token", "custom.proj.weight"]
    assert _names(model, no_decay) == [
        "bn.bias", "bn.weight", "conv.bias", "custom.pos_embed", "custom.proj.bias", "embed.weight",
        "gn.bias", "gn.weight", "head.bias", "head.weight", "inorm.bias", "inorm.weight", "ln.bias",
        "ln.weight", "rms.weight",
    ]  # fmt: skip


def test_every_trainable_parameter_exactly_once_and_frozen_skipped():
    model = _Model()
    groups = param_groups(model, 0.1, decay_embeddings=True)
    grouped = [p for g in groups for p in g["params"]]
    trainable = [p for p in model.parameters() if p.requires_grad]
    assert len(grouped) == len({id(p) for p in grouped}) == len(trainable)
    assert all(p.requires_grad for p in grouped)
    assert any(p is model.embed.weight for p in groups[0]["params"])  # decay_embeddings=True


def test_tied_weights_appear_once_and_do_not_decay():
    model = TinyTransformerLM(vocab_size=16, d_model=16, n_heads=2, n_layers=1)
    model.head.weight = model.token_embedding.weight  # weight tying
    groups = param_groups(model, 0.1)
    grouped = [p for g in groups for p in g["params"]]
    assert sum(p is model.head.weight for p in grouped) == 1
    assert any(p is model.head.weight for p in groups[1]["params"])
    assert len(grouped) == len(list(model.parameters()))


def test_groups_feed_every_optimizer_and_empty_groups_are_omitted():
    model = nn.Linear(4, 4, bias=False)
    groups = param_groups(model, 0.1)
    assert [g["name"] for g in groups] == ["decay"]
    for optimizer in (torch.optim.AdamW(groups), Lion(groups), Lamb(param_groups(nn.LayerNorm(4), 0.1))):
        assert len(optimizer.param_groups) == 1


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "match"),
    [
        ((nn.Linear(2, 2), -0.1), {}, ValueError, "`weight_decay` must be a number >= 0, got -0.1"),
        ((nn.Linear(2, 2), 0.1), {"no_decay": "bias"}, ValueError, "`no_decay` must be an iterable"),
        ((nn.ReLU(), 0.1), {}, RuntimeError, "no trainable parameter"),
    ],
)
def test_errors(args, kwargs, error, match):
    with pytest.raises(error, match=match):
        param_groups(*args, **kwargs)
