"""Check that padding the batch says is padding changes nothing the model computes at real positions."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import lightning.pytorch as pl
import torch
from torch import Tensor
from typing_extensions import override

from lightning_recipes._stats import NoiseVerdict, judge_deviation
from lightning_recipes._validation import check_int
from lightning_recipes.checks._budget import out_of_time
from lightning_recipes.checks.base import SanityCheck, TimeBudget
from lightning_recipes.checks.model._padding_batch import (
    Padding,
    extend_batch,
    find_padding,
    pad_value_of,
    replace_entries,
    truncate_batch,
)
from lightning_recipes.checks.report import CheckResult, CheckSkipped
from lightning_recipes.harness import CannotRunOnCopy
from lightning_recipes.harness import Harness as CheckContext
from lightning_recipes.harness.batches import TARGET_KEYS, Key, check_key, input_key_of, slice_batch

__all__ = ["PaddingCheck"]

_ULPS = (
    256.0  # a longer sequence lengthens reductions (softmax, sums over masked positions): more last-bit noise
)
_IGNORING_LOSSES = ("cross_entropy", "nll_loss")


class PaddingCheck(SanityCheck):
    """Verify that extra padding, marked as padding, changes neither the loss nor the outputs at real
    positions.

    The padding indicator is a mask entry (``attention_mask``, ``padding_mask``, a bool ``[B, T]`` tensor) or
    a lengths tensor. Every ``[B, T, ...]`` entry is extended by ``extra`` padded positions and
    ``training_step`` runs in eval; the loss and the outputs at real positions must stay within ``4 x`` the
    run-to-run noise (``fail`` above ``10 x``, an inconclusive look is repeated with more padding). A change
    on batches with no padding yet is a ``warn``. Without an indicator: ``skip``.

    Cost: three to six ``training_step`` calls without gradients on ``num_samples`` samples.

    Args:
        num_samples: Samples of the first training batch used.
        extra: Padding positions appended to every sequence.
        padding_key: The mask's or lengths' key (index) in the batch, when its name does not say.

    Raises:
        ValueError: If ``num_samples < 1``, ``extra < 1`` or ``padding_key`` is not an int, str or None.

    Example:
        >>> import lightning.pytorch as pl, torch
        >>> from torch.utils.data import DataLoader
        >>> from lightning_recipes.checks import CheckContext
        >>> class MaskedMean(pl.LightningModule):
        ...     def __init__(self):
        ...         super().__init__()
        ...         self.head = torch.nn.Linear(8, 4)
        ...     def forward(self, x, mask):
        ...         m = mask.unsqueeze(-1).float()
        ...         return self.head((x * m).sum(1) / m.sum(1))  # x.mean(1) would fail: it reads padding
        ...     def training_step(self, batch, batch_idx):
        ...         return torch.nn.functional.cross_entropy(self(batch["x"], batch["mask"]), batch["y"])
        >>> x, mask = torch.randn(16, 5, 8), torch.ones(16, 5, dtype=torch.long)
        >>> mask[::2, 3:] = 0
        >>> batch = {"x": x * mask.unsqueeze(-1), "mask": mask, "y": torch.arange(16) % 4}
        >>> result = PaddingCheck().run(CheckContext(MaskedMean(), DataLoader([batch], batch_size=None)))
        >>> result.status, result.details["padding"]["kind"]
        ('pass', 'mask')
    """

    name = "padding"

    def __init__(
        self,
        num_samples: int = 8,
        extra: int = 3,
        padding_key: Key = None,
        *,
        on_fail: Literal["raise", "warn"] = "raise",
        input_key: Key = None,
        target_key: Key = None,
        time_budget: TimeBudget = "default",
    ) -> None:
        super().__init__(on_fail=on_fail, input_key=input_key, target_key=target_key, time_budget=time_budget)
        check_int("num_samples", num_samples, minimum=1)
        check_int("extra", extra, minimum=1)
        check_key("padding_key", padding_key)
        self.num_samples = num_samples
        self.extra = extra
        self.padding_key = padding_key

    @override
    def check(self, context: CheckContext) -> CheckResult:
        batch = context.train_batches(1)[0]
        if isinstance(batch, Tensor) or not isinstance(batch, (Mapping, Sequence)):
            raise CheckSkipped(_NO_PADDING.format(why="the batch is a single tensor"))
        input_key, target_key = context.keys()
        input_key = input_key_of(batch, input_key)
        target_key = _target_key_of(batch, target_key)
        padding, why = find_padding(batch, input_key, target_key, self.padding_key)
        if padding is None:
            raise CheckSkipped(_NO_PADDING.format(why=why))
        size = int(padding.real.shape[0])
        if size > self.num_samples:
            batch = slice_batch(batch, self.num_samples, size)
            padding, _ = find_padding(batch, input_key, target_key, padding.key)
            assert padding is not None
        model = context.copy_model()
        context.require_automatic_optimization(model)
        model.eval()
        fill = self._fill_values(context, model, batch, padding, target_key, input_key)
        details: dict[str, Any] = {
            "padding": {
                "kind": padding.kind,
                "key": padding.key,
                "convention": padding.convention,
                "length": padding.length,
                "padded_fraction": round(padding.padded_fraction, 4),
                "extended": padding.sequence_keys,
                "fill": fill,
            },
            "extra": self.extra,
            "samples": int(padding.real.shape[0]),
        }
        try:
            verdicts, padding = self._probe_or_make_room(
                context, model, batch, padding, target_key, fill, details
            )
        except _OutOfTime:
            return CheckResult(
                self.name,
                "inconclusive",
                "stopped by its time budget before the padded batch ran; no verdict. Try: a larger "
                "`time_budget` or fewer `num_samples`.",
                {**details, "stopped_by_budget": True},
            )
        details["quantities"] = {
            name: {"status": v.status, "deviation": v.deviation, "noise": v.noise, "tolerance": v.tolerance}
            for name, v in verdicts.items()
        }
        return self._verdict(verdicts, padding, details)

    def _probe_or_make_room(
        self,
        context: CheckContext,
        model: pl.LightningModule,
        batch: Any,
        padding: Padding,
        target_key: Key,
        fill: dict[int | str, float],
        details: dict[str, Any],
    ) -> tuple[dict[str, NoiseVerdict], Padding]:
        try:
            return self._probe(context, model, batch, padding, target_key, fill, details), padding
        except _LongerRefused as refused:
            if padding.length <= self.extra:
                raise CheckSkipped(str(refused)) from refused
            # The model takes at most T positions (a position table): make room inside T instead.
            room = padding.length - self.extra
            batch, padding = truncate_batch(batch, padding, room)
            details["cut_to"] = room
            try:
                return self._probe(context, model, batch, padding, target_key, fill, details), padding
            except (CheckSkipped, CannotRunOnCopy, _OutOfTime):
                raise
            except Exception as again:  # the model takes exactly T positions
                raise CheckSkipped(f"{refused} Cut to {room} positions, it raised again.") from again

    def _probe(
        self,
        context: CheckContext,
        model: pl.LightningModule,
        batch: Any,
        padding: Padding,
        target_key: Key,
        fill: dict[int | str, float],
        details: dict[str, Any],
    ) -> dict[str, NoiseVerdict]:
        """The batch twice (noise), then ``extra`` positions longer; more padding when inconclusive; padded
        targets relabelled."""
        first = _observe(context, model, batch, context.seed)
        second = _observe(context, model, batch, context.seed + 1)
        if out_of_time():
            raise _OutOfTime
        longer = extend_batch(batch, padding, self.extra, fill)
        verdicts = self._padded_run(context, model, longer, first, second, padding, self.extra)
        worse = max(self.extra * 4, padding.length)
        if _status(verdicts) == "inconclusive" and not out_of_time():
            # Reading padding grows with the amount of padding, float noise hardly does: look again with more.
            more = extend_batch(batch, padding, worse, fill)
            with contextlib.suppress(_LongerRefused):
                verdicts = self._padded_run(context, model, more, first, second, padding, worse)
                details["extra"] = worse
        varied = self._other_padded_targets(context, model, longer, padding, target_key, fill)
        if varied is not None and _status(verdicts) != "fail" and not out_of_time():
            # The targets at padded positions must not matter either: give them another label.
            loss = self._padded_run(context, model, varied, first, second, padding, self.extra)["loss"]
            verdicts["loss with other targets at padded positions"] = loss
        return verdicts

    def _padded_run(
        self,
        context: CheckContext,
        model: pl.LightningModule,
        longer: Any,
        first: Observation,
        second: Observation,
        padding: Padding,
        extra: int,
    ) -> dict[str, NoiseVerdict]:
        try:
            extended = _observe(context, model, longer, context.seed)
        except (CheckSkipped, CannotRunOnCopy):
            raise
        except Exception as err:
            raise _LongerRefused(
                f"the model raised {type(err).__name__} ({err}) on the batch padded by {extra} more "
                "positions: it takes one sequence length only, so padding cannot be varied. Try `extra=1` "
                "or a model limit above T + extra (max positions)."
            ) from err
        return _compare(first, second, extended, padding)

    def _other_padded_targets(
        self,
        context: CheckContext,
        model: pl.LightningModule,
        longer: Any,
        padding: Padding,
        target_key: Key,
        fill: dict[int | str, float],
    ) -> Any:
        """``longer`` with a real label in place of the padded targets' value; ``None`` when that value is
        the loss's ``ignore_index`` or has class weight 0 (then the loss is told to skip it)."""
        if target_key is None or target_key not in padding.sequence_keys:
            return None
        with torch.no_grad():
            call = context.loss_call(model, longer)
        value = fill[target_key]
        if call is None or call.target is None:
            return None
        if call.function in _IGNORING_LOSSES and value == float(call.kwargs.get("ignore_index", -100)):
            return None
        weight = call.kwargs.get("weight")
        if isinstance(weight, Tensor) and 0 <= value < weight.numel() and float(weight[int(value)]) == 0:
            return None
        target: Tensor = longer[target_key]
        real = torch.cat([padding.real, padding.real.new_zeros(len(padding.real), self.extra)], dim=1)
        real = real.to(target.device)
        others = target[real][target[real] != value]
        if others.numel() == 0:
            return None
        changed = target.clone()
        changed[~real] = others.flatten()[0]
        return replace_entries(longer, {target_key: changed})

    def _fill_values(
        self,
        context: CheckContext,
        model: pl.LightningModule,
        batch: Any,
        padding: Padding,
        target_key: Key,
        input_key: Key,
    ) -> dict[int | str, float]:
        fill: dict[int | str, float] = {}
        for key in padding.sequence_keys:
            tensor = batch[key]
            value = pad_value_of(tensor, padding.real, float("nan"))
            if value != value and key == target_key and key != input_key:  # a target gets ignore_index
                value = _ignore_index(context, model, batch)
            fill[key] = 0.0 if value != value else value
        return fill

    def _verdict(
        self, verdicts: dict[str, NoiseVerdict], padding: Padding, details: dict[str, Any]
    ) -> CheckResult:
        where = f"`{padding.key}`" if isinstance(padding.key, str) else f"batch[{padding.key}]"
        described = (
            f"{details['extra']} padding positions appended to every sequence (marked by {where}, "
            f"{padding.convention}; {details['padding']['padded_fraction']:.0%} of the batch was padding "
            "already)"
        )
        if "cut_to" in details:
            described += f" after cutting it to {details['cut_to']} positions (its length limit)"
        measured = "; ".join(f"{name}: {v.describe()}" for name, v in verdicts.items())
        if not verdicts:
            raise CheckSkipped("neither the loss nor an output could be compared before and after padding.")
        statuses = {v.status for v in verdicts.values()}
        if "fail" in statuses:
            moved = [name for name, v in verdicts.items() if v.status == "fail"]
            only_loss = all(name.startswith("loss") for name in moved) and len(verdicts) > len(moved)
            causes = (
                "the loss averages over padded targets (pass `ignore_index`, or mask the loss and divide by "
                "the mask's sum), labels copied from the inputs with padding left in (`labels = "
                "input_ids.masked_fill(attention_mask == 0, -100)`)"
                if only_loss
                else "a mean/sum/max over all timesteps that includes padding (divide by the mask's sum or "
                "the lengths), the last timestep `h[:, -1]` of a padded batch (gather at `lengths - 1`), an "
                "RNN run over the padding (`pack_padded_sequence(x, lengths, batch_first=True, "
                "enforce_sorted=False)`), attention that never gets the mask (pass `attention_mask` / "
                "`src_key_padding_mask` to the model)"
            )
            if details["padding"]["padded_fraction"] == 0:  # of the batch as loaded, before any cut
                details["latent"] = True
                return CheckResult(
                    self.name,
                    "warn",
                    f"the model would read padding: {described} changed the {' and the '.join(moved)} "
                    f"({measured}). These batches hold no padding yet, so training is not affected now; it "
                    f"will be once batches are padded (variable lengths). Likely causes: {causes}.",
                    details,
                )
            return CheckResult(
                self.name,
                "fail",
                f"the model reads padding: {described} changed the {' and the '.join(moved)} ({measured}; "
                f"expected no change beyond float noise). Likely causes: {causes}.",
                details,
            )
        if "inconclusive" in statuses:
            return CheckResult(
                self.name,
                "inconclusive",
                f"{described} changed the model's results slightly: above float noise, too small to call a "
                f"bug ({measured}). Try: a larger `extra=`, or float64 (`model.double()`) to tell float "
                "noise from reading the padding.",
                details,
            )
        return CheckResult(
            self.name,
            "pass",
            f"padding is ignored: {described} left the loss and the outputs at real positions unchanged "
            f"({measured}).",
            details,
        )


_NO_PADDING = (
    "the batch does not say what is padding ({why}). This check needs a padding mask entry (a dict "
    "key `attention_mask`, `padding_mask`, `src_key_padding_mask`, `mask`, or a bool [B, T] tensor in a "
    "tuple) or a lengths entry (an integer [B] tensor with values <= T next to a [B, T, ...] input, e.g. "
    "`x, lengths, y = batch`). Pass `padding_key=` when yours has another name; fixed-length data needs no "
    "padding check."
)


class _LongerRefused(Exception):
    """The model raised on a longer batch (it takes one sequence length, or has a position limit)."""


class _OutOfTime(Exception):
    """The time budget ended before the padded batch ran."""


def _status(verdicts: dict[str, NoiseVerdict]) -> str:
    statuses = {v.status for v in verdicts.values()}
    return next((s for s in ("fail", "inconclusive") if s in statuses), "pass")


def _target_key_of(batch: Any, key: Key) -> Key:
    if key is not None:
        return key
    if isinstance(batch, Mapping):
        return next((k for k in TARGET_KEYS if k in batch), None)
    return len(batch) - 1 if len(batch) >= 2 else None


def _ignore_index(context: CheckContext, model: pl.LightningModule, batch: Any) -> float:
    """The main loss call's ``ignore_index`` (cross-entropy / NLL), else NaN (no value to ignore)."""
    with torch.no_grad():
        call = context.loss_call(model, batch)
    if call is None or call.function not in _IGNORING_LOSSES:
        return float("nan")
    return float(call.kwargs.get("ignore_index", -100))


Observation = tuple[Tensor, Tensor | None]


def _observe(context: CheckContext, model: pl.LightningModule, batch: Any, seed: int) -> Observation:
    """The loss of ``training_step`` on ``batch`` and the module's output seen meanwhile, under ``seed``."""
    torch.manual_seed(seed)
    with torch.no_grad(), context.capture_forward(model) as captured:
        loss = context.training_loss(model, batch)
    output = captured.last()
    return loss.detach(), None if output is None else output.detach()


def _compare(
    first: Observation, second: Observation, extended: Observation, padding: Padding
) -> dict[str, NoiseVerdict]:
    verdicts = {"loss": _judge(first[0], second[0], extended[0], first[0].dtype)}
    a, b, longer = first[1], second[1], extended[1]
    if a is None or b is None or longer is None or a.shape != b.shape:
        return verdicts
    dtype = a.dtype
    if a.shape == longer.shape:  # no time axis (pooled, or cut to the real lengths): compare all of it
        verdicts["output"] = _judge(a, b, longer, dtype)
    elif (
        a.ndim >= 2
        and longer.ndim == a.ndim
        and a.shape[:2] == padding.real.shape
        and longer.shape[1] > a.shape[1]
        and a.shape[2:] == longer.shape[2:]
    ):
        real = padding.real.to(a.device)
        verdicts["output at real positions"] = _judge(a[real], b[real], longer[:, : a.shape[1]][real], dtype)
    return verdicts


def _judge(a: Tensor, b: Tensor, longer: Tensor, dtype: torch.dtype) -> NoiseVerdict:
    a, b, longer = a.double(), b.double(), longer.double()
    finite = bool(torch.isfinite(a).all())
    noise = float((a - b).abs().nan_to_num().max()) if a.numel() else 0.0
    if finite and not bool(torch.isfinite(longer).all()):
        deviation = float("inf")
    else:
        deviation = float((longer - a).abs().nan_to_num().max()) if a.numel() else 0.0
    scale = float(a.abs().nan_to_num().max()) if a.numel() else 0.0
    return judge_deviation(deviation, noise, scale, dtype, ulps=_ULPS)
