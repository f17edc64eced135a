"""Every kind of silent training bug must be flagged by the check meant for it, with an actionable message."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader

from lightning_recipes.checks import (
    BatchIndependenceCheck,
    CheckContext,
    DataCheck,
    GradFlowCheck,
    InitLossCheck,
    InputIndependenceCheck,
    OverfitBatchCheck,
    PreflightError,
    preflight,
)
from lightning_recipes.testing import TinyClassifier, random_token_loader

from . import _models as M

# (case id, model factory, loader factory, check, expected status, words the message must contain)
CASES = [
    ("bad_init", M.BadInit, M.loader, InitLossCheck, "warn", ["too high", "initialised too large"]),
    ("sum_reduction", M.SumReduction, M.loader, InitLossCheck, "fail", ["summed instead of averaged"]),
    ("loss_on_own_predictions", M.SelfTargetLoss, M.loader, InitLossCheck, "fail", ["suspiciously low"]),
    ("shuffled_labels", M.MLP, M.shuffled_labels_loader, InputIndependenceCheck, "fail", ["labels shuffled"]),
    (
        "batch_mixing_reshape",
        M.BatchMixing,
        M.loader,
        BatchIndependenceCheck,
        "fail",
        ["mix across the batch"],
    ),
    ("detached_branch", M.DetachedBranch, M.loader, GradFlowCheck, "fail", ["branch.weight", "detach"]),
    ("frozen_layer", M.FrozenLayer, M.loader, GradFlowCheck, "warn", ["frozen", "net.0.weight"]),
    ("clamped_loss_grad", M.ClampedLoss, M.loader, GradFlowCheck, "fail", ["no parameter gets any gradient"]),
    ("clamped_loss_overfit", M.ClampedLoss, M.loader, OverfitBatchCheck, "fail", ["cannot memorise"]),
    (
        "missing_from_optimizer",
        M.MissingFromOptimizer,
        M.loader,
        GradFlowCheck,
        "fail",
        ["not in any optimizer"],
    ),
    ("nonfinite_grad", M.NonFiniteGrad, M.loader, GradFlowCheck, "fail", ["non-finite gradients", "gate"]),
    ("nan_in_data", M.MLP, M.nan_loader, DataCheck, "fail", ["NaN/Inf"]),
    ("labels_out_of_range", M.MLP, M.out_of_range_loader, DataCheck, "fail", ["outside [0, 4)"]),
    ("sorted_unshuffled_loader", M.MLP, M.sorted_unshuffled_loader, DataCheck, "fail", ["does not shuffle"]),
    ("unshuffled_loader", M.MLP, lambda: M.loader(shuffle=False), DataCheck, "warn", ["does not shuffle"]),
    ("constant_inputs", M.MLP, M.constant_input_loader, DataCheck, "fail", ["constant"]),
    ("unnormalised_inputs", M.MLP, M.unnormalised_loader, DataCheck, "warn", ["un-normalised"]),
]


@pytest.mark.parametrize(
    ("model_factory", "loader_factory", "check_class", "status", "words"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_broken_model_is_flagged_by_its_check(model_factory, loader_factory, check_class, status, words):
    result = check_class().run(CheckContext(model_factory(), loader_factory()))
    assert result.status == status, result.message
    for word in words:
        assert word in result.message, result.message
    assert result.action or "Try:" in result.message or status == "warn"  # one action says what to do


def test_sum_reduction_ratio_is_exactly_the_batch_size():
    """Zero-initialised head: mean CE is ln C exactly, so a summed CE is batch_size x ln C exactly."""

    class Summed(TinyClassifier):
        def loss(self, logits, target):
            return super().loss(logits, target) * len(target)

    result = InitLossCheck().run(CheckContext(Summed(), M.loader(batch_size=32)))
    assert result.status == "fail"
    assert result.details["measured"] == pytest.approx(32 * math.log(4), rel=1e-6)
    assert result.details["ratio"] == pytest.approx(32.0, rel=1e-6)
    assert result.details["summed_over"] == 32


def test_batch_mixing_in_a_token_model_is_found_by_perturbation():
    result = BatchIndependenceCheck().run(
        CheckContext(M.MixingLM(), random_token_loader(vocab_size=16, seq_len=8, shuffle=True))
    )
    assert result.status == "fail" and result.details["method"] == "perturbation"


def test_batchnorm_in_train_mode_would_mix_but_is_evaluated_in_eval_mode():
    """A real BatchNorm1d model passes; the same model with a hand-written batch normalisation fails."""

    class HandNorm(M.MLP):
        def forward(self, x):
            h = self.net[0](x)
            h = (h - h.mean(0)) / (h.std(0) + 1e-5)  # batch statistics, always: mixes samples
            return self.net[2](torch.relu(h))

    class WithBatchNorm(M.MLP):
        def __init__(self):
            super().__init__()
            self.net = nn.Sequential(nn.Linear(16, 64), nn.BatchNorm1d(64), nn.ReLU(), nn.Linear(64, 4))

    assert BatchIndependenceCheck().run(CheckContext(WithBatchNorm(), M.loader())).status == "pass"
    assert BatchIndependenceCheck().run(CheckContext(HandNorm(), M.loader())).status == "fail"


def test_labels_out_of_range_uses_given_num_classes_and_allows_ignore_index():
    x, y = M.loader(shuffle=False).dataset.tensors
    y = y.clone()
    y[:5] = -100  # cross-entropy's ignore_index: padding, not a class
    check = DataCheck(num_classes=4)
    assert check.run(CheckContext(M.MLP(), M.loader_from(x, y))).status == "pass"
    y[7] = -1
    result = check.run(CheckContext(M.MLP(), M.loader_from(x, y)))
    assert result.status == "fail" and result.details["labels_out_of_range"] == 1
    assert torch.equal(y[:5], torch.full((5,), -100))


def test_broken_model_fails_the_whole_report_and_raises():
    report = preflight(M.DetachedBranch(), train_dataloaders=M.loader(), checks=["grad_flow", "init_loss"])
    assert not report.ok and [r.name for r in report.failures] == ["grad_flow"]
    with pytest.raises(PreflightError, match=r"grad_flow: .*branch\.weight"):
        report.raise_for_failures()


def test_manual_optimization_skips_with_reason():
    report = preflight(
        M.ManualOptimization(), train_dataloaders=M.loader(), checks=["init_loss", "grad_flow"]
    )
    assert [r.status for r in report] == ["skip", "skip"]
    assert all("manual optimisation" in r.message for r in report)


def test_user_code_errors_make_the_check_abstain_not_crash():
    """Labels out of range: the user's cross-entropy raises (through the mode recording loss calls: its frame
    forwards the call); ``data`` names the labels, ``init_loss`` abstains naming the user's line."""
    report = preflight(M.MLP(), train_dataloaders=M.out_of_range_loader(), checks=["data", "init_loss"])
    assert report["data"].status == "fail"
    result = report["init_loss"]
    assert result.status == "inconclusive" and "your code raised IndexError at" in result.message
    assert not report.ok and result.details["abstained"] == "user code raised"


def test_iterable_of_dicts_without_input_key_skips_with_hint():
    batches = DataLoader([{"pixels": i} for i in range(4)], batch_size=2)  # no known input key
    result = BatchIndependenceCheck().run(CheckContext(M.MLP(), batches))
    assert result.status == "skip" and "input_key" in result.message
