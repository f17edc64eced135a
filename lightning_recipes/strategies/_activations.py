"""Measure activation memory: the bytes a forward pass saves for backward, per block and outside blocks."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor, nn

__all__ = ["ActivationMeasurement", "measure_activations"]


class ActivationMeasurement:
    """Result of :func:`measure_activations` (bytes).

    Attributes:
        saved: Everything saved for backward during the forward pass (no activation checkpointing).
        largest: The largest single saved storage (the gradient of it is alive at the backward peak).
        block_inputs: Sum of the inputs of every block (what checkpointing keeps).
        block_max: Most bytes one block saves (what one block's recomputation holds during backward).
        outside: Bytes saved outside any block (embeddings, head, loss).
    """

    def __init__(self, saved: int, largest: int, block_inputs: int, block_max: int, outside: int) -> None:
        self.saved, self.largest = saved, largest
        self.block_inputs, self.block_max, self.outside = block_inputs, block_max, outside

    def total(self, activation_checkpointing: bool) -> int:
        """Activation bytes at the backward peak, with or without checkpointing of the blocks."""
        held = self.outside + self.block_inputs + self.block_max if activation_checkpointing else self.saved
        return min(held, self.saved) + self.largest


def default_forward(model: nn.Module, batch: Any) -> Any:
    """``model(batch)`` for a tensor, ``model(batch[0])`` for a tuple/list, ``model(**batch)`` for a dict."""
    if isinstance(batch, Tensor):
        return model(batch)
    if isinstance(batch, (tuple, list)):
        return model(batch[0])
    if isinstance(batch, dict):
        return model(**batch)
    raise TypeError(f"`sample_batch` must be a Tensor, tuple, list or dict, got {type(batch).__name__}.")


def measure_activations(
    model: nn.Module,
    batch: Any,
    *,
    block_classes: tuple[type[nn.Module], ...] | None = None,
    forward_fn: Callable[[nn.Module, Any], Any] | None = None,
    autocast_dtype: torch.dtype | None = None,
) -> ActivationMeasurement:
    """Run one forward pass on ``batch`` and account every tensor autograd saves for backward.

    Device-agnostic (works on CPU for a GPU plan): parameters are excluded, storages are counted once, and the
    bytes are attributed to the innermost running block so the effect of activation checkpointing can be
    computed. Not counted: allocator rounding/fragmentation and kernel workspaces. The model is not changed
    (no backward is run; gradients are untouched).

    Example:
        >>> import torch
        >>> from lightning_recipes.testing import TinyTransformerLM, TransformerBlock
        >>> model, ids = TinyTransformerLM(), torch.randint(0, 64, (2, 16))
        >>> m = measure_activations(model, ids, block_classes=(TransformerBlock,))
        >>> m.saved > m.outside + m.block_inputs + m.block_max > 0
        True
    """
    forward = forward_fn or default_forward
    param_storages = {p.untyped_storage().data_ptr() for p in model.parameters()}
    seen: dict[int, int] = {}
    per_block: dict[int, int] = {}
    block_inputs = 0
    stack: list[int] = []

    def pack(tensor: Tensor) -> Tensor:
        storage = tensor.untyped_storage()
        key = storage.data_ptr()
        if key and key not in param_storages and key not in seen:
            seen[key] = storage.nbytes()
            owner = stack[-1] if stack else -1
            per_block[owner] = per_block.get(owner, 0) + storage.nbytes()
        return tensor

    def pre_hook(module: nn.Module, args: tuple[Any, ...]) -> None:
        nonlocal block_inputs
        if not stack:  # only outermost blocks are checkpoint units
            block_inputs += sum(a.untyped_storage().nbytes() for a in args if isinstance(a, Tensor))
        stack.append(id(module))

    def post_hook(module: nn.Module, args: tuple[Any, ...], output: Any) -> None:
        stack.pop()

    handles = []
    for module in model.modules():
        if block_classes and isinstance(module, block_classes):
            handles.append(module.register_forward_pre_hook(pre_hook))
            handles.append(module.register_forward_hook(post_hook))
    device_type = next((p.device.type for p in model.parameters()), "cpu")
    autocast = (
        torch.autocast(device_type, dtype=autocast_dtype) if autocast_dtype else contextlib.nullcontext()
    )
    try:
        with torch.enable_grad(), autocast, torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            output = forward(model, batch)
        del output
    finally:
        for handle in handles:
            handle.remove()
    outside = per_block.pop(-1, 0)
    return ActivationMeasurement(
        saved=sum(seen.values()),
        largest=max(seen.values(), default=0),
        block_inputs=block_inputs,
        block_max=max(per_block.values(), default=0),
        outside=outside,
    )
