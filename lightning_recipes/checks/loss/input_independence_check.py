"""Check that held-out loss is lower with the model's own inputs than with the input-target pairs broken."""

from __future__ import annotations

import itertools
import math
from collections.abc import Container
from contextlib import nullcontext
from typing import Any, NamedTuple

import torch
from torch import Tensor
from typing_extensions import Unpack, override

from lightning_recipes._stats import CONFIDENCE, Gain, held_out_gain, standard_error
from lightning_recipes._validation import check_in_range, check_int
from lightning_recipes.checks._probe import held_out_split
from lightning_recipes.checks.base import CheckOptions, SanityCheck, perturbed
from lightning_recipes.checks.report import CheckResult, CheckSkipped
from lightning_recipes.harness import Harness as CheckContext
from lightning_recipes.harness import LossRecorder, TargetSwapError, batch_entries, map_tensors
from lightning_recipes.harness.batches import batch_size_of, input_key_of, replace_entries
from lightning_recipes.harness.forward_capture import step_output
from lightning_recipes.harness.isolation import preserved_rng, seeded
from lightning_recipes.harness.loss_calls import loss_call_for, record_loss_calls

__all__ = ["InputIndependenceCheck", "LossDrop", "loss_drop"]

COPIES = ("real", "inputs_removed", "targets_permuted")

_Copies = list[tuple[Any, list[torch.optim.Optimizer]]]  # (model, its optimizers) per copy


class LossDrop(NamedTuple):
    """How far a training loss fell between its first and its last steps, against its own noise."""

    drop: float  # mean loss of the first steps minus mean loss of the last ones
    noise: float  # standard error of that difference, from the step-to-step spread of the loss
    fell: bool  # drop > 2 x noise: the model learned


def loss_drop(losses: list[Tensor] | list[float], num_batches: int) -> LossDrop:
    """Whether a loss fell by over 2 SE of its noise (each batch's first vs last visit, else the two halves).

    Example:
        >>> loss_drop([2.0, 2.2, 1.8, 2.0] * 4, num_batches=4).fell  # lr = 0: the same losses again
        False
        >>> drop = loss_drop([2.0, 2.2, 1.8, 2.0, 1.7, 1.9, 1.5, 1.7], num_batches=4)
        >>> round(drop.drop, 3), round(drop.noise, 3), drop.fell
        (0.3, 0.115, True)
    """
    values = torch.tensor([float(v) for v in losses], dtype=torch.float64)  # sync: once per value
    n = len(values)
    if n < 4 or not bool(torch.isfinite(values).all()):
        return LossDrop(0.0, math.inf, False)
    pairs = min(num_batches, n - num_batches)  # batches 0 .. pairs-1 were seen at least twice
    if pairs >= 2:
        first = values[:pairs]
        last = values[[b + num_batches * ((n - 1 - b) // num_batches) for b in range(pairs)]]
    else:
        first, last = values[: n // 2], values[n - n // 2 :]
    drop = float(first.mean() - last.mean())
    noise = math.hypot(float(standard_error(first)), float(standard_error(last)))  # Welch: SE of a difference
    return LossDrop(drop, noise, drop > 2 * noise)


def training_gain(real: list[Tensor], control: list[Tensor], blocks: int = 8) -> Gain:
    """The real copy's training-loss gain over a control's, with the noise of ``blocks`` block means."""
    pairs = torch.stack([torch.stack([r.float(), c.float()]) for r, c in zip(real, control)]).double().cpu()
    count = len(pairs) // blocks * blocks
    if count < blocks or not bool(torch.isfinite(pairs).all()):
        return Gain(math.nan, math.inf, -math.inf, math.inf)
    means = pairs[len(pairs) - count :].reshape(blocks, -1, 2).mean(1)
    return held_out_gain(means[:, 0], means[:, 1])


class InputIndependenceCheck(SanityCheck):
    """Train three copies from one init on the same batches, with real pairs, with the inputs removed and with
    the targets permuted: real inputs must do better on held-out data than both controls (the guide has the
    bounds). Logged as ``preflight/input_independence``. Cost: at most ``3 x max_steps`` steps on copies.

    Args:
        max_steps: Training steps of each copy (fixed work: the verdict does not depend on machine load).
        num_batches: Distinct training batches read (and cycled through).
        num_eval_batches: Held-out batches the copies are compared on.
        min_improvement: Relative training gain over the permuted copy a relation shows at the least.
        num_samples: Samples kept from each training batch (``None``: whole batches).

    Example:
        >>> from lightning_recipes.checks import preflight
        >>> from lightning_recipes.testing import TinyClassifier, random_classification_loader
        >>> report = preflight(TinyClassifier(lr=0.5), train_dataloaders=random_classification_loader(),
        ...                    checks=[InputIndependenceCheck()], num_threads=1)
        >>> report["input_independence"].status, report["input_independence"].details["steps"]
        ('pass', 15)
    """

    name = "input_independence"
    first_look = 15  # steps before the first comparison; then every doubling
    chunks = 4  # pieces each held-out batch is cut into: the samples of the noise estimate

    def __init__(
        self,
        max_steps: int = 120,
        num_batches: int = 32,
        num_eval_batches: int = 4,
        min_improvement: float = 0.05,
        num_samples: int | None = 32,
        **options: Unpack[CheckOptions],
    ) -> None:
        super().__init__(**options)
        check_int("max_steps", max_steps, minimum=1)
        check_int("num_batches", num_batches, minimum=1)
        check_int("num_eval_batches", num_eval_batches, minimum=1)
        check_in_range("min_improvement", min_improvement, 0, 1, high_open=True)
        check_int("num_samples", num_samples, minimum=1, optional=True)
        self.max_steps, self.num_batches, self.num_eval_batches = max_steps, num_batches, num_eval_batches
        self.min_improvement, self.num_samples = min_improvement, num_samples

    @override
    def check(self, context: CheckContext) -> CheckResult:
        context.require_automatic_optimization(context.model)
        args = self.num_batches, self.num_eval_batches, self.num_samples
        train, held_out, validation = held_out_split(context, *args)
        source = "validation" if validation else "held-out training batches"
        sizes = [batch_size_of(batch, context.keys()[0]) or 0 for batch in train]
        if min(sizes) < 2:
            raise CheckSkipped("needs batches of 2 samples or more, to give samples each other's inputs.")
        keep, swap, traced, reconstruction = self._pairing(context, train[0])
        if not keep and not any(swap):
            raise CheckSkipped("the loss reads no target from the batch (contrastive?): no pairs to break.")
        if not any(swap) and _one_target_for_all(train, keep):
            raise CheckSkipped("every sample has the same target: moving inputs among samples breaks no pair")
        chunks = [chunk for batch in held_out for chunk in _chunks(batch, context, self.chunks)]
        models = (seeded(context.seed, context.copy_model) for _ in COPIES)  # lazy: one init, in turn
        copies = [(model, context.build_optimizers(model).optimizers) for model in models]
        generator = torch.Generator().manual_seed(context.seed)
        fixed = [torch.randperm(size, generator=generator) for size in sizes]
        losses: list[list[Tensor]] = [[] for _ in COPIES]
        looks: list[dict[str, float]] = []
        step, look = 0, min(self.first_look, self.max_steps)
        while True:
            for done in range(step, look):
                index = done % len(train)
                perms = [None, torch.randperm(sizes[index], generator=generator), fixed[index]]
                self._step(context, copies, train[index], perms, done, keep, swap, losses)
            step = look
            same = torch.allclose(torch.stack(losses[0]), torch.stack(losses[2]), rtol=1e-5, atol=1e-8)
            if same and not traced:  # no loss call says the kept entries are read
                raise CheckSkipped("the loss does not read the targets kept in place (built from x?).")
            held = self._evaluate(context, copies, chunks)
            means = held.double().mean(1).tolist()
            removed, permuted = held_out_gain(held[0], held[1]), held_out_gain(held[0], held[2])
            looks.append({"step": step, **dict(zip(COPIES, means)), "gain": permuted.gain})
            fitted = training_gain(losses[0], losses[2])  # real pairs fitted faster than permuted ones?
            # an early look also needs the training gain: copies that barely differ yet differ consistently
            passed = permuted.low > 0 and removed.low > 0 and (fitted.low > 0 or step >= self.max_steps)
            if passed or step >= self.max_steps:
                break
            look = min(2 * step, self.max_steps)
        learned = loss_drop(losses[0], len(train))
        details: dict[str, Any] = {"measured": permuted.gain, "noise": permuted.noise, "steps": step}
        details |= {"held_out_loss": dict(zip(COPIES, means)), "looks": looks, "learned": learned.fell}
        details |= {"gain_over_targets_permuted": permuted._asdict(), "confidence": CONFIDENCE}
        details |= {"gain_over_inputs_removed": removed._asdict(), "train_loss_drop": learned.drop}
        details |= {"training_gain_over_targets_permuted": fitted._asdict(), "max_steps": self.max_steps}
        details |= {"min_improvement": self.min_improvement, "held_out_chunks": len(chunks)}
        details |= {"targets_kept_for_controls": any(swap), "evaluated_on": source}
        details["evaluated_on"] += "; controls trained on the real targets" if any(swap) else ""
        stated = f"held-out loss {means[0]:.4g} real vs {means[2]:.4g} permuted, {means[1]:.4g} no inputs"
        if passed:
            return self.verdict("pass", f"{stated} after {step} steps", details)
        # the guide's rules: a fail needs `stalled` (it learned, no faster fit, no held-out gain)
        same_fit = fitted.high < self.min_improvement
        no_gain = removed.low <= 0 or (permuted.low <= 0 and permuted.high < self.min_improvement)
        stalled = learned.fell and same_fit and no_gain
        ignored = torch.equal(torch.stack(losses[0]), torch.stack(losses[1]))  # the input moves nothing
        if stalled and not keep and reconstruction and not ignored:  # the target is the input itself
            summary = f"the target is the input itself, which moves the loss: {means[0]:.4g} real, no verdict"
            action = "Judge the reconstructions themselves (overfit_batch), or give it more steps."
            return self.verdict("inconclusive", summary, details, action=action)
        # the model-free control, the input as the prediction, on 8 training batches then held out: where it
        # beats moved pairs, the fit fell short, not the data
        as_train = _input_as_prediction(context, train[:8]) if stalled else None
        as_held = _input_as_prediction(context, chunks) if as_train is not None else None
        if as_train is not None and as_held is not None:
            details["input_as_prediction"] = {"train": as_train._asdict(), "held_out": as_held._asdict()}
        if as_train is not None and as_held is not None and as_train.low > 0 and as_held.low > 0:
            copied = min(as_train, as_held)
            summary = f"{stated}; the input as prediction beats moved pairs ({copied.gain:+.0%})"
            action = "Give it more steps (InputIndependenceCheck(max_steps=)) or judge it with overfit_batch."
            return self.verdict("inconclusive", summary, details, action=action)
        # still learning: the real copy's held-out loss falls at every look while its gain over permuted grows
        trend, real = [look["gain"] for look in looks], [look["real"] for look in looks]
        rising = len(trend) >= 3 and trend[-1] > 0 and all(b > a for a, b in itertools.pairwise(trend))
        falling = all(b < a for a, b in itertools.pairwise(real))
        if stalled and rising and falling and fitted.low > 0:
            summary = f"held-out gain over permuted {trend[-1]:+.1%}, rising; {fitted.gain:+.1%} in training"
            action = "Give it more steps: InputIndependenceCheck(max_steps=)."
            return self.verdict("inconclusive", summary, details, action=action)
        if stalled:
            control = f"{means[1]:.4g} no inputs" if removed.low <= 0 else f"{means[2]:.4g} permuted targets"
            summary = f"held-out {means[0]:.4g} real vs {control}; pairs fit no better ({fitted.gain:+.1%})"
            action = "Print (x, y) pairs: labels shuffled or misaligned, or it does not use its inputs."
            # a loss of its own may have an optimum no input improves (abstaining, a margin): a warning
            with torch.no_grad(), record_loss_calls(batch=train[0]) as calls:
                known = loss_call_for(calls, context.training_loss(copies[0][0], train[0])) is not None
            details["known_loss"] = known
            summary += "" if known else "; a loss of its own"
            return self.verdict("fail" if known else "warn", summary, details, action=action)
        if learned.fell and permuted.high < 0:  # it learned, and its pairs made held-out loss worse
            summary = f"{stated}: what the real pairs teach makes held-out loss worse ({permuted.gain:+.1%})"
            action = "Look for what training data has and held-out data lacks: a leak, a split mismatch."
            return self.verdict("warn", summary, details, action=action)
        if not learned.fell:
            summary = f"the real copy's training loss did not fall beyond its noise in {step} steps"
            action = "Check the learning rate and what the optimizer trains (grad_flow, overfit_batch)."
        else:
            gains = f"{permuted.gain:+.1%} ± {permuted.noise:.1%} held out, {fitted.gain:+.1%} in training"
            summary = f"gain over permuted targets {gains}: no verdict"
            action = "Give it more steps or held-out data: InputIndependenceCheck(max_steps=, ...)."
        return self.verdict("inconclusive", summary, details, action=action)

    @staticmethod
    def _pairing(context: CheckContext, batch: Any) -> tuple[set[Any], list[bool], bool, bool]:
        """Kept entries (targets), per call whether its target is the input's, traced, reconstruction."""
        input_key = input_key_of(batch, context.keys()[0])
        model = context.copy_model()
        context.build_optimizers(model)  # a training_step may read what configure_optimizers set
        with preserved_rng(), torch.no_grad():
            calls = context.loss_calls(model, batch)
        targets = {key for call in calls if call.target is not None for key in call.target_keys}
        if not calls:
            targets = {key for key, tensor in batch_entries(batch) if tensor is context.split(batch)[1]}
            if context.target_guessed() and _model_reads(context, model, batch, targets):
                named = ", ".join(f"batch[{key!r}]" for key in sorted(targets, key=str))
                raise CheckSkipped(f"{named} is read by the model, as no loss's target (pass `target_key`).")
        swap = [c.target is not None and c.target_from(input_key) for c in calls]
        source = dict(batch_entries(batch)).get(input_key)
        flat = source.detach().flatten() if isinstance(source, Tensor) else None
        itself = flat is not None and any(
            s and c.target is not None and torch.equal(c.target.flatten(), flat) for c, s in zip(calls, swap)
        )
        return targets - {input_key}, swap, bool(calls), itself

    def _step(
        self,
        context: CheckContext,
        copies: _Copies,
        batch: Any,
        perms: list[Tensor | None],
        step: int,
        keep: set[Any],
        swap: list[bool],
        losses: list[list[Tensor]],
    ) -> None:
        """One step of each copy; the controls' with every entry but the targets permuted."""
        fixed = {id(t) for key, t in batch_entries(batch) if key in keep}
        recorder = LossRecorder()
        for (model, optimizers), perm, record in zip(copies, perms, losses):
            # the same dropout / masking draws in every copy (torch.manual_seed without its per-call overhead)
            torch.default_generator.manual_seed(context.seed + step)
            if torch.cuda.is_available() and torch.cuda.is_initialized():
                torch.cuda.manual_seed_all(context.seed + step)
            if perm is None:
                with recorder if any(swap) else nullcontext():
                    record.append(context.optimization_step(model, optimizers, batch, step))
                continue
            targets = [
                c.target.detach() if s and c.target is not None else None
                for c, s in zip(recorder.calls, swap)
            ]
            moved = _take(batch, perm, len(perm), fixed)
            keeping = LossRecorder(targets=targets) if any(swap) else nullcontext()  # the targets in place
            with perturbed("inputs given to other samples"), keeping:
                try:
                    record.append(context.optimization_step(model, optimizers, moved, step))
                except TargetSwapError as err:
                    raise CheckSkipped(f"a target built from the input could not be kept ({err}).") from err

    @staticmethod
    def _evaluate(context: CheckContext, copies: _Copies, chunks: list[Any]) -> Tensor:
        rows = []
        for model, _ in copies:
            model.eval()
            with torch.no_grad(), perturbed("held-out batches cut into chunks"):
                losses = [context.training_loss(model, chunk, i).float() for i, chunk in enumerate(chunks)]
                rows.append(torch.stack(losses))
            model.train()
        return torch.stack(rows).cpu()


def _input_as_prediction(context: CheckContext, chunks: list[Any]) -> Gain | None:
    """Model-free control: the input as the prediction, own pairs against pairs moved by one."""
    model = context.copy_model().eval()
    served: dict[str, Any] = {}

    def as_input(module: Any, args: Any, output: Any) -> Any:
        prediction = served.get("x")
        if isinstance(output, Tensor) and isinstance(prediction, Tensor) and output.shape == prediction.shape:
            served["used"] = True
            return prediction.to(output.dtype)
        return output

    own, moved = [], []
    try:
        with model.register_forward_hook(as_input), torch.no_grad():  # the hook removed on leaving
            for i, chunk in enumerate(chunks):
                x = context.split(chunk)[0]
                size = batch_size_of(chunk, context.keys()[0]) or 0
                if not isinstance(x, Tensor) or not x.is_floating_point() or size < 2:
                    return None
                served.update(x=x, used=False)
                own.append(context.training_loss(model, chunk, i).float())
                other = _take(chunk, torch.roll(torch.arange(size), 1), size)
                moved.append(context.training_loss(model, other, i).float())
                if not served["used"]:
                    return None
    except Exception:  # a step that cannot take its input as its output: no control
        return None
    return None if len(own) < 3 else held_out_gain(torch.stack(own).cpu(), torch.stack(moved).cpu())


def _one_target_for_all(batches: list[Any], keys: set[Any]) -> bool:
    """Whether every target entry in ``keys`` holds one value for all samples of each batch."""
    targets = [t for batch in batches for key, t in batch_entries(batch) if key in keys and t.ndim > 0]
    return bool(targets) and all(len(t) > 1 and bool((t == t[:1]).all()) for t in targets)


def _take(batch: Any, rows: Tensor, size: int, fixed: Container[int] = ()) -> Any:
    """``batch`` with ``rows`` taken of each tensor of leading dim ``size`` (but ids in ``fixed``)."""

    def take(tensor: Tensor) -> Tensor:
        if id(tensor) in fixed or tensor.ndim == 0 or tensor.shape[0] != size:
            return tensor
        return tensor[rows.to(tensor.device)]

    return map_tensors(batch, take)


def _chunks(batch: Any, context: CheckContext, count: int) -> list[Any]:
    """``batch`` cut into up to ``count`` pieces of 2 samples or more along its batch dim."""
    size = batch_size_of(batch, context.keys()[0]) or 1
    pieces = max(1, min(count, size // 2))
    bounds = [round(i * size / pieces) for i in range(pieces + 1)]
    return [_take(batch, torch.arange(a, b), size) for a, b in itertools.pairwise(bounds)]


def _model_reads(context: CheckContext, model: Any, batch: Any, keys: set[Any]) -> bool:
    """Whether the step's model output changes when only the entries ``keys`` roll by one row (seeded)."""
    size = batch_size_of(batch) or 0
    roll = torch.roll(torch.arange(size), 1)
    moved = {
        key: tensor[roll.to(tensor.device)]
        for key, tensor in batch_entries(batch)
        if key in keys and tensor.ndim >= 1 and len(tensor) == size
    }
    if size < 2 or not moved:
        return False
    candidates = (batch, replace_entries(batch, moved))
    with preserved_rng(), torch.no_grad():
        before, after = [seeded(context.seed, step_output, context, model, c) for c in candidates]
    return before.shape != after.shape or not torch.equal(before, after)
