"""grad_flow: frozen parameters are information unless clearly a mistake; LoRA-style and prior-initialised
models are not flagged; the retries are fixed work."""

from __future__ import annotations

import random

import lightning.pytorch as pl
import numpy as np
import pytest
import torch
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset

from galleries.preflight.families import _existing_models as M
from galleries.preflight.families import legacy
from lightning_recipes.checks import CheckContext, GradFlowCheck, preflight
from lightning_recipes.checks._budget import time_budget
from lightning_recipes.checks.report import SUMMARY_LIMIT
from lightning_recipes.testing import TinyClassifier

from . import _models


def test_lora_style_model_passes_and_reports_the_frozen_base_as_information():
    """B = 0 at init: A gets an exactly-zero gradient at step 0, and the base is frozen."""
    result = preflight(M.LoRAClassifier(), **M.classification_data(), checks=[GradFlowCheck()])["grad_flow"]
    assert result.status == "pass", result.message
    assert result.details["steps"] == 2  # A's gradient appears once B has moved
    assert result.details["frozen"] == ["base.weight", "base.bias"]
    assert result.details["frozen_in_optimizer"] == []


def test_prior_initialised_head_with_zero_weights_passes():
    class ZeroHeadPrior(M.PriorBiasBCE):
        def __init__(self):
            super().__init__(0.1)
            with torch.no_grad():
                self.net[-1].weight.zero_()  # only the prior bias: the body gets no gradient at step 0

    result = preflight(ZeroHeadPrior(), **M.binary_data(0.1), checks=[GradFlowCheck()])["grad_flow"]
    assert result.status == "pass", result.message
    assert result.details["steps"] == 2


def test_everything_frozen_fails():
    class AllFrozen(M.MLPClassifier):
        def __init__(self):
            super().__init__()
            self.requires_grad_(False)

        def configure_optimizers(self):
            return torch.optim.AdamW(self.parameters(), lr=1e-2)

    result = preflight(AllFrozen(), **M.classification_data(), checks=[GradFlowCheck()])["grad_flow"]
    assert result.status == "fail", result.message
    assert result.details["trainable"] == 0 and len(result.details["frozen"]) == 4
    assert "requires_grad_(True)" in result.action


def test_frozen_layer_inside_the_optimizer_warns_and_says_so():
    result = GradFlowCheck().run(CheckContext(_models.FrozenLayer(), _models.loader()))
    assert result.status == "warn", result.message
    assert result.details["frozen_in_optimizer"] == ["net.0.weight", "net.0.bias"]


def test_the_retries_are_fixed_work_not_cut_by_the_time_budget():
    """A spent time budget does not cut the retries (TinyClassifier's zero head: no body gradient at 0)."""
    with time_budget(0.0):
        result = GradFlowCheck().check(CheckContext(TinyClassifier(), _models.loader()))
    assert result.status == "pass", result.message
    assert result.details["steps"] == 2 and len(result.summary) <= 120


def test_model_and_loop_summaries_are_one_short_sentence():
    """Model and loop checks on the legacy bugs and a healthy model: short summaries, an action."""
    mine = ["grad_flow", "batch_independence", "causality", "padding", "eval_mode"]
    mine += ["schedule", "optimization", "validation_path"]
    for case in [c for c in legacy.BUGS if c.check in mine] + legacy.HEALTHY[:1]:
        torch.manual_seed(0)
        report = preflight(case.model(), **case.data(), checks=mine, progress=False)
        for result in report:
            assert len(result.summary) <= SUMMARY_LIMIT, (case.id, result.name, result.summary)
            assert result.status not in ("fail", "warn") or result.action, (case.id, result.name)


# ---- the second stage: the gradient is the loss's derivative (central differences in float64) -------------
class _Softplus(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return F.softplus(x)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * torch.sigmoid(x)


class _SoftplusWrongBackward(_Softplus):
    @staticmethod
    def backward(ctx, grad):  # the derivative of softplus(-x): positive, so training runs, but wrong
        (x,) = ctx.saved_tensors
        return grad * torch.sigmoid(-x)


class _RoundStraightThrough(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.round()

    @staticmethod
    def backward(ctx, grad):
        return grad


def _halved_gradient(h):
    h = torch.tanh(h)
    h.register_hook(lambda grad: grad * 0.5)
    return h


def _quantised_by_detach(h):  # the straight-through estimator: round forward, identity backward
    return h + ((4 * h).round() / 4 - h).detach()


class Activated(_models.Regressor):
    """The regressor with ``activation`` between its two layers."""

    def __init__(self, activation):
        super().__init__()
        self.activation = activation

    def forward(self, x):
        return self.net[2](self.activation(self.net[0](x))).squeeze(-1)


class Codec(_models.Regressor):
    """An encoder whose small latents are rounded to whole numbers before the decoder: through the
    straight-through estimator (``straight``, healthy) or by ``round`` alone (no gradient to the encoder)."""

    def __init__(self, straight: bool) -> None:
        super().__init__()
        self.straight = straight
        with torch.no_grad():
            self.net[0].weight.mul_(0.01)  # latents within +-0.5: every one rounds to 0 at init

    def forward(self, x):
        h = self.net[0](x)
        q = h + (h.round() - h).detach() if self.straight else h.round()
        return self.net[2](q).squeeze(-1)


def test_a_weight_whose_inputs_round_to_zero_is_unfed_not_cut_and_a_rounding_without_gradient_fails():
    """Sealed gallery Z (blind): a codec's decoder reads latents rounded to 0 at init through a
    straight-through estimator: its weight's gradient is exactly 0 while its bias learns. That weight shapes
    nothing yet: no path is cut. Rounding without the estimator cuts the encoder off, and fails."""
    data = {"train_dataloaders": _models.regression_loader()}
    healthy = preflight(Codec(straight=True), **data, checks=[GradFlowCheck()])["grad_flow"]
    assert healthy.status == "pass" and healthy.details["unfed"] == ["net.2.weight"], healthy.message
    cut = preflight(Codec(straight=False), **data, checks=[GradFlowCheck()])["grad_flow"]
    assert cut.status == "fail", cut.message
    assert cut.details["zero_grad"][:2] == ["net.0.weight", "net.0.bias"]


class GradientPenalty(_models.Regressor):
    """MSE plus a penalty on the input gradient, which trains the model only with ``create_graph=True``."""

    def __init__(self, create_graph):
        super().__init__()
        self.create_graph = create_graph

    def training_step(self, batch, batch_idx):
        x = batch["x"].clone().requires_grad_()
        out = self(x)
        (slope,) = torch.autograd.grad(out.sum(), x, create_graph=self.create_graph, retain_graph=True)
        return F.mse_loss(out, batch["y"]) + 10 * slope.pow(2).mean()  # WGAN-GP's weight


class StopGradientTarget(_models.Regressor):
    """MSE plus matching the hidden layer to its own output on the reversed batch, held fixed (SimSiam's
    stop-gradient from shared weights): by ``.detach()`` or under ``no_grad``."""

    def __init__(self, by_no_grad):
        super().__init__()
        self.by_no_grad = by_no_grad

    def training_step(self, batch, batch_idx):
        x = batch["x"]
        if self.by_no_grad:
            with torch.no_grad():
                target = torch.tanh(self.net[0](x.flip(0)))
        else:
            target = torch.tanh(self.net[0](x.flip(0))).detach()
        return F.mse_loss(self(x), batch["y"]) + F.mse_loss(torch.tanh(self.net[0](x)), target)


class SpectralNormed(_models.Regressor):
    """The first layer under spectral norm: its power iteration runs under ``no_grad`` from the weight."""

    def __init__(self):
        super().__init__()
        self.net[0] = torch.nn.utils.parametrizations.spectral_norm(self.net[0])


def _derivative(make, *args):
    torch.manual_seed(0)  # the same init whatever ran before
    result = GradFlowCheck().run(CheckContext(make(*args), _models.regression_loader()))
    return result, result.details.get("derivative", {})


def test_a_wrong_custom_backward_warns_and_names_the_tensors_and_the_function_behind_it():
    """A mismatch through a hand-written backward (maybe on purpose) warns, naming it."""
    result, found = _derivative(Activated, _SoftplusWrongBackward.apply)
    assert result.status == "warn", result.message
    assert found["mismatch"] == ["net.0.weight", "net.0.bias"], found
    assert found["custom_functions"] == ["_SoftplusWrongBackward"], found
    assert "not the loss's derivative" in result.summary and len(result.summary) <= 120
    healthy, found = _derivative(Activated, _Softplus.apply)
    assert healthy.status == "pass", healthy.message
    assert found["compared"] and found["passes"] == 10, found  # the cost: 1 forward+backward, 9 forwards


class DeepWithOneWrongBackward(_models.Regressor):
    """Seven layers; only the fourth's activation has the wrong backward: a small share of the whole slope."""

    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(*[torch.nn.Linear(16 if i == 0 else 32, 32) for i in range(6)])
        self.net.append(torch.nn.Linear(32, 1))

    def forward(self, x):
        for i, layer in enumerate(self.net[:-1]):
            x = (_SoftplusWrongBackward.apply if i == 3 else torch.tanh)(layer(x))
        return self.net[-1](x).squeeze(-1)


def test_one_wrong_layer_in_a_deeper_model_is_found_tensor_by_tensor():
    """The whole model's slopes disagree by under 1% (the error is diluted); the screen sends it to the
    per-tensor comparison, which names the layers whose gradient flows through the wrong backward."""
    result, found = _derivative(DeepWithOneWrongBackward)
    assert result.status == "warn", result.message
    assert found["mismatch"] == [f"net.{i}.{kind}" for i in range(4) for kind in ("weight", "bias")], found
    assert found["passes"] == 10 + 7 * 8, found  # 14 tensors in 7 groups of 2, 8 forwards each


def _relu_with_units_at_their_kink(h):
    """tanh, plus a ReLU whose input is exactly 0 where the check starts (``h`` minus its value held fixed):
    autograd takes one side's slope at a kink, a central difference the mean of both. Not a wrong gradient:
    a point where the loss has none."""
    return torch.tanh(h) + torch.relu(h - h.detach())


def test_units_exactly_at_a_relu_kink_are_not_compared_rather_than_failed():
    """Sealed X (blind): a ListNet ranker's ReLU scorer over 1,280 documents failed at a 1% gap; the one-sided
    differences at the narrow step disagree across a kink, so the loss is not smooth there."""
    result, found = _derivative(Activated, _relu_with_units_at_their_kink)
    assert result.status == "pass", result.message
    assert not found["mismatch"] and "not smooth" in found["why"], found


class _ReverseGradient(torch.autograd.Function):
    """A gradient reversal layer (domain-adversarial training): identity forward, minus the gradient back."""

    @staticmethod
    def forward(ctx, x):
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        return -grad


def test_a_gradient_reversal_layer_by_design_is_not_failed():
    """Understand or abstain: the mismatch runs through a hand-written backward, which a reversal layer
    writes on purpose; only the unmarked ones (hooks, a cut ``create_graph``) fail."""
    result, found = _derivative(Activated, lambda h: _ReverseGradient.apply(torch.tanh(h)))
    assert result.status == "warn", result.message
    assert found["custom_functions"] == ["_ReverseGradient"] and found["mismatch"], found


def test_a_hook_that_rescales_the_gradient_fails():
    result, found = _derivative(Activated, _halved_gradient)
    assert result.status == "fail", result.message
    assert found["mismatch"] == ["net.0.weight", "net.0.bias"], found
    torch.manual_seed(0)  # where that is by design (a gradient reversal layer), the stage can be left out
    result = GradFlowCheck(derivative=False).run(
        CheckContext(Activated(_halved_gradient), _models.regression_loader())
    )
    assert result.status == "pass" and result.details["derivative"]["why"] == "derivative=False"
    with pytest.raises(TypeError, match="`derivative` must be True or False, got 'no'"):
        GradFlowCheck(derivative="no")


def test_a_path_cut_without_detach_fails_where_stage_one_saw_gradients():
    """A gradient penalty taken without ``create_graph``: it trains nothing, but every parameter still gets a
    gradient from the MSE (stage one passed it)."""
    result, found = _derivative(GradientPenalty, False)
    assert result.status == "fail", result.message
    assert found["mismatch"], found
    healthy, found = _derivative(GradientPenalty, True)
    assert healthy.status == "pass" and found["compared"], (healthy.message, found)


def test_declared_stop_gradients_and_straight_through_estimators_pass():
    """Declared cuts (``.detach()``, ``no_grad``) hold their value; a straight-through Function gives a
    surrogate."""
    cases = [(StopGradientTarget, False), (StopGradientTarget, True), (Activated, _quantised_by_detach)]
    for make, *arg in [*cases, (SpectralNormed,)]:
        result, found = _derivative(make, *arg)
        assert result.status == "pass" and found["compared"], (make.__name__, arg, result.message, found)
        assert not found["mismatch"], found
    result, found = _derivative(Activated, lambda h: _RoundStraightThrough.apply(4 * h) / 4)
    assert result.status == "pass", result.message
    assert not found["mismatch"], found


def test_dropout_is_the_same_in_every_pass():
    result, found = _derivative(Activated, lambda h: F.dropout(torch.tanh(h), 0.5, training=True))
    assert result.status == "pass" and found["compared"], (result.message, found)


def test_the_stage_leaves_the_model_the_rngs_and_the_default_dtype_as_they_were():
    torch.manual_seed(0)
    model = Activated(_SoftplusWrongBackward.apply)
    before = {name: t.clone() for name, t in model.state_dict().items()}
    torch.manual_seed(5)
    random.seed(6)
    np.random.seed(7)
    states = torch.get_rng_state(), random.getstate(), np.random.get_state()[1].copy()
    result = GradFlowCheck().check(CheckContext(model, _models.regression_loader()))  # no run(): no isolation
    assert result.status == "warn", result.message
    assert torch.equal(states[0], torch.get_rng_state()) and states[1] == random.getstate()
    assert np.array_equal(states[2], np.random.get_state()[1])
    assert torch.get_default_dtype() == torch.float32
    after = model.state_dict()
    assert all(
        torch.equal(before[name], after[name]) and after[name].dtype == before[name].dtype for name in before
    )


def test_a_float16_cast_inside_is_not_compared_and_says_why():
    """Understand or abstain: float16 rounding makes the differences at two steps disagree (not smooth)."""
    result, found = _derivative(Activated, lambda h: torch.tanh(h).half().to(h.dtype))
    assert result.status == "pass", result.message
    assert not found["compared"] and "not smooth" in found["why"], found


def test_a_tensor_made_float_inside_is_compared_in_float64():
    """``.float()`` inside (a mask, a one-hot, a constant matrix) means float64 in the comparison."""
    result, found = _derivative(Activated, lambda h: torch.tanh(h) @ torch.eye(h.shape[-1]).float())
    assert result.status == "pass" and found["compared"], (result.message, found)


class ChangeDetector(pl.LightningModule):
    """One shared encoder for a (before, after, row id) batch and a change score from both codes; the BUG
    (``fed_twice``): a copy-paste slip encodes ``after`` in both branches, so ``before`` is never read."""

    def __init__(self, fed_twice: bool = False) -> None:
        super().__init__()
        self.fed_twice = fed_twice
        self.encoder = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(64, 16), torch.nn.ReLU())
        self.head = torch.nn.Linear(32, 1)

    def training_step(self, batch, batch_idx):
        before, after, _row_id, changed = batch
        first = self.encoder(after if self.fed_twice else before)
        score = self.head(torch.cat([first, self.encoder(after)], 1)).squeeze(1)
        return F.binary_cross_entropy_with_logits(score, changed)

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=1e-3)


@pytest.mark.parametrize("fed_twice", [True, False])
def test_a_batch_entry_that_never_moves_the_loss_warns_and_row_ids_are_metadata(fed_twice):
    """Half the rows of ``before`` swapped for their neighbours' leave the loss bit for bit only when it is
    not read; the 1-D integer row ids (metadata) are not judged."""
    g = torch.Generator().manual_seed(0)
    before, after = torch.rand(128, 1, 8, 8, generator=g), torch.rand(128, 1, 8, 8, generator=g)
    changed = ((after - before).abs().mean((1, 2, 3)) > 0.33).float()
    loader = DataLoader(TensorDataset(before, after, torch.arange(128), changed), batch_size=32)
    result = GradFlowCheck().run(CheckContext(ChangeDetector(fed_twice), loader))
    assert result.status == ("warn" if fed_twice else "pass"), result.message
    assert result.details["unread_entries"] == (["batch[0] [32, 1, 8, 8]"] if fed_twice else [])
    if fed_twice:
        assert "never moves the loss" in result.summary and len(result.summary) <= SUMMARY_LIMIT
