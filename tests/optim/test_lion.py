"""Lion against the paper's Algorithm 2 in float64, implementations against each other, state, errors."""

from __future__ import annotations

import copy
import io

import pytest
import torch

from lightning_recipes.optim import Lion, lion_update_
from tests.helpers.optim_runs import CountSyncs as _CountSyncs
from tests.helpers.optim_runs import lion_against_reference as _run_against_reference
from tests.optim._reference import grads_sequence, lion_reference_step


@pytest.mark.parametrize("implementation", ["for_loop", "foreach", "native", "auto"])
def test_matches_paper_reference_float64(implementation):
    assert _run_against_reference(implementation) < 1e-12


def test_reference_detects_a_wrong_update():
    """The comparison can fail: an update with the decay applied after the sign step differs."""
    p, g, m = (
        torch.ones(4, dtype=torch.float64),
        torch.full((4,), 0.5, dtype=torch.float64),
        torch.zeros(4, dtype=torch.float64),
    )
    ref, _ = lion_reference_step(p, g, m, lr=0.1, beta1=0.9, beta2=0.99, wd=1.0)
    wrong = (p - 0.1 * torch.sign(0.1 * g)) * (1 - 0.1 * 1.0)
    assert (ref - wrong).abs().max() > 1e-3


def test_foreach_matches_for_loop_float32():
    torch.manual_seed(0)
    shapes = [(64, 32), (32,), (17, 3, 3), (1,)]
    a = [torch.randn(s) for s in shapes]
    b = [t.clone() for t in a]
    ma, mb = [torch.zeros_like(t) for t in a], [torch.zeros_like(t) for t in a]
    for grads in grads_sequence(shapes, 10, seed=5, dtype=torch.float32):
        lion_update_(
            a, grads, ma, lr=1e-3, beta1=0.9, beta2=0.99, weight_decay=0.1, implementation="for_loop"
        )
        lion_update_(b, grads, mb, lr=1e-3, beta1=0.9, beta2=0.99, weight_decay=0.1, implementation="foreach")
    for x, y, mx, my in zip(a, b, ma, mb):
        torch.testing.assert_close(x, y, rtol=1e-6, atol=1e-7)
        torch.testing.assert_close(mx, my, rtol=1e-6, atol=1e-8)


def test_foreach_chunks_cover_every_tensor():
    from lightning_recipes.optim._common import foreach_chunks

    sizes = [torch.empty(n) for n in (5, 3, 9, 1, 4)]
    chunks = list(foreach_chunks(sizes, max_numel=8))
    assert [[t.numel() for t in c[0]] for c in chunks] == [[5, 3], [9], [1, 4]]


@pytest.mark.parametrize("implementation", ["for_loop", "foreach", "native", "auto"])
def test_step_makes_no_tensor_to_host_conversion(implementation):
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Linear(8, 2))
    optimizer = Lion(model.parameters(), weight_decay=0.1, implementation=implementation)
    model(torch.randn(4, 8)).sum().backward()
    optimizer.step()
    with _CountSyncs() as counter:
        optimizer.step()
    assert counter.count == 0


def test_state_dict_lockstep_resume():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.Linear(5, 3))
    optimizer = Lion(model.parameters(), lr=1e-3, weight_decay=0.1)
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
    for p in clone.parameters():  # a fresh run: wrong weights and no state until the checkpoint is loaded
        p.data.normal_()
    resumed = Lion(clone.parameters(), lr=1e-3, weight_decay=0.1)
    clone.load_state_dict(saved["model"])
    resumed.load_state_dict(saved["optimizer"])
    for grads in grads_list[4:]:
        apply(model, optimizer, grads)
        apply(clone, resumed, grads)
    for p, q in zip(model.parameters(), clone.parameters()):
        assert torch.equal(p, q)
    assert torch.equal(optimizer.state[model[0].weight]["exp_avg"], resumed.state[clone[0].weight]["exp_avg"])


@pytest.mark.parametrize("implementation", ["foreach", "native"])
def test_mixed_dtypes_across_and_within_groups(implementation):
    p64 = torch.nn.Parameter(torch.randn(4, 3, dtype=torch.float64))
    p32 = torch.nn.Parameter(torch.randn(4, 3))
    p16 = torch.nn.Parameter(torch.randn(5, dtype=torch.bfloat16))
    start = [p.detach().double().clone() for p in (p64, p32, p16)]
    optimizer = Lion(
        [{"params": [p64, p32]}, {"params": [p16], "lr": 0.5}], lr=0.25, implementation=implementation
    )
    for p in (p64, p32, p16):
        p.grad = torch.ones_like(p)
    optimizer.step()
    # sign(c) = 1 everywhere, no decay: each parameter moves down by exactly its group's lr
    assert torch.equal(p64.detach(), start[0] - 0.25)
    torch.testing.assert_close(p32.detach().double(), start[1] - 0.25)
    torch.testing.assert_close(p16.detach().double(), start[2] - 0.5, atol=2e-2, rtol=0)
    assert optimizer.state[p16]["exp_avg"].dtype == torch.bfloat16


def test_sparse_gradients_are_rejected():
    embedding = torch.nn.Embedding(10, 3, sparse=True)
    optimizer = Lion(embedding.parameters())
    embedding(torch.tensor([1, 2])).sum().backward()
    with pytest.raises(RuntimeError, match="sparse gradients"):
        optimizer.step()


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"lr": 0.0}, "`lr` must be a finite number > 0, got 0.0"),
        ({"lr": float("nan")}, "`lr`"),
        ({"betas": (1.0, 0.99)}, r"`betas\[0\]` must be in \[0, 1\), got 1.0"),
        ({"betas": (0.9, -0.1)}, r"`betas\[1\]`"),
        ({"betas": 0.9}, "`betas` must be a pair"),
        ({"weight_decay": -1.0}, "`weight_decay` must be a finite number >= 0, got -1.0"),
        ({"implementation": "fused"}, "`implementation` must be one of"),
    ],
)
def test_invalid_arguments_name_the_argument(kwargs, match):
    with pytest.raises(ValueError, match=match):
        Lion([torch.nn.Parameter(torch.zeros(2))], **kwargs)


def test_invalid_group_override_is_rejected_at_construction():
    with pytest.raises(ValueError, match="`lr`"):
        Lion([{"params": [torch.nn.Parameter(torch.zeros(2))], "lr": -1.0}])


def test_closure_and_params_without_grad():
    a, b = torch.nn.Parameter(torch.ones(2)), torch.nn.Parameter(torch.ones(2))
    optimizer = Lion([a, b], lr=0.1)

    def closure():
        optimizer.zero_grad()
        loss = (a * 2).sum()
        loss.backward()
        return loss

    assert float(optimizer.step(closure).detach()) == 4.0
    assert torch.allclose(a.detach(), torch.full((2,), 0.9))
    assert torch.equal(b.detach(), torch.ones(2)) and b not in optimizer.state
