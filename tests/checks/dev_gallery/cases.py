"""The development gallery's cases: :data:`BUGS` (real, silent bugs, each proved against its healthy twin in
``tests/checks/test_dev_gallery_proofs.py``) and :data:`HEALTHY` (unusual but correct look-alikes).

Example:
    >>> ids = [case.id for case in BUGS + HEALTHY]
    >>> len(ids) == len(set(ids))
    True
"""

from __future__ import annotations

from . import SealedCase
from . import _data as D
from . import _models as M

BUGS: list[SealedCase] = [
    SealedCase(
        id="shuffled_labels",
        task="image classification",
        model=M.DigitsCNN,
        data=D.shuffled_labels,
        bug="The training labels are read through an independent permutation: no image keeps its own label.",
        invariant="data is paired: each input is served with its own target",
    ),
    SealedCase(
        id="hflip_position_target",
        task="keypoint regression",
        model=M.BlobLocator,
        data=D.hflip_position_target,
        bug="The augmentation flips the image left-right at random but does not mirror the x target.",
        invariant="data is paired: augmentation keeps each input with its own target",
    ),
]

HEALTHY: list[SealedCase] = [
    SealedCase(
        id="distillation_t2_kl",
        task="distillation",
        model=M.DistilledStudent,
        data=D.distillation,
    ),
    SealedCase(
        id="seq2seq_packing_raises_on_zero_length",
        task="seq2seq",
        model=M.ReverseSeq2Seq,
        data=D.seq2seq_reverse,
    ),
    SealedCase(
        id="quantile_regression_pinball",
        task="quantile regression",
        model=M.QuantileMLP,
        data=D.quantile_regression,
    ),
]
