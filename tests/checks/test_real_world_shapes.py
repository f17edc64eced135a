"""The checks on real-world module shapes: wrappers, dict batches and outputs, reconstruction models."""

from __future__ import annotations

from typing import Any

import lightning.pytorch as pl
import pytest
import torch
from torch import Tensor, nn
from torch.nn import functional as F

from galleries.preflight.families import _shapes_models as S
from galleries.preflight.families import shapes as gallery
from lightning_recipes.checks import (
    BatchIndependenceCheck,
    CheckContext,
    InputIndependenceCheck,
    Preflight,
    preflight,
)
from lightning_recipes.testing import TinyClassifier, fast_trainer, random_classification_loader

from . import _models as M


def _context(model: pl.LightningModule, data: dict[str, Any], **keys: Any) -> CheckContext:
    return CheckContext(model, data["train_dataloaders"], data.get("val_dataloaders"), **keys)


# ------------------------------------------------------------------------ item 1: modules without forward
@pytest.mark.parametrize(
    ("make", "data", "method"),
    [
        (S.WrappedCNN, S.digits_loaders, "perturbation"),
        (S.BackboneHead, lambda: S.digits_loaders(as_dict=True), "perturbation"),
        (S.WrappedTupleClassifier, S.tuple_token_loaders, "perturbation"),
    ],
    ids=["wrapped-cnn-dict-return", "backbone-head-dict-batch", "tuple-of-four"],
)
def test_batch_independence_observes_the_wrapped_model_instead_of_skipping(make, data, method):
    result = BatchIndependenceCheck().run(_context(make(), data()))
    assert result.status == "pass", result.message  # was: skip, "forward raised NotImplementedError"
    assert result.details["method"] == method


def test_batch_output_is_the_wrapped_output_not_a_loss_module_or_a_logged_metric():
    context = _context(S.BackboneHead(), S.digits_loaders(as_dict=True))
    batch = context.train_batches(1)[0]
    with torch.no_grad():
        output = context.batch_output(context.copy_model(), batch)
    assert tuple(output.shape) == (32, 10)  # was: the CrossEntropyLoss child's scalar


class _Inner(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 4))
        self.unused = nn.Linear(4, 4)


class DeepCall(M.SGDModule):
    """``training_step`` calls a grandchild (``self.model.net``): no direct child ever runs."""

    def __init__(self) -> None:
        super().__init__()
        self.model = _Inner()

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        x, y = batch
        return F.cross_entropy(self.model.net(x), y)


def test_a_nested_call_is_observed_at_the_outermost_module_that_ran():
    context = CheckContext(DeepCall(), random_classification_loader())
    with torch.no_grad():
        output = context.batch_output(context.copy_model(), context.train_batches(1)[0])
    assert tuple(output.shape) == (32, 4)  # the Sequential's logits, not its last Linear's input
    assert BatchIndependenceCheck().run(context).status == "pass"


def test_perturbing_the_input_of_a_dict_batch_reaches_the_wrapped_model():
    context = _context(S.HFClassifier(), S.token_classification_loaders())
    batch = context.train_batches(1)[0]
    model = context.copy_model().eval()
    inputs, _ = context.split(batch)
    with torch.no_grad():
        base = context.batch_output(model, batch)
        changed = context.batch_output(model, context.with_inputs(batch, (inputs + 1) % S.VOCAB))
    assert tuple(base.shape) == (16, 2)
    assert not torch.allclose(base, changed)


def test_modules_with_forward_keep_calling_forward_with_the_input_alone():
    model = TinyClassifier()
    context = CheckContext(model, random_classification_loader())
    calls = []
    model_copy = context.copy_model()
    model_copy.register_forward_hook(lambda *args: calls.append(1))
    with torch.no_grad():
        context.batch_output(model_copy, context.train_batches(1)[0])
    assert calls == [1]
    assert BatchIndependenceCheck().run(context).details["method"] == "perturbation"


# ------------------------------------------------------------------------ item 2: the target the loss reads
@pytest.mark.parametrize(
    ("make", "data", "target"),
    [
        (S.WrappedTupleClassifier, S.tuple_token_loaders, 3),  # (x, mask, lengths, y)
        (lambda: S.WrappedTupleClassifier("x_y_weight"), lambda: S.tuple_token_loaders("x_y_weight"), 1),
        (S.HFClassifier, S.token_classification_loaders, "labels"),
        (S.HFCausalLM, S.lm_loaders, "labels"),  # shifted and padded inside the model
        (lambda: S.HFCausalLM(labels_from_inputs=True), lambda: S.lm_loaders(labels=False), "input_ids"),
        (S.LitAutoEncoder, S.mnist_like_loaders, 0),  # (x, y) batch, the loss reads x
    ],
    ids=[
        "x-mask-lengths-y",
        "x-y-weight",
        "bert-dict",
        "gpt2-labels",
        "gpt2-labels-from-inputs",
        "autoencoder",
    ],
)
def test_the_target_is_the_batch_entry_the_loss_consumes(make, data, target):
    context = _context(make(), data())
    assert context.keys() == (None, target)
    _, targets = context.split(context.train_batches(1)[0])
    assert targets is not None and targets.dtype == (torch.float32 if target == 0 else torch.long)


def test_explicit_keys_always_win():
    context = _context(
        S.WrappedTupleClassifier("x_y_weight"), S.tuple_token_loaders("x_y_weight"), target_key=2
    )
    assert context.keys() == (None, 2)
    assert context.split(context.train_batches(1)[0])[1].dtype == torch.float32


def test_an_unconventional_dict_batch_is_read_from_the_loss_call():
    context = _context(S.UnconventionalKeys(), S.unconventional_loaders())
    assert context.keys() == ("pixels", "class_id")  # the input: the entry the output was computed from
    assert BatchIndependenceCheck().run(context).status == "pass"


class WeightedBCE(pl.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.model = nn.Linear(16, 1)
        self.criterion = nn.CrossEntropyLoss(label_smoothing=0.1)

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        x, y = batch
        logits = self.model(x).squeeze(-1)
        bce = F.binary_cross_entropy_with_logits(logits, (y > 1).float(), pos_weight=torch.tensor(3.0))
        return bce + 0.0 * self.criterion(torch.stack([logits, -logits], -1), (y > 1).long())


def test_loss_calls_record_the_function_tensors_keys_and_arguments():
    context = CheckContext(WeightedBCE(), random_classification_loader())
    batch = context.train_batches(1)[0]
    with torch.no_grad():
        bce, ce = context.loss_calls(context.copy_model(), batch)
    assert (bce.function, ce.function) == ("binary_cross_entropy_with_logits", "cross_entropy")
    assert bce.target_key == 1 and bce.output_keys == frozenset([0]) and bce.output.shape == batch[1].shape
    assert torch.equal(bce.target, (batch[1] > 1).float())
    assert bce.kwargs["pos_weight"].item() == 3.0 and bce.kwargs["reduction"] == "mean"
    assert ce.kwargs["label_smoothing"] == 0.1 and ce.kwargs["ignore_index"] == -100


def test_the_causal_lm_loss_call_is_traced_through_the_shift_to_labels():
    context = _context(S.HFCausalLM(), S.lm_loaders())
    batch = context.train_batches(1)[0]
    with torch.no_grad():
        call = context.loss_call(context.copy_model(), batch)
    assert call is not None and call.function == "cross_entropy"
    assert call.target_key == "labels" and not call.target_from("input_ids")
    assert "input_ids" in call.output_keys  # an all-ones attention mask is dropped by the model
    assert tuple(call.output.shape) == (16 * S.SEQ, S.VOCAB)  # flattened by the model's loss
    shifted = torch.cat([batch["labels"][:, 1:], torch.full((16, 1), -100)], 1).flatten()
    assert torch.equal(call.target, shifted)


def test_a_hand_written_loss_falls_back_to_the_convention():
    class HandWritten(S.WrappedTupleClassifier):
        def training_step(self, batch: Any, batch_idx: int) -> Tensor:
            x, y, _weight = batch
            return -self.model(x).log_softmax(-1).gather(1, y[:, None]).mean()

    context = _context(HandWritten("x_y_weight"), S.tuple_token_loaders("x_y_weight"))
    assert context.keys() == (None, None)
    assert context.split(context.train_batches(1)[0])[1].dtype == torch.float32  # the last entry


def test_the_probe_leaves_the_rng_untouched():
    context = _context(S.Denoiser(), S.digits_loaders())
    context.train_batches(1)
    before = torch.get_rng_state()
    context.keys()
    assert torch.equal(before, torch.get_rng_state())


# ------------------------------------------------------------------------ item 3: reconstruction models
def test_an_autoencoder_that_ignores_its_input_still_fails():
    result = InputIndependenceCheck(max_steps=50).run(
        _context(S.LitAutoEncoder(ignore_input=True), S.mnist_like_loaders())
    )
    assert result.status == "fail", result.message
    assert result.details["training_gain_over_targets_permuted"]["high"] < 0.05


class HandWrittenAutoEncoder(S.LitAutoEncoder):
    """The reconstruction loss as a formula, not a torch.nn.functional call: the check cannot see it."""

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        x, _ = batch
        x = x.view(x.size(0), -1)
        return ((self.decoder(self.encoder(x)) - x) ** 2).mean()


def test_an_unseen_reconstruction_loss_is_skipped_with_the_reason_never_failed():
    result = InputIndependenceCheck().run(_context(HandWrittenAutoEncoder(), S.mnist_like_loaders()))
    assert result.status == "skip", result.message  # the controls' pairs are invisible to this loss
    assert "does not read the targets" in result.summary


def test_preflight_on_fail_raise_no_longer_blocks_the_autoencoder_in_a_real_trainer(tmp_path):
    callback = Preflight(checks=["batch_independence", "input_independence"], on_fail="raise")
    trainer = fast_trainer(max_steps=2, callbacks=[callback], default_root_dir=tmp_path)
    data = S.mnist_like_loaders()
    trainer.fit(S.LitAutoEncoder(), data["train_dataloaders"], data["val_dataloaders"])  # was: PreflightError
    assert trainer.global_step == 2
    assert [r.status for r in callback.report] == ["pass", "pass"]


class Distilled(pl.LightningModule):
    """A target computed by the model (a teacher's predictions): no batch entry is the target."""

    def __init__(self) -> None:
        super().__init__()
        self.model = nn.Linear(16, 4)
        self.teacher = nn.Linear(16, 4)

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        x, _y, _weight = batch
        with torch.no_grad():
            soft = self.teacher(x).softmax(-1)
        return F.kl_div(self.model(x).log_softmax(-1), soft, reduction="batchmean")


def test_a_target_computed_by_the_model_is_not_read_as_the_input():
    x = torch.randn(64, 16)
    loader = torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(x, torch.zeros(64, dtype=torch.long), torch.ones(64)), batch_size=16
    )
    context = CheckContext(Distilled(), loader)
    with torch.no_grad():
        call = context.loss_call(context.copy_model(), context.train_batches(1)[0])
    assert call is not None and call.function == "kl_div" and call.target_from_model
    assert call.target_keys == frozenset() and call.target_key is None and not call.target_from(0)
    assert context.keys() == (None, None)  # the convention decides


# ------------------------------------------------------------------------ item 5: the shapes gallery
# the two batch-level checks, with a smaller step budget for the slow "no gap ever opens" failures
def _check(name: str) -> Any:
    return {
        "batch_independence": BatchIndependenceCheck(),
        "input_independence": InputIndependenceCheck(max_steps=50),
    }[name]


@pytest.mark.parametrize("case", gallery.BUGS, ids=[case.id for case in gallery.BUGS])
def test_every_shapes_bug_is_flagged_by_its_check(case):
    assert case.check is not None
    result = preflight(case.model(), **case.data(), checks=[_check(case.check)])[case.check]
    assert result.status == case.status, result.message
    assert all(word in result.message for word in case.words), result.message


# targets computed from the input: neither batch-level check may fail or skip them
RECONSTRUCTION = {
    "hf_gpt2_labels_from_input_ids",
    "lightning_autoencoder",
    "denoiser_noise_in_step",
    "masked_autoencoder",
}
# test_hf_models.py runs the whole preflight on the other Hugging Face cases.
LOCAL = [case for case in gallery.HEALTHY if not case.id.startswith("hf_") or case.id in RECONSTRUCTION]


@pytest.mark.parametrize("case", LOCAL, ids=[case.id for case in LOCAL])
def test_no_healthy_shape_fails_a_batch_level_check(case):
    report = preflight(case.model(), **case.data(), checks=["batch_independence", "input_independence"])
    for result in report:
        assert result.status == "pass", (result.name, result.message)
    baseline = report["input_independence"].details["evaluated_on"]
    assert ("trained on the real targets" in baseline) == (case.id in RECONSTRUCTION)


def test_the_shapes_gallery_has_the_shapes_the_issue_asks_for():
    shapes = {case.shape for case in gallery.HEALTHY}
    assert {"CNN", "MLP", "transformer LM", "encoder classifier", "autoencoder"} <= shapes
    assert len({case.id for case in gallery.BUGS + gallery.HEALTHY}) == len(gallery.BUGS + gallery.HEALTHY)


def test_a_spent_time_budget_ends_input_independence_inconclusive_saying_so():
    context = CheckContext(M.MLP(), M.shuffled_labels_loader())
    result = InputIndependenceCheck(time_budget=0.001).run(context)  # its safety cap: 2 s
    assert result.status in ("inconclusive", "fail"), result.message
    assert result.status == "fail" or result.details["stopped_by_budget"]
