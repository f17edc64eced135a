"""LAMB (Layer-wise Adaptive Moments, You et al. 2019): the pure update function and the optimizer."""

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

__all__ = ["Lamb", "lamb_update_"]

_Ts = Sequence[Tensor]


@torch.no_grad()
def lamb_update_(
    params: Sequence[Tensor],
    grads: Sequence[Tensor],
    exp_avgs: Sequence[Tensor],
    exp_avg_sqs: Sequence[Tensor],
    steps: Sequence[Tensor],
    *,
    lr: float,
    beta1: float,
    beta2: float,
    eps: float,
    weight_decay: float,
    layer_adaptation: bool = True,
    trust_clip: float | None = None,
    implementation: Implementation = "for_loop",
) -> None:
    """One LAMB step for every tensor, in place, with no host-device sync (step counters ``t`` are 0-dim
    tensors): ``t += 1``; ``m = b1 m + (1 - b1) g``; ``v = b2 v + (1 - b2) g^2``; ``u = m_hat / (sqrt(v_hat) +
    eps) + weight_decay p``; ``r = ||p|| / ||u||`` (1 if a norm is 0 or without ``layer_adaptation``; at most
    ``trust_clip``); ``p -= lr r u``. ``implementation`` as in :func:`~lightning_recipes.optim.lion_update_`.

    Example:
        >>> import torch
        >>> p, g = torch.full((4,), 2.0), torch.tensor([1.0, -1.0, 1.0, -1.0])
        >>> m, v, t = torch.zeros(4), torch.zeros(4), torch.tensor(0.0)
        >>> lamb_update_([p], [g], [m], [v], [t], lr=0.1, beta1=0.9, beta2=0.999, eps=0.0, weight_decay=0.0)
        >>> p, t  # the update has norm ||p||, scaled by lr: each coordinate moves by 0.1 * 2
        (tensor([1.8000, 2.2000, 1.8000, 2.2000]), tensor(1.))
    """
    check_implementation(implementation)
    if params:  # DTensors (FSDP2) take the loop with their own ops: the norms are the whole tensor's
        hp = _Hyper(lr, beta1, beta2, eps, weight_decay, layer_adaptation, trust_clip)
        run_update(
            _ROUTES, (params, grads, exp_avgs, exp_avg_sqs, steps), hp, implementation, local_shards=False
        )


class _Hyper(NamedTuple):
    lr: float
    beta1: float
    beta2: float
    eps: float
    weight_decay: float
    layer_adaptation: bool
    trust_clip: float | None


def _trust_ratio(w_norm: Tensor, u_norm: Tensor, trust_clip: float | None) -> Tensor:
    ratio = torch.where((w_norm > 0) & (u_norm > 0), w_norm / u_norm, torch.ones_like(w_norm))
    return ratio if trust_clip is None else ratio.clamp(max=trust_clip)


def _lamb_for_loop(params: _Ts, grads: _Ts, exp_avgs: _Ts, exp_avg_sqs: _Ts, steps: _Ts, hp: _Hyper) -> None:
    lr, beta1, beta2, eps, weight_decay, layer_adaptation, trust_clip = hp
    note_route("for_loop")
    for param, grad, exp_avg, exp_avg_sq, step in zip(params, grads, exp_avgs, exp_avg_sqs, steps):
        step.add_(1)
        exp_avg.lerp_(grad, 1.0 - beta1)
        exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1.0 - beta2)
        t = step.double() if param.dtype == torch.float64 else step
        bias_correction1 = 1 - torch.pow(beta1, t)
        bias_correction2_sqrt = (1 - torch.pow(beta2, t)).sqrt_()
        update = exp_avg_sq.sqrt().div_(bias_correction2_sqrt).add_(eps)
        torch.div(exp_avg, update, out=update).div_(bias_correction1)
        if weight_decay != 0.0:
            update.add_(param, alpha=weight_decay)
        if layer_adaptation:
            ratio = _trust_ratio(
                torch.linalg.vector_norm(param), torch.linalg.vector_norm(update), trust_clip
            )
            param.addcmul_(update, ratio.to(param.dtype), value=-lr)
        else:
            param.add_(update, alpha=-lr)


def _lamb_foreach(params: _Ts, grads: _Ts, exp_avgs: _Ts, exp_avg_sqs: _Ts, steps: _Ts, hp: _Hyper) -> None:
    note_route("foreach")
    lr, beta1, beta2, eps, weight_decay, layer_adaptation, trust_clip = hp
    # Per group, not per chunk: step counters and bias corrections (0-dim tensors, no sync).
    torch._foreach_add_(list(steps), 1.0)
    dtype = torch.float64 if params[0].dtype == torch.float64 else torch.float32
    step_stack = torch.stack(list(steps)).to(dtype)
    bias_corrections1 = (1 - torch.pow(beta1, step_stack)).unbind(0)
    bias_corrections2_sqrt = (1 - torch.pow(beta2, step_stack)).sqrt_().unbind(0)
    chunks = foreach_chunks(params, grads, exp_avgs, exp_avg_sqs, bias_corrections1, bias_corrections2_sqrt)
    for ps, gs, ms, vs, bc1, bc2_sqrt in chunks:
        torch._foreach_lerp_(ms, gs, 1.0 - beta1)
        torch._foreach_mul_(vs, beta2)
        torch._foreach_addcmul_(vs, gs, gs, value=1.0 - beta2)
        denominators = torch._foreach_sqrt(vs)
        torch._foreach_div_(denominators, bc2_sqrt)
        torch._foreach_add_(denominators, eps)
        torch._foreach_mul_(denominators, bc1)
        updates = torch._foreach_div(ms, denominators)
        del denominators
        if weight_decay != 0.0:
            torch._foreach_add_(updates, ps, alpha=weight_decay)
        if layer_adaptation:
            w_norms = torch.stack(torch._foreach_norm(ps))
            u_norms = torch.stack(torch._foreach_norm(updates))
            ratios = _trust_ratio(w_norms, u_norms, trust_clip).to(ps[0].dtype)
            torch._foreach_mul_(updates, ratios.unbind(0))
        torch._foreach_add_(ps, updates, alpha=-lr)
        del updates


def _lamb_native(params: _Ts, grads: _Ts, exp_avgs: _Ts, exp_avg_sqs: _Ts, steps: _Ts, hp: _Hyper) -> None:
    lists = (params, grads, exp_avgs, exp_avg_sqs, steps)
    run_native("lamb", _lamb_for_loop, lists, hp, counters=True)


_ROUTES = {"for_loop": _lamb_for_loop, "foreach": _lamb_foreach, "native": _lamb_native}


class Lamb(ImplementationRecord):
    """LAMB, Adam moments with a per-tensor trust ratio (`You et al. 2019
    <https://arxiv.org/abs/1904.00962>`_).

    NVLAMB's convention (see :func:`~lightning_recipes.optim.lamb_update_`); no built-in gradient clipping.
    Groups with ``layer_adaptation=False`` take AdamW-like steps. Two state tensors per parameter, no sync;
    ``implementation``: see :func:`~lightning_recipes.optim.lion_update_`.

    Example:
        >>> import torch
        >>> model = torch.nn.Linear(4, 2)
        >>> optimizer = Lamb([
        ...     {"params": [model.weight]},
        ...     {"params": [model.bias], "weight_decay": 0.0, "layer_adaptation": False},
        ... ], lr=1e-3, weight_decay=0.01)
        >>> model(torch.randn(8, 4)).pow(2).mean().backward()
        >>> optimizer.step()
        >>> sorted(optimizer.state[model.weight]), optimizer.state[model.weight]["step"]
        (['exp_avg', 'exp_avg_sq', 'step'], tensor(1.))
    """

    _group_defaults: ClassVar[dict[str, Any]] = {
        "betas": (0.9, 0.999),
        "eps": 1e-6,
        "weight_decay": 0.01,
        "trust_clip": None,
        "layer_adaptation": True,
        "implementation": "auto",
    }

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-6,
        weight_decay: float = 0.01,
        *,
        trust_clip: float | None = None,
        layer_adaptation: bool = True,
        implementation: Implementation = "auto",
    ) -> None:
        options = {"betas": betas, "eps": eps, "weight_decay": weight_decay, "trust_clip": trust_clip}
        options.update(layer_adaptation=layer_adaptation, implementation=implementation)
        super().__init__(params, {"lr": lr, **options})

    @staticmethod
    def _validate_group(group: dict[str, Any]) -> None:
        check_positive("lr", group["lr"])
        check_betas(group["betas"])
        check_positive("eps", group["eps"])
        check_non_negative("weight_decay", group["weight_decay"])
        if group["trust_clip"] is not None:
            check_positive("trust_clip", group["trust_clip"])
        if not isinstance(group["layer_adaptation"], bool):
            raise ValueError(f"`layer_adaptation` must be a bool, got {group['layer_adaptation']!r}.")
        check_implementation(group["implementation"])

    def __setstate__(self, state: dict[str, Any]) -> None:
        """As the base's, and numeric step counters (older states) become float32 tensors, as in torch."""
        super().__setstate__(state)
        for param_state in self.state.values():
            step = param_state.get("step")
            if step is not None and not torch.is_tensor(step):
                param_state["step"] = torch.tensor(float(step), dtype=torch.float32)

    step = ImplementationRecord.step  # its own entry on this class's API page

    def _update_group(self, group: dict[str, Any], params: list[Tensor], grads: list[Tensor]) -> None:
        exp_avgs: list[Tensor] = []
        exp_avg_sqs: list[Tensor] = []
        steps: list[Tensor] = []
        for param in params:
            state = self.state[param]
            if "step" not in state:
                state["step"] = torch.zeros((), dtype=torch.float32, device=param.device)
                state["exp_avg"] = torch.zeros_like(param, memory_format=torch.preserve_format)
                state["exp_avg_sq"] = torch.zeros_like(param, memory_format=torch.preserve_format)
            elif state["step"].device != param.device or state["step"].dtype != torch.float32:
                # torch's load_state_dict leaves "step" where it was saved; move it once
                state["step"] = state["step"].to(device=param.device, dtype=torch.float32)
            exp_avgs.append(state["exp_avg"])
            exp_avg_sqs.append(state["exp_avg_sq"])
            steps.append(state["step"])
        lamb_update_(params, grads, exp_avgs, exp_avg_sqs, steps, **self._update_options(group))
