"""The optimization check on real tiny LightningModules fitted by a real Trainer (on a copy): manual and
automatic optimisation, healthy loops and their broken twins."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch

from lightning_recipes.checks import preflight
from lightning_recipes.checks.loop.optimization_check import OptimizationCheck
from tests.checks import _loop_models as M


def _run(model, **kwargs):
    report = preflight(
        model, train_dataloaders=M.loader(), checks=[OptimizationCheck(**kwargs)], progress=False
    )
    return report["optimization"]


@pytest.mark.parametrize(
    "model",
    [M.AutoMLP(), M.ManualMLP(), M.ManualMLP("accumulate"), M.TwoOptimizers(), M.TwoOptimizers(True)],
    ids=["automatic", "manual", "manual-2-micro-batches", "two-optimizers", "two-optimizers-one-backward"],
)
def test_healthy_loops_pass(model):
    result = _run(model)
    assert result.status == "pass", result.message
    assert result.details["max_residual"] < 1e-6  # the same float sums: equal up to rounding
    if getattr(model, "mode", None) == "accumulate":  # two micro-batches per step
        assert result.details["batches"] == 2 * result.details["steps"]


def test_gradients_clipped_before_the_step_pass_as_scaled():
    result = _run(M.ClippedGradients())
    assert result.status == "pass", result.message
    assert result.details["scaled_steps"] == result.details["steps"]


@pytest.mark.parametrize(
    "model", [M.ManualMLP("no_zero_grad"), M.NoOpZeroGrad()], ids=["manual", "automatic"]
)
def test_gradients_never_cleared_fail(model):
    result = _run(model)
    assert result.status == "fail", result.message
    assert "never cleared" in result.summary and len(result.summary) <= 120
    shares = [s["share"] for s in result.details["carried_steps"]]
    assert shares and min(shares) > 0.99  # the whole previous gradient is still there


def test_step_before_backward_fails():
    result = _run(M.ManualMLP("step_first"))
    assert result.status == "fail", result.message
    assert result.details["no_backward_steps"] == [0]
    assert result.details["cleared_steps"]  # later steps run on gradients zeroed after their backward
    assert "no backward pass" in result.summary


def test_submodule_missing_from_the_optimizer_fails_with_its_names():
    result = _run(M.ManualMLP("missing"))
    assert result.status == "fail", result.message
    assert result.details["not_in_optimizer"] == ["side.bias", "side.weight"]
    assert "side.weight" in result.message


def test_a_spent_budget_does_not_cut_the_trial_short():
    """Fixed work: past its safety cap the check is inconclusive, saying so."""
    result = _run(M.AutoMLP(), time_budget=1e-6)
    if result.status == "inconclusive":
        assert result.details["stopped_by_budget"] is True
    else:
        assert result.status == "pass" and result.details["steps"] >= 12, result.message


def test_the_users_model_and_rng_are_untouched():
    torch.manual_seed(0)
    model = M.ManualMLP("no_zero_grad")
    state = {k: v.clone() for k, v in model.state_dict().items()}
    rng = (torch.get_rng_state(), random.getstate(), np.random.get_state()[1].copy())
    assert _run(model).status == "fail"
    assert all(torch.equal(v, model.state_dict()[k]) for k, v in state.items())
    assert all(p.grad is None for p in model.parameters())
    assert model._trainer is None and model.automatic_optimization is False
    assert "validation_step" not in vars(model)
    assert all(not m._forward_pre_hooks for m in model.modules())
    assert all(not p._backward_hooks for p in model.parameters())
    assert torch.equal(rng[0], torch.get_rng_state()) and rng[1] == random.getstate()
    assert np.array_equal(rng[2], np.random.get_state()[1])


class Accumulating(M.ManualMLP):
    """Manual accumulation over ``k`` batches (the loss divided by ``k``); ``clear``: where the gradients are
    cleared, ``"window"`` (after each step, healthy) or ``"every_batch"`` (before every backward: a bug that
    steps on the last batch's gradients only); ``clip``: clip the window's gradients to a norm first."""

    def __init__(self, k: int = 4, clear: str = "window", clip: float | None = None) -> None:
        super().__init__()
        self.k, self.clear, self.clip = k, clear, clip

    def training_step(self, batch, batch_idx):
        opt = self.optimizers()
        x, y = batch
        loss = torch.nn.functional.cross_entropy(self(x), y)
        if self.clear == "every_batch":
            opt.zero_grad()
        self.manual_backward(loss / self.k)
        if (batch_idx + 1) % self.k == 0:
            if self.clip is not None:
                self.clip_gradients(opt, gradient_clip_val=self.clip, gradient_clip_algorithm="norm")
            opt.step()
            opt.zero_grad()
        return loss


@pytest.mark.parametrize("k", [2, 4])
def test_manual_accumulation_cleared_once_per_window_passes(k):
    result = _run(Accumulating(k))
    assert result.status == "pass", result.message
    assert result.details["last_backward_only_steps"] == []


@pytest.mark.parametrize("k", [2, 4])
def test_manual_accumulation_cleared_before_every_backward_fails(k):
    result = _run(Accumulating(k, clear="every_batch"))
    assert result.status == "fail", result.message
    assert "only the last" in result.summary and len(result.summary) <= 120
    windows = result.details["last_backward_only_steps"]
    assert len(windows) == result.details["steps"] and {w["backwards"] for w in windows} == {k}


def test_accumulated_gradients_clipped_to_a_norm_are_not_read_as_the_last_backward_only():
    result = _run(Accumulating(4, clip=1e-3))  # every window clipped: g = c x (1e-3 / |c|)
    assert result.status == "pass", result.message
    assert result.details["last_backward_only_steps"] == []


class SideNeverStepped(M.TwoOptimizers):
    """Manual optimisation: one backward of the summed loss, but only ``net``'s optimizer steps (``side``'s
    ``step()`` lost); ``frozen``: ``side`` is frozen by design; ``side_lr``: the side optimizer's LR."""

    def __init__(self, frozen: bool = False, side_lr: float = 1e-2) -> None:
        super().__init__(shared_backward=True)
        self.side.requires_grad_(not frozen)
        self.side_lr = side_lr

    def training_step(self, batch, batch_idx):
        opt_net, opt_side = self.optimizers()
        x, y = batch
        opt_net.zero_grad()
        opt_side.zero_grad()
        self.manual_backward(torch.nn.functional.cross_entropy(self.net(x) + self.side(x), y))
        opt_net.step()

    def configure_optimizers(self):
        side = torch.optim.Adam(self.side.parameters(), self.side_lr)
        return torch.optim.SGD(self.net.parameters(), lr=0.05), side


def test_an_optimizer_never_stepped_under_manual_optimisation_fails_with_its_parameters():
    result = _run(SideNeverStepped())
    assert result.status == "fail", result.message
    assert "optimizer 1 (Adam) never stepped" in result.summary and len(result.summary) <= 120
    assert result.details["steps_per_optimizer"][1] == 0
    assert result.details["never_stepped"][0]["params"] == ["side.bias", "side.weight"]


@pytest.mark.parametrize(
    "model", [SideNeverStepped(frozen=True), SideNeverStepped(side_lr=0.0)], ids=["frozen", "lr-0"]
)
def test_an_unstepped_optimizer_of_frozen_or_lr_0_parameters_is_not_a_failure(model):
    result = _run(model)
    assert result.status == "pass", result.message
    assert result.details["never_stepped"] == []


def test_parameters_unfrozen_in_a_later_epoch_must_be_in_the_optimizer():
    """Frozen for one epoch, unfrozen from the second: the 3-epoch trial sees their gradients; an optimizer
    built from the parameters trainable at the start never steps them (sealed galleries E and H)."""
    result = _run(M.StagedMLP(trainable_only=True))
    assert result.status == "fail", result.message
    assert result.details["not_in_optimizer"] == ["net.0.bias", "net.0.weight"]
    assert "in no optimizer" in result.summary and len(result.summary) <= 120
    healthy = _run(M.StagedMLP())
    assert healthy.status == "pass" and healthy.details["rewritten_between_epochs"] == [], healthy.message


def test_trained_parameters_rewritten_by_an_epoch_hook_fail():
    """A head initialised in ``on_train_epoch_start`` loses its training every epoch (sealed gallery E);
    the same initialisation in ``on_fit_start`` runs once and passes."""
    model = M.HeadInitMLP("on_train_epoch_start")
    before = {k: v.clone() for k, v in model.state_dict().items()}
    result = _run(model)
    assert result.status == "fail", result.message
    assert result.details["rewritten_between_epochs"] == ["net.4.bias", "net.4.weight"]
    assert "rewritten between epochs" in result.summary and len(result.summary) <= 120
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())  # the user's model untouched
    healthy = _run(M.HeadInitMLP("on_fit_start"))
    assert healthy.status == "pass" and healthy.details["rewritten_between_epochs"] == [], healthy.message


def test_an_epoch_hook_that_cannot_run_on_the_copy_leaves_the_verdict_to_the_first_trial():
    """The 3-epoch trial abstains where a hook raises on the copy from epoch 1 (no datamodule there)."""
    result = _run(M.DataModuleStaged())
    assert result.status == "pass", result.message
    assert "rewritten_between_epochs" not in result.details
