"""What a model's forward returned while ``training_step`` ran, and its first tensor."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from typing import Any

import torch
from torch import Tensor, nn

from lightning_recipes.harness.isolation import CannotRunOnCopy, preserved_rng

__all__ = ["ForwardCapture", "first_layer_input", "first_tensor", "step_output", "takes_more_than_the_input"]


class ForwardCapture:
    """Forward outputs seen while ``training_step`` ran: the module's own (depth 0), else its last direct
    child's (``training_step`` calls ``self.net(x)``), else the last of the outermost submodules that ran.
    Scalars below the root and loss modules are not outputs. ``input_gradients``: some forward took a
    non-parameter leaf tensor that requires grad (the step differentiates with respect to its input).

    Example:
        >>> import torch
        >>> net, capture = torch.nn.Sequential(torch.nn.Linear(3, 2)), ForwardCapture()
        >>> handle = net[0].register_forward_hook(capture.hook(1))
        >>> tuple(net(torch.zeros(4, 3)).shape), tuple(capture.last().shape)
        ((4, 2), (4, 2))
    """

    def __init__(self) -> None:
        self.outputs: dict[int, Tensor] = {}  # depth -> the last output seen at that depth
        self.input_gradients = False

    def hook(self, depth: int) -> Callable[..., None]:
        def record(_module: nn.Module, args: Any, output: Any) -> None:
            self.input_gradients = self.input_gradients or any(
                isinstance(a, Tensor) and a.requires_grad and a.is_leaf and not isinstance(a, nn.Parameter)
                for a in args
            )
            tensor = first_tensor(output)
            if tensor is not None and (depth == 0 or tensor.ndim > 0):
                self.outputs[depth] = tensor

        return record

    def last(self) -> Tensor | None:
        return self.outputs[min(self.outputs)] if self.outputs else None


def first_tensor(output: Any) -> Tensor | None:
    """The first tensor in a forward output (tensor, tuple/list, dict, or an object with ``.logits``).

    Example:
        >>> import torch
        >>> first_tensor({"loss": torch.tensor(1.0), "logits": torch.zeros(2, 3)}).shape
        torch.Size([2, 3])
    """
    if isinstance(output, Tensor):
        return output
    logits = getattr(output, "logits", None)
    if isinstance(logits, Tensor):
        return logits
    if isinstance(output, Mapping):
        for key in ("logits", "output", "outputs", "pred", "preds"):
            if isinstance(output.get(key), Tensor):
                return output[key]
        output = list(output.values())
    if isinstance(output, (list, tuple)):
        return next((found for item in output if (found := first_tensor(item)) is not None), None)
    return None


def step_output(harness: Any, model: nn.Module, batch: Any) -> Tensor:
    """The output of ``model``'s forward seen while ``training_step`` of ``harness`` (a
    :class:`~lightning_recipes.harness.Harness`) runs on ``batch``: for a ``forward(x, mask)``.

    Raises:
        CannotRunOnCopy: If no output was seen.
    """
    with harness.capture_forward(model) as captured, contextlib.suppress(CannotRunOnCopy):
        harness.training_loss(model, batch)
    output = captured.last()
    if output is None:
        raise CannotRunOnCopy(
            "no output tensor of the module's forward (or of a submodule) was seen while `training_step` "
            "ran; cannot read the model's outputs."
        )
    return output


def first_layer_input(harness: Any, batch: Any) -> tuple[float, float] | None:
    """``(mean, std)`` of the floating input the first learned layer (a weight matrix or kernel) reads in one
    ``training_step`` of ``harness`` on a copy, or ``None`` (none found, or the step failed)."""
    seen: list[Tensor] = []

    def record(_: nn.Module, args: tuple[Any, ...]) -> None:
        if not seen and args and isinstance(args[0], Tensor) and args[0].is_floating_point():
            seen.append(args[0].detach())

    model = harness.copy_model()
    for module in model.modules():
        if getattr(getattr(module, "weight", None), "ndim", 0) >= 2:
            module.register_forward_pre_hook(record)
    with contextlib.suppress(Exception), preserved_rng(), torch.no_grad():  # the user's step: no reading
        harness.training_loss(model, batch)
    return (float(seen[0].mean()), float(seen[0].std())) if seen and seen[0].numel() > 1 else None


def takes_more_than_the_input(err: TypeError) -> bool:
    """Whether ``err`` says a ``forward(x)`` call lacked arguments (``forward(x, lengths)``-style modules)."""
    return "required positional argument" in str(err) or "required keyword-only argument" in str(err)
