"""What a model's forward returned while ``training_step`` ran, and its first tensor."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from typing import Any

from torch import Tensor, nn

__all__ = ["ForwardCapture", "first_tensor", "step_output", "takes_more_than_the_input"]


class ForwardCapture:
    """Forward outputs seen while ``training_step`` ran: the module's own, else its last direct child's,
    else the last of the outermost submodules that ran.

    A direct child's output stands in when ``training_step`` calls ``self.net(x)`` instead of ``self(x)``.
    Scalars and loss modules are not outputs; only the last output of each depth is kept.

    Example:
        >>> import torch
        >>> net = torch.nn.Sequential(torch.nn.Linear(3, 2))
        >>> capture = ForwardCapture()
        >>> handle = net[0].register_forward_hook(capture.hook(1))
        >>> _ = net(torch.zeros(4, 3))
        >>> tuple(capture.last().shape)
        (4, 2)
        >>> handle.remove()
    """

    def __init__(self) -> None:
        self.root: list[Tensor] = []
        self.children: list[Tensor] = []
        self.deeper: dict[int, Tensor] = {}

    def hook(self, depth: int) -> Callable[..., None]:
        def record(_module: nn.Module, _args: Any, output: Any) -> None:
            tensor = first_tensor(output)
            if tensor is None or (depth > 0 and tensor.ndim == 0):
                return
            if depth == 0:
                self.root.append(tensor)
            elif depth == 1:
                self.children.append(tensor)
            else:
                self.deeper[depth] = tensor

        return record

    def last(self) -> Tensor | None:
        if self.root:
            return self.root[-1]
        if self.children:
            return self.children[-1]
        return self.deeper[min(self.deeper)] if self.deeper else None

    def clear(self) -> None:
        self.root.clear()
        self.children.clear()
        self.deeper.clear()


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
        for item in output:
            found = first_tensor(item)
            if found is not None:
                return found
    return None


def step_output(harness: Any, model: nn.Module, batch: Any) -> Tensor:
    """The output of ``model``'s forward observed while ``training_step`` runs on ``batch`` (for a
    ``forward`` that takes more than the input, e.g. ``forward(x, lengths)`` or ``forward(x, mask)``);
    ``harness`` is the :class:`~lightning_recipes.harness.Harness` whose copy and loss it uses.

    Raises:
        CannotRunOnCopy: If no output was seen.
    """
    from lightning_recipes.harness.isolation import CannotRunOnCopy

    with harness.capture_forward(model) as captured, contextlib.suppress(CannotRunOnCopy):
        harness.training_loss(model, batch)
    output = captured.last()
    if output is None:
        raise CannotRunOnCopy(
            "no output tensor of the module's forward (or of a submodule) was seen while `training_step` "
            "ran; cannot read the model's outputs."
        )
    return output


def takes_more_than_the_input(err: TypeError) -> bool:
    """Whether ``err`` says a ``forward(x)`` call lacked arguments (``forward(x, lengths)``-style modules)."""
    return "required positional argument" in str(err) or "required keyword-only argument" in str(err)
