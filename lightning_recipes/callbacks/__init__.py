"""Callbacks that drop into an existing ``Trainer(callbacks=[...])``: a ``*Monitor`` only observes and logs;
``*Stopping``, ``*Guard``, ``*Clip`` and ``*Schedule`` may change the run's course. The sanity checks
(``*Check``, ``Preflight``) live in :mod:`lightning_recipes.checks`."""

from lightning_recipes.callbacks.adaptive_grad_clip import AdaptiveGradClip
from lightning_recipes.callbacks.early_stopping import EarlyStopping
from lightning_recipes.callbacks.finetune_schedule import FinetuneSchedule
from lightning_recipes.callbacks.grad_norm_monitor import GradNormMonitor
from lightning_recipes.callbacks.health_monitor import Finding, HealthMonitor
from lightning_recipes.callbacks.input_pipeline_monitor import InputPipelineMonitor
from lightning_recipes.callbacks.run_manifest import RunManifest
from lightning_recipes.callbacks.stability_guard import StabilityGuard
from lightning_recipes.checks import (  # every check class of checks.CHECKS (tests/checks/test_exports.py)
    BatchIndependenceCheck,
    CausalityCheck,
    DataCheck,
    EvalModeCheck,
    GradFlowCheck,
    InitLossCheck,
    InputIndependenceCheck,
    LoaderCheck,
    LossCheck,
    OptimizationCheck,
    OverfitBatchCheck,
    PaddingCheck,
    Preflight,
    ScheduleCheck,
    SplitOverlapCheck,
    TargetLeakageCheck,
    TrainingPairsCheck,
    ValidationPathCheck,
)

__all__: list[str] = [
    "AdaptiveGradClip",
    "BatchIndependenceCheck",
    "CausalityCheck",
    "DataCheck",
    "EarlyStopping",
    "EvalModeCheck",
    "Finding",
    "FinetuneSchedule",
    "GradFlowCheck",
    "GradNormMonitor",
    "HealthMonitor",
    "InitLossCheck",
    "InputIndependenceCheck",
    "InputPipelineMonitor",
    "LoaderCheck",
    "LossCheck",
    "OptimizationCheck",
    "OverfitBatchCheck",
    "PaddingCheck",
    "Preflight",
    "RunManifest",
    "ScheduleCheck",
    "SplitOverlapCheck",
    "StabilityGuard",
    "TargetLeakageCheck",
    "TrainingPairsCheck",
    "ValidationPathCheck",
]
