"""Check that what the training loader serves teaches as much as validation samples do (pairs kept)."""

from __future__ import annotations

from typing import Any

import torch
from typing_extensions import Unpack, override

from lightning_recipes._stats import held_out_gain
from lightning_recipes._validation import check_in_range, check_int
from lightning_recipes.checks.base import CheckOptions, SanityCheck, perturbed
from lightning_recipes.checks.report import CheckInconclusive, CheckResult, CheckSkipped, Status
from lightning_recipes.harness import Harness as CheckContext
from lightning_recipes.harness.batches import batch_size_of, one_row_per_sample
from lightning_recipes.harness.isolation import seeded
from lightning_recipes.harness.walk import map_tensors

__all__ = ["TrainingPairsCheck"]

TEACHERS = ("untrained", "training", "validation")
MIN_FALL = 0.05  # the gap, as a share of the untrained copy's loss, below which nothing is judged


class TrainingPairsCheck(SanityCheck):
    """A copy taught by training batches is not far worse, on half of each validation batch, than one taught
    by the other halves (the guide has the bounds). Cost: ``2 x max_steps`` steps on copies.

    Args:
        max_steps: Training steps of each copy (fixed work: the verdict does not depend on machine load).
        num_batches: Distinct training batches read (and cycled through).
        num_samples: Samples kept from each training batch and taught from each validation batch.
        gaps: ``(warn, fail)``: the training-taught copy's held-out loss above the other's, as a share of
            the larger, that it exceeds at 99% confidence.

    Example:
        >>> from lightning_recipes.checks import preflight
        >>> from lightning_recipes.testing import TinyClassifier, random_classification_loader
        >>> loader = random_classification_loader()
        >>> report = preflight(TinyClassifier(lr=0.5), train_dataloaders=loader, val_dataloaders=loader,
        ...                    checks=[TrainingPairsCheck()], num_threads=1, progress=False)
        >>> report["training_pairs"].status
        'pass'
    """

    name = "training_pairs"

    def __init__(
        self,
        max_steps: int = 120,
        num_batches: int = 32,
        num_samples: int = 32,
        gaps: tuple[float, float] = (0.3, 0.5),
        **options: Unpack[CheckOptions],
    ) -> None:
        super().__init__(**options)
        check_int("max_steps", max_steps, minimum=1)
        check_int("num_batches", num_batches, minimum=1)
        check_int("num_samples", num_samples, minimum=1)
        check_in_range("gaps[0]", gaps[0], 0, 1, low_open=True, high_open=True)
        check_in_range("gaps[1]", gaps[1], gaps[0], 1, high_open=True)
        self.max_steps, self.num_batches, self.num_samples = max_steps, num_batches, num_samples
        self.gaps = gaps

    @override
    def check(self, context: CheckContext) -> CheckResult:
        context.require_automatic_optimization(context.model)
        held_out, taught = [], []
        for batch in context.val_batches(16):
            size = batch_size_of(batch, context.keys()[0]) or 0
            if size < 8 or not one_row_per_sample(batch, size):
                continue  # too small to halve, or an edge list / packed data that rows cannot be cut from
            half = size // 2  # the first half held out (in quarters), num_samples of the second taught
            held_out += [_rows(batch, half * i // 4, half * (i + 1) // 4) for i in range(4)]
            taught.append(_rows(batch, half, min(size, half + self.num_samples)))
        if len(taught) < 2:
            raise CheckSkipped("needs 2 validation batches of 8 or more samples, one row per sample.")
        sources = [[], context.read_train_batches(self.num_batches, self.num_samples), taught]
        copies = [seeded(context.seed, context.copy_model) for _ in TEACHERS]
        optimizers = [context.build_optimizers(model).optimizers for model in copies]
        with perturbed("copies taught by training batches and by half of each validation batch"):
            for step in range(self.max_steps):
                for model, built, batches in list(zip(copies, optimizers, sources))[1:]:
                    torch.default_generator.manual_seed(context.seed + step)  # the same draws in both
                    context.optimization_step(model, built, batches[step % len(batches)], step)
            with torch.no_grad():
                held = [torch.stack([context.training_loss(m.eval(), b) for b in held_out]) for m in copies]
        losses = torch.stack(held).double().cpu()
        means = dict(zip(TEACHERS, losses.mean(1).tolist()))
        learned, gain = held_out_gain(losses[2], losses[0]), held_out_gain(losses[1], losses[2])
        fall = (means["training"] - means["validation"]) / max(means["untrained"], 1e-12)
        details: dict[str, Any] = {"held_out_loss": means, "gap": -gain.gain, "gap_low": -gain.high}
        details |= {"gap_noise": gain.noise, "share_of_untrained": fall, "gaps": self.gaps}
        details |= {"steps": self.max_steps, "held_out_chunks": len(held_out), "taught_batches": len(taught)}
        trained, validated = means["training"], means["validation"]
        stated = f"held-out loss {trained:.4g} taught by training batches, {validated:.4g} by val"
        if not bool(torch.isfinite(losses).all()) or float(losses.min()) < 0:
            raise CheckSkipped(f"{stated}: losses below 0 or not finite: no common scale")
        if learned.low <= 0:
            raise CheckInconclusive(f"{stated}: the copy taught by validation learned nothing held out")
        status: Status = "pass"
        if fall >= MIN_FALL and -gain.high >= self.gaps[0]:
            status = "fail" if -gain.high >= self.gaps[1] else "warn"
        if status == "pass":
            return self.verdict(status, stated, details)
        action = "Print augmented training samples with their targets: a transform moving only the input?"
        return self.verdict(status, f"{stated}: training pairs teach less", details, action=action)


def _rows(batch: Any, start: int, stop: int) -> Any:
    """``batch`` with rows ``start:stop`` of every tensor (one row per sample)."""
    return map_tensors(batch, lambda tensor: tensor[start:stop] if tensor.ndim else tensor)
