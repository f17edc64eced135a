"""The harness's one exception: a trial run that cannot be made on a copy of the user's model."""

from __future__ import annotations

__all__ = ["CannotRunOnCopy"]


class CannotRunOnCopy(Exception):
    """Raised when the user's model cannot be tried on a copy; the message says why, in a sentence.

    Manual optimisation, a ``training_step`` that returns no loss, a module that cannot be deep-copied, no
    training data, a model with no observable output. Each caller decides what that means: the sanity
    checks report a ``skip`` with the message, ``find_lr`` and ``lr="find"`` raise a ``ValueError``.

    Example:
        >>> raise CannotRunOnCopy("the module uses manual optimisation.")
        Traceback (most recent call last):
        ...
        lightning_recipes.harness.errors.CannotRunOnCopy: the module uses manual optimisation.
    """
