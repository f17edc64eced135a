"""Tied (shared) parameters in param_groups and layer_decay (field report #22)."""

from __future__ import annotations

import pytest
import torch

from lightning_recipes.optim import build_optimizer, param_groups
from lightning_recipes.optim.tied import tied_parameters

transformers = pytest.importorskip("transformers")


@pytest.fixture(autouse=True)
def fresh_warnings() -> None:
    from lightning_recipes import _warn_once

    _warn_once._SAID.clear()


def _gpt2(**options: bool) -> torch.nn.Module:
    config = transformers.GPT2Config(vocab_size=50, n_positions=32, n_embd=16, n_layer=2, n_head=2, **options)
    return transformers.GPT2LMHeadModel(config)


def _groups_of(groups: list[dict], param: torch.nn.Parameter) -> list[str]:
    return [g["name"] for g in groups if any(p is param for p in g["params"])]


def test_gpt2_ties_the_head_to_the_token_embedding() -> None:
    assert tied_parameters(_gpt2()) == [["transformer.wte.weight", "lm_head.weight"]]


def test_layer_decay_warns_that_the_tied_head_takes_the_embeddings_lr() -> None:
    model = _gpt2()
    with pytest.warns(UserWarning, match="tied") as caught:
        groups = param_groups(model, 0.1, layer_decay=0.5, lr=1.0)
    message = str(next(w for w in caught if "tied" in str(w.message)).message)
    assert "'transformer.wte.weight' and 'lm_head.weight' are one tied parameter" in message
    assert "it is in embed (LR x0.125) as 'transformer.wte.weight'" in message
    assert "as 'lm_head.weight' it would be in head (LR x1)" in message
    assert _groups_of(groups, model.lm_head.weight) == ["embed/no_decay"]


@pytest.mark.parametrize(
    ("split", "group"),
    [
        (["lm_head"], "lm_head/no_decay"),  # was an error: "'lm_head' names no module with parameters"
        (["transformer.wte"], "transformer.wte/no_decay"),
        (["transformer.wte", "lm_head"], "embed/transformer.wte/no_decay"),  # with layer_decay
    ],
)
def test_a_tied_parameter_is_in_one_group_whichever_name_is_split(split: list[str], group: str) -> None:
    model = _gpt2()
    with pytest.warns(UserWarning, match="'transformer.wte.weight' and 'lm_head.weight' are one tied"):
        groups = param_groups(model, 0.1, split=split, layer_decay=0.5 if len(split) > 1 else None, lr=1.0)
    assert _groups_of(groups, model.transformer.wte.weight) == [group]
    ids = [id(p) for g in groups for p in g["params"]]
    assert len(ids) == len(set(ids)) == len(list(model.parameters()))
    # torch refuses a parameter in two groups
    build_optimizer("adamw", groups, lr=1e-3, weight_decay=0.1, betas=(0.9, 0.999))


def test_an_untied_model_warns_nothing(recwarn: pytest.WarningsRecorder) -> None:
    model = _gpt2(tie_word_embeddings=False)
    assert tied_parameters(model) == []
    param_groups(model, 0.1, layer_decay=0.5, split=["lm_head"], lr=1.0)
    assert not [w for w in recwarn if "tied" in str(w.message)]
