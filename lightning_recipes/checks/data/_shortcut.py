"""``data``'s train-only shortcut: one input feature (a tabular column, a pixel, a token position) that
predicts the training labels far better than it predicts the validation labels (a watermark, a column
filled from the label in the training data only).

Invariant: with the splits drawn alike, a rule learnt from training samples is as accurate on fresh
training samples as on validation samples. Per feature, a lookup table (``lookup_accuracy`` of
``target_leakage``: quantile bins, majority label per bin) is fit on one half of the training samples read
and scored on the *other* half (``train accuracy``: held out, so no overfitting inflates it) and on the
validation samples (``val accuracy``), with the same table: the natural generalisation gap is zero and the
noise of the gap is binomial, ``sqrt(p_t (1 - p_t) / n_t + p_v (1 - p_v) / n_v)``. The train accuracy is
taken per class and weighted by the validation class mix (``n_t`` then the effective sample size), so a
validation set with another class mix opens no gap by itself.

**Shortcut** when the best gap is at least ``MIN_GAP`` (0.25), the feature's train accuracy beats the
majority class by at least as much, and the gap exceeds its noise by ``sqrt(2 ln D) + 3`` standard errors
(``D`` features scanned: the largest of ``D`` noisy gaps stays below ``sqrt(2 ln D)`` of them). When more
than ``max(3, 5% of D)`` features lose accuracy (half the gap, same significance) the inputs themselves
differ between the splits: not a shortcut (``data`` runs ``_data_inputs`` first and reports a shift of
the inputs with its cause instead). Measured on digits (512 training, 359 validation samples): split as
given the best gap is 0.08 (2.2 standard errors, 5.9 needed); one pixel set to the label in the training
images only: 76% vs 10% (21 standard errors).

Blind spots: a shortcut spread over many features (a texture, a colour cast); a feature shared by a small
subset of the training samples; fewer than 40 training or 20 validation samples.

Cost: ``D`` lookup tables over half the training samples read, in chunks of 2048 features, asking
:func:`out_of_time` between chunks; images larger than 16x16 are average-pooled to 16x16 (a watermark
smaller than a pooled cell is diluted).

Example:
    >>> import torch
    >>> g = torch.Generator().manual_seed(0)
    >>> y_train, y_val = torch.randint(0, 2, (400,), generator=g), torch.randint(0, 2, (200,), generator=g)
    >>> x_train, x_val = torch.randn(400, 8, generator=g), torch.randn(200, 8, generator=g)
    >>> x_train[:, 5] = y_train.float()  # a watermark in the training images only
    >>> found = train_only_shortcut(x_train, y_train, x_val, y_val)
    >>> found.feature, found.train_accuracy, found.is_shortcut
    (5, 1.0, True)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor
from torch.nn import functional as F

from lightning_recipes.checks._budget import out_of_time
from lightning_recipes.checks.data._leakage_statistics import lookup_predictions

__all__ = ["MIN_GAP", "Shortcut", "train_only_shortcut"]

MIN_GAP = 0.25  # train minus validation accuracy of one feature's lookup table
_BINS = 8
_CHUNK = 2048
_SIDE = 16  # images larger than 16x16 are average-pooled to 16x16 per channel


@dataclass(frozen=True)
class Shortcut:
    """The feature whose lookup table loses most accuracy from training to validation samples.

    Args:
        feature: Its index in the flattened (pooled) input.
        train_accuracy: Accuracy on the held-out half of the training samples, per class, weighted by the
            validation class mix.
        val_accuracy: Accuracy on the validation samples.
        train_samples: Effective number of held-out training samples behind it (``1 / sum(w_c^2 / n_c)``).
        val_samples: Validation samples scored.
        majority: Accuracy of the training majority class under the validation class mix.
        features: Features scanned.
        similar: Features whose gap exceeds its noise as much and half of ``MIN_GAP``.
    """

    feature: int
    train_accuracy: float
    val_accuracy: float
    train_samples: int
    val_samples: int
    majority: float
    features: int
    similar: int

    @property
    def gap(self) -> float:
        return self.train_accuracy - self.val_accuracy

    @property
    def noise(self) -> float:
        """Binomial standard error of the gap."""
        p, q = self.train_accuracy, self.val_accuracy
        return math.sqrt(p * (1 - p) / self.train_samples + q * (1 - q) / self.val_samples + 1e-12)

    @property
    def val_noise(self) -> float:
        """Binomial standard error of the validation accuracy."""
        q = self.val_accuracy
        return math.sqrt(q * (1 - q) / self.val_samples)

    @property
    def needed_z(self) -> float:
        return math.sqrt(2 * math.log(max(2, self.features))) + 3

    @property
    def significant(self) -> bool:
        return (
            self.gap >= MIN_GAP
            and self.train_accuracy - self.majority >= MIN_GAP
            and self.gap >= (self.needed_z * self.noise)
        )

    @property
    def widespread(self) -> bool:
        """Many features lose accuracy: the inputs differ between the splits, not one feature."""
        return self.similar > max(3, 0.05 * self.features)

    @property
    def is_shortcut(self) -> bool:
        return self.significant and not self.widespread

    @property
    def stated(self) -> str:
        return (
            f"input feature {self.feature} alone predicts {self.train_accuracy:.1%} of held-out training "
            f"labels (+- {self.noise:.1%} on the gap; majority class {self.majority:.1%}) but "
            f"{self.val_accuracy:.1%} +- {self.val_noise:.1%} of {self.val_samples} validation labels "
            f"(gap {self.gap:.2f}, {self.gap / max(self.noise, 1e-12):.1f} standard errors, "
            f"{self.needed_z:.1f} needed over {self.features} features; {self.similar} feature(s) alike)"
        )

    def details(self) -> dict[str, Any]:
        return {
            "feature": self.feature,
            "train_accuracy": self.train_accuracy,
            "val_accuracy": self.val_accuracy,
            "gap_noise": self.noise,
            "val_noise": self.val_noise,
            "majority": self.majority,
            "features": self.features,
            "similar": self.similar,
        }


def _features(x: Tensor) -> Tensor:
    x = x.float()
    if x.ndim >= 3 and (x.shape[-1] > _SIDE or x.shape[-2] > _SIDE):
        lead = x.shape[:-2]
        x = F.adaptive_avg_pool2d(x.reshape(-1, 1, *x.shape[-2:]), _SIDE).reshape(*lead, -1)
    return x.flatten(1).nan_to_num(nan=0.0, posinf=0.0, neginf=0.0)


def train_only_shortcut(x_train: Tensor, y_train: Tensor, x_val: Tensor, y_val: Tensor) -> Shortcut | None:
    """The test on the inputs ``[N, ...]`` and class labels ``[N]`` of both splits (labels ``0..C-1`` or any
    integers); ``None`` with fewer than 40 training or 20 validation samples, or one class."""
    if len(x_train) < 40 or len(x_val) < 20 or x_train.shape[1:] != x_val.shape[1:]:
        return None
    classes, codes = torch.unique(torch.cat([y_train, y_val]).cpu(), return_inverse=True)
    if len(classes) < 2:
        return None
    y_fit, y_test = codes[: len(y_train)][0::2], codes[: len(y_train)][1::2]
    y_v = codes[len(y_train) :]
    x_all = _features(x_train.cpu())
    x_fit, x_test, x_v = x_all[0::2], x_all[1::2], _features(x_val.cpu())
    majority = torch.bincount(y_fit, minlength=len(classes)).argmax()
    # The validation class mix, over the classes of the held-out training half: the training accuracy is
    # reweighted to it, so a validation set with another class mix (a partial read of a sorted loader) does
    # not open a gap by itself.
    counts = torch.bincount(y_test, minlength=len(classes)).double()
    comparable = counts[y_v] > 0
    x_v, y_v = x_v[comparable], y_v[comparable]
    if len(y_v) < 20:
        return None
    weights = torch.bincount(y_v, minlength=len(classes)).double() / len(y_v)
    one_hot = F.one_hot(y_test, len(classes)).double() / counts.clamp_min(1)  # [n_t, C]: per-class means
    held = torch.cat([x_test, x_v])
    y_held = torch.cat([y_test, y_v])
    train_acc: list[Tensor] = []
    val_acc: list[Tensor] = []
    for start in range(0, x_fit.shape[1], _CHUNK):
        if out_of_time() and train_acc:
            break
        columns = slice(start, start + _CHUNK)
        predicted = lookup_predictions(
            x_fit[:, columns], held[:, columns], y_fit, len(classes), _BINS, majority
        )
        hits = (predicted == y_held[None, :]).double()
        train_acc.append(hits[:, : len(y_test)] @ one_hot @ weights)  # per-class accuracy, val class mix
        val_acc.append(hits[:, len(y_test) :].mean(1))
    p, q = torch.cat(train_acc), torch.cat(val_acc)
    n_t = max(1, round(1 / float((weights.square() / counts.clamp_min(1)).sum())))  # effective size
    n_v = len(y_v)
    noise = (p * (1 - p) / n_t + q * (1 - q) / n_v + 1e-12).sqrt()
    baseline = float(weights[majority])  # the majority class's accuracy under the validation mix
    needed = math.sqrt(2 * math.log(max(2, len(p)))) + 3
    passing = ((p - q) >= MIN_GAP / 2) & ((p - q) >= needed * noise)  # features that lose accuracy too
    best = int(((p - q) / noise).argmax())
    return Shortcut(
        feature=best,
        train_accuracy=float(p[best]),
        val_accuracy=float(q[best]),
        train_samples=n_t,
        val_samples=n_v,
        majority=baseline,
        features=len(p),
        similar=int(passing.sum()),
    )
