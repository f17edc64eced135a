"""Layer-wise LR decay and lr_scale."""

from __future__ import annotations

import math
from typing import Any

import lightning.pytorch as pl
import pytest
import torch
from lightning.pytorch.callbacks import Callback, LearningRateMonitor
from torch import nn
from torch.nn import functional as F

from lightning_recipes.mixins import OptimizerRecipeMixin
from lightning_recipes.optim import Lamb, Lion, build_optimizer, param_groups, warmup_cosine
from lightning_recipes.optim.param_groups import layer_depths
from lightning_recipes.recipe import OptimizerRecipe
from lightning_recipes.testing import (
    DigitsCNN,
    InMemoryLogger,
    TinyTransformerLM,
    fast_trainer,
    random_classification_loader,
)


class Block(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.fc = nn.Linear(width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.fc(self.norm(x))


class BlockNet(OptimizerRecipeMixin, pl.LightningModule):
    """stem -> 3 blocks -> norm + head, configured by its recipe (module level: LightningCLI imports it)."""

    def __init__(self, recipe: OptimizerRecipe | None = None, width: int = 8) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.recipe = recipe
        self.stem = nn.Linear(16, width)
        self.blocks = nn.ModuleList(Block(width) for _ in range(3))
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stem(x)
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x))

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        x, y = batch
        return F.cross_entropy(self(x), y)


def test_depths_follow_embeddings_blocks_head():
    depths, blocks = layer_depths(TinyTransformerLM(n_layers=3))
    assert blocks == ["blocks.0", "blocks.1", "blocks.2"]
    assert depths["token_embedding.weight"] == depths["position_embedding.weight"] == 0
    assert [depths[f"blocks.{j}.qkv.weight"] for j in range(3)] == [1, 2, 3]
    assert depths["ln_f.weight"] == depths["head.weight"] == depths["head.bias"] == 4
    # a CNN: the convs repeat (the FSDP presets' rule); a BatchNorm between two convs goes with the one before
    depths, blocks = layer_depths(DigitsCNN())
    assert blocks == ["features.0", "features.3"]
    assert depths == {
        "features.0.weight": 1,
        "features.1.weight": 1,
        "features.1.bias": 1,
        "features.3.weight": 2,
        "features.4.weight": 3,  # after the last block: with the head (as a transformer's final norm)
        "features.4.bias": 3,
        "head.weight": 3,
        "head.bias": 3,
    }


def test_groups_scales_names_and_counts():
    model = BlockNet()
    groups = param_groups(model, 0.1, layer_decay=0.5, lr=1.0)
    table = [(g["name"], g["lr_scale"], g["weight_decay"], len(g["params"])) for g in groups]
    assert table == [
        ("embed/decay", 0.0625, 0.1, 1),
        ("embed/no_decay", 0.0625, 0.0, 1),
        ("block_0/decay", 0.125, 0.1, 1),
        ("block_0/no_decay", 0.125, 0.0, 3),
        ("block_1/decay", 0.25, 0.1, 1),
        ("block_1/no_decay", 0.25, 0.0, 3),
        ("block_2/decay", 0.5, 0.1, 1),
        ("block_2/no_decay", 0.5, 0.0, 3),
        ("head/decay", 1.0, 0.1, 1),
        ("head/no_decay", 1.0, 0.0, 3),
    ]
    assert sum(len(g["params"]) for g in groups) == len(list(model.parameters()))


def test_lr_scale_composes_with_layer_decay_by_multiplying():
    lr_scale = {"blocks.1": 0.1, r"head\.bias": 3.0}
    groups = param_groups(BlockNet(), 0.0, layer_decay=0.5, lr_scale=lr_scale, lr=1.0)
    scales = {g["name"]: g["lr_scale"] for g in groups}
    assert scales["block_1/blocks.1/decay"] == pytest.approx(0.25 * 0.1)
    assert scales["head/head\\.bias/no_decay"] == pytest.approx(3.0)
    assert scales["head/no_decay"] == 1.0  # the head's LayerNorm... and norm: no entry, layer scale only
    groups = param_groups(BlockNet(), 0.0, lr_scale={"stem": 0.1}, lr=1.0)  # alone: the others keep scale 1
    expected = [("stem/decay", 0.1), ("stem/no_decay", 0.1), ("decay", 1.0), ("no_decay", 1.0)]
    assert [(g["name"], g["lr_scale"]) for g in groups] == expected


@pytest.mark.parametrize(
    ("model", "kwargs", "match"),
    [
        (nn.Sequential(nn.Linear(4, 4), nn.ReLU()), {"layer_decay": 0.8}, "found none.*block_classes"),
        (BlockNet(), {"layer_decay": 0.8, "block_classes": nn.Conv2d}, "no block.*torch.nn.*Conv2d"),
        (BlockNet(), {"lr_scale": {"backbone": 0.1}}, "'backbone' selects no parameter.*'blocks', 'head'"),
        (BlockNet(), {"lr_scale": {"blocks": 0.1, r"blocks\.0\..*": 2.0}}, "all select parameter"),
        (BlockNet(), {"layer_decay": 1.5}, "`layer_decay` must be a number in \\(0, 1\\]"),
        (BlockNet(), {"lr_scale": {"stem": 0.0}}, "`lr_scale\\['stem'\\]` must be a finite number > 0"),
        (BlockNet(), {"split": "stem"}, "`split` must be an iterable"),
        (BlockNet(), {"split": ["trunk"]}, "'trunk' names no module"),
        (BlockNet(), {"layer_decay": 0.5}, "`layer_decay=0.5` scales .* needs the base LR: pass `lr=`"),
        (BlockNet(), {"lr_scale": {"stem": 0.1}}, "`lr_scale=.*` scales .* pass `lr=`"),
        (BlockNet(), {"layer_decay": 0.5, "lr": 0.0}, "`lr` must be a finite number > 0, got 0.0"),
    ],
)
def test_errors_name_the_argument_and_what_was_looked_for(model, kwargs, match):
    with pytest.raises(ValueError, match=match):
        param_groups(model, 0.1, **kwargs)


def test_frozen_parameters_can_be_named_and_stay_out_of_the_groups():
    model = BlockNet()
    model.stem.requires_grad_(False)
    groups = param_groups(model, 0.1, layer_decay=0.5, lr_scale={"stem": 0.1}, lr=1.0)
    assert not any(g["name"].startswith("embed") for g in groups)
    assert sum(len(g["params"]) for g in groups) == len(list(model.parameters())) - 2


@pytest.mark.parametrize("make", [torch.optim.AdamW, Lion, Lamb], ids=["AdamW", "Lion", "Lamb"])
def test_groups_carry_their_scaled_lr_into_any_optimizer_and_its_schedule(make):
    """As the Fabric guide uses them: straight into an optimizer's constructor, then a LambdaLR schedule."""
    model = BlockNet()
    groups = param_groups(model, 0.0, layer_decay=0.5, lr_scale={"stem": 0.1}, lr=0.01)
    optimizer = make(groups, lr=0.01)
    scheduler = warmup_cosine(optimizer, warmup_steps=0, total_steps=10)
    expected = [0.01 * g["lr_scale"] for g in groups]
    assert [g["initial_lr"] for g in optimizer.param_groups] == pytest.approx(expected)
    assert min(expected) == pytest.approx(0.01 * 0.5**4 * 0.1)  # the stem: embed depth x lr_scale
    before = [p.detach().clone() for p in model.parameters()]
    F.cross_entropy(model(torch.randn(16, 16)), torch.randint(0, 4, (16,))).backward()
    optimizer.step()
    for _ in range(3):
        scheduler.step()
    multiplier = optimizer.param_groups[-1]["lr"] / 0.01
    assert 0 < multiplier < 1  # the schedule scales every group by the same factor, keeping the ratios
    assert [g["lr"] for g in optimizer.param_groups] == pytest.approx([e * multiplier for e in expected])
    if make is not Lamb:  # Adam's first step and Lion's sign step move each weight by its group's lr
        moved = {id(p): (p.detach() - b).abs().max().item() for p, b in zip(model.parameters(), before)}
        for group, lr in zip(groups, expected):
            for p in group["params"]:
                assert moved[id(p)] == pytest.approx(lr, rel=1e-3)


def test_build_optimizer_scales_lr_only_groups_once_and_leaves_the_callers_dicts():
    """Groups with ``lr`` are used as is; ``lr_scale``-only groups get ``lr * lr_scale``; inputs unchanged."""
    kwargs = {"lr": 0.01, "weight_decay": 0.1, "betas": (0.9, 0.99)}
    with_lr = param_groups(BlockNet(), 0.1, layer_decay=0.5, lr=0.01)
    scale_only = [{k: v for k, v in g.items() if k != "lr"} for g in with_lr]
    for name in ("adamw", "lion", "lamb"):
        new, old = (build_optimizer(name, g, **kwargs).param_groups for g in (with_lr, scale_only))
        assert [g["lr"] for g in new] == [g["lr"] for g in old] == [0.01 * g["lr_scale"] for g in with_lr]
    assert all("lr" not in g for g in scale_only)


# ---- the value table: LR of every group at every step through a real Trainer ----------------------------


def _reference_multiplier(schedule: str, step: int, warmup: int, total: int, min_ratio: float) -> float:
    """From the formulas: linear warm-up step / warmup, then cosine / linear decay to min_ratio, or flat."""
    if schedule == "none":
        return 1.0
    if step < warmup:  # WSD warms up from min_ratio (Hugging Face's get_wsd_schedule), the others from 0
        start = min_ratio if schedule == "wsd" else 0.0
        return start + (1.0 - start) * step / warmup
    if schedule == "constant":
        return 1.0
    progress = min(1.0, (step - warmup) / (total - warmup))
    if schedule == "cosine":
        return min_ratio + (1.0 - min_ratio) * 0.5 * (1.0 + math.cos(math.pi * progress))
    if schedule == "linear":
        return min_ratio + (1.0 - min_ratio) * (1.0 - progress)
    # wsd: stable at 1, then a linear cooldown over the last 20% of the steps
    decay_start = total - round(0.2 * total)
    if step < decay_start:
        return 1.0
    return min_ratio + (1.0 - min_ratio) * (1.0 - (step - decay_start) / (total - decay_start))


class RecordLR(Callback):
    def __init__(self) -> None:
        self.rows: list[list[float]] = []

    def on_train_batch_start(self, trainer: pl.Trainer, *args: Any) -> None:
        self.rows.append([g["lr"] for g in trainer.optimizers[0].param_groups])


@pytest.mark.parametrize(
    ("optimizer", "schedule"),
    [("lion", "cosine"), ("adamw", "linear"), ("lion", "constant"), ("lamb", "wsd"), ("adamw", "none")],
)
def test_every_group_lr_is_base_times_scale_times_schedule_at_every_step(tmp_path, optimizer, schedule):
    lr, total, warmup, min_ratio = 0.01, 10, 3, 0.1
    schedule_args = {"schedule": schedule, "warmup_steps": warmup, "min_lr_ratio": min_ratio}
    recipe = OptimizerRecipe(optimizer, lr, layer_decay=0.5, lr_scale={"blocks.0": 0.1}, **schedule_args)
    model, record, logger = BlockNet(recipe), RecordLR(), InMemoryLogger()
    callbacks = [record, LearningRateMonitor(logging_interval="step")]
    settings = {"logger": logger, "log_every_n_steps": 1, "default_root_dir": tmp_path}
    trainer = fast_trainer(max_steps=total, callbacks=callbacks, **settings)
    trainer.fit(model, random_classification_loader(num_samples=320, batch_size=32))
    scales = {"embed": 0.0625, "block_0/blocks.0": 0.125 * 0.1, "block_1": 0.25, "block_2": 0.5, "head": 1.0}
    names = [g["name"] for g in trainer.optimizers[0].param_groups]
    assert [n.rsplit("/", 1)[0] for n in names[::2]] == list(scales)
    multipliers = [_reference_multiplier(schedule, s, warmup, total, min_ratio) for s in range(total)]
    expected = [[lr * scales[name.rsplit("/", 1)[0]] * m for name in names] for m in multipliers]
    assert len(record.rows) == total
    for step, (row, want) in enumerate(zip(record.rows, expected)):
        assert row == pytest.approx(want, rel=1e-12, abs=1e-15), step
    label = type(trainer.optimizers[0]).__name__
    for index, name in enumerate(names):  # LearningRateMonitor logs each group under its name
        assert logger.values(f"lr-{label}/{name}") == pytest.approx([row[index] for row in expected])


def test_summary_line_names_groups_and_scales(caplog):
    model = BlockNet(OptimizerRecipe(layer_decay=0.5, schedule="none"))
    with caplog.at_level("INFO"):
        fast_trainer(max_steps=1).fit(model, random_classification_loader(num_samples=32))
    line = next(r.getMessage() for r in caplog.records if "lightning_recipes:" in r.getMessage())
    assert "embed/decay 128 params in 1 tensors (wd 0.05, lr x0.0625)" in line
    assert "head/no_decay 20 params in 3 tensors (wd 0, lr x1)" in line
    assert model.recipe_summary["groups"][0]["lr"] == pytest.approx(1e-3 * 0.0625)


# ---- field report #22: the head of any model trains at the peak LR ------------------------------------


@pytest.fixture
def fresh_warnings() -> None:
    """`warn_once` remembers its messages per process: each test sees its own first time."""
    from lightning_recipes import _warn_once

    _warn_once._SAID.clear()


def _scales(groups: list[dict[str, Any]], model: nn.Module) -> dict[str, float]:
    names = {id(p): n for n, p in model.named_parameters()}
    return {names[id(p)]: g["lr_scale"] for g in groups for p in g["params"]}


class MLP(OptimizerRecipeMixin, pl.LightningModule):
    def __init__(self, recipe: OptimizerRecipe | None = None) -> None:
        super().__init__()
        self.recipe = recipe
        self.net = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        x, y = batch
        return F.cross_entropy(self(x), y)


def test_plain_mlp_output_layer_is_the_head_at_the_peak_lr(fresh_warnings, recwarn):
    """The MLP's three Linears all read as blocks: the output layer trained at lr * decay, nothing at lr."""
    model = MLP(OptimizerRecipe(layer_decay=0.5, schedule="none"))
    scales = _scales(param_groups(model, 0.1, layer_decay=0.5, lr=1.0), model)
    assert scales == {
        "net.0.weight": 0.25,  # block 0 (L = 2): decay ** (L - 0)
        "net.0.bias": 0.25,
        "net.2.weight": 0.5,
        "net.2.bias": 0.5,
        "net.4.weight": 1.0,  # the head
        "net.4.bias": 1.0,
    }
    fast_trainer(max_steps=1).fit(model, random_classification_loader(num_samples=32))
    peak = model.recipe_summary["peak_lr"]
    head = [g for g in model.recipe_summary["groups"] if g["name"].startswith("head/")]
    assert [g["lr"] for g in head] == [peak, peak]
    assert not [w for w in recwarn if "layer_decay" in str(w.message)]  # two blocks: no degenerate warning


def test_a_model_without_repeated_blocks_warns_once_that_layer_decay_degenerates(fresh_warnings):
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))  # the only repeat is the head
    with pytest.warns(UserWarning, match="no repeated blocks besides the output layer") as caught:
        param_groups(model, 0.1, layer_decay=0.5, lr=1.0)
        groups = param_groups(model, 0.1, layer_decay=0.5, lr=1.0)  # lr="find" builds the groups twice
    assert len([w for w in caught if "layer_decay" in str(w.message)]) == 1
    assert _scales(groups, model) == {"0.weight": 0.5, "0.bias": 0.5, "2.weight": 1.0, "2.bias": 1.0}


def test_bert_embeddings_lowest_blocks_in_order_pooler_and_classifier_at_the_peak(fresh_warnings, recwarn):
    transformers = pytest.importorskip("transformers")
    sizes = {"vocab_size": 50, "hidden_size": 16, "intermediate_size": 32, "max_position_embeddings": 32}
    config = transformers.BertConfig(num_hidden_layers=3, num_attention_heads=2, **sizes)
    model = transformers.BertForSequenceClassification(config)
    scales = _scales(param_groups(model, 0.1, layer_decay=0.5, lr=1.0), model)
    assert scales["bert.embeddings.word_embeddings.weight"] == 0.5**4  # L + 1
    assert scales["bert.embeddings.LayerNorm.weight"] == 0.5**4
    for i in range(3):
        assert scales[f"bert.encoder.layer.{i}.attention.self.query.weight"] == 0.5 ** (3 - i)
        assert scales[f"bert.encoder.layer.{i}.output.dense.weight"] == 0.5 ** (3 - i)
    head = ("bert.pooler.dense.weight", "classifier.weight", "classifier.bias")
    assert [scales[name] for name in head] == [1.0, 1.0, 1.0]
    assert not [w for w in recwarn if "layer_decay" in str(w.message) or "tied" in str(w.message)]


def test_cnn_head_at_the_peak_also_when_the_output_layer_is_a_conv(fresh_warnings):
    model = DigitsCNN()
    scales = _scales(param_groups(model, 0.1, layer_decay=0.5, lr=1.0), model)
    assert [scales[n] for n in ("features.0.weight", "features.3.weight", "head.weight")] == [0.25, 0.5, 1.0]
    # a fully convolutional net: its last conv is the output layer
    fcn = nn.Sequential(nn.Conv2d(1, 4, 3), nn.ReLU(), nn.Conv2d(4, 4, 3), nn.ReLU(), nn.Conv2d(4, 4, 3))
    fcn.extend([nn.ReLU(), nn.Conv2d(4, 2, 1)])
    scales = _scales(param_groups(fcn, 0.1, layer_decay=0.5, lr=1.0), fcn)
    assert [scales[f"{i}.weight"] for i in (0, 2, 4, 6)] == [0.125, 0.25, 0.5, 1.0]
