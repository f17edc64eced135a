"""Which implementation ran (issue #26): ``optimizer.implementation_used`` names the path each step took (the
warning for ``implementation="native"`` without a C compiler: tests/test_shown_warnings.py)."""

from __future__ import annotations

import pytest
import torch

from lightning_recipes.optim import Lamb, Lion
from lightning_recipes.optim._native import native_available

pytestmark = pytest.mark.lightning_free


def _stepped(cls: type, implementation: str, dtype: torch.dtype = torch.float32) -> torch.optim.Optimizer:
    model = torch.nn.Linear(4, 2).to(dtype)
    optimizer = cls(model.parameters(), implementation=implementation)
    assert optimizer.implementation_used is None  # nothing ran yet
    model(torch.randn(3, 4, dtype=dtype)).pow(2).sum().backward()
    optimizer.step()
    return optimizer


@pytest.mark.parametrize("cls", [Lion, Lamb])
@pytest.mark.parametrize("implementation", ["for_loop", "foreach"])
def test_the_path_asked_for_is_the_path_reported(cls: type, implementation: str) -> None:
    assert _stepped(cls, implementation).implementation_used == implementation


@pytest.mark.skipif(not native_available(), reason="no C compiler or OpenMP: no native kernels here")
@pytest.mark.parametrize("cls", [Lion, Lamb])
def test_auto_on_cpu_reports_native_and_unsupported_dtypes_report_the_loop(cls: type) -> None:
    assert _stepped(cls, "auto").implementation_used == "native"
    assert _stepped(cls, "native", torch.float16).implementation_used == "for_loop"  # no float16 kernel


def test_a_step_with_tensors_on_two_paths_names_both_fastest_first() -> None:
    if not native_available():
        pytest.skip("no C compiler / OpenMP here: the native kernels cannot build")
    params = [torch.nn.Parameter(torch.ones(4)), torch.nn.Parameter(torch.ones(4, dtype=torch.float16))]
    optimizer = Lion(params, lr=0.1, implementation="native")
    for p in params:
        p.grad = torch.ones_like(p)
    optimizer.step()
    assert optimizer.implementation_used == "native+for_loop"
