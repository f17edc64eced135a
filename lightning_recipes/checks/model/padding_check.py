"""Check that what a batch marks as padding (a mask or a lengths entry) changes nothing at real positions."""

from __future__ import annotations

import contextlib
import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor
from typing_extensions import Unpack, override

from lightning_recipes._stats import NoiseVerdict, judge_deviation
from lightning_recipes._validation import check_int
from lightning_recipes.checks._probe import worst
from lightning_recipes.checks.base import CheckOptions, SanityCheck, perturbed
from lightning_recipes.checks.model.causality_check import _replacement
from lightning_recipes.checks.report import CheckInconclusive, CheckResult, CheckSkipped
from lightning_recipes.harness import CannotRunOnCopy
from lightning_recipes.harness import Harness as CheckContext
from lightning_recipes.harness.batches import (
    Key,
    check_key,
    input_key_of,
    replace_entries,
    slice_batch,
    target_key_of,
)
from lightning_recipes.harness.batches import (
    entries as entries_of,
)
from lightning_recipes.harness.isolation import seeded

__all__ = ["PaddingCheck"]

_ULPS = 256.0  # a longer sequence lengthens reductions (softmax, masked sums): more last-bit noise
_IGNORING_LOSSES = ("cross_entropy", "nll_loss")
_REPORTED = ("status", "deviation", "noise", "tolerance")  # of each verdict, in details["quantities"]
Fill = dict[int | str, float]  # the value appended to each sequence entry, by key
Observation = tuple[Tensor, Tensor | None]  # a pass's loss and the output seen


MASK_KEYS: tuple[str, ...] = ("attention_mask", "padding_mask", "src_key_padding_mask", "key_padding_mask")
MASK_KEYS += ("tgt_key_padding_mask", "input_mask", "pad_mask", "mask")
"""Dict keys read as a ``[B, T]`` padding mask (and keys ending in ``attention_mask``/``padding_mask``)."""
LEFT = "lengths, but the pad value fills the first T - length positions: padded on the left"
LENGTHS_KEYS = ("lengths", "length", "lens", "seq_lens", "seq_len", "input_lengths", "sequence_lengths")


@dataclasses.dataclass
class Padding:
    """What the batch says about padding (``pad_value`` ``None``: a lengths entry, else a mask)."""

    key: int | str
    pad_value: float | None
    real: Tensor
    sequence_keys: list[int | str]
    convention: str


def _mask_candidates(batch: Any, entries: list[tuple[int | str, Tensor]], key: Key) -> list[int | str]:
    if key is not None:
        return [key]
    if isinstance(batch, Mapping):
        named: list[int | str] = [k for k in MASK_KEYS if k in batch]
        ends = ("attention_mask", "padding_mask")
        return named + [k for k, _ in entries if isinstance(k, str) and k.endswith(ends) and k not in named]
    return [k for k, t in entries if t.dtype == torch.bool and t.ndim == 2]  # a tuple: only a bool [B, T]


def _mask_convention(mask: Tensor, name: int | str) -> tuple[float, str]:
    """The value that marks padding: from the mask's name when it says, else from the data."""
    text = name.lower() if isinstance(name, str) else ""
    if "pad" in text:
        return 1.0, "True = padding (by its name)"
    if "attention" in text or text == "input_mask":
        return 0.0, "1 = keep, 0 = padding (by its name)"
    flags = mask != 0
    mixed = flags.any(1) & ~flags.all(1)
    if bool(mixed.any()):
        pad = 1.0 if float(flags[mixed, -1].float().mean()) > 0.5 else 0.0
        return pad, f"{'True = padding' if pad else '1 = keep, 0 = padding'} (trailing values of padded rows)"
    if bool(flags.all()):
        return 0.0, "1 = keep (all ones: no padding in this batch)"
    return 1.0, "True = padding (all zeros: no padding in this batch)"


def find_padding(
    batch: Any, input_key: Key, target_key: Key, padding_key: Key = None
) -> tuple[Padding | None, str]:
    """The padding a batch declares, or ``None`` and why not."""
    entries = [(key, tensor) for key, _, tensor in entries_of(batch) if key is not None]
    tensors = dict(entries)
    inputs = tensors.get(input_key) if input_key is not None else None  # type: ignore[arg-type]
    for key in _mask_candidates(batch, entries, padding_key):
        mask = tensors.get(key)
        if mask is None or mask.ndim != 2 or mask.shape[1] < 1 or not bool(((mask == 0) | (mask == 1)).all()):
            continue
        pad_value, convention = _mask_convention(mask, key)
        real = (mask != 0) if pad_value == 0.0 else (mask == 0)
        steps = real.int().diff(dim=1)  # real positions: a prefix (right padding) or a suffix (left) of a row
        if not bool(((steps <= 0).all(1) | (steps >= 0).all(1)).all()):
            continue  # real positions scattered in a row: another kind of mask (MLM, loss), not padding
        keys = [k for k, t in entries if k != key and t.shape[:2] == mask.shape]  # [B, T, ...] entries
        if keys:
            return Padding(key, pad_value, real.bool(), keys, convention), ""
    if inputs is None or inputs.ndim < 2:
        return None, "no mask, and no [B, T, ...] input for lengths"
    size, length = int(inputs.shape[0]), int(inputs.shape[1])
    names: list[int | str] = [k for k, _ in entries if k != target_key]
    if isinstance(batch, Mapping):
        names = sorted(names, key=lambda k: k not in LENGTHS_KEYS)  # named lengths first
    for key in names if padding_key is None else [padding_key]:
        lengths = tensors.get(key)  # type: ignore[arg-type]
        if lengths is None or lengths.ndim != 1 or lengths.shape[0] != size or lengths.is_floating_point():
            continue
        if lengths.dtype == torch.bool or int(lengths.min()) < 1 or int(lengths.max()) > length:
            continue
        real = torch.arange(length, device=lengths.device)[None] < lengths[:, None]
        keys = [k for k, t in entries if k != key and t.shape[:2] == (size, length)]  # [B, T, ...] entries
        if bool((~real).any()) and math.isnan(pad_value_of(inputs, real, math.nan)):
            left = real.flip(1)  # the pad value on the left instead: the last `length` positions are real
            if not math.isnan(pad_value_of(inputs, left, math.nan)):
                return Padding(key, None, left, keys, LEFT), ""
            continue  # positions past the "lengths" hold varying values: not a lengths entry
        return Padding(key, None, real, keys, "lengths: positions >= length are padding"), ""
    return None, "no mask, no lengths"


def pad_value_of(tensor: Tensor, real: Tensor, default: float) -> float:
    """The one value ``tensor`` holds at padded positions, else ``default``."""
    padded = tensor[~real.to(tensor.device)].flatten()
    return float(padded[0]) if padded.numel() and bool((padded == padded[0]).all()) else default


def resize_batch(batch: Any, padding: Padding, length: int, fill: Fill) -> Any:
    """``batch`` cut or padded (with ``fill``, marked as padding) to ``length`` positions."""

    def fit(tensor: Tensor, value: float) -> Tensor:
        if length <= tensor.shape[1]:
            return tensor[:, :length]
        more = tensor.new_full((tensor.shape[0], length - tensor.shape[1], *tensor.shape[2:]), value)
        return torch.cat([tensor, more], dim=1)

    changes: dict[int | str, Tensor] = {key: fit(batch[key], fill[key]) for key in padding.sequence_keys}
    mark, value = batch[padding.key], padding.pad_value  # a mask, or lengths (no pad value)
    changes[padding.key] = mark.clamp_max(length) if value is None else fit(mark, value)
    return replace_entries(batch, changes)


class PaddingCheck(SanityCheck):
    """The output depends on what the task says: ``extra`` positions marked as padding change neither the loss
    nor the outputs at real positions (the guide has the rules). Cost: three to six ``training_step`` calls.

    Args:
        num_samples: Samples of the first training batch used.
        extra: Padding positions appended to every sequence.
        padding_key: The mask's or lengths' key (index) in the batch, when its name does not say.

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
        **options: Unpack[CheckOptions],
    ) -> None:
        super().__init__(**options)
        check_int("num_samples", num_samples, minimum=1)
        check_int("extra", extra, minimum=1)
        check_key("padding_key", padding_key)
        self.num_samples, self.extra, self.padding_key = num_samples, extra, padding_key

    @override
    def check(self, context: CheckContext) -> CheckResult:
        batch = context.train_batches(1)[0]
        padding, why = None, "the batch is a single tensor"
        if not isinstance(batch, Tensor) and isinstance(batch, (Mapping, Sequence)):
            keys = context.keys()
            input_key, target_key = input_key_of(batch, keys[0]), target_key_of(batch, keys[1])
            padding, why = find_padding(batch, input_key, target_key, self.padding_key)
        if padding is None:
            raise CheckSkipped(f"the batch does not say what is padding ({why}); pass `padding_key=`.")
        size = int(padding.real.shape[0])
        if size > self.num_samples:
            batch = slice_batch(batch, self.num_samples, size)
            padding, _ = find_padding(batch, input_key, target_key, padding.key)
            assert padding is not None
        model = context.copy_model().eval()
        context.require_automatic_optimization(model)
        if padding.convention == LEFT:
            return self._padded_on_the_left(context, model, batch, padding, input_key)
        fill: Fill = {}
        for key in padding.sequence_keys:  # the one value at padded positions; a target's: ignore_index
            value = pad_value_of(batch[key], padding.real, math.nan)
            if math.isnan(value) and key == target_key and key != input_key:
                with torch.no_grad():
                    value = _ignore_index(context.loss_call(model, batch))
            fill[key] = 0.0 if math.isnan(value) else value
        details: dict[str, Any] = {
            "padding": {
                "kind": "lengths" if padding.pad_value is None else "mask",
                "key": padding.key,
                "convention": padding.convention,
                "padded_fraction": round(1.0 - float(padding.real.float().mean()), 4),
                "fill": fill,
            },
            "extra": self.extra,
        }
        first, second = (_observe(context, model, batch, context.seed + s) for s in (0, 1))  # the noise

        def padded(extra: int, padding: Padding) -> dict[str, NoiseVerdict]:
            """The batch as it is now padded by ``extra`` more positions, against its two passes."""
            try:
                longer = resize_batch(batch, padding, padding.real.shape[1] + extra, fill)
                extended = _observe(context, model, longer, context.seed)
            except (CheckSkipped, CheckInconclusive, CannotRunOnCopy):
                raise
            except Exception as err:
                why = f"your code raised {type(err).__name__} on the batch padded by {extra} positions"
                raise _LongerRefused(f"{why} ({str(err)[:36]}): no verdict") from err
            return _compare(first, second, extended, padding.real)

        try:
            verdicts = padded(self.extra, padding)
        except _LongerRefused as refused:  # a position limit: make room inside T and pad back to T
            if padding.real.shape[1] <= self.extra:
                raise CheckInconclusive(str(refused)) from refused
            details["cut_to"] = room = padding.real.shape[1] - self.extra
            batch = resize_batch(batch, padding, room, fill)
            padding = dataclasses.replace(padding, real=padding.real[:, :room])
            with perturbed(f"the batch cut to {room} positions"):
                first, second = (_observe(context, model, batch, context.seed + s) for s in (0, 1))
            try:
                verdicts = padded(self.extra, padding)
            except _LongerRefused as again:
                raise CheckInconclusive(f"{refused}; cut to {room} positions, again") from again
        # reading padding grows with its amount, float noise hardly: look again with more of it
        if worst(verdicts)[1].status == "inconclusive":
            more = max(self.extra * 4, padding.real.shape[1])
            with contextlib.suppress(_LongerRefused):
                verdicts = padded(more, padding)
                details["extra"] = more
        varied = _other_padded_targets(context, model, batch, padding, target_key, fill, self.extra)
        if varied is not None and worst(verdicts)[1].status != "fail":  # padded targets must not matter
            with perturbed("other labels at padded positions"):
                third = _observe(context, model, varied, context.seed)
            found = _compare(first, second, third, padding.real)["loss"]
            verdicts["loss with other targets at padded positions"] = found
        details["quantities"] = {n: {k: getattr(v, k) for k in _REPORTED} for n, v in verdicts.items()}
        name, found = worst(verdicts)  # never empty: the loss is always compared
        moved = f"{name} moved {found.deviation:.2g} (tolerance {found.tolerance:.2g})"
        added = f"{details['extra']} padding positions"
        if found.status == "fail":
            only_loss = all(n.startswith("loss") for n, v in verdicts.items() if v.status == "fail")
            action = "Pass the mask to every pooling/attention/RNN (pack_padded_sequence); pool by mask sums."
            if only_loss and len(verdicts) > 1:
                action = "Mask the loss at padded positions (ignore_index=-100, or divide by the mask's sum)."
            if details["padding"]["padded_fraction"] == 0:  # of the batch as loaded, before any cut
                details["latent"] = True
                summary = f"the model would read padding ({added}: {moved}); these batches hold none yet"
                return self.verdict("warn", summary, details, action=action)
            return self.verdict("fail", f"the model reads padding: {added}, {moved}", details, action=action)
        if found.status == "inconclusive":
            raise CheckInconclusive(f"{added} changed the results slightly, between noise and a bug: {moved}")
        return self.verdict("pass", f"padding is ignored: {added} left loss and outputs unchanged", details)

    def _padded_on_the_left(
        self, context: CheckContext, model: Any, batch: Any, padding: Padding, input_key: Key
    ) -> CheckResult:
        """The real positions a right-padded reading of the lengths skips must move the loss or the output."""
        inputs, skipped = batch[input_key], padding.real & ~padding.real.flip(1)
        details: dict[str, Any] = {"padding": {"kind": "lengths", "key": padding.key, "convention": LEFT}}
        details["skipped_real_positions"] = count = int(skipped.sum())  # sync: once
        if not count:
            raise CheckSkipped("padded on the left, but no row is short enough to tell how it is read.")
        changed, skipped = inputs.clone(), skipped.to(inputs.device)
        changed[skipped] = _replacement(inputs, context.seed)[skipped]  # causality's: other values in range
        first, second = (_observe(context, model, batch, context.seed + s) for s in (0, 1))
        with perturbed("real positions past `lengths` changed (the batch is padded on the left)"):
            moved = _observe(context, model, replace_entries(batch, {input_key: changed}), context.seed)
        verdicts = _compare(first, second, moved, padding.real)
        details["quantities"] = {n: {k: getattr(v, k) for k in _REPORTED} for n, v in verdicts.items()}
        name, found = worst(verdicts)
        at = f"{count} real positions past batch[{padding.key!r}]'s lengths"
        if found.status == "fail":
            return self.verdict("pass", f"padded on the left, and the model reads the last {at}", details)
        if found.status == "inconclusive":
            raise CheckInconclusive(f"padded on the left; changing the {at} moved the {name} slightly")
        summary = f"padded on the left, read as padded on the right: changing the {at} moves nothing"
        action = "Pad on the right where lengths say positions >= length are padding (pack_padded_sequence)."
        return self.verdict("fail", summary, details, action=action)


def _other_padded_targets(
    context: CheckContext, model: Any, batch: Any, padding: Padding, target_key: Key, fill: Fill, extra: int
) -> Any:
    """The batch padded by ``extra`` with a real label at every padded target, or ``None``."""
    if target_key is None or target_key not in padding.sequence_keys:
        return None
    longer = resize_batch(batch, padding, padding.real.shape[1] + extra, fill)
    with torch.no_grad():
        call = context.loss_call(model, longer)
    value = fill[target_key]
    if call is None or call.target is None or value == _ignore_index(call):
        return None
    weight = call.kwargs.get("weight")
    if isinstance(weight, Tensor) and 0 <= value < weight.numel() and float(weight[int(value)]) == 0:
        return None
    target: Tensor = longer[target_key]
    real = F.pad(padding.real, (0, extra)).to(target.device)  # the added positions are padding
    others = target[real][target[real] != value]
    if others.numel() == 0:
        return None
    changed = target.clone()
    changed[~real] = others.flatten()[0]
    return replace_entries(longer, {target_key: changed})


class _LongerRefused(Exception):
    """The model raised on a longer batch (it takes one sequence length, or has a position limit)."""


def _ignore_index(call: Any) -> float:
    """A loss call's ``ignore_index`` (cross-entropy / NLL), else NaN (no value to ignore)."""
    if call is None or call.function not in _IGNORING_LOSSES:
        return float("nan")
    return float(call.kwargs.get("ignore_index", -100))


def _observe(context: CheckContext, model: Any, batch: Any, seed: int) -> Observation:
    """The loss of ``training_step`` on ``batch`` and the module's output seen meanwhile, under ``seed``."""
    with torch.no_grad(), context.capture_forward(model) as captured:
        loss = seeded(seed, context.training_loss, model, batch)
    output = captured.last()
    return loss.detach(), None if output is None else output.detach()


def _compare(x: Observation, y: Observation, longer: Observation, real: Tensor) -> dict[str, NoiseVerdict]:
    verdicts = {"loss": _judge(x[0], y[0], longer[0])}
    a, b, c = x[1], y[1], longer[1]
    if a is None or b is None or c is None or a.shape != b.shape:
        return verdicts
    grown = c.ndim == a.ndim >= 2 and c.shape[1] > a.shape[1] and c.shape[2:] == a.shape[2:]
    if a.shape == c.shape:  # no time axis (pooled, or cut to the real lengths): compare all of it
        verdicts["output"] = _judge(a, b, c)
    elif grown and a.shape[:2] == real.shape:  # [B, T, ...]: the first T positions, real ones
        real = real.to(a.device)
        verdicts["output at real positions"] = _judge(a[real], b[real], c[:, : a.shape[1]][real])
    return verdicts


def _judge(a: Tensor, b: Tensor, longer: Tensor) -> NoiseVerdict:
    lost = bool(torch.isfinite(a).all()) and not bool(torch.isfinite(longer).all())  # finite became not
    deviation = float("inf") if lost else _gap(longer.double() - a.double())
    return judge_deviation(deviation, _gap(a.double() - b.double()), _gap(a.double()), a.dtype, ulps=_ULPS)


def _gap(x: Tensor) -> float:
    return float(x.abs().nan_to_num().max()) if x.numel() else 0.0
