"""Check that the model in ``eval()`` is a deterministic function of its input and changes no state."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable, Generator, Mapping
from contextlib import contextmanager
from typing import Any, Literal

import lightning.pytorch as pl
import numpy as np
import torch
from torch import Tensor, nn
from typing_extensions import override

from lightning_recipes._validation import check_in_range, check_int
from lightning_recipes.checks.base import SanityCheck, TimeBudget
from lightning_recipes.checks.model._probe import first_samples, listed, model_output
from lightning_recipes.checks.report import SUMMARY_LIMIT, CheckResult
from lightning_recipes.harness import Harness as CheckContext
from lightning_recipes.harness import first_tensor
from lightning_recipes.harness.batches import Key, batch_size_of

__all__ = ["EvalModeCheck"]

# Layers whose output depends on train()/eval(): reported for information, never flagged.
_MODE_DEPENDENT: tuple[type[nn.Module], ...] = (
    nn.modules.dropout._DropoutNd,
    nn.modules.batchnorm._BatchNorm,
    nn.modules.instancenorm._InstanceNorm,
)

Record = tuple[str, str, Tensor | None, Tensor | None]  # (name, class name, first input, first output)


class EvalModeCheck(SanityCheck):
    """What validation reports is what the model does: in ``eval()`` the same input gives the same output,
    and a forward pass changes no state.

    Two ``no_grad`` passes of the first samples under different seeds must agree within ``rtol`` (else
    ``fail``, naming the first module whose output differs); every parameter and buffer must be unchanged
    (running statistics updated in eval, a counter buffer). Mode-dependent layers are listed in
    ``details["mode_dependent_layers"]``. The output is :meth:`CheckContext.batch_output`.

    Cost: two forward passes on ``num_samples`` samples with per-module hooks; a checksum of each parameter.

    Args:
        num_samples: Samples of the first training batch used.
        rtol: Relative tolerance: outputs differing by more than ``rtol`` x their largest magnitude (plus
            ``1e-6``) differ. GPU kernels with atomics can differ by ~1e-6 relative run to run.

    Raises:
        ValueError: If ``num_samples < 1`` or ``rtol`` is not in (0, 1).

    Example:
        >>> from lightning_recipes.checks import CheckContext
        >>> from lightning_recipes.testing import TinyClassifier, random_classification_loader
        >>> result = EvalModeCheck().run(CheckContext(TinyClassifier(), random_classification_loader()))
        >>> result.status
        'pass'
    """

    name = "eval_mode"

    def __init__(
        self,
        num_samples: int = 8,
        rtol: float = 1e-4,
        *,
        on_fail: Literal["raise", "warn"] = "raise",
        input_key: Key = None,
        target_key: Key = None,
        time_budget: TimeBudget = "default",
    ) -> None:
        super().__init__(on_fail=on_fail, input_key=input_key, target_key=target_key, time_budget=time_budget)
        check_int("num_samples", num_samples, minimum=1)
        check_in_range("rtol", rtol, 0, 1, low_open=True, high_open=True)
        self.num_samples = num_samples
        self.rtol = rtol

    @override
    def check(self, context: CheckContext) -> CheckResult:
        batch, _ = first_samples(context, self.num_samples)
        model = context.copy_model()
        model.eval()
        params_before = _checksums(model)
        buffers_before = {name: b.detach().clone() for name, b in model.named_buffers()}
        (out_a, records_a), (out_b, records_b) = (
            self._observe(context, model, batch, context.seed + offset) for offset in (1, 2)
        )
        changed = [n for n, c in _checksums(model).items() if not torch.equal(c, params_before[n])]
        changed += [
            n
            for n, b in model.named_buffers()
            if n not in buffers_before or not _same(b, buffers_before[n], 0.0)
        ]
        culprit, first_input = self._localise(records_a, records_b)
        details: dict[str, Any] = {
            "mode_dependent_layers": _mode_dependent_layers(model),
            "samples": batch_size_of(batch, context.input_key),
            "changed_state": changed,
            "outputs_equal": _same(out_a, out_b, self.rtol),
            "max_difference": _max_difference(out_a, out_b),
            "random_module": culprit,
            "first_differing_input": first_input,
        }
        if changed:
            return CheckResult(
                self.name,
                "fail",
                f"a forward pass in eval() changed the model's state: {listed([f'`{n}`' for n in changed])}",
                details,
                action="Update running statistics, counters and caches only under `if self.training:`.",
            )
        if culprit is not None:
            where = f"`{culprit[0]}` ({culprit[1]})" if culprit[0] else f"its own forward ({culprit[1]})"
            if first_input is not None and _inside(first_input[0], culprit[0]):
                where += f", before `{first_input[0]}`"
            return CheckResult(
                self.name,
                "fail",
                f"eval() gave different results on two seeds ({details['max_difference']:.2g} apart): "
                f"{where} is random"[:SUMMARY_LIMIT],
                details,
                action="Pass training=self.training to F.dropout; guard noise and masking by self.training.",
            )
        return CheckResult(
            self.name,
            "pass",
            "eval() is deterministic and stateless: two passes with different seeds agree, no state changed",
            details,
        )

    def _observe(
        self, context: CheckContext, model: pl.LightningModule, batch: Any, seed: int
    ) -> tuple[Tensor, list[Record]]:
        """One eval pass under a fresh seed: the output and every module call's first input and output."""
        records: list[Record] = []
        _seed_everything(seed)
        with torch.no_grad(), _recording(model, records):
            output = model_output(context, model, batch)
        # forward(x, lengths): the first try raised before any record; the step's records follow
        return output.detach().clone(), records

    def _localise(
        self, records_a: list[Record], records_b: list[Record]
    ) -> tuple[tuple[str, str] | None, tuple[str, str] | None]:
        """The innermost module that got equal inputs on both passes and yet gave a different output or
        passed different values to a submodule; and the first module that got different inputs."""
        if [r[0] for r in records_a] != [r[0] for r in records_b]:
            return None, None  # data-dependent control flow: compare the final outputs only
        differs: list[tuple[str, str, bool, bool]] = []  # (name, kind, inputs differ, output differs)
        for (name, kind, in_a, out_a), (_, _, in_b, out_b) in zip(records_a, records_b, strict=True):
            in_differs = in_a is not None and in_b is not None and not _same(in_a, in_b, self.rtol)
            out_differs = out_a is not None and out_b is not None and not _same(out_a, out_b, self.rtol)
            differs.append((name, kind, in_differs, out_differs))
        first_input = next(((name, kind) for name, kind, d_in, _ in differs if d_in), None)
        for name, kind, d_in, d_out in differs:  # hooks fire when a call ends: innermost first
            if d_in:
                continue
            inner = any(
                _inside(other, name) and other != name and (o_in or o_out)
                for other, _, o_in, o_out in differs
            )
            if d_out or inner:
                return (name, kind), first_input
        return None, first_input


@contextmanager
def _recording(model: nn.Module, records: list[Record]) -> Generator[None, None, None]:
    def hook(name: str, kind: str) -> Callable[..., None]:
        def record(_module: nn.Module, args: Any, kwargs: Any, output: Any) -> None:
            inputs = first_tensor(list(args)) if args else None
            if inputs is None and isinstance(kwargs, Mapping):
                inputs = first_tensor(list(kwargs.values()))
            out = first_tensor(output)
            records.append(
                (
                    name,
                    kind,
                    None if inputs is None else inputs.detach().clone(),
                    None if out is None else out.detach().clone(),
                )
            )

        return record

    handles = []
    for name, module in model.named_modules():
        handles.append(module.register_forward_hook(hook(name, type(module).__name__), with_kwargs=True))
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()


def _inside(name: str, parent: str) -> bool:
    return parent == "" or name == parent or name.startswith(parent + ".")


def _seed_everything(seed: int) -> None:
    """Different RNG streams for the two passes (``SanityCheck.run`` restores the caller's states)."""
    torch.manual_seed(seed)
    np.random.seed(seed)
    random.seed(seed)


def _same(a: Tensor, b: Tensor, rtol: float) -> bool:
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if not (torch.is_floating_point(a) or torch.is_complex(a)):
        return torch.equal(a, b)
    if rtol == 0.0:
        return torch.equal(a.nan_to_num(), b.nan_to_num())
    scale = float(a.abs().nan_to_num().max()) if a.numel() else 0.0  # sync: once per compared tensor
    return bool(torch.allclose(a, b, rtol=0.0, atol=rtol * scale + 1e-6, equal_nan=True))


def _max_difference(a: Tensor, b: Tensor) -> float:
    if a.shape != b.shape or a.numel() == 0:
        return float("inf") if a.shape != b.shape else 0.0
    return float((a.double() - b.double()).abs().nan_to_num().max())  # sync: once


def _checksums(model: nn.Module) -> dict[str, Tensor]:
    """A float64 checksum per parameter (sum and position-weighted sum): no copy of the weights."""
    sums = {}
    for name, param in model.named_parameters():
        flat = param.detach().flatten().double()
        weights = torch.arange(1, flat.numel() + 1, device=flat.device, dtype=torch.float64) / flat.numel()
        sums[name] = torch.stack([flat.sum(), (flat * weights).sum()])
    return sums


def _mode_dependent_layers(model: nn.Module) -> dict[str, int]:
    counts: Counter[str] = Counter()
    for module in model.modules():
        if isinstance(module, _MODE_DEPENDENT):
            if isinstance(module, nn.modules.instancenorm._InstanceNorm) and not module.track_running_stats:
                continue
            counts[type(module).__name__] += 1
    return dict(counts)
