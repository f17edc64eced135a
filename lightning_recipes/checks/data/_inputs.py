"""``data``'s input comparison between the splits: whether the validation inputs are drawn like the training
inputs and, when not, the measured cause.

Shifted when at least ``SHIFTED_SHARE`` (10%) of the features have per-feature mean differences beyond 5
standard errors and the RMS difference is at least 0.25 training stds and 5 times its noise. The cause: a
transform (transposed, flipped, rotated by 180 degrees) of the training mean image, or a normalisation (the
validation means fit ``a * mean_train + b``), when it halves the distance; else an unexplained shift.

Example:
    >>> import torch
    >>> g = torch.Generator().manual_seed(0)
    >>> ramp = torch.linspace(0, 1, 8)
    >>> train = torch.rand(200, 1, 8, 8, generator=g) + ramp  # brighter to the right
    >>> val = (torch.rand(100, 1, 8, 8, generator=g) + ramp).transpose(-1, -2)
    >>> found = input_shift(train, val)
    >>> found.shifted, found.cause
    (True, 'transposed')
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor
from torch.nn import functional as F

__all__ = ["SHIFTED_SHARE", "InputShift", "input_shift"]

SHIFTED_SHARE = 0.1  # share of features whose mean moved beyond 5 standard errors
_Z = 5.0
_MIN_SIZE = 0.25  # RMS mean difference, in RMS training stds
_MATCH = 0.5  # a cause explains the shift when it leaves at most half of the distance
_SIDE = 32  # larger images are average-pooled to 32x32
_MAX_FEATURES = 4096


@dataclass(frozen=True)
class InputShift:
    """The input comparison.

    Args:
        features: Features compared.
        shifted_share: Share of features whose mean moved beyond 5 standard errors.
        size: RMS difference of the per-feature means, in RMS training stds.
        noise: The size expected from sampling alone, ``sqrt(1 / n_train + 1 / n_val)``.
        largest: The feature with the largest ``|z|`` and that ``z``.
        cause: ``"transposed"``, ``"flipped horizontally"``, ``"flipped vertically"``, ``"rotated 180
            degrees"``, ``"normalised differently"`` or ``None``.
        remaining: The size left after the cause (same units as ``size``).
        affine: ``(a, b)`` of the normalisation (``None`` unless that is the cause).
        std_ratio: Median ratio of validation to training feature stds.
    """

    features: int
    shifted_share: float
    size: float
    noise: float
    largest: tuple[int, float]
    cause: str | None = None
    remaining: float = 0.0
    affine: tuple[float, float] | None = None
    std_ratio: float = 1.0

    @property
    def shifted(self) -> bool:
        """More than sampling noise (see the module's docstring)."""
        return self.shifted_share >= SHIFTED_SHARE and self.size >= _MIN_SIZE and self.size >= _Z * self.noise

    @property
    def stated(self) -> str:
        """The measurement in one clause."""
        index, z = self.largest
        return (
            f"the per-feature means of the validation inputs differ from the training ones: "
            f"{self.shifted_share:.0%} of {self.features} features beyond 5 standard errors, RMS difference "
            f"{self.size:.2f} training stds (sampling noise {self.noise:.2f}), largest at feature {index} "
            f"(z = {z:.3g}); median std ratio val/train {self.std_ratio:.2f}"
        )

    @property
    def explained(self) -> str:
        """The measured cause in one clause."""
        if self.cause is None:
            return "no transpose, flip, 180-degree rotation or affine renormalisation explains it"
        if self.affine is not None:
            a, b = self.affine
            return (
                f"the validation inputs look normalised differently: their feature means fit "
                f"{a:.3g} x train mean {b:+.3g} (residual {self.remaining:.2f} vs {self.size:.2f} "
                "without the map)"
            )
        return (
            f"the validation mean input matches the training mean input {self.cause} (distance "
            f"{self.remaining:.2f} vs {self.size:.2f} untransformed, in training stds)"
        )

    def details(self) -> dict[str, Any]:
        """The check's ``details["input_shift"]`` entry."""
        return {
            "features": self.features,
            "shifted_share": self.shifted_share,
            "size": self.size,
            "noise": self.noise,
            "largest": list(self.largest),
            "cause": self.cause,
            "remaining": self.remaining,
            "affine": None if self.affine is None else list(self.affine),
            "std_ratio": self.std_ratio,
        }


def _transforms(shape: tuple[int, ...]) -> dict[str, Callable[[Tensor], Tensor]]:
    if len(shape) < 2 or min(shape[-2:]) < 2:
        return {}
    found: dict[str, Callable[[Tensor], Tensor]] = {
        "flipped horizontally": lambda m: m.flip(-1),
        "flipped vertically": lambda m: m.flip(-2),
        "rotated 180 degrees": lambda m: m.flip(-1, -2),
    }
    if shape[-1] == shape[-2]:
        found = {"transposed": lambda m: m.transpose(-1, -2), **found}
    return found


def _prepare(x: Tensor) -> Tensor:
    x = x.float()
    if x.ndim >= 3 and (x.shape[-1] > _SIDE or x.shape[-2] > _SIDE):
        lead = x.shape[:-2]
        x = F.adaptive_avg_pool2d(x.reshape(-1, 1, *x.shape[-2:]), _SIDE).reshape(*lead, _SIDE, _SIDE)
    return x.nan_to_num(nan=0.0, posinf=0.0, neginf=0.0)


def input_shift(
    train: Tensor, val: Tensor, y_train: Tensor | None = None, y_val: Tensor | None = None
) -> InputShift | None:
    """Compare the inputs ``[N, ...]`` of the splits (one sample shape); ``None`` with fewer than 3 samples
    in a split or a sample shape that differs. With class labels ``[N]`` of both splits the training mean
    is taken under the validation class mix (``sum_c w_c mean_train_c`` over the classes with at least 2
    training samples, validation samples of other classes left out; ``n_train`` becomes the effective size
    ``1 / sum(w_c^2 / n_c)``): a validation set with another class mix is no shift of the inputs."""
    if train.shape[1:] != val.shape[1:] or len(train) < 3 or len(val) < 3:
        return None
    train, val = _prepare(train), _prepare(val)
    shape = tuple(train.shape[1:])
    flat_train, flat_val = train.flatten(1).double(), val.flatten(1).double()
    stride = max(1, -(-flat_train.shape[1] // _MAX_FEATURES))
    mean_t, n_t = flat_train.mean(0), len(flat_train)
    if y_train is not None and y_val is not None:
        classes, codes = torch.unique(torch.cat([y_train, y_val]).cpu(), return_inverse=True)
        c_train, c_val = codes[: len(y_train)], codes[len(y_train) :]
        counts = torch.bincount(c_train, minlength=len(classes)).double()
        keep = counts[c_val] >= 2
        if int(keep.sum()) < 3:
            return None
        flat_val, c_val = flat_val[keep], c_val[keep]
        weights = torch.bincount(c_val, minlength=len(classes)).double() / len(c_val)
        per_class = torch.zeros(len(classes), flat_train.shape[1], dtype=flat_train.dtype)
        per_class.index_add_(0, c_train, flat_train)
        mean_t = (weights / counts.clamp_min(1)) @ per_class
        n_t = max(2, round(1 / float((weights.square() / counts.clamp_min(1)).sum())))
    mean_v = flat_val.mean(0)
    std_t, std_v = flat_train.std(0), flat_val.std(0)
    scale = float(std_t.square().mean().sqrt())  # sync: once
    if scale <= 0:
        return None
    n_v = len(flat_val)
    error = (std_t.square() / n_t + std_v.square() / n_v).sqrt().clamp_min(1e-3 * scale / math.sqrt(n_t))
    z = ((mean_v - mean_t) / error)[::stride]
    where = int(z.abs().argmax())
    size = float((mean_v - mean_t).square().mean().sqrt()) / scale

    def distance(reference: Tensor) -> float:
        return float((mean_v - reference).square().mean().sqrt()) / scale

    moving = std_t > 0
    ratio = float((std_v[moving] / std_t[moving]).median()) if bool(moving.any()) else 1.0
    found = InputShift(
        features=len(z),
        shifted_share=float((z.abs() > _Z).double().mean()),
        size=size,
        noise=math.sqrt(1 / n_t + 1 / n_v),
        largest=(where * stride, float(z[where])),
        std_ratio=ratio,
    )
    if not found.shifted:
        return found
    candidates: list[tuple[float, str, tuple[float, float] | None]] = []
    image_t = mean_t.view(shape)
    for name, transform in _transforms(shape).items():
        candidates.append((distance(transform(image_t).flatten()), name, None))
    design = torch.stack([mean_t, torch.ones_like(mean_t)], dim=1)
    solution = torch.linalg.lstsq(design, mean_v[:, None]).solution[:, 0]
    a, b = float(solution[0]), float(solution[1])
    if abs(a - 1) > 0.05 or abs(b) > 0.05 * scale:
        candidates.append((distance(a * mean_t + b), "normalised differently", (a, b)))
    if not candidates:
        return found
    remaining, cause, affine = min(candidates, key=lambda c: c[0])
    if remaining > _MATCH * size:
        return found
    return InputShift(**{**found.__dict__, "cause": cause, "remaining": remaining, "affine": affine})
