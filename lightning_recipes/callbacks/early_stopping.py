"""EarlyStopping: Lightning's, plus relative min_delta, a warm-up period and restoring the best weights."""

from __future__ import annotations

import logging
from typing import Any, Literal

import lightning.pytorch as pl
import torch
from lightning.pytorch.callbacks import EarlyStopping as _LightningEarlyStopping
from lightning.pytorch.callbacks.early_stopping import EarlyStoppingReason
from lightning.pytorch.utilities.exceptions import MisconfigurationException
from lightning.pytorch.utilities.rank_zero import rank_zero_info
from torch import Tensor
from typing_extensions import override

from lightning_recipes._validation import check_bool, check_choice, check_int, check_non_negative, is_number
from lightning_recipes.callbacks._snapshot import Snapshot, averaging_callbacks, set_averages_to_module
from lightning_recipes.callbacks._trainer import callback_list

__all__ = ["EarlyStopping"]

log = logging.getLogger(__name__)


class EarlyStopping(_LightningEarlyStopping):
    r"""Lightning's ``EarlyStopping`` (a subclass: same arguments, defaults, stop rules, rank reduction and
    ``stopping_reason``) plus a relative ``min_delta``, a warm-up and restoring the best weights.

    ``min_delta_mode="rel"``: an improvement must beat the best by ``min_delta * |best|``.
    ``start_from_epoch`` / ``start_from_step``: earlier checks are skipped entirely. ``restore_best_weights``:
    the best weights (averaged ones next to ``EMAWeightAveraging``) are loaded back at ``on_train_end``;
    ``best_weights_in_checkpoint`` keeps them in checkpoints. Wherever Lightning's constructor raises, ours
    raises the same type. The rules in full: ``docs/guides/monitoring.md``.

    Example:
        >>> from lightning_recipes.testing import TinyClassifier, fast_trainer, random_classification_loader
        >>> stopper = EarlyStopping("val_loss", patience=1, min_delta=0.5, min_delta_mode="rel",
        ...                         restore_best_weights=True)
        >>> trainer = fast_trainer(max_epochs=5, callbacks=[stopper], limit_train_batches=2)
        >>> loader = random_classification_loader(batch_size=64)
        >>> trainer.fit(TinyClassifier(), loader, loader)
        >>> stopper.stopped_epoch, stopper.best_epoch, stopper.restored_best_weights
        (1, 0, True)
        >>> stopper.stopping_reason.name
        'PATIENCE_EXHAUSTED'
    """

    def __init__(
        self,
        monitor: str,
        min_delta: float = 0.0,
        patience: int = 3,
        verbose: bool = False,
        mode: str = "min",
        strict: bool = True,
        check_finite: bool = True,
        stopping_threshold: float | None = None,
        divergence_threshold: float | None = None,
        check_on_train_epoch_end: bool | None = None,
        log_rank_zero_only: bool = False,
        *,
        min_delta_mode: Literal["abs", "rel"] = "abs",
        start_from_epoch: int = 0,
        start_from_step: int = 0,
        restore_best_weights: bool = False,
        best_weights_in_checkpoint: bool = True,
    ) -> None:
        _validate(locals())
        super().__init__(
            monitor=monitor,
            min_delta=min_delta,
            patience=patience,
            verbose=verbose,
            mode=mode,
            strict=strict,
            check_finite=check_finite,
            stopping_threshold=stopping_threshold,
            divergence_threshold=divergence_threshold,
            check_on_train_epoch_end=check_on_train_epoch_end,
            log_rank_zero_only=log_rank_zero_only,
        )
        self.min_delta_mode = min_delta_mode
        self.start_from_epoch = start_from_epoch
        self.start_from_step = start_from_step
        self.restore_best_weights = restore_best_weights
        self.best_weights_in_checkpoint = best_weights_in_checkpoint
        self.best_epoch = -1
        self.best_step = -1
        self.stopped_step = 0
        self.restored_best_weights = False
        self._best = Snapshot()  # the best weights, in CPU memory (with restore_best_weights)
        self._validated = Snapshot()  # with weight averaging: the weights the last validation run scored
        self._validated_fresh = False  # a validation run captured them since the last check
        self._restore_at_fit_end = False

    @override
    def on_validation_batch_start(
        self,
        trainer: pl.Trainer,
        pl_module: pl.LightningModule,
        batch: Any,
        batch_idx: int,
        dataloader_idx: int = 0,
    ) -> None:
        # a weight-averaging callback has swapped its average in by now: the weights the metric describes
        if (
            self.restore_best_weights
            and batch_idx == 0
            and dataloader_idx == 0
            and not trainer.sanity_checking
            and averaging_callbacks(trainer)
        ):
            # sync: once per validation run (only next to a weight-averaging callback)
            self._validated.capture(pl_module, step=trainer.global_step, wait=True)
            self._validated_fresh = True

    @override
    def on_train_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        callbacks = callback_list(trainer)
        mine = next(i for i, callback in enumerate(callbacks) if callback is self)
        later = [c for c in callbacks[mine + 1 :] if c in averaging_callbacks(trainer)]
        if later:  # their on_train_end copies the average into the module after ours: restore after them
            self._restore_at_fit_end = True
            return
        self._restore(trainer, pl_module)

    @override
    def on_fit_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if self._restore_at_fit_end:
            self._restore_at_fit_end = False
            self._restore(trainer, pl_module)

    def _restore(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if not (self.restore_best_weights and self._best.model is not None):
            return
        self._best.restore(pl_module)
        # a weight-averaging callback's average (swapped in later by validate, saved) becomes the best too
        set_averages_to_module(trainer, pl_module)
        self.restored_best_weights = True
        if self.verbose:
            rank_zero_info(
                f"EarlyStopping: restored the best weights ({self.monitor}={float(self.best_score):.6g} "
                f"at epoch {self.best_epoch}, step {self.best_step})."
            )

    @override
    def state_dict(self) -> dict[str, Any]:
        state = super().state_dict()
        state.update(
            min_delta_mode=self.min_delta_mode,
            best_epoch=self.best_epoch,
            best_step=self.best_step,
            stopped_step=self.stopped_step,
            best_weights=self._best.model if self.best_weights_in_checkpoint else None,
        )
        return state

    @override
    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        full = {**self.state_dict(), "best_weights": None, **state_dict}  # tolerant of missing keys
        super().load_state_dict(full)
        self.best_epoch = int(full["best_epoch"])
        self.best_step = int(full["best_step"])
        self.stopped_step = int(full["stopped_step"])
        if full["best_weights"] is not None:
            self._best.model = dict(full["best_weights"])

    # Lightning's private check methods (stable since 1.x), wrapped here only: the stop rules stay its own.

    @override
    def _run_early_stopping_check(self, trainer: pl.Trainer) -> None:
        validated, self._validated_fresh = self._validated_fresh, False
        if trainer.current_epoch < self.start_from_epoch or trainer.global_step < self.start_from_step:
            return
        best_before = self.best_score
        reason_before, message_before = self.stopping_reason, self.stopping_reason_message
        super()._run_early_stopping_check(trainer)
        reason, threshold = self.stopping_reason, EarlyStoppingReason.STOPPING_THRESHOLD
        improved = self.best_score is not best_before or (reason == threshold != reason_before)
        if self.restore_best_weights:
            improved = trainer.strategy.reduce_boolean_decision(improved, all=True)
        if improved:
            self.best_epoch = trainer.current_epoch
            self.best_step = trainer.global_step
            if self.restore_best_weights and validated:
                # the averaged weights validation scored; the next validation copies into new buffers
                self._best, self._validated = self._validated, Snapshot()
            elif self.restore_best_weights:
                # new buffers (checkpoints may hold the old); sync: once per improvement (a complete copy)
                self._best.capture(
                    trainer.lightning_module, step=trainer.global_step, reuse_buffers=False, wait=True
                )
        stopped_now = trainer.should_stop and (
            self.stopping_reason_message is not message_before or self.stopped_epoch == trainer.current_epoch
        )
        if stopped_now:
            self.stopped_step = trainer.global_step
            if self.verbose and trainer.is_global_zero:
                restore = (
                    f" The best weights (epoch {self.best_epoch}) will be restored when training ends."
                    if self.restore_best_weights and self._best.model is not None
                    else ""
                )
                log.info(
                    f"EarlyStopping stopped training at epoch {trainer.current_epoch} (step "
                    f"{trainer.global_step}): {reason.name}. "
                    f"{self.stopping_reason_message or ''}"
                    f"{restore}"
                )

    @override
    def _evaluate_stopping_criteria(self, current: Tensor) -> tuple[bool, str | None]:
        if self.min_delta_mode == "abs":
            return super()._evaluate_stopping_criteria(current)
        absolute = self.min_delta  # signed by Lightning: negative in "min" mode
        best = self.best_score
        self.min_delta = absolute * abs(float(best)) if bool(torch.isfinite(best)) else 0.0
        try:
            return super()._evaluate_stopping_criteria(current)
        finally:
            self.min_delta = absolute


# Where Lightning's constructor raises, ours raises the same type, also our checks' ValueError/TypeError.


class ModeError(MisconfigurationException, ValueError):
    """An unknown ``mode`` string: Lightning's ``MisconfigurationException`` and a ``ValueError``."""


class ModeTypeError(MisconfigurationException, TypeError):
    """A ``mode`` that is not a string: Lightning's ``MisconfigurationException`` and a ``TypeError``."""


class MinDeltaTypeError(TypeError, ValueError):
    """A ``min_delta`` that is not a number: Lightning's ``TypeError``, our earlier ``ValueError``."""


def _validate_mode(mode: Any) -> None:
    # Lightning's wording too: its own tests match it
    message = (
        f"`mode` must be one of ('min', 'max'), got {mode!r} (Lightning: `mode` can be min, max, got {mode})."
    )
    if not isinstance(mode, str):
        raise ModeTypeError(message)
    if mode not in ("min", "max"):
        raise ModeError(message)


def _validate(args: dict[str, Any]) -> None:
    """Every constructor argument, before Lightning's ``__init__`` sees it (it checks only ``mode``)."""
    monitor = args["monitor"]
    if not isinstance(monitor, str):
        raise TypeError(f"`monitor` must be the name of a logged metric (a str), got {monitor!r}.")
    if not monitor:
        raise ValueError(f"`monitor` must be the name of a logged metric, got {monitor!r}.")
    min_delta = args["min_delta"]
    if not isinstance(min_delta, (int, float)):  # Lightning's `min_delta *= -1` raises TypeError for most
        raise MinDeltaTypeError(f"`min_delta` must be a finite number >= 0, got {min_delta!r}.")
    check_non_negative("min_delta", min_delta)
    check_int("patience", args["patience"], minimum=0)
    _validate_mode(args["mode"])
    check_choice("min_delta_mode", args["min_delta_mode"], ("abs", "rel"))
    for name in ("stopping_threshold", "divergence_threshold"):
        value = args[name]
        if value is not None and not is_number(value):
            raise ValueError(f"`{name}` must be a finite number or None, got {value!r}.")
    for name in ("start_from_epoch", "start_from_step"):
        check_int(name, args[name], minimum=0)
    flags = ("verbose", "strict", "check_finite", "log_rank_zero_only", "restore_best_weights")
    for name in (*flags, "best_weights_in_checkpoint", "check_on_train_epoch_end"):
        if args[name] is not None or name != "check_on_train_epoch_end":  # None: by the validation schedule
            check_bool(name, args[name])
