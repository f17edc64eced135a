"""What the checks share: a :class:`Finding`, held-out batches, the model's output."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import lightning.pytorch as pl
import torch
from torch import Tensor
from torch.nn.modules.batchnorm import _BatchNorm

from lightning_recipes._stats import NoiseVerdict
from lightning_recipes.checks.report import CheckSkipped
from lightning_recipes.harness import Harness as CheckContext
from lightning_recipes.harness.batches import batch_size_of, slice_batch
from lightning_recipes.harness.forward_capture import step_output, takes_more_than_the_input

T = TypeVar("T")
LOOKS = 3  # at init, then after one and two optimizer steps on the copy


@dataclass(frozen=True)
class Finding:
    """One part of a check's verdict: ``status`` (``"n/a"``: does not apply), summary, evidence, action."""

    status: str
    summary: str
    details: dict[str, Any] = field(default_factory=dict)
    action: str = ""


def first_of(context: CheckContext, batch: Any, count: int) -> Any:
    """The first ``count`` samples of ``batch`` (the whole batch if it is no larger or has no size)."""
    size = batch_size_of(batch, context.input_key)
    return batch if size is None or size <= count else slice_batch(batch, count, size)


def held_out_split(
    context: CheckContext, num_batches: int, num_eval_batches: int, num_samples: int | None
) -> tuple[list[Any], list[Any], bool]:
    """Training and held-out batches: the validation loader's (``True``), else the last training ones."""
    held_out = context.val_batches(num_eval_batches)
    if held_out:
        return context.read_train_batches(num_batches, num_samples), held_out, True
    available = context.read_train_batches(num_batches + num_eval_batches, num_samples)
    if len(available) < 2:
        raise CheckSkipped("needs held-out data: a validation loader or at least 2 training batches.")
    keep = min(num_eval_batches, len(available) // 2)
    return available[:-keep], available[-keep:], False


def model_output(context: CheckContext, model: pl.LightningModule, batch: Any) -> Tensor:
    """``forward(inputs)``, or, for a ``forward`` that takes more, its output seen in ``training_step``."""
    try:
        return context.batch_output(model, batch)
    except TypeError as err:
        if not takes_more_than_the_input(err):
            raise
        return step_output(context, model, batch)


def until_it_reacts(
    context: CheckContext,
    model: pl.LightningModule,
    batch: Any,
    measure: Callable[[], T],
    reacts: Callable[[T], bool],
) -> tuple[T, int]:
    """``measure()`` at init, then after up to 2 optimizer steps until it ``reacts``; with the steps."""
    optimizers, steps, found = None, 0, measure()
    while not reacts(found) and steps < LOOKS - 1 and model.automatic_optimization:
        was_training = model.training
        model.train()
        if optimizers is None:
            optimizers = context.build_optimizers(model).optimizers
        context.optimization_step(model, optimizers, batch)
        model.train(was_training)
        steps, found = steps + 1, measure()
    return found, steps


def listed(names: list[str], width: int = 48) -> str:
    """``names`` for a summary, within about ``width`` characters, with how many more (details hold all)."""
    shown: list[str] = []
    for name in names:
        if shown and sum(len(n) + 2 for n in shown) + len(name) > width:
            break
        shown.append(name if len(name) <= width else "..." + name[-(width - 3) :])
    more = f" +{len(names) - len(shown)}" if len(names) > len(shown) else ""
    return ", ".join(shown) + more


def worst(verdicts: dict[str, NoiseVerdict]) -> tuple[str, NoiseVerdict]:
    """The verdict that weighs most (``fail`` > ``inconclusive`` > ``pass``), with its quantity's name."""
    return max(verdicts.items(), key=lambda kv: ("pass", "inconclusive", "fail").index(kv[1].status))


def keeping_statistics(model: torch.nn.Module, forward: Callable[[], Any]) -> list[torch.nn.Module]:
    """Training-mode BatchNorms, and modules whose float buffers one forward changes (put back)."""
    norms: list[torch.nn.Module] = [m for m in model.modules() if isinstance(m, _BatchNorm) and m.training]
    owned = [
        (m, name, b.detach().clone())
        for m in model.modules()
        if m.training and not isinstance(m, _BatchNorm)
        for name, b in m.named_buffers(recurse=False)
        if b.is_floating_point()
    ]
    if not owned:
        return norms
    for norm in norms:
        norm.eval()
    try:
        with torch.no_grad():
            forward()
    except Exception:  # the caller's own forward reports it
        return norms
    finally:
        for norm in norms:
            norm.train()
    changed: list[torch.nn.Module] = []
    for m, name, old in owned:
        now = getattr(m, name)
        if not (isinstance(now, Tensor) and now.shape == old.shape and torch.equal(now, old)):
            changed += [] if any(m is c for c in changed) else [m]
            m._buffers[name] = old
    return norms + changed
