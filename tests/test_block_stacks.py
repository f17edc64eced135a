"""Models with several block stacks: every stack's layers are blocks (layer decay, checkpointing, FSDP2)."""

from __future__ import annotations

import logging
from collections.abc import Callable

import pytest
import torch.distributed as dist
from torch import nn

from lightning_recipes.optim import build_optimizer, param_groups
from lightning_recipes.strategies import (
    apply_fsdp2,
    checkpoint_blocks,
    checkpointed_blocks,
    describe_blocks,
    find_blocks,
    infer_block_classes,
    outermost_blocks,
)

transformers = pytest.importorskip("transformers", reason="needs transformers (the `dev` group)")


def bart() -> nn.Module:
    config = transformers.BartConfig(
        vocab_size=32, d_model=16, encoder_layers=2, decoder_layers=2, encoder_attention_heads=2,
        decoder_attention_heads=2, encoder_ffn_dim=32, decoder_ffn_dim=32, max_position_embeddings=32,
    )  # fmt: skip
    return transformers.BartForConditionalGeneration(config)


def t5() -> nn.Module:
    config = transformers.T5Config(vocab_size=32, d_model=16, d_kv=8, d_ff=32, num_layers=2, num_heads=2)
    return transformers.T5ForConditionalGeneration(config)


def clip() -> nn.Module:
    tower = {"hidden_size": 16, "intermediate_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2}
    config = transformers.CLIPConfig(
        text_config={**tower, "vocab_size": 32, "max_position_embeddings": 16, "bos_token_id": 0,
                     "eos_token_id": 1},
        vision_config={**tower, "image_size": 8, "patch_size": 4},
        projection_dim=8,
    )  # fmt: skip
    return transformers.CLIPModel(config)


class Tower(nn.Module):
    def __init__(self, layers: int = 2) -> None:
        super().__init__()
        self.embed = nn.Linear(4, 16)
        self.layers = nn.ModuleList(nn.TransformerEncoderLayer(16, 2, 32) for _ in range(layers))


class TwoTower(nn.Module):
    """Plain torch: two towers of one class (the old rule took each whole tower as one block)."""

    def __init__(self, layers: int = 2) -> None:
        super().__init__()
        self.image, self.text = Tower(layers), Tower(layers)


def _layers(*stacks: str) -> list[str]:
    return [f"{stack}.{i}" for stack in stacks for i in range(2)]


MODELS: dict[str, tuple[Callable[[], nn.Module], list[str]]] = {
    "bart": (bart, _layers("model.encoder.layers", "model.decoder.layers")),
    "t5": (t5, _layers("encoder.block", "decoder.block")),
    "clip": (clip, _layers("text_model.encoder.layers", "vision_model.encoder.layers")),
    "two_tower": (TwoTower, _layers("image.layers", "text.layers")),
    "nn.Transformer": (lambda: nn.Transformer(16, 2, 2, 2, 32), _layers("encoder.layers", "decoder.layers")),
}


@pytest.mark.parametrize("name", list(MODELS))
def test_every_stack_of_layers_is_found(name: str) -> None:
    make, expected = MODELS[name]
    model = make()
    names = {id(module): path for path, module in model.named_modules()}
    # what FSDP2 shards and checkpointing wraps: one unit per layer, in every stack
    assert [names[id(b)] for b in outermost_blocks(model, infer_block_classes(model))] == expected
    stacks = find_blocks(model)
    assert list(stacks) == [expected[0].rpartition(".")[0], expected[2].rpartition(".")[0]]
    assert [block for blocks in stacks.values() for block in blocks] == expected


def test_the_stacks_are_named_and_logged(caplog: pytest.LogCaptureFixture) -> None:
    stacks = "model.encoder.layers (2 x BartEncoderLayer), model.decoder.layers (2 x BartDecoderLayer)"
    assert describe_blocks(bart()) == f"2 stacks: {stacks}"
    logger = logging.getLogger("lightning.pytorch")
    logger.addHandler(caplog.handler)
    try:
        with caplog.at_level(logging.INFO, logger="lightning.pytorch"):
            infer_block_classes(TwoTower(layers=3))
    finally:
        logger.removeHandler(caplog.handler)
    logged = "blocks of TwoTower (layer lists): 2 stacks: image.layers (3 x TransformerEncoderLayer), "
    assert logged in caplog.text


@pytest.mark.parametrize(
    ("make", "embedding", "first_layers"),
    [
        (bart, "model.shared.weight", ["model.encoder.layers.{}.fc1.weight",
                                       "model.decoder.layers.{}.fc1.weight"]),
        (t5, "shared.weight", ["encoder.block.{}.layer.1.DenseReluDense.wi.weight",
                               "decoder.block.{}.layer.2.DenseReluDense.wi.weight"]),
    ],
    ids=["bart", "t5"],
)  # fmt: skip
def test_layer_decay_numbers_encoder_then_decoder_layers(
    make: Callable[[], nn.Module], embedding: str, first_layers: list[str]
) -> None:
    model = make()
    groups = param_groups(model, 0.0, layer_decay=0.5, lr=1.0)
    optimizer = build_optimizer("adamw", groups, lr=1.0, weight_decay=0.0, betas=(0.9, 0.999))
    lr = {id(p): group["lr"] for group in optimizer.param_groups for p in group["params"]}
    params = dict(model.named_parameters())
    layers = [pattern.format(i) for pattern in first_layers for i in range(2)]
    # forward order: embeddings 0.5**5, encoder layers 0.5**4, 0.5**3, decoder layers 0.5**2, 0.5
    assert lr[id(params[embedding])] == 0.5**5
    assert [lr[id(params[name])] for name in layers] == [0.5**4, 0.5**3, 0.5**2, 0.5]


@pytest.mark.parametrize("name", ["bart", "t5"])
def test_checkpoint_blocks_wraps_encoder_and_decoder_layers(name: str) -> None:
    make, expected = MODELS[name]
    model = make()
    assert checkpoint_blocks(model) == expected
    assert checkpointed_blocks(model) == expected


@pytest.mark.parametrize("name", ["bart", "t5"])  # (CLIP's scalar logit_scale: fully_shard refuses it)
def test_fsdp2_shards_every_layer_of_every_stack(name: str) -> None:
    make, expected = MODELS[name]
    model = make()
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        apply_fsdp2(model, activation_checkpointing=False)
    finally:
        dist.destroy_process_group()
    sharded = [path for path, module in model.named_modules() if "FSDP" in type(module).__name__]
    assert sharded == ["", *expected]


def test_given_block_classes_that_leave_a_stack_out_warn() -> None:
    model = bart()
    decoder_layer = transformers.models.bart.modeling_bart.BartDecoderLayer
    with pytest.warns(UserWarning, match=r"outside every block: model\.encoder\.layers \(BartEncoderLayer\)"):
        assert checkpoint_blocks(model, decoder_layer) == MODELS["bart"][1][2:]
