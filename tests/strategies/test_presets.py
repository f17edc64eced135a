"""Preset construction, registry, LightningCLI, FSDP1 configuration and the set-up refusals (CPU machine)."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace
from typing import ClassVar

import lightning.pytorch as pl
import pytest
import torch
from lightning.pytorch.cli import LightningCLI
from lightning.pytorch.strategies import DDPStrategy, FSDPStrategy, ModelParallelStrategy, StrategyRegistry
from torch import nn
from torch.distributed.fsdp import ShardingStrategy
from torch.distributed.fsdp.wrap import ModuleWrapPolicy

from lightning_recipes.strategies import (
    PRESETS,
    LazyBlockPolicy,
    RecipesFSDP2Strategy,
    RecipesFSDPStrategy,
    infer_block_classes,
    preset,
)
from lightning_recipes.strategies._host import check_host_memory, refuse_offload_without_host_memory
from lightning_recipes.testing import TinyTransformerLM, TransformerBlock, fast_trainer, random_token_loader

REQUIRED = {"ddp", "ddp_spawn", "ddp_static_graph", "fsdp_full_shard", "fsdp_shard_grad_op", "fsdp_hybrid",
            "fsdp_offload", "fsdp2", "deepspeed_zero1", "deepspeed_zero2", "deepspeed_zero2_offload",
            "deepspeed_zero3", "deepspeed_zero3_offload"}  # fmt: skip
NON_DEEPSPEED = sorted(name for name in REQUIRED if not name.startswith("deepspeed"))


@pytest.mark.parametrize("name", NON_DEEPSPEED)
def test_presets_build_real_lightning_strategies_from_name_registry_and_trainer(name: str) -> None:
    assert set(PRESETS) == REQUIRED  # registered as recipes_<name>: tests/strategies/test_preset_table.py
    engines = {"ddp": DDPStrategy, "fsdp": FSDPStrategy, "fsdp2": ModelParallelStrategy}
    expected = engines[PRESETS[name].engine]
    built = preset(name)
    assert isinstance(built, expected) and type(built) is PRESETS[name].strategy_class
    assert type(preset(f"recipes_{name}")) is type(StrategyRegistry.get(f"recipes_{name}")) is type(built)
    trainer = pl.Trainer(strategy=f"recipes_{name}", accelerator="cpu", devices=1, logger=False)
    assert type(trainer.strategy) is type(built)


def test_bad_name_and_misplaced_model_are_refused() -> None:
    with pytest.raises(ValueError, match=r"`name` must be one of .*got 'fsdp3'"):
        preset("fsdp3")
    with pytest.raises(ValueError, match="`model` is only used by the FSDP presets"):
        preset("ddp", model=TinyTransformerLM())


def test_overrides_win_over_preset_defaults() -> None:
    strategy = preset("ddp", gradient_as_bucket_view=False, find_unused_parameters=True)
    assert strategy._ddp_kwargs == {"gradient_as_bucket_view": False, "find_unused_parameters": True}
    fsdp = preset("fsdp_full_shard", sharding_strategy="NO_SHARD", state_dict_type="full")
    assert fsdp.sharding_strategy is ShardingStrategy.NO_SHARD
    assert fsdp._state_dict_type == "full"


@pytest.mark.parametrize(
    ("name", "sharding", "offload"),
    [
        ("fsdp_full_shard", ShardingStrategy.FULL_SHARD, False),
        ("fsdp_shard_grad_op", ShardingStrategy.SHARD_GRAD_OP, False),
        ("fsdp_hybrid", ShardingStrategy.HYBRID_SHARD, False),
        ("fsdp_offload", ShardingStrategy.FULL_SHARD, True),
    ],
)
def test_fsdp_presets_configuration(name: str, sharding: ShardingStrategy, offload: bool) -> None:
    strategy = preset(name, block_classes=[TransformerBlock])
    assert isinstance(strategy, RecipesFSDPStrategy)
    assert strategy.sharding_strategy is sharding
    assert bool(strategy.cpu_offload and strategy.cpu_offload.offload_params) is offload
    assert strategy.kwargs["use_orig_params"] is True
    assert strategy._state_dict_type == "sharded"
    wrap = strategy.kwargs["auto_wrap_policy"]
    assert isinstance(wrap, ModuleWrapPolicy) and wrap._module_classes == {TransformerBlock}
    checkpointing = strategy._activation_checkpointing_kwargs["auto_wrap_policy"]
    assert isinstance(checkpointing, ModuleWrapPolicy) and checkpointing._module_classes == {TransformerBlock}
    assert strategy.mixed_precision is None  # left to the Trainer's precision plugin


def test_fsdp_activation_checkpointing_opt_out_and_lazy_inference() -> None:
    assert preset("fsdp_full_shard", activation_checkpointing=False)._activation_checkpointing_kwargs == {}
    lazy = preset("fsdp_full_shard")
    policy = lazy.kwargs["auto_wrap_policy"]
    assert isinstance(policy, LazyBlockPolicy) and policy.block_classes is None
    assert lazy._activation_checkpointing_kwargs["auto_wrap_policy"] is policy  # same blocks for both
    model = TinyTransformerLM()
    assert policy(model, recurse=True, nonwrapped_numel=0)  # FSDP calls the root first
    assert policy.block_classes == (TransformerBlock,)
    assert policy(model.blocks[0], recurse=False, nonwrapped_numel=0)
    assert not policy(model.head, recurse=False, nonwrapped_numel=0)
    assert preset("fsdp_full_shard", model=model).block_classes == (TransformerBlock,)


@pytest.mark.parametrize(
    ("precision", "param_dtype"),
    [("32-true", torch.float32), ("bf16-mixed", torch.bfloat16), ("16-mixed", torch.float16)],
)
def test_fsdp_mixed_precision_follows_the_trainer(precision: str, param_dtype) -> None:
    strategy = preset("fsdp_full_shard")
    trainer = pl.Trainer(strategy=strategy, accelerator="cpu", devices=1, precision=precision)
    config = trainer.strategy.mixed_precision_config
    assert config.param_dtype == param_dtype


class Attention(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.qkv, self.out = nn.Linear(8, 24), nn.Linear(8, 8)


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.attn, self.mlp = Attention(), nn.Sequential(nn.Linear(8, 32), nn.GELU(), nn.Linear(32, 8))


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed, self.head = nn.Embedding(1000, 8), nn.Linear(8, 1000)
        self.layers = nn.ModuleList(Block() for _ in range(3))


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        (TinyTransformerLM(n_layers=2), TransformerBlock),
        (Net(), Block),  # Block beats its own Attention and the many Linears, though the Embedding is bigger
        (nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 4), nn.Linear(4, 2)), nn.Linear),
    ],
)
def test_block_inference_table(model: nn.Module, expected: type) -> None:
    assert infer_block_classes(model) == (expected,)


def test_block_inference_without_repeats_asks_for_block_classes() -> None:
    with pytest.raises(ValueError, match=r"Pass `block_classes=\.\.\.`"):
        infer_block_classes(nn.Sequential(nn.Linear(4, 4), nn.ReLU()))
    with pytest.raises(ValueError, match="cannot be imported"):
        preset("fsdp_full_shard", block_classes="lightning_recipes.testing.NoSuchBlock")
    with pytest.raises(ValueError, match=r"must hold nn\.Module subclasses"):
        preset("fsdp_full_shard", block_classes=[int])


class RecordingLM(TinyTransformerLM):
    calls: ClassVar[list[str]] = []

    def configure_model(self) -> None:
        RecordingLM.calls.append("configure_model")

    def training_step(self, batch, batch_idx):
        RecordingLM.calls.append("training_step")
        return super().training_step(batch, batch_idx)


@pytest.mark.parametrize("name", ["fsdp_full_shard", "fsdp_offload", "fsdp_hybrid"])
def test_fsdp1_on_cpu_is_refused_at_setup_before_any_work(name: str, tmp_path: Path) -> None:
    strategy = preset(name)  # building on a CPU machine is fine
    RecordingLM.calls = []
    trainer = fast_trainer(strategy=strategy, max_steps=1, default_root_dir=tmp_path)
    refusal = rf"`recipes_{name}` runs on Lightning's FSDPStrategy.*needs CUDA.*recipes_fsdp2"
    with pytest.raises(RuntimeError, match=refusal):
        trainer.fit(RecordingLM(), random_token_loader())
    assert RecordingLM.calls == []  # neither configure_model nor a training step ran


def test_offload_without_enough_host_memory_is_refused() -> None:
    def strategy(host_memory_gb: float) -> SimpleNamespace:
        return SimpleNamespace(
            lightning_module=TinyTransformerLM(), num_processes=8, num_nodes=1,
            host_memory_gb=host_memory_gb, preset_name="recipes_fsdp_offload",
        )  # fmt: skip

    with pytest.raises(RuntimeError, match=r"`recipes_fsdp_offload` offloads about .* GiB .* only 0.00 GiB"):
        refuse_offload_without_host_memory(strategy(1e-6), "32-true", "fsdp_offload")
    refuse_offload_without_host_memory(strategy(1.0), "32-true", "fsdp_offload")  # enough memory: no error
    check_host_memory(10**12, None, what="x")  # unknown host memory: nothing checked
    with pytest.raises(RuntimeError, match="pass `host_memory_gb=`"):
        check_host_memory(2 * 1024**3, 1024**3, what="recipes_deepspeed_zero3_offload")


CONFIG = """
model:
  class_path: lightning_recipes.testing.TinyTransformerLM
  init_args:
    n_layers: 1
trainer:
  accelerator: cpu
  devices: 1
  logger: false
  strategy: {strategy}
"""


FSDP2_CLASS_PATH = (
    "\n    class_path: lightning_recipes.strategies.RecipesFSDP2Strategy\n    init_args:\n"
    "      block_classes: [lightning_recipes.testing.TransformerBlock]\n      activation_checkpointing: false"
)


@pytest.mark.parametrize("strategy", ["recipes_ddp_static_graph", FSDP2_CLASS_PATH])
def test_lightning_cli_yaml_accepts_registered_name_and_class_path(
    strategy: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "argv", ["train.py"])
    path = tmp_path / "config.yaml"
    path.write_text(CONFIG.format(strategy=strategy))
    built = LightningCLI(args=["--config", str(path)], run=False).trainer.strategy
    if strategy == FSDP2_CLASS_PATH:
        assert isinstance(built, RecipesFSDP2Strategy)
        assert built.fsdp2_settings["block_classes"] == (TransformerBlock,)
        assert built.fsdp2_settings["activation_checkpointing"] is False
    else:
        assert isinstance(built, DDPStrategy) and built._ddp_kwargs["static_graph"] is True


def test_lazy_policy_drives_torch_fsdp1_wrapping_and_checkpointing(single_process_group: None) -> None:
    """What Lightning's FSDPStrategy does with the policy, done with torch FSDP1 directly (it runs on CPU)."""
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import (
        CheckpointWrapper,
        apply_activation_checkpointing,
        checkpoint_wrapper,
    )
    from torch.distributed.fsdp import FullyShardedDataParallel

    strategy = preset("fsdp_full_shard")
    model = TinyTransformerLM(n_layers=3)
    cpu = {"device_id": torch.device("cpu"), "use_orig_params": True}
    wrapped = FullyShardedDataParallel(model, auto_wrap_policy=strategy.kwargs["auto_wrap_policy"], **cpu)
    apply_activation_checkpointing(
        wrapped, checkpoint_wrapper_fn=checkpoint_wrapper, **strategy._activation_checkpointing_kwargs
    )
    assert sum(isinstance(m, FullyShardedDataParallel) for m in wrapped.modules()) == 1 + 3  # root + blocks
    assert sum(isinstance(m, CheckpointWrapper) for m in wrapped.modules()) == 3
    wrapped(torch.randint(0, 64, (2, 16))).sum().backward()
    assert all(p.grad is not None for p in wrapped.parameters())


def test_fsdp_precision_clips_by_the_global_norm_through_the_root_module(single_process_group: None) -> None:
    """#19235: norm clipping under FSDP via the root module's clip_grad_norm_ (torch FSDP1, CPU, 1 rank)."""
    import copy

    from torch.distributed.fsdp import FullyShardedDataParallel

    from lightning_recipes.strategies import RecipesFSDPPrecision

    with pytest.raises(Exception, match="not supported"):  # no root module yet: Lightning's own refusal
        RecipesFSDPPrecision("32-true").clip_grad_by_norm(None, 1.0)
    plugin = RecipesFSDPPrecision("32-true")
    model = TinyTransformerLM()
    reference = copy.deepcopy(model)
    cpu = {"device_id": torch.device("cpu"), "use_orig_params": True}
    wrapped = FullyShardedDataParallel(model, auto_wrap_policy=LazyBlockPolicy(), **cpu)
    tokens, target = next(iter(random_token_loader(batch_size=4)))
    model.loss(wrapped(tokens), target).backward()
    reference.loss(reference(tokens), target).backward()
    torch.nn.utils.clip_grad_norm_(reference.parameters(), 0.01)
    plugin.fsdp_module = wrapped
    plugin.clip_grad_by_norm(None, 0.01)
    norm = torch.linalg.vector_norm(torch.stack([p.grad.norm() for p in wrapped.parameters()]))
    assert norm == pytest.approx(0.01, rel=1e-4)
    for (name, p), q in zip(model.named_parameters(), reference.parameters()):
        torch.testing.assert_close(p.grad, q.grad, msg=name)


TORCHRUN = {"WORLD_SIZE": "4", "RANK": "3", "LOCAL_RANK": "1", "GROUP_RANK": "1", "LOCAL_WORLD_SIZE": "2",
            "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29500", "TORCHELASTIC_RUN_ID": "job"}  # fmt: skip
SLURM = {"SLURM_NTASKS": "4", "SLURM_NTASKS_PER_NODE": "2", "SLURM_PROCID": "3", "SLURM_LOCALID": "1",
         "SLURM_NODEID": "1", "SLURM_JOB_NAME": "train", "SLURM_JOB_ID": "42",
         "SLURM_NODELIST": "node[1-2]"}  # fmt: skip


@pytest.mark.parametrize("name", ["ddp", "fsdp_hybrid", "fsdp2"])
@pytest.mark.parametrize(
    ("env", "cluster"), [(TORCHRUN, "TorchElasticEnvironment"), (SLURM, "SLURMEnvironment")]
)
def test_presets_pick_up_multi_node_launchers(name: str, env: dict, cluster: str, monkeypatch) -> None:
    """2 nodes x 2 processes seen from global rank 3: Lightning's cluster environments drive the presets."""
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setattr("shutil.which", lambda cmd: "/usr/bin/srun" if cmd == "srun" else None)
    trainer = pl.Trainer(strategy=f"recipes_{name}", accelerator="cpu", devices=2, num_nodes=2, logger=False)
    assert type(trainer.strategy.cluster_environment).__name__ == cluster
    assert (trainer.num_nodes, trainer.world_size, trainer.global_rank, trainer.local_rank) == (2, 4, 3, 1)
    assert trainer.strategy.cluster_environment.creates_processes_externally
