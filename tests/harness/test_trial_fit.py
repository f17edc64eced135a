"""trial_fit: a real-Trainer fit of a copy on one batch, recorded step by step; the user's model untouched."""

from __future__ import annotations

import random

import pytest
import torch

from lightning_recipes.harness import CannotRunOnCopy, Harness
from lightning_recipes.harness.trial_fit import trial_fit
from lightning_recipes.testing import TinyClassifier, random_classification_loader
from tests.checks import _loop_models as M

pytestmark = pytest.mark.usefixtures("one_torch_thread")  # tiny models (tests/conftest.py)


def test_records_steps_backwards_losses_and_validation():
    model = TinyClassifier(lr=0.5)
    fit = trial_fit(Harness(model, random_classification_loader()), steps=5, cache=False)
    assert fit.automatic and fit.optimizers == ["SGD"] and fit.stopped == ""
    assert [s.batch for s in fit.steps] == [0, 1, 2, 3, 4]
    assert all(s.backwards == 1 and s.residual_norm == 0.0 for s in fit.steps)
    assert fit.steps[0].previous_norm == 0.0 and fit.steps[1].previous_norm == fit.steps[0].grad_norm
    assert fit.steps[0].with_grad == 2  # the zero-initialised head: only its own parameters get gradients
    assert len(fit.train_losses) == 5 and fit.train_losses[-1] < fit.train_losses[0]
    view = fit.validation
    assert view is not None and view.source == "logged 'val_loss'"
    assert view.before == pytest.approx(fit.train_losses[0])  # same batch, same weights, no dropout
    assert view.after < view.before and set(view.logged) == {"val_loss", "val_acc"}
    assert view.stale == [] and view.input_difference == 0.0


def test_manual_optimisation_losses_come_from_manual_backward():
    class Silent(M.ManualMLP):
        def training_step(self, batch, batch_idx):
            super().training_step(batch, batch_idx)  # returns the loss; this one returns nothing

    fit = trial_fit(Harness(Silent(), M.loader()), steps=4, cache=False)
    assert not fit.automatic and len(fit.steps) == 4
    assert all(loss == loss for loss in fit.train_losses)  # not nan: read from manual_backward


def test_should_stop_ends_the_fit_after_the_batch_in_progress():
    fit = trial_fit(Harness(M.AutoMLP(), M.loader()), steps=20, should_stop=lambda: True)
    assert fit.stopped == "budget" and len(fit.train_losses) == 1


def test_a_finished_trial_is_cached_per_harness():
    harness = Harness(M.AutoMLP(), M.loader())
    first = trial_fit(harness, steps=6)
    assert trial_fit(harness, steps=6) is first
    assert trial_fit(harness, steps=7) is not first


def test_user_model_rng_and_hooks_untouched():
    torch.manual_seed(0)
    model = M.EMAModel(update=True)
    state = {k: v.clone() for k, v in model.state_dict().items()}
    torch_rng, py_rng = torch.get_rng_state(), random.getstate()
    trial_fit(Harness(model, M.loader()), steps=6, cache=False)
    assert all(torch.equal(v, model.state_dict()[k]) for k, v in state.items())
    assert torch.equal(torch_rng, torch.get_rng_state()) and py_rng == random.getstate()
    assert model._trainer is None and "validation_step" not in vars(model)
    assert all(not m._forward_pre_hooks for m in model.modules())


def test_no_data_and_bad_arguments_are_refused():
    with pytest.raises(CannotRunOnCopy, match="no training data"):
        trial_fit(Harness(M.AutoMLP()), steps=3)
    harness = Harness(M.AutoMLP(), M.loader())
    with pytest.raises(ValueError, match="fit_ratio"):
        trial_fit(harness, fit_ratio=0.0)
    with pytest.raises(ValueError, match="steps"):
        trial_fit(harness, steps=0)


def test_parameters_unfrozen_in_a_later_epoch_are_recorded_and_one_backward_counts_once():
    """3 epochs of 2 batches: the layer unfrozen at epoch 1 gets gradients, and every step still sees exactly
    one backward pass (one hook over all hooked parameters, re-made when new ones start to need grad)."""
    fit = trial_fit(Harness(M.StagedMLP(), M.loader()), steps=6, epochs=3, validate=False)
    assert len(fit.steps) == 6 and [s.backwards for s in fit.steps] == [1] * 6
    assert {"net.0.weight", "net.0.bias"} <= set(fit.received_grad) and fit.not_in_optimizer == []
    assert fit.rewritten == []
