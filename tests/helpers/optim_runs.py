"""Float64 runs of Lion and Lamb against the paper references (``tests/optim/_reference.py``), shared by the
optimizer tests of every implementation (for_loop/foreach/native), the parametrizations over optimizers and
paths (the native one skipped where its kernels do not build), and a host-sync counter."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from lightning_recipes.optim import Lamb, Lion, _native
from tests.optim._reference import grads_sequence, lamb_reference_step, lion_reference_step

NATIVE_BUILT = pytest.mark.skipif(
    not _native.native_available(),
    reason="the native kernels need Linux, a C compiler and torch built with GNU OpenMP",
)
OPTIMIZERS: dict[str, type[torch.optim.Optimizer]] = {"lion": Lion, "lamb": Lamb}
every_optimizer = pytest.mark.parametrize("name", sorted(OPTIMIZERS))
every_path = pytest.mark.parametrize(
    "implementation", ["for_loop", "foreach", pytest.param("native", marks=NATIVE_BUILT), "auto"]
)

LION_GROUPS = [  # (shapes, overrides)
    ([(8, 6), (6,)], {"lr": 1e-2, "weight_decay": 0.1}),
    ([(5, 4, 3)], {"lr": 3e-3, "weight_decay": 0.0, "betas": (0.95, 0.98)}),
    ([(7,)], {}),
]
LION_DEFAULTS = {"lr": 5e-3, "betas": (0.9, 0.99), "weight_decay": 0.5}


def lion_params(dtype=torch.float64, device="cpu"):
    generator = torch.Generator().manual_seed(3)
    return [
        [
            torch.nn.Parameter(torch.randn(s, generator=generator, dtype=torch.float64).to(device, dtype))
            for s in shapes
        ]
        for shapes, _ in LION_GROUPS
    ]


def lion_against_reference(implementation: str, steps: int = 12, device: str = "cpu") -> float:
    params = lion_params(device=device)
    optimizer = Lion(
        [{"params": ps, **over} for ps, (_, over) in zip(params, LION_GROUPS)],
        **LION_DEFAULTS,
        implementation=implementation,
    )
    shapes = [p.shape for ps in params for p in ps]
    ref_p = [p.detach().to("cpu", copy=True) for ps in params for p in ps]
    ref_m = [torch.zeros_like(p) for p in ref_p]
    hyper = [{**LION_DEFAULTS, **over} for ps, (_, over) in zip(params, LION_GROUPS) for _ in ps]
    worst = 0.0
    for grads in grads_sequence(shapes, steps, seed=11):
        for p, g in zip((p for ps in params for p in ps), grads):
            p.grad = g.to(device, copy=True)
        optimizer.step()
        for i, g in enumerate(grads):
            h = hyper[i]
            ref_p[i], ref_m[i] = lion_reference_step(
                ref_p[i],
                g,
                ref_m[i],
                lr=h["lr"],
                beta1=h["betas"][0],
                beta2=h["betas"][1],
                wd=h["weight_decay"],
            )
        flat = [p for ps in params for p in ps]
        worst = max(worst, max(float((p.detach().cpu() - r).abs().max()) for p, r in zip(flat, ref_p)))
        states = [optimizer.state[p]["exp_avg"].cpu() for p in flat]
        worst = max(worst, max(float((m - r).abs().max()) for m, r in zip(states, ref_m)))
    return worst


# (shapes, overrides); the last tensor of group 0 starts at zero (the trust ratio falls back to 1)
LAMB_GROUPS = [
    ([(8, 6), (6,), (3, 3)], {"lr": 1e-2, "weight_decay": 0.1}),
    ([(5, 4, 3)], {"lr": 3e-3, "weight_decay": 0.0, "betas": (0.95, 0.98), "trust_clip": 0.5}),
    ([(7,)], {"weight_decay": 0.0, "layer_adaptation": False}),
]
LAMB_DEFAULTS = {"lr": 5e-3, "betas": (0.9, 0.999), "eps": 1e-6, "weight_decay": 0.01}


def lamb_against_reference(implementation: str, steps: int = 12, device: str = "cpu") -> float:
    generator = torch.Generator().manual_seed(3)
    params = [
        [
            torch.nn.Parameter(torch.randn(s, generator=generator, dtype=torch.float64).to(device))
            for s in shapes
        ]
        for shapes, _ in LAMB_GROUPS
    ]
    with torch.no_grad():
        params[0][2].zero_()
    optimizer = Lamb(
        [{"params": ps, **over} for ps, (_, over) in zip(params, LAMB_GROUPS)],
        **LAMB_DEFAULTS,
        implementation=implementation,
    )
    flat = [p for ps in params for p in ps]
    hyper = [
        {"trust_clip": None, "layer_adaptation": True, **LAMB_DEFAULTS, **over}
        for ps, (_, over) in zip(params, LAMB_GROUPS)
        for _ in ps
    ]
    ref = [
        (
            p.detach().to("cpu", copy=True),
            torch.zeros_like(p, device="cpu"),
            torch.zeros_like(p, device="cpu"),
        )
        for p in flat
    ]
    worst = 0.0
    for t, grads in enumerate(grads_sequence([p.shape for p in flat], steps, seed=11), start=1):
        for p, g in zip(flat, grads):
            p.grad = g.to(device, copy=True)
        optimizer.step()
        for i, g in enumerate(grads):
            h = hyper[i]
            ref[i] = lamb_reference_step(
                *ref[i][:1], g, *ref[i][1:], t, lr=h["lr"], beta1=h["betas"][0], beta2=h["betas"][1],
                eps=h["eps"], wd=h["weight_decay"], adapt=h["layer_adaptation"], trust_clip=h["trust_clip"],
            )  # fmt: skip
        for p, (rp, rm, rv) in zip(flat, ref):
            state = optimizer.state[p]
            assert float(state["step"]) == t
            for got, want in ((p.detach(), rp), (state["exp_avg"], rm), (state["exp_avg_sq"], rv)):
                got = got.cpu()
                worst = max(worst, float(((got - want).abs() / (want.abs() + 1e-3)).max()))
    return worst


class CountSyncs(TorchDispatchMode):
    """Counts tensor-to-host conversions (``.item()``, ``float(t)``, ``bool(t)``) while active."""

    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        if func is torch.ops.aten._local_scalar_dense.default:
            self.count += 1
        return func(*args, **(kwargs or {}))
