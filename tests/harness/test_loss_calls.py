"""One loss recorder: the checks' expected-loss reader records the harness's ``LossCall``."""

from __future__ import annotations

import pytest
import torch
from torch.nn import functional as F

from lightning_recipes.checks.loss._expected_loss import loss_call_for, record_loss_calls
from lightning_recipes.harness import LossCall, LossRecorder, TargetSwapError


def test_one_loss_call_class_output_is_the_prediction_loss_is_the_result():
    logits, target = torch.randn(4, 5), torch.tensor([0, 1, 2, 3])
    with record_loss_calls() as calls:
        loss = F.cross_entropy(logits, target)
        F.kl_div(logits.log_softmax(-1), logits.softmax(-1), reduction="batchmean")  # not a known kind
    assert [type(c) for c in calls] == [LossCall]
    (call,) = calls
    assert call.function == "cross_entropy" and call.output is logits and call.target is target
    assert torch.equal(call.loss, loss) and call.num_classes == 5 and call.integer_target
    assert loss_call_for(calls, loss) is call


def test_the_recorder_traces_targets_and_inspects_predictions_at_call_time():
    batch = {"x": torch.randn(4, 3), "labels": torch.tensor([0, 1, 0, 1])}
    weight = torch.randn(3, 2)
    with LossRecorder(batch, inspect_output=lambda t: tuple(t.shape)) as recorder:
        F.cross_entropy(batch["x"] @ weight, batch["labels"])
    (call,) = recorder.calls
    assert call.target_key == "labels" and call.output_keys == frozenset({"x"})
    assert (call.inspected, call.inspection) == (True, (4, 2))


def test_a_replacement_target_of_the_wrong_shape_is_a_typed_error():
    expected = r"the target of loss call 0 \(mse_loss\) is \[4\], not of shape \[3\]"
    with pytest.raises(TargetSwapError, match=expected), LossRecorder(targets=[torch.zeros(3)]):
        F.mse_loss(torch.zeros(4), torch.ones(4))
    with LossRecorder(targets=[torch.zeros(4)]) as recorder:
        swapped = F.mse_loss(torch.zeros(4), torch.ones(4))
    assert swapped.item() == 0.0 and torch.equal(recorder.calls[0].target, torch.zeros(4))


def test_a_target_drawn_like_a_batch_entry_carries_none_of_its_values():
    """A diffusion step's noise, ``randn_like(x0)``, is no function of ``x0``: the target has no batch source,
    while the noisy input it builds is still traced to ``x0``."""
    batch = (torch.randn(8, 2),)
    weight = torch.randn(2, 2)
    with LossRecorder(batch) as recorder:
        (x0,) = batch
        noise = torch.randn_like(x0)
        F.mse_loss((0.8 * x0 + 0.6 * noise) @ weight, noise)
        F.mse_loss(x0 @ weight, x0.new_zeros(8, 2) + x0)  # a value added to a factory's result: traced
    first, second = recorder.calls
    assert first.target_keys == frozenset() and first.output_keys == frozenset({0})
    assert second.target_keys == frozenset({0})
