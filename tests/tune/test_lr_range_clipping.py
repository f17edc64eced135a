"""The sweep clips gradients exactly as the run does (the Trainer's settings or the module's own hook)."""

from __future__ import annotations

from typing import Any

import lightning.pytorch as pl
import pytest
import torch

from lightning_recipes.testing import TinyClassifier, fast_trainer, random_classification_loader
from lightning_recipes.tune import LRRangeTest, find_lr
from tests.helpers.loss_recorder import LossRecorder

MIN_LR, MAX_LR, STEPS = 1e-2, 10.0, 12
RATIO = (MAX_LR / MIN_LR) ** (1 / (STEPS - 1))


class SweepScheduleClassifier(TinyClassifier):
    """SGD at lr 1 with a per-step schedule that walks the sweep's exponential LRs."""

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        return 100.0 * super().training_step(batch, batch_idx)

    def configure_optimizers(self) -> Any:
        optimizer = torch.optim.SGD(self.parameters(), lr=1.0)
        schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: MIN_LR * RATIO**step)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": schedule, "interval": "step"}}


class HookClippedClassifier(SweepScheduleClassifier):
    """Clips in its own ``configure_gradient_clipping`` (no Trainer setting), by value then by norm."""

    def configure_gradient_clipping(
        self, optimizer: Any, gradient_clip_val: Any = None, gradient_clip_algorithm: Any = None
    ) -> None:
        torch.nn.utils.clip_grad_value_(self.parameters(), 0.05)
        self.clip_gradients(optimizer, gradient_clip_val=0.3, gradient_clip_algorithm="norm")


def _run_losses(model: pl.LightningModule, **trainer_args: Any) -> list[float]:
    recorder = LossRecorder()
    trainer = fast_trainer(max_steps=STEPS, callbacks=[recorder], **trainer_args)
    trainer.fit(model, random_classification_loader(num_samples=512))
    return recorder.losses


def _sweep_losses(model: pl.LightningModule, **trainer_args: Any) -> list[float]:
    finder = LRRangeTest(
        min_lr=MIN_LR, max_lr=MAX_LR, num_steps=STEPS, divergence=1e9, stop=True, print_result=False
    )
    fast_trainer(max_steps=1, callbacks=[finder], **trainer_args).fit(
        model, random_classification_loader(num_samples=512)
    )
    assert finder.result is not None
    return finder.result.losses


@pytest.mark.parametrize(
    ("model_class", "clip_args"),
    [
        (SweepScheduleClassifier, {"gradient_clip_val": 0.5}),
        (SweepScheduleClassifier, {"gradient_clip_val": 0.01, "gradient_clip_algorithm": "value"}),
        (HookClippedClassifier, {}),
    ],
    ids=["trainer-norm", "trainer-value", "module-hook"],
)
def test_every_entry_point_sweeps_the_curve_of_the_clipped_run(model_class: type, clip_args: dict[str, Any]):
    """The callback (Trainer clipping) and find_lr (its arguments) sweep clipped gradients (before: x100)."""
    torch.manual_seed(0)
    model = model_class()
    run = _run_losses(_copy(model), **clip_args)
    assert _sweep_losses(_copy(model), **clip_args) == pytest.approx(run, rel=1e-4)
    sweep = {"min_lr": MIN_LR, "max_lr": MAX_LR, "num_steps": STEPS, "divergence": 1e9}
    loader = random_classification_loader(num_samples=512)
    result = find_lr(_copy(model), train_dataloaders=loader, **sweep, **clip_args)
    assert result.losses == pytest.approx(run, rel=1e-4)
    if clip_args:  # without the arguments the sweep does not clip: the clipping is what matched
        unclipped = find_lr(_copy(model), train_dataloaders=loader, **sweep)
        assert unclipped.losses[1:] != pytest.approx(run[1:], rel=1e-2)


def _copy(model: pl.LightningModule) -> pl.LightningModule:
    clone = type(model)()
    clone.load_state_dict(model.state_dict())
    return clone
