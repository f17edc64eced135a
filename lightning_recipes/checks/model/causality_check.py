"""Check that a next-token model's output at position t sees no input after t."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import Tensor
from typing_extensions import Unpack, override

from lightning_recipes._validation import check_in_range, check_int
from lightning_recipes.checks._num_classes import IGNORE_INDEX
from lightning_recipes.checks._probe import model_output, until_it_reacts
from lightning_recipes.checks.base import CheckOptions, SanityCheck, perturbed
from lightning_recipes.checks.report import CheckInconclusive, CheckResult, CheckSkipped
from lightning_recipes.harness import Harness as CheckContext
from lightning_recipes.harness.batches import batch_size_of, entries, replace_entries, slice_batch
from lightning_recipes.harness.isolation import seeded

__all__ = ["CausalityCheck", "aligned_output", "next_token_task"]

_MATCH = 0.99  # share of the (non-ignored) target positions that must equal the shifted inputs


class CausalityCheck(SanityCheck):
    """The output depends on what the task says: where it is causal (next-token prediction, ``causal=True``),
    the output at ``t`` reads no input after ``t``. Cost: ``1 + num_positions`` forwards (``log2(S)`` more).

    Args:
        causal: ``None`` infers the task from the batch, ``True`` forces the check on, ``False`` skips it.
        num_positions: Positions probed, spread evenly over ``[0, S - 2]``.
        num_samples: Sequences of the first batch used.
        rtol: A dependence larger than ``rtol`` x the largest effect measured is a leak.

    Example:
        >>> from lightning_recipes.checks import CheckContext
        >>> from lightning_recipes.testing import TinyTransformerLM, random_token_loader
        >>> loader = random_token_loader(batch_size=4, seq_len=8)
        >>> context = CheckContext(TinyTransformerLM(n_layers=1), loader)
        >>> result = CausalityCheck().run(context)
        >>> result.status, result.details["method"]
        ('pass', 'perturbation')
    """

    name = "causality"

    def __init__(
        self,
        causal: bool | None = None,
        num_positions: int = 3,
        num_samples: int = 4,
        rtol: float = 1e-4,
        **options: Unpack[CheckOptions],
    ) -> None:
        super().__init__(**options)
        if causal is not None and not isinstance(causal, bool):
            raise ValueError(f"`causal` must be True, False or None (infer), got {causal!r}.")
        check_int("num_positions", num_positions, minimum=1)
        check_int("num_samples", num_samples, minimum=1)
        check_in_range("rtol", rtol, 0, 1, low_open=True, high_open=True)
        self.causal, self.num_positions, self.num_samples = causal, num_positions, num_samples
        self.rtol = rtol

    @override
    def check(self, context: CheckContext) -> CheckResult:
        if self.causal is False:
            raise CheckSkipped("turned off with `causal=False`.")
        batch = context.train_batches(1)[0]
        inputs, targets = context.split(batch)
        if inputs is None or inputs.ndim < 2 or inputs.shape[1] < 2:
            shape = None if inputs is None else list(inputs.shape)
            raise CheckSkipped(f"the input {shape} is not a sequence [B, S >= 2, ...] (or pass `input_key`).")
        how, key = "declared with causal=True", None
        if self.causal is None:
            is_lm, how = next_token_task(batch, inputs, targets)
            found = [] if is_lm else context.first_loss_calls()
            calls = [c.target for c in found if isinstance(c.target, Tensor)]
            for entry_key, _, entry in entries(batch):  # a sequence and its target sliced from one entry
                ahead = [_ahead(target, entry) for target in calls if entry.ndim >= 2]
                if any(total > 0 and matches >= _MATCH * total for matches, total in ahead):
                    is_lm, how = True, f"the step's loss target is batch[{entry_key!r}] one position ahead"
                    inputs, key = entry, entry_key
                    break
            if not is_lm:
                raise CheckSkipped(f"not next-token prediction ({how}); `causal=True` forces it.")
        size = batch_size_of(batch, context.input_key) or len(inputs)
        count = min(size, self.num_samples)
        batch, inputs = slice_batch(batch, count, size), inputs[:count].detach()
        last = int(inputs.shape[1]) - 2  # the probed positions: spread evenly over [0, S - 2]
        spread = {round(i * last / max(self.num_positions - 1, 1)) for i in range(self.num_positions)}
        probes = sorted(spread) if self.num_positions > 1 else [last // 2]
        model = context.copy_model()

        def measure() -> tuple[float, float, Any]:
            model.eval()
            return self._perturbation_test(context, model, batch, inputs, probes, key)

        (scale, worst, leak), steps = until_it_reacts(context, model, batch, measure, lambda f: f[0] > 0)
        details: dict[str, Any] = {
            "task": how,
            "method": "perturbation",
            "positions": probes,
            "training_steps_first": steps,
            "measured": worst / scale if scale > 0 else 0.0,
        }
        if scale == 0:
            raise CheckInconclusive(f"the outputs react to no input position, also after {steps} step(s)")
        if leak is None:
            summary = f"outputs at positions {probes} do not depend on later inputs (largest future effect "
            return self.verdict("pass", f"{summary}{details['measured']:.2g} of the largest effect)", details)
        position, later, far = leak
        details["leak"] = {"output_position": position, "input_position": later, "reads_further": far}
        seen = f"input position {later}" + (" and later ones too" if far else "")
        seen += " (off-by-one)" if later == position + 1 and not far else ""
        summary = f"the output at position {position} depends on {seen}: {details['measured']:.2g} of the "
        action = "Add a causal mask (is_causal=True), use unidirectional layers and left-only padding."
        return self.verdict("fail", summary + "largest effect, expected 0", details, action)

    def _perturbation_test(
        self, context: CheckContext, model: Any, batch: Any, inputs: Tensor, probes: list[int], key: Any
    ) -> tuple[float, float, tuple[int, int, bool] | None]:
        """The largest effect, the largest on an earlier output, and the first leak (output, input, more)."""
        replacement = _replacement(inputs, context.seed)
        where = context.keys()[0] if key is None else key  # the perturbed sequence's place in the batch
        seq = int(inputs.shape[1])

        def output(batch: Any) -> Tensor:  # [B, S, ...], with the same randomness in every compared pass
            return aligned_output(seeded(context.seed, model_output, context, model, batch), inputs)

        with torch.no_grad():
            base = output(batch)

            def effect(start: int, stop: int) -> Tensor:
                """The change of every output position when the inputs in ``[start, stop)`` change."""
                changed = inputs.clone()
                changed[:, start:stop] = replacement[:, start:stop]
                with perturbed("later positions of the sequence replaced"):
                    moved = output(replace_entries(batch, {where: changed}))
                return (moved - base).float().abs().transpose(0, 1).reshape(seq, -1).amax(1)

            table = torch.stack([effect(p + 1, seq) for p in probes]).tolist()  # sync: once
            scale = max(max(row) for row in table)
            limit = self.rtol * scale
            worst, leak = 0.0, None
            for position, row in zip(probes, table):  # the earliest leaking probe: most future to see
                past = row[: position + 1]
                worst = max(worst, *past)
                if leak is None and max(past) > limit:
                    moved = max(s for s, v in enumerate(past) if v > limit)
                    low, high = moved + 1, seq  # changing inputs [moved + 1, high) moves output `moved`
                    while high - low > 1:
                        middle = (low + high) // 2
                        leaks = float(effect(moved + 1, middle)[moved]) > limit  # sync: once per step
                        low, high = (low, middle) if leaks else (middle, high)
                    later = high - 1
                    far = later + 1 < seq and float(effect(later + 1, seq)[moved]) > limit
                    leak = (moved, later, far)
        return scale, worst, leak


def _ahead(target: Tensor, inputs: Tensor) -> tuple[int, int]:
    """Positions of a target (flattened or not) holding ``inputs[:, 1:]``, of its non-ignored positions."""
    ahead = inputs[:, 1:]
    if target.numel() != ahead.numel() or target.is_floating_point() != ahead.is_floating_point():
        return 0, 0
    target, ahead = target.reshape(-1), ahead.reshape(-1)
    valid = target != IGNORE_INDEX
    return int(((target == ahead) & valid).sum()), int(valid.sum())  # sync: twice


def next_token_task(batch: Any, inputs: Tensor | None, targets: Tensor | None) -> tuple[bool, str]:
    """Whether a batch is next-token prediction, and how that was told (or why not).

    Example:
        >>> import torch
        >>> tokens = torch.arange(10).reshape(1, 10)
        >>> next_token_task((tokens[:, :-1], tokens[:, 1:]), tokens[:, :-1], tokens[:, 1:])[0]
        True
        >>> next_token_task((tokens, tokens), tokens, tokens)[0]
        False
    """
    if isinstance(batch, Mapping):
        ids, labels = batch.get("input_ids"), batch.get("labels")
        if isinstance(ids, Tensor) and isinstance(labels, Tensor) and ids.shape == labels.shape:
            valid = labels != IGNORE_INDEX
            same = bool(valid.any()) and bool((labels[valid] == ids[valid]).all())  # sync: twice
            if ids.ndim == 2 and same:
                return True, "Hugging Face style: `labels` equal `input_ids`, the model shifts them"
    if inputs is None or targets is None:
        return False, "no targets in the batch"
    if targets.shape[:2] != inputs.shape[:2] or inputs.ndim < 2:
        return False, f"targets {list(targets.shape)} vs inputs {list(inputs.shape)}"
    head, tail = targets[:, :-1], inputs[:, 1:]
    series = head.reshape(*head.shape[:2], -1) if head.ndim in (2, 3) else head
    if inputs.ndim == series.ndim == 3 and series.shape[2] < tail.shape[2] and series.is_floating_point():
        for f in range(tail.shape[2] - series.shape[2] + 1):  # forecasting: some input features, a step ahead
            window = tail[..., f : f + series.shape[2]].float()
            if torch.allclose(series.float(), window):  # sync: per feature
                return True, f"targets are input features from {f} one step ahead (a next-step forecast)"
    if head.shape != tail.shape:
        return False, f"targets {list(targets.shape)} vs inputs {list(inputs.shape)}"
    shifted = "targets are the inputs shifted by one position (targets[:, :-1] == inputs[:, 1:])"
    if torch.is_floating_point(targets) or torch.is_floating_point(inputs):
        both = torch.is_floating_point(targets) and torch.is_floating_point(inputs)
        if both and bool(torch.allclose(head.float(), tail.float())):  # sync: once
            return True, shifted
        return False, "targets are not the shifted inputs"
    matches, total = _ahead(head, inputs)
    if total > 0 and matches >= _MATCH * total:
        return True, shifted
    share = matches / total if total else 0.0
    return False, f"targets are the shifted inputs at {share:.0%} of positions"


def _replacement(inputs: Tensor, seed: int) -> Tensor:
    """Different values everywhere: other ids (or whole numbers) present in the batch, or shifted floats."""
    generator = torch.Generator(device="cpu").manual_seed(seed)
    if torch.is_floating_point(inputs) and not bool((inputs == inputs.round()).all()):  # sync: once
        noise = torch.randn(inputs.shape, generator=generator).to(inputs.device, inputs.dtype)
        return inputs + noise * (inputs.float().std() + 1.0).to(inputs.dtype)
    pool = torch.unique(inputs)
    if len(pool) < 2:
        raise CheckSkipped("every input token of the batch is the same id: nothing to replace them with.")
    offsets = torch.randint(1, len(pool), inputs.shape, generator=generator).to(inputs.device)
    return pool[(torch.searchsorted(pool, inputs) + offsets) % len(pool)]


def aligned_output(output: Tensor, inputs: Tensor) -> Tensor:
    """``output`` as ``[B, S, ...]`` for inputs ``[B, S, ...]`` (a flat ``[B * S, ...]`` one unflattened).

    Example:
        >>> import torch
        >>> aligned_output(torch.zeros(6, 5), torch.zeros(2, 3, dtype=torch.long)).shape
        torch.Size([2, 3, 5])
    """
    batch, seq = int(inputs.shape[0]), int(inputs.shape[1])
    if output.shape[:2] != (batch, seq) and output.shape[:1] == (batch * seq,):  # flat: unflatten
        output = output.reshape(batch, seq, *output.shape[1:])
    if output.ndim >= 2 and output.shape[:2] == (batch, seq - 1):  # a step reading seq[:, :-1]: t is t
        output = torch.cat([output, torch.zeros_like(output[:, :1])], 1)
    if output.shape[:2] != (batch, seq):
        raise CheckSkipped(f"the output {list(output.shape)} is not [B, S, ...] = [{batch}, {seq}, ...].")
    return output
