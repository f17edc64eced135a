"""loss: each bug with its healthy twin, on real tiny LightningModules through ``preflight``."""

from __future__ import annotations

import math
from typing import Any

import lightning.pytorch as pl
import pytest
import torch
from torch import Tensor, nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset

from galleries.preflight.families._shapes_models import DictDataset
from lightning_recipes.checks import PreflightError, preflight
from lightning_recipes.checks.loss._expected_loss import record_loss_calls
from lightning_recipes.checks.loss._loss_probe import falls_without_bound, input_bounds, loss_floor, scale_of
from lightning_recipes.checks.loss.loss_check import LossCheck
from lightning_recipes.checks.report import SUMMARY_LIMIT
from lightning_recipes.testing import fast_trainer

from ._models import AdamModule

IN, C = 8, 4


def _classification(n: int = 128, classes: int = C, batch_size: int = 32) -> DataLoader:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(n, IN, generator=g)
    y = (x @ torch.randn(IN, classes, generator=g)).argmax(-1)
    return DataLoader(TensorDataset(x, y), batch_size=batch_size)


def _multilabel(n: int = 128, labels: int = 5) -> DataLoader:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(n, IN, generator=g)
    y = (x @ torch.randn(IN, labels, generator=g) > 0.3).float()
    return DataLoader(TensorDataset(x, y), batch_size=32)


def _regression(scale: float = 1.0, shift: float = 0.0) -> DataLoader:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(128, IN, generator=g)
    y = (torch.sin(x[:, 0]) + 0.5 * x[:, 1]) * scale + shift
    return DataLoader(TensorDataset(x, y), batch_size=32)


def _padded_tokens(pad: int, vocab: int = 12, n: int = 64, length: int = 10) -> DataLoader:
    """Token sequences of random lengths, padded at the end with ``pad``; targets are the next tokens."""
    g = torch.Generator().manual_seed(0)
    tokens = torch.randint(1, vocab, (n, length + 1), generator=g)
    lengths = torch.randint(3, length + 1, (n,), generator=g)
    positions = torch.arange(length + 1)
    tokens[positions[None, :] > lengths[:, None]] = pad
    return DataLoader(TensorDataset(tokens[:, :-1], tokens[:, 1:].clone()), batch_size=16)


def _run(model: pl.LightningModule, loader: DataLoader, **kwargs: Any) -> Any:
    return preflight(model, train_dataloaders=loader, checks=[LossCheck(**kwargs)], num_threads=1)["loss"]


class Classifier(AdamModule):
    """An MLP classifier; each case passes its ``loss_fn(out, y)`` (or overrides ``loss``)."""

    def __init__(self, classes: int = C, loss_fn: Any = F.cross_entropy) -> None:
        super().__init__()
        self.loss_fn = loss_fn
        self.net = nn.Sequential(nn.Linear(IN, 16), nn.ReLU(), nn.Linear(16, classes))

    def forward(self, x: Tensor) -> Tensor:
        return self.net(x)

    def loss(self, out: Tensor, y: Tensor) -> Tensor:
        return self.loss_fn(out, y)

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        x, y = batch
        return self.loss(self(x), y)


# ---------------------------------------------------------------- 1. every target value moves the loss
def _ce(**kwargs: Any) -> Any:
    """``F.cross_entropy`` with ``kwargs``: a ``Classifier``'s ``loss_fn``."""
    return lambda out, y: F.cross_entropy(out, y, **kwargs)


class TokenModel(AdamModule):
    """A next-token model over padded sequences; the loss ignores ``ignore`` (the padding)."""

    def __init__(self, ignore: int, vocab: int = 12) -> None:
        super().__init__()
        self.ignore = ignore
        self.embed = nn.Embedding(vocab, 16)
        self.head = nn.Linear(16, vocab)

    def forward(self, x: Tensor) -> Tensor:
        return self.head(torch.relu(self.embed(x)))

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        x, y = batch
        logits = self(x)
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1), ignore_index=self.ignore)


def _minus_100_loader() -> DataLoader:
    inputs, targets = _padded_tokens(pad=0).dataset.tensors
    targets = targets.masked_fill(targets == 0, -100)
    return DataLoader(TensorDataset(inputs, targets), batch_size=16)


@pytest.mark.parametrize(
    ("ignore", "loader"), [(0, lambda: _padded_tokens(pad=0)), (-100, _minus_100_loader)]
)
def test_ignore_index_on_the_padding_token_passes_and_says_so(ignore, loader):
    """Token 0 (or -100) is the padding here: trailing, and where the inputs are padded."""
    result = _run(TokenModel(ignore=ignore), loader())
    assert result.status == "pass", result.message
    assert str(ignore) in result.details["ignored_as_padding"]


def test_ignoring_a_real_token_in_mid_sequence_fails():
    """Token 3 is a real token (anywhere in the sequences): ignoring it is a dropped class, not padding."""
    result = _run(TokenModel(ignore=3), _padded_tokens(pad=0))
    assert result.status == "fail", result.message
    assert "class 3" in [d["label"] for d in result.details["dropped"]]


def test_a_class_absent_from_the_batches_is_listed_as_unchecked():
    """Class 4 of 5 never occurs in the data: no verdict about it, and the others still pass."""
    result = _run(Classifier(classes=5), _classification(classes=4))
    assert result.status == "pass", result.message
    assert result.details["unchecked"] == [4]


class Mixup(Classifier):
    """Mixup: soft targets mixed from two samples (random lambda and permutation each step)."""

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        x, y = batch
        lam = float(torch.distributions.Beta(0.4, 0.4).sample())
        perm = torch.randperm(len(x))
        soft = F.one_hot(y, C).float()
        return F.cross_entropy(self(lam * x + (1 - lam) * x[perm]), lam * soft + (1 - lam) * soft[perm])


def test_mixup_soft_targets_pass():
    result = _run(Mixup(), _classification())
    assert result.status == "pass", result.message
    assert result.details["targets"]["status"] == "pass"
    assert result.details["bounded"]["status"] == "pass"


class PriorBias(Classifier):
    """The output bias initialised to the log label prior (good practice on unbalanced data)."""

    def __init__(self) -> None:
        super().__init__()
        with torch.no_grad():
            self.net[-1].bias.copy_(torch.tensor([0.7, 0.1, 0.1, 0.1]).log())


def test_class_prior_bias_init_passes():
    assert _run(PriorBias(), _classification()).status == "pass"


def test_label_smoothing_has_a_floor_above_zero_and_passes():
    result = _run(Classifier(loss_fn=_ce(label_smoothing=0.2)), _classification())
    assert result.status == "pass", result.message
    floor = result.details["floor"]
    assert floor["status"] == "pass" and floor["minimum"] > 0.3  # the smoothed target's entropy


# ---------------------------------------------------------------- 2. a provable floor above the minimum
class SoftmaxIntoCrossEntropy(Classifier):
    def forward(self, x: Tensor) -> Tensor:
        return self.net(x).softmax(-1)


class MultiLabel(AdamModule):
    """Multi-label heads: ``activation`` picks a healthy head or one with a floor (see the
    parametrization)."""

    def __init__(self, activation: str, labels: int = 5) -> None:
        super().__init__()
        self.activation = activation
        self.net = nn.Sequential(nn.Linear(IN, 16), nn.ReLU(), nn.Linear(16, labels))

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        x, y = batch
        z = self.net(x)
        if self.activation == "logits":
            return F.binary_cross_entropy_with_logits(z, y)
        if self.activation == "sigmoid-logits":
            return F.binary_cross_entropy_with_logits(torch.sigmoid(z), y)
        if self.activation == "softmax":
            return F.binary_cross_entropy(z.softmax(-1), y)
        if self.activation == "double":
            return F.binary_cross_entropy(torch.sigmoid(torch.sigmoid(z)), y)
        return F.binary_cross_entropy(torch.sigmoid(z), y)


def test_probabilities_into_cross_entropy_fail_with_the_floor():
    result = _run(SoftmaxIntoCrossEntropy(), _classification())
    assert result.status == "fail", result.message
    floor = result.details["floor"]
    assert floor["status"] == "fail"
    assert floor["floor"] == pytest.approx(math.log(math.e + C - 1) - 1, rel=1e-9)
    assert "softmax" in floor["how"]


@pytest.mark.parametrize(
    ("activation", "status"),
    [
        ("sigmoid-logits", "fail"),
        ("logits", "pass"),
        ("softmax", "fail"),
        ("sigmoid", "pass"),
        ("double", "fail"),
    ],
)
def test_multi_label_floors_sigmoid_into_logits_softmax_double_sigmoid_fail(activation, status):
    result = _run(MultiLabel(activation), _multilabel())
    assert result.details["floor"]["status"] == status, result.message
    assert result.status == status, result.message
    assert result.details["targets"]["status"] == "pass"  # every label's positives move the loss


# ---------------------------------------------------------------- 3. regression targets off unit scale
class Regressor(AdamModule):
    """An MLP regressor; ``loss_fn(out, y)`` is the case's loss (MSE unless given)."""

    def __init__(
        self, out_scale: float = 1.0, learned_scale: bool = False, loss_fn: Any = F.mse_loss
    ) -> None:
        super().__init__()
        self.loss_fn = loss_fn
        self.net = nn.Sequential(nn.Linear(IN, 16), nn.Tanh(), nn.Linear(16, 1))
        self.register_buffer("out_scale", torch.tensor(out_scale))
        self.log_scale = nn.Parameter(torch.zeros(())) if learned_scale else None

    def forward(self, x: Tensor) -> Tensor:
        out = self.net(x).squeeze(-1) * self.out_scale
        return out * self.log_scale.exp() if self.log_scale is not None else out

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        x, y = batch
        return self.loss_fn(self(x), y)


# ---------------------------------------------------------------- 4. bounded below
def _negative_mse() -> Regressor:
    return Regressor(loss_fn=lambda out, y: -F.mse_loss(out, y))


class ErrorAsOutput(Regressor):
    """Each sample's squared error as the output, its mean the loss (``sign=-1``: maximised, unbounded)."""

    def __init__(self, sign: float = 1.0) -> None:
        super().__init__()
        self.sign = sign

    def forward(self, x: Tensor, y: Tensor | None = None) -> Tensor:
        prediction = super().forward(x)
        return prediction if y is None else (prediction - y) ** 2

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        x, y = batch
        return self.sign * self(x, y).mean()


def _log_likelihood(out: Tensor, y: Tensor) -> Tensor:
    """The log-likelihood (maximised by the optimizer instead of its negative): a hand-written loss."""
    return out.log_softmax(-1).gather(1, y[:, None]).mean()


class GaussianNLL(AdamModule):
    """A Gaussian negative log-likelihood with a learned variance: negative once fitted, yet bounded."""

    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(IN, 16), nn.Tanh(), nn.Linear(16, 2))

    def forward(self, x: Tensor) -> Tensor:
        return self.net(x)

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        x, y = batch
        mean, log_var = self(x).unbind(-1)
        return F.gaussian_nll_loss(mean, y, log_var.exp())


def test_the_ray_rule_reads_growth_not_sign():
    assert falls_without_bound([-1.0, -2.0, -101.0, -1e4, -1e6, -1e8])
    assert not falls_without_bound([2.3, 0.4, 1e-3, 1e-5, 0.0, 0.0])
    assert not falls_without_bound([-3.0, -4.0, -4.5, -4.6, -4.61])  # negative but bounded
    assert falls_without_bound([1.0, float("-inf")])


# ---------------------------------------------------------------- unsupported setups
class Manual(Classifier):
    def __init__(self) -> None:
        super().__init__()
        self.automatic_optimization = False


@pytest.mark.parametrize(
    "model",
    [Manual(), Classifier(loss_fn=lambda out, y: F.cross_entropy(out.detach(), y))],
    ids=["manual", "detached"],
)
def test_unsupported_setups_skip_with_the_reason(model):
    result = _run(model, _classification())
    assert result.status == "skip", result.message
    assert "manual" in result.message or "no gradient" in result.message


# ---------------------------------------------------------------- outputs that are already normalised
class LogSoftmaxLM(AdamModule):
    """Like Lightning's demo transformer: forward returns log-probabilities, flattened; the loss is nll_loss.
    Moving the log-probabilities freely would make nll_loss look unbounded: the ray moves the logits."""

    def __init__(self, vocab: int = 12, negate: bool = False) -> None:
        super().__init__()
        self.negate = negate
        self.embed = nn.Embedding(vocab, 16)
        self.head = nn.Linear(16, vocab)

    def forward(self, x: Tensor) -> Tensor:
        logits = self.head(torch.relu(self.embed(x)))
        return F.log_softmax(logits, dim=-1).view(-1, logits.shape[-1])

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        x, y = batch
        loss = F.nll_loss(self(x), y.reshape(-1))
        return -loss if self.negate else loss


class SigmoidOutput(MultiLabel):
    """Forward returns probabilities (a sigmoid), the loss is binary_cross_entropy: healthy."""

    def forward(self, x: Tensor) -> Tensor:
        return torch.sigmoid(self.net(x))

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        x, y = batch
        return F.binary_cross_entropy(self(x), y)


def test_a_loss_with_no_gradient_anywhere_is_named_as_such():
    """The loss clamped instead of the gradient clipped: no position gets any gradient."""
    result = _run(
        Classifier(loss_fn=lambda out, y: F.cross_entropy(out, y).clamp(max=0.5)), _classification()
    )
    assert result.status == "fail" and result.details["targets"]["status"] == "fail", result.message
    assert [d["label"] for d in result.details["dropped"]] == [f"class {k}" for k in range(C)]  # every one


# ---------------------------------------------------------------- a loss computed inside a wrapped model
class Wrapped(nn.Module):
    """Like a Hugging Face model given ``labels``: returns the finished loss next to the logits."""

    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(IN, 16), nn.ReLU(), nn.Linear(16, C))

    def forward(self, x: Tensor, labels: Tensor) -> dict[str, Tensor]:
        logits = self.net(x)
        return {"logits": logits, "loss": F.cross_entropy(logits, labels)}


class WrappedModel(AdamModule):
    def __init__(self, sign: float = 1.0) -> None:
        super().__init__()
        self.sign = sign
        self.model = Wrapped()

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        x, y = batch
        return self.sign * self.model(x, labels=y)["loss"]


def test_a_non_finite_loss_skips_and_says_why():
    """NaN targets: the loss is NaN, its gradient says nothing (the data and init_loss checks judge it)."""
    x, y = _regression().dataset.tensors
    y = y.clone()
    y[::7] = float("nan")
    result = _run(Regressor(), DataLoader(TensorDataset(x, y), batch_size=32))
    assert result.status == "skip" and "not finite" in result.summary, result.message


def test_a_hand_written_loss_is_judged_on_boundedness_only():
    result = _run(Classifier(loss_fn=lambda out, y: -_log_likelihood(out, y)), _classification())
    assert result.status == "pass", result.message
    assert result.details["targets"]["status"] == "n/a"
    assert result.details["loss_function"] is None


class TaggerWithMask(AdamModule):
    """Token tagging from dict batches; the label 5 marks the positions the attention mask hides (scattered,
    not trailing), and the loss ignores it: padding, judged by the mask entry."""

    def __init__(self, ignore: int) -> None:
        super().__init__()
        self.ignore = ignore
        self.embed = nn.Embedding(10, 16)
        self.head = nn.Linear(16, 6)

    def training_step(self, batch: dict[str, Tensor], batch_idx: int) -> Tensor:
        logits = self.head(self.embed(batch["input_ids"]) * batch["attention_mask"][..., None])
        return F.cross_entropy(logits.transpose(1, 2), batch["labels"], ignore_index=self.ignore)


def _tagging() -> DataLoader:
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, 10, (64, 12), generator=g)
    mask = (torch.rand(64, 12, generator=g) > 0.2).long()
    labels = torch.where(mask.bool(), ids % 5, torch.full_like(ids, 5))
    return DataLoader(DictDataset(input_ids=ids, attention_mask=mask, labels=labels), batch_size=16)


def test_an_ignored_label_at_the_masked_positions_is_padding():
    result = _run(TaggerWithMask(ignore=5), _tagging())
    assert result.status == "pass", result.message
    assert "attention_mask" in result.details["ignored_as_padding"]["5"]


def test_an_ignored_real_tag_fails_in_the_same_tagger():
    result = _run(TaggerWithMask(ignore=2), _tagging())
    assert result.status == "fail", result.message
    assert [d["label"] for d in result.details["dropped"]] == ["class 2"]


def test_as_a_callback_a_negated_loss_stops_training_before_the_first_step(tmp_path):
    check = LossCheck()
    trainer = fast_trainer(max_steps=2, callbacks=[check], default_root_dir=tmp_path)
    with pytest.raises(PreflightError, match="loss"):
        trainer.fit(_negative_mse(), _regression())
    assert trainer.global_step == 0
    assert check.result is not None and check.result.details["bounded"]["status"] == "fail"


def test_probabilities_into_nll_loss_fail_and_log_probabilities_pass():
    bug = _run(Classifier(loss_fn=lambda out, y: F.nll_loss(out.softmax(-1), y)), _classification())
    assert bug.status == "fail", bug.message
    assert bug.details["floor"]["status"] == "fail" and "log_softmax" in bug.message
    healthy = _run(Classifier(loss_fn=lambda out, y: F.nll_loss(out.log_softmax(-1), y)), _classification())
    assert healthy.status == "pass", healthy.message


@pytest.mark.parametrize(
    ("prediction", "status"),
    [
        (lambda out: out.softmax(-1), "fail"),  # probabilities where log-probabilities belong
        (lambda out: out.log_softmax(-1).exp(), "fail"),  # the same, reached through exp
        (lambda out: out.log_softmax(-1), "pass"),
    ],
)
def test_kl_div_reads_log_probabilities_like_nll_loss(prediction, status: str) -> None:
    """``F.kl_div(input, target)`` expects ``input`` as log-probabilities (sealed gallery R's unmixer): given
    probabilities it is minimised by one-hot answers. A non-negative input is proven from softmax or exp."""

    def kl(out: Tensor, y: Tensor) -> Tensor:
        target = F.one_hot(y, out.shape[-1]).float() * 0.9 + 0.025
        return F.kl_div(prediction(out), target, reduction="batchmean")

    result = _run(Classifier(loss_fn=kl), _classification())
    assert result.status == status, result.message
    assert result.details["floor"]["status"] == status
    if status == "fail":
        assert "kl_div reads log-probabilities" in result.summary and "log_softmax" in result.action


# ---------------------------------------------------------------- the floors of _loss_probe.loss_floor
def _floor_of(loss_fn):
    with record_loss_calls(input_bounds) as calls:
        loss_fn()
    return loss_floor(calls[0])


def test_softmax_across_multi_label_rows_floor_is_m_ln_m_per_row():
    z = torch.randn(4, 5, requires_grad=True)
    target = torch.tensor([[1, 1, 0, 0, 0], [1, 1, 1, 0, 0], [1, 0, 0, 0, 0], [0, 0, 0, 0, 0]]).float()
    floor = _floor_of(lambda: F.binary_cross_entropy(z.softmax(-1), target))
    no_positive = -5 * math.log1p(-1 / 5)  # a row without positives spreads its mass evenly
    expected = (2 * math.log(2) + 3 * math.log(3) + 0 + no_positive) / 20
    assert floor is not None and floor.bounded and floor.value == pytest.approx(expected, rel=1e-9)


def test_double_sigmoid_into_bce_floor_from_the_narrowed_range():
    z = torch.randn(6, requires_grad=True)
    target = torch.tensor([1.0, 0.0, 1.0, 1.0, 0.0, 0.0])
    floor = _floor_of(lambda: F.binary_cross_entropy(torch.sigmoid(torch.sigmoid(z)), target))
    high = 1 / (1 + math.exp(-1))  # sigmoid of a probability lies in [0.5, sigmoid(1)]
    expected = (3 * -math.log(high) + 3 * -math.log(0.5)) / 6
    assert floor is not None and floor.bounded and floor.value == pytest.approx(expected, rel=1e-6)
    assert _floor_of(lambda: F.binary_cross_entropy(torch.sigmoid(z), target)) is None  # one sigmoid: none


class SquashedRegressor(Regressor):
    """A regression head ending in ``sigmoid`` (values in [0, 1]): the usual mistake with ratings."""

    def forward(self, x: Tensor) -> Tensor:
        return torch.sigmoid(super().forward(x))


@pytest.mark.parametrize("loss", ["mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss"])
def test_a_bounded_regression_head_below_its_targets_fails_with_the_floor(loss):
    model = SquashedRegressor(loss_fn=getattr(F, loss))
    result = _run(model, _regression(scale=1.0, shift=3.0))  # targets around 3, outputs in [0, 1]
    assert result.status == "fail", result.message
    assert "outside the head's range" in result.details["floor"]["how"], result.details["floor"]
    assert result.details["floor"]["floor"] > 0 and "bounded activation" in result.action


def test_a_bounded_regression_head_with_targets_in_its_range_passes():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(128, IN, generator=g)
    y = torch.sigmoid(x[:, 0])  # targets in (0, 1): the sigmoid can reach every one
    result = _run(SquashedRegressor(), DataLoader(TensorDataset(x, y), batch_size=32))
    assert result.status == "pass", result.message


# ---------------------------------------------------------------- the four parts, bug next to its twin
@pytest.mark.parametrize(
    ("loss_fn", "dropped", "cause"),
    [
        (_ce(ignore_index=0), ["class 0"], "`ignore_index=0`"),
        (_ce(weight=torch.tensor([1.0, 1.0, 0.0, 1.0])), ["class 2"], "`weight[2] = 0`"),
        (lambda out, y: F.cross_entropy(out, y, reduction="none")[y != 1].mean(), ["class 1"], "masked"),
        (F.cross_entropy, [], None),
    ],
    ids=["ignore_index", "zero_weight", "mask", "healthy"],
)
def test_a_class_the_loss_drops_fails_naming_it_and_its_cause(loss_fn, dropped, cause):
    result = _run(Classifier(loss_fn=loss_fn), _classification())
    assert result.status == ("fail" if dropped else "pass"), result.message
    assert [d["label"] for d in result.details["dropped"]] == dropped and result.details["unchecked"] == []
    if cause:  # confirmed on the second batch
        first = result.details["dropped"][0]
        assert cause in first["cause"] and first["count"] > 0 and first["batches"] == 2


@pytest.mark.parametrize(
    ("kwargs", "scale", "status", "ratio"),
    [
        ({}, 1000.0, "fail", (1000, math.inf)),
        ({}, 200.0, "warn", (100, 1000)),
        ({}, 1e-4, "warn", (0, math.inf)),
        ({}, 1.0, "pass", (0, math.inf)),
        ({"out_scale": 1000.0}, 1000.0, "pass", (0, math.inf)),  # a head on the targets' scale at init
        (
            {"learned_scale": True},
            1000.0,
            "pass",
            (1000, math.inf),
        ),  # a learned scalar can stretch the output
    ],
    ids=["1000x", "200x", "tiny", "standardised", "matching_head", "learned_scale"],
)
def test_regression_targets_off_the_outputs_scale(kwargs, scale, status, ratio):
    result = _run(Regressor(**kwargs), _regression(scale=scale))
    assert result.status == status, result.message
    assert ratio[0] < result.details["target_scale"]["ratio"] < ratio[1]


@pytest.mark.parametrize(
    ("model", "loader", "status", "moves"),
    [
        (_negative_mse, _regression, "fail", "the model's output"),
        (Regressor, _regression, "pass", "the model's output"),
        (lambda: Regressor(loss_fn=F.huber_loss), _regression, "pass", None),
        (GaussianNLL, _regression, "pass", None),  # negative once fitted, yet bounded
        (lambda: Classifier(loss_fn=_log_likelihood), _classification, "fail", None),
        (LogSoftmaxLM, lambda: _padded_tokens(pad=1), "pass", "log_softmax"),  # the ray moves the logits
        (lambda: LogSoftmaxLM(negate=True), lambda: _padded_tokens(pad=1), "fail", None),
        (lambda: SigmoidOutput("sigmoid"), _multilabel, "pass", None),
        (ErrorAsOutput, _regression, "pass", "kept >= 0"),  # the ray keeps the errors >= 0
        (lambda: ErrorAsOutput(sign=-1.0), _regression, "fail", "kept >= 0"),
        # a loss computed inside a wrapped model: replacing the output does not reach it, no claim
        (WrappedModel, _classification, "n/a", None),
        (lambda: WrappedModel(sign=-1.0), _classification, "n/a", None),
    ],
    ids=[
        "negative_mse",
        "mse",
        "huber",
        "gaussian_nll",
        "log_likelihood",
        "log_softmax_nll",
        "negated_nll",
        "sigmoid_bce",
        "error_as_output",
        "negated_error_as_output",
        "wrapped",
        "wrapped_negated",
    ],
)
def test_the_loss_is_bounded_below_along_its_descent_ray(model, loader, status, moves):
    result = _run(model(), loader())
    assert result.details["bounded"]["status"] == status, result.message
    assert result.status == status or status == "n/a"
    assert len(result.summary) <= SUMMARY_LIMIT
    if moves:
        assert moves in result.details["bounded"]["ray_moves"]


class AbsoluteErrorRegressor(AdamModule):
    """A linear head and a mean absolute error, by hand or by ``F.l1_loss``; ``squeeze=False`` keeps the
    head's (B, 1) shape, so it broadcasts against the (B,) target to (B, B): each prediction meets every
    target."""

    def __init__(self, squeeze: bool, functional: bool = False) -> None:
        super().__init__()
        self.net, self.squeeze, self.functional = nn.Linear(8, 1), squeeze, functional

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        x, y = batch
        pred = self.net(x).squeeze(-1) if self.squeeze else self.net(x)
        return F.l1_loss(pred, y) if self.functional else (pred - y).abs().mean()


def test_a_prediction_broadcast_against_every_target_of_the_batch_fails_and_its_own_target_passes():
    x = torch.randn(128, 8, generator=torch.Generator().manual_seed(0))
    loader = DataLoader(TensorDataset(x, x[:, 0] - x[:, 1]), batch_size=32)

    def rows(**kwargs: bool) -> Any:
        return preflight(AbsoluteErrorRegressor(**kwargs), train_dataloaders=loader, checks=[LossCheck()])[
            "loss"
        ]

    mixed = rows(squeeze=False)
    assert mixed.status == "fail" and mixed.details["parts"]["rows"] == "fail", mixed.summary
    assert mixed.details["rows"]["row_mixing"][0].startswith(
        "(32, 1) prediction against (32,) batch[1] in sub"
    )
    assert (
        rows(squeeze=False, functional=True).details["parts"]["rows"] == "fail"
    )  # mse_loss/l1_loss warn only
    assert (
        rows(squeeze=True, functional=True).details["parts"]["rows"] == "pass"
    )  # a loss call reads the target
    assert (
        rows(squeeze=True).details["parts"]["rows"] == "n/a"
    )  # by hand: nothing says which tensor is the target


class Reinforce(AdamModule):
    """A policy over 4 arms trained by REINFORCE on a reward per context; ``keepdim=True`` keeps
    ``torch.multinomial``'s (B, 1) arm, and ``Categorical.log_prob`` of it is (B, B): every context is
    credited with every other context's arm."""

    def __init__(self, keepdim: bool) -> None:
        super().__init__()
        self.net, self.keepdim = nn.Linear(8, 4), keepdim

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        x, best = batch
        probs = self.net(x).softmax(-1)
        arm = torch.multinomial(probs.detach(), 1)
        arm = arm if self.keepdim else arm.squeeze(1)
        reward = (arm == (best[:, None] if self.keepdim else best)).float()
        return -(torch.distributions.Categorical(probs).log_prob(arm) * reward).mean()


def test_an_action_drawn_without_gradient_broadcast_against_every_row_fails():
    x = torch.randn(128, 8, generator=torch.Generator().manual_seed(0))
    loader = DataLoader(TensorDataset(x, x[:, :4].argmax(1)), batch_size=32)
    mixed = preflight(Reinforce(keepdim=True), train_dataloaders=loader, checks=[LossCheck()])["loss"]
    assert mixed.status == "fail" and mixed.details["parts"]["rows"] == "fail", mixed.summary
    assert (
        "(32, 1, 1) a draw without gradient from batch[0] in broadcast_tensors"
        in mixed.details["rows"]["row_mixing"][0]
    )
    own = preflight(Reinforce(keepdim=False), train_dataloaders=loader, checks=[LossCheck()])["loss"]
    assert own.details["parts"]["rows"] != "fail", own.summary


def test_falls_without_bound_along_tenfold_steps():
    assert falls_without_bound([-1.0, -2.0, -101.0, -1e4, -1e6, -1e8])  # -mse along the descent
    assert not falls_without_bound([2.3, 0.4, 1e-3, 1e-5, 0.0, 0.0])  # cross-entropy: bounded by 0


def test_scale_of_is_the_larger_of_mean_and_std():
    assert scale_of(torch.tensor([1000.0, 2000.0, 3000.0])) == 2000.0  # mean 2000, std 1000
    assert scale_of(torch.tensor([-1000.0, 1000.0])) == pytest.approx(math.sqrt(2) * 1000)  # mean 0: the std
