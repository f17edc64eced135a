"""Block detection has one definition (`lightning_recipes/_blocks.py`), shared by optim, strategies, tune."""

from __future__ import annotations

import sys

import pytest
from torch import nn

import lightning_recipes._blocks as blocks
import lightning_recipes.optim.param_groups  # noqa: F401  (the module, for layer_decay below)
from lightning_recipes import strategies
from lightning_recipes.testing import TinyTransformerLM, TransformerBlock
from lightning_recipes.tune import _speed_options

layer_decay = sys.modules[
    "lightning_recipes.optim.param_groups"
]  # the module (the package's name is the function)


def test_the_public_names_are_the_one_definition() -> None:
    for name in ("infer_block_classes", "outermost_blocks", "resolve_block_classes"):
        assert getattr(strategies, name) is getattr(blocks, name), name
    assert layer_decay.resolve_block_classes is blocks.resolve_block_classes
    assert layer_decay.infer_block_classes is blocks.infer_block_classes
    assert _speed_options.infer_block_classes is blocks.infer_block_classes


def test_the_block_rules_agree_across_users() -> None:
    model = TinyTransformerLM(n_layers=3)
    assert blocks.infer_block_classes(model) == (TransformerBlock,)
    found = blocks.outermost_blocks(model, (TransformerBlock,))
    assert found == list(model.blocks)
    _, names = layer_decay.layer_depths(model)
    assert names == ["blocks.0", "blocks.1", "blocks.2"]
    resolved = blocks.resolve_block_classes([TransformerBlock, "torch.nn.Linear"])
    assert resolved == (TransformerBlock, nn.Linear)
    with pytest.raises(ValueError, match="full import paths"):
        blocks.resolve_block_classes("NoDots")
