"""Where a batch says what is padding (a mask entry or a lengths entry), and the same batch with every
sequence ``k`` positions longer, the new positions marked as padding (``padding`` check)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from lightning_recipes.checks import _probe
from lightning_recipes.checks._probe import replace_entries
from lightning_recipes.harness.batches import Key

__all__ = ["LENGTHS_KEYS", "MASK_KEYS", "Padding", "extend_batch", "find_padding"]

MASK_KEYS: tuple[str, ...] = ("attention_mask", "padding_mask", "src_key_padding_mask", "key_padding_mask")
MASK_KEYS += ("tgt_key_padding_mask", "input_mask", "pad_mask", "mask")
"""Dict keys read as a ``[B, T]`` padding mask (and keys ending in ``attention_mask``/``padding_mask``)."""
LENGTHS_KEYS = ("lengths", "length", "lens", "seq_lens", "seq_len", "input_lengths", "sequence_lengths")


@dataclass
class Padding:
    """What the batch says about padding: its ``kind`` (``"mask"``/``"lengths"``) and ``key``, the length
    ``T``, the mask value that marks padding (``pad_value``: 0 as Hugging Face's ``attention_mask``, 1 as
    ``src_key_padding_mask``; ``None`` for lengths), ``real`` (``[B, T]``, True at real positions), the
    ``[B, T, ...]`` entries (``sequence_keys``) and the convention in words."""

    kind: str
    key: int | str
    length: int
    pad_value: float | None
    real: Tensor
    sequence_keys: list[int | str] = field(default_factory=list)
    convention: str = ""

    @property
    def padded_fraction(self) -> float:
        return 1.0 - float(self.real.float().mean())


def _is_binary(t: Tensor) -> bool:
    if t.dtype == torch.bool:
        return True
    return bool(((t == 0) | (t == 1)).all())


def _mask_candidates(batch: Any, entries: list[tuple[int | str, Tensor]], key: Key) -> list[int | str]:
    if key is not None:
        return [key]
    if isinstance(batch, Mapping):
        named: list[int | str] = [k for k in MASK_KEYS if k in batch]
        named += [
            k
            for k, _ in entries
            if isinstance(k, str) and k.endswith(("attention_mask", "padding_mask")) and k not in named
        ]
        return named
    return [k for k, t in entries if t.dtype == torch.bool and t.ndim == 2]  # a tuple: only a bool [B, T]


def _mask_convention(mask: Tensor, name: int | str) -> tuple[float, str]:
    """The value that marks padding: from the name when it says (``*padding*``: True = pad;
    ``attention_mask``: 1 = keep), else from the data (the last value of rows that hold both)."""
    text = name.lower() if isinstance(name, str) else ""
    if "pad" in text:
        return 1.0, "True = padding (by its name)"
    if "attention" in text or text == "input_mask":
        return 0.0, "1 = keep, 0 = padding (by its name)"
    flags = mask != 0
    mixed = flags.any(1) & ~flags.all(1)
    if bool(mixed.any()):
        last = flags[mixed, -1].float().mean()
        pad = 1.0 if float(last) > 0.5 else 0.0
        return pad, f"{'True = padding' if pad else '1 = keep, 0 = padding'} (trailing values of padded rows)"
    if bool(flags.all()):
        return 0.0, "1 = keep (all ones: no padding in this batch)"
    return 1.0, "True = padding (all zeros: no padding in this batch)"


def _sequence_keys(
    entries: list[tuple[int | str, Tensor]], size: int, length: int, skip: Key
) -> list[int | str]:
    return [
        k for k, t in entries if k != skip and t.ndim >= 2 and t.shape[0] == size and t.shape[1] == length
    ]


def find_padding(
    batch: Any, input_key: Key, target_key: Key, padding_key: Key = None
) -> tuple[Padding | None, str]:
    """The padding a batch declares, or ``None`` and why not.

    Example:
        >>> ids = torch.tensor([[5, 6, 0], [7, 0, 0]])
        >>> batch = {"input_ids": ids, "attention_mask": (ids != 0).long()}
        >>> padding, _ = find_padding(batch, "input_ids", None)
        >>> padding.kind, padding.pad_value, padding.sequence_keys, padding.real.sum().item()
        ('mask', 0.0, ['input_ids'], 3)
    """
    entries = [(key, tensor) for key, _, tensor in _probe.entries(batch) if key is not None]
    tensors = dict(entries)
    inputs = tensors.get(input_key) if input_key is not None else None  # type: ignore[arg-type]
    for key in _mask_candidates(batch, entries, padding_key):
        mask = tensors.get(key)
        if mask is None or mask.ndim != 2 or mask.shape[1] < 1 or not _is_binary(mask):
            continue
        pad_value, convention = _mask_convention(mask, key)
        real = (mask != 0) if pad_value == 0.0 else (mask == 0)
        if not _contiguous(real):
            continue  # real positions scattered in a row: another kind of mask (MLM, loss), not padding
        size, length = int(mask.shape[0]), int(mask.shape[1])
        keys = _sequence_keys(entries, size, length, key)
        if keys:
            return Padding("mask", key, length, pad_value, real.bool(), keys, convention), ""
    if inputs is None or inputs.ndim < 2:
        return None, "no mask, and no [B, T, ...] input for lengths"
    size, length = int(inputs.shape[0]), int(inputs.shape[1])
    names: list[int | str] = (
        [padding_key] if padding_key is not None else [k for k, _ in entries if k != target_key]
    )
    if isinstance(batch, Mapping) and padding_key is None:
        names = sorted(names, key=lambda k: k not in LENGTHS_KEYS)  # named lengths first
    for key in names:
        lengths = tensors.get(key)  # type: ignore[arg-type]
        if lengths is None or lengths.ndim != 1 or lengths.shape[0] != size or lengths.is_floating_point():
            continue
        if lengths.dtype == torch.bool or int(lengths.min()) < 1 or int(lengths.max()) > length:
            continue
        real = torch.arange(length, device=lengths.device)[None] < lengths[:, None]
        if not _constant_beyond(inputs, real):
            continue  # positions past the "lengths" hold varying values: not a lengths entry
        keys = _sequence_keys(entries, size, length, key)
        return Padding(
            "lengths", key, length, None, real, keys, "lengths: positions >= length are padding"
        ), ""
    return None, "no mask, no lengths"


def _contiguous(real: Tensor) -> bool:
    """Every row's real positions are a prefix (right padding) or a suffix (left padding) of the row."""
    steps = real.int().diff(dim=1)
    return bool(((steps <= 0).all(1) | (steps >= 0).all(1)).all())


def _constant_beyond(inputs: Tensor, real: Tensor) -> bool:
    padded = inputs[~real.to(inputs.device)]
    return padded.numel() == 0 or bool((padded == padded.flatten()[0]).all())


def pad_value_of(tensor: Tensor, real: Tensor, default: float) -> float:
    """The one value ``tensor`` holds at padded positions, else ``default``."""
    padded = tensor[~real.to(tensor.device)]
    if padded.numel() and bool((padded == padded.flatten()[0]).all()):
        return float(padded.flatten()[0])
    return default


def extend_batch(batch: Any, padding: Padding, extra: int, fill: dict[int | str, float]) -> Any:
    """``batch`` with every sequence entry ``extra`` positions longer, filled with ``fill[key]``; the mask
    marks the new positions as padding; lengths stay as they are."""

    def grow(tensor: Tensor, value: float) -> Tensor:
        shape = (tensor.shape[0], extra, *tensor.shape[2:])
        return torch.cat([tensor, torch.full(shape, value, dtype=tensor.dtype, device=tensor.device)], dim=1)

    changes: dict[int | str, Tensor] = {key: grow(batch[key], fill[key]) for key in padding.sequence_keys}
    if padding.kind == "mask":
        assert padding.pad_value is not None
        changes[padding.key] = grow(batch[padding.key], padding.pad_value)
    return replace_entries(batch, changes)


def truncate_batch(batch: Any, padding: Padding, length: int) -> tuple[Any, Padding]:
    """The first ``length`` positions of every sequence entry (and of the mask; lengths capped at
    ``length``), and the padding of that shorter batch: room for padding inside the model's length limit."""
    changes: dict[int | str, Tensor] = {key: batch[key][:, :length] for key in padding.sequence_keys}
    mark = batch[padding.key]
    changes[padding.key] = mark[:, :length] if padding.kind == "mask" else mark.clamp_max(length)
    return replace_entries(batch, changes), dataclasses.replace(
        padding, length=length, real=padding.real[:, :length]
    )
