"""DeepSpeed presets."""

from __future__ import annotations

import sys
from pathlib import Path

import lightning.pytorch as pl
import pytest

from lightning_recipes.strategies import PRESETS, deepspeed_available, preset, reconcile_deepspeed_config
from lightning_recipes.strategies.deepspeed_config import DEEPSPEED_INSTALL_HINT, validate_deepspeed_config
from lightning_recipes.testing import TinyTransformerLM, fast_trainer, random_token_loader

INSTALL = "DeepSpeed is not installed (pip install 'lightning-recipes[deepspeed]')"
needs_deepspeed = pytest.mark.skipif(not deepspeed_available(), reason=INSTALL)
TRAINER = {"micro_batch_size": 4, "accumulate_grad_batches": 8, "world_size": 16, "gradient_clip_val": 1.0}
TRAINER.update(gradient_clip_algorithm="norm", precision="bf16-mixed")


def test_reconcile_fills_every_batch_entry_from_the_trainer() -> None:
    cfg = reconcile_deepspeed_config({"zero_optimization": {"stage": 3}}, **TRAINER)
    batches = {"train_micro_batch_size_per_gpu": 4, "train_batch_size": 4 * 8 * 16}
    expected = {"zero_optimization": {"stage": 3}, **batches, "gradient_clipping": 1.0}
    assert cfg == {**expected, "bf16": {"enabled": True}}


def test_reconcile_accepts_agreeing_entries_and_never_mutates_the_input() -> None:
    user = {"gradient_accumulation_steps": 8, "train_batch_size": 512, "train_micro_batch_size_per_gpu": 4}
    before = dict(user)
    cfg = reconcile_deepspeed_config(user, **TRAINER)
    assert "gradient_accumulation_steps" not in cfg  # Lightning sets it from the Trainer (#19891)
    assert user == before


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"gradient_accumulation_steps": 2}, r"`gradient_accumulation_steps=2` but the Trainer implies 8"),
        (
            {"train_batch_size": 64},
            (
                r"`train_batch_size=64` but the Trainer implies 512 "
                r"\(micro batch 4 x accumulation 8 x world size 16\)"
            ),
        ),
        (
            {"train_micro_batch_size_per_gpu": 2},
            r"`train_micro_batch_size_per_gpu=2` but the Trainer implies 4",
        ),
        ({"gradient_clipping": 0.5}, r"`gradient_clipping=0.5` but the Trainer implies 1.0"),
        ({"fp16": {"enabled": True}}, r"enables `fp16` but the Trainer has `precision='bf16-mixed'`"),
        ({"bf16": {"enabled": False}}, r"disables `bf16`"),
    ],
)
def test_reconcile_refuses_contradictions_naming_both_values(entry: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        reconcile_deepspeed_config(entry, **TRAINER)


def test_reconcile_refuses_clipping_by_value_and_leaves_fp16_to_lightning() -> None:
    with pytest.raises(ValueError, match="clips gradients by norm only"):
        reconcile_deepspeed_config({}, **{**TRAINER, "gradient_clip_algorithm": "value"})
    cfg = reconcile_deepspeed_config({}, **{**TRAINER, "precision": "16-mixed", "gradient_clip_val": None})
    assert "fp16" not in cfg and "bf16" not in cfg and cfg["gradient_clipping"] == 0.0
    with pytest.raises(ValueError, match="enables `bf16` but the Trainer has `precision='32-true'`"):
        reconcile_deepspeed_config({"bf16": {"enabled": True}}, **{**TRAINER, "precision": "32-true"})


@needs_deepspeed
def test_reconciled_config_passes_deepspeeds_own_validation() -> None:
    zero2 = {"zero_optimization": {"stage": 2, "offload_optimizer": {"device": "cpu"}}}
    cfg = reconcile_deepspeed_config(zero2, **TRAINER)
    validate_deepspeed_config({**cfg, "gradient_accumulation_steps": 8})


@needs_deepspeed
@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"zero_optimization": {"stage": 7}}, "Input should be 0, 1, 2, 3"),
        ({"zero_optimization": {"stage": 2, "no_such_key": 1}}, "Extra inputs are not permitted"),
        ({"fp16": {"enabled": True}, "bf16": {"enabled": True}}, "cannot be simultaneously enabled"),
    ],
)
def test_deepspeed_rejects_bad_configs_at_construction(config: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        preset("deepspeed_zero2", config=config)


@needs_deepspeed
@pytest.mark.parametrize(
    ("name", "stage", "offload_optimizer", "offload_param"),
    [
        ("deepspeed_zero1", 1, False, False),
        ("deepspeed_zero2", 2, False, False),
        ("deepspeed_zero2_offload", 2, True, False),
        ("deepspeed_zero3", 3, False, False),
        ("deepspeed_zero3_offload", 3, True, True),
    ],
)
def test_deepspeed_presets_build_on_a_cpu_machine(
    name: str, stage: int, offload_optimizer: bool, offload_param: bool
) -> None:
    from lightning.pytorch.strategies import DeepSpeedStrategy

    strategy = preset(name)
    assert isinstance(strategy, DeepSpeedStrategy)
    zero = strategy.config["zero_optimization"]
    assert zero["stage"] == stage
    assert ("offload_optimizer" in zero) is offload_optimizer
    assert ("offload_param" in zero) is offload_param
    assert "gradient_accumulation_steps" not in strategy.config and "train_batch_size" not in strategy.config
    assert PRESETS[name].engine == "deepspeed"


@needs_deepspeed
def test_deepspeed_on_cpu_is_refused_at_setup_before_any_work(tmp_path: Path) -> None:
    trainer = fast_trainer(strategy="recipes_deepspeed_zero2", max_steps=1, default_root_dir=tmp_path)
    refusal = r"`recipes_deepspeed_zero2` runs on DeepSpeed, which needs CUDA GPUs"
    with pytest.raises(RuntimeError, match=refusal):
        trainer.fit(TinyTransformerLM(), random_token_loader())


def test_missing_deepspeed_gives_the_install_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "deepspeed", None)  # as if DeepSpeed were not installed
    assert not deepspeed_available()
    for build in (lambda: preset("deepspeed_zero3"), lambda: pl.Trainer(strategy="recipes_deepspeed_zero2")):
        with pytest.raises(ModuleNotFoundError) as err:
            build()
        assert str(err.value) == DEEPSPEED_INSTALL_HINT
    assert "pip install 'lightning-recipes[deepspeed]'" in DEEPSPEED_INSTALL_HINT
    assert type(preset("ddp")).__mro__[1].__name__ == "DDPStrategy"  # DDP still builds
