"""The package's own deprecation warning: a ``FutureWarning``, so Python shows it by default (a
``DeprecationWarning`` is hidden outside ``__main__``, and so under LightningCLI and in library code).

Silence ours alone, or turn them into errors to find every use before upgrading (docs/guides/versioning.md)::

    warnings.filterwarnings("ignore", category=LightningRecipesDeprecationWarning)
    python -W error::lightning_recipes.LightningRecipesDeprecationWarning train.py

Example:
    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     warn_deprecated("`old` is deprecated: use `new`.")
    >>> caught[0].category.__name__, issubclass(caught[0].category, FutureWarning)
    ('LightningRecipesDeprecationWarning', True)
"""

from __future__ import annotations

import warnings

__all__ = ["LightningRecipesDeprecationWarning", "warn_deprecated"]


class LightningRecipesDeprecationWarning(FutureWarning):
    """A lightning_recipes feature that is deprecated: it still works, and is removed at the earliest in the
    next minor release after the one that first warned (docs/guides/versioning.md).

    Example:
        >>> issubclass(LightningRecipesDeprecationWarning, FutureWarning)
        True
    """


def warn_deprecated(message: str, stacklevel: int = 2) -> None:
    """Warn ``message`` as a :class:`LightningRecipesDeprecationWarning`; ``stacklevel`` as in
    ``warnings.warn`` (2: the caller's caller, the line that used the deprecated thing).

    Example:
        >>> import warnings
        >>> with warnings.catch_warnings(record=True) as caught:
        ...     warnings.simplefilter("always")
        ...     warn_deprecated("`old` is deprecated: use `new`.")
        >>> str(caught[0].message)
        '`old` is deprecated: use `new`.'
    """
    warnings.warn(message, LightningRecipesDeprecationWarning, stacklevel=stacklevel + 1)
