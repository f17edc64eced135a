"""The sanity-check wing: ``preflight(model, ...)``, the ``Preflight`` callback and every ``*Check``.

Example:
    >>> from lightning_recipes.checks import CHECKS, InitLossCheck, preflight
    >>> list(CHECKS)
    ['loader', 'data', 'split_overlap', 'loss', 'init_loss', 'schedule', 'grad_flow', 'batch_independence',
     'padding', 'eval_mode', 'causality', 'target_leakage', 'optimization', 'validation_path',
     'overfit_batch', 'input_independence', 'training_pairs']
"""

import sys

from lightning_recipes._deprecation import moved_module
from lightning_recipes.checks.base import SanityCheck, perturbed
from lightning_recipes.checks.data.data_check import DataCheck
from lightning_recipes.checks.data.loader_check import LoaderCheck
from lightning_recipes.checks.data.split_overlap_check import SplitOverlapCheck
from lightning_recipes.checks.data.target_leakage_check import TargetLeakageCheck
from lightning_recipes.checks.data.training_pairs_check import TrainingPairsCheck
from lightning_recipes.checks.loop.optimization_check import OptimizationCheck
from lightning_recipes.checks.loop.schedule_check import ScheduleCheck
from lightning_recipes.checks.loop.validation_path_check import ValidationPathCheck
from lightning_recipes.checks.loss.init_loss_check import InitLossCheck
from lightning_recipes.checks.loss.input_independence_check import InputIndependenceCheck
from lightning_recipes.checks.loss.loss_check import LossCheck
from lightning_recipes.checks.loss.overfit_batch_check import OverfitBatchCheck
from lightning_recipes.checks.model.batch_independence_check import BatchIndependenceCheck
from lightning_recipes.checks.model.causality_check import CausalityCheck
from lightning_recipes.checks.model.eval_mode_check import EvalModeCheck
from lightning_recipes.checks.model.grad_flow_check import GradFlowCheck
from lightning_recipes.checks.model.padding_check import PaddingCheck
from lightning_recipes.checks.preflight import CHECKS, Preflight, preflight
from lightning_recipes.checks.report import (
    CheckInconclusive,
    CheckResult,
    CheckSkipped,
    PreflightError,
    PreflightReport,
)
from lightning_recipes.harness import Harness as CheckContext  # the check-facing name of the harness
from lightning_recipes.harness import LossCall

__all__ = [
    "CHECKS",
    "BatchIndependenceCheck",
    "CausalityCheck",
    "CheckContext",
    "CheckInconclusive",
    "CheckResult",
    "CheckSkipped",
    "DataCheck",
    "EvalModeCheck",
    "GradFlowCheck",
    "InitLossCheck",
    "InputIndependenceCheck",
    "LoaderCheck",
    "LossCall",
    "LossCheck",
    "OptimizationCheck",
    "OverfitBatchCheck",
    "PaddingCheck",
    "Preflight",
    "PreflightError",
    "PreflightReport",
    "SanityCheck",
    "ScheduleCheck",
    "SplitOverlapCheck",
    "TargetLeakageCheck",
    "TrainingPairsCheck",
    "ValidationPathCheck",
    "perturbed",
    "preflight",
]

# The checks' modules before they were grouped by stage (issue #34): still importable, with a warning.
for _check in CHECKS.values():  # e.g. checks.grad_flow_check -> checks.model.grad_flow_check
    moved_module(f"{__name__}.{_check.__module__.rsplit('.', 1)[1]}", sys.modules[_check.__module__])
