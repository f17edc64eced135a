"""Lion and Lamb on a CUDA device."""

from __future__ import annotations

import pytest
import torch

from lightning_recipes.optim import Lamb, Lion
from tests.helpers.optim_runs import every_optimizer, lamb_against_reference, lion_against_reference

pytestmark = pytest.mark.gpu

ROUTES = ["for_loop", "foreach", "native", "auto"]  # off CPU, native and auto run foreach


@every_optimizer
@pytest.mark.parametrize("implementation", ROUTES)
def test_matches_paper_reference_float64_on_cuda(name, implementation):
    run, tolerance = {"lion": (lion_against_reference, 1e-12), "lamb": (lamb_against_reference, 1e-9)}[name]
    assert run(implementation, device="cuda") < tolerance


def _layout(device: str, dtype: torch.dtype = torch.float32) -> list[torch.nn.Parameter]:
    generator = torch.Generator().manual_seed(0)
    shapes = [(512, 64), (64,), (256, 64), (64, 256), (256,), (3, 3, 8, 8), (1,)]
    params = []
    for shape in shapes:
        p = torch.nn.Parameter((torch.randn(shape, generator=generator) * 0.02).to(device, dtype))
        p.grad = (torch.randn(shape, generator=generator) * 0.01).to(device, dtype)
        params.append(p)
    return params


@pytest.mark.parametrize("optimizer_cls", [Lion, Lamb])
@pytest.mark.parametrize("implementation", ["for_loop", "foreach", "auto"])
def test_step_never_syncs_with_the_host(optimizer_cls, implementation):
    """``set_sync_debug_mode("error")`` raises on any device-to-host sync, from the first step on."""
    params = _layout("cuda")
    optimizer = optimizer_cls(params, lr=1e-3, weight_decay=0.01, implementation=implementation)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        for _ in range(3):
            optimizer.step()
    finally:
        torch.cuda.set_sync_debug_mode("default")
    torch.cuda.synchronize()
    assert all(torch.isfinite(p).all() for p in params)


@pytest.mark.parametrize("optimizer_cls", [Lion, Lamb])
def test_cuda_float32_agrees_with_cpu(optimizer_cls):
    cpu, cuda = _layout("cpu"), _layout("cuda")
    opt_cpu = optimizer_cls(cpu, lr=1e-3, weight_decay=0.01, implementation="for_loop")
    opt_cuda = optimizer_cls(cuda, lr=1e-3, weight_decay=0.01, implementation="auto")
    for _ in range(5):
        opt_cpu.step()
        opt_cuda.step()
    for a, b in zip(cpu, cuda):
        torch.testing.assert_close(b.detach().cpu(), a.detach(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("optimizer_cls", [Lion, Lamb])
def test_bf16_parameters_step_on_cuda(optimizer_cls):
    params = _layout("cuda", torch.bfloat16)
    before = [p.detach().clone() for p in params]
    optimizer = optimizer_cls(params, lr=1e-2, weight_decay=0.0)
    optimizer.step()
    for p, b in zip(params, before):
        assert p.dtype == torch.bfloat16
        assert torch.isfinite(p).all()
        assert not torch.equal(p, b)
