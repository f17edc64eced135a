"""Lion (EvoLved Sign Momentum, Chen et al. 2023): the pure update function and the optimizer."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, ClassVar, NamedTuple

import torch
from torch import Tensor

from lightning_recipes._validation import check_betas, check_non_negative, check_positive
from lightning_recipes.optim._common import (
    Implementation,
    ImplementationRecord,
    check_implementation,
    foreach_chunks,
    note_route,
    run_native,
    run_update,
)

__all__ = ["Lion", "lion_update_"]

_Ts = Sequence[Tensor]


@torch.no_grad()
def lion_update_(
    params: Sequence[Tensor],
    grads: Sequence[Tensor],
    exp_avgs: Sequence[Tensor],
    *,
    lr: float,
    beta1: float,
    beta2: float,
    weight_decay: float,
    implementation: Implementation = "for_loop",
) -> None:
    """One Lion step for every tensor, in place, no host-device sync: ``c = b1 m + (1 - b1) g``; ``p = p (1 -
    lr wd) - lr sign(c)``; ``m = b2 m + (1 - b2) g`` (the paper's Algorithm 2).

    ``implementation``: ``"native"`` (a C kernel on CPU), ``"foreach"``, ``"for_loop"`` or ``"auto"`` (native
    on CPU where it builds, else the loop; foreach off CPU); ``"compiled"`` is deprecated (runs as ``auto``).

    Example:
        >>> import torch
        >>> p, g, m = torch.ones(3), torch.tensor([0.5, -2.0, 0.0]), torch.zeros(3)
        >>> lion_update_([p], [g], [m], lr=0.1, beta1=0.9, beta2=0.99, weight_decay=0.0)
        >>> p, m
        (tensor([0.9000, 1.1000, 1.0000]), tensor([ 0.0050, -0.0200,  0.0000]))
    """
    check_implementation(implementation)
    if params:
        hp = _Hyper(lr, beta1, beta2, weight_decay)
        run_update(_ROUTES, (params, grads, exp_avgs), hp, implementation, local_shards=True)


class _Hyper(NamedTuple):
    lr: float
    beta1: float
    beta2: float
    weight_decay: float


def _lion_for_loop(params: _Ts, grads: _Ts, exp_avgs: _Ts, hp: _Hyper) -> None:
    lr, beta1, beta2, weight_decay = hp
    note_route("for_loop")
    for param, grad, exp_avg in zip(params, grads, exp_avgs):
        if weight_decay != 0.0:
            param.mul_(1.0 - lr * weight_decay)
        update = exp_avg.lerp(grad, 1.0 - beta1).sign_()
        param.add_(update, alpha=-lr)
        exp_avg.lerp_(grad, 1.0 - beta2)


def _lion_foreach(params: _Ts, grads: _Ts, exp_avgs: _Ts, hp: _Hyper) -> None:
    lr, beta1, beta2, weight_decay = hp
    note_route("foreach")
    for ps, gs, ms in foreach_chunks(params, grads, exp_avgs):
        if weight_decay != 0.0:
            torch._foreach_mul_(ps, 1.0 - lr * weight_decay)
        updates = torch._foreach_lerp(ms, gs, 1.0 - beta1)
        torch._foreach_sign_(updates)
        torch._foreach_add_(ps, updates, alpha=-lr)
        del updates
        torch._foreach_lerp_(ms, gs, 1.0 - beta2)


def _lion_native(params: _Ts, grads: _Ts, exp_avgs: _Ts, hp: _Hyper) -> None:
    run_native("lion", _lion_for_loop, (params, grads, exp_avgs), hp, counters=False)


_ROUTES = {"for_loop": _lion_for_loop, "foreach": _lion_foreach, "native": _lion_native}


class Lion(ImplementationRecord):
    """Lion, the sign-momentum optimizer found by program search (`Chen et al. 2023
    <https://arxiv.org/abs/2302.06675>`_).

    Every coordinate moves by ``lr`` per step: use an LR 3-10x smaller than AdamW's and a weight decay 3-10x
    larger. One state tensor per parameter, no sync; ``implementation``: see :func:`lion_update_`.

    Example:
        >>> import torch
        >>> model = torch.nn.Linear(4, 2)
        >>> optimizer = Lion(model.parameters(), lr=1e-4, weight_decay=0.1)
        >>> model(torch.randn(8, 4)).pow(2).mean().backward()
        >>> optimizer.step()
        >>> sorted(optimizer.state[model.weight])
        ['exp_avg']
    """

    _group_defaults: ClassVar[dict[str, Any]] = {
        "betas": (0.9, 0.99),
        "weight_decay": 0.0,
        "implementation": "auto",
    }

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 1e-4,
        betas: tuple[float, float] = (0.9, 0.99),
        weight_decay: float = 0.0,
        *,
        implementation: Implementation = "auto",
    ) -> None:
        defaults = {"lr": lr, "betas": betas, "weight_decay": weight_decay, "implementation": implementation}
        super().__init__(params, defaults)

    @staticmethod
    def _validate_group(group: dict[str, Any]) -> None:
        check_positive("lr", group["lr"])
        check_betas(group["betas"])
        check_non_negative("weight_decay", group["weight_decay"])
        check_implementation(group["implementation"])

    step = ImplementationRecord.step  # its own entry on this class's API page

    def _update_group(self, group: dict[str, Any], params: list[Tensor], grads: list[Tensor]) -> None:
        exp_avgs = []
        for param in params:
            state = self.state[param]
            if "exp_avg" not in state:
                state["exp_avg"] = torch.zeros_like(param, memory_format=torch.preserve_format)
            exp_avgs.append(state["exp_avg"])
        lion_update_(params, grads, exp_avgs, **self._update_options(group))
