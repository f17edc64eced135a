"""The package's deprecation warning, a ``FutureWarning`` (shown by default); ``docs/guides/versioning.md``
tells how to silence it."""

from __future__ import annotations

import sys
import types
import warnings
from typing import Any

__all__ = ["LightningRecipesDeprecationWarning", "moved_module", "warn_deprecated"]


class LightningRecipesDeprecationWarning(FutureWarning):
    """A deprecated feature: it still works, removed at the earliest in the next minor release.

    Example:
        >>> issubclass(LightningRecipesDeprecationWarning, FutureWarning)
        True
    """


def warn_deprecated(message: str, stacklevel: int = 2) -> None:
    """Warn ``message`` as a :class:`LightningRecipesDeprecationWarning` (``stacklevel``: as in ``warn``).

    Example:
        >>> import warnings
        >>> with warnings.catch_warnings(record=True) as caught:
        ...     warnings.simplefilter("always")
        ...     warn_deprecated("`old` is deprecated: use `new`.")
        >>> str(caught[0].message)
        '`old` is deprecated: use `new`.'
    """
    warnings.warn(message, LightningRecipesDeprecationWarning, stacklevel=stacklevel + 1)


class _MovedModule(types.ModuleType):
    """An old module path: each name read from it warns and comes from the first new module that has it."""

    def __init__(self, old: str, new: tuple[types.ModuleType, ...]) -> None:
        super().__init__(old)
        self._new = new

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        for module in self._new:
            if hasattr(module, name):
                warn_deprecated(f"`{self.__name__}` is deprecated: import `{name}` from `{module.__name__}`.")
                return getattr(module, name)
        raise AttributeError(f"module {self.__name__!r} has no attribute {name!r}")


def moved_module(old: str, *new: types.ModuleType) -> None:
    """Keep the module path ``old`` importable after its contents moved to ``new``; every name read warns.

    Example:
        >>> import warnings
        >>> from lightning_recipes.checks import GradFlowCheck
        >>> with warnings.catch_warnings(record=True) as caught:
        ...     warnings.simplefilter("always")
        ...     from lightning_recipes.checks.grad_flow_check import GradFlowCheck as old
        >>> old is GradFlowCheck, "checks.model.grad_flow_check" in str(caught[0].message)
        (True, True)
    """
    sys.modules.setdefault(old, _MovedModule(old, new))
