"""The suite's numbers do not depend on the CPU CI draws: torch runs the kernels the root conftest pins."""

from __future__ import annotations

import os
import platform
import subprocess
import sys

import pytest
import torch

pytestmark = [
    pytest.mark.lightning_free,
    pytest.mark.skipif(platform.machine().lower() not in {"x86_64", "amd64"}, reason="the pin is x86-64's"),
    pytest.mark.skipif(os.environ.get("LR_KERNELS") == "native", reason="LR_KERNELS=native: no pin asked"),
]


def test_torch_runs_the_pinned_kernels_in_the_test_process() -> None:
    assert os.environ["ATEN_CPU_CAPABILITY"] == "avx2"
    assert torch.backends.cpu.get_cpu_capability() == "AVX2"


def test_a_child_process_inherits_the_pin() -> None:
    """DDP and FSDP2 tests run in subprocesses: their kernels are the parent's."""
    code = "import torch; print(torch.backends.cpu.get_cpu_capability())"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert out.stdout.strip() == "AVX2"
