"""One intra-op thread for every preflight gallery's test, as ``tests/checks/conftest.py`` gives the checks'
tests (the proofs' tiny models ran so when they lived there)."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _one_thread(one_torch_thread: None) -> None:
    """Requests ``one_torch_thread`` (``tests/conftest.py``) for each test."""
