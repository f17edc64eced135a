"""Check that no sample's output depends on another sample of the batch."""

from __future__ import annotations

import contextlib
from collections.abc import Generator
from typing import Any, Literal

import lightning.pytorch as pl
import torch
from lightning.pytorch.utilities.model_helpers import is_overridden
from torch import Tensor, nn
from typing_extensions import override

from lightning_recipes._validation import check_in_range, check_int
from lightning_recipes.checks._budget import out_of_time
from lightning_recipes.checks.base import SanityCheck, TimeBudget
from lightning_recipes.checks.model._permutation import permutation_test
from lightning_recipes.checks.report import CheckResult, CheckSkipped
from lightning_recipes.harness import CannotRunOnCopy
from lightning_recipes.harness import Harness as CheckContext
from lightning_recipes.harness.batches import Key, slice_batch
from lightning_recipes.harness.forward_capture import step_output

__all__ = ["BatchIndependenceCheck"]

_BATCH_NORMS = (nn.modules.batchnorm._BatchNorm,)  # every BatchNorm*d, SyncBatchNorm and the lazy variants


class BatchIndependenceCheck(SanityCheck):
    """Verify that output ``i`` depends on input ``i`` only, and not on the slot it sits in.

    Float inputs: the gradient of ``output[i].sum()`` w.r.t. every other input must be zero; token inputs:
    changing input ``j`` must leave the other outputs put. Then, in eval, the batch rotated by one slot must
    give rotated outputs and losses, within ``4 x`` the noise of two seeded passes (``fail`` above ``10 x``).
    BatchNorm runs in eval mode; outputs come from ``forward`` or ``training_step``
    (``details["output_route"]``).

    Cost: one forward and ``len(probes)`` backward passes (or two forwards) on ``num_samples`` samples, plus
    three eval passes and three ``training_step`` calls for the permutation test.

    Args:
        num_samples: Samples of the first batch used (at least 2).
        rtol: Relative tolerance: a cross-sample effect above ``rtol`` x the own-sample effect is mixing.

    Raises:
        ValueError: If ``num_samples < 2`` or ``rtol`` is not in (0, 1).

    Example:
        >>> from lightning_recipes.checks import CheckContext
        >>> from lightning_recipes.testing import TinyTransformerLM, random_token_loader
        >>> model = TinyTransformerLM(n_layers=1)
        >>> context = CheckContext(model, random_token_loader(batch_size=4, seq_len=8))
        >>> result = BatchIndependenceCheck().run(context)
        >>> result.status, result.details["method"]
        ('pass', 'perturbation')
    """

    name = "batch_independence"
    max_attempts = 3  # a look at init, then after one and two optimizer steps (zero-initialised heads)

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
        check_int("num_samples", num_samples, minimum=2)
        check_in_range("rtol", rtol, 0, 1, low_open=True, high_open=True)
        self.num_samples = num_samples
        self.rtol = rtol
        self._via_step = False

    @override
    def check(self, context: CheckContext) -> CheckResult:
        batch = context.train_batches(1)[0]
        inputs, _ = context.split(batch)
        if inputs is None or inputs.ndim == 0:
            raise CheckSkipped("cannot find the input tensor in the batch; pass `input_key`.")
        count = min(int(inputs.shape[0]), self.num_samples)
        if count < 2:
            raise CheckSkipped(f"needs a batch of at least 2 samples, the first batch has {inputs.shape[0]}.")
        sample = slice_batch(batch, count, int(inputs.shape[0]))  # every per-sample tensor: masks, labels
        inputs = inputs[:count].detach()
        model = context.copy_model()
        probes = sorted({0, count - 1})
        optimizers = None
        self._via_step = False  # forward(x) alone first; forward(x, mask) is observed through training_step
        for attempt in range(self.max_attempts):
            try:
                found, method = self._measure(context, model, sample, inputs, probes)
            except (CheckSkipped, CannotRunOnCopy):
                raise
            except Exception as err:  # forward cannot take the input tensor alone: try it through the step
                if self._via_step or not is_overridden("forward", model, pl.LightningModule):
                    return self._forward_failed(err, inputs, context, model)
                self._via_step = True
                try:
                    found, method = self._measure(context, model, sample, inputs, probes)
                except (CheckSkipped, CannotRunOnCopy):
                    raise
                except Exception:  # the step cannot run on the sliced batch either: say what to pass
                    self._via_step = False
                    return self._forward_failed(err, inputs, context, model)
            if max(found[1]) > 0 or attempt == self.max_attempts - 1 or not model.automatic_optimization:
                break
            # A zero-initialised output layer hides every input at init: train the copy a step, look again.
            if optimizers is None:
                optimizers = context.build_optimizers(model).optimizers
            context.optimization_step(model, optimizers, batch)
        assert found is not None  # the perturbation test always measures
        leaks, own = found
        details: dict[str, Any] = {
            "method": method,
            "samples": count,
            "probes": probes,
            "rtol": self.rtol,
            "training_steps_first": attempt,
            "output_route": "training_step" if self._via_step else "forward",
        }
        # leaks[p][j]: effect of input j on output p (gradient) or of input p on output j (perturbation)
        worst = max(
            ((p, j, leaks[p][j]) for p in range(len(probes)) for j in range(count)), key=lambda t: t[2]
        )
        scale = max(own) if own else 0.0
        details["measured"] = worst[2] / scale if scale > 0 else 0.0
        details["max_cross_effect"], details["own_effect"] = worst[2], own
        if scale == 0:
            raise CheckSkipped(
                "the output does not react to its own input (zero gradient and no change under "
                "perturbation), so independence cannot be measured; see the input_independence check."
            )
        if worst[2] <= self.rtol * scale:
            independent = (
                f"outputs depend only on their own sample ({method} test on {count} samples: largest "
                f"cross-sample effect {worst[2]:.3g}, {details['measured']:.2g} of the own-sample effect)"
            )
            return self._equivariance(context, model, sample, count, independent, details)
        probe = probes[worst[0]]
        if method == "gradient":
            pair = f"output {probe} depends on input {worst[1]}"
        else:
            pair = f"changing input {probe} changed output {worst[1]}"
        details["pair"] = pair
        return CheckResult(
            self.name,
            "fail",
            f"samples mix across the batch: {pair} (effect {worst[2]:.3g} = {details['measured']:.2g} of the "
            "own-sample effect; expected 0). Likely causes: a view/reshape over the wrong dimensions (e.g. "
            "`x.view(-1, batch)` or a transpose before `view`), a mean/sum/softmax over dim 0, attention "
            "over the batch axis (batch_first mismatch), a per-batch normalisation written by hand. "
            "BatchNorm is legitimate and was evaluated in eval mode. Try: print tensor shapes through "
            "forward; use `x.flatten(1)` instead of `x.view(-1, ...)`.",
            details,
        )

    def _forward_failed(
        self, err: Exception, inputs: Tensor, context: CheckContext, model: nn.Module
    ) -> CheckResult:
        where = "the default input" if context.input_key is None else f"batch[{context.input_key!r}]"
        if not is_overridden("forward", model, pl.LightningModule):
            return CheckResult(
                self.name,
                "skip",
                f"skipped: `training_step` raised {type(err).__name__} on the first {len(inputs)} samples "
                f"of the batch with {where} (shape {list(inputs.shape)}) replaced; this check runs it to "
                "observe the wrapped model's output sample by sample. If the input is another tensor of the "
                "batch, pass `input_key=`; if the step needs the whole batch, leave this check out: "
                "`checks=[...]` without \"batch_independence\". The error is in details['error'].",
                {"error": f"{type(err).__name__}: {err}", "input_shape": list(inputs.shape)},
            )
        return CheckResult(
            self.name,
            "skip",
            f"skipped: the module's forward raised {type(err).__name__} when called with the input tensor "
            f"alone ({where}, shape {list(inputs.shape)}). This check calls `model(inputs)` with that one "
            "tensor and compares the outputs sample by sample. If forward takes a different tensor of the "
            "batch, pass `input_key=` (on the check, `Preflight` or `preflight`); if it needs several (a "
            "mask, a dict of "
            'tensors), leave this check out: `checks=[...]` without "batch_independence". The error is in '
            "details['error'].",
            {"error": f"{type(err).__name__}: {err}", "input_shape": list(inputs.shape)},
        )

    def _gradient_test(
        self, context: CheckContext, model: pl.LightningModule, sample: Any, inputs: Tensor, probes: list[int]
    ) -> tuple[list[list[float]], list[float]] | None:
        x = inputs.clone().requires_grad_(True)
        output = self._output(context, model, context.with_inputs(sample, x))
        self._check_batch_dim(output, len(inputs))
        rows, own = [], []
        for probe in probes:
            (grad,) = torch.autograd.grad(
                output[probe].float().sum(), x, retain_graph=True, allow_unused=True
            )
            if grad is None:
                return None
            per_sample = grad.detach().abs().flatten(1).amax(dim=1).float()
            rows.append(per_sample)
        table = torch.stack(rows).tolist()  # sync: once
        for index, probe in enumerate(probes):
            own.append(table[index][probe])
            table[index][probe] = 0.0
        if max(own) == 0:
            return None  # no gradient reaches the inputs: fall back to perturbation
        return table, own

    def _perturbation_test(
        self, context: CheckContext, model: pl.LightningModule, sample: Any, inputs: Tensor, probes: list[int]
    ) -> tuple[list[list[float]], list[float]]:
        count = len(inputs)
        with torch.no_grad():
            base = self._seeded_forward(context, model, sample, inputs)
            self._check_batch_dim(base, count)
            rows, own_list = [], []
            for probe in probes:
                changed = inputs.clone()
                changed[probe] = _other_content(inputs, probe)
                delta = (self._seeded_forward(context, model, sample, changed) - base).float().abs()
                per_sample = delta.flatten(1).amax(dim=1) if delta.ndim > 1 else delta
                rows.append(per_sample)
            table = torch.stack(rows).tolist()  # sync: once
        for index, probe in enumerate(probes):
            own_list.append(table[index][probe])
            table[index][probe] = 0.0
        return table, own_list

    def _seeded_forward(
        self, context: CheckContext, model: pl.LightningModule, sample: Any, inputs: Tensor
    ) -> Tensor:
        torch.manual_seed(context.seed)  # identical dropout masks in the passes being compared
        return self._output(context, model, context.with_inputs(sample, inputs))

    def _output(self, context: CheckContext, model: pl.LightningModule, batch: Any) -> Tensor:
        """The model's output for ``batch``: ``forward(inputs)``, or (``forward`` takes more than the input,
        e.g. ``forward(x, lengths)``) its output observed while ``training_step`` runs."""
        if not self._via_step:
            return context.batch_output(model, batch)
        return step_output(context, model, batch)

    def _measure(
        self, context: CheckContext, model: pl.LightningModule, sample: Any, inputs: Tensor, probes: list[int]
    ) -> tuple[tuple[list[list[float]], list[float]], str]:
        with _batch_norms_in_eval(model):
            found = None
            if torch.is_floating_point(inputs):
                found = self._gradient_test(context, model, sample, inputs, probes)
            method = "gradient" if found is not None else "perturbation"
            if found is None:
                found = self._perturbation_test(context, model, sample, inputs, probes)
        return found, method

    def _equivariance(
        self,
        context: CheckContext,
        model: pl.LightningModule,
        sample: Any,
        count: int,
        independent: str,
        details: dict[str, Any],
    ) -> CheckResult:
        """The permutation test, after the independence test passed: its verdict is the check's."""
        if out_of_time():
            details["permutation"] = {"status": "not run: out of time"}
            return CheckResult(
                self.name,
                "pass",
                f"{independent}. The permutation test did not run: the time budget ended first.",
                details,
            )
        try:
            outcome = permutation_test(
                context, model, sample, count, lambda m, b: self._output(context, m, b)
            )
        except (CheckSkipped, CannotRunOnCopy):
            raise
        except Exception as err:  # e.g. pack_padded_sequence(enforce_sorted=True) refuses a reordered batch
            details["permutation"] = {"status": f"not run: {type(err).__name__}: {err}"}
            return CheckResult(
                self.name,
                "pass",
                f"{independent}. The permutation test could not run: the step raised {type(err).__name__} "
                "on the reordered batch (a step that needs its samples in a given order, e.g. sorted by "
                "length); see details['permutation'].",
                details,
            )
        details["permutation"] = outcome.details()
        worst = outcome.worst()
        if worst is None:
            return CheckResult(
                self.name,
                "pass",
                f"{independent}. Permutation test not applicable: neither a batch-first output nor a "
                "per-element loss could be compared.",
                details,
            )
        quantity, verdict = worst
        measured = f"{quantity}: {verdict.describe()}"
        if outcome.status == "pass":
            return CheckResult(
                self.name,
                "pass",
                f"{independent}; in eval() permuting the batch permutes the outputs ({measured}).",
                details,
            )
        where = f" (sample {outcome.worst_sample} of the permuted batch)" if quantity == "output" else ""
        if outcome.status == "inconclusive":
            return CheckResult(
                self.name,
                "inconclusive",
                f"{independent}, but in eval() permuting the batch changed the {quantity}{where} slightly: "
                f"{measured}: above float noise, too small to call a bug. Try: `num_samples=` larger, "
                "float64 (`model.double()` on a copy), or the check on CPU, to tell float noise from a "
                "per-slot effect.",
                details,
            )
        return CheckResult(
            self.name,
            "fail",
            f"outputs depend on the sample's slot in the batch: in eval() the batch rotated by one slot gave "
            f"{quantity}s that are not the rotated originals{where} ({measured}; expected equal up to float "
            "noise). Likely causes: a parameter or buffer indexed by batch position (a per-slot bias "
            "`self.bias[: x.shape[0]]`), positions taken along dim 0 (`arange(x.shape[0])` or a positional "
            "table indexed by the batch axis: a batch_first mismatch), batch statistics used in eval "
            "(BatchNorm with track_running_stats=False, a hand-written normalisation over dim 0). Try: print "
            "tensor shapes through forward; index positions with `x.shape[1]` for batch-first data.",
            details,
        )

    @staticmethod
    def _check_batch_dim(output: Tensor, count: int) -> None:
        if output.ndim == 0 or output.shape[0] != count:
            raise CheckSkipped(
                f"the forward output has shape {list(output.shape)}, whose first dimension is not the batch "
                f"({count}); cannot tell which output belongs to which sample."
            )


def _other_content(inputs: Tensor, probe: int) -> Tensor:
    """Replacement content for sample ``probe``: another sample that differs, or a shifted copy."""
    for offset in range(1, len(inputs)):
        candidate = inputs[(probe + offset) % len(inputs)]
        if not torch.equal(candidate, inputs[probe]):
            return candidate
    if torch.is_floating_point(inputs):
        return inputs[probe] + 1.0
    return torch.where(inputs[probe] > 0, inputs[probe] - 1, inputs[probe] + 1)


@contextlib.contextmanager
def _batch_norms_in_eval(model: nn.Module) -> Generator[None, None, None]:
    norms = [m for m in model.modules() if isinstance(m, _BATCH_NORMS) and m.training]
    for module in norms:
        module.eval()
    try:
        yield
    finally:
        for module in norms:
            module.train()
