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
from typing import Any, ClassVar, TypeVar

from torch.optim import Optimizer

from lightning_recipes.optim._common import backfill_group_options, defaults_keys

__all__ = ["ROUTES", "ImplementationRecord", "note_route", "records_implementation"]

# The paths, fastest first: a step that used several (the native kernels for float32 tensors and the loop for
# complex ones) names them in this order, joined by "+".
ROUTES = ("native", "foreach", "for_loop")
_active = threading.local()
F = TypeVar("F", bound=Callable[..., Any])


class ImplementationRecord(Optimizer):
    """Base of our optimizers: ``implementation_used`` is ``None`` until a step, then the path(s) that ran;
    group options are validated when a group is added and back-filled when an older state is loaded.

    ``implementation_used`` is a plain instance attribute, so that Fabric's and Lightning's optimizer
    wrappers, which forward unknown attributes to the optimizer, read the live value.
    """

    implementation_used: str | None
    #: Every group option and its default, back-filled into groups saved before an option existed.
    _group_defaults: ClassVar[dict[str, Any]] = {}

    @staticmethod
    def _validate_group(group: dict[str, Any]) -> None:
        """Raise ``ValueError`` for a group option out of range (the subclass's checks)."""

    def __getstate__(self) -> dict[str, Any]:
        """Torch's state and ``implementation_used``: a pickled or deep-copied optimizer says what its
        original last ran."""
        state: dict[str, Any] = super().__getstate__()  # type: ignore[misc]
        state["implementation_used"] = self.__dict__.get("implementation_used")
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        """As torch's (``load_state_dict`` calls it too), back-filling group options a state saved before they
        existed lacks, and ``implementation_used`` (``None``)."""
        before = defaults_keys(self, state)
        super().__setstate__(state)
        self.__dict__.setdefault("implementation_used", None)
        backfill_group_options(self, self._group_defaults, before)

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        """As torch's, with the group's options (the defaults filled in) validated before it joins;
        ``Optimizer.__init__`` calls it, so ``implementation_used`` exists from construction on."""
        self.__dict__.setdefault("implementation_used", None)
        if isinstance(param_group, dict):
            self._validate_group({**self.defaults, **param_group})
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
