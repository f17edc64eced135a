"""The LR range test: an exponential LR sweep of a copy of the model (:func:`find_lr`)."""

from __future__ import annotations

import copy
import dataclasses
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import lightning.pytorch as pl
import torch
from lightning.pytorch.utilities import CombinedLoader
from lightning.pytorch.utilities.model_helpers import is_overridden
from torch import Tensor
from torch.optim import Optimizer

from lightning_recipes._collectives import all_reduce_mean_
from lightning_recipes._progress import ProgressLine
from lightning_recipes._validation import check_bool, check_choice, check_non_negative
from lightning_recipes.harness import (
    CannotRunOnCopy,
    Harness,
    preserved_rng,
    quiet_logging,
    resolve_fit_data,
)
from lightning_recipes.harness.silent_trainer import silent_trainer
from lightning_recipes.sweep_args import Rule, SweepArgs
from lightning_recipes.tune.suggest import (
    CurveVerdict,
    centred,
    curve_verdict,
    half_window_for,
    peak_factor,
    suggest,
    sweep_steps,
)

__all__ = ["LRRangeResult", "find_lr", "sweep_lr"]


@dataclass
class LRRangeResult:
    """An LR range test's ``lrs``, ``losses`` and ``smoothed`` curve, the ``suggestion`` (constant schedule,
    by ``rule``) and ``peak_lr`` (after a warm-up; both ``None`` when inconclusive), why it ``stopped``, the
    ``optimizers``, ``group_scales`` and ``evidence`` (:class:`.suggest.CurveVerdict`)."""

    lrs: list[float]
    losses: list[float]
    smoothed: list[float]
    suggestion: float | None
    peak_lr: float | None
    rule: str
    stopped: str
    optimizers: list[str] = field(default_factory=list)
    group_scales: list[list[float]] = field(default_factory=list)
    evidence: CurveVerdict | None = None

    def __post_init__(self) -> None:
        if self.evidence is None and sum(math.isfinite(v) for v in self.losses) >= 6:
            self.evidence = curve_verdict(self.lrs, self.losses)

    @property
    def verdict(self) -> str:
        """``"ok"`` (the curve fell beyond its noise, or was too short to judge) or ``"inconclusive"``."""
        return "inconclusive" if self.evidence is not None and not self.evidence.significant else "ok"

    @property
    def reason(self) -> str:
        """The decision in words with its numbers (fall, noise, threshold); if inconclusive, what to try."""
        return "" if self.evidence is None else self.evidence.describe()

    def suggest(self, rule: Rule) -> float | None:
        """What another rule would pick from the same curve (``None`` when the sweep is inconclusive)."""
        if self.verdict == "inconclusive":
            return None
        return suggest(self.lrs, self.losses, rule, skip_begin=_skip(len(self.lrs)))

    def summary(self) -> str:
        """One paragraph: the pick (or that there is none) and the evidence for it."""
        optimizers = ", ".join(self.optimizers) or "?"
        head = f"LR range test ({optimizers}, {len(self.lrs)} steps, stopped: {self.stopped})"
        if self.suggestion is None or self.peak_lr is None:
            return f"{head}: {self.reason}"
        return f"{head}: suggestion {self.suggestion:.3g} ({self.rule}), peak_lr {self.peak_lr:.3g}" + (
            f"; {self.reason}" if self.reason else ""
        )

    def to_yaml(self, key: str = "model.init_args.recipe.lr") -> str:
        """The LightningCLI YAML that sets ``peak_lr`` at the dotted ``key`` (``ValueError`` if inconclusive).

        Example:
            >>> LRRangeResult([1.0], [1.0], [1.0], 1e-3, 2e-3, "min_div_10", "max_lr").to_yaml()
            'model:\\n  init_args:\\n    recipe:\\n      lr: 0.002\\n'
        """
        if self.peak_lr is None:
            raise ValueError(f"the LR range test gives no learning rate to write: {self.reason}")
        parts = key.split(".")
        lines = [f"{'  ' * depth}{part}:" for depth, part in enumerate(parts[:-1])]
        lines.append(f"{'  ' * (len(parts) - 1)}{parts[-1]}: {self.peak_lr:.3g}")
        return "\n".join(lines) + "\n"

    def plot(self, ax: Any = None) -> Any:
        """The curve drawn by :func:`lightning_recipes.plots.plot_lr_range`; returns the ``Axes``."""
        from lightning_recipes.plots.lr_range import plot_lr_range

        figure = plot_lr_range(self, ax=ax)
        return ax if ax is not None else figure.axes[0]

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LRRangeResult:
        """The result :meth:`to_dict` wrote; the smoothed curve and the verdict are recomputed.

        Example:
            >>> result = LRRangeResult([1.0], [1.0], [1.0], 1e-3, 5e-3, "min_div_10", "max_lr", ["Lion"])
            >>> LRRangeResult.from_dict(result.to_dict()) == result
            True
        """
        losses = list(data["losses"])
        return cls(
            lrs=list(data["lrs"]),
            losses=losses,
            smoothed=centred(losses, half_window_for(len(losses))) if losses else [],
            **{name: data[name] for name in ("suggestion", "peak_lr", "rule", "stopped")},
            optimizers=list(data.get("optimizers", [])),
            group_scales=[list(g) for g in data.get("group_scales", [])],
        )

    def to_dict(self) -> dict[str, Any]:
        """The curve and the pick as plain data (what a checkpoint keeps)."""
        saved = ("suggestion", "peak_lr", "rule", "stopped", "optimizers", "lrs", "losses", "group_scales")
        return {name: copy.deepcopy(getattr(self, name)) for name in saved}


def _skip(points: int) -> int:
    return max(1, points // 10)  # the first steps measure the initial loss more than the LR


def _batches(context: Harness, count: int) -> Iterator[Any]:
    """``count`` training batches as ``fit`` passes them, cycled, each loader's generator seeded with the
    sweep's seed (so ``find_lr`` and ``lr="find"`` read the same batches)."""
    read = context.read_fit_batches(count, _fit_loaders(context), seed=context.seed)
    if not read:
        raise ValueError("the training loader yielded no batch.")
    for step in range(count):
        yield read[step % len(read)]


def _fit_loaders(context: Harness) -> Any:
    """Inside ``fit``, the Trainer's own ``CombinedLoader`` when the context reads its loaders, else those."""
    # private: only the fit loop keeps the CombinedLoader (with its mode); `train_dataloader` is its iterables
    combined = getattr(getattr(context.trainer, "fit_loop", None), "_combined_loader", None)
    if isinstance(combined, CombinedLoader) and combined.iterables is context.train_dataloaders:
        return combined
    return context.train_dataloaders


def _average_gradients_and_loss(params: Sequence[Tensor], loss: Tensor) -> None:
    """Average every gradient and the loss across ranks in one collective; a gradient no rank has stays
    ``None``, as under DDP."""
    if not (torch.distributed.is_available() and torch.distributed.is_initialized()):
        return
    has_grad = torch.tensor([p.grad is not None for p in params], dtype=torch.float32, device=loss.device)
    for p in params:
        if p.grad is None:
            p.grad = torch.zeros_like(p)
    all_reduce_mean_([*(p.grad for p in params if p.grad is not None), loss, has_grad])
    for p, used in zip(params, has_grad.tolist()):  # sync: under DDP, once per sweep step
        if used == 0:
            p.grad = None


def _gradient_clipper(
    context: Harness, model: pl.LightningModule, clip_val: float | None, algorithm: str | None
) -> Callable[[Optimizer], None]:
    """The module's ``configure_gradient_clipping`` with the run's Trainer settings (else a silent Trainer
    holding the two arguments), as Lightning runs it before each optimizer step."""
    trainer = context.trainer
    if trainer is None:
        if not clip_val and not is_overridden("configure_gradient_clipping", model, pl.LightningModule):
            return lambda optimizer: None
        trainer = silent_trainer(gradient_clip_val=clip_val, gradient_clip_algorithm=algorithm)

    def clip(optimizer: Optimizer) -> None:
        model.trainer = trainer
        try:
            with quiet_logging():
                model.configure_gradient_clipping(
                    optimizer,
                    gradient_clip_val=trainer.gradient_clip_val,
                    gradient_clip_algorithm=trainer.gradient_clip_algorithm,
                )
        finally:
            model.trainer = None

    return clip


def sweep_lr(
    context: Harness,
    args: SweepArgs | None = None,
    *,
    gradient_clip_val: float | None = None,
    gradient_clip_algorithm: str | None = None,
    progress: bool | None = None,
    **overrides: Any,
) -> LRRangeResult:
    """Run the sweep on a copy from ``context`` (as :func:`find_lr`), ``overrides`` replacing fields of
    ``args``; clipped as the run clips. One sync per step (DDP: one all-reduce of gradients and loss).
    """
    if args is None:
        args = SweepArgs(**overrides)
    elif overrides:
        args = dataclasses.replace(args, **overrides)
    if gradient_clip_val is not None:  # the Trainer's rules: >= 0 or None (0 and None do not clip)
        check_non_negative("gradient_clip_val", gradient_clip_val)
    check_choice("gradient_clip_algorithm", gradient_clip_algorithm, ("norm", "value", None))
    if context.trainer is not None and (gradient_clip_val, gradient_clip_algorithm) != (None, None):
        raise ValueError(
            "`gradient_clip_val` / `gradient_clip_algorithm` are the Trainer's when the sweep runs in one; "
            f"got {gradient_clip_val!r} / {gradient_clip_algorithm!r} next to one. Set them on the Trainer."
        )
    with preserved_rng():
        torch.manual_seed(context.seed)
        model = context.copy_model()
        context.require_automatic_optimization(model)
        clip = _gradient_clipper(context, model, gradient_clip_val, gradient_clip_algorithm)
        built = context.build_optimizers(model)
        if not built.from_module:
            raise ValueError(
                f"the LR range test sweeps the module's own optimizer, but {built.note}. Make "
                "`configure_optimizers` work outside `fit`, or run `LRRangeTest` inside the Trainer."
            )
        optimizers = built.optimizers
        base = [[float(g["lr"]) for g in opt.param_groups] for opt in optimizers]
        peak = max((lr for group in base for lr in group), default=0.0)
        if peak <= 0:
            raise ValueError("every parameter group of the module's optimizer has lr 0; nothing to scale.")
        scales = [[lr / peak for lr in group] for group in base]
        num_steps, rule = sweep_steps(optimizers, args.num_steps, args.min_lr, args.max_lr), args.rule
        params = [p for p in model.parameters() if p.requires_grad]
        if progress is None:
            progress = context.trainer is None or context.trainer.progress_bar_callback is not None
        line = ProgressLine("find_lr", num_steps, enabled=progress)
        with line:
            lrs, losses, stopped = _sweep(
                context, model, optimizers, scales, params, clip, args, num_steps, line
            )
    chosen: float | None = suggest(lrs, losses, rule, skip_begin=_skip(len(lrs)))
    exposure = (num_steps - 1) / math.log(args.max_lr / args.min_lr)  # steps per e-fold of LR
    evidence = curve_verdict(lrs, losses) if len(lrs) >= 6 else None
    if evidence is not None and not evidence.significant:
        chosen = None  # the rule's pick from a flat curve is wherever the noise dipped: never offered
    return LRRangeResult(
        lrs=lrs,
        losses=losses,
        smoothed=centred(losses, half_window_for(len(losses))),
        suggestion=chosen,
        peak_lr=None if chosen is None else chosen * peak_factor(optimizers, args.warmup_factor, exposure),
        rule=rule,
        stopped=stopped,
        optimizers=[type(o).__name__ for o in optimizers],
        group_scales=scales,
        evidence=evidence,
    )


def _sweep(
    context: Harness,
    model: Any,
    optimizers: list[Any],
    scales: list[list[float]],
    params: Sequence[Tensor],
    clip: Any,
    args: SweepArgs,
    num_steps: int,
    line: ProgressLine,
) -> tuple[list[float], list[float], str]:
    """The sweep's loop on the copy over ``num_steps`` steps: (LRs, losses, why it stopped)."""
    min_lr, smoothing = args.min_lr, args.smoothing
    ratio = (args.max_lr / min_lr) ** (1 / (num_steps - 1))
    lrs: list[float] = []
    losses: list[float] = []
    best, average, stopped = math.inf, 0.0, "max_lr"
    for step, batch in enumerate(_batches(context, num_steps)):
        lr = min_lr * ratio**step
        for optimizer, group_scales in zip(optimizers, scales):
            for group, scale in zip(optimizer.param_groups, group_scales):
                group["lr"] = lr * scale
        for optimizer in optimizers:
            optimizer.zero_grad(set_to_none=False)
        loss = context.training_loss(model, batch, step)
        loss.backward()
        value = loss.detach().float().reshape(1).clone()
        _average_gradients_and_loss(params, value)
        loss_value = float(value.item())  # sync: once per sweep step, by design
        if not math.isfinite(loss_value):
            stopped = "non-finite loss"
            break
        for optimizer in optimizers:
            clip(optimizer)
            optimizer.step()
        lrs.append(lr)
        losses.append(loss_value)
        line.advance(f"lr {lr:.2e}, loss {loss_value:.4g}")
        average = smoothing * average + (1 - smoothing) * loss_value
        smoothed_now = average / (1 - smoothing ** (step + 1))
        best = min(best, smoothed_now)
        # `> divergence * best` for a positive loss, still right for a negative one (Gaussian NLL, ELBO)
        if step > _skip(num_steps) and smoothed_now - best > (args.divergence - 1) * abs(best):
            stopped = "diverged"
            break
    return lrs, losses, stopped


def find_lr(
    model: pl.LightningModule,
    datamodule: pl.LightningDataModule | None = None,
    train_dataloaders: Any = None,
    *,
    min_lr: float = SweepArgs.min_lr,
    max_lr: float = SweepArgs.max_lr,
    num_steps: int = SweepArgs.num_steps,
    rule: Rule = SweepArgs.rule,
    smoothing: float = SweepArgs.smoothing,
    divergence: float = SweepArgs.divergence,
    warmup_factor: float = SweepArgs.warmup_factor,
    device: torch.device | str | None = None,
    seed: int = SweepArgs.seed,
    gradient_clip_val: float | None = None,
    gradient_clip_algorithm: str | None = None,
    progress: bool = True,
) -> LRRangeResult:
    """Sweep the LR exponentially from ``min_lr`` to ``max_lr`` over ``num_steps`` steps of a copy of
    ``model`` with its own optimizer (groups scaled alike), and suggest one; nothing of the caller's changes.

    Data: ``datamodule``, else ``train_dataloaders``, else the model's own. Arguments: those of
    :class:`~lightning_recipes.sweep_args.SweepArgs`; the copy trains on ``device`` and clips as the run
    will. A curve that never fell beyond its noise is ``"inconclusive"`` (no suggestion; ``reason`` says why).

    Example:
        >>> from lightning_recipes.testing import TinyClassifier, random_classification_loader
        >>> result = find_lr(TinyClassifier(), train_dataloaders=random_classification_loader(), num_steps=40)
        >>> 1e-5 < result.suggestion < 1.0, result.optimizers
        (True, ['SGD'])
    """
    args = SweepArgs(min_lr, max_lr, num_steps, rule, smoothing, divergence, warmup_factor, seed)
    check_bool("progress", progress)
    train_dataloaders = resolve_fit_data("find_lr", model, datamodule, train_dataloaders).train
    context = Harness(model, train_dataloaders, device=device, datamodule=datamodule, seed=args.seed)
    try:
        return sweep_lr(
            context,
            args,
            gradient_clip_val=gradient_clip_val,
            gradient_clip_algorithm=gradient_clip_algorithm,
            progress=progress,
        )
    except CannotRunOnCopy as err:  # manual optimisation, no loss returned, a model that cannot be copied
        raise ValueError(f"find_lr cannot sweep {type(model).__name__}: {err}") from err
