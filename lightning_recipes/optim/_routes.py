"""Which implementation updated the parameters: each path notes itself while an optimizer steps, and the
step leaves the names on ``optimizer.implementation_used`` (the run manifest and the demo report it).

Example:
    >>> import torch
    >>> from lightning_recipes.optim import Lion
    >>> model = torch.nn.Linear(4, 2)
    >>> optimizer = Lion(model.parameters(), implementation="foreach")
    >>> optimizer.implementation_used is None  # nothing ran yet
    True
    >>> model(torch.randn(3, 4)).sum().backward()
    >>> optimizer.step()
    >>> optimizer.implementation_used
    'foreach'
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from torch.optim import Optimizer

__all__ = ["ROUTES", "ImplementationRecord", "note_route", "records_implementation"]

# The paths, fastest first: a step that used several (the native kernels for float32 tensors and the loop for
# complex ones) names them in this order, joined by "+".
ROUTES = ("native", "foreach", "for_loop")
_active = threading.local()
F = TypeVar("F", bound=Callable[..., Any])


class ImplementationRecord(Optimizer):
    """Base of our optimizers: ``implementation_used`` is ``None`` until a step, then the path(s) that ran.

    A plain instance attribute (no class attribute, no property), so that Fabric's and Lightning's optimizer
    wrappers, which subclass the optimizer's class and forward unknown attributes to it, read the live value.
    """

    implementation_used: str | None

    def __getstate__(self) -> dict[str, Any]:
        """Torch's state (``defaults``, ``state``, ``param_groups``) and ``implementation_used``: a pickled or
        deep-copied optimizer says what its original last ran."""
        state: dict[str, Any] = super().__getstate__()  # type: ignore[misc]
        state["implementation_used"] = self.__dict__.get("implementation_used")
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        """As torch's; a state pickled before ``implementation_used`` existed gets ``None``."""
        super().__setstate__(state)
        self.__dict__.setdefault("implementation_used", None)

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        """As torch's; ``Optimizer.__init__`` calls it, so the attribute exists from construction on."""
        self.__dict__.setdefault("implementation_used", None)
        super().add_param_group(param_group)


def note_route(name: str) -> None:
    """Record that path ``name`` updated tensors in the step now running (nothing outside a step)."""
    ran = getattr(_active, "ran", None)
    if ran is not None:
        ran.add(name)


def records_implementation(step: F) -> F:
    """Wrap an optimizer's ``step`` so that, after it, ``self.implementation_used`` names the paths that ran
    (``"native"``, ``"for_loop"``, ``"native+for_loop"`` ...); a step that updated nothing leaves it as it
    was."""

    @functools.wraps(step)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        outer = getattr(_active, "ran", None)
        ran: set[str] = set()
        _active.ran = ran
        try:
            result = step(self, *args, **kwargs)
        finally:
            _active.ran = outer
        if ran:
            self.implementation_used = "+".join(name for name in ROUTES if name in ran)
        return result

    return wrapper  # type: ignore[return-value]
