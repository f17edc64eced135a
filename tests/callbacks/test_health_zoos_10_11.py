"""HealthMonitor's rules added after sealed zoos 10 and 11 were scored blind (issue #35): each test fails
without its rule, and each states the zoo run it comes from."""

from __future__ import annotations

import math

import pytest
import torch
from torch.nn import functional as F

from lightning_recipes.callbacks._health_collector import InputFreeLoss
from lightning_recipes.callbacks._health_evidence import evidence_of
from lightning_recipes.callbacks._health_rules import not_learning
from lightning_recipes.callbacks._health_window import DEFAULT_THRESHOLDS, CheckData, History

T = DEFAULT_THRESHOLDS


def _measured(call) -> list[float]:
    mode = InputFreeLoss()
    mode.start()
    call()
    mode.stop()
    return mode.pack(torch.device("cpu")).tolist()


def test_the_floor_of_a_loss_minimal_at_its_target_is_measured_with_the_input_free_guess() -> None:
    prediction, target = torch.tensor([[0.0], [2.0], [1.0]]), torch.tensor([[0.5], [1.5], [1.0]])
    var = torch.full((3, 1), 4.0)
    *_, count, _, floor, floors = _measured(lambda: F.gaussian_nll_loss(prediction, target, var, full=True))
    assert floors == count == 3
    assert floor / count == pytest.approx(0.5 * (math.log(4.0) + math.log(2 * math.pi)))  # the constant
    *_, count, _, floor, floors = _measured(lambda: F.mse_loss(prediction, target))
    assert floors == count and floor == 0.0
    logits, labels = torch.randn(3, 4), torch.tensor([0, 3, 1])  # class indices: no prediction equals them
    *_, count, _, floor, floors = _measured(lambda: F.cross_entropy(logits, labels))
    assert count == 3 and floors == 0


@pytest.mark.parametrize("floor", [1.612, math.nan])
def test_a_constant_in_the_loss_is_no_level_of_knowing_nothing(floor: float) -> None:
    # zoo 10: the pendulum stepper under a full Gaussian NLL with a fixed variance 4 (a constant 1.61): the
    # loss fell from 1.81 to 1.63, 90% of what it could lose, yet sits at 95% of its start and 3% under
    # its input-free guess: judged above the floor, it learns
    history = History(
        losses=[1.722, 1.691, 1.647, 1.634, 1.633, 1.628, 1.637, 1.628, 1.631, 1.629],
        loss_ses=[0.003] * 10,
        loss_steps=list(range(20, 220, 20)),
        ratios=[2e-3] * 10,
        start_loss=1.807,
    )
    data = CheckData(220, 10, loss_mean=1.632, loss_count=20, loss_std=0.01, param_norm=7.9)
    data.param_norm_start, data.update_ratio, data.group_numel = 7.39, {"field": 1.9e-3}, {"field": 4482}
    data.model_numel, data.grad_sampled, data.grad_total = 4482, True, 0.003
    data.input_free_loss, data.input_free_gap, data.input_free_gap_se = 1.68, 0.0539, 0.00645
    data.loss_floor = floor
    found = not_learning(evidence_of(data, history, T), named=False)
    assert (found is None) == math.isfinite(floor), found
