"""The loss's own noise, measured robustly on the device: its running level and spread, and the standard error
of a mean loss. What a spike, a rise or a plateau must exceed before it is a finding.

A per-step training loss is noisy (every batch differs) and its noise changes over a run: near ``ln C`` with
a uniform classifier it is a fraction of a percent, late in fine-tuning it is heavy-tailed (one confidently
wrong sample moves a batch's loss by 100%+). A fixed rule (``mean + k * std``, ``k * mean``) is either deaf in
one phase or firing in the other, so the model here measures the noise where the run is:

* **level** = the median of the recent good losses, **spread** = 1.4826 x their median absolute deviation
  (the robust standard deviation: the standard deviation for normal noise, barely moved by a few outliers);
* both in **log space** when every loss in the window is positive (loss noise is multiplicative: a batch that
  is 2x the level is as unusual at loss 3 as at loss 0.01), linearly otherwise (losses that can be <= 0);
* a loss **exceeds the noise** when it is above the level by more than ``k`` spreads **and** by more than a
  minimum relative rise (``min_rise``: a factor ``1 + min_rise`` in log space, ``min_rise * |level|``
  linearly). The first condition is the statistical one (for normal noise 6 spreads are a one-sided
  1e-9 chance per step); the second keeps a run whose loss is nearly constant (a plateau at ``ln C`` has a
  spread of ~0.1%) from calling a +3% wobble a spike;
* and, for every spike rule, when the loss is above the level by more than an absolute ``floor``: the noise a
  loss near zero has that its recent spread cannot show. A converged classifier's batch loss is ~0.01 with a
  tight spread until a batch holds one hard sample: one sample's loss (several nats) / the batch size lifts it
  to ~0.15, 15x the level and many spreads, yet ordinary. ``StabilityGuard`` sets the floor to a fraction
  (``spike_floor``) of the run's reference loss, the highest level it has seen (its starting loss).

Everything is tensor math on the window's device, without a host sync (``torch.median`` returns a tensor); the
caller decides when to copy a verdict to the host (``StabilityGuard``: its one sync per check).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

__all__ = ["ROBUST_SIGMA", "exceeds_noise", "loss_noise", "standard_error"]

#: Median absolute deviation -> standard deviation, for normal noise (1 / Phi^-1(3/4)).
ROBUST_SIGMA = 1.4826


def loss_noise(window: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """``(level, spread, log_space)`` of the good losses in ``window`` (shape ``(n,)``, ``n >= 1``).

    ``log_space`` is a 0-d bool tensor: True when every loss in ``window`` is positive; ``level`` and
    ``spread`` are then of ``log(loss)``. Tensor math only, no sync.

    Example:
        >>> level, spread, log_space = loss_noise(torch.tensor([1.0, 1.1, 0.9, 1.0, 1.0, 5.0]))
        >>> bool(log_space), round(level.exp().item(), 3), round(spread.item(), 4)  # the 5.0 barely counts
        (True, 1.0, 0.0)
        >>> level, spread, log_space = loss_noise(torch.tensor([-1.0, 0.0, 1.0]))
        >>> bool(log_space), level.item(), round(spread.item(), 4)
        (False, 0.0, 1.4826)
    """
    window = window.float()
    log_space = (window > 0).all()
    values = torch.where(log_space, window.clamp_min(torch.finfo(torch.float32).tiny).log(), window)
    level = values.median()
    spread = ROBUST_SIGMA * (values - level).abs().median()
    return level, spread, log_space


def exceeds_noise(
    losses: Tensor,
    window: Tensor,
    *,
    k: float | None,
    min_rise: float = 0.0,
    rtol: float | None = None,
    floor: Tensor | float = 0.0,
) -> Tensor:
    """Which ``losses`` exceed the noise of ``window`` (bool tensor, shape of ``losses``).

    A loss exceeds it when it is above the level by more than ``k`` spreads and by more than ``min_rise``
    (:func:`loss_noise`), or, with ``rtol``, when it is above ``rtol`` x the level (the median loss; meant for
    positive losses); either way only when it is also above the (linear) level by more than ``floor``.
    ``k=None`` turns the first rule off. NaN never exceeds. No sync.

    Example:
        >>> noise = torch.randn(20, generator=torch.Generator().manual_seed(0))
        >>> window = 0.6931 + 0.001 * noise  # a plateau at ln 2, spread 0.1%
        >>> plateau_wobble, blow_up = 0.6931 * 1.06, 0.6931 * 3  # +6% is > 6 spreads here, but not 1.5x
        >>> exceeds_noise(torch.tensor([plateau_wobble, blow_up]), window, k=6.0, min_rise=0.5)
        tensor([False,  True])
        >>> exceeds_noise(torch.tensor([plateau_wobble, blow_up]), window, k=6.0, min_rise=0.0)
        tensor([True, True])
        >>> converged = torch.full((20,), 0.01)  # one hard sample in 32 makes a batch 0.15; floor 0.35
        >>> exceeds_noise(torch.tensor([0.15, 1.0]), converged, k=6.0, min_rise=0.5, floor=0.35)
        tensor([False,  True])
    """
    level, spread, log_space = loss_noise(window)
    losses = losses.float()
    spike = torch.zeros_like(losses, dtype=torch.bool)
    linear_level = torch.where(log_space, level.exp(), level)
    if k is not None:
        values = torch.where(log_space, losses.clamp_min(torch.finfo(torch.float32).tiny).log(), losses)
        rise = torch.where(log_space, math.log1p(min_rise), min_rise * level.abs())
        spike |= values > level + torch.maximum(k * spread, rise)
    if rtol is not None:
        spike |= losses > rtol * linear_level
    return spike & (losses - linear_level > floor)


def standard_error(values: Tensor, weights: Tensor | None = None, population: int | None = None) -> Tensor:
    """The standard error of the (weighted) mean of ``values``, as a 0-d tensor, no sync.

    For a validation loss: ``values`` are the per-batch mean losses, ``weights`` the batch sizes, and
    ``population`` the validation set's size (the finite-population correction ``sqrt((N - n) / (N - 1))``:
    a validation pass over the whole set has no sampling error left, so its standard error is 0). The spread
    between batches stands in for the spread between samples (batch means of ``b`` samples vary ``sqrt(b)``
    less, which the weights undo). Needs two or more values (NaN otherwise).

    Example:
        >>> values = torch.tensor([0.9, 1.1, 1.0, 1.0])
        >>> round(standard_error(values).item(), 4)  # std 0.0816 / sqrt(4)
        0.0408
        >>> standard_error(values, weights=torch.full((4,), 8.0), population=32).item()  # the whole set
        0.0
    """
    values = values.float()
    w = torch.ones_like(values) if weights is None else weights.float()
    total = w.sum()
    mean = (w * values).sum() / total
    count = values.numel()
    # weighted per-sample variance estimate from batch means: Var(sample) ~ sum w (x - mean)^2 / (m - 1)
    sample_var = (w * (values - mean) ** 2).sum() / max(count - 1, 1)
    error = (sample_var / total).sqrt()
    if count < 2:
        error = torch.full_like(error, math.nan)
    if population is not None:
        if population < 2:
            raise ValueError(f"`population` must be an integer >= 2, got {population!r}.")
        fpc = ((population - total) / (population - 1)).clamp_min(0.0).sqrt()
        error = error * fpc
    return error
