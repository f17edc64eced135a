"""HealthMonitor's attribution rules added after sealed zoos 8 and 9 were scored blind (issue #35): each test
fails without its rule, and each states the zoo run it comes from."""

from __future__ import annotations

from typing import Any

import lightning.pytorch as pl
import pytest
import torch
from torch import Tensor, nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset

from lightning_recipes.callbacks._health_evidence import evidence_of
from lightning_recipes.callbacks._health_rules import lr_too_high, lr_too_low
from lightning_recipes.callbacks._health_rules_layers import (
    dead_units,
    saturated_activations,
    vanishing_gradients,
)
from lightning_recipes.callbacks._health_window import DEFAULT_THRESHOLDS, CheckData, History
from lightning_recipes.callbacks.health_monitor import HealthMonitor
from lightning_recipes.testing import fast_trainer

pytestmark = pytest.mark.usefixtures("one_torch_thread")
T = DEFAULT_THRESHOLDS


def _tables(sparse: bool) -> CheckData:
    data = CheckData(260, 3, loss_mean=1.23, loss_count=20, loss_std=0.01, loss_head=1.386)
    data.update_ratio, data.group_numel = (
        {"centre": 0.011, "context": 0.011},
        {"centre": 6400, "context": 6400},
    )
    data.group_family, data.group_lr = {"centre": "adaptive", "context": "adaptive"}, {"centre": 0.01}
    data.sparse_groups = {"centre", "context"} if sparse else set()
    return data


@pytest.mark.parametrize("sparse", [True, False])
def test_embedding_tables_update_ratios_are_no_lr_evidence_below_the_starting_loss(sparse: bool) -> None:
    # zoo 9: a healthy skip-gram (Adam 1e-2, tables from ~0) whose noisy loss rose from 1.19 to 1.23: its
    # tables move ~1% per step as healthy tables do; dense layers at that ratio with that rise are the LR's
    history = History(losses=[1.30, 1.19], loss_ses=[0.002, 0.002], loss_steps=[220, 240], start_loss=1.386)
    found = lr_too_high(evidence_of(_tables(sparse), history, T))
    assert (found is None) == sparse, found


def test_a_layer_thrown_around_while_the_loss_goes_nowhere_is_the_lr_not_vanishing_gradients() -> None:
    # zoo 9: an LSTM LM under plain SGD at 200: the head moves ~25% of its norm per step, the LSTM's tiny
    # gradient (saturated gates) hides the head's behind a weighted median of 1e-7
    history = History(losses=[33.0] * 4, loss_ses=[0.5] * 4, loss_steps=[20, 40, 60, 80], start_loss=49.0)
    found = vanished = None
    for step in (100, 120, 140, 160, 180):
        data = CheckData(step, 1, loss_mean=33.0, loss_count=20, loss_std=2.0, grad_sampled=True)
        data.update_ratio, data.group_numel = {"lstm": 5e-8, "out": 0.25}, {"lstm": 20_000, "out": 2_000}
        data.group_family, data.group_lr = {"lstm": "sgd", "out": "sgd"}, {"lstm": 200.0, "out": 200.0}
        data.group_grad_rms = {"lstm": 2e-8, "out": 0.013}
        e = evidence_of(data, history, T)
        found, vanished = lr_too_high(e) or found, vanishing_gradients(e) or vanished
        history.losses.append(33.0), history.loss_ses.append(0.5), history.loss_steps.append(step)
    assert vanished is None
    assert (
        found is not None
        and found[0]["largest_groups"] == {"out": 0.25}
        and "`out`" in found[1]
        and "over 0.1 of its norm" in found[1]
    )


@pytest.mark.parametrize(("ratio", "named"), [(0.0, False), (1e-7, True)])
def test_a_median_step_of_exactly_0_is_no_lr_too_low(ratio: float, named: bool) -> None:
    # zoo 9: a sparse autoencoder whose code units are dead from step 0 (bias -3): the encoder, most of the
    # weights, gets no gradient and no step; "raise the LR 3e27x" was the advice
    data = CheckData(220, 3, loss_mean=5.27, loss_count=20, loss_std=0.05, update_ratio={"encoder": ratio})
    history = History(losses=[5.27], loss_ses=[0.01], loss_steps=[200], streaks={"lr_too_low": 1})
    assert (lr_too_low(evidence_of(data, history, T)) is not None) == named


def test_units_flat_on_the_first_batch_and_since_are_the_initialisations() -> None:
    # zoo 8: a MIL encoder whose tanh layers were initialised normal_(std=3): 81% flat before any update
    history = History()
    found = None
    for step in (20, 40):
        data = CheckData(step, 0, saturated={"encoder.1": 0.81}, saturation_gain={"encoder.1": 0.07})
        data.saturated_init = {"encoder.1": (0.81, 0.07)} if step == 20 else {}
        found = saturated_activations(evidence_of(data, history, T))
    assert found is not None and found[0]["cause"] == "initialisation", found
    assert found.diagnosis.cause == "initialisation" and found.diagnosis.causes[0].evidence_for


class PairScorer(pl.LightningModule):
    """A pair's logit is ``<left[i], right[j]>``; both tables started at 0: every gradient is exactly 0."""

    def __init__(self) -> None:
        super().__init__()
        self.left, self.right = nn.Embedding(50, 8), nn.Embedding(50, 8)
        nn.init.zeros_(self.left.weight), nn.init.zeros_(self.right.weight)

    def training_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> Tensor:
        pairs, y = batch
        logits = (self.left(pairs[:, 0]) * self.right(pairs[:, 1])).sum(-1)
        return F.binary_cross_entropy_with_logits(logits, y)

    def validation_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> None:
        self.log("val_loss", self.training_step(batch, batch_idx))

    def configure_optimizers(self) -> Any:
        return torch.optim.Adam(self.parameters(), lr=1e-2)


def test_a_run_whose_weights_all_start_at_zero_is_not_learning_from_its_initialisation() -> None:
    # zoo 9: a skip-gram with both tables at 0 (word2vec zeroes only the output table)
    g = torch.Generator().manual_seed(0)
    pairs = torch.randint(0, 50, (4096, 2), generator=g)
    y = ((pairs[:, 0] + pairs[:, 1]) % 2).float()
    monitor = HealthMonitor(check_every_n_steps=20, on_finding=lambda f: None)
    torch.manual_seed(0)
    trainer = fast_trainer(max_steps=200, max_epochs=-1, callbacks=[monitor], val_check_interval=40)
    loader = DataLoader(TensorDataset(pairs, y), 32, shuffle=True)
    trainer.fit(PairScorer(), loader, DataLoader(TensorDataset(pairs[:256], y[:256]), 64))
    found = [(f.problem, f.cause) for f in monitor.findings]
    assert found == [("not_learning", "initialisation")], found
    assert "saddle" in monitor.findings[0].advice and monitor.findings[0].evidence["grad_rms"] == 0


def _dead(ratio: float, spike: bool) -> CheckData:
    data = CheckData(40, 1, loss_mean=2.0, loss_count=20, loss_std=0.5, dead={"act": 0.6}, grad_sampled=True)
    data.update_ratio, data.group_numel, data.group_family = (
        {"net": ratio},
        {"net": 1000},
        {"net": "adaptive"},
    )
    data.step_records = [(k, 1.0 + 0.1 * (k % 3), k, 0, 0, 1.0) for k in range(20, 39)]
    data.step_records.append((39, 5000.0 if spike else 1.1, 39, 0, 0, 999.0 if spike else 1.0))
    return data


@pytest.mark.parametrize("spike", [False, True])
def test_dead_units_are_not_judged_on_an_interval_whose_loss_is_an_outlier_batchs(spike: bool) -> None:
    # zoo 8: an MDN on a 1-D input has ~60% of its units dead in the healthy twin too; two per-mille targets
    # made its loss look non-converging, and then the LR was blamed for those units
    history = History(
        losses=[2.0], loss_ses=[0.1], loss_steps=[20], start_loss=2.0, streaks={"dead_units": 1}
    )
    found = dead_units(evidence_of(_dead(1e-3, spike), history, T))
    assert (found is None) == spike, found
