"""The harness wing: trial runs on copies of the user's model.

Copy the model, read batches under a preserved RNG, run ``training_step`` and its loss, build and step the
module's own optimizers, capture forwards, and leave every RNG, thread count and module of the caller as it
was. The sanity checks (``lightning_recipes.checks``, where :class:`Harness` is called ``CheckContext``),
the LR range test and ``speed_tune`` (``lightning_recipes.tune``), ``lr="find"`` and the step-memory probe
(``lightning_recipes.strategies``) all stand on it; it imports none of them. What cannot be tried on a copy
raises :class:`CannotRunOnCopy` with the reason.

Layout: ``harness.py`` (:class:`Harness`), ``errors.py``, ``isolation.py`` (RNG, threads, the copy),
``batches.py`` (where a batch's inputs and targets are), ``walk.py`` (the one walk over a nested batch),
``loaders.py``, ``fit_data.py`` (where a tool finds its data), ``loss_calls.py`` (which loss consumed
which batch entry), ``optimizers.py``, ``schedulers.py`` (the LR schedulers a ``configure_optimizers``
configures), ``run_length.py`` (the planned run, and the Trainer stand-in for copies), ``forward_capture.py``.

Example:
    >>> import torch
    >>> from lightning_recipes.harness import Harness
    >>> from lightning_recipes.testing import TinyClassifier, random_classification_loader
    >>> harness = Harness(TinyClassifier(), random_classification_loader())
    >>> model = harness.copy_model()
    >>> built = harness.build_optimizers(model)
    >>> loss = harness.optimization_step(model, built.optimizers, harness.train_batches(1)[0])
    >>> built.from_module, loss.ndim
    (True, 0)
"""

from lightning_recipes.harness.errors import CannotRunOnCopy
from lightning_recipes.harness.fit_data import FitData, resolve_fit_data
from lightning_recipes.harness.forward_capture import ForwardCapture, first_tensor
from lightning_recipes.harness.harness import Harness
from lightning_recipes.harness.isolation import (
    copy_module,
    cpu_threads,
    preserved_loader_rng,
    preserved_rng,
    quiet_logging,
    quiet_trial,
)
from lightning_recipes.harness.loaders import is_shuffled
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
