"""Lion and Lamb: the papers' float64 references on every path, float32 agreement, syncs, dtypes, paths."""

from __future__ import annotations

import pytest
import torch

from lightning_recipes.optim import Lamb, Lion, lamb_update_, lion_update_
from lightning_recipes.optim._common import foreach_chunks
from tests.helpers.optim_runs import (
    NATIVE_BUILT,
    OPTIMIZERS,
    CountSyncs,
    lamb_against_reference,
    lion_against_reference,
)
from tests.helpers.optim_runs import every_optimizer as both
from tests.optim._reference import grads_sequence, lion_reference_step

PATHS = ["for_loop", "foreach", "native", "auto"]


@both
@pytest.mark.parametrize("implementation", PATHS)
def test_matches_paper_reference_float64(name, implementation):
    run, tolerance = {"lion": (lion_against_reference, 1e-12), "lamb": (lamb_against_reference, 1e-10)}[name]
    assert run(implementation) < tolerance


def test_reference_detects_a_wrong_update():
    """The comparison can fail: a Lion update with the decay applied after the sign step differs."""
    p, g, m = (torch.full((4,), v, dtype=torch.float64) for v in (1.0, 0.5, 0.0))
    ref, _ = lion_reference_step(p, g, m, lr=0.1, beta1=0.9, beta2=0.99, wd=1.0)
    wrong = (p - 0.1 * torch.sign(0.1 * g)) * (1 - 0.1 * 1.0)
    assert (ref - wrong).abs().max() > 1e-3


def test_lamb_trust_ratio_scales_the_step_to_the_weight_norm():
    """One step on a weight of norm ||w|| moves it by exactly lr * ||w|| (bias corrections cancel)."""
    torch.manual_seed(0)
    p = torch.nn.Parameter(torch.randn(64, 32, dtype=torch.float64) * 0.02)
    p.grad = torch.randn(64, 32, dtype=torch.float64) * 0.01
    before = p.detach().clone()
    Lamb([p], lr=1e-3, weight_decay=0.01, implementation="for_loop").step()
    assert abs(float((p.detach() - before).norm()) / (1e-3 * float(before.norm())) - 1.0) < 1e-12


@both
def test_foreach_matches_for_loop_float32(name):
    shapes = [(64, 32), (32,), (17, 3, 3), (1,)]
    results = []
    for implementation in ("for_loop", "foreach"):
        torch.manual_seed(0)
        params = [torch.randn(s) for s in shapes]
        moments = [[torch.zeros_like(p) for p in params] for _ in range(2)]
        state = [*moments, [torch.zeros(()) for _ in params]]
        for grads in grads_sequence(shapes, 10, seed=5, dtype=torch.float32):
            if name == "lion":
                lion_update_(params, grads, state[0], lr=1e-3, beta1=0.9, beta2=0.99, weight_decay=0.1,
                             implementation=implementation)  # fmt: skip
            else:
                lamb_update_(params, grads, *state, lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-6,
                             weight_decay=0.01, implementation=implementation)  # fmt: skip
        results.append(params + state[0])
    for x, y in zip(*results):
        torch.testing.assert_close(x, y, rtol=1e-6 if name == "lion" else 1e-5, atol=1e-7)


def test_foreach_chunks_cover_every_tensor():
    sizes = [torch.empty(n) for n in (5, 3, 9, 1, 4)]
    chunks = list(foreach_chunks(sizes, max_numel=8))
    assert [[t.numel() for t in c[0]] for c in chunks] == [[5, 3], [9], [1, 4]]


@both
@pytest.mark.parametrize("implementation", PATHS)
def test_step_makes_no_tensor_to_host_conversion(name, implementation):
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Linear(8, 2))
    extra = {"trust_clip": 2.0} if name == "lamb" else {}
    optimizer = OPTIMIZERS[name](model.parameters(), weight_decay=0.1, implementation=implementation, **extra)
    model(torch.randn(4, 8)).sum().backward()
    optimizer.step()
    with CountSyncs() as counter:
        optimizer.step()
    assert counter.count == 0


@pytest.mark.parametrize("implementation", ["foreach", "native"])
def test_lion_mixed_dtypes_across_and_within_groups(implementation):
    p64 = torch.nn.Parameter(torch.randn(4, 3, dtype=torch.float64))
    p32 = torch.nn.Parameter(torch.randn(4, 3))
    p16 = torch.nn.Parameter(torch.randn(5, dtype=torch.bfloat16))
    start = [p.detach().double().clone() for p in (p64, p32, p16)]
    groups = [{"params": [p64, p32]}, {"params": [p16], "lr": 0.5}]
    optimizer = Lion(groups, lr=0.25, implementation=implementation)
    for p in (p64, p32, p16):
        p.grad = torch.ones_like(p)
    optimizer.step()
    # sign(c) = 1 everywhere, no decay: each parameter moves down by exactly its group's lr
    assert torch.equal(p64.detach(), start[0] - 0.25)
    torch.testing.assert_close(p32.detach().double(), start[1] - 0.25)
    torch.testing.assert_close(p16.detach().double(), start[2] - 0.5, atol=2e-2, rtol=0)
    assert optimizer.state[p16]["exp_avg"].dtype == torch.bfloat16


@pytest.mark.parametrize("implementation", ["foreach", "native"])
def test_lamb_mixed_dtypes_across_groups(implementation):
    p64 = torch.nn.Parameter(torch.randn(4, 3, dtype=torch.float64))
    p16 = torch.nn.Parameter(torch.randn(4, 3, dtype=torch.bfloat16))
    optimizer = Lamb([{"params": [p64]}, {"params": [p16]}], lr=1e-2, implementation=implementation)
    for _ in range(3):
        for p in (p64, p16):
            p.grad = torch.ones_like(p)
        optimizer.step()
    assert optimizer.state[p64]["step"].dtype == optimizer.state[p16]["step"].dtype == torch.float32
    assert optimizer.state[p16]["exp_avg"].dtype == torch.bfloat16
    assert torch.isfinite(p16).all() and torch.isfinite(p64).all()


# ---- which path ran (issue #26) ----------------------------------------------------------------------------


def _stepped(cls: type, implementation: str, dtype: torch.dtype = torch.float32) -> torch.optim.Optimizer:
    model = torch.nn.Linear(4, 2).to(dtype)
    optimizer = cls(model.parameters(), implementation=implementation)
    assert optimizer.implementation_used is None  # nothing ran yet
    model(torch.randn(3, 4, dtype=dtype)).pow(2).sum().backward()
    optimizer.step()
    return optimizer


@pytest.mark.parametrize("cls", [Lion, Lamb])
@pytest.mark.parametrize("implementation", ["for_loop", "foreach"])
def test_the_path_asked_for_is_the_path_reported(cls, implementation):
    assert _stepped(cls, implementation).implementation_used == implementation


@NATIVE_BUILT
@pytest.mark.parametrize("cls", [Lion, Lamb])
def test_auto_on_cpu_reports_native_and_unsupported_dtypes_report_the_loop(cls):
    assert _stepped(cls, "auto").implementation_used == "native"
    assert _stepped(cls, "native", torch.float16).implementation_used == "for_loop"  # no float16 kernel


@NATIVE_BUILT
def test_a_step_with_tensors_on_two_paths_names_both_fastest_first():
    params = [torch.nn.Parameter(torch.ones(4)), torch.nn.Parameter(torch.ones(4, dtype=torch.float16))]
    optimizer = Lion(params, lr=0.1, implementation="native")
    for p in params:
        p.grad = torch.ones_like(p)
    optimizer.step()
    assert optimizer.implementation_used == "native+for_loop"
