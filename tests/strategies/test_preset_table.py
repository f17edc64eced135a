"""One table of presets: the builder, registry, estimator, recommender and CLI all read its rows."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from lightning.pytorch.strategies import StrategyRegistry

from lightning_recipes.strategies import (
    PRESETS,
    MemoryLayout,
    Preset,
    estimate_memory,
    preset,
    recommend_strategy,
)
from lightning_recipes.strategies._layout import LAYOUTS
from lightning_recipes.strategies.recommend import LADDERS

NON_DEEPSPEED = sorted(name for name, record in PRESETS.items() if record.engine != "deepspeed")


def test_registry_is_the_preset_table_and_every_rung_a_preset() -> None:
    # the CLI's --strategy choices: every one runs (tests/test_cli_help.py)
    registered = {name for name in StrategyRegistry.available_strategies() if name.startswith("recipes_")}
    assert registered == {f"recipes_{name}" for name in PRESETS}
    for ladder in LADDERS.values():
        assert set(ladder) <= set(PRESETS)
    # the estimator reads the layout table alone, never the modules that build strategies
    memory = Path(__file__).resolve().parents[2] / "lightning_recipes" / "strategies" / "memory.py"
    imported = {n.module for n in ast.walk(ast.parse(memory.read_text())) if isinstance(n, ast.ImportFrom)}
    ends = ("presets", "fsdp", "fsdp2", "ddp", "deepspeed_strategy", "_host")
    assert set(PRESETS) == set(LAYOUTS) and not {m for m in imported if m and m.endswith(ends)}
    with pytest.raises(ValueError, match="`strategy`"):
        estimate_memory(10_000_000, strategy="no_such_preset")


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_estimator_reads_each_presets_layout(name: str) -> None:
    record = PRESETS[name]
    assert isinstance(record, Preset) and record.layout is LAYOUTS[name]
    estimate = estimate_memory(8_000, strategy=name, devices=8, precision="bf16-mixed")
    sharded = record.layout.shard_params and not record.layout.offload_params
    expected = (1_000 if sharded else 8_000) * (2 if record.engine == "deepspeed" else 4)
    assert estimate.parameters == expected or (record.layout.offload_params and estimate.parameters == 0)
    assert (record.layout.family == "deepspeed") == (record.engine == "deepspeed")


@pytest.mark.parametrize("name", NON_DEEPSPEED)
def test_built_strategy_matches_the_record(name: str) -> None:
    record, strategy = PRESETS[name], preset(name)
    offloaded = getattr(getattr(strategy, "cpu_offload", None), "offload_params", False)
    assert bool(offloaded) == record.layout.offload_params
    sharding = getattr(strategy, "sharding_strategy", None)
    if sharding is not None:
        assert (sharding.name == "SHARD_GRAD_OP") == record.layout.keeps_gathered
        assert (sharding.name == "HYBRID_SHARD") == record.layout.hybrid
    assert record.layout.activation_checkpointing == (record.engine in ("fsdp", "fsdp2"))


@pytest.mark.parametrize(
    ("build", "argument"),
    [
        (lambda: Preset("horovod", {}, "no such engine", MemoryLayout("native")), "engine"),
        (lambda: preset("fsdp_full_shard", activation_checkpointing="yes"), "activation_checkpointing"),
        (lambda: preset("fsdp_offload", host_memory_gb=-1), "host_memory_gb"),
        (lambda: preset("fsdp2", reshard_after_forward=1), "reshard_after_forward"),
        (lambda: preset("fsdp2", activation_checkpointing=None), "activation_checkpointing"),
        (
            lambda: recommend_strategy(1_000, devices=1, device_memory_gb=1, host_memory_gb=0),
            "host_memory_gb",
        ),
    ],
)
def test_preset_records_constructors_and_the_recommender_refuse_bad_arguments(build, argument: str) -> None:
    with pytest.raises((ValueError, TypeError), match=f"`{argument}`"):
        build()


def test_records_still_unpack_like_the_old_three_tuples() -> None:
    # notebooks/05_scaling.ipynb and user code wrote `for name, (engine, defaults, description) in
    # PRESETS.items()`
    engine, defaults, description = PRESETS["deepspeed_zero2_offload"]
    assert (engine, defaults) == ("deepspeed", {"stage": 2, "offload_optimizer": True})
    assert description == PRESETS["deepspeed_zero2_offload"].description
    assert PRESETS["fsdp2"][0] == "fsdp2"
