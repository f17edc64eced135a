"""Which loss function consumed which tensors while ``training_step`` ran, and what it should read at init.

:func:`record_loss_calls` watches the ``torch.nn.functional`` losses (``nn.CrossEntropyLoss`` and friends call
them too, as do Hugging Face models) with the harness's ``LossRecorder`` and keeps one ``LossCall`` per
call: the function, the prediction and target tensors, the keyword arguments and the loss.
:func:`expected_initial_loss` turns the call that produced the returned loss into the value an untrained
model should score.

Example:
    >>> import torch
    >>> from torch.nn import functional as F
    >>> with record_loss_calls() as calls:
    ...     loss = F.cross_entropy(torch.zeros(4, 10), torch.tensor([0, 1, 2, 3]))
    >>> calls[0].function, calls[0].num_classes
    ('cross_entropy', 10)
    >>> expectation = expected_initial_loss(calls[0])
    >>> round(expectation.value, 4), expectation.source
    (2.3026, 'ln 10, logits [4, 10] for integer targets [4]')
"""

from __future__ import annotations

import math
from collections.abc import Callable, Generator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from lightning_recipes.harness import LossCall, LossRecorder

__all__ = ["KINDS", "Expectation", "expected_initial_loss", "loss_call_for", "record_loss_calls", "target_of"]

KINDS = frozenset(
    {
        "cross_entropy",
        "nll_loss",
        "binary_cross_entropy_with_logits",
        "binary_cross_entropy",
        "mse_loss",
        "l1_loss",
        "smooth_l1_loss",
        "huber_loss",
    }
)
REGRESSION = frozenset({"mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss"})
_PRIOR_SHARE = 0.25  # KL(labels || mean prediction) below this share of KL(labels || uniform): a prior
_MIN_SKEW = 0.1  # nats: KL(labels || uniform) below this is read as uniform (the two expectations then
# differ by < 0.1 nats, so a prior reading could not change the verdict, only make it depend on the init)


def is_prior_output(kl_to_prediction: float, kl_to_uniform: float, categories: int, samples: int) -> bool:
    """Whether a mean prediction ``q`` is the label prior ``p``: ``KL(p || q)`` is a small share of
    ``KL(p || uniform)``, and ``p`` is further from uniform than ``samples`` draws from a uniform prior would
    be by chance (their expected ``KL`` from uniform is ``(categories - 1) / (2 samples)``; three times that).

    Example:
        >>> is_prior_output(0.01, 0.37, categories=2, samples=64)  # 1:9 labels, a prior-initialised bias
        True
        >>> is_prior_output(0.06, 0.066, categories=64, samples=480)  # uniform labels, sampling noise
        False
    """
    noise = (categories - 1) / (2 * max(samples, 1))
    return kl_to_uniform > max(_MIN_SKEW, 3 * noise) and kl_to_prediction < _PRIOR_SHARE * kl_to_uniform


@dataclass(frozen=True)
class Expectation:
    """What an untrained model should score: ``value`` (``None`` when unknown: ``reason`` says why)."""

    value: float | None
    source: str
    num_classes: int | None = None
    note: str = ""
    reason: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


def target_of(call: LossCall) -> Tensor:
    """The target tensor of a call :func:`record_loss_calls` recorded (each of its :data:`KINDS` has one)."""
    if call.target is None:
        raise ValueError(f"the {call.function} call has no target tensor")
    return call.target


@contextmanager
def record_loss_calls(
    inspect_input: Callable[[Tensor], Any] | None = None,
) -> Generator[list[LossCall], None, None]:
    """Record every call of the losses this module knows (a list filled as calls happen).

    A :class:`~lightning_recipes.harness.LossRecorder` limited to the kinds in :func:`expected_initial_loss`;
    ``inspect_input`` runs on each loss's prediction at call time (``call.inspection``): a backward pass
    later in the block frees the graph's saved tensors, so what the graph says must be read then.

    Cost: a Python hook on every torch call inside the block; use it around one ``training_step``.
    """
    recorder = LossRecorder(functions=KINDS, inspect_output=inspect_input)
    with recorder:
        yield recorder.calls


def loss_call_for(calls: Sequence[LossCall], loss: Tensor) -> LossCall | None:
    """The recorded call whose output is the returned ``loss`` (a scalar), else ``None``.

    Only such a call says what the loss *is*: a loss built from several terms or rescaled afterwards has no
    single call behind it, and the caller falls back to reading shapes.
    """
    value = loss.detach().reshape(-1)
    for call in reversed(calls):
        if call.loss is None or call.loss.numel() != 1:
            continue
        out = call.loss.detach().reshape(-1).to(value.dtype)
        if out is loss or bool(torch.equal(out, value)):  # sync: once per call
            return call
    return None


def expected_initial_loss(call: LossCall, batches: Sequence[LossCall] = ()) -> Expectation:
    """The loss an untrained model should score for ``call``; ``batches``: the same call on more batches.

    - ``cross_entropy`` / ``nll_loss``: ``ln C`` (uniform output; label smoothing does not change it), or the
      entropy of the label prior when the mean predicted distribution already matches the label frequencies
      (a bias initialised to the prior).
    - ``binary_cross_entropy[_with_logits]`` with 0/1 targets: ``ln 2`` per output (``p = 0.5``), weighted
      by ``pos_weight``; or the mean binary entropy of the positive rate when the mean prediction matches it.
    - Regression losses and soft (non 0/1) binary targets: no value (``reason`` says why).
    """
    calls = [call, *batches]
    if call.function in REGRESSION:
        return Expectation(None, "", reason=_regression_reason(call))
    if call.function in ("cross_entropy", "nll_loss"):
        return _categorical(call, calls)
    if call.function in ("binary_cross_entropy_with_logits", "binary_cross_entropy"):
        return _binary(call, calls)
    return Expectation(None, "", reason=f"{call.function} has no known value at init")


def label_smoothing_floor(classes: int, smoothing: float) -> float:
    """The lowest cross-entropy label smoothing ``smoothing`` allows: the entropy of the smoothed target."""
    if smoothing <= 0:
        return 0.0
    top, rest = 1 - smoothing + smoothing / classes, smoothing / classes
    return -(top * math.log(top) + (classes - 1) * rest * math.log(rest))


def _categorical(call: LossCall, calls: list[LossCall]) -> Expectation:
    classes = call.num_classes
    assert classes is not None
    uniform = math.log(classes)
    scores = "logits" if call.function == "cross_entropy" else "log-probabilities"
    kind = "integer" if call.integer_target else "soft"
    shapes = f"{list(call.output.shape)} for {kind} targets {list(target_of(call).shape)}"
    source = f"ln {classes}, {scores} {shapes}"
    smoothing = float(call.kwargs.get("label_smoothing") or 0.0) if call.function == "cross_entropy" else 0.0
    note, extra = "", {}
    if smoothing > 0:
        floor = label_smoothing_floor(classes, smoothing)
        extra["floor"] = floor
        note = (
            f" Label smoothing {smoothing:g} leaves the expectation at ln {classes} but raises the loss "
            f"floor from 0 to {floor:.4g} ({floor / uniform:.2f} x ln {classes})."
        )
    if not call.integer_target or classes < 2:
        return Expectation(uniform, source, classes, note, extra=extra)
    prior, predicted, samples = _class_frequencies(calls, classes)
    if prior is None or predicted is None:
        return Expectation(uniform, source, classes, note, extra=extra)
    seen = prior > 0
    entropy = float(-(prior[seen] * prior[seen].log()).sum())  # sync: once
    kl_prediction = float((prior[seen] * (prior[seen] / predicted[seen].clamp_min(1e-12)).log()).sum())
    kl_uniform = uniform - entropy
    if is_prior_output(kl_prediction, kl_uniform, classes, samples):
        extra |= {"prior_entropy": entropy, "prior_kl": kl_prediction}
        return Expectation(
            entropy,
            f"entropy of the label prior, {call.function} over {classes} classes: the mean prediction at "
            f"init is the label prior (KL {kl_prediction:.3f} nats from the label frequencies, "
            f"{kl_uniform:.3f} for a uniform output)",
            classes,
            " The output at init is the class prior (a prior-initialised bias): good practice, the loss "
            f"starts at the prior's entropy {entropy:.4g} instead of ln {classes} = {uniform:.4g}." + note,
            extra=extra,
        )
    return Expectation(uniform, source, classes, note, extra=extra)


def _class_frequencies(calls: list[LossCall], classes: int) -> tuple[Tensor | None, Tensor | None, int]:
    """Label frequencies and the mean predicted distribution over all recorded batches."""
    counts = torch.zeros(classes, dtype=torch.float64)
    predicted = torch.zeros(classes, dtype=torch.float64)
    rows = 0
    for call in calls:
        scores = call.output.detach().double()
        if scores.ndim >= 2:
            scores = scores.movedim(1, -1)
        scores = scores.reshape(-1, classes)
        target = target_of(call).reshape(-1).to(scores.device)
        ignore = call.kwargs.get("ignore_index", -100)
        keep = (target != ignore) & (target >= 0) & (target < classes)
        probs = scores.exp() if call.function == "nll_loss" else scores.softmax(-1)
        counts += torch.bincount(target[keep], minlength=classes)[:classes].double().cpu()
        predicted += probs[keep].sum(0).cpu()
        rows += int(keep.sum())  # sync: once per batch
    if rows == 0:
        return None, None, 0
    return counts / rows, predicted / rows, rows


def _binary(call: LossCall, calls: list[LossCall]) -> Expectation:
    logits = call.function == "binary_cross_entropy_with_logits"
    target = target_of(call)
    binary = bool(((target == 0) | (target == 1)).all())  # sync: once
    if not binary:
        return Expectation(
            None,
            "",
            reason=(
                f"{call.function} with targets that are not 0/1 (soft labels, or pixel intensities: a "
                "reconstruction or denoising model); its value at init depends on how far the outputs start "
                f"from {'0' if logits else '0.5'} and its floor is the targets' own entropy"
            ),
        )
    pos_weight = call.kwargs.get("pos_weight") if logits else None
    ln2 = math.log(2)
    if isinstance(pos_weight, Tensor):
        t = target.double()
        weighted = float((pos_weight.double() * t + (1 - t)).mean()) * ln2  # sync: once
        return Expectation(weighted, f"ln 2 per output weighted by pos_weight, {call.function}")
    source = f"ln 2 per output, {call.function} at p = 0.5"
    rate, predicted, samples = _positive_rates(calls, logits)
    entropy_t = -(rate * rate.clamp_min(1e-12).log() + (1 - rate) * (1 - rate).clamp_min(1e-12).log())
    entropy = float(entropy_t.mean())  # sync: once
    q = predicted.clamp(1e-12, 1 - 1e-12)
    kl_t = -entropy_t - rate * q.log() - (1 - rate) * (1 - q).log()  # KL(rate || q) per output
    kl_prediction, kl_uniform = float(kl_t.sum()), float((ln2 - entropy_t).sum())
    if is_prior_output(kl_prediction, kl_uniform, 1 + len(rate), samples):
        return Expectation(
            entropy,
            f"mean binary entropy of the positive rate, {call.function}: the mean prediction at init is the "
            f"label prior (KL {kl_prediction:.3f} nats, {kl_uniform:.3f} for p = 0.5)",
            note=(
                " The output at init is the label prior (a prior-initialised bias): good practice, the loss "
                f"starts at the prior's entropy {entropy:.4g} instead of ln 2 = {ln2:.4g}."
            ),
            extra={"prior_entropy": entropy, "prior_kl": kl_prediction},
        )
    return Expectation(ln2, source)


def _positive_rates(calls: list[LossCall], logits: bool) -> tuple[Tensor, Tensor, int]:
    """Per-output positive rate and mean predicted probability (one column for non-2-D outputs)."""
    targets, probs = [], []
    for call in calls:
        p = call.output.detach().double()
        p = p.sigmoid() if logits else p
        target = target_of(call)
        t = target.detach().double().reshape(p.shape) if target.numel() == p.numel() else None
        if t is None:
            continue
        columns = p.shape[-1] if p.ndim == 2 else 1
        targets.append(t.reshape(-1, columns))
        probs.append(p.reshape(-1, columns))
    rows = torch.cat(targets)
    return rows.mean(0), torch.cat(probs).mean(0), len(rows)


def _regression_reason(call: LossCall) -> str:
    return (
        f"the loss is {call.function} (regression, or a reconstruction / self-supervised target such as an "
        "autoencoder's input): an untrained model has no expected value of it"
    )
