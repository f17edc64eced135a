"""Float64 references transcribed from the papers, one parameter tensor at a time, no shared code with the
package."""

from __future__ import annotations

import math

import torch
from torch import Tensor


def lion_reference_step(p: Tensor, g: Tensor, m: Tensor, *, lr: float, beta1: float, beta2: float, wd: float):
    """Chen et al. 2023, Algorithm 2: c = b1 m + (1-b1) g; theta -= lr (sign(c) + lambda theta);
    m = b2 m + (1-b2) g."""
    c = beta1 * m + (1 - beta1) * g
    p = p - lr * (torch.sign(c) + wd * p)
    m = beta2 * m + (1 - beta2) * g
    return p, m


def lamb_reference_step(
    p: Tensor,
    g: Tensor,
    m: Tensor,
    v: Tensor,
    t: int,
    *,
    lr: float,
    beta1: float,
    beta2: float,
    eps: float,
    wd: float,
    adapt: bool = True,
    trust_clip: float | None = None,
):
    """You et al. 2019, Algorithm 2 (LAMB) with Adam's bias correction and phi(z) = z:
    m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2; m_hat = m/(1-b1^t); v_hat = v/(1-b2^t);
    r = m_hat/(sqrt(v_hat)+eps); x -= lr * ||x|| / ||r + lambda x|| * (r + lambda x)."""
    m = beta1 * m + (1 - beta1) * g
    v = beta2 * v + (1 - beta2) * g * g
    m_hat = m / (1 - beta1**t)
    v_hat = v / (1 - beta2**t)
    r = m_hat / (torch.sqrt(v_hat) + eps)
    u = r + wd * p
    ratio = 1.0
    if adapt:
        w_norm = math.sqrt(float((p * p).sum()))
        u_norm = math.sqrt(float((u * u).sum()))
        ratio = w_norm / u_norm if w_norm > 0 and u_norm > 0 else 1.0
        if trust_clip is not None:
            ratio = min(ratio, trust_clip)
    p = p - lr * ratio * u
    return p, m, v


def grads_sequence(shapes, steps: int, seed: int, dtype=torch.float64):
    generator = torch.Generator().manual_seed(seed)
    return [
        [torch.randn(s, generator=generator, dtype=torch.float64).to(dtype) * 0.1 for s in shapes]
        for _ in range(steps)
    ]
