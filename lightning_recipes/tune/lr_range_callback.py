"""The LR range test as a callback: the sweep inside ``trainer.fit``, on the Trainer's data and strategy."""

from __future__ import annotations

from typing import Any

import lightning.pytorch as pl
from lightning.pytorch.callbacks import Callback
from lightning.pytorch.utilities import rank_zero_info, rank_zero_warn
from typing_extensions import override

from lightning_recipes._validation import check_bool
from lightning_recipes.harness import Harness
from lightning_recipes.sweep_args import SweepArgs
from lightning_recipes.tune._scale_schedule import check_scalable, scale_schedule, schedule_peak
from lightning_recipes.tune.lr_range import LRRangeResult, sweep_lr

__all__ = ["LRRangeTest"]


class LRRangeTest(Callback):
    """Run the LR range test inside ``trainer.fit``, at ``on_train_start``, on the Trainer's own data and
    strategy (under DDP every rank gets the same :attr:`result`).

    The run's model and optimizer are unchanged unless ``apply=True``: then the whole LR schedule (group LRs,
    ``base_lrs``, ``max_lr``, ``eta_min``, ``min_lrs``) is scaled so that its peak is the result's
    ``peak_lr``; a scheduler it cannot scale is refused before the sweep, and an inconclusive sweep is never
    applied (a warning says why). ``stop=True`` stops the fit after the sweep (a tuning-only run).

    Cost: ``num_steps`` steps of a copy per ``fit`` (not on resume), one host sync (DDP: all-reduce) each.

    Args:
        apply: Scale the run's LR schedule so that its peak is the result's ``peak_lr``.
        stop: Stop the fit after the sweep.
        print_result: Print the suggestion and the YAML fragment on rank zero.
        progress: One transient progress line (rank zero, a terminal); ``None`` follows the Trainer's bar.
        args: The sweep's arguments as one :class:`~lightning_recipes.sweep_args.SweepArgs` (not with
            ``**sweep``).
        **sweep: :func:`~lightning_recipes.tune.find_lr`'s sweep arguments (``num_steps``, ``rule``, ...).

    Raises:
        TypeError, ValueError: For an unknown argument, a flag not a bool, a sweep argument out of range.

    Example:
        >>> from lightning_recipes.testing import TinyClassifier, fast_trainer, random_classification_loader
        >>> finder = LRRangeTest(num_steps=30, stop=True, print_result=False)
        >>> trainer = fast_trainer(max_steps=5, callbacks=[finder])
        >>> trainer.fit(TinyClassifier(), random_classification_loader())
        >>> finder.result.suggestion > 0
        True
    """

    def __init__(
        self,
        *,
        apply: bool = False,
        stop: bool = False,
        print_result: bool = True,
        progress: bool | None = None,
        args: SweepArgs | None = None,
        **sweep: Any,
    ) -> None:
        unknown = sorted(set(sweep) - set(SweepArgs.field_names()))
        if unknown:
            raise TypeError(
                f"LRRangeTest got unknown arguments {unknown}; allowed: 'apply', 'stop', 'print_result', "
                f"'progress', 'args' and the sweep's {SweepArgs.field_names()}."
            )
        if args is not None and sweep:
            raise TypeError(f"LRRangeTest takes `args` or the sweep's arguments {sorted(sweep)}, not both.")
        if args is not None and not isinstance(args, SweepArgs):
            raise TypeError(f"`args` must be a SweepArgs, got {type(args).__name__}.")
        check_bool("apply", apply)
        check_bool("stop", stop)
        check_bool("print_result", print_result)
        if progress is not None:
            check_bool("progress", progress)
        self.progress = progress
        self.args: SweepArgs = SweepArgs(**sweep) if args is None else args
        self.apply = apply
        self.stop = stop
        self.print_result = print_result
        self.result: LRRangeResult | None = None

    @property
    def seed(self) -> int:
        """The seed of the sweep's RNG."""
        return self.args.seed

    @property
    def sweep(self) -> dict[str, Any]:
        """The sweep's arguments but ``seed``, by name."""
        return {k: v for k, v in self.args.to_dict().items() if k != "seed"}

    @override
    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if self.result is not None or trainer.ckpt_path is not None:
            return
        if self.apply:  # before the sweep: a schedule the found LR cannot scale fails now, not after it
            check_scalable(trainer.optimizers, [config.scheduler for config in trainer.lr_scheduler_configs])
        context = Harness.from_trainer(trainer, pl_module, seed=self.seed)
        self.result = sweep_lr(context, self.args, progress=self.progress)
        if self.print_result:
            yaml = "" if self.result.peak_lr is None else f"\n{self.result.to_yaml()}"
            rank_zero_info(f"{self.result.summary()}{yaml}")
        if self.apply and self.result.peak_lr is None:
            # every rank holds the same curve (losses all-reduced), so every rank takes this branch
            reason = self.result.reason
            rank_zero_warn(f"LRRangeTest(apply=True): not applied, the run keeps its LRs. {reason}")
        elif self.apply:
            self._apply(trainer)
        if self.stop:
            trainer.should_stop = True

    def _apply(self, trainer: pl.Trainer) -> None:
        """Scale the whole schedule (every LR the optimizers and schedulers hold) so that its peak, the
        largest LR it reaches (``OneCycleLR`` / ``CyclicLR``'s ``max_lr``, else ``initial_lr``), is
        ``peak_lr``."""
        assert self.result is not None and self.result.peak_lr is not None
        schedulers = [config.scheduler for config in trainer.lr_scheduler_configs]
        base = schedule_peak(trainer.optimizers, schedulers)
        if base > 0:
            scale_schedule(trainer.optimizers, schedulers, self.result.peak_lr / base)

    @override
    def state_dict(self) -> dict[str, Any]:
        return {"result": None if self.result is None else self.result.to_dict()}

    @override
    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        data = state_dict.get("result")
        self.result = None if data is None else LRRangeResult.from_dict(data)
