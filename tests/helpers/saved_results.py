"""Comparing a check's result with one stored by older code (the split checks' regression tests)."""

from __future__ import annotations

from typing import Any

import pytest


def assert_same_as_saved(got: Any, saved: Any, where: str = "") -> None:
    """Equal, floats up to round-off (the saved numbers came from another build of the same arithmetic);
    dict keys in the same order, lists of the same length, every other value of the same type and equal."""
    if isinstance(saved, float) and isinstance(got, float):
        assert got == pytest.approx(saved, rel=1e-6, abs=1e-9), (where, got, saved)
    elif isinstance(saved, dict):
        assert isinstance(got, dict) and list(got) == list(saved), (where, got, saved)
        for key in saved:
            assert_same_as_saved(got[key], saved[key], f"{where}.{key}")
    elif isinstance(saved, list):
        assert isinstance(got, list) and len(got) == len(saved), (where, got, saved)
        for i, (a, b) in enumerate(zip(got, saved)):
            assert_same_as_saved(a, b, f"{where}[{i}]")
    else:
        assert type(got) is type(saved) and got == saved, (where, got, saved)
