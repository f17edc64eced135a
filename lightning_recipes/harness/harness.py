"""Trial runs on a copy of the user's module (:class:`Harness`); the contract (loss, outputs, keys,
optimizer): ``docs/guides/harness.md``."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Generator, Iterable, Mapping
from contextlib import AbstractContextManager, nullcontext
from typing import Any

import lightning.pytorch as pl
import torch
from lightning.pytorch.utilities.model_helpers import is_overridden
from torch import Tensor, nn
from torch.nn.modules.loss import _Loss
from torch.nn.parameter import UninitializedParameter
from torch.optim import Optimizer

from lightning_recipes._loss_output import loss_of
from lightning_recipes._validation import check_int
from lightning_recipes.harness.batches import (
    Key,
    batch_size_of,
    check_key,
    clone_tensors,
    input_key_of,
    replace_inputs,
    slice_batch,
    split_batch,
)
from lightning_recipes.harness.forward_capture import ForwardCapture, first_tensor, step_output
from lightning_recipes.harness.isolation import (
    CannotRunOnCopy,
    copy_module,
    preserved_loader_rng,
    preserved_rng,
    quiet_logging,
)
from lightning_recipes.harness.loaders import (
    describe_loader,
    first_loader,
    fit_combined_loader,
    fit_dataloaders,
    loader_length,
)
from lightning_recipes.harness.loss_calls import LossCall, LossRecorder
from lightning_recipes.harness.optimizers import BuiltOptimizers, build_optimizers
from lightning_recipes.harness.run_length import PlannedTrainer, RunLength, check_run_length
from lightning_recipes.harness.walk import batch_keys

__all__ = ["Harness"]


class Harness:
    """Trial runs on copies of the user's module: its batches, its loss, its optimizers, its outputs; shared
    by the checks of one preflight (batches are read once). What cannot be tried on a copy raises
    :class:`~lightning_recipes.harness.CannotRunOnCopy`.

    Args:
        model: The user's ``LightningModule``, never modified (trial runs work on :meth:`copy_model`).
        train_dataloader: The training loader, or a collection of them (the first is read).
        val_dataloader: Optional held-out loader.
        device: Where copies and batches go (default: the model's device).
        forward_context: Context manager factory around forward passes (autocast for mixed precision).
        convert_input: Applied to every batch (a precision plugin's ``convert_input``).
        trainer: The real Trainer when run from a callback (a ``configure_optimizers`` may read it).
        datamodule: Its batch-transfer hooks are used when it overrides them.
        input_key: Index or key of the input tensor in a batch (default: the convention of ``batches.py``).
        target_key: Index or key of the target tensor (default: the batch entry the loss consumes).
        num_classes: Number of classes, when shapes cannot tell.
        seed: Seed set (in an isolated RNG state) before each trial: reproducible results.
        max_epochs: The planned run's epochs, when no Trainer says (see :attr:`run_length`).
        max_steps: The planned run's optimizer steps, when no Trainer says.

    Example:
        >>> from lightning_recipes.testing import TinyClassifier, random_classification_loader
        >>> harness = Harness(TinyClassifier(), random_classification_loader())
        >>> model = harness.copy_model()
        >>> built = harness.build_optimizers(model)
        >>> loss = harness.optimization_step(model, built.optimizers, harness.train_batches(1)[0])
        >>> built.from_module, loss.ndim
        (True, 0)
    """

    def __init__(
        self,
        model: pl.LightningModule,
        train_dataloader: Any = None,
        val_dataloader: Any = None,
        *,
        device: torch.device | str | None = None,
        forward_context: Callable[[], AbstractContextManager[Any]] | None = None,
        convert_input: Callable[[Any], Any] | None = None,
        trainer: pl.Trainer | None = None,
        datamodule: pl.LightningDataModule | None = None,
        input_key: Key = None,
        target_key: Key = None,
        num_classes: int | None = None,
        seed: int = 0,
        max_epochs: int | None = None,
        max_steps: int | None = None,
    ) -> None:
        if not isinstance(model, pl.LightningModule):
            raise TypeError(f"`model` must be a LightningModule, got {type(model).__name__}.")
        check_int("num_classes", num_classes, minimum=2, optional=True)
        check_int("seed", seed)
        check_key("input_key", input_key)
        check_key("target_key", target_key)
        check_run_length(max_epochs, max_steps)
        self.model = model
        self.train_dataloaders = train_dataloader  # as given: a loader, or a collection of them
        self.train_dataloader = first_loader(train_dataloader)
        self.val_dataloader = first_loader(val_dataloader)
        if device is None:
            first = next(model.parameters(), None)
            device = first.device if first is not None else torch.device("cpu")
        self.device = torch.device(device)
        self.forward_context = forward_context or nullcontext
        self.trainer, self.datamodule, self.convert_input = trainer, datamodule, convert_input
        self.input_key, self.target_key, self.num_classes = input_key, target_key, num_classes
        self.seed, self.max_epochs, self.max_steps = seed, max_epochs, max_steps
        self._cache: dict[str, tuple[list[Any], bool]] = {}  # split -> (prepared batches, loader exhausted)
        self._inferred: tuple[Key, Key] | None = None
        self._first_calls: list[LossCall] = []  # the loss calls of the step that inferred the keys
        self._shaped: pl.LightningModule | None = None  # a lazy module's copy, shaped by one forward

    def train_batches(self, count: int) -> list[Any]:
        """The first ``count`` training batches (fewer if the loader is shorter), on :attr:`device`. Cached.
        ``CannotRunOnCopy`` without a training loader, or when it yields no batch."""
        return self._cached("train", self.train_dataloader, count, required=True)

    def val_batches(self, count: int) -> list[Any]:
        """The first ``count`` validation batches, or ``[]`` without a validation loader. Cached."""
        return [] if self.val_dataloader is None else self._cached("val", self.val_dataloader, count)

    def read_train_batches(self, count: int, max_samples: int | None = None) -> list[Any]:
        """Up to ``count`` training batches, each cut to ``max_samples`` samples (copied: the full batch is
        freed) before it goes to the device. Not cached."""
        return self._read(self.train_dataloader, count, max_samples=max_samples, required=True)

    def read_raw_batches(self, count: int, max_samples: int | None = None) -> list[Any]:
        """As :meth:`read_train_batches`, as the loader yields them (no hooks, no device transfer): what a
        Trainer of its own is fed."""
        return self._read(self.train_dataloader, count, max_samples=max_samples, prepare=False, required=True)

    def read_batches(self, loader: Iterable[Any], count: int) -> list[Any]:
        """Up to ``count`` batches of any ``loader``, prepared as the training batches are. Not cached."""
        return self._read(loader, count)

    def read_fit_batches(self, count: int, loaders: Any = None, seed: int | None = None) -> list[Any]:
        """Up to ``count`` batches as ``fit`` passes them to ``training_step`` (several loaders combined as
        the Trainer combines them), on :attr:`device`. Not cached.

        Args:
            count: How many batches.
            loaders: What to read (default: the training loaders given); inside ``fit``, the Trainer's
                ``CombinedLoader`` (read with its mode and ``limit_train_batches``).
            seed: Seed each loader's own generators with it first (see :func:`preserved_loader_rng`).

        Raises:
            ValueError: For ``CombinedLoader(mode="sequential")``, which ``fit`` refuses too.
        """
        return self._read(
            self.train_dataloaders if loaders is None else loaders, count, combine=True, seed=seed
        )

    def _cached(self, split: str, loader: Any, count: int, required: bool = False) -> list[Any]:
        cache, exhausted = self._cache.get(split, ([], False))
        if len(cache) < count and not exhausted:
            cache = self._read(loader, count)
            self._cache[split] = cache, len(cache) < count
        return _not_empty(cache[:count], loader) if required else cache[:count]

    def _read(
        self,
        loader: Any,
        count: int,
        *,
        max_samples: int | None = None,
        prepare: bool = True,
        combine: bool = False,
        required: bool = False,
        seed: int | None = None,
    ) -> list[Any]:
        """The one reader: up to ``count`` batches of a fresh iterator (``combine``: as ``fit`` combines
        loaders), RNGs left as they were, cut to ``max_samples``, then prepared; ``required``: one or more."""
        if loader is None:
            raise CannotRunOnCopy("no training data: pass `datamodule=` or `train_dataloaders=`.")
        combined = fit_combined_loader(loader) if combine else None
        batches: list[Any] = []
        with contextlib.ExitStack() as stack:
            for each in [loader] if combined is None else combined.flattened:
                stack.enter_context(preserved_loader_rng(each, seed=seed))
            for batch in loader if combined is None else (batch for batch, _, _ in combined):
                size = None if max_samples is None else batch_size_of(batch, self.input_key)
                if max_samples is not None and size is not None and size > max_samples:
                    batch = clone_tensors(slice_batch(batch, max_samples, size))
                batches.append(batch)
                if len(batches) >= count:
                    break
            if combined is not None:
                combined.reset()
        batches = [self._prepare(batch) for batch in batches] if prepare else batches
        return _not_empty(batches, loader) if required else batches

    def _prepare(self, batch: Any) -> Any:
        """Lightning's batch pipeline: before-transfer hook, transfer, after-transfer hook, precision."""
        owner = self._hook_owner
        with quiet_logging():
            batch = owner("on_before_batch_transfer").on_before_batch_transfer(batch, 0)
            batch = owner("transfer_batch_to_device").transfer_batch_to_device(batch, self.device, 0)
            batch = owner("on_after_batch_transfer").on_after_batch_transfer(batch, 0)
        if self.convert_input is not None:
            batch = self.convert_input(batch)
        return batch

    def _hook_owner(self, name: str) -> Any:
        if self.datamodule is not None and is_overridden(name, self.datamodule):
            return self.datamodule
        return self.model

    def split(self, batch: Any) -> tuple[Tensor | None, Tensor | None]:
        """``(inputs, targets)`` of a batch with this context's keys (see :meth:`keys`)."""
        input_key, target_key = self.keys()
        return split_batch(batch, input_key, target_key)

    def target_guessed(self) -> bool:
        """Whether the target is only the batch convention's guess: no ``target_key`` was given and no
        recognised loss of the first ``training_step`` reads a batch entry as its target (a hand-written
        loss); the guessed entry may then be an input (a BPR triple's negative item)."""
        if self.target_key is not None:
            return False
        return self._infer_keys()[1] is None and not any(call.target_keys for call in self._first_calls)

    def keys(self) -> tuple[Key, Key]:
        """``(input_key, target_key)`` in force: the explicit ones, else those read from the loss call of
        one ``training_step`` on a copy with the first batch (``None``: the convention of ``batches.py``)."""
        if self.input_key is not None and self.target_key is not None:
            return self.input_key, self.target_key
        inferred_input, inferred_target = self._infer_keys()
        return (
            self.input_key if self.input_key is not None else inferred_input,
            self.target_key if self.target_key is not None else inferred_target,
        )

    def _infer_keys(self) -> tuple[Key, Key]:
        if self._inferred is not None:
            return self._inferred
        self._inferred = (None, None)  # also while probing: nothing in the probe may recurse into it
        if self.train_dataloader is None:
            return self._inferred
        try:
            with preserved_rng(), torch.no_grad():
                batch = self.train_batches(1)[0]
                self._first_calls = self.loss_calls(self.copy_model(), batch)
        except Exception:  # a step that cannot run outside the Trainer: the checks will say so themselves
            return self._inferred
        call = _main_call(self._first_calls)
        if call is None:
            return self._inferred
        target = call.target_key
        entries = batch_keys(batch)
        conventional = input_key_of(batch, None)
        inputs: Key = None
        if conventional not in call.output_keys and call.output_keys:
            inputs = next((k for k in entries if k in call.output_keys and k != target), None)
        if target is None and len(call.target_keys) > 1:  # computed from several entries: not the input
            target = next((k for k in entries if k in call.target_keys and k != conventional), None)
        self._inferred = (inputs, target)
        return self._inferred

    def first_loss_calls(self) -> list[LossCall]:
        """The loss calls of one training step on a copy with the first training batch, recorded once when
        the keys are inferred (``[]`` when that step could not run outside the Trainer)."""
        self._infer_keys()
        return self._first_calls

    def copy_model(self) -> pl.LightningModule:
        """A deep copy of the user's module on :attr:`device`, in train mode, with no Trainer attached."""
        shared = (self.trainer, self.datamodule, self.train_dataloader, self.val_dataloader)
        try:
            if self._shaped is None and any(
                isinstance(p, UninitializedParameter) for p in self.model.parameters()
            ):
                self._shaped = self._shape_lazy(copy_module(self.model, shared, self.device))
            return copy_module(self._shaped or self.model, shared, self.device)
        except Exception as err:
            raise CannotRunOnCopy(
                f"could not deep-copy the model ({type(err).__name__}: {err}); the checks never touch the "
                "original, so they need a copyable module."
            ) from err

    def _shape_lazy(self, model: pl.LightningModule) -> pl.LightningModule:
        """A module with lazy parameters (``LazyLinear``) shaped by one seeded training step in eval mode,
        without gradients: every copy starts from the same weights."""
        with preserved_rng(), torch.no_grad():
            torch.manual_seed(self.seed)
            model.eval()
            self.training_loss(model, self.train_batches(1)[0])
            model.train()
        return model

    def require_automatic_optimization(self, model: pl.LightningModule) -> None:
        if not model.automatic_optimization:
            raise CannotRunOnCopy(
                "the module uses manual optimisation (`automatic_optimization = False`): its training_step "
                "runs the optimizer itself and cannot be replayed outside the Trainer."
            )

    def training_loss(self, model: pl.LightningModule, batch: Any, batch_idx: int = 0) -> Tensor:
        """Run ``training_step`` on the copy and return its scalar loss (see the module docstring)."""
        with self.forward_context(), quiet_logging():
            output = model.training_step(batch, batch_idx)
        loss = loss_of(output)
        returned = output.get("loss") if isinstance(output, Mapping) else output
        if returned is None:
            raise CannotRunOnCopy(
                "`training_step` returned no loss (None, or a dict without 'loss'); the checks read the loss "
                "from its return value."
            )
        if loss is None or loss.numel() != 1:
            shape = type(returned).__name__ if loss is None else tuple(loss.shape)
            raise CannotRunOnCopy(f"`training_step` must return a scalar loss tensor, got {shape}.")
        return loss.reshape(())

    def optimization_step(
        self, model: pl.LightningModule, optimizers: list[Optimizer], batch: Any, batch_idx: int = 0
    ) -> Tensor:
        """Zero grads, ``training_step``, backward, step every optimizer; returns the detached loss."""

        def closure() -> Tensor:
            for optimizer in optimizers:
                optimizer.zero_grad(set_to_none=True)
            loss = self.training_loss(model, batch, batch_idx)
            loss.backward()
            return loss

        loss = closure()
        for optimizer in optimizers:
            if isinstance(optimizer, torch.optim.LBFGS):  # needs re-evaluation inside step
                optimizer.step(closure)
            else:
                optimizer.step()
        return loss.detach()

    @contextlib.contextmanager
    def capture_forward(self, model: nn.Module) -> Generator[ForwardCapture, None, None]:
        """Record the outputs of ``model.forward`` and of its submodules (loss modules excepted) inside the
        block; see :class:`ForwardCapture` for which one stands for the model's output."""
        capture = ForwardCapture()
        handles = [model.register_forward_hook(capture.hook(0))]
        for name, module in model.named_modules():
            if module is not model and not isinstance(module, _Loss):
                handles.append(module.register_forward_hook(capture.hook(name.count(".") + 1)))
        try:
            yield capture
        finally:
            for handle in handles:
                handle.remove()

    def loss_calls(self, model: pl.LightningModule, batch: Any, batch_idx: int = 0) -> list[LossCall]:
        """Every ``torch.nn.functional`` loss call (:class:`LossCall`) of one ``training_step`` on ``model``,
        in order; a step that raises propagates, one without a usable loss still reports what it called.

        Example:
            >>> import torch
            >>> from lightning_recipes.harness import Harness
            >>> from lightning_recipes.testing import TinyClassifier, random_classification_loader
            >>> context = Harness(TinyClassifier(), random_classification_loader())
            >>> with torch.no_grad():
            ...     call = context.loss_call(context.copy_model(), context.train_batches(1)[0])
            >>> call.function, call.target_key, call.kwargs["label_smoothing"]
            ('cross_entropy', 1, 0.0)
        """
        return self.record_step(model, batch, batch_idx).calls

    def record_step(self, model: pl.LightningModule, batch: Any, batch_idx: int = 0) -> LossRecorder:
        """One ``training_step`` on ``model`` under a :class:`LossRecorder`: its loss calls and its
        broadcasts that paired a prediction's rows with other samples' (``mixed``)."""
        with LossRecorder(batch) as recorder, contextlib.suppress(CannotRunOnCopy):
            self.training_loss(model, batch, batch_idx)
        return recorder

    def loss_call(self, model: pl.LightningModule, batch: Any, batch_idx: int = 0) -> LossCall | None:
        """The main loss call of one step: the first whose target comes from the batch, else the first;
        ``None`` when the loss is not computed by a ``torch.nn.functional`` loss (a hand-written formula)."""
        return _main_call(self.loss_calls(model, batch, batch_idx))

    def forward(self, model: nn.Module, inputs: Tensor) -> Tensor:
        """``model(inputs)``'s first output tensor, under the precision context."""
        with self.forward_context():
            output = model(inputs)
        tensor = first_tensor(output)
        if tensor is None:
            raise CannotRunOnCopy(f"`forward(inputs)` returned {type(output).__name__}, not a tensor.")
        return tensor

    def with_inputs(self, batch: Any, inputs: Tensor) -> Any:
        """A new batch equal to ``batch`` with its input tensor (the input key of :meth:`keys`) replaced."""
        return replace_inputs(batch, inputs, self.keys()[0])

    def batch_output(self, model: pl.LightningModule, batch: Any) -> Tensor:
        """The model's output tensor for a whole batch: ``model(inputs)`` when it defines ``forward``, else
        the wrapped model's output seen while ``training_step`` runs (:class:`ForwardCapture`);
        ``CannotRunOnCopy`` when neither shows one. ``with_inputs(batch, new_inputs)`` feeds other inputs."""
        inputs, _ = self.split(batch)
        if inputs is not None and is_overridden("forward", model, pl.LightningModule):
            return self.forward(model, inputs)
        return step_output(self, model, batch)

    def build_optimizers(self, model: pl.LightningModule) -> BuiltOptimizers:
        """The module's own optimizers on the copy (:func:`~lightning_recipes.harness.build_optimizers`)."""
        return build_optimizers(model, self.trainer_for_copies())

    @property
    def run_length(self) -> RunLength:
        """The planned run: the Trainer's inside ``fit``, else ``max_epochs``/``max_steps`` with the training
        loader's length."""
        if self.trainer is not None:
            return RunLength.from_trainer(self.trainer)
        return RunLength.planned(self.max_epochs, self.max_steps, loader_length(self.train_dataloader))

    def trainer_for_copies(self) -> Any:
        """What a copy's ``configure_optimizers`` reads as ``self.trainer``: the real Trainer, else a
        :class:`~lightning_recipes.harness.run_length.PlannedTrainer` when the run's length is known."""
        if self.trainer is not None:
            return self.trainer
        run = self.run_length
        return PlannedTrainer(run, self.train_dataloader) if run.total_steps is not None else None

    @classmethod
    def from_trainer(
        cls, trainer: pl.Trainer, pl_module: pl.LightningModule, train_dataloader: Any = None, **options: Any
    ) -> Harness:
        """A harness inside ``trainer.fit``: its device, precision and data (or ``train_dataloader`` alone);
        ``options``: the constructor's."""
        precision = trainer.precision_plugin
        loaders = (
            (train_dataloader, None) if train_dataloader is not None else fit_dataloaders(trainer, pl_module)
        )
        return cls(
            pl_module,
            *loaders,
            device=pl_module.device,
            forward_context=precision.forward_context,
            convert_input=precision.convert_input,
            trainer=trainer,
            datamodule=getattr(trainer, "datamodule", None),
            **options,
        )


def _not_empty(batches: list[Any], loader: Any) -> list[Any]:
    """``batches``, or :class:`CannotRunOnCopy` saying the training loader yielded none (and why)."""
    if not batches:
        raise CannotRunOnCopy(
            f"the training loader yielded no batch ({describe_loader(loader)}), so there is nothing to run "
            "this check on (the `loader` check says what to change)."
        )
    return batches


def _main_call(calls: list[LossCall]) -> LossCall | None:
    """The first call whose target comes from the batch, else the first (``None``: no call)."""
    return next((call for call in calls if call.target_keys), calls[0] if calls else None)
