"""Makes the vendored Lightning test helpers importable as Lightning's test file imports them
(``tests_pytorch.helpers.*``), and keeps pytest from collecting the helpers themselves."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

_VENDORED = str(Path(__file__).parent / "_vendored")
if _VENDORED not in sys.path:
    sys.path.insert(0, _VENDORED)

collect_ignore = ["_vendored"]

_HERE = Path(__file__).parent
# Over 20 s on a 2-core CPU (house rule: mark them slow; they still run in CI): the five two-process
# ddp_spawn cases and the four-epoch resume test.
_SLOW = ("ddp_spawn", "test_resume_early_stopping_from_checkpoint")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if _HERE in item.path.parents and any(key in item.name for key in _SLOW):
            item.add_marker(pytest.mark.slow)
