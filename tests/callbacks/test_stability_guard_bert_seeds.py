"""Issue #25: ``StabilityGuard()`` defaults, behind a ``HealthMonitor``, leave healthy BERT fine-tuning alone
on 20 seeds: no event, no rollback, and no finding from the monitor.

The run is the one of ``test_stability_guard.py::test_default_guard_leaves_healthy_bert_finetuning_alone``: a
tiny randomly initialised ``transformers`` BERT (2 layers, width 32, dropout 0) fine-tuned with AdamW at 3e-4
for 60 steps on a synthetic text-classification task. It sits on a plateau at ln 2, then wobbles out of it by
+0.5-6% as it starts to learn: healthy, and the bumps the guard and the monitor must not take for problems.
"""

from __future__ import annotations

import pytest
import torch

from lightning_recipes.callbacks import StabilityGuard
from lightning_recipes.callbacks.health_monitor import Finding, HealthMonitor
from lightning_recipes.testing import fast_trainer
from tests.helpers.loss_recorder import LossRecorder

SEEDS = range(20)


@pytest.mark.parametrize("seed", SEEDS)
def test_guard_and_monitor_leave_healthy_bert_finetuning_alone(seed: int) -> None:
    pytest.importorskip("transformers", reason="the run fine-tunes a `transformers` BERT")
    from lightning_recipes.testing.finetune_models import TinyBertFinetune, loader, text_classification

    torch.manual_seed(seed)
    findings: list[Finding] = []
    monitor = HealthMonitor(check_every_n_steps=10, on_finding=findings.append)
    guard = StabilityGuard(verbose=False)  # the defaults under test
    recorder = LossRecorder()
    trainer = fast_trainer(max_steps=60, max_epochs=-1, callbacks=[recorder, monitor, guard])
    trainer.fit(TinyBertFinetune(lr=3e-4, dropout=0.0), loader(text_classification(seed=seed), 32, seed))
    assert len(recorder.losses) == 60  # the run went to its end
    assert guard.events == [] and guard.rollbacks == 0
    assert [(f.problem, f.step) for f in findings] == []
