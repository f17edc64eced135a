"""HealthMonitor: arguments, syncs, logging, warnings, raising, state, DDP agreement."""

from __future__ import annotations

import json
import math
import pickle
from dataclasses import asdict
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import pytest
import torch
from torch import Tensor
from torch.utils.data import DataLoader

from lightning_recipes.callbacks._health_rules import decide
from lightning_recipes.callbacks._health_window import DEFAULT_THRESHOLDS, CheckData, History
from lightning_recipes.callbacks.health_monitor import Finding, HealthMonitor
from lightning_recipes.testing import InMemoryLogger, fast_trainer
from tests.callbacks._shared import (
    STEP_HOOKS,
    CountedForward,
    DumpPerRank,
    OpCounter,
    SyncCounting,
    callback_of,
    counted,
    per_rank,
)
from tests.helpers.health_gallery import MLP
from tests.helpers.health_gallery import classification as _classification
from tests.helpers.health_gallery import loader as _loader


def test_a_threshold_must_be_positive() -> (
    None
):  # the argument table: tests/callbacks/test_constructor_validation
    with pytest.raises(ValueError, match=r"`thresholds\['dead_fraction'\]` must be a finite number > 0"):
        HealthMonitor(thresholds={"dead_fraction": -1})


def test_the_unused_spike_threshold_warns_that_it_has_no_effect() -> None:
    from lightning_recipes._deprecation import LightningRecipesDeprecationWarning

    with pytest.warns(LightningRecipesDeprecationWarning, match="spike_z"):
        monitor = HealthMonitor(thresholds={"spike_z": 8.0})
    assert monitor.thresholds["spike_z"] == 8.0


# ------------------------------------------------------------------------------------------------ rules


def test_a_group_with_a_gradient_that_no_step_moves_is_frozen_by_the_optimizer_not_a_low_lr() -> None:
    from lightning_recipes.callbacks._health_evidence import UpdateRatios, evidence_of
    from lightning_recipes.callbacks._health_rules_layers import vanishing_gradients

    grads = {"encoder": 0.1, "decoder": 0.1}
    frozen = CheckData(
        0, 0, update_ratio={"encoder": 0.0, "decoder": 1e-3}, group_grad_rms=grads,
        group_numel={"encoder": 10_000, "decoder": 100}, grad_sampled=True,
    )  # fmt: skip
    ratios = UpdateRatios(frozen)
    assert ratios.unstepped == ["encoder"] and ratios.median == 1e-3  # the LR read from what trains
    history = History(streaks={"vanishing_gradients": 5})
    assert vanishing_gradients(evidence_of(frozen, history, DEFAULT_THRESHOLDS)) is None
    # every group still (a collapsed LR) is the LR's; a gradient that is 0 too is no gradient, not frozen
    for ratio, grad in ((0.0, 0.1), (1e-3, 0.0)):
        data = CheckData(
            0, 0, update_ratio={"encoder": 0.0, "decoder": ratio}, group_grad_rms={"encoder": grad}
        )
        assert not UpdateRatios(data).unstepped


def test_overfitting_rule_is_prechelts_generalisation_loss_by_hand() -> None:
    """GL = 100 (val / best - 1) above 5 at three validations in a row (Prechelt's GL5, UP3)."""
    history = History()
    validations = [
        (0, 1.2, 1.3),
        (1, 1.0, 1.0),
        (2, 1.04, 0.9),
        (3, 1.06, 0.8),
        (4, 1.08, 0.7),
        (5, 1.10, 0.6),
    ]
    rows = [(e, v, t, 0.005, 10_000) for e, v, t in validations]
    data = CheckData(step=10, epoch=5, loss_mean=0.6, validations=rows)
    found = decide(data, history, DEFAULT_THRESHOLDS)
    evidence = found["overfitting"][0]
    assert evidence["best_epoch"] == 1 and evidence["began_epoch"] == 2
    assert math.isclose(evidence["gl"], 100 * (1.10 / 1.0 - 1))
    assert history.streaks["overfitting"] == 3  # GL 6, 8 and 10; GL 4 did not count


def test_lr_rules_use_the_update_ratio_with_the_loss() -> None:
    history = History(losses=[1.0], loss_ses=[0.01], loss_steps=[0])
    high = CheckData(
        step=20, epoch=0, loss_mean=1.2, loss_count=20, loss_std=0.05, update_ratio={"a": 0.05, "b": 0.02}
    )
    assert "lr_too_high" in decide(high, history, DEFAULT_THRESHOLDS)
    history = History(losses=[1.0], loss_ses=[0.01], loss_steps=[0])
    falling = CheckData(
        step=20, epoch=0, loss_mean=0.8, loss_count=20, loss_std=0.05, update_ratio={"a": 0.05}
    )
    assert "lr_too_high" not in decide(falling, history, DEFAULT_THRESHOLDS)  # large steps, but it learns


# ------------------------------------------------------------------------------------------------ syncs


def test_zero_host_syncs_between_checks_and_one_per_check() -> None:
    monitor = SyncCounting(check_every_n_steps=5, activation_samples=2)
    model = CountedForward()
    fast_trainer(max_steps=10, max_epochs=-1, callbacks=[monitor], limit_val_batches=0).fit(
        model, _loader(_classification())
    )
    assert model.forward_syncs == [0] * 10  # hooks on steps 3, 4, 8, 9: no sync
    assert monitor.syncs == [0, 0, 0, 0, 1, 0, 0, 0, 0, 1]
    assert monitor.checks == 2


#: the device ops of the four training-step hooks, per step (one entry per batch: no accumulation here)
OpCounting = counted(HealthMonitor, STEP_HOOKS, "ops", OpCounter)


class CountedModel(MLP):
    """The ops of each ``training_step`` (the forward, with the monitor's hooks on sampled steps)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.ops: list[int] = []

    def training_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> Tensor:
        with OpCounter() as counter:
            loss = super().training_step(batch, batch_idx)
        self.ops.append(len(counter.ops))
        return loss


def test_per_step_work_between_checks_is_one_op_whatever_the_parameter_count() -> None:
    """Between checks a step does one fused norm and no host read; a sampled forward a few ops a module."""
    per_step, sampled = {}, {}
    for widths in ((16, 32, 4), (16, 32, 32, 32, 32, 32, 4)):
        monitor = OpCounting(check_every_n_steps=10, activation_samples=2)
        model = CountedModel(widths=widths)
        torch.manual_seed(0)
        fast_trainer(max_steps=30, max_epochs=-1, callbacks=[monitor], limit_val_batches=0).fit(
            model, _loader(_classification())
        )
        between = [ops for step, ops in enumerate(monitor.ops) if step >= 10 and step % 10 < 8]
        assert len(between) == 16
        for ops in between:
            assert ops == ["aten._foreach_norm.Scalar"], ops
        for step in (19, 29):  # the check steps scan the interval's batches
            assert "aten.max.dim" in monitor.ops[step]
        per_step[len(widths)] = {len(ops) for ops in between}
        bare = model.ops[10]
        sampled[len(widths)] = [model.ops[step] - bare for step in (18, 19, 28, 29)]
    assert per_step[3] == per_step[7] == {1}, per_step
    # per Linear 3 ops (its positive units: gt, any over the other dims; its output's sum), per ReLU 1 (its
    # output's sum: its mask is the Linear's, its input the Linear's output, summed already), the batch's sum
    # once; the second sampled batch ORs each mask into the first's. 2 Linear + 1 ReLU, then 6 Linear + 5
    # ReLU; and 13 per sampled batch whatever the depth: its loss evaluated per element at the prediction and
    # at its batch mean (the input-free guess, ``InputFreeLoss``), their difference summed into 3 float64
    # sums (the second batch adds its sums to the first's: one more):
    input_free = 13
    assert sampled[3] == [8 + input_free, 11 + input_free + 1] * 2, sampled
    assert sampled[7] == [24 + input_free, 35 + input_free + 1] * 2, sampled


# ------------------------------------------------------------------------------------ findings, logging


def _dead_relu_fit(monitor: HealthMonitor, max_steps: int = 60, **kwargs: Any) -> pl.Trainer:
    trainer = fast_trainer(
        max_steps=max_steps, max_epochs=-1, callbacks=[monitor], limit_val_batches=0, **kwargs
    )
    torch.manual_seed(0)
    trainer.fit(MLP(bias_init=-6.0), _loader(_classification()))
    return trainer


def test_finding_is_logged_warned_once_and_reported() -> None:
    logger = InMemoryLogger()
    monitor = HealthMonitor(check_every_n_steps=10)
    with pytest.warns(UserWarning, match="HealthMonitor: dead_units at step 20") as warned:
        _dead_relu_fit(monitor, logger=logger)
    assert sum("HealthMonitor" in str(w.message) for w in warned) == 1
    assert [(f.problem, f.step) for f in monitor.findings] == [("dead_units", 20)]
    evidence = monitor.findings[0].evidence["dead_fraction"]
    # the ReLU modules and the Linear layers feeding them; not the output layer
    assert set(evidence) == {"net.0", "net.1", "net.2", "net.3"} and all(v >= 0.5 for v in evidence.values())
    # logged at every check (steps 10 ... 60) at the step Lightning uses for that batch
    assert logger.history("health/dead_units") == [
        (9, 0.0),
        (19, 1.0),
        (29, 1.0),
        (39, 1.0),
        (49, 1.0),
        (59, 1.0),
    ]
    assert logger.last("health/lr_too_high") == 0.0
    assert json.loads(monitor.to_json())["findings"][0]["problem"] == "dead_units"
    table = monitor.report(print_table=False)
    assert table.row_count == 1


def test_on_finding_raise_stops_the_run() -> None:
    with pytest.raises(RuntimeError, match="HealthMonitor: dead_units at step 20"):
        _dead_relu_fit(HealthMonitor(check_every_n_steps=10, on_finding="raise"))


def test_state_dict_round_trip_and_resume_keeps_findings(tmp_path: Path) -> None:
    seen: list[Finding] = []  # on_finding as a callable receives each finding
    monitor = HealthMonitor(check_every_n_steps=10, on_finding=seen.append)
    trainer = _dead_relu_fit(monitor, max_steps=30, default_root_dir=tmp_path)
    assert [f.problem for f in seen] == ["dead_units"]
    path = tmp_path / "health.ckpt"
    trainer.save_checkpoint(path)
    clone = HealthMonitor(check_every_n_steps=10)
    clone.load_state_dict(monitor.state_dict())
    assert clone.state_dict() == monitor.state_dict()
    assert clone.findings == monitor.findings and clone.checks == 3
    empty = HealthMonitor()
    empty.load_state_dict({})  # an empty or old state loads
    assert empty.findings == [] and empty.checks == 0

    resumed = HealthMonitor(check_every_n_steps=10, on_finding=lambda f: None)
    trainer = fast_trainer(
        max_steps=50, max_epochs=-1, callbacks=[resumed], limit_val_batches=0, default_root_dir=tmp_path
    )
    trainer.fit(MLP(bias_init=-6.0), _loader(_classification()), ckpt_path=path)
    # the problem was already active when the checkpoint was written: no second finding for it
    assert [(f.problem, f.step) for f in resumed.findings] == [("dead_units", 20)]
    assert resumed.checks == 5


# ------------------------------------------------------------------------------------------------- DDP


class NonfiniteOnRankOne(MLP):
    """Rank 1's inputs carry an inf on the last step of the first interval (step 9); rank 0's never do."""

    def forward(self, x: Tensor) -> Tensor:
        if self.global_rank == 1 and self.global_step == 9:
            x = x.clone()
            x[:, 0] = float("inf")
        return super().forward(x)


def test_ddp_problem_on_one_rank_is_reported_by_every_rank(tmp_path: Path) -> None:
    """Forked ranks with a pickled monitor and model, as ddp_spawn's (no fresh interpreters)."""
    monitor = pickle.loads(pickle.dumps(HealthMonitor(check_every_n_steps=10, activation_samples=2)))
    dump = DumpPerRank(tmp_path, lambda t, _: [asdict(f) for f in callback_of(t, HealthMonitor).findings])
    trainer = fast_trainer(
        max_steps=10,
        max_epochs=-1,
        strategy="ddp_fork",
        devices=2,
        limit_val_batches=0,
        callbacks=[monitor, dump],
    )
    model = pickle.loads(pickle.dumps(NonfiniteOnRankOne()))
    trainer.fit(model, DataLoader(_classification(), batch_size=32))
    findings = per_rank(tmp_path)
    assert findings[0] == findings[1]
    assert [(f["problem"], f["step"], f["evidence"]["first_module"]) for f in findings[0]] == [
        ("nonfinite_activations", 10, "net.0")
    ]
