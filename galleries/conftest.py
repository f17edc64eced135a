"""The gallery proofs' pytest wiring; what they are and how their stamp stays honest: ``galleries/proofs.py``.

The proofs carry the ``gallery_proof`` marker and are deselected unless pytest runs with ``--gallery-proofs``
(``make gallery-proofs``), which writes the stamp when every proof passes. Every test here runs under the
suite's own fixtures and thread split (``tests/conftest.py``: seed 0, no leaked environment variables), as it
did when the galleries lived in ``tests/``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from galleries import proofs
from tests.conftest import _isolate, one_torch_thread, pytest_configure  # noqa: F401 (used by pytest)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        proofs.OPTION,
        action="store_true",
        help="run the gallery proofs (deselected otherwise); when all of them pass, write their stamp "
        "(galleries/proofs.py, `make gallery-proofs`)",
    )


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by marker
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    found = [item for item in items if proofs.is_proof(Path(str(item.path)))]
    for item in found:
        item.add_marker(proofs.MARKER)
    if found and not config.getoption(proofs.OPTION):
        config.hook.pytest_deselected(items=found)
        items[:] = [item for item in items if item not in set(found)]


_proof_outcomes: dict[str, str] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Remember how each gallery proof ended (on the xdist controller too, which writes the stamp)."""
    if proofs.MARKER in report.keywords and (report.when == "call" or report.outcome != "passed"):
        _proof_outcomes[report.nodeid] = "failed" if report.outcome == "failed" else report.outcome


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """With ``--gallery-proofs``, every proof module collected whole (``make gallery-proofs``: ``galleries``),
    no ``-k``, and every proof passed (none failed, none skipped): record the galleries' hash as proven."""
    config = session.config
    if not config.getoption(proofs.OPTION) or hasattr(config, "workerinput"):
        return
    named = [Path(arg).resolve() for arg in config.args if "::" not in arg]
    modules = [proofs.ROOT / module for module in proofs.PROOF_MODULES]
    whole = all(any(path == arg or arg in path.parents for arg in named) for path in modules)
    outcomes = set(_proof_outcomes.values())
    if exitstatus == 0 and whole and not config.option.keyword and outcomes == {"passed"}:
        proofs.write_stamp()
