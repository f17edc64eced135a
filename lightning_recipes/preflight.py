"""Moved to :mod:`lightning_recipes.checks`; this old path re-exports the preflight API and keeps working.

Example:
    >>> from lightning_recipes.preflight import PreflightReport, preflight
    >>> preflight.__module__, PreflightReport.__module__
    ('lightning_recipes.checks.preflight', 'lightning_recipes.checks.report')
"""

from lightning_recipes.checks import (
    CHECKS,
    CheckContext,
    CheckResult,
    CheckSkipped,
    Preflight,
    PreflightError,
    PreflightReport,
    SanityCheck,
    preflight,
)

__all__ = [
    "CHECKS",
    "CheckContext",
    "CheckResult",
    "CheckSkipped",
    "Preflight",
    "PreflightError",
    "PreflightReport",
    "SanityCheck",
    "preflight",
]
