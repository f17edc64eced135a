"""What a model's outputs and targets mean for the checks: how many classes, and which target is padding."""

from __future__ import annotations

import torch
from torch import Tensor

IGNORE_INDEX = -100  # torch's cross_entropy default; such targets are padding, not classes


def infer_num_classes(output: Tensor | None, targets: Tensor | None) -> tuple[int, str] | None:
    """``(C, how)`` if ``output`` is logits for ``targets`` (channel-first, flat, soft), else ``None``."""
    if output is None or targets is None or not torch.is_floating_point(output) or output.ndim < 1:
        return None
    out_shape, tgt_shape = list(output.shape), list(targets.shape)
    kind = "soft" if targets.is_floating_point() else "integer"
    described = f"logits {out_shape} for {kind} targets {tgt_shape}"
    if not targets.is_floating_point() and not targets.is_complex() and targets.dtype != torch.bool:
        classes = out_shape[-1]
        if classes >= 2 and out_shape[:-1] == tgt_shape:
            return classes, described
        channel_first = output.ndim == targets.ndim + 1 and output.ndim >= 3 and out_shape[0] == tgt_shape[0]
        if channel_first and out_shape[2:] == tgt_shape[1:] and out_shape[1] >= 2:
            return out_shape[1], described
        if output.ndim == 2 and classes >= 2 and out_shape[0] == targets.numel() and targets.ndim >= 2:
            return classes, described
        return None
    if targets.is_floating_point() and out_shape == tgt_shape and out_shape[-1] >= 2:
        rows = targets.float()
        sums_to_one = torch.allclose(rows.sum(-1), torch.ones(()), atol=1e-3)  # sync: once
        if bool((rows >= 0).all()) and sums_to_one:
            return out_shape[-1], described
    return None
