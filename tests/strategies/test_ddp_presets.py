"""DDP presets on 2 real CPU processes: same loss as one process, exact resume, exact memory figures."""

from __future__ import annotations

import json
import math
import pickle
from pathlib import Path

import lightning.pytorch as pl
import pytest
import torch
from lightning.pytorch.callbacks import Callback, ModelCheckpoint

from lightning_recipes.strategies import estimate_memory, preset
from lightning_recipes.testing import (
    TinyClassifier,
    TinyTransformerLM,
    fast_trainer,
    random_classification_loader,
)

from ._reference import CLIP, eval_loss, single_process_reference, train_loader_per_rank


class RecordBytes(Callback):
    """After the first optimizer step: this rank's tensor bytes and the estimator's figures, to a file."""

    def __init__(self, out: Path, optimizer: str, precision: str) -> None:
        self.out, self.optimizer, self.precision = out, optimizer, precision

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if trainer.global_step != 1:
            return
        params = [p for p in pl_module.parameters() if p.requires_grad]
        state = trainer.optimizers[0].state
        moments = [v for s in state.values() for v in s.values() if isinstance(v, torch.Tensor)]
        measured = {"parameters": sum(p.nbytes for p in params)}
        measured["gradients"] = sum(p.grad.nbytes for p in params)
        measured["optimizer_state"] = sum(v.nbytes for v in moments)
        setup = {"optimizer": self.optimizer, "precision": self.precision}
        estimate = estimate_memory(pl_module, strategy="ddp", devices=trainer.num_devices, **setup)
        estimated = {k: getattr(estimate, k) for k in measured}
        record = {"measured": measured, "estimate": estimated, "master_weights": estimate.master_weights}
        (self.out / f"rank{trainer.global_rank}.json").write_text(json.dumps(record))


class SGDMomentumLM(TinyTransformerLM):
    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1, momentum=0.9)


def _ddp_trainer(tmp_path: Path, **kwargs) -> pl.Trainer:
    strategy = preset("ddp", start_method="fork")
    settings = {"devices": 2, "strategy": strategy, "default_root_dir": tmp_path, "gradient_clip_val": CLIP}
    return fast_trainer(**settings, **kwargs)


def test_ddp_preset_trains_like_single_process_and_resumes_exactly(tmp_path: Path) -> None:
    torch.manual_seed(0)
    straight = TinyTransformerLM()
    _ddp_trainer(tmp_path / "a", max_epochs=2).fit(straight, train_loader_per_rank())
    loss_straight = eval_loss(straight)  # fork launcher copies rank 0's weights back into this process
    reference = single_process_reference()
    assert math.isclose(loss_straight, reference, rel_tol=1e-4), (loss_straight, reference)
    unclipped = single_process_reference(gradient_clip_val=None)
    assert not math.isclose(reference, unclipped, rel_tol=1e-3)  # clip active
    assert loss_straight < math.log(64) - 0.5

    torch.manual_seed(0)
    first = TinyTransformerLM()
    checkpoint = ModelCheckpoint(dirpath=tmp_path / "ckpt", filename="{epoch}", save_top_k=-1)
    trainer = _ddp_trainer(tmp_path / "b", max_epochs=1, callbacks=[checkpoint], enable_checkpointing=True)
    trainer.fit(first, train_loader_per_rank())
    ckpt = tmp_path / "ckpt" / "epoch=0.ckpt"
    assert ckpt.is_file()
    torch.manual_seed(123)  # a different init: everything must come from the checkpoint
    resumed = TinyTransformerLM()
    _ddp_trainer(tmp_path / "c", max_epochs=2).fit(resumed, train_loader_per_rank(), ckpt_path=ckpt)
    assert eval_loss(resumed) == pytest.approx(loss_straight, rel=1e-6)


@pytest.mark.parametrize(
    ("module_cls", "optimizer", "precision"),
    [(TinyTransformerLM, "adamw", "32-true"), (SGDMomentumLM, "sgd_momentum", "bf16-mixed")],
)
def test_estimate_matches_real_ddp_tensor_bytes_exactly(
    tmp_path: Path, module_cls, optimizer, precision
) -> None:
    model = module_cls()
    callback = RecordBytes(tmp_path, optimizer, precision)
    trainer = _ddp_trainer(tmp_path, max_steps=2, callbacks=[callback], precision=precision)
    trainer.fit(model, train_loader_per_rank())
    for rank in range(2):
        record = json.loads((tmp_path / f"rank{rank}.json").read_text())
        assert record["measured"] == record["estimate"], record
        assert record["master_weights"] == 0  # torch AMP keeps fp32 weights, no separate master copy


def test_ddp_static_graph_preset_trains_on_two_processes(tmp_path: Path) -> None:
    # fork: spawn workers can abort in gloo's teardown (a torch race); pickling: test_presets_pickle_for_spawn
    strategy = preset("ddp_static_graph", start_method="fork")
    model = TinyClassifier()
    before = model.hidden.weight.detach().clone()
    trainer = fast_trainer(devices=2, strategy=strategy, max_steps=2, default_root_dir=tmp_path)
    trainer.fit(model, random_classification_loader())
    assert not torch.equal(before, model.hidden.weight)  # rank 0's trained weights came back from the workers
    assert strategy._ddp_kwargs == {"gradient_as_bucket_view": True, "static_graph": True}


@pytest.mark.parametrize("name", ["ddp", "ddp_static_graph", "fsdp_full_shard", "fsdp_offload", "fsdp2"])
def test_presets_pickle_for_spawn(name: str) -> None:
    strategy = pickle.loads(pickle.dumps(preset(name)))
    assert type(strategy) is type(preset(name))
