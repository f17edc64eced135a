"""HealthMonitor's packing: the device-side numbers of one interval, reduced to raw sums that ranks combine by
adding (or by the max), laid out in one float64 vector (:class:`Packer`), and the host-side reading of them.

Everything here that touches a tensor stays on the device (no ``.item()``): the one read back is the monitor's
once per check.

Example:
    >>> import torch
    >>> packer = Packer(torch.device("cpu"))
    >>> packer.add("loss", loss_sums([torch.tensor(3.0), torch.tensor(2.0), torch.tensor(1.0)], [0, 1, 2]))
    >>> vector, layout = packer.vector(), packer.layout
    >>> count, mean, std, slope, slope_se = loss_trend([vector[layout["loss"]].tolist()])
    >>> count, mean, slope, slope_se
    (3, 2.0, -1.0, 0.0)
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

import torch
from torch import Tensor, nn
from torch.optim import Optimizer

from lightning_recipes._stats import line_fit, standard_error

__all__ = [
    "ROW_LAYERS",
    "Packer",
    "group_families",
    "group_lrs",
    "loss_head",
    "loss_sums",
    "loss_trend",
    "optimizer_family",
    "planned_steps",
    "squared_norm",
    "tracked_parameters",
    "unwrap_optimizer",
    "validation_error",
    "validation_rows",
]

#: Layers whose weight's dim 0 is the output unit (``ConvTranspose`` keeps its inputs there: left out).
ROW_LAYERS = (nn.Linear, nn.Conv1d, nn.Conv2d, nn.Conv3d)

_ADAPTIVE = (
    "Adam",
    "Lion",
    "Lamb",
    "LAMB",
    "Adafactor",
    "Sophia",
    "Shampoo",
    "RMSprop",
    "Adagrad",
    "Adadelta",
    "Adan",
    "Prodigy",
)
_LOSS_SUMS = 7  # n, sum, sum of squares, sum t, sum t^2, sum t * loss, non-finite count


class Packer:
    """Named pieces appended to one float64 vector on ``device``, with a layout identical on every rank."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.layout: dict[str, slice] = {}
        self._parts: list[Tensor] = []
        self._size = 0

    def add(self, name: str, value: Tensor | float | Sequence[float]) -> None:
        """Append ``value`` (a tensor on any device, a host float or floats) under ``name``."""
        if isinstance(value, Tensor):
            value = value.reshape(-1).to(self.device, torch.float64)
        else:
            floats = [float(value)] if isinstance(value, (int, float)) else [float(v) for v in value]
            value = torch.tensor(floats, dtype=torch.float64, device=self.device)
        self.layout[name] = slice(self._size, self._size + value.numel())
        self._size += value.numel()
        self._parts.append(value)

    def vector(self) -> Tensor:
        """The packed vector (empty pieces included: the layout is the same whatever was measured)."""
        if not self._parts:
            return torch.zeros(0, dtype=torch.float64, device=self.device)
        return torch.cat(self._parts)


def loss_sums(losses: Sequence[Tensor], steps: Sequence[int], device: torch.device | None = None) -> Tensor:
    """The raw sums of the finite per-step losses against their step index ``t`` within the interval.

    ``[n, sum, sum of squares, sum t, sum t^2, sum t * loss, non-finite count]`` (float64, on the losses'
    device): sums, so ranks with the same ``t`` combine by adding. No sync.
    """
    if not losses:
        return torch.zeros(_LOSS_SUMS, dtype=torch.float64, device=device)
    device = device or losses[0].device
    values = torch.stack([loss.to(device, torch.float64).reshape(()) for loss in losses])
    t = torch.tensor(list(steps), dtype=torch.float64, device=device)
    finite = torch.isfinite(values)
    x = torch.where(finite, values, torch.zeros_like(values))
    tf = torch.where(finite, t, torch.zeros_like(t))
    return torch.stack(
        [
            finite.sum().double(),
            x.sum(),
            (x * x).sum(),
            tf.sum(),
            (tf * tf).sum(),
            (tf * x).sum(),
            (~finite).sum().double(),
        ]
    )


def loss_head(losses: Sequence[Tensor], device: torch.device, steps: int = 5) -> Tensor:
    """The mean of the interval's first ``steps`` losses (at a run's start: the loss at initialisation, for a
    classifier ~ln C, the level of knowing nothing); NaN when none. No sync."""
    if not losses:
        return torch.full((), math.nan, dtype=torch.float64, device=device)
    return torch.stack([loss.to(device, torch.float64).reshape(()) for loss in losses[:steps]]).mean()


def squared_norm(params: Sequence[Tensor], device: torch.device) -> Tensor:
    """The squared total norm of ``params`` (float64 on ``device``; NaN when none). No sync."""
    if not params:
        return torch.full((), math.nan, dtype=torch.float64, device=device)
    norms = torch.stack(torch._foreach_norm([p.detach() for p in params], 2.0)).double()
    return norms.to(device).square().sum()


def loss_trend(rows: Iterable[Sequence[float]]) -> tuple[int, float, float, float, float]:
    """Every rank's :func:`loss_sums` added: (count, mean, std, least-squares slope per step, its standard
    error = residual std / sqrt(sum (t - mean t)^2)). NaN where too few losses (2 for the std, 3 for the
    slope's error) or a single step."""
    s = [sum(column) for column in zip(*rows)] if rows else [0.0] * _LOSS_SUMS
    n, total, squares, st, stt, stl = s[:6]
    return (round(n), *line_fit(n, total, squares, st, stt, stl))


def optimizer_family(optimizer: Any) -> str:
    """``"adaptive"``, ``"sgd"`` or ``"other"``, from the optimizer's class names (its own and its bases').

    The rule, by name (case-sensitive; wrappers such as Lightning's ``LightningOptimizer`` unwrapped first):

    * a name containing ``Muon`` is ``"other"`` (orthogonalised updates: not scaled per element);
    * a name containing ``Adam`` (Adam, AdamW, Adamax, NAdam, RAdam, SparseAdam, 8-bit variants), ``Lion``,
      ``Lamb``/``LAMB``, ``Adafactor``, ``Sophia``, ``Shampoo``, ``RMSprop``, ``Adagrad``, ``Adadelta``,
      ``Adan`` or ``Prodigy`` is ``"adaptive"`` (the step is normalised per element: its size follows the LR,
      not the gradient's scale);
    * a name containing ``SGD`` (SGD, ASGD) is ``"sgd"``;
    * anything else is ``"other"``.

    Example:
        >>> import torch
        >>> params = [torch.nn.Parameter(torch.zeros(1))]
        >>> optimizer_family(torch.optim.AdamW(params)), optimizer_family(torch.optim.SGD(params, lr=0.1))
        ('adaptive', 'sgd')
    """
    optimizer = unwrap_optimizer(optimizer)
    names = [cls.__name__ for cls in type(optimizer).__mro__ if cls is not object]
    if any("Muon" in name for name in names):
        return "other"
    adaptive = _ADAPTIVE
    if any(key in name for name in names for key in adaptive):
        return "adaptive"
    if any("SGD" in name for name in names):
        return "sgd"
    return "other"


def unwrap_optimizer(optimizer: Any) -> Any:
    """The optimizer under Lightning's ``LightningOptimizer`` (``.optimizer``) and ``ZeroRedundancyOptimizer``
    (``.optim``), else ``optimizer``."""
    for _ in range(4):
        inner = getattr(optimizer, "_optimizer", None)
        if inner is None and type(optimizer).__name__ == "ZeroRedundancyOptimizer":
            inner = getattr(optimizer, "optim", None)
        if inner is None or inner is optimizer:
            return optimizer
        optimizer = inner
    return optimizer


def tracked_parameters(optimizers: Sequence[Any]) -> list[Tensor]:
    """The trainable parameters of ``optimizers``, each once, in the optimizers' order."""
    seen: set[int] = set()
    params: list[Tensor] = []
    for optimizer in optimizers:
        for param_group in unwrap_optimizer(optimizer).param_groups:
            for param in param_group["params"]:
                if param.requires_grad and id(param) not in seen:
                    seen.add(id(param))
                    params.append(param)
    return params


def planned_steps(trainer: Any) -> float:
    """``trainer.estimated_stepping_batches`` as a float; ``inf`` when unbounded or unknown (it raised)."""
    try:
        return float(trainer.estimated_stepping_batches)
    except Exception:  # no loader length, an iterable dataset: unknown, as unbounded
        return math.inf


def group_families(
    optimizers: Sequence[Any], index: dict[int, int], group_of_param: Sequence[int], groups: int
) -> list[str]:
    """Per monitor group, the :func:`optimizer_family` of the first optimizer holding one of its parameters
    (``"other"`` where none does). Host only."""
    families: list[str | None] = [None] * groups
    for optimizer in optimizers:
        family = optimizer_family(optimizer)
        for param_group in unwrap_optimizer(optimizer).param_groups:
            for param in param_group["params"]:
                if id(param) in index and families[group_of_param[index[id(param)]]] is None:
                    families[group_of_param[index[id(param)]]] = family
    return [family or "other" for family in families]


def group_lrs(
    optimizer: Optimizer,
    index: dict[int, int],
    group_of_param: Sequence[int],
    groups: int,
    device: torch.device,
    current: Tensor | None = None,
) -> Tensor:
    """Per monitor group, the largest ``lr`` of ``optimizer``'s param_groups holding its parameters (float64
    on ``device``; ``-inf`` where none), combined by the max with ``current``. A tensor ``lr`` (capturable
    optimizers) is read on the device, not on the host: no sync.

    ``index`` maps ``id(param)`` to the tracked parameter's position, ``group_of_param`` that to its group.
    """
    host = [-math.inf] * groups
    tensor_groups: list[int] = []
    tensor_lrs: list[Tensor] = []
    for param_group in unwrap_optimizer(optimizer).param_groups:
        lr = param_group.get("lr")
        if lr is None:
            continue
        owners = {group_of_param[index[id(p)]] for p in param_group["params"] if id(p) in index}
        for g in owners:
            if isinstance(lr, Tensor):
                tensor_groups.append(g)
                tensor_lrs.append(lr.detach().to(device, torch.float64).reshape(()))
            else:
                host[g] = max(host[g], float(lr))
    out = torch.tensor(host, dtype=torch.float64, device=device)
    if tensor_lrs:
        where = torch.tensor(tensor_groups, dtype=torch.long, device=device)
        out = out.scatter_reduce(0, where, torch.stack(tensor_lrs), reduce="amax")
    return out if current is None else torch.maximum(out, current)


def validation_rows(rows: Sequence[tuple[int, Tensor, Tensor, Tensor]], device: torch.device) -> Tensor:
    """The validations ``(epoch, val, train, [se, count])`` as one flat float64 vector (5 per row)."""
    flat = [
        torch.cat([torch.tensor([float(epoch)], device=device), val.reshape(1), train.reshape(1), error])
        for epoch, val, train, error in rows
    ]
    flat = [row.to(device, torch.float64) for row in flat]
    return torch.cat(flat) if flat else torch.zeros(0, dtype=torch.float64, device=device)


def validation_error(values: Sequence[Tensor], sizes: Sequence[Tensor], device: torch.device) -> Tensor:
    """``[standard error, sample count]`` of a validation loss from its per-batch means ``values`` and batch
    sizes ``sizes`` (tensors, any device), on ``device``: ``standard_error`` without a finite-population
    correction (the validation set is a sample of the data the model will meet). ``[NaN, 0]``: no batch."""
    if not values:
        return torch.tensor([math.nan, 0.0], dtype=torch.float64, device=device)
    x = torch.stack([v.detach().to(device, torch.float64).reshape(()) for v in values])
    w = torch.stack([s.detach().to(device, torch.float64).reshape(()) for s in sizes])
    return torch.stack([standard_error(x, weights=w).double(), w.sum()])
