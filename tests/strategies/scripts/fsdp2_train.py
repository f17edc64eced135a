"""2 CPU ranks of ``recipes_fsdp2`` (``python fsdp2_train.py OUT_DIR``, run by test_fsdp2.py): each writes
``OUT_DIR/rank{r}.json`` (losses straight and resumed, shard bytes, the estimate, the no-mixin error), then
``hf_fsdp2_train.py`` runs in the same processes into ``OUT_DIR/hf``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import lightning.pytorch as pl
import torch
from lightning.pytorch.callbacks import Callback
from torch.distributed._composable import _get_registry

from lightning_recipes.strategies import FSDP2Mixin, estimate_memory, preset
from lightning_recipes.testing import TinyTransformerLM, fast_trainer, random_token_loader


class ShardedLM(FSDP2Mixin, TinyTransformerLM):
    pass


class Bytes(Callback):
    """Record the local bytes of parameters, gradients and optimizer state after the first optimizer step."""

    def __init__(self) -> None:
        self.record: dict[str, int] = {}

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if self.record:
            return
        params = [p for p in pl_module.parameters() if p.requires_grad]
        local = [getattr(p, "_local_tensor", p) for p in params]
        grads = [getattr(p.grad, "_local_tensor", p.grad) for p in params]
        state = trainer.optimizers[0].state
        opt = 0
        for per_param in state.values():
            for value in per_param.values():
                if isinstance(value, torch.Tensor):
                    opt += getattr(value, "_local_tensor", value).nbytes
        self.record = {
            "parameters": sum(t.nbytes for t in local),
            "gradients": sum(g.nbytes for g in grads),
            "optimizer_state": opt,
            "dtensor": int(type(params[0]).__name__ == "DTensor"),
            "block_apis": sorted(_get_registry(pl_module.blocks[0]) or {}),
            "root_apis": sorted(_get_registry(pl_module) or {}),
        }


def trainer(root: Path, max_epochs: int, callbacks=()) -> pl.Trainer:
    # gradient_clip_val = tests/strategies/_reference.CLIP; by norm over all shards (DTensor grads)
    settings = {"max_epochs": max_epochs, "default_root_dir": root, "gradient_clip_val": 0.1}
    return fast_trainer(devices=2, strategy=preset("fsdp2"), callbacks=list(callbacks), **settings)


def val_loss(t: pl.Trainer, model: pl.LightningModule) -> float:
    loader = random_token_loader(num_samples=64, batch_size=16, seed=1)
    return float(t.validate(model, loader, verbose=False)[0]["val_loss"])


def main(out: Path) -> None:
    # 4 steps an epoch; bounded by epochs: a checkpoint at max_steps on an epoch's end resumes inside it
    loader = lambda: random_token_loader(num_samples=64, batch_size=8, seed=0)  # noqa: E731

    torch.manual_seed(0)
    straight = ShardedLM()
    bytes_cb = Bytes()
    t1 = trainer(out / "straight", 2, [bytes_cb])
    t1.fit(straight, loader())
    loss_straight = val_loss(t1, straight)

    torch.manual_seed(0)
    first = ShardedLM()
    t2 = trainer(out / "resume", 1)
    t2.fit(first, loader())
    ckpt = out / "resume" / "half.ckpt"
    t2.save_checkpoint(ckpt)  # a distributed checkpoint: a folder with one shard file per rank
    torch.manual_seed(123)  # the resumed run must not depend on the fresh init
    second = ShardedLM()
    t3 = trainer(out / "resume", 2)
    t3.fit(second, loader(), ckpt_path=ckpt)
    loss_resumed = val_loss(t3, second)

    estimate = estimate_memory(TinyTransformerLM(), strategy="fsdp2", devices=2, optimizer="adamw")
    error = ""
    try:
        trainer(out / "plain", 1).fit(TinyTransformerLM(), loader())
    except TypeError as err:
        error = str(err)

    rank = t1.global_rank
    record = {
        "rank": rank,
        "world_size": t1.world_size,
        "loss_straight": loss_straight,
        "loss_resumed": loss_resumed,
        "global_step_resumed": t3.global_step,
        "checkpoint_is_dir": ckpt.is_dir(),
        "measured": bytes_cb.record,
        "estimate": {
            "parameters": estimate.parameters,
            "gradients": estimate.gradients,
            "optimizer_state": estimate.optimizer_state,
        },
        "error": error,
    }
    (out / f"rank{rank}.json").write_text(json.dumps(record))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
    try:
        from hf_fsdp2_train import main as hf_main  # this folder: the script's own
    except ImportError:  # no transformers: tests/strategies/test_fsdp2_hf.py skips
        pass
    else:
        (Path(sys.argv[1]) / "hf").mkdir(exist_ok=True)
        hf_main(Path(sys.argv[1]) / "hf")
