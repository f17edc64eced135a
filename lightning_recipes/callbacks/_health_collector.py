"""HealthMonitor's collection: forward hooks and row liveness on sampled batches, the wait clock, the
validation pass's per-batch losses, the packing of one interval's device numbers into one float64 vector
(:class:`Packer`: sums that ranks add, or maxima) and their combination into one check's :class:`CheckData`.
Everything that touches a tensor stays on the device: the one read back is the monitor's, once per check.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import torch
from lightning.pytorch.utilities.data import extract_batch_size
from torch import Tensor, nn
from torch.optim import Optimizer

from lightning_recipes._stats import line_fit, robust_scale, standard_error
from lightning_recipes.callbacks import input_pipeline_monitor
from lightning_recipes.callbacks._health_window import CheckData, Spike

__all__ = [
    "ROW_LAYERS",
    "Packer",
    "RowLiveness",
    "ValidationBatches",
    "WaitClock",
    "combine",
    "dead_of",
    "first_nonfinite",
    "flat_tensors",
    "group_families",
    "group_lrs",
    "leaf_hook",
    "loss_head",
    "loss_outliers",
    "loss_sums",
    "loss_trend",
    "optimizer_family",
    "pack_activations",
    "planned_steps",
    "relu_hook",
    "saturation_hook",
    "sparse_groups",
    "spikes_of",
    "squared_norm",
    "tracked_parameters",
    "unwrap_optimizer",
    "validation_error",
    "validation_rows",
    "watched_modules",
]


#: Layers whose weight's dim 0 is the output unit (``ConvTranspose`` keeps its inputs there: left out).
ROW_LAYERS = (nn.Linear, nn.Conv1d, nn.Conv2d, nn.Conv3d)

_ADAPTIVE = re.compile("Adam|Lion|Lamb|LAMB|Adafactor|Sophia|Shampoo|RMSprop|Adagrad|Adadelta|Adan|Prodigy")
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


SPIKE_ROWS = 3  # the interval's largest losses packed as spike candidates
_MIN_FOR_SPIKES = 8  # fewer losses than this: no spread to judge an outlier against


def loss_outliers(
    losses: Sequence[Tensor], device: torch.device, top: int = SPIKE_ROWS, z_min: float = math.inf
) -> Tensor:
    """The interval's ``top`` largest losses as ``[times the median, robust z, position]`` rows, then how many
    losses stand ``z_min`` robust deviations and 2x above the median (flat, float64 on ``device``; ``-1``
    rows and a count of 0 when fewer than 8 losses): the level and spread from ``_stats.robust_scale``, which
    a few outlier batches barely move. Non-finite losses count as 0 here (``first_nonfinite`` finds them).
    No sync.

    Example:
        >>> losses = [torch.tensor(v) for v in [1.0, 1.1, 0.9, 1.0, 1.05, 0.95, 30.0, 1.0, 1.02]]
        >>> packed = loss_outliers(losses, torch.device("cpu"), z_min=10.0)
        >>> rows, count = packed[:-1].reshape(-1, 3), packed[-1].item()
        >>> round(rows[0, 0].item()), rows[0, 2].item(), count  # 30x the median, at position 6; one spike
        (30, 6.0, 1.0)
    """
    missing = torch.full((3 * top,), -1.0, dtype=torch.float64, device=device)
    if len(losses) < _MIN_FOR_SPIKES:
        return torch.cat([missing, torch.zeros(1, dtype=torch.float64, device=device)])
    values = torch.stack([loss.to(device, torch.float64).reshape(()) for loss in losses])
    values = torch.where(torch.isfinite(values), values, torch.zeros_like(values))
    level, spread = robust_scale(values)
    floor = 1e-9 * level.abs() + 1e-12
    z = (values - level) / torch.maximum(spread, floor)
    times = values / torch.where(level.abs() > 0, level, torch.ones_like(level))
    k = min(top, len(losses))
    z_top, where = torch.topk(z, k)
    rows = torch.stack([times[where], z_top, where.double()], dim=1).reshape(-1)
    count = ((z >= z_min) & (times >= 2.0)).sum().double().reshape(1)
    return torch.cat([rows, missing[: 3 * (top - k)], count])


def first_nonfinite(losses: Sequence[Tensor], device: torch.device) -> Tensor:
    """The position of the interval's first non-finite loss (``-1``: none), a float64 0-d tensor. No sync."""
    if not losses:
        return torch.full((), -1.0, dtype=torch.float64, device=device)
    values = torch.stack([loss.to(device, torch.float64).reshape(()) for loss in losses])
    positions = torch.arange(len(losses), dtype=torch.float64, device=device)
    none = torch.full_like(positions, math.inf)
    first = torch.where(torch.isfinite(values), none, positions).min()
    return torch.where(torch.isfinite(first), first, torch.full_like(first, -1.0))


def spikes_of(
    rows: list[list[float]], where: Sequence[tuple[int, int, int]], z_min: float = 0.0
) -> list[Spike]:
    """Every rank's :func:`loss_outliers` rows as :class:`Spike` records (``z >= z_min``, largest first),
    their positions read through ``where`` (per position in the interval: step, epoch, batch index). Host
    only."""
    found: dict[int, Spike] = {}
    for row in rows:
        row = row[: 3 * SPIKE_ROWS]
        for times, z, position in zip(row[0::3], row[1::3], row[2::3]):
            p = round(position)
            if p < 0 or p >= len(where) or not z >= z_min:
                continue
            step, epoch, batch = where[p]
            if p not in found or z > found[p].z:
                found[p] = Spike(step, epoch, batch, times, z)
    return sorted(found.values(), key=lambda spike: -spike.z)


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
    if any(_ADAPTIVE.search(name) for name in names):
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


def _unit_dim(layer: nn.Module, output: Tensor) -> int:
    return output.ndim - 1 if isinstance(layer, nn.Linear) else 1


class RowLiveness:
    """Which output units of each Linear/Conv layer were alive on the sampled batches: a unit is dead when its
    output was never positive (forward hook) **and** its weight row got no gradient (optimizer-step hook).
    Both are needed: a layer fed zeros by dead units upstream still learns its bias, a saturated softmax's
    output layer has exact-zero gradients, a unit behind GELU/tanh has a gradient. Device tensors only.

    Example:
        >>> layer = nn.Linear(4, 3)
        >>> with torch.no_grad():
        ...     _ = layer.bias.copy_(torch.tensor([-50.0, 0.0, 0.0]))  # unit 0 never fires
        >>> rows = RowLiveness([layer])
        >>> handles = rows.attach()
        >>> torch.relu(layer(torch.randn(16, 4))).sum().backward()
        >>> rows.record_gradients()
        >>> [round(f, 3) for f in rows.dead_fractions(torch.device("cpu")).tolist()]
        [0.333]
    """

    def __init__(self, layers: Sequence[nn.Module]) -> None:
        self.layers = list(layers)
        self.alive: dict[int, Tensor] = {}

    def clear(self) -> None:
        self.alive = {}

    def _mark(self, i: int, alive: Tensor) -> None:
        previous = self.alive.get(i)
        self.alive[i] = alive if previous is None or previous.shape != alive.shape else previous | alive

    def attach(self) -> list[Any]:
        """Forward hooks marking units with a positive output; returns their handles."""

        def hook_for(i: int, layer: nn.Module) -> Any:
            def hook(module: nn.Module, args: Any, output: Any) -> None:
                if not isinstance(output, Tensor) or output.ndim < 1 or not output.is_floating_point():
                    return
                dim = _unit_dim(layer, output)
                positive = (output.detach() > 0).movedim(dim, -1).reshape(-1, output.shape[dim]).any(0)
                self._mark(i, positive)

            return hook

        return [layer.register_forward_hook(hook_for(i, layer)) for i, layer in enumerate(self.layers)]

    def record_gradients(self) -> None:
        """Mark the rows whose weight gradient is non-zero (call between backward and the optimizer step)."""
        for i, layer in enumerate(self.layers):
            grad = getattr(getattr(layer, "weight", None), "grad", None)
            if grad is None or grad.ndim < 1 or grad.numel() == 0:
                continue
            rows = grad.detach().flatten(1) if grad.ndim > 1 else grad.detach().reshape(-1, 1)
            alive = rows.abs().amax(1) != 0
            bias = getattr(getattr(layer, "bias", None), "grad", None)
            if bias is not None and bias.shape == alive.shape:
                alive = alive | (bias.detach() != 0)  # a unit fed zeros by dead units upstream still learns
            self._mark(i, alive)

    def dead_fractions(self, device: torch.device) -> Tensor:
        """Per layer, the fraction of units marked by neither reading (``-1`` for a layer not measured)."""
        out = [
            (1.0 - self.alive[i].double().mean()).to(device)
            if i in self.alive
            else torch.full((), -1.0, dtype=torch.float64, device=device)
            for i in range(len(self.layers))
        ]
        return torch.stack(out) if out else torch.zeros(0, dtype=torch.float64, device=device)


def sparse_groups(
    model: nn.Module, params: Sequence[Tensor], group_index: Sequence[int], group_names: Sequence[str]
) -> set[str]:
    """The parameter groups holding an embedding table: only the rows of the tokens in a batch get a gradient,
    so the table's gradient RMS is diluted by its vocabulary and says nothing about vanishing gradients.

    Example:
        >>> model = nn.Sequential(nn.Embedding(100, 8), nn.Linear(8, 2))
        >>> params = list(model.parameters())
        >>> sparse_groups(model, params, [0, 1, 1], ["0", "1"])
        {'0'}
    """
    tables = {
        id(p)
        for m in model.modules()
        if isinstance(m, (nn.Embedding, nn.EmbeddingBag))
        for p in m.parameters()
    }
    return {group_names[g] for p, g in zip(params, group_index) if id(p) in tables}


_RELU = (nn.ReLU, nn.ReLU6)
_SATURATING = (nn.Tanh, nn.Sigmoid)
_VALIDATION_ROW = 5  # epoch, val, train, val_se, val_count


Named = list[tuple[str, nn.Module]]


def watched_modules(model: nn.Module) -> tuple[Named, Named, Named, Named]:
    """``model``'s (name, module) pairs the monitor watches: ReLUs, tanh/sigmoids, leaves, Linear/Conv."""
    relu: Named = []
    saturating: Named = []
    leaves: Named = []
    rows: Named = []
    for name, module in model.named_modules():
        weight = getattr(module, "weight", None)
        if isinstance(module, ROW_LAYERS) and isinstance(weight, Tensor) and weight.requires_grad:
            rows.append((name, module))  # a frozen layer is not trained: its dead units are not a finding
        if isinstance(module, _RELU):
            relu.append((name, module))
        elif isinstance(module, _SATURATING):
            saturating.append((name, module))
        if not any(True for _ in module.children()):
            leaves.append((name, module))
    return relu, saturating, leaves, rows


def leaf_hook(store: dict[int, Tensor], i: int) -> Callable[..., None]:
    """A forward hook adding leaf module ``i``'s counts of non-finite ``[outputs, inputs]`` to ``store[i]``
    (no sync): a module whose inputs were finite made its inf/nan itself (or its weights did)."""

    def floats(value: Any) -> list[Tensor]:
        return [t.detach() for t in flat_tensors(value) if t.is_floating_point() or t.is_complex()]

    def hook(module: nn.Module, args: Any, output: Any) -> None:
        outs, ins = floats(output), floats(args)
        if not outs:
            return
        zero = torch.zeros((), dtype=torch.long, device=outs[0].device)
        bad = torch.stack(
            [sum(((~torch.isfinite(t)).sum().to(zero.device) for t in ts), zero) for ts in (outs, ins)]
        )
        previous = store.get(i)
        store[i] = bad if previous is None else previous + bad

    return hook


def relu_hook(store: dict[int, Tensor], i: int) -> Callable[..., None]:
    """A forward hook OR-ing which units of ReLU ``i`` were ever active into ``store[i]`` (no sync)."""

    def hook(module: nn.Module, args: Any, output: Any) -> None:
        if not isinstance(output, Tensor) or output.ndim < 2:
            return
        out = output.detach()
        unit_dim = 1 if out.ndim in (4, 5) else out.ndim - 1
        alive = (out > 0).movedim(unit_dim, -1).reshape(-1, out.shape[unit_dim]).any(0)
        previous = store.get(i)
        store[i] = alive if previous is None else previous | alive

    return hook


def saturation_hook(store: dict[int, Tensor], i: int, kind: nn.Module) -> Callable[..., None]:
    """A forward hook appending the saturated fraction of tanh/sigmoid ``i``'s output to ``store[i]``."""
    tanh = isinstance(kind, nn.Tanh)

    def hook(module: nn.Module, args: Any, output: Any) -> None:
        if not isinstance(output, Tensor):
            return
        out = output.detach()
        near = out.abs() > 0.99 if tanh else (out < 0.01) | (out > 0.99)
        fraction = near.float().mean().reshape(1)
        previous = store.get(i)
        store[i] = fraction if previous is None else torch.cat([previous, fraction])

    return hook


def pack_activations(
    packer: Packer,
    stores: tuple[dict[int, Tensor], dict[int, Tensor], dict[int, Tensor]],
    counts: tuple[int, int, int],
) -> None:
    """Pack the hooks' stores (never-active units per ReLU, saturated fractions per tanh/sigmoid, non-finite
    counts per leaf, outputs and inputs) as ``dead``, ``saturated`` and ``nonfinite``: ``-1`` for a module not
    measured."""
    alive, saturation, nonfinite = stores
    device = packer.device
    unmeasured = torch.tensor(-1.0)
    dead = [1.0 - alive[i].float().mean() if i in alive else unmeasured for i in range(counts[0])]
    packer.add("dead", torch.stack([d.to(device) for d in dead]) if dead else torch.zeros(0))
    sat = [saturation[i].mean() if i in saturation else unmeasured for i in range(counts[1])]
    packer.add("saturated", torch.stack([v.to(device) for v in sat]) if sat else torch.zeros(0))
    bad = [nonfinite.get(i, torch.zeros(2)) for i in range(counts[2])]
    packer.add("nonfinite", torch.stack([b.to(device).double() for b in bad]) if bad else torch.zeros(0))


def dead_of(alive: dict[int, Tensor], count: int, device: torch.device) -> Tensor:
    """Per ReLU ``0..count-1``, the fraction of units never active in ``alive`` (``-1``: not measured)."""
    out = [
        (1.0 - alive[i].double().mean()).to(device)
        if i in alive
        else torch.full((), -1.0, dtype=torch.float64, device=device)
        for i in range(count)
    ]
    return torch.stack(out) if out else torch.zeros(0, dtype=torch.float64, device=device)


def combine(
    rows: list[list[float]],
    layout: dict[str, slice],
    step: int,
    epoch: int,
    groups: tuple[list[str], list[int], list[str]],
    layers: tuple[list[str], list[str], list[str], list[str]],
    host: tuple[str | None, float],
) -> CheckData:
    """Every rank's packed vector (``rows``, in ``layout``) combined into one check's :class:`CheckData`.

    ``groups``: the parameter groups' names, sizes and optimizer families; ``layers``: the names of the ReLU,
    saturating, leaf and Linear/Conv modules, in packing order; ``host``: where the wait fraction came from
    and the planned steps (identical on every rank). Host floats only, identical on every rank: sums add over
    ranks, per-layer worst cases take the max (a problem on one rank is the run's).
    """
    group_names, group_numel, families = groups
    relu, saturating, leaves, row_layers = layers

    def column(name: str) -> list[list[float]]:
        return [row[layout[name]] for row in rows]

    data = CheckData(step=step, epoch=epoch)
    losses = column("loss")
    data.loss_count, data.loss_mean, data.loss_std, data.loss_slope, data.loss_slope_se = loss_trend(losses)
    data.loss_nonfinite = int(sum(r[6] for r in losses))
    data.loss_head = sum(r[0] for r in column("loss_head")) / len(rows)
    data.param_norm_start = math.sqrt(max(r[0] for r in column("param_start")))
    data.group_numel = dict(zip(group_names, group_numel))
    data.group_family = dict(zip(group_names, families))
    if any(r[0] for r in column("grad_sampled")):
        grad = [max(values) for values in zip(*column("grad"))]
        param = [max(values) for values in zip(*column("param"))]
        update = [max(values) for values in zip(*column("update"))]
        data.grad_sampled = True
        data.grad_total = math.sqrt(sum(grad)) if all(math.isfinite(g) for g in grad) else math.nan
        broken = [not all(math.isfinite(r[g]) for r in column("param")) for g in range(len(group_names))]
        data.nonfinite_weights = [name for name, b in zip(group_names, broken) if b]
        data.param_norm = math.sqrt(sum(param)) if not any(broken) else math.nan
        ratios = [max(values) for values in zip(*column("update_ratio"))]  # norms.update_ratios, packed
        for g, name in enumerate(group_names):
            data.group_grad_rms[name] = math.sqrt(grad[g] / max(group_numel[g], 1))
            if param[g] > 0 and math.isfinite(update[g]):
                data.update_ratio[name] = ratios[g]
        for name, values in zip(group_names, zip(*column("lr"))):
            if max(values) > -math.inf:
                data.group_lr[name] = max(values)
        for name, values in zip(row_layers, zip(*column("dead_rows"))):
            if max(values) >= 0:
                data.dead_rows[name or "<root>"] = max(values)
    if any(r[0] for r in column("act_sampled")):
        for name, values in zip(relu, zip(*column("dead"))):
            measured = [v for v in values if v >= 0]
            if measured:
                data.dead[name] = min(measured)
        for name, values in zip(saturating, zip(*column("saturated"))):
            measured = [v for v in values if v >= 0]
            if measured:
                data.saturated[name] = sum(measured) / len(measured)
        sums = [[sum(pair) for pair in zip(*(r[k::2] for r in column("nonfinite")))] for k in (0, 1)]
        for name, out, inputs in zip(leaves, *sums):
            if out > 0:
                data.nonfinite_modules.append(name or "<root>")
                if inputs > 0:
                    data.nonfinite_inputs.append(name or "<root>")
    if "dead_start" in layout:
        for name, values in zip(relu, zip(*column("dead_start"))):
            measured = [v for v in values if v >= 0]
            if measured:
                data.dead_start[name] = min(measured)
        for name, values in zip(row_layers, zip(*column("dead_rows_start"))):
            if max(values) >= 0:
                data.dead_rows_start[name or "<root>"] = max(values)
    if "loss_outliers" in layout:
        data.loss_spike_count = round(max(r[-1] for r in column("loss_outliers")))
    if "first_nonfinite" in layout:
        firsts = [r[0] for r in column("first_nonfinite") if r[0] >= 0]
        data.first_nonfinite_step = round(min(firsts)) if firsts else None
    waits = [r for r in column("wait") if r[0] >= 0]
    data.wait_fraction = max(r[0] for r in waits) if waits else None
    data.wait_per_batch_s = max(r[1] for r in waits) if waits else None
    data.wait_source = host[0] if waits else None
    data.planned_steps = host[1]
    vals = column("validations")
    ranks = len(vals)
    for k in range(len(vals[0]) // _VALIDATION_ROW):
        row = [v[_VALIDATION_ROW * k : _VALIDATION_ROW * (k + 1)] for v in vals]
        val = sum(r[1] for r in row) / ranks
        train = sum(r[2] for r in row) / ranks
        errors = [r[3] for r in row]
        # the mean over ranks of independent means: its variance is the mean of theirs over the rank count
        finite = all(math.isfinite(e) for e in errors)
        se = math.sqrt(sum(e * e for e in errors)) / ranks if finite else math.nan
        data.validations.append((int(row[0][0]), val, train, se, round(sum(r[4] for r in row))))
    return data


class WaitClock:
    """The host time a training loop waits for its next batch, and the time its steps take (host floats).

    Wait: from the end of one training batch (``on_train_batch_end``) to the start of the next; step: start
    to end. The first batch of an epoch has no wait counted (the loader and its workers start then) and the
    time a validation runs between two batches (:meth:`pause` .. :meth:`resume`) is not waiting for data.
    Time comes from ``input_pipeline_monitor.time.perf_counter()``, read through the module, so a test clock
    patched there (the health gallery's ``StallClock``) times this too.

    Example:
        >>> clock = WaitClock()
        >>> clock.batch_start(0.0); clock.batch_end(1.0)  # the first batch: its wait is unknown, left out
        >>> clock.batch_start(4.0); clock.batch_end(5.0); clock.batch_start(5.5); clock.batch_end(6.5)
        >>> clock.take()  # 3.5 s waited, 2 s stepped: the wait fraction, and 1.75 s per batch waited
        (0.6363636363636364, 1.75)
        >>> clock.take()  # nothing since
        (-1.0, -1.0)
    """

    def __init__(self) -> None:
        self.wait_s = 0.0
        self.step_s = 0.0
        self.batches = 0
        self._started: float | None = None
        self._ended: float | None = None
        self._paused: float | None = None
        self._pipeline: Any = None
        self._totals = (0.0, 0.0)

    def follow(self, pipeline: Any) -> None:
        """Take the fractions from an ``InputPipelineMonitor`` (its ``total_fetch_s``, ``total_step_s``) when
        one is given (it brackets every other callback: finer than this clock), else from this clock."""
        self._pipeline = pipeline
        if pipeline is not None:
            self._totals = (pipeline.total_fetch_s, pipeline.total_step_s)

    @property
    def source(self) -> str:
        """Where :meth:`take`'s fractions come from: ``"InputPipelineMonitor"`` or ``"host timing"``."""
        return "host timing" if self._pipeline is None else "InputPipelineMonitor"

    @staticmethod
    def now() -> float:
        return float(input_pipeline_monitor.time.perf_counter())

    def epoch_start(self) -> None:
        self._ended = None  # the first batch's wait is the loader's start-up

    def batch_start(self, now: float) -> None:
        # a batch whose wait is not known (the first of an epoch) is left out, its step too
        self._started = None
        if self._ended is not None:
            self.wait_s += max(now - self._ended, 0.0)
            self.batches += 1
            self._started = now
        self._ended = None

    def batch_end(self, now: float) -> None:
        if self._started is not None:
            self.step_s += max(now - self._started, 0.0)
        self._started, self._ended = None, now

    def pause(self, now: float) -> None:
        self._paused = now

    def resume(self, now: float) -> None:
        """The time since :meth:`pause` is neither wait nor step (a validation, the monitor's own check)."""
        if self._paused is not None:
            pause = max(now - self._paused, 0.0)
            self._ended = None if self._ended is None else self._ended + pause
            self._started = None if self._started is None else self._started + pause
        self._paused = None

    def take(self) -> tuple[float, float]:
        """The wait fraction and the mean wait per batch (s) since the last take (``-1`` when nothing was
        timed), and start again."""
        wait, step, batches = self.wait_s, self.step_s, self.batches
        self.wait_s = self.step_s = 0.0
        self.batches = 0
        if self._pipeline is not None:
            fetch, stepped = self._pipeline.total_fetch_s, self._pipeline.total_step_s
            wait, step = fetch - self._totals[0], stepped - self._totals[1]
            self._totals = (fetch, stepped)
        if wait + step <= 0:
            return -1.0, -1.0
        return wait / (wait + step), wait / batches if batches else -1.0


class ValidationBatches:
    """One validation pass's per-batch mean losses and batch sizes, as device tensors (no sync).

    Read from Lightning's running mean of the logged ``val_monitor`` (:func:`_trainer.logged_running_mean`:
    two reads differ by one batch's sum and size), else from what ``validation_step`` returned (a scalar
    tensor or a dict holding ``val_monitor`` or ``"loss"``; its size from the batch).
    """

    def __init__(self) -> None:
        self.values: list[Tensor] = []
        self.sizes: list[Tensor] = []
        self._last: tuple[Tensor, Tensor] | None = None

    def reset(self) -> None:
        self.values, self.sizes, self._last = [], [], None

    def batch_end(self, running: tuple[Tensor, Tensor] | None, outputs: Any, batch: Any, key: str) -> None:
        if running is not None:
            value, count = running
            if self._last is not None and value is self._last[0]:
                return  # not logged on this batch
            before = self._last or (torch.zeros_like(value), torch.zeros_like(count))
            size = (count - before[1]).double()
            self.values.append((value - before[0]).double() / size.clamp_min(1.0))
            self.sizes.append(size)
            self._last = (value, count)
            return
        loss = outputs.get(key, outputs.get("loss")) if isinstance(outputs, dict) else outputs
        if isinstance(loss, Tensor) and loss.numel() == 1 and loss.is_floating_point():
            self.values.append(loss.detach().reshape(()).double())
            samples = float(_batch_size(batch))
            self.sizes.append(torch.full((), samples, dtype=torch.float64, device=loss.device))


def _batch_size(batch: Any) -> int:
    try:
        return int(extract_batch_size(batch))
    except Exception:  # any batch Lightning cannot size counts as one sample
        return 1


def flat_tensors(output: Any) -> list[Tensor]:
    """Every tensor in a nested output (lists, tuples, dicts)."""
    if isinstance(output, Tensor):
        return [output]
    if isinstance(output, (list, tuple)):
        return [t for item in output for t in flat_tensors(item)]
    if isinstance(output, dict):
        return [t for item in output.values() for t in flat_tensors(item)]
    return []
