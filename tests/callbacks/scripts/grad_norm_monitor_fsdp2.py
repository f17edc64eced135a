"""FSDP2 (``ModelParallelStrategy`` + ``fully_shard``) on 2 CPU processes, run by test_grad_norm_monitor.py
in a subprocess; prints ``FSDP2-OK ...`` on rank zero when every check passed. Every step, every rank: sharded
DTensors; ``GradNormMonitor`` logs the full gradient's norm (2, inf, per group); ``AdaptiveGradClip``'s
applied gradient has norm ``min(norm, threshold)`` (recomputed with ``numpy.percentile``) and the unclipped
direction. ``--trainer-clip``: also prints what ``Trainer(gradient_clip_val=...)`` does."""

from __future__ import annotations

import math
import os
import sys

import lightning.pytorch as pl
import numpy as np
import torch
from lightning.pytorch.callbacks import Callback
from lightning.pytorch.strategies import ModelParallelStrategy
from torch import nn
from torch.distributed.tensor import DTensor

from lightning_recipes.callbacks import AdaptiveGradClip, GradNormMonitor
from lightning_recipes.testing import InMemoryLogger, random_classification_loader

STEPS = 8
LR = 0.05


class ShardedMLP(pl.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU())
        self.head = nn.Linear(64, 4)

    def configure_model(self) -> None:
        from torch.distributed.fsdp import fully_shard

        mesh = self.device_mesh["data_parallel"]
        for layer in (*self.encoder, self.head):
            if isinstance(layer, nn.Linear):
                fully_shard(layer, mesh=mesh)
        fully_shard(self, mesh=mesh)

    def training_step(self, batch, batch_idx):
        x, y = batch
        return nn.functional.cross_entropy(self.head(self.encoder(x)), y) * 10.0

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=LR)


def full_grads(module: pl.LightningModule) -> dict[str, torch.Tensor]:
    out = {}
    for name, p in module.named_parameters():
        assert isinstance(p, DTensor), f"{name} is not a DTensor: FSDP2 did not shard it"
        assert p.grad is not None and isinstance(p.grad, DTensor)
        out[name] = p.grad.full_tensor().detach().clone()
    return out


class Before(Callback):
    """Placed before the clipper: records the full gradient norms the callbacks must reproduce."""

    def __init__(self) -> None:
        self.norms: list[float] = []
        self.inf_norms: list[float] = []
        self.group_norms: list[dict[str, float]] = []
        self.directions: list[torch.Tensor] = []
        self.local_shapes_differ = False

    def on_before_optimizer_step(self, trainer, pl_module, optimizer):
        grads = full_grads(pl_module)
        flat = torch.cat([g.flatten() for g in grads.values()])
        self.norms.append(float(torch.linalg.vector_norm(flat)))
        self.inf_norms.append(float(torch.linalg.vector_norm(flat, math.inf)))
        groups: dict[str, list[torch.Tensor]] = {}
        for name, g in grads.items():
            groups.setdefault(name.split(".")[0], []).append(g.flatten())
        self.group_norms.append({k: float(torch.linalg.vector_norm(torch.cat(v))) for k, v in groups.items()})
        self.directions.append(flat / flat.norm())
        p = next(pl_module.parameters())
        self.local_shapes_differ = self.local_shapes_differ or p.to_local().shape != p.shape


class Applied(Callback):
    """Placed last: the gradient the optimizer really applied, from the parameter change (SGD: ``-lr *
    g``)."""

    def __init__(self, lr: float) -> None:
        self.lr = lr
        self.norms: list[float] = []
        self.directions: list[torch.Tensor] = []
        self.update_ratios: list[float] = []
        self._before: torch.Tensor | None = None

    @staticmethod
    def _flat_params(pl_module) -> torch.Tensor:
        return torch.cat([p.full_tensor().detach().flatten() for p in pl_module.parameters()])

    def on_before_optimizer_step(self, trainer, pl_module, optimizer):
        self._before = self._flat_params(pl_module)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        assert self._before is not None
        applied = (self._before - self._flat_params(pl_module)) / self.lr
        self.norms.append(float(torch.linalg.vector_norm(applied)))
        self.directions.append(applied / applied.norm())
        self.update_ratios.append(float((applied * self.lr).norm() / self._before.norm()))


def expected_after(norms: list[float], percentile: float, window: int, warmup: int) -> list[float]:
    """AutoClip, transcribed: record the norm, clip at the percentile of the last `window` recorded norms."""
    out = []
    for t, norm in enumerate(norms):
        history = norms[max(0, t + 1 - window) : t + 1]
        threshold = float(np.percentile(history, percentile)) if t + 1 > warmup else math.inf
        out.append(min(norm, threshold))
    return out


def trainer(callbacks, logger=None, **kwargs) -> pl.Trainer:
    return pl.Trainer(
        accelerator="cpu",
        devices=2,
        strategy=ModelParallelStrategy(data_parallel_size=2, tensor_parallel_size=1),
        max_steps=STEPS,
        logger=logger if logger is not None else False,
        log_every_n_steps=1,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=callbacks,
        **kwargs,
    )


def main() -> int:
    torch.manual_seed(0)
    logger = InMemoryLogger()
    before, after = Before(), Applied(lr=LR)
    callbacks = [
        before,
        GradNormMonitor(norm_type=math.inf, prefix="inf/"),
        GradNormMonitor(
            group_by=1, log_update_ratio=True
        ),  # last before the clipper: it reuses these (sharded, local) powers
        AdaptiveGradClip(percentile=50, window=4, warmup_steps=2),
        after,
    ]
    t = trainer(callbacks, logger)
    t.fit(ShardedMLP(), random_classification_loader(num_samples=512, batch_size=16))
    assert before.local_shapes_differ, "parameters were not sharded"
    if t.is_global_zero:
        logged = logger.values("grad_norm/total")
        np.testing.assert_allclose(logged, before.norms, rtol=1e-5, err_msg="2-norm vs full gradient")
        np.testing.assert_allclose(logger.values("inf/grad_norm/total"), before.inf_norms, rtol=1e-6)
        for group in ("encoder", "head"):
            expected = [g[group] for g in before.group_norms]
            np.testing.assert_allclose(logger.values(f"grad_norm/{group}"), expected, rtol=1e-5)
        # norms.update_ratios over the shards: the full parameters' change over their norm
        np.testing.assert_allclose(logger.values("update_ratio/total"), after.update_ratios, rtol=1e-4)
    want = expected_after(before.norms, percentile=50, window=4, warmup=2)
    np.testing.assert_allclose(after.norms, want, rtol=1e-3, err_msg="applied norm vs AutoClip reference")
    assert any(a < b * 0.999 for a, b in zip(after.norms, before.norms)), "clipping never fired"
    for d0, d1 in zip(before.directions, after.directions):
        assert float(torch.dot(d0, d1)) > 1 - 1e-4, "clipping changed the gradient direction"

    trainer_clip = "not probed (pass --trainer-clip)"
    if "--trainer-clip" in sys.argv:
        trainer_clip = probe_trainer_clip()
    if int(os.environ.get("LOCAL_RANK", "0")) == 0:
        clipped = sum(a < b * 0.999 for a, b in zip(after.norms, before.norms))
        print(f"FSDP2-OK steps={len(before.norms)} clipped={clipped}")
        print(f"TRAINER-CLIP {trainer_clip}")
    return 0


def probe_trainer_clip() -> str:
    """What the Trainer's own norm clipping does under the same strategy (recorded for the docs)."""
    probe = Applied(lr=LR)
    try:
        trainer([probe], gradient_clip_val=0.01, gradient_clip_algorithm="norm").fit(
            ShardedMLP(), random_classification_loader(num_samples=512, batch_size=16)
        )
        trainer_clip = (
            "ran; applied full-gradient norms with gradient_clip_val=0.01: "
            f"{[round(n, 5) for n in probe.norms[:4]]}"
        )
    except Exception as err:
        trainer_clip = f"refused: {type(err).__name__}: {str(err).splitlines()[0][:160]}"
    return trainer_clip


if __name__ == "__main__":
    sys.exit(main())
