"""Check that the target cannot be read off the inputs without learning."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Mapping
from typing import Any, Literal

import torch
from torch import Tensor
from typing_extensions import override

from lightning_recipes._validation import check_bool, check_in_range, check_int
from lightning_recipes.checks._budget import out_of_time
from lightning_recipes.checks._num_classes import IGNORE_INDEX
from lightning_recipes.checks.base import SanityCheck, TimeBudget
from lightning_recipes.checks.causality_check import aligned_output
from lightning_recipes.checks.report import CheckResult, CheckSkipped
from lightning_recipes.harness import CannotRunOnCopy
from lightning_recipes.harness import Harness as CheckContext
from lightning_recipes.harness.batches import Key, batch_size_of, slice_batch

__all__ = ["TargetLeakageCheck"]

_MAX_FEATURES = 1 << 16  # features per batch tensor looked at one by one; larger tensors are not scanned
_CHUNK = 2048  # features scored at once (memory: chunk x samples x bins comparisons)
_MIN_HELD_OUT = 20  # held-out samples needed before a per-feature accuracy means anything
_COPY_SHARE, _COPY_MARGIN = 0.95, 0.5  # sequence targets: share of positions trained to copy an input


class TargetLeakageCheck(SanityCheck):
    """Verify that the target is not recoverable from the inputs without learning (target leakage).

    A model that can read its label trains beautifully and is worthless. Four tests:

    **(0) The target reaches the model**: the copy (eval mode, same seed) runs ``training_step`` with only
    the target tensor changed (other values of the batch's own targets; ``ignore_index`` kept) and its output
    (seen with forward hooks) must not move. For sequence targets ``[B, S]`` the outputs up to ``t`` must not
    move when the targets from ``t`` on change (at ``t = 0, S/2, S-1``): teacher forcing with the target
    shifted right is legitimate, reading ``target[t]`` at position ``t`` is not. Lightning's own demo
    ``LightningTransformer`` fails it (its decoder is fed ``target``); a margin head that uses the label by
    design (ArcFace) would too: ``target_as_input=False`` turns this test off.

    **(a) Copy targets in sequence models** (token inputs ``[B, S]``, outputs ``[B, S, V]``): one backward
    pass of ``training_step``'s loss on a copy gives, for every output position, the class the loss pulls
    it toward (the most negative gradient of the logits: the target cross-entropy pairs with that position).
    Fails when at least 95% of the positions are trained toward the input token at the same position (LM
    targets not shifted) or one or two positions back (which a causal model has already read), and the
    next token is not the better explanation by 50 points. This measures what the loss rewards, so a
    Hugging Face LM fed ``labels == input_ids`` passes (it shifts inside its loss: the pairing is the next
    token) while the same labels through a head of one's own without the shift fail. This is the classic
    false-positive trap that comparing tensors alone falls into.

    **(b) One feature determines the label** (targets with one value per sample): every input feature
    (column, pixel of each channel, token position) and every other tensor of the batch (a dict entry such as
    ``label_copy``) is scored on its own. Classification: a lookup table from ``num_bins`` quantile bins of
    the feature (bin edges and the majority label per bin from the training batches) predicts the
    held-out labels; fails when one feature reaches ``max_accuracy`` while the majority class alone is at
    most 90%. Regression: the absolute Pearson or Spearman correlation of the feature with the target fails at
    ``max_correlation`` (an affine or monotone copy of the target). A tensor other than the input is only
    reported when the loss changes when it is permuted across the batch (the model reads it).

    **(c) Too good to be true** (classification, when (a) and (b) found nothing): a copy trains
    ``train_steps`` steps on the training batches with the module's optimizer, and the held-out loss is
    read after 5, 10, 20 ... steps. A ``warn`` when it falls below ``too_good_fraction x ln C`` (default
    5%: a geometric-mean probability of the held-out label of ``C ** -0.05``, 93% for 4 classes) this
    early. Measured after 20 steps: honest models at 0.29-0.61 x ln C (the library's digits CNN at widths 32
    and 8, MLPs on a linear teacher, one with an 85%-predictive feature), a one-hot copy of the label among
    standardised features at 0.03 x ln C. Only a warning: a genuinely easy task can do it too.

    (b) and (c) judge the target only when the loss reads it: the passes of (0) also tell whether the loss
    changes with the target alone; when it does not (an autoencoder whose batches carry a label it never
    reads, or another tensor is the real target: pass ``target_key``), they are reported as not applicable.

    Held-out data: the validation loader, else training batches kept out of (b) and (c).

    Cost: (0) two to four forward passes; (a) one forward and backward pass; (b) no model run for the input
    (sorting and counting over ``num_batches`` capped batches, vectorised over features), one forward per
    other tensor that determines the label; (c) up to ``train_steps`` optimizer steps and ``num_eval_batches``
    evaluations per look, on a copy. (0) and (a) run on the first 4 samples, (c) evaluates at most 128
    samples per held-out batch. A few host syncs per test. Measured side by side with ``input_independence``
    in one run (2-core machine shared at load 12, one thread): 0.6-0.7x its time on the demo CNN (the 20 steps
    of (c) dominate), 0.01x on the char transformer (only (0) and (a) apply); cheap enough to run by default.
    On Lightning's demo ``LightningTransformer`` (33,278-token vocabulary) about 3 s at that load, (0) and (a)
    dominating.

    Blind spots: (0) sees the target reaching the output only through the module's own forward or the last
    submodule ``training_step`` calls, on one batch; a label spread over several features (one-hot columns, a
    sum of two columns) is invisible to (b) and only (c) may warn; a leak that needs learning to extract (the
    label drawn faintly into an image, a noisy copy with <99% agreement) is not flagged. Features that take
    one value per sample (an ID column) cannot leak through (b) as held-out IDs are unseen, but a
    class-ordered ID can. Tensors larger than 65,536 features per sample are not scanned. Float sequence
    targets equal to the inputs (forecasting without a shift) look like reconstruction (an autoencoder) and
    are not flagged; a token autoencoder that reconstructs its own input without corruption is flagged by (a)
    (the task is then solved by copying: leave the check out). Leakage through preprocessing
    (statistics computed on train+validation) and duplicated samples across splits are not measured here (see
    ``split_overlap``).

    Args:
        num_batches: Training batches read.
        num_eval_batches: Held-out batches.
        num_samples: Samples kept from each training batch (``None``: whole batches).
        max_accuracy: (b) held-out accuracy of one feature's lookup table that counts as leakage.
        max_correlation: (b) absolute correlation of one feature with a regression target that counts as
            leakage.
        num_bins: (b) quantile bins per feature.
        train_steps: (c) optimizer steps of the short training (0 turns (c) off).
        too_good_fraction: (c) held-out loss below this fraction of ``ln C`` warns.
        target_as_input: (0) test whether the model's output changes with the target alone.
        on_fail: ``"raise"`` or ``"warn"`` when used as a callback.
        input_key: Index or key of the input in a batch.
        target_key: Index or key of the target.

    Raises:
        ValueError: If a count is out of range or a fraction is not in (0, 1].
        TypeError: If ``target_as_input`` is not a bool.

    Example:
        >>> import torch
        >>> from lightning_recipes.checks import preflight
        >>> from lightning_recipes.testing import TinyClassifier
        >>> x = torch.randn(256, 16)
        >>> y = (x[:, :4] @ torch.randn(4, 4)).argmax(-1)
        >>> x[:, 7] = y  # the label written into the features
        >>> loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=32)
        >>> result = preflight(TinyClassifier(), train_dataloaders=loader, checks=[TargetLeakageCheck()])
        >>> result["target_leakage"].status, result["target_leakage"].details["feature"]
        ('fail', 'inputs[:, 7]')
    """

    name = "target_leakage"
    model_samples = 4  # samples of the first batch that tests (0) and (a) run the model on
    eval_samples = 128  # samples of each held-out batch the short training (c) is evaluated on

    def __init__(
        self,
        num_batches: int = 8,
        num_eval_batches: int = 2,
        num_samples: int | None = 64,
        max_accuracy: float = 0.99,
        max_correlation: float = 0.999,
        num_bins: int = 32,
        train_steps: int = 20,
        too_good_fraction: float = 0.05,
        target_as_input: bool = True,
        *,
        on_fail: Literal["raise", "warn"] = "raise",
        input_key: Key = None,
        target_key: Key = None,
        time_budget: TimeBudget = "default",
    ) -> None:
        super().__init__(on_fail=on_fail, input_key=input_key, target_key=target_key, time_budget=time_budget)
        check_int("num_batches", num_batches, minimum=1)
        check_int("num_eval_batches", num_eval_batches, minimum=1)
        if num_samples is not None:
            check_int("num_samples", num_samples, minimum=2)
        check_in_range("max_accuracy", max_accuracy, 0, 1, low_open=True)
        check_in_range("max_correlation", max_correlation, 0, 1, low_open=True)
        check_int("num_bins", num_bins, minimum=2)
        check_int("train_steps", train_steps, minimum=0)
        check_in_range("too_good_fraction", too_good_fraction, 0, 1, low_open=True)
        check_bool("target_as_input", target_as_input)
        self.num_batches = num_batches
        self.num_eval_batches = num_eval_batches
        self.num_samples = num_samples
        self.max_accuracy = max_accuracy
        self.max_correlation = max_correlation
        self.num_bins = num_bins
        self.train_steps = train_steps
        self.too_good_fraction = too_good_fraction
        self.target_as_input = target_as_input

    @override
    def check(self, context: CheckContext) -> CheckResult:
        train, held_out, source = self._read(context)
        inputs, targets = context.split(train[0])
        if inputs is None or targets is None:
            raise CheckSkipped(
                "cannot find both the input and the target tensor in the batch; pass `input_key` / "
                "`target_key`."
            )
        details: dict[str, Any] = {"held_out": source}
        fails: list[str] = []
        notes: list[str] = []  # what each test found, for a pass message
        skipped: list[str] = []  # why a test did not apply

        first = _first_samples(context, train[0], self.model_samples)
        fed = self._reads_target(context, first)
        details["target_as_input"] = fed
        if "reason" in fed:
            skipped.append(f"(0) {fed['reason']}")
        elif fed["leak"]:
            fails.append(fed["message"])
        else:
            notes.append(fed["message"])

        copy = self._copy_targets(context, first)
        details["copy_targets"] = copy
        if "reason" in copy:
            skipped.append(f"(a) {copy['reason']}")
        elif copy["leak"] is not None:
            fails.append(copy["message"])
            details["measured"] = copy["shares"][copy["leak"]]
        else:
            notes.append(copy["message"])

        if fed.get("loss_uses_target") is False:
            ignored = (
                "the loss does not change with the target tensor (a reconstruction or self-supervised model, "
                "or another tensor is the target: pass `target_key`)"
            )
            feature: dict[str, Any] = {"reason": f"single feature: {ignored}"}
        else:
            feature = self._single_feature(context, train, held_out)
        details["single_feature"] = feature
        if "reason" in feature:
            skipped.append(f"(b) {feature['reason']}")
        elif feature["leak"]:
            fails.append(feature["message"])
            details["feature"] = feature["name"]
            details["measured"] = feature["score"]
        else:
            notes.append(feature["message"])
            details.setdefault("measured", feature["score"])

        if fails:
            return CheckResult(
                self.name,
                "fail",
                "target leakage, the model can get its label without learning: "
                + " ".join(fails)
                + " The model will train beautifully and learn nothing usable.",
                details,
            )
        capped = [_first_samples(context, batch, self.eval_samples) for batch in held_out]
        too_good = (
            {"reason": "too good to be true: the loss does not change with the target tensor"}
            if fed.get("loss_uses_target") is False
            else self._too_good(context, train, capped, feature.get("task"))
        )
        details["too_good"] = too_good
        if "reason" in too_good:
            skipped.append(f"(c) {too_good['reason']}")
        elif too_good["leak"]:
            return CheckResult(self.name, "warn", too_good["message"], details)
        else:
            notes.append(too_good["message"])
        if not notes:
            raise CheckSkipped("no leakage test applies here: " + "; ".join(skipped) + ".")
        tail = f" Not tested: {'; '.join(skipped)}." if skipped else ""
        message = "no target leakage found: " + "; ".join(notes) + "." + tail
        return CheckResult(self.name, "pass", message, details)

    # ------------------------------------------------------------------ data
    def _read(self, context: CheckContext) -> tuple[list[Any], list[Any], str]:
        held_out = context.val_batches(self.num_eval_batches)
        if held_out:
            return (
                context.read_train_batches(self.num_batches, self.num_samples),
                held_out,
                "validation batches",
            )
        available = context.read_train_batches(self.num_batches + self.num_eval_batches, self.num_samples)
        if len(available) < 2:
            raise CheckSkipped("needs held-out data: a validation loader or at least 2 training batches.")
        keep = min(self.num_eval_batches, len(available) // 2)
        return available[:-keep], available[-keep:], "held-out training batches (no validation loader)"

    # ------------------------------------------------------------------ (0)
    def _reads_target(self, context: CheckContext, batch: Any) -> dict[str, Any]:
        """Change only the target and watch the model's output: it must not move (for sequence targets:
        the outputs up to ``t`` must not move when the targets from ``t`` on change; teacher forcing with
        targets shifted right is legitimate). Also records whether the loss reads the target at all
        (``loss_uses_target``): (b) and (c) mean nothing for a loss that ignores it (an autoencoder)."""
        inputs, targets = context.split(batch)
        assert inputs is not None and targets is not None
        if _same_tensor(inputs, targets):
            return {
                "reason": "target fed to the model: the target is the input (a reconstruction or "
                "self-supervised loss), so changing it changes the input"
            }
        key = next((k for k, _, t in _entries(batch) if t is targets), None)
        if key is None or targets.ndim == 0 or targets.dtype == torch.bool or targets.is_complex():
            return {"reason": "target fed to the model: the target tensor cannot be replaced"}
        replacement = _other_values(targets, context.seed)
        if replacement is None:
            return {"reason": "target fed to the model: the target holds a single value"}
        model = context.copy_model()
        model.eval()
        base, base_loss = _observed_output(context, model, batch)
        if base is None:
            return {"reason": "target fed to the model: no output tensor was observed"}
        sequence = targets.ndim >= 2 and targets.shape[1] >= 2 and inputs.ndim >= 2
        sequence = sequence and targets.shape[:2] == inputs.shape[:2]
        if sequence:
            try:
                base = aligned_output(base, inputs)
            except CheckSkipped:
                sequence = False
        seq = int(targets.shape[1]) if sequence else 1
        starts = sorted({0, seq // 2, seq - 1}) if sequence and self.target_as_input else [0]
        moved: list[Tensor] = []
        changed_loss: Tensor | None = None
        for start in starts:
            if out_of_time() and moved:
                break
            changed = targets.clone()
            if sequence:
                changed[:, start:] = replacement[:, start:]
            else:
                changed = replacement
            output, loss = _observed_output(context, model, _replace_entry(batch, key, changed))
            if start == 0:
                changed_loss = loss
            if output is None or output.numel() != base.numel():
                return {"reason": "target fed to the model: the output's shape changed with the target"}
            delta = (output.reshape(base.shape) - base).float().abs()
            moved.append(delta[:, : start + 1].amax() if sequence else delta.amax())
        scale = base.float().abs().amax()
        # Uniform outputs (a zero-initialised head) give a cross-entropy of ln C whatever the target: then an
        # unchanged loss proves nothing, and (b)/(c) run.
        flat = base.float().reshape(len(base), -1) if base.ndim > 1 else base.float()[None, :]
        spread = (flat.amax(-1) - flat.amin(-1)).amax()
        losses = [base_loss, changed_loss] if base_loss is not None and changed_loss is not None else []
        values = torch.stack([*moved, scale, spread, *losses]).tolist()  # sync: once
        changes, magnitude, varies = values[: len(moved)], values[len(moved)], values[len(moved) + 1] > 0
        uses = None
        if losses and varies:
            uses = abs(values[-1] - values[-2]) > 1e-6 * max(abs(values[-2]), 1e-12)
        limit = 1e-5 * max(magnitude, 1e-12)
        result: dict[str, Any] = {"starts": starts[: len(changes)], "changes": changes, "leak": False}
        result["loss_uses_target"] = uses
        if not self.target_as_input:
            result["reason"] = "target fed to the model: turned off (target_as_input=False)"
            return result
        leaking = [start for start, change in zip(starts, changes) if change > limit]
        if not leaking:
            result["message"] = "(0) the outputs do not change when only the target changes" + (
                " from position t on (outputs up to t compared)" if sequence else ""
            )
            return result
        result["leak"] = True
        if sequence:
            start = leaking[0]
            result["message"] = (
                f"the model's output at position {start} changes when only the target from position {start} "
                "on changes: the target is fed to the model, so the output at t sees the token it must "
                "predict (e.g. `self(inputs, target)` into a decoder that reads target[t] at position t). "
                "Try: feed the decoder the target shifted right (a start token + target[:, :-1]) or only the "
                "inputs; the target belongs in the loss."
            )
        else:
            result["message"] = (
                f"the model's output changes when only the target ({_label_of(batch, key)}) changes: the "
                "label reaches the model (`self(x, y)`, a concatenation, a label-conditioned layer). Try: "
                "pass the label only to the loss. A head that uses the label by design (a margin head such "
                "as ArcFace) is the exception: TargetLeakageCheck(target_as_input=False)."
            )
        return result

    # ------------------------------------------------------------------ (a)
    def _copy_targets(self, context: CheckContext, batch: Any) -> dict[str, Any]:
        inputs, _ = context.split(batch)
        assert inputs is not None
        if inputs.ndim != 2 or torch.is_floating_point(inputs) or inputs.shape[1] < 2:
            return {"reason": "copy targets: the inputs are not token ids [B, S]"}
        if not context.model.automatic_optimization:
            return {"reason": "copy targets: manual optimisation, the loss cannot be replayed"}
        model = context.copy_model()
        model.eval()
        torch.manual_seed(context.seed)
        with torch.enable_grad(), context.capture_forward(model) as captured:
            loss = context.training_loss(model, batch)
        logits = captured.last()
        try:
            aligned = logits is not None and aligned_output(logits, inputs).ndim == 3
        except CheckSkipped:
            aligned = False
        if logits is None or not aligned or not logits.requires_grad or not loss.requires_grad:
            shape = None if logits is None else list(logits.shape)
            return {"reason": f"copy targets: the output {shape} is not position-aligned logits [B, S, V]"}
        logits.retain_grad()
        loss.backward()
        if logits.grad is None:
            return {"reason": "copy targets: the loss does not flow through the observed output"}
        grad = aligned_output(logits.grad.detach().float(), inputs)
        active = grad.abs().amax(-1) > 0  # positions the loss trains
        paired = grad.argmin(-1)  # cross-entropy pulls each trained position toward its target class
        shares_t, counts = [], []
        for shift in (-1, 0, 1, 2):  # target at t == input at t - shift (-1: the next token)
            if shift >= 0:
                p, x, a = paired[:, shift:], inputs[:, : inputs.shape[1] - shift], active[:, shift:]
            else:
                p, x, a = paired[:, :shift], inputs[:, -shift:], active[:, :shift]
            counts.append(a.sum())
            shares_t.append(((p == x) & a).sum() / a.sum().clamp(min=1))
        values = torch.stack(shares_t).tolist()  # sync: once
        trained = int(torch.stack(counts)[1])  # sync: once
        shares = {"next": values[0], "same": values[1], "back1": values[2], "back2": values[3]}
        if trained < 8:
            return {"reason": f"copy targets: only {trained} trained positions"}
        worst = max(("same", "back1", "back2"), key=lambda k: shares[k])
        result: dict[str, Any] = {"shares": shares, "trained_positions": trained, "leak": None}
        if shares[worst] >= _COPY_SHARE and shares[worst] - shares["next"] >= _COPY_MARGIN:
            where = {
                "same": "at the same position",
                "back1": "one position back",
                "back2": "two positions back",
            }
            result["leak"] = worst
            result["message"] = (
                f"the loss trains the output at position t toward the input token {where[worst]} "
                f"({shares[worst]:.0%} of {trained} trained positions; the next token only "
                f"{shares['next']:.0%}), which the model reads at t: it learns to copy. "
                + (
                    "The LM targets are not shifted (targets == inputs). "
                    if worst == "same"
                    else "The targets are shifted the wrong way. "
                )
                + "Try: inputs = tokens[:, :-1], targets = tokens[:, 1:]; or shift the logits against the "
                "labels (logits[:, :-1] vs labels[:, 1:]) as Hugging Face LM heads do inside their loss."
            )
        else:
            result["message"] = (
                f"(a) the loss pairs output t with the next token at {shares['next']:.0%} and with the input "
                f"at t at {shares['same']:.0%} of {trained} positions"
            )
        return result

    # ------------------------------------------------------------------ (b)
    def _single_feature(self, context: CheckContext, train: list[Any], held_out: list[Any]) -> dict[str, Any]:
        y_train, y_held = _per_sample_targets(context, train), _per_sample_targets(context, held_out)
        if y_train is None or y_held is None:
            return {"reason": "single feature: the targets are not one value per sample"}
        if len(y_held) < _MIN_HELD_OUT:
            return {"reason": f"single feature: only {len(y_held)} held-out samples (need {_MIN_HELD_OUT})"}
        groups = _feature_groups(context, train, held_out)
        if not groups:
            return {"reason": "single feature: no batch tensor with one row per sample besides the target"}
        everything = torch.cat([y_train, y_held])
        integral = bool((everything == everything.round()).all())  # sync: once
        classes = torch.unique(everything)
        is_classification = not torch.is_floating_point(everything) or (integral and len(classes) <= 32)
        if is_classification:
            if len(classes) < 2:
                return {"reason": "single feature: the labels hold one class"}
            index = torch.searchsorted(classes, everything)
            return self._lookup(context, groups, index[: len(y_train)], index[len(y_train) :], len(classes))
        return self._correlation(groups, y_train.float(), y_held.float())

    def _lookup(
        self, context: CheckContext, groups: list[_Group], y_train: Tensor, y_held: Tensor, classes: int
    ) -> dict[str, Any]:
        majority = torch.bincount(y_train, minlength=classes).argmax()
        baseline = float((y_held == majority).float().mean())  # sync: once
        best, best_group, best_index, scanned = -1.0, None, 0, 0
        for group in groups:
            for start in range(0, group.train.shape[1], _CHUNK):
                if out_of_time() and scanned:
                    break
                x, h = group.train[:, start : start + _CHUNK], group.held[:, start : start + _CHUNK]
                accuracy = _lookup_accuracy(x, h, y_train, y_held, classes, self.num_bins, majority)
                value, where = accuracy.max(0)
                scanned += x.shape[1]
                if float(value) > best:  # sync: once per chunk
                    best, best_group, best_index = float(value), group, start + int(where)
        assert best_group is not None
        name = best_group.feature_name(best_index)
        result: dict[str, Any] = {
            "task": ("classification", classes),
            "name": name,
            "score": best,
            "majority_baseline": baseline,
            "features_scanned": scanned,
            "leak": False,
        }
        stated = (
            f"a lookup table on `{name}` alone predicts {best:.1%} of {len(y_held)} held-out labels "
            f"({classes} classes, majority class {baseline:.1%}; leakage at >= {self.max_accuracy:.0%})"
        )
        if best >= self.max_accuracy and baseline <= 0.9:
            return self._confirm(context, best_group, result, stated)
        encoded = _label_encoding_feature(groups, y_train, y_held, classes)
        if encoded is not None:
            group, index = encoded
            result.update({"name": group.feature_name(index), "encodes_label_within_each_split": True})
            stated = (
                f"`{group.feature_name(index)}` takes one value per class and a different value for each "
                f"class within the training samples and again within the held-out samples ({classes} "
                "classes): it encodes the label (a statistic grouped by the label, a per-split label "
                "encoding), though the values differ between the splits"
            )
            return self._confirm(context, group, result, stated)
        result["message"] = f"(b) best single feature: {stated}"
        return result

    def _correlation(self, groups: list[_Group], y_train: Tensor, y_held: Tensor) -> dict[str, Any]:
        y = torch.cat([y_train, y_held])
        best, best_group, best_index = -1.0, None, 0
        for group in groups:
            for start in range(0, group.train.shape[1], _CHUNK):
                if out_of_time() and best_group is not None:
                    break
                x = torch.cat([group.train[:, start : start + _CHUNK], group.held[:, start : start + _CHUNK]])
                score = torch.maximum(_abs_pearson(x, y), _abs_pearson(_ranks(x), _ranks(y[:, None])[:, 0]))
                value, where = score.max(0)
                if float(value) > best:  # sync: once per chunk
                    best, best_group, best_index = float(value), group, start + int(where)
        assert best_group is not None
        name = best_group.feature_name(best_index)
        result: dict[str, Any] = {"task": ("regression", None), "name": name, "score": best, "leak": False}
        stated = (
            f"`{name}` alone correlates with the regression target at |r| = {best:.4f} over {len(y)} samples "
            f"(leakage at >= {self.max_correlation})"
        )
        if best >= self.max_correlation:
            return self._confirm(None, best_group, result, stated)
        result["message"] = f"(b) best single feature: {stated}"
        return result

    def _confirm(
        self, context: CheckContext | None, group: _Group, result: dict[str, Any], stated: str
    ) -> dict[str, Any]:
        """A leaking tensor other than the input counts only if the model reads it."""
        if not group.is_input and context is not None:
            reads = _model_reads(context, group.key, group.first_batch)
            result["model_reads_it"] = reads
            if reads is False:
                result["message"] = (
                    f"(b) {stated}, but the loss does not change when it is permuted: the model does not "
                    "read it (harmless; drop it from the batch to be sure)"
                )
                return result
        result["leak"] = True
        source = (
            "an input feature"
            if group.is_input
            else f"`{group.label}`, a batch entry the model reads besides its input"
        )
        result["message"] = (
            f"{stated}: {source} determines the label. Likely causes: the label (or a column computed from "
            "it after the fact) was joined into the features, written into the sample (a pixel, a token), or "
            f"passed to the model with the batch. Try: remove `{result['name']}` from the model's inputs "
            "and check how the dataset builds each sample."
        )
        return result

    # ------------------------------------------------------------------ (c)
    def _too_good(
        self, context: CheckContext, train: list[Any], held_out: list[Any], task: Any
    ) -> dict[str, Any]:
        if self.train_steps == 0:
            return {"reason": "too good to be true: turned off (train_steps=0)"}
        if not context.model.automatic_optimization:
            return {"reason": "too good to be true: manual optimisation"}
        classes = task[1] if task is not None and task[0] == "classification" else None
        if classes is None:  # regression has no ln C; an LM on predictable data collapses honestly
            return {"reason": "too good to be true: needs classification with one label per sample"}
        bound = self.too_good_fraction * math.log(classes)
        torch.manual_seed(context.seed)
        model = context.copy_model()
        optimizers = context.build_optimizers(model).optimizers
        looks: list[dict[str, float]] = []
        step, look = 0, min(5, self.train_steps)
        stopped = ""
        while True:
            while step < look:
                if out_of_time():
                    stopped = f" (the time budget stopped training at step {step})"
                    break
                context.optimization_step(model, optimizers, train[step % len(train)], step)
                step += 1
            loss = _held_out_loss(context, model, held_out)  # sync: once per look
            looks.append({"step": step, "loss": loss})
            if loss < bound or step >= self.train_steps or stopped:
                break
            look = min(2 * look, self.train_steps)
        result: dict[str, Any] = {"looks": looks, "bound": bound, "classes": classes, "leak": loss < bound}
        ratio = loss / math.log(classes)
        if result["leak"]:
            result["message"] = (
                f"held-out loss {loss:.4g} after only {step} training steps of a copy, below "
                f"{self.too_good_fraction:.0%} of ln {classes} = {bound:.3g} (the held-out labels get a "
                f"geometric-mean probability of {math.exp(-loss):.1%}). Honest models are still learning "
                "this early (the library's digits CNN is at 0.3-0.6 x ln 10 after 20 steps): the target is "
                "likely recoverable from the inputs through several features at once (a one-hot copy, an ID "
                "that encodes the class), or held-out samples duplicate training ones. Try: train a model on "
                "a few input features at a time to find them; run the split_overlap check. If the task is "
                "simply "
                "easy, TargetLeakageCheck(train_steps=0) turns this test off."
            )
        else:
            result["message"] = (
                f"(c) held-out loss after {step} steps {loss:.4g} = {ratio:.2f} x ln {classes} (too good "
                f"below {self.too_good_fraction:.0%}){stopped}"
            )
        return result


class _Group:
    """One tensor of the batch flattened to features: ``[N, D]`` training rows, ``[M, D]`` held-out rows."""

    def __init__(
        self, key: Any, label: str, is_input: bool, shape: tuple[int, ...], first_batch: Any
    ) -> None:
        self.key, self.label, self.is_input, self.shape = key, label, is_input, shape
        self.first_batch = first_batch
        self.train: Tensor = torch.empty(0)
        self.held: Tensor = torch.empty(0)

    def feature_name(self, index: int) -> str:
        position = []
        for size in reversed(self.shape):
            position.append(index % size)
            index //= size
        where = ", ".join(str(p) for p in reversed(position)) if position else "0"
        return f"{'inputs' if self.is_input else self.label}[:, {where}]"


def _entries(batch: Any) -> list[tuple[Any, str, Tensor]]:
    if isinstance(batch, Tensor):
        return [(None, "batch", batch)]
    if isinstance(batch, Mapping):
        return [(k, f"batch[{k!r}]", v) for k, v in batch.items() if isinstance(v, Tensor)]
    if isinstance(batch, (list, tuple)):
        return [(i, f"batch[{i}]", v) for i, v in enumerate(batch) if isinstance(v, Tensor)]
    return []


def _feature_groups(context: CheckContext, train: list[Any], held_out: list[Any]) -> list[_Group]:
    """The input and every other per-sample tensor of the batch (not the target), as feature matrices."""
    inputs, targets = context.split(train[0])
    size = len(targets) if targets is not None and targets.ndim > 0 else 0
    groups = []
    for key, label, tensor in _entries(train[0]):
        if tensor is targets or tensor.ndim == 0 or tensor.shape[0] != size or tensor.is_complex():
            continue
        shape = tuple(tensor.shape[1:])
        if math.prod(shape) > _MAX_FEATURES:
            continue
        group = _Group(key, label, tensor is inputs, shape, train[0])
        rows = []
        for split in (train, held_out):
            parts = []
            for batch in split:
                value = dict(_entries_by_key(batch)).get(key)
                if value is None or tuple(value.shape[1:]) != shape:
                    break
                parts.append(value.detach().reshape(len(value), -1).float())
            else:
                rows.append(torch.cat(parts))
                continue
            break
        if len(rows) == 2:
            group.train, group.held = rows
            groups.append(group)
    return groups


def _entries_by_key(batch: Any) -> list[tuple[Any, Tensor]]:
    return [(key, tensor) for key, _, tensor in _entries(batch)]


def _per_sample_targets(context: CheckContext, batches: list[Any]) -> Tensor | None:
    values = []
    for batch in batches:
        _, targets = context.split(batch)
        if targets is None or targets.ndim == 0 or targets.is_complex():
            return None
        if targets.ndim == 2 and targets.shape[1] == 1:
            targets = targets[:, 0]
        if targets.ndim != 1:
            return None
        values.append(targets.detach())
    return torch.cat(values) if values else None


def _lookup_accuracy(
    x: Tensor, h: Tensor, y: Tensor, y_held: Tensor, classes: int, bins: int, majority: Tensor
) -> Tensor:
    """Held-out accuracy of a per-feature lookup table: quantile bins of the training values (one bin per
    value for a feature with at most ``bins`` values), majority label per bin (an empty bin predicts the
    overall majority). ``x`` ``[N, D]``, ``h`` ``[M, D]`` -> ``[D]``."""
    count, features = x.shape
    ordered = x.sort(0).values
    positions = torch.linspace(0, count - 1, bins + 1, device=x.device)[1:-1].round().long()
    edges = ordered[positions]  # [bins - 1, D], ascending per feature
    # A feature with at most `bins` distinct values gets one bin per value (a rare value is no quantile).
    new = torch.ones_like(ordered, dtype=torch.bool)
    new[1:] = ordered[1:] != ordered[:-1]
    rank = new.long().cumsum(0) - 1  # index of each sorted value among the column's distinct values
    exact = torch.full((bins, features), math.inf, device=x.device, dtype=x.dtype)
    exact.scatter_(0, rank.clamp(max=bins - 1), ordered)
    edges = torch.where(new.sum(0) <= bins, exact[: bins - 1], edges).T.contiguous()  # [D, bins - 1]
    train_bins = torch.searchsorted(edges, x.T.contiguous())  # [D, N]: count of edges below each value
    codes = train_bins * classes + y.to(x.device)[None, :]
    table = torch.zeros(features, bins * classes, device=x.device).scatter_add_(
        1, codes, torch.ones_like(codes, dtype=torch.float)
    )
    table = table.view(features, bins, classes)
    predict = torch.where(table.sum(-1) > 0, table.argmax(-1), majority.to(x.device))  # [D, bins]
    held_bins = torch.searchsorted(edges, h.T.contiguous())  # [D, M]
    return (predict.gather(1, held_bins) == y_held.to(x.device)[None, :]).float().mean(1)


def _abs_pearson(x: Tensor, y: Tensor) -> Tensor:
    """``|corr(x[:, d], y)|`` for every column (0 for constant columns)."""
    xc, yc = x - x.mean(0), y - y.mean()
    denominator = xc.norm(dim=0) * yc.norm()
    return torch.where(denominator > 0, (xc * yc[:, None]).sum(0).abs() / denominator.clamp(min=1e-12), 0.0)


def _ranks(x: Tensor) -> Tensor:
    return x.argsort(0).argsort(0).float()


def _model_reads(context: CheckContext, key: Any, batch: Any) -> bool | None:
    """Whether ``training_step``'s loss changes when batch entry ``key`` is rolled across the batch."""
    value = dict(_entries_by_key(batch))[key]
    changed = _replace_entry(batch, key, value.roll(1, 0))
    model = context.copy_model()
    model.eval()
    losses = []
    with torch.no_grad():
        for candidate in (batch, changed):
            torch.manual_seed(context.seed)
            try:
                losses.append(context.training_loss(model, candidate).float())
            except CannotRunOnCopy:
                return None
    before, after = torch.stack(losses).tolist()  # sync: once
    return abs(after - before) > 1e-6 * max(abs(before), 1e-12)


def _encodes_label(x: Tensor, y: Tensor, classes: int) -> Tensor:
    """Per feature of ``x`` ``[N, F]``: constant within every class of ``y`` present at least twice, with a
    different value for each class (at least two such classes)."""
    x = x.float()
    counts = torch.bincount(y, minlength=classes)
    index = y[:, None].expand_as(x)
    low = torch.full((classes, x.shape[1]), float("inf")).scatter_reduce(0, index, x, "amin")
    high = torch.full((classes, x.shape[1]), float("-inf")).scatter_reduce(0, index, x, "amax")
    present = counts >= 2
    if int(present.sum()) < 2 or bool((counts == 1).any()):
        return torch.zeros(x.shape[1], dtype=torch.bool)
    constant = ((high - low)[present] == 0).all(0)
    values = low[present].sort(0).values
    distinct = (values[1:] > values[:-1]).all(0)
    return constant & distinct & torch.isfinite(values).all(0)


def _label_encoding_feature(
    groups: list[_Group], y_train: Tensor, y_held: Tensor, classes: int
) -> tuple[_Group, int] | None:
    """The first feature that encodes the label within the training samples and within the held-out
    samples (a function of the label in each split, even when its values differ between the splits)."""
    for group in groups:
        train, held = group.train.cpu(), group.held.cpu()
        both = _encodes_label(train, y_train.cpu(), classes) & _encodes_label(held, y_held.cpu(), classes)
        if bool(both.any()):  # sync: once per group
            return group, int(both.nonzero()[0, 0])
    return None


def _same_tensor(a: Tensor, b: Tensor) -> bool:
    """Whether two batch entries are one tensor (or views of one storage): a target read from the input."""
    if a is b:
        return True
    try:
        return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()
    except (RuntimeError, NotImplementedError):  # tensors without storage (meta, some subclasses)
        return False


def _label_of(batch: Any, key: Any) -> str:
    return next((label for k, label, _ in _entries(batch) if k == key), "the target")


def _replace_entry(batch: Any, key: Any, value: Tensor) -> Any:
    """A new batch with entry ``key`` replaced (dict key or tuple/list index)."""
    if isinstance(batch, Tensor):
        return value
    if isinstance(batch, Mapping):
        changed: Any = dict(batch)
        changed[key] = value
        return changed
    items = list(batch)
    items[key] = value
    if isinstance(batch, tuple) and hasattr(batch, "_fields"):
        return type(batch)(*items)
    return tuple(items) if isinstance(batch, tuple) else items


def _other_values(targets: Tensor, seed: int) -> Tensor | None:
    """A tensor like ``targets`` that differs everywhere (integer targets: other values present in the batch;
    ``ignore_index`` entries kept), or ``None`` if the targets hold one value."""
    generator = torch.Generator(device="cpu").manual_seed(seed)
    if torch.is_floating_point(targets):
        noise = torch.randn(targets.shape, generator=generator).to(targets.device, targets.dtype)
        return targets + noise * (targets.float().std().nan_to_num(0.0) + 1.0).to(targets.dtype)
    valid = targets != IGNORE_INDEX
    pool = torch.unique(targets[valid])
    if len(pool) < 2:
        return None
    offsets = torch.randint(1, len(pool), targets.shape, generator=generator).to(targets.device)
    position = torch.searchsorted(pool, targets.clamp(min=int(pool[0])))  # sync: once
    return torch.where(valid, pool[(position + offsets) % len(pool)], targets)


def _observed_output(context: CheckContext, model: Any, batch: Any) -> tuple[Tensor | None, Tensor | None]:
    """The output tensor seen (forward hooks) while ``training_step`` runs on ``batch`` and the loss (``None``
    when the step returns none), seeded, no grad."""
    torch.manual_seed(context.seed)
    loss = None
    with torch.no_grad(), context.capture_forward(model) as captured, contextlib.suppress(CannotRunOnCopy):
        loss = context.training_loss(model, batch).float()
    output = captured.last()
    return (None if output is None else output.detach()), loss


def _first_samples(context: CheckContext, batch: Any, count: int) -> Any:
    size = batch_size_of(batch, context.input_key)
    return batch if size is None or size <= count else slice_batch(batch, count, size)


def _held_out_loss(context: CheckContext, model: Any, held_out: list[Any]) -> float:
    model.eval()
    with torch.no_grad():
        losses = [context.training_loss(model, batch, i).float() for i, batch in enumerate(held_out)]
    model.train()
    return float(torch.stack(losses).mean())  # sync: once
