"""The permutation test of ``batch_independence``: in ``eval()``, the outputs of a permuted batch are the
permuted outputs, and the per-element losses of a permuted batch are the same values (in another order)."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import lightning.pytorch as pl
import torch
from torch import Tensor
from torch.nn import functional as F

from lightning_recipes._stats import NoiseVerdict, judge_deviation
from lightning_recipes.harness import Harness as CheckContext
from lightning_recipes.harness.walk import map_tensors

__all__ = ["PermutationOutcome", "per_element_losses", "permutation_test", "permute_batch"]

OutputFn = Callable[[pl.LightningModule, Any], Tensor]


def permute_batch(batch: Any, order: Tensor, count: int) -> Any:
    """``batch`` with every tensor whose first dimension is ``count`` reordered by ``order`` (inputs, masks,
    labels, lengths: a dict batch stays consistent).

    Example:
        >>> batch = (torch.arange(6).view(3, 2), torch.tensor([2, 1, 2]))
        >>> x, lengths = permute_batch(batch, torch.tensor([2, 0, 1]), 3)
        >>> x.tolist(), lengths.tolist()
        ([[4, 5], [0, 1], [2, 3]], [2, 2, 1])
    """
    return map_tensors(batch, lambda t: t[order.to(t.device)] if t.ndim > 0 and t.shape[0] == count else t)


@dataclass
class PermutationOutcome:
    """What the permutation test measured: one verdict per compared quantity (``"output"``, ``"per-element
    loss"``), the sample whose output moved most, and the order used."""

    verdicts: dict[str, NoiseVerdict] = field(default_factory=dict)
    worst_sample: int | None = None
    order: list[int] = field(default_factory=list)

    @property
    def status(self) -> str:
        """``fail`` if a quantity failed, else ``inconclusive`` if one was, else ``pass`` (none: ``skip``)."""
        statuses = [v.status for v in self.verdicts.values()]
        for status in ("fail", "inconclusive", "pass"):
            if status in statuses:
                return status
        return "skip"

    def worst(self) -> tuple[str, NoiseVerdict] | None:
        rank = {"fail": 2, "inconclusive": 1, "pass": 0}
        items = sorted(self.verdicts.items(), key=lambda kv: (rank[kv[1].status], kv[1].relative))
        return items[-1] if items else None

    def details(self) -> dict[str, Any]:
        return {
            "order": self.order,
            "worst_sample": self.worst_sample,
            **{
                name: {
                    "status": v.status,
                    "deviation": v.deviation,
                    "noise": v.noise,
                    "tolerance": v.tolerance,
                    "scale": v.scale,
                }
                for name, v in self.verdicts.items()
            },
        }


def permutation_test(
    context: CheckContext, model: pl.LightningModule, batch: Any, count: int, output: OutputFn | None
) -> PermutationOutcome:
    """Run ``batch`` (``count`` samples) and its rotation by one slot through ``model`` in ``eval()`` without
    gradients; the noise is the difference between two passes of the same batch under different seeds (so a
    ``training_step`` that draws random numbers is noise, not a verdict)."""
    order = torch.roll(torch.arange(count), 1)  # slot i gets sample i - 1: every sample moves
    permuted = permute_batch(batch, order, count)
    outcome = PermutationOutcome(order=order.tolist())
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            if output is not None:
                runs = [_seeded(context, seed, output, model, b) for b, seed in _passes(batch, permuted)]
                _judge_outputs(outcome, runs, order, count)
            losses = [
                _seeded(context, seed, partial(per_element_losses, context), model, b)
                for b, seed in _passes(batch, permuted)
            ]
            if all(isinstance(loss, Tensor) and loss.numel() > 0 for loss in losses):
                a, b, p = (torch.sort(loss.flatten())[0] for loss in losses)
                if a.shape == b.shape == p.shape:
                    scale = float(a.abs().max())
                    verdict = judge_deviation(_max_abs(p, a), _max_abs(a, b), scale, a.dtype)
                    outcome.verdicts["per-element loss"] = verdict
    finally:
        model.train(was_training)
    return outcome


def _passes(batch: Any, permuted: Any) -> list[tuple[Any, int]]:
    return [(batch, 0), (batch, 1), (permuted, 0)]


def _seeded(
    context: CheckContext, offset: int, run: Callable[[pl.LightningModule, Any], Any], model: Any, batch: Any
) -> Any:
    torch.manual_seed(context.seed + offset)
    return run(model, batch)


def _judge_outputs(outcome: PermutationOutcome, runs: list[Tensor], order: Tensor, count: int) -> None:
    a, b, p = (run.detach() for run in runs)
    if a.ndim == 0 or a.numel() == 0 or a.shape[0] != count or a.shape != b.shape or a.shape != p.shape:
        return  # not batch-first: the per-element losses still compare
    expected = a[order.to(a.device)]
    per_sample = (p.double() - expected.double()).abs().nan_to_num().reshape(count, -1).amax(dim=1)
    worst = int(per_sample.argmax())
    deviation = float(per_sample[worst])  # sync: once
    outcome.worst_sample = worst
    outcome.verdicts["output"] = judge_deviation(deviation, _max_abs(a, b), float(a.abs().max()), a.dtype)


def _max_abs(a: Tensor, b: Tensor) -> float:
    return float((a.double() - b.double()).abs().nan_to_num().max()) if a.numel() else 0.0


def per_element_losses(context: CheckContext, model: pl.LightningModule, batch: Any) -> Tensor | None:
    """The per-element loss (``reduction="none"``) of the step's main loss call, recomputed from the
    prediction and target it consumed; ``None`` when there is none or it cannot be recomputed."""
    try:
        calls = context.loss_calls(model, batch)
    except Exception:  # a step that cannot run on a copy here (manual optimisation): compare the outputs only
        return None
    call = next((c for c in calls if c.target is not None and c.target_keys), None)
    if call is None or call.target is None:
        return None
    function = getattr(F, call.function, None)
    if function is None:
        return None
    names = list(inspect.signature(function).parameters)
    if names[:2] != ["input", "target"] or "reduction" not in names:
        return None
    kwargs = {k: v for k, v in call.kwargs.items() if k in names and k not in ("size_average", "reduce")}
    kwargs["reduction"] = "none"
    try:
        losses = function(input=call.output, target=call.target, **kwargs)
    except Exception:  # an argument the recomputation cannot pass back: compare the outputs only
        return None
    return losses.detach().float() if isinstance(losses, Tensor) else None
