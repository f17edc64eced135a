"""The field gallery's runs without Hugging Face ``transformers``.

Problem runs (``_field_problems_optim``, ``_field_problems_run``) and healthy runs (``_field_healthy``) on
GRU/LSTM/ReLU-RNN sequence models, highway and gated MLPs, sigmoid and ``F.relu`` CNNs, MLPs with functional
activations; SGD with momentum and weight decay, Adam, AdamW, RMSprop; step, lambda, exponential, cosine,
warm-up + cosine and one-cycle schedules; small noisy validation sets, strong regularisation, late onsets.

Example:
    >>> case = next(c for c in CASES if c.name == "frelu_mlp_steplr_collapse")
    >>> case.expected, case.onset_step
    ('lr_too_low', 80)
"""

from __future__ import annotations

from galleries.health.field._case import FieldCase
from galleries.health.field._field_healthy import HEALTHY_CASES
from galleries.health.field._field_problems_optim import OPTIM_CASES
from galleries.health.field._field_problems_run import RUN_CASES

CASES: list[FieldCase] = [*OPTIM_CASES, *RUN_CASES, *HEALTHY_CASES]

__all__ = ["CASES"]
