"""The ``init_loss`` family: initial losses that are wrong for a reason the check can name. A loss that is
right at uniform logits and too high from the head's scale is a ``warn`` (it costs steps); a wrong loss
fails."""

from __future__ import annotations

from functools import partial

from . import Case
from . import _existing_models as M

BUGS: list[Case] = [
    Case(
        "bce_bad_init",
        "init_loss",
        "MLP",
        M.BadInitBCE,
        M.binary_data,
        "init_loss",
        "warn",
        ("too high", "ln 2", "initialised too large"),
    ),
    Case(
        "bce_prior_bias_wrong_sign",
        "init_loss",
        "MLP",
        M.WrongPriorBias,
        partial(M.binary_data, 0.1),
        "init_loss",
        "warn",
        ("too high", "ln 2"),
    ),
    Case(
        "segmentation_bad_init",
        "init_loss",
        "CNN",
        M.BadInitSegmenter,
        M.segmentation_data,
        "init_loss",
        "warn",
        ("too high", "ln 3"),
    ),
    Case(
        "segmentation_summed_per_pixel",
        "init_loss",
        "CNN",
        M.SummedSegmenter,
        M.segmentation_data,
        "init_loss",
        "fail",
        ("summed instead of averaged",),
    ),
]

HEALTHY: list[Case] = []
