"""Every tuner test runs on one intra-op thread (``one_torch_thread``, tests/conftest.py): small models."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _one_thread(one_torch_thread: None) -> None:
    """Requests ``one_torch_thread`` for every test in this directory."""
