"""Which implementation ran (issue #26): ``optimizer.implementation_used`` names the path each step took, and
an explicit ``implementation="native"`` without a C compiler warns once per process, naming what runs instead
and the fix."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from lightning_recipes.optim import Lamb, Lion
from lightning_recipes.optim._native import native_available

pytestmark = pytest.mark.lightning_free
ROOT = Path(__file__).resolve().parents[2]


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


SCRIPT = """
import torch
from lightning_recipes.optim import Lamb, Lion
for cls in (Lion, Lamb, Lion):
    model = torch.nn.Linear(4, 2)
    optimizer = cls(model.parameters(), implementation="native")
    for _ in range(2):
        model(torch.randn(3, 4)).sum().backward()
        optimizer.step()
    print(cls.__name__, optimizer.implementation_used)
"""


def test_native_without_a_compiler_warns_once_naming_the_fallback_and_the_fix(tmp_path: Path) -> None:
    # No compiler to be found: $CC points nowhere and PATH holds an empty directory (how _native._compiler
    # looks). Python runs from its absolute path; default warning filters.
    empty = tmp_path / "bin"
    empty.mkdir()
    env = {"HOME": str(tmp_path), "PATH": str(empty), "CC": "/nonexistent/cc", "PYTHONPATH": str(ROOT)}
    env.update({k: v for k, v in os.environ.items() if k.startswith(("LD_", "OMP_"))})
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=240, cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.split() == ["Lion", "for_loop", "Lamb", "for_loop", "Lion", "for_loop"]
    assert result.stderr.count("implementation='native' was asked for") == 1, result.stderr
    assert "no C compiler was found" in result.stderr
    assert "run their 'for_loop' path instead" in result.stderr
    assert "install gcc or clang" in result.stderr and "implementation='foreach'" in result.stderr
