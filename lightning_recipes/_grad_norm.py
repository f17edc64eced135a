"""Total norms of many tensors, computed on their device with no host-device sync.

Shared by the monitoring and stability callbacks. (First version; `GradNormMonitor`'s issue owns and
optimises it — keep the signature.)
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
from torch import Tensor

__all__ = ["gradients", "total_norm"]


def gradients(parameters: Iterable[Tensor]) -> list[Tensor]:
    """The ``.grad`` of every parameter that has one."""
    return [p.grad for p in parameters if p.grad is not None]


@torch.no_grad()
def total_norm(tensors: list[Tensor], norm_type: float = 2.0) -> Tensor:
    """The ``norm_type``-norm of all ``tensors`` together, as a 0-dim fp32 tensor on their device.

    Only the local values are reduced: for sharded tensors reduce across ranks afterwards.
    Returns ``tensor(0.)`` on CPU when ``tensors`` is empty.

    Example:
        >>> total_norm([torch.tensor([3.0]), torch.tensor([4.0])])
        tensor(5.)
    """
    if not tensors:
        return torch.zeros((), dtype=torch.float32)
    norms = torch._foreach_norm(tensors, norm_type)
    stacked = torch.stack([n.float() for n in norms])
    return torch.linalg.vector_norm(stacked, norm_type)
