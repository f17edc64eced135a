"""The environment fixture fails a test that leaks an environment variable, and accepts monkeypatch."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest_plugins = ["pytester"]


def test_leaked_environment_variable_fails_the_test(pytester: pytest.Pytester) -> None:
    pytester.makeconftest((Path(__file__).parent / "conftest.py").read_text())
    pytester.makepyfile(
        test_inner="""
        import os

        def test_leaks():
            os.environ["LEAKED_BY_TEST"] = "1"

        def test_monkeypatched(monkeypatch):
            monkeypatch.setenv("SET_THROUGH_MONKEYPATCH", "1")

        def test_lightning_rendezvous_is_tolerated():
            os.environ["MASTER_PORT"] = "12345"

        def test_next_test_sees_a_clean_environment():
            assert "LEAKED_BY_TEST" not in os.environ and "MASTER_PORT" not in os.environ
        """
    )
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=4, errors=1)
    assert "left them changed: ['LEAKED_BY_TEST']" in result.stdout.str()
