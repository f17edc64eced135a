"""Lamb against the paper's Algorithm 2 (with bias correction) in float64, implementations, state, errors."""

from __future__ import annotations

import copy
import io

import pytest
import torch

from lightning_recipes.optim import Lamb, lamb_update_
from tests.helpers.optim_runs import CountSyncs as _CountSyncs
from tests.helpers.optim_runs import lamb_against_reference as _run_against_reference
from tests.optim._reference import grads_sequence


@pytest.mark.parametrize("implementation", ["for_loop", "foreach", "native", "auto"])
def test_matches_paper_reference_float64(implementation):
    assert _run_against_reference(implementation) < 1e-10


def test_trust_ratio_scales_the_step_to_the_weight_norm():
    """One step on a weight of norm ||w|| moves it by exactly lr * ||w|| (bias corrections cancel)."""
    torch.manual_seed(0)
    p = torch.nn.Parameter(torch.randn(64, 32, dtype=torch.float64) * 0.02)
    p.grad = torch.randn(64, 32, dtype=torch.float64) * 0.01
    before = p.detach().clone()
    Lamb([p], lr=1e-3, weight_decay=0.01, implementation="for_loop").step()
    assert abs(float((p.detach() - before).norm()) / (1e-3 * float(before.norm())) - 1.0) < 1e-12


def test_foreach_matches_for_loop_float32():
    torch.manual_seed(0)
    shapes = [(64, 32), (32,), (17, 3, 3), (1,)]
    a = [torch.randn(s) for s in shapes]
    b = [t.clone() for t in a]
    state_a = [(torch.zeros_like(t), torch.zeros_like(t), torch.zeros(())) for t in a]
    state_b = [(torch.zeros_like(t), torch.zeros_like(t), torch.zeros(())) for t in a]
    for grads in grads_sequence(shapes, 10, seed=5, dtype=torch.float32):
        for params, state, impl in ((a, state_a, "for_loop"), (b, state_b, "foreach")):
            lamb_update_(
                params, grads, *(list(x) for x in zip(*state)), lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-6,
                weight_decay=0.01, implementation=impl,
            )  # fmt: skip
    for x, y in zip(a, b):
        torch.testing.assert_close(x, y, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("implementation", ["for_loop", "foreach", "native", "auto"])
def test_step_makes_no_tensor_to_host_conversion(implementation):
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Linear(8, 2))
    optimizer = Lamb(model.parameters(), trust_clip=2.0, implementation=implementation)
    model(torch.randn(4, 8)).sum().backward()
    optimizer.step()
    with _CountSyncs() as counter:
        optimizer.step()
    assert counter.count == 0


def test_state_dict_lockstep_resume():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.Linear(5, 3))
    optimizer = Lamb(model.parameters(), lr=1e-2)
    grads_list = grads_sequence([p.shape for p in model.parameters()], 8, seed=2, dtype=torch.float32)

    def apply(m, opt, grads):
        for p, g in zip(m.parameters(), grads):
            p.grad = g.clone()
        opt.step()

    for grads in grads_list[:4]:
        apply(model, optimizer, grads)
    buffer = io.BytesIO()
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict()}, buffer)
    buffer.seek(0)
    saved = torch.load(buffer)
    clone = copy.deepcopy(model)
    for p in clone.parameters():
        p.data.normal_()
    resumed = Lamb(clone.parameters(), lr=1e-2)
    clone.load_state_dict(saved["model"])
    resumed.load_state_dict(saved["optimizer"])
    for grads in grads_list[4:]:
        apply(model, optimizer, grads)
        apply(clone, resumed, grads)
    for p, q in zip(model.parameters(), clone.parameters()):
        assert torch.equal(p, q)
    assert float(resumed.state[clone[0].weight]["step"]) == 8


@pytest.mark.parametrize("implementation", ["foreach", "native"])
def test_mixed_dtypes_across_groups(implementation):
    p64 = torch.nn.Parameter(torch.randn(4, 3, dtype=torch.float64))
    p16 = torch.nn.Parameter(torch.randn(4, 3, dtype=torch.bfloat16))
    optimizer = Lamb([{"params": [p64]}, {"params": [p16]}], lr=1e-2, implementation=implementation)
    for _ in range(3):
        for p in (p64, p16):
            p.grad = torch.ones_like(p)
        optimizer.step()
    assert (
        optimizer.state[p64]["step"].dtype == torch.float32
        and optimizer.state[p16]["step"].dtype == torch.float32
    )
    assert optimizer.state[p16]["exp_avg"].dtype == torch.bfloat16
    assert torch.isfinite(p16).all() and torch.isfinite(p64).all()


def test_sparse_gradients_are_rejected():
    embedding = torch.nn.Embedding(10, 3, sparse=True)
    optimizer = Lamb(embedding.parameters())
    embedding(torch.tensor([1, 2])).sum().backward()
    with pytest.raises(RuntimeError, match="sparse gradients"):
        optimizer.step()


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"lr": -1e-3}, "`lr` must be a finite number > 0, got -0.001"),
        ({"betas": (0.9, 1.5)}, r"`betas\[1\]` must be in \[0, 1\), got 1.5"),
        ({"eps": 0.0}, "`eps` must be a finite number > 0, got 0.0"),
        ({"weight_decay": -0.1}, "`weight_decay`"),
        ({"trust_clip": 0.0}, "`trust_clip` must be a finite number > 0"),
        ({"layer_adaptation": "yes"}, "`layer_adaptation` must be a bool"),
        ({"implementation": "cuda"}, "`implementation` must be one of"),
    ],
)
def test_invalid_arguments_name_the_argument(kwargs, match):
    with pytest.raises(ValueError, match=match):
        Lamb([torch.nn.Parameter(torch.zeros(2))], **kwargs)
