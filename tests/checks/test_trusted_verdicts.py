"""Evidence within noise, or a stop by the budget, is ``inconclusive``, never a wrong cause."""

from __future__ import annotations

import time
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.utils.data import DataLoader, TensorDataset

from lightning_recipes.checks import CheckContext, preflight
from lightning_recipes.checks._budget import time_budget
from lightning_recipes.checks.data._leakage_probes import other_values
from lightning_recipes.checks.data.target_leakage_check import TargetLeakageCheck
from lightning_recipes.checks.loss.init_loss_check import InitLossCheck
from lightning_recipes.checks.loss.input_independence_check import InputIndependenceCheck
from lightning_recipes.checks.loss.overfit_batch_check import OverfitBatchCheck
from lightning_recipes.checks.model.causality_check import CausalityCheck
from lightning_recipes.testing import (
    TinyClassifier,
    TinyTransformerLM,
    random_classification_loader,
    random_token_loader,
)


def _run(model: Any, loader: DataLoader, check: Any) -> Any:
    torch.manual_seed(0)
    report = preflight(
        model, train_dataloaders=loader, checks=[check], num_threads=1, print_report=False, progress=False
    )
    return report[check.name]


# ------------------------------------------------------------------------------------ input_independence
def test_input_independence_does_not_blame_the_labels_of_a_slow_learner():
    """lr = 1e-3 (loss -1.4% in 200 steps): the permuted-target control sees the real pairs fit faster."""
    result = _run(TinyClassifier(lr=1e-3), random_classification_loader(), InputIndependenceCheck())
    assert result.status in ("pass", "inconclusive"), result.message


def test_input_independence_states_the_noise_of_its_gap():
    result = _run(TinyClassifier(lr=0.5), random_classification_loader(), InputIndependenceCheck())
    assert result.status == "pass", result.message
    assert 0 < result.details["noise"] < result.details["measured"] / 2  # the gap is beyond 2 SE


class SlowStep(TinyClassifier):
    """A step of 10 ms (on the ``clock``): an 0.25 s budget's safety cap (2.25 s) stops the check."""

    def training_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> Tensor:
        time.sleep(0.01)
        return super().training_step(batch, batch_idx)


def test_a_budget_cut_input_independence_run_is_inconclusive(clock):
    """The work is fixed (steps); the budget is only a safety cap: no verdict from a run it stopped."""
    check = InputIndependenceCheck(time_budget=0.25)
    result = _run(SlowStep(lr=1e-9), random_classification_loader(), check)  # learns nothing: all 120 steps
    assert result.status == "inconclusive", result.message
    assert result.details["stopped_by_budget"] is True


# --------------------------------------------------------------------------------------- overfit_batch
class SlowDeadOutput(TinyClassifier):
    """Logits multiplied by 0: the loss is ln C whatever the weights; each step takes ~10 ms."""

    def forward(self, x: Tensor) -> Tensor:
        return super().forward(x) * 0.0

    def training_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> Tensor:
        time.sleep(0.01)
        return super().training_step(batch, batch_idx)


def test_overfit_is_fixed_work_and_a_loss_that_never_moved_fails(clock):
    slow = _run(SlowStep(lr=1e-4), random_classification_loader(), OverfitBatchCheck(time_budget=None))
    assert slow.status == "fail" and slow.details["steps"] == 150, slow.message  # short of the target
    dead = _run(SlowDeadOutput(), random_classification_loader(), OverfitBatchCheck(time_budget=None))
    assert dead.status == "fail" and dead.details["never_moved"], dead.message


# ------------------------------------------------------------------------- budget cuts of other checks
def test_a_spent_budget_does_not_cut_causality_short():
    """Fixed work: every position is tested whatever the clock says."""
    context = CheckContext(TinyTransformerLM(), random_token_loader())
    with time_budget(0.0):
        result = CausalityCheck().check(context)
    assert result.status == "pass", result.message
    assert len(result.details["positions"]) == 3


class BlindLM(TinyTransformerLM):
    """A next-token model whose output never sees the tokens: the check applies, and measures nothing."""

    def forward(self, tokens: Tensor) -> Tensor:
        return super().forward(torch.zeros_like(tokens))


def test_causality_that_measures_no_effect_at_all_is_inconclusive_not_a_skip():
    result = CausalityCheck().run(CheckContext(BlindLM(), random_token_loader()))
    assert result.status == "inconclusive", result.message
    assert "react to no input position" in result.message


# ----------------------------------------------------------------------------------------- init_loss
class Regressor(TinyClassifier):
    def __init__(self) -> None:
        super().__init__(num_classes=1)
        nn.init.zeros_(self.head.bias)

    def training_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> Tensor:
        x, y = batch
        return F.mse_loss(self(x)[:, 0], y)


def test_init_loss_past_its_line_but_within_batch_noise_is_inconclusive():
    """Two batches with losses ~0 and ~8: past the warn line, but within the batch-to-batch noise."""
    x = torch.randn(64, 16, generator=torch.Generator().manual_seed(0))
    y = torch.cat([torch.full((32,), 0.1), torch.full((32,), 4.0)])
    loader = DataLoader(TensorDataset(x, y), batch_size=32)
    context = CheckContext(Regressor(), loader)
    with torch.no_grad():
        losses = [context.training_loss(context.copy_model(), batch).item() for batch in loader]
    expected = sum(losses) / 2 / 1.3
    result = _run(Regressor(), loader, InitLossCheck(expected_loss=expected))
    assert result.details["ratio"] > 1.25
    assert result.status == "inconclusive", result.message
    assert result.details["ratio_noise"] > 0


# ------------------------------------------------------------------------------------ target_leakage
class FloatLabels(TinyClassifier):
    """3 classes whose ids the dataset stores as floats; the step casts them back."""

    def training_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> Tensor:
        x, y = batch
        return F.cross_entropy(self(x), y.long())


class BinaryProbabilities(TinyClassifier):
    """Binary cross-entropy on probabilities: the targets must stay in [0, 1]."""

    def training_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> Tensor:
        x, y = batch
        return F.binary_cross_entropy(torch.sigmoid(self(x)[:, 0]), y)


def _teacher_data(classes: int) -> tuple[Tensor, Tensor]:
    x, y = random_classification_loader(num_classes=classes).dataset.tensors  # type: ignore[attr-defined]
    return x, y


def test_the_leakage_probe_keeps_targets_in_range_for_3_classes_stored_as_floats():
    """Float targets of 3 classes stay in range under the probe (no id 3 or -1 reaches cross_entropy)."""
    x, y = _teacher_data(3)
    assert set(y.tolist()) == {0, 1, 2}
    result = _run(
        FloatLabels(num_classes=3),
        DataLoader(TensorDataset(x, y.float()), batch_size=32),
        TargetLeakageCheck(),
    )
    assert result.status == "pass", result.message
    changed = other_values(y[:32].float(), seed=0)
    assert changed is not None and set(changed.tolist()) <= {0.0, 1.0, 2.0}
    assert bool((changed != y[:32].float()).all())


def test_the_leakage_probe_keeps_binary_targets_in_0_1():
    x, y = _teacher_data(2)
    result = _run(
        BinaryProbabilities(num_classes=2),
        DataLoader(TensorDataset(x, y.float()), batch_size=32),
        TargetLeakageCheck(),
    )
    assert result.status == "pass", result.message
    soft = torch.rand(32, generator=torch.Generator().manual_seed(1))
    changed = other_values(soft, seed=0)
    assert changed is not None and bool(((changed >= soft.min()) & (changed <= soft.max())).all())
    assert bool((changed != soft).float().mean() > 0.9)


# -------------------------------------------------------------------------- models that log or read trainer
class Logging(TinyClassifier):
    def training_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> Tensor:
        x, y = batch
        loss = F.cross_entropy(self(x), y)
        self.log("train_loss", loss, prog_bar=True)
        self.log_dict({"train_loss_again": loss})
        return loss


class ReadsTrainer(TinyClassifier):
    def training_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> Tensor:
        x, y = batch
        loss = F.cross_entropy(self(x), y)
        if self.trainer.global_step % 100 == 0:
            loss = loss * 1.0
        return loss


def test_a_model_calling_self_log_in_training_step_gets_a_real_verdict():
    report = preflight(
        Logging(lr=0.5),
        train_dataloaders=random_classification_loader(),
        checks=["init_loss", "grad_flow", "overfit_batch", "input_independence"],
        num_threads=1,
        print_report=False,
        progress=False,
    )
    assert {r.name: r.status for r in report} == dict.fromkeys(
        ("init_loss", "grad_flow", "overfit_batch", "input_independence"), "pass"
    )


def test_a_model_reading_self_trainer_makes_the_check_abstain_saying_what_to_change():
    """Its own code raising on a copy outside the Trainer: the check abstains, never an error."""
    result = _run(ReadsTrainer(), random_classification_loader(), InitLossCheck())
    assert result.status == "inconclusive", result.message
    assert "Your code reads `self.trainer`" in result.action
    assert "self.trainer.global_step % 100" in result.action  # the user's own line
    assert "self._trainer is not None" in result.action


def whole_graph(n: int = 96) -> dict[str, Tensor]:
    """One graph as every batch, no batch dimension: node features [N, F], dense adjacency [N, N], labels."""
    g = torch.Generator().manual_seed(0)
    adj = (torch.rand(n, n, generator=g) < 0.05).float()
    return {"x": torch.randn(n, 8, generator=g), "adj": adj, "y": torch.randint(0, 3, (n,), generator=g)}


class GraphConv(TinyClassifier):
    def __init__(self) -> None:
        super().__init__(lr=0.05)
        self.lin = nn.Linear(8, 3)

    def forward(self, graph: Any) -> Tensor:  # raises once a check cuts rows: the adjacency is not square
        adj = graph["adj"] + torch.eye(len(graph["adj"]))
        return adj / adj.sum(1, keepdim=True) @ self.lin(graph["x"])

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        return F.cross_entropy(self(batch), batch["y"])


def test_a_whole_graph_batch_the_checks_cut_makes_them_abstain_not_error():
    """The error is raised in the user's forward, through the mode that records the loss's torch calls (its
    ``__torch_function__`` frame is the innermost): the user's code raised, so ``inconclusive`` (sealed X)."""
    loader = DataLoader([whole_graph()] * 8, batch_size=None)
    result = _run(GraphConv(), loader, OverfitBatchCheck())
    assert result.status == "inconclusive", result.message
    assert "your code raised RuntimeError at test_trusted_verdicts.py:" in result.summary


def test_a_leakage_probe_cut_by_the_budget_is_not_tested_rather_than_passed():
    """Sub-tests are fixed work: one cut by the budget before it trained a step is "not tested"."""
    context = CheckContext(TinyClassifier(), random_classification_loader())
    with time_budget(0.0):
        result = TargetLeakageCheck().check(context)
    assert result.status == "pass", result.message
    assert result.details["too_good"]["looks"][-1]["step"] == 20  # the whole short training, not a part
