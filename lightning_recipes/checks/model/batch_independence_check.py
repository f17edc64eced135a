"""Check that a sample's output depends on that sample only, not on the others or on its slot in the batch."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import suppress
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor
from typing_extensions import Unpack, override

from lightning_recipes._stats import NoiseVerdict, judge_deviation
from lightning_recipes._validation import check_in_range, check_int
from lightning_recipes.checks._probe import first_of, keeping_statistics, until_it_reacts
from lightning_recipes.checks.base import CheckOptions, SanityCheck, perturbed
from lightning_recipes.checks.report import CheckInconclusive, CheckResult, CheckSkipped
from lightning_recipes.harness import CannotRunOnCopy, is_shuffled
from lightning_recipes.harness import Harness as CheckContext
from lightning_recipes.harness.batches import entries, one_row_per_sample, replace_entries
from lightning_recipes.harness.forward_capture import step_output
from lightning_recipes.harness.isolation import seeded
from lightning_recipes.harness.walk import map_tensors, tensors_of

__all__ = ["BatchIndependenceCheck"]


class BatchIndependenceCheck(SanityCheck):
    """The output depends on what the task says: output ``i`` on input ``i`` only, not on its slot (the guide
    has the bounds). Cost: four forwards on ``num_samples`` samples, then three eval passes.

    Args:
        num_samples: Samples of the first batch used (at least 2).
        rtol: Relative tolerance: a cross-sample effect above ``rtol`` x the own-sample effect is mixing.

    Example:
        >>> from lightning_recipes.checks import CheckContext
        >>> from lightning_recipes.testing import TinyTransformerLM, random_token_loader
        >>> loader = random_token_loader(batch_size=4, seq_len=8)
        >>> context = CheckContext(TinyTransformerLM(n_layers=1), loader)
        >>> result = BatchIndependenceCheck().run(context)
        >>> result.status, result.details["method"]
        ('pass', 'perturbation')
    """

    name = "batch_independence"

    def __init__(
        self,
        num_samples: int = 8,
        rtol: float = 1e-4,
        **options: Unpack[CheckOptions],
    ) -> None:
        super().__init__(**options)
        check_int("num_samples", num_samples, minimum=2)
        check_in_range("rtol", rtol, 0, 1, low_open=True, high_open=True)
        self.num_samples, self.rtol = num_samples, rtol

    @override
    def check(self, context: CheckContext) -> CheckResult:
        sample = context.train_batches(1)[0]
        inputs = context.split(sample)[0]
        if inputs is None or inputs.ndim == 0:  # an input of several tensors ((x, mask), a dict): whole rows
            if len({int(t.shape[0]) for t in tensors_of(sample) if t.ndim > 0}) != 1:
                raise CheckSkipped("cannot find the input tensor in the batch; pass `input_key`.")
            inputs = None  # the whole batch: its padding is sized to its longest sample, which a cut may drop
        else:
            sample = first_of(context, sample, self.num_samples)
            inputs = context.split(sample)[0]
        count = int(inputs.shape[0]) if inputs is not None else int(next(iter(tensors_of(sample))).shape[0])
        if count < 2:
            raise CheckSkipped(f"needs a batch of at least 2 samples, the first batch has {count}.")
        if not one_row_per_sample(sample, count):  # rows of one structure (graph nodes) may read each other
            raise CheckSkipped("the batch is not one row per sample (an edge list, packed data beside it).")
        moved_slot = _slot_mover(context, sample, inputs.detach() if inputs is not None else None, count)
        model = context.copy_model()
        if mixed := _targets_mix(context, model, sample, count, self.rtol):
            summary = f"loss targets mix across the batch: moving sample 0's batch[{mixed['entry']}] moved "
            summary += f"{mixed['rows_moved']} of {count - 1} other {mixed['function']} losses"
            action = "Scale targets with statistics of the training set (buffers), not of each batch."
            return self.verdict("fail", summary, {"method": "target perturbation", **mixed}, action)
        probes = sorted({0, count - 1})
        route, error = "forward", None
        for route in ("forward", "training_step"):  # forward(x, mask) cannot take the input alone: the step

            def output(batch: Any, route: str = route) -> Tensor:
                if route == "forward":
                    return context.batch_output(model, batch)
                return step_output(context, model, batch)

            def measure(output: Callable[[Any], Tensor] = output) -> tuple[list[list[float]], list[float]]:
                norms = keeping_statistics(model, lambda: seeded(context.seed, output, sample))
                for norm in norms:  # batch statistics are legitimate: such modules run in eval
                    norm.eval()
                try:
                    return _perturbation_test(context, output, sample, count, probes, moved_slot)
                finally:
                    for norm in norms:
                        norm.train()

            try:
                found, steps = until_it_reacts(context, model, sample, measure, lambda f: max(f[1]) > 0)
                break
            except (CheckSkipped, CheckInconclusive, CannotRunOnCopy):
                raise
            except Exception as err:
                error = error or err
        else:
            alone = f"neither forward nor training_step runs on {count} samples with the input alone"
            raise CheckSkipped(f"{alone} ({type(error).__name__}: {str(error)[:24]}); pass `input_key=`.")
        cross, own = found
        pairs = [(p, j) for p in range(len(probes)) for j in range(count)]
        p, j = max(pairs, key=lambda t: cross[t[0]][t[1]])
        largest, scale = cross[p][j], max(own)
        details: dict[str, Any] = {
            "method": "perturbation",
            "samples": count,
            "probes": probes,
            "rtol": self.rtol,
            "training_steps_first": steps,
            "output_route": route,
            "max_cross_effect": largest,
            "own_effect": own,
            "measured": largest / scale if scale > 0 else 0.0,
        }
        if scale == 0:
            raise CheckSkipped("the output does not react to its own input: independence is not measurable.")
        if largest > self.rtol * scale:
            summary = f"samples mix across the batch: sample {j} moves with sample {probes[p]} "
            summary += f"({details['measured']:.2g} of a sample's own effect, expected 0)"
            action = "Look for a reshape/view over the batch axis or a mean/softmax/attention over dim 0."
            if is_shuffled(context.train_dataloader) is False:  # rows in order: a batch may be one sequence
                summary = (
                    f"sample {j} moves with sample {probes[p]}, not judged: the loader serves rows in order"
                )
                return self.verdict("inconclusive", summary, details, "If rows are independent: " + action)
            return self.verdict("fail", summary, details, action)
        if mixed := _mixing(context, model, sample, moved_slot(0), count, self.rtol):
            summary = f"{mixed['function']}'s per-sample losses mix: sample 0's input moved "
            summary += f"{mixed['rows_moved']} of {count - 1} others' (the output did not)"
            action = "Look for a softmax or normalisation over dim 0 between the model's output and the loss."
            ordered = is_shuffled(context.train_dataloader) is False  # a batch may be one list or sequence
            return self.verdict("inconclusive" if ordered else "fail", summary, details | mixed, action)
        independent = f"no cross-sample effect in {count} samples"
        try:
            with perturbed("the batch rotated by one slot"):
                verdict = _permutation_test(context, model, output, sample, count, details)
        except CheckInconclusive as abstained:  # e.g. pack_padded_sequence(enforce_sorted=True)
            details["permutation"] = {"status": "not run", "why": str(abstained)}
            return self.verdict("pass", f"{independent}; the rotated batch could not run", details)
        if verdict is None:
            return self.verdict("pass", f"{independent}; no batch-first output to permute", details)
        moved = f"output moved {verdict.deviation:.2g} (tolerance {verdict.tolerance:.2g})"
        if verdict.status == "fail":
            summary = f"outputs depend on the sample's slot: rotating the batch in eval, the {moved}"
            action = "Look for a parameter indexed by batch slot, or positions from arange(x.shape[0])."
            return self.verdict("fail", summary, details, action)
        if verdict.status == "inconclusive":
            summary = f"{independent}, but rotating the batch: the {moved}"
            return self.verdict("inconclusive", summary, details)
        return self.verdict("pass", f"{independent}; rotating the batch rotates the outputs", details)


def _targets_mix(
    context: CheckContext, model: Any, sample: Any, count: int, rtol: float
) -> dict[str, Any] | None:
    """A float target entry whose far move in sample 0's row moves most other losses: batch statistics."""
    with suppress(Exception), torch.no_grad():  # the user's step on a moved entry: no verdict from this test
        calls = seeded(context.seed, context.loss_calls, model, sample)
        raw = dict((k, v) for k, _, v in entries(sample))
        for key in dict.fromkeys(c.target_key for c in calls if not c.target_from_model):
            if key is None or key not in raw or not _rows(count, raw[key]):
                continue
            moved = raw[key].clone()
            moved[0] += 10 * (raw[key].abs().max() + 1)
            if mixed := _mixing(context, model, sample, replace_entries(sample, {key: moved}), count, rtol):
                return mixed | {"entry": key}
    return None


def _mixing(
    context: CheckContext, model: Any, sample: Any, changed: Any, count: int, rtol: float
) -> dict[str, Any] | None:
    """The first loss call whose per-sample losses move in 3/4 of the other samples on ``changed`` (guide)."""
    norms = keeping_statistics(model, lambda: seeded(context.seed, context.loss_calls, model, sample))
    for norm in norms:
        norm.eval()
    try:
        with suppress(Exception), torch.no_grad():
            base, moved, again = (
                seeded(context.seed, context.loss_calls, model, b) for b in (sample, changed, sample)
            )
            for calls in zip(base, moved, again):
                call = calls[0]
                if call.target is None or call.target_from_model or count in call.output.shape[1:]:
                    continue  # no target, a teacher's, or an (N, N) output (pairwise by design): not judged
                kwargs = {**call.kwargs, "reduction": "none"}
                rows = [getattr(F, call.function)(c.output, c.target, **kwargs) for c in calls]
                if not _rows(count, *rows) or rows[0].numel() > call.output.numel():
                    continue  # (N, 1) broadcast against (N,) pairs rows: `loss`'s `rows` judges that
                delta = [(r - rows[0]).abs().reshape(count, -1).sum(1) for r in rows[1:]]
                shift = (delta[0] - delta[1]).clamp_min(0)
                moved_rows = int((shift[1:] > rtol * shift[0]).sum()) if shift[0] > 0 else 0  # sync: once
                if moved_rows >= 0.75 * (count - 1):  # mixup moves one partner; batch statistics all
                    return {"function": call.function, "rows_moved": moved_rows}
    finally:
        for norm in norms:
            norm.train()
    return None


def _rows(count: int, *tensors: Tensor) -> bool:
    """Whether each tensor is a float batch of ``count >= 3`` rows."""
    return count >= 3 and all(t.is_floating_point() and t.ndim and len(t) == count for t in tensors)


def _slot_mover(
    context: CheckContext, sample: Any, inputs: Tensor | None, count: int
) -> Callable[[int], Any]:
    """``sample`` with other content in one slot: another sample's input, or (``inputs`` None: an input of
    several tensors) the next sample's whole row, every entry of it."""

    def moved(probe: int) -> Any:
        if inputs is not None:
            changed = inputs.clone()
            changed[probe] = _other_content(inputs, probe)
            return context.with_inputs(sample, changed)
        other = (probe + 1) % count

        def swap(t: Tensor) -> Tensor:
            if t.ndim == 0 or t.shape[0] != count:
                return t
            t = t.clone()
            t[probe] = t[other]
            return t

        return map_tensors(sample, swap)

    return moved


def _perturbation_test(
    context: CheckContext,
    output: Callable[[Any], Tensor],
    sample: Any,
    count: int,
    probes: list[int],
    moved_slot: Callable[[int], Any],
) -> tuple[list[list[float]], list[float]]:
    """The effect of a new input in each probe's slot on every sample (``[p][j]``), and each probe's own."""
    with torch.no_grad():
        base = seeded(context.seed, output, sample)
        if base.ndim == 0 or base.shape[0] != count:
            raise CheckSkipped(f"the output {list(base.shape)} is not batch-first (no per-sample rows).")
        if base.is_floating_point() and bool(torch.isnan(base).any()):  # sync: once (-inf: a masked logit)
            raise CheckSkipped(f"the output on these {count} samples holds NaN: no effect is measurable.")
        rows = []
        for probe in probes:
            with perturbed("another sample's input in one slot"):
                moved = seeded(context.seed, output, moved_slot(probe))
            rows.append(_per_sample(moved - base))
        drift = _per_sample(seeded(context.seed, output, sample) - base)  # a forward that changes state
        table = (torch.stack(rows) - drift).clamp_min(0).tolist()  # sync: once
    own = [row[probe] for row, probe in zip(table, probes)]
    for row, probe in zip(table, probes):
        row[probe] = 0.0  # a sample's own effect is not a cross-sample one
    return table, own


def _per_sample(delta: Tensor) -> Tensor:
    delta = delta.float().abs()
    return delta.flatten(1).amax(dim=1) if delta.ndim > 1 else delta


def _other_content(inputs: Tensor, probe: int) -> Tensor:
    """Replacement content for sample ``probe``: another sample that differs, or a shifted copy."""
    for offset in range(1, len(inputs)):
        candidate = inputs[(probe + offset) % len(inputs)]
        if not torch.equal(candidate, inputs[probe]):
            return candidate
    if torch.is_floating_point(inputs):
        return inputs[probe] + 1.0
    return torch.where(inputs[probe] > 0, inputs[probe] - 1, inputs[probe] + 1)


def _permutation_test(
    context: CheckContext, model: Any, output: Callable[[Any], Tensor], batch: Any, count: int, details: dict
) -> NoiseVerdict | None:
    """Eval, no grad: a batch rotated by one slot must give the rotated outputs, beyond seed noise."""
    order = torch.roll(torch.arange(count), 1)  # slot i gets sample i - 1: every sample moves
    rotated = map_tensors(batch, lambda t: t[order.to(t.device)] if t.ndim > 0 and t.shape[0] == count else t)
    model.eval()  # the copy's last passes: it is not trained again
    with torch.no_grad():
        passes = [(batch, 0), (batch, 1), (rotated, 0)]
        a, b, p = (seeded(context.seed + s, output, x).detach() for x, s in passes)
    details["permutation"] = {"order": order.tolist()}
    if a.ndim == 0 or a.shape[0] != count or not a.shape == b.shape == p.shape:
        return None
    expected = a[order.to(a.device)]
    per_sample = (p.double() - expected.double()).abs().nan_to_num().reshape(count, -1).amax(1)
    details["worst_sample"] = int(per_sample.argmax())
    noise = float((a.double() - b.double()).abs().nan_to_num().max()) if a.numel() else 0.0
    verdict = judge_deviation(float(per_sample.max()), noise, float(a.abs().max()), a.dtype)
    fields = ("status", "deviation", "noise", "tolerance")
    details["permutation"]["output"] = {k: getattr(verdict, k) for k in fields}
    return verdict
