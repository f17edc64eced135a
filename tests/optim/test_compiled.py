"""The torch.compile'd paths: same results as the paper references, one compile per dtype, eager fallback.

Compiling costs ~10 s per kernel and dtype on a cold cache, so every compiled check lives in this module
and reuses the two float64 kernels (Lion, Lamb) that the first tests compile.
"""

from __future__ import annotations

import pytest
import torch
from torch._dynamo.utils import counters  # private, test-only: counts graphs dynamo compiled

from lightning_recipes.optim import Lamb, Lion, _compiled, _native, lion_update_
from lightning_recipes.optim._common import COMPILE_MIN_NUMEL
from tests.helpers import optim_runs

pytestmark = pytest.mark.skipif(
    not _compiled.compile_available(), reason="torch.compile has no C++ compiler here"
)


def test_lion_compiled_matches_paper_reference_float64():
    assert optim_runs.lion_against_reference("compiled") < 1e-12


def test_lamb_compiled_matches_paper_reference_float64():
    assert optim_runs.lamb_against_reference("compiled") < 1e-10


def test_no_recompile_for_new_sizes_or_learning_rates():
    graphs = counters["stats"]["unique_graphs"]
    sizes = [(300,), (17, 11), (2, 3, 5, 7)]
    params = [torch.nn.Parameter(torch.randn(s, dtype=torch.float64)) for s in sizes]
    for p in params:
        p.grad = torch.randn_like(p)
    lion, lamb = (
        Lion(params, lr=1e-3, implementation="compiled"),
        Lamb(params, lr=1e-3, implementation="compiled"),
    )
    for step in range(3):
        for optimizer in (lion, lamb):
            optimizer.param_groups[0]["lr"] = 1e-3 * (step + 1)
            optimizer.step()
    assert counters["stats"]["unique_graphs"] == graphs


def test_auto_without_native_kernels_compiles_large_tensors_and_loops_over_small_ones(monkeypatch):
    monkeypatch.setenv("LIGHTNING_RECIPES_NATIVE", "0")
    monkeypatch.setattr(_native, "_state", {})
    monkeypatch.setattr(_compiled, "_KERNELS", {})
    big = torch.nn.Parameter(torch.randn(COMPILE_MIN_NUMEL, dtype=torch.float64))
    small = torch.nn.Parameter(torch.randn(10, dtype=torch.float64))
    start = [big.detach().clone(), small.detach().clone()]
    for p in (big, small):
        p.grad = torch.ones_like(p)
    Lion([big, small], lr=0.5, implementation="auto").step()
    assert "lion" in _compiled._KERNELS
    assert torch.equal(big.detach(), start[0] - 0.5) and torch.equal(small.detach(), start[1] - 0.5)


def test_failing_compiler_falls_back_to_eager_with_a_warning(monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("no compiler")

    monkeypatch.setattr(_compiled, "_KERNELS", {"lion": broken})
    monkeypatch.setattr(_compiled, "_FAILED", set())
    p, g, m = torch.ones(3), torch.tensor([1.0, -1.0, 0.0]), torch.zeros(3)
    with pytest.warns(UserWarning, match="compiling the `lion` update failed"):
        lion_update_(
            [p], [g], [m], lr=0.1, beta1=0.9, beta2=0.99, weight_decay=0.0, implementation="compiled"
        )
    assert torch.allclose(p, torch.tensor([0.9, 1.1, 1.0]))
    assert "lion" in _compiled._FAILED and _compiled.compiled_kernel("lion", broken) is None


def test_disabled_dynamo_means_eager(monkeypatch):
    monkeypatch.setenv("TORCHDYNAMO_DISABLE", "1")
    assert not _compiled.compile_available()
    assert optim_runs.lion_against_reference("compiled", steps=3) < 1e-12
