"""Moved to :mod:`lightning_recipes.checks.cli`; this old path re-exports ``main`` and ``build_parser``.

Example:
    >>> from lightning_recipes.preflight_cli import main
    >>> main.__module__
    'lightning_recipes.checks.cli'
"""

from lightning_recipes.checks.cli import build_parser, main

__all__ = ["build_parser", "main"]
