"""The harness wing: trial runs on copies of the user's model, for the sanity checks, the LR range test,
``speed_tune`` and the step-memory probe (it imports none of them); see ``docs/guides/harness.md``."""

from lightning_recipes.harness.forward_capture import ForwardCapture, first_tensor
from lightning_recipes.harness.harness import Harness
from lightning_recipes.harness.isolation import (
    CannotRunOnCopy,
    copy_module,
    cpu_threads,
    preserved_loader_rng,
    preserved_rng,
    quiet_logging,
    quiet_trial,
)
from lightning_recipes.harness.loaders import FitData, is_shuffled, resolve_fit_data
from lightning_recipes.harness.loss_calls import LossCall, LossRecorder, TargetSwapError
from lightning_recipes.harness.optimizers import BuiltOptimizers, build_optimizers
from lightning_recipes.harness.walk import batch_entries, batch_keys, map_tensors, tensors_of

__all__ = [
    "BuiltOptimizers",
    "CannotRunOnCopy",
    "FitData",
    "ForwardCapture",
    "Harness",
    "LossCall",
    "LossRecorder",
    "TargetSwapError",
    "batch_entries",
    "batch_keys",
    "build_optimizers",
    "copy_module",
    "cpu_threads",
    "first_tensor",
    "is_shuffled",
    "map_tensors",
    "preserved_loader_rng",
    "preserved_rng",
    "quiet_logging",
    "quiet_trial",
    "resolve_fit_data",
    "tensors_of",
]
