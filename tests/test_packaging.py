"""The declared dependency floor is the one CI tests (`make test-floor`)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_lightning_floor_in_pyproject_is_the_version_ci_tests():
    # (a regular expression, not tomllib: Python 3.10 is supported and has none)
    floor = re.search(r'^\s*"lightning>=([\d.]+)"', (ROOT / "pyproject.toml").read_text(), re.MULTILINE)
    assert floor, "pyproject.toml declares no `lightning>=` floor"
    declared = floor.group(0).strip()
    tested = re.search(r"^LIGHTNING_FLOOR := ([\d.]+)$", (ROOT / "Makefile").read_text(), re.MULTILINE)
    assert tested, "Makefile has no LIGHTNING_FLOOR"
    assert tested.group(1).split(".")[:2] == floor.group(1).split(".")[:2], (declared, tested.group(1))
    assert "make test-floor" in (ROOT / ".ci" / "run").read_text()
