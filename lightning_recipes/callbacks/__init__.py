"""Callbacks that drop into an existing ``Trainer(callbacks=[...])``.

Naming: ``*Monitor`` only observes and logs; ``*Check`` asserts an invariant a bounded number of times;
``*Stopping`` / ``*Guard`` / ``*Clip`` may change the run's course.
"""

from lightning_recipes.callbacks.adaptive_grad_clip import AdaptiveGradClip
from lightning_recipes.callbacks.batch_independence_check import BatchIndependenceCheck
from lightning_recipes.callbacks.data_check import DataCheck
from lightning_recipes.callbacks.early_stopping import EarlyStopping
from lightning_recipes.callbacks.grad_flow_check import GradFlowCheck
from lightning_recipes.callbacks.grad_norm_monitor import GradNormMonitor
from lightning_recipes.callbacks.init_loss_check import InitLossCheck
from lightning_recipes.callbacks.input_independence_check import InputIndependenceCheck
from lightning_recipes.callbacks.input_pipeline_monitor import InputPipelineMonitor
from lightning_recipes.callbacks.overfit_batch_check import OverfitBatchCheck
from lightning_recipes.callbacks.preflight_callback import Preflight
from lightning_recipes.callbacks.run_manifest import RunManifest
from lightning_recipes.callbacks.stability_guard import StabilityGuard

__all__: list[str] = [
    "AdaptiveGradClip",
    "BatchIndependenceCheck",
    "DataCheck",
    "EarlyStopping",
    "GradFlowCheck",
    "GradNormMonitor",
    "InitLossCheck",
    "InputIndependenceCheck",
    "InputPipelineMonitor",
    "OverfitBatchCheck",
    "Preflight",
    "RunManifest",
    "StabilityGuard",
]
