"""speed_tune's block and compile options."""

from __future__ import annotations

import itertools
from typing import Any

import lightning.pytorch as pl
import pytest
import torch

from lightning_recipes.strategies import checkpointed_blocks
from lightning_recipes.testing import (
    DigitsCNN,
    TinyClassifier,
    TinyTransformerLM,
    random_classification_loader,
    random_token_loader,
)
from lightning_recipes.tune.speed import OPTIONS, SpeedOption, _without_conflicts, compile_targets, speed_tune
from tests.helpers.speed import FAST, SleepyClassifier, virtual_time
from tests.tune._flat_models import no_sleep


def _lm() -> tuple[TinyTransformerLM, Any]:
    torch.manual_seed(0)
    return TinyTransformerLM(vocab_size=64, n_layers=3), random_token_loader(vocab_size=64, seq_len=64)


def test_activation_checkpointing_row_counts_the_saved_activations_and_keeps_the_loss() -> None:
    model, loader = _lm()
    before = {key: value.clone() for key, value in model.state_dict().items()}
    result = speed_tune(model, train_dataloaders=loader, options=["activation_checkpointing"], **FAST)
    base, checkpointed = result.rows
    assert checkpointed.option == "activation_checkpointing"
    assert checkpointed.loss_deviation is not None and checkpointed.loss_deviation < 1e-6, checkpointed
    assert base.activation_mb is not None and checkpointed.activation_mb is not None
    assert checkpointed.activation_mb < base.activation_mb / 3, (base, checkpointed)  # 3 blocks: keeps inputs
    assert base.step_peak_mb is not None and checkpointed.step_peak_mb is not None
    assert checkpointed.step_peak_mb < base.step_peak_mb
    assert base.cuda_peak_mb is None and checkpointed.cuda_peak_mb is None  # CPU: no allocator statistics
    assert checkpointed_blocks(model) == []  # only the copies were checkpointed
    assert all(torch.equal(before[key], value) for key, value in model.state_dict().items())
    columns = [column.header for column in result.table().columns]
    assert "act. MiB" in columns and "step peak MiB" in columns and "CUDA peak MiB" not in columns


def test_compile_blocks_compiles_the_copys_blocks_and_keeps_the_loss() -> None:
    model, loader = _lm()
    result = speed_tune(model, train_dataloaders=loader, options=["compile_blocks"], **FAST)
    row = result.rows[1]
    assert row.option == "compile_blocks" and not row.status.startswith(("skipped", "incorrect")), row
    assert row.loss_deviation is not None and row.loss_deviation < 1e-4
    assert all(getattr(block, "_compiled_call_impl", None) is None for block in model.blocks)
    prepare = OPTIONS["compile_blocks"].prepare
    assert prepare is not None
    prepared = prepare(TinyTransformerLM(n_layers=2))
    assert all(block._compiled_call_impl is not None for block in prepared.blocks)
    assert prepared._compiled_call_impl is None  # the module itself stays eager


class OneLayer(TinyClassifier):
    def __init__(self) -> None:
        super().__init__()
        self.hidden = torch.nn.Identity()  # nothing with parameters repeats: one Linear left
        self.head = torch.nn.Linear(16, 4)


class Loop(pl.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.model = torch.nn.ModuleList([torch.nn.Linear(16, 4)])  # called item by item, no forward


NO_COMPOSITE = "no repeated block with sub-modules in the model (the only repeated type is the leaf Conv2d)"
BLOCK_OPTIONS = ("activation_checkpointing", "compile_blocks")


@pytest.mark.parametrize(
    ("name", "model", "reason"),
    [
        *((name, lambda: DigitsCNN(width=4), NO_COMPOSITE) for name in BLOCK_OPTIONS),
        *((name, OneLayer, "no repeated block in the model (no module type") for name in BLOCK_OPTIONS),
        ("compile", Loop, "nothing to compile: the LightningModule has no forward and no child module"),
    ],
)  # fmt: skip
def test_block_and_compile_options_say_why_they_do_not_apply(name: str, model: Any, reason: str) -> None:
    skip_reason = OPTIONS[name].skip_reason
    assert skip_reason is not None and (skip_reason(model(), torch.device("cpu")) or "").startswith(reason)


def test_of_two_conflicting_faster_options_only_the_faster_is_chosen(monkeypatch: pytest.MonkeyPatch) -> None:
    virtual_time(monkeypatch)  # exact step times: 81 ms, 41 ms without sleep_a, 1 ms without both
    options = [
        SpeedOption("drop_a", prepare=no_sleep("sleep_a"), conflicts=("drop_both",)),
        SpeedOption("drop_both", prepare=no_sleep("sleep_a", "sleep_b")),
    ]
    # a long run: ranked by step time (neither option costs anything once)
    loader = random_classification_loader()
    result = speed_tune(
        SleepyClassifier(), train_dataloaders=loader, options=options, run_steps=10_000, **FAST
    )
    assert [row.step_ms for row in result.rows] == pytest.approx([81.0, 41.0, 1.0])  # the virtual clock
    assert [row.status for row in result.rows[1:]] == ["faster", "faster"]
    assert len(result.rows) == 3  # no combination re-measured: one option is left after the conflict
    assert result.best == ["drop_both"]


def test_without_conflicts_keeps_the_faster_of_each_conflicting_pair_either_direction() -> None:
    a = SpeedOption("a", conflicts=("b",))
    b = SpeedOption("b")
    c = SpeedOption("c")
    d = SpeedOption("d", conflicts=("c",))
    assert _without_conflicts([(1.1, a), (1.5, b), (1.2, c), (1.3, d)]) == {"b", "d"}
    assert _without_conflicts([(1.6, a), (1.5, b), (1.4, c)]) == {"a", "c"}


def test_builtin_compile_options_conflict_with_each_other() -> None:
    compiling = ["compile", "compile_blocks", "compile_cudagraphs", "activation_checkpointing"]
    for first, second in itertools.permutations(compiling, 2):
        assert second in OPTIONS[first].conflicts or first in OPTIONS[second].conflicts, (first, second)


class Wrapper(pl.LightningModule):
    """No ``forward``: ``training_step`` calls the wrapped model (Hugging Face's ``self.model(**batch)``)."""

    def __init__(self) -> None:
        super().__init__()
        self.model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        x, y = batch
        return torch.nn.functional.cross_entropy(self.model(x), y)

    def configure_optimizers(self) -> Any:
        return torch.optim.SGD(self.parameters(), lr=0.1)


def test_compile_of_a_module_without_forward_compiles_the_model_training_step_calls() -> None:
    wrapper = Wrapper()
    assert compile_targets(wrapper) == [wrapper.model]
    prepare = OPTIONS["compile"].prepare
    assert prepare is not None
    prepared = prepare(Wrapper())
    assert prepared.model._compiled_call_impl is not None  # before: only the wrapper, which is never called
    loader = random_classification_loader()
    result = speed_tune(wrapper, train_dataloaders=loader, options=["compile"], **FAST)
    row = result.rows[1]
    assert not row.status.startswith(("skipped", "incorrect")), row
    assert wrapper.model._compiled_call_impl is None  # the user's model stays eager


def test_hugging_face_gpt2_wrapper_is_checkpointed_and_its_model_is_the_compile_target() -> None:
    """Compile end to end on a wrapper without forward: the test above (same path, a cheaper model)."""
    from galleries.preflight.families._shapes_models import HFCausalLM, lm_loaders

    torch.manual_seed(0)
    model = HFCausalLM()  # no forward; training_step: self.model(**batch).loss on dict batches
    assert compile_targets(model) == [model.model]
    loader = lm_loaders(n=64)["train_dataloaders"]
    result = speed_tune(model, train_dataloaders=loader, options=["activation_checkpointing"], **FAST)
    base, checkpointed = result.rows
    assert checkpointed.loss_deviation == 0.0, checkpointed  # dropout masks replayed in the recomputation
    assert base.activation_mb is not None and checkpointed.activation_mb is not None
    assert checkpointed.activation_mb < base.activation_mb / 2, (base, checkpointed)
    assert model.model.config.use_cache is not False  # the KV-cache switch went to the copy only
    assert checkpointed_blocks(model) == []
