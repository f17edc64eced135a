"""HealthMonitor's collection: hooks on sampled batches, per-step records, and the packing of an
interval's device numbers into one vector, combined into a :class:`CheckData` after the check's one sync.
"""

from __future__ import annotations

import contextlib
import math
import re
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import torch
from lightning.pytorch.utilities.data import extract_batch_size
from torch import Tensor, nn
from torch.optim import Optimizer
from torch.overrides import TorchFunctionMode

from lightning_recipes._stats import line_fit, standard_error
from lightning_recipes.callbacks._health_window import CheckData
from lightning_recipes.norms import group_powers

__all__ = [
    "INPUT_FREE_LOSSES",
    "ROW_LAYERS",
    "SATURATING_FUNCTIONS",
    "ActivationHooks",
    "FunctionalSaturation",
    "InputFreeLoss",
    "Packer",
    "RowLiveness",
    "StepRecords",
    "ValidationBatches",
    "batch_samples",
    "combine",
    "dead_of",
    "flat_and_gain",
    "flat_tensors",
    "gate_flat_and_gain",
    "group_families",
    "group_lrs",
    "loss_statistics",
    "loss_trend",
    "loss_vector",
    "means_by_index",
    "nonfinite_counts",
    "optimizer_family",
    "planned_steps",
    "sparse_groups",
    "squared_norm",
    "tracked_parameters",
    "unrectified_layers",
    "unwrap_optimizer",
    "validation_error",
    "validation_rows",
    "watched_modules",
    "weight_and_update_powers",
]


#: Layers whose weight's dim 0 is the output unit (``ConvTranspose`` keeps its inputs there: left out).
ROW_LAYERS = (nn.Linear, nn.Conv1d, nn.Conv2d, nn.Conv3d)

_ADAPTIVE = re.compile("Adam|Lion|Lamb|LAMB|Adafactor|Sophia|Shampoo|RMSprop|Adagrad|Adadelta|Adan|Prodigy")
_LOSS_MOMENTS = 9  # the sums of [finite, loss, loss^2] (finite losses only) times [1, t, t^2]


class Packer:
    """Named pieces appended to one float64 vector on ``device``, in a layout identical on every rank.

    Example:
        >>> packer = Packer(torch.device("cpu"))
        >>> packer.add("flag", 1.0)
        >>> packer.add("norms", torch.tensor([3.0, 4.0]))
        >>> packer.vector().tolist(), packer.layout["flag"], packer.layout["norms"]
        ([3.0, 4.0, 1.0], slice(2, 3, None), slice(0, 2, None))
    """

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self._parts: list[Tensor] = []
        self._pieces: list[tuple[str, int]] = []  # the tensors' names and sizes, in order
        self._host: list[float] = []
        self._host_pieces: list[tuple[str, int]] = []

    @property
    def layout(self) -> dict[str, slice]:
        """Each name's slice of :meth:`vector`."""
        out: dict[str, slice] = {}
        start = 0
        for name, size in (*self._pieces, *self._host_pieces):
            out[name] = slice(start, start + size)
            start += size
        return out

    def add(self, name: str, value: Tensor | float | Sequence[float]) -> None:
        """Append ``value`` (a tensor on any device, a host float or floats) under ``name``."""
        if isinstance(value, Tensor):
            if value.ndim != 1:
                value = value.reshape(-1)
            if value.dtype != torch.float64 or value.device != self.device:
                value = value.to(self.device, torch.float64)
            self._pieces.append((name, value.numel()))
            self._parts.append(value)
            return
        floats = [float(value)] if isinstance(value, (int, float)) else [float(v) for v in value]
        self._host_pieces.append((name, len(floats)))
        self._host += floats

    def add_block(self, pieces: Sequence[tuple[str, int]], value: Tensor) -> None:
        """Append ``value`` (flat, float64 on :attr:`device`) as consecutive ``pieces`` (name, size): one
        part for several names."""
        if sum(size for _, size in pieces) != value.numel():
            raise ValueError(
                f"`pieces` hold {sum(size for _, size in pieces)} values, `value` {value.numel()}."
            )
        self._pieces += list(pieces)
        self._parts.append(value)

    def vector(self) -> Tensor:
        """The packed vector (empty pieces included: the layout is the same whatever was measured)."""
        parts = list(self._parts)
        if self._host_pieces:
            parts.append(torch.tensor(self._host, dtype=torch.float64, device=self.device))
        if not parts:
            return torch.zeros(0, dtype=torch.float64, device=self.device)
        return torch.cat(parts) if len(parts) > 1 else parts[0]


Losses = Sequence[Tensor] | Tensor  # per-step loss tensors, or their :func:`loss_vector`


def loss_vector(losses: Losses, device: torch.device | None = None) -> Tensor:
    """The per-step losses as one float64 vector on ``device`` (their own when ``None``). No sync.

    Example:
        >>> loss_vector([torch.tensor(1.5), torch.tensor([2.0])]).tolist()
        [1.5, 2.0]
    """
    if isinstance(losses, Tensor):
        return losses.to(device or losses.device, torch.float64).reshape(-1)
    if not losses:
        return torch.zeros(0, dtype=torch.float64, device=device)
    device = device or losses[0].device
    try:
        values = torch.stack(list(losses)).reshape(-1)
    except RuntimeError:  # shapes () and (1,) mixed, or losses on several devices
        values = torch.stack([loss.to(device).reshape(()) for loss in losses])
    if values.numel() != len(losses):
        raise ValueError(
            f"`losses` must hold one value per step, got {values.numel()} for {len(losses)} steps."
        )
    return values.to(device, torch.float64)


#: The pieces of :func:`loss_statistics`, in order, with their sizes.
LOSS_PIECES = (("loss", _LOSS_MOMENTS), ("loss_head", 1), ("loss_first", 1), ("loss_first_nonfinite", 1))


def loss_statistics(losses: Tensor, steps: Sequence[int], device: torch.device, head: int = 5) -> Tensor:
    """One interval's losses as :data:`LOSS_PIECES` (float64, no sync): the moments of the
    finite losses over their steps, the mean of the first ``head`` losses, the first loss, the first
    non-finite position.

    Example:
        >>> losses = loss_vector([torch.tensor(v) for v in [2.0, 1.0, float("nan"), 1.0]])
        >>> loss_statistics(losses, [0, 1, 2, 3], torch.device("cpu"), head=2).tolist()
        [3.0, 4.0, 10.0, 4.0, 4.0, 10.0, 6.0, 4.0, 10.0, 1.5, 2.0, 2.0]
    """
    if len(losses) == 0:
        empty = [0.0] * _LOSS_MOMENTS + [math.nan, math.nan, 0.0]
        return torch.tensor(empty, dtype=torch.float64, device=device)
    values = losses.to(device, torch.float64).reshape(-1)
    finite = (values * 0 == 0).double()  # x * 0 is 0 exactly where x is finite (NaN for NaN and inf)
    x = values.nan_to_num(0.0, 0.0, 0.0)  # the finite losses, 0 elsewhere
    powers = torch.tensor([[1.0, t, t * t] for t in steps], dtype=torch.float64, device=device)
    moments = torch.stack([finite, x, x * x]) @ powers
    first = finite.argmin().double()  # the first 0: the first loss that is not finite
    return torch.cat([moments.reshape(-1), values[:head].mean().reshape(1), values[:1], first.reshape(1)])


def squared_norm(params: Sequence[Tensor], device: torch.device) -> Tensor:
    """The squared total norm of ``params`` (float64 on ``device``; NaN when none). No sync."""
    if not params:
        return torch.full((), math.nan, dtype=torch.float64, device=device)
    norms = torch.stack(torch._foreach_norm([p.detach() for p in params], 2.0)).double()
    return norms.to(device).square().sum()


def weight_and_update_powers(
    weights: Sequence[Tensor],
    updates: Sequence[Tensor],
    owners: Sequence[int],
    groups: int,
    shard_group: Any = None,
) -> tuple[Tensor, Tensor]:
    """Per group, the squared norms of ``weights`` and of their ``updates`` (tensor
    ``i`` in group ``owners[i]``), float64, no sync; shards and other dtypes via ``norms.group_powers``.

    Example:
        >>> w = [torch.tensor([3.0, 4.0]), torch.tensor([1.0]), torch.tensor([2.0])]
        >>> u = [torch.tensor([0.3, 0.4]), torch.tensor([0.0]), torch.tensor([0.5])]
        >>> [t.tolist() for t in weight_and_update_powers(w, u, [0, 1, 1], 2)]
        [[25.0, 5.0], [0.25, 0.25]]
    """
    device = weights[0].device
    tensors = [*weights, *updates]
    if shard_group is not None or not all(type(t) is Tensor and t.dtype == torch.float32 for t in tensors):
        weight, update = (group_powers(ts, owners, groups, 2.0, shard_group) for ts in (weights, updates))
        return weight.to(device, torch.float64), update.to(device, torch.float64)
    norms = torch._foreach_norm(tensors, 2.0)
    try:
        squares = torch.stack(norms).double().square()
    except RuntimeError:  # tensors on several devices
        squares = torch.stack([n.to(device) for n in norms]).double().square()
    index = torch.tensor([*owners, *(g + groups for g in owners)], dtype=torch.long, device=device)
    both = torch.zeros(2 * groups, dtype=torch.float64, device=device).index_add_(0, index, squares)
    return both[:groups], both[groups:]


def loss_trend(rows: Iterable[Sequence[float]]) -> tuple[int, float, float, float, float]:
    """Every rank's :func:`loss_statistics` moments added: (count, mean, std, least-squares slope per step,
    its standard error) of the finite losses, from ``_stats.line_fit``."""
    s = [sum(column) for column in zip(*rows)] if rows else [0.0] * _LOSS_MOMENTS
    n, st, stt, total, stl, squares = s[0], s[1], s[2], s[3], s[4], s[6]
    return (round(n), *line_fit(n, total, squares, st, stt, stl))


def optimizer_family(optimizer: Any) -> str:
    """``"adaptive"``, ``"sgd"`` or ``"other"`` from the optimizer's class names (Muon: other).

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
    """Per group, the :func:`optimizer_family` of the first optimizer holding its parameters."""
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
    """Per group, the largest ``lr`` of ``optimizer`` (float64, ``-inf`` where none), max with ``current``."""
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
    """``[standard error, sample count]`` of a validation loss from its batches (``[NaN, 0]``: none)."""
    if not values:
        return torch.tensor([math.nan, 0.0], dtype=torch.float64, device=device)
    x = torch.stack([v.detach().to(device, torch.float64).reshape(()) for v in values])
    w = torch.stack([s.detach().to(device, torch.float64).reshape(()) for s in sizes])
    return torch.stack([standard_error(x, weights=w).double(), w.sum()])


class RowLiveness:
    """Which output units of each Linear/Conv layer were alive on the sampled batches: dead when
    never positive **and** its weight row got no gradient. Device tensors only.

    Example:
        >>> layer = nn.Linear(4, 3)
        >>> with torch.no_grad():
        ...     _ = layer.bias.copy_(torch.tensor([-50.0, 0.0, 0.0]))  # unit 0 never fires
        >>> rows = RowLiveness([layer])
        >>> handles = ActivationHooks(rows=rows).attach(([], [], [], [("0", layer)]))
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

    def record_gradients(self) -> None:
        """Mark the rows whose weight gradient is non-zero (call between backward and the optimizer step)."""
        with torch.no_grad():
            for i, layer in enumerate(self.layers):
                grad = getattr(getattr(layer, "weight", None), "grad", None)
                if grad is None or grad.ndim < 1 or grad.numel() == 0:
                    continue
                alive = (grad.flatten(1) if grad.ndim > 1 else grad.reshape(-1, 1)).ne(0).any(1)
                bias = getattr(getattr(layer, "bias", None), "grad", None)
                if bias is not None and bias.shape == alive.shape:
                    alive |= bias.ne(0)  # a unit fed zeros by dead units upstream still learns
                self._mark(i, alive)

    def dead_fractions(self, device: torch.device) -> Tensor:
        """Per layer, the fraction of units marked by neither reading (``-1`` for a layer not measured)."""
        return dead_of(self.alive, len(self.layers), device)


def sparse_groups(
    model: nn.Module, params: Sequence[Tensor], group_index: Sequence[int], group_names: Sequence[str]
) -> set[str]:
    """The parameter groups holding an embedding table (its gradient RMS is diluted).

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
    """``model``'s (name, module) pairs the monitor watches: ReLUs, tanh/sigmoids (a recurrent layer's gates
    as ``<name>:gates``), leaves, Linear/Conv."""
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
        elif isinstance(module, nn.RNNBase) and getattr(module, "nonlinearity", "tanh") == "tanh":
            saturating.append((f"{name}:gates", module))  # its gates are sigmoids and tanhs (no ReLU RNN)
        elif isinstance(module, _SATURATING):
            saturating.append((name, module))
        if not any(True for _ in module.children()):
            leaves.append((name, module))
    return relu, saturating, leaves, rows


_PASS_THROUGH = (
    nn.Dropout,
    nn.Identity,
    nn.BatchNorm1d,
    nn.BatchNorm2d,
    nn.BatchNorm3d,
    nn.LayerNorm,
    nn.GroupNorm,
)


def unrectified_layers(model: nn.Module) -> set[str]:
    """Linear/Conv layers that end an ``nn.Sequential`` (nothing but normalisation or dropout after them):
    no activation of theirs can die or saturate, so their rows are not read as dead units.

    Example:
        >>> sorted(unrectified_layers(nn.Sequential(nn.Linear(2, 8), nn.ReLU(), nn.Linear(8, 4))))
        ['2']
    """
    found: set[str] = set()
    for name, module in model.named_modules():
        if isinstance(module, nn.Sequential):
            children = list(module.named_children())
            for i, (child_name, child) in enumerate(children):
                after = [c for _, c in children[i + 1 :] if not isinstance(c, _PASS_THROUGH)]
                if isinstance(child, ROW_LAYERS) and not after:
                    found.add(f"{name}.{child_name}" if name else child_name)
    return found


def flat_and_gain(output: Tensor, tanh: bool) -> Tensor:
    """``[flat fraction, gain]`` of a tanh/sigmoid output (no sync): the share in the flat part,
    and the mean slope relative to the peak.

    Example:
        >>> [round(v, 3) for v in flat_and_gain(torch.sigmoid(torch.tensor([-10.0, 0.0])), False).tolist()]
        [0.5, 0.5]
    """
    out = output.detach().float()
    if tanh:
        flat, gain = out.abs() > 0.99, 1.0 - out * out
    else:
        flat, gain = (out < 0.01) | (out > 0.99), 4.0 * out * (1.0 - out)
    return torch.stack([flat.float().mean(), gain.mean()])


#: ``atanh(0.99)`` and ``logit(0.99)``: pre-activations beyond these put a tanh/sigmoid in its flat part.
_TANH_FLAT, _SIGMOID_FLAT = math.atanh(0.99), math.log(99.0)


def gate_flat_and_gain(module: nn.RNNBase, args: Any) -> Tensor | None:
    """``[flat fraction, gain]`` (as :func:`flat_and_gain`) of a GRU/LSTM/tanh-RNN's first-layer gates,
    from their pre-activations' input side ``W_ih x + b_ih + b_hh`` (exact at the first time step from a zero
    state; later steps add ``W_hh h``, not measured). ``None`` where the input is not a plain tensor. No sync.

    Example:
        >>> gru = nn.GRU(2, 3, batch_first=True)
        >>> calm, loud = torch.randn(4, 5, 2) * 0.1, torch.randn(4, 5, 2) * 1000.0
        >>> [round(float(gate_flat_and_gain(gru, (x,))[0]), 1) for x in (calm, loud)]
        [0.0, 1.0]
    """
    x = args[0] if args else None
    weight = getattr(module, "weight_ih_l0", None)
    bias_ih, bias_hh = getattr(module, "bias_ih_l0", None), getattr(module, "bias_hh_l0", None)
    if not (isinstance(x, Tensor) and isinstance(weight, Tensor) and x.is_floating_point() and x.numel()):
        return None
    pre = torch.nn.functional.linear(x.detach().to(weight.dtype), weight.detach())
    if isinstance(bias_ih, Tensor) and isinstance(bias_hh, Tensor):
        pre = pre + bias_ih.detach() + bias_hh.detach()
    pre = pre.reshape(-1, pre.shape[-1]).float()
    hidden = module.hidden_size
    # which gates are tanh: GRU's candidate (r, z, n), LSTM's cell input (i, f, g, o), all of a tanh RNN's
    tanh = torch.zeros(pre.shape[-1], dtype=torch.bool, device=pre.device)
    if isinstance(module, nn.GRU):
        tanh[2 * hidden :] = True
    elif isinstance(module, nn.LSTM):
        tanh[2 * hidden : 3 * hidden] = True
    else:
        tanh[:] = True
    bound = torch.where(tanh, _TANH_FLAT, _SIGMOID_FLAT)
    flat = (pre.abs() > bound).float().mean()
    squashed = torch.where(tanh, torch.tanh(pre), torch.sigmoid(pre))
    gain = torch.where(tanh, 1.0 - squashed * squashed, 4.0 * squashed * (1.0 - squashed)).mean()
    return torch.stack([flat, gain])


class ActivationHooks:
    """One forward hook per watched module on a sampled batch, filling the stores given
    (``None``: not measured): ``nonfinite``, ``alive``, ``saturation``, ``rows``, ``calls``. No sync.

    Example:
        >>> net = nn.Sequential(nn.Linear(4, 3), nn.ReLU())
        >>> with torch.no_grad():
        ...     _ = net[0].bias.copy_(torch.tensor([-50.0, 0.0, 0.0]))  # unit 0 never fires
        >>> alive, nonfinite = {}, {}
        >>> hooks = ActivationHooks(alive=alive, nonfinite=nonfinite)
        >>> handles = hooks.attach(([("1", net[1])], [], [("0", net[0]), ("1", net[1])], []))
        >>> _ = net(torch.randn(16, 4))
        >>> alive[0].tolist(), [len(outs) for outs, _ in nonfinite.values()]
        ([False, True, True], [1, 1])
    """

    def __init__(
        self,
        alive: dict[int, Tensor] | None = None,
        saturation: dict[int, Tensor] | None = None,
        nonfinite: dict[int, tuple[list[Tensor], list[Tensor]]] | None = None,
        rows: RowLiveness | None = None,
        calls: FunctionalSaturation | None = None,
    ) -> None:
        self.alive, self.saturation, self.nonfinite = alive, saturation, nonfinite
        self.rows, self.calls = rows, calls
        # id -> (weak reference, positive units, their dim, sum): weak, never keeping an activation alive
        self._seen: dict[int, tuple[weakref.ref[Tensor], Tensor | None, int, Tensor | None]] = {}
        # per tanh/sigmoid module, this batch's calls: (the layer that produced the input, the row) or, once
        # it has run on two layers' outputs, None (a shared module: each call is its layer's)
        self._batch_calls: dict[int, list[tuple[int | None, Tensor]] | None] = {}

    def attach(self, watched: tuple[Named, Named, Named, Named]) -> list[Any]:
        """Hook the modules of ``watched`` (ReLUs, tanh/sigmoids, leaves, Linear/Conv, as from
        :func:`watched_modules`) for the stores given; returns the handles (remove them after the batch)."""
        self._seen, self._batch_calls = {}, {}
        roles: dict[int, tuple[nn.Module, list[int | None]]] = {}
        kinds = [self.alive, self.saturation, self.nonfinite, self.rows]
        for k, (named, store) in enumerate(zip(watched, kinds)):
            if store is None:
                continue
            for i, (_, module) in enumerate(named):
                roles.setdefault(id(module), (module, [None] * 4))[1][k] = i
        handles = []
        for module, (relu, sat, leaf, row) in roles.values():
            handles.append(module.register_forward_hook(self._hook(relu, sat, leaf, row, module)))
            if sat is not None and self.calls is not None:  # calls inside it are the module's own
                handles.append(module.register_forward_pre_hook(self.calls.enter))
        return handles

    def _hook(
        self, relu: int | None, sat: int | None, leaf: int | None, row: int | None, module: nn.Module
    ) -> Callable[..., None]:
        linear, tanh = isinstance(module, nn.Linear), isinstance(module, nn.Tanh)
        recurrent = module if isinstance(module, nn.RNNBase) else None

        def hook(module: nn.Module, args: Any, output: Any) -> None:
            suspended = _suspend_sampled_modes()  # the hook's own ops are not the model's calls
            try:
                with torch.no_grad():
                    if row is not None:
                        self._row(row, linear, output)
                    if relu is not None:
                        self._relu(relu, args, output)
                    if sat is not None:
                        gates = gate_flat_and_gain(recurrent, args) if recurrent is not None else None
                        self._saturation(sat, tanh, args, output, recurrent is not None, gates)
                    if leaf is not None:
                        self._leaf(leaf, args, output)
            finally:
                _resume_modes(suspended)

        return hook

    def _row(self, i: int, linear: bool, output: Any) -> None:
        if not isinstance(output, Tensor) or output.ndim < 1 or not output.is_floating_point():
            return
        dim = output.ndim - 1 if linear else 1
        positive = _positive_units(output, dim)
        assert self.rows is not None
        self.rows._mark(i, positive)
        self._seen[id(output)] = (weakref.ref(output), positive, dim, None)
        if self.calls is not None:
            self.calls.note(i, output)

    def _relu(self, i: int, args: Any, output: Any) -> None:
        if not isinstance(output, Tensor) or output.ndim < 2:
            return
        dim = 1 if output.ndim in (4, 5) else output.ndim - 1
        source = args[0] if args and isinstance(args[0], Tensor) else None
        seen = self._measured(source) if source is not None else None
        if seen is not None and seen[1] is not None and seen[2] == dim:
            alive = seen[1]  # relu(x) > 0 exactly where x > 0: the layer's mask
        else:
            alive = _positive_units(output, dim)
        assert self.alive is not None
        previous = self.alive.get(i)
        if previous is None:
            self.alive[i] = alive
        elif previous.shape == alive.shape:
            self.alive[i] = previous | alive
        else:  # one module at several widths (a ReLU shared by layers): no one layer's units, not measured
            self.alive[i] = alive[:0]

    def _saturation(
        self, i: int, tanh: bool, args: Any, output: Any, recurrent: bool = False, gates: Tensor | None = None
    ) -> None:
        calls = self.calls
        if calls is not None:
            calls.leave()
        if recurrent:  # a recurrent layer: its gates' (``gate_flat_and_gain``), not its output's
            output = gates
        if not isinstance(output, Tensor) or not output.is_floating_point() or output.numel() == 0:
            return
        row = output.reshape(1, 2) if recurrent else flat_and_gain(output, tanh).reshape(1, 2)
        layer = calls.producer(args[0]) if calls is not None and args else None
        batch = self._batch_calls.setdefault(i, [])
        if batch is not None and layer is not None and any(k not in (None, layer) for k, _ in batch):
            # one module on two layers' outputs (a shared nn.Tanh): an average over the layers would hide a
            # saturated one, so every call of this batch is its layer's, as a function's call on it is
            assert calls is not None and self.saturation is not None
            own = [(k, r) for k, r in batch if k is None]  # calls on no layer's output stay the module's
            kept = self.saturation[i][: len(self.saturation[i]) - len(batch)]
            self.saturation[i] = torch.cat([kept, *(r for _, r in own)])
            for k, r in batch:
                if k is not None:
                    calls.add(k, tanh, r)
            batch = self._batch_calls[i] = None
        if batch is None and layer is not None:
            assert calls is not None
            calls.add(layer, tanh, row)
            return
        if batch is not None:
            batch.append((layer, row))
        assert self.saturation is not None
        previous = self.saturation.get(i)
        self.saturation[i] = row if previous is None else torch.cat([previous, row])

    def _leaf(self, i: int, args: Any, output: Any) -> None:
        outs = [self._sum(t) for t in flat_tensors(output) if t.is_floating_point() or t.is_complex()]
        if not outs:
            return
        ins = [self._sum(t) for t in flat_tensors(args) if t.is_floating_point() or t.is_complex()]
        assert self.nonfinite is not None
        kept = self.nonfinite.setdefault(i, ([], []))
        kept[0].extend(outs)
        kept[1].extend(ins)

    def _sum(self, t: Tensor) -> Tensor:
        """``t``'s sum in float64 (complex: its modulus), measured once per tensor of the batch; only whether
        it is finite is read. A large float32/16 tensor: the sum of ``t * 0`` in its own dtype (0 exactly
        where every value is finite, NaN elsewhere; it cannot overflow): faster than a float64 sum."""
        seen = self._measured(t)
        if seen is not None and seen[3] is not None:
            return seen[3]
        if t.is_complex():
            total = t.sum().abs().double()
        elif t.dtype == torch.float64 or t.device.type == "mps":  # MPS has no float64
            total = t.sum()
        elif t.numel() >= _LARGE_OUTPUT:
            total = (t * 0).sum()
        else:
            total = t.sum(dtype=torch.float64)
        positive, dim = (seen[1], seen[2]) if seen is not None else (None, -1)
        self._seen[id(t)] = (weakref.ref(t), positive, dim, total)
        return total

    def _measured(self, t: Tensor) -> tuple[weakref.ref[Tensor], Tensor | None, int, Tensor | None] | None:
        """What this batch measured of ``t`` already (``None``: nothing, or another tensor at that id)."""
        seen = self._seen.get(id(t))
        return seen if seen is not None and seen[0]() is t else None


_LARGE_OUTPUT = 2**14  # values: from here on the fast paths of _positive_units and ActivationHooks._sum


def _positive_units(output: Tensor, dim: int) -> Tensor:
    """Per unit along ``dim``, whether any of ``output``'s values there is positive (bool, on its device),
    without a copy moving ``dim`` last. A large output is reduced as bytes (bool and uint8 share a layout:
    their max is ``any``): first over the dims before ``dim``, element-wise along the contiguous rest, then
    along each unit's own values; torch's ``any`` over leading dims is many times slower there."""
    positive = output > 0
    others = tuple(d for d in range(output.ndim) if d != dim)
    if output.numel() < _LARGE_OUTPUT or not others or output.device.type != "cpu":  # measured on CPU only
        return positive.any(others) if others else positive
    units = positive.view(torch.uint8)
    if dim > 0:
        units = units.amax(tuple(range(dim)))
    if units.ndim > 1:
        units = units.flatten(1).amax(1)
    return units.bool()


def nonfinite_counts(
    store: dict[int, tuple[list[Tensor], list[Tensor]]], count: int, device: torch.device
) -> Tensor:
    """Per leaf ``0..count-1`` of :class:`ActivationHooks`' ``nonfinite`` store, ``[outputs, inputs]``: how
    many of its measured tensors held a non-finite value (float64, flat, on ``device``): one stack. No sync.
    """
    sums = [(2 * i + k, s) for i, pair in store.items() if i < count for k in (0, 1) for s in pair[k]]
    out = torch.zeros(2 * count, dtype=torch.float64, device=device)
    if sums:
        owners = torch.tensor([o for o, _ in sums], dtype=torch.long, device=device)
        values = torch.stack([s.to(device) for _, s in sums])  # one dtype: the widest (float64 sums first)
        out.index_add_(0, owners, (values * 0 != 0).double())  # x * 0 is NaN exactly where x is not finite
    return out


#: The functional sigmoids and tanhs :class:`FunctionalSaturation` measures: function -> 0 sigmoid, 1 tanh.
SATURATING_FUNCTIONS: dict[Any, int] = {
    torch.sigmoid: 0,
    Tensor.sigmoid: 0,
    torch.special.expit: 0,
    torch.nn.functional.sigmoid: 0,
    torch.tanh: 1,
    Tensor.tanh: 1,
    torch.nn.functional.tanh: 1,
}


def _suspend_sampled_modes() -> list[TorchFunctionMode]:
    """Pop the monitor's own function modes (:class:`_SampledMode`) while they are the innermost ones, so
    that a hook's ops do not pass through their Python ``__torch_function__``; returns them, innermost
    first, for :func:`_resume_modes`. A mode of the user's on top: nothing is popped."""
    popped: list[TorchFunctionMode] = []
    while isinstance(torch.overrides._get_current_function_mode(), _SampledMode):
        popped.append(torch._C._pop_torch_function_stack())
    return popped


def _resume_modes(popped: list[TorchFunctionMode]) -> None:
    """Push back the modes :func:`_suspend_sampled_modes` popped, in their order."""
    for mode in reversed(popped):
        torch._C._push_on_torch_function_stack(mode)


class _SampledMode(TorchFunctionMode):
    """A torch function mode switched on for sampled batches only."""

    _active = False

    def start(self) -> None:
        """Push the mode (this thread), once."""
        if not self._active:
            self.__enter__()
            self._active = True

    def stop(self) -> None:
        """Pop the mode when it is the innermost one."""
        if self._active and torch.overrides._get_current_function_mode() is self:
            self.__exit__(None, None, None)
            self._active = False


class FunctionalSaturation(_SampledMode):
    """Saturation of a sigmoid/tanh function called on a Linear/Conv layer's output (a
    highway gate), per layer and kind, while active. No sync.

    Example:
        >>> gate = nn.Linear(4, 3)
        >>> with torch.no_grad():
        ...     _ = gate.bias.fill_(-10.0)
        >>> mode = FunctionalSaturation([gate])
        >>> handles = mode.attach()
        >>> mode.start()
        >>> g = torch.sigmoid(gate(torch.randn(8, 4) * 0.1))
        >>> mode.stop()
        >>> [round(v, 3) for v in mode.store[(0, 0)][0].tolist()]
        [1.0, 0.0]
    """

    def __init__(self, layers: Sequence[nn.Module]) -> None:
        super().__init__()
        self.layers = list(layers)
        self.store: dict[tuple[int, int], Tensor] = {}
        self._produced: dict[int, tuple[int, Tensor]] = {}
        self._inside = 0
        self.called = False  # whether a sigmoid/tanh function was called while active, anywhere

    def clear(self) -> None:
        self.store = {}

    def attach(self) -> list[Any]:
        """Forward hooks noting each layer's output (where :class:`ActivationHooks` does not hook the layers);
        returns their handles."""

        def produced(i: int) -> Callable[..., None]:
            def hook(module: nn.Module, args: Any, output: Any) -> None:
                self.note(i, output)

            return hook

        return [layer.register_forward_hook(produced(i)) for i, layer in enumerate(self.layers)]

    def note(self, i: int, output: Any) -> None:
        """Layer ``i`` produced ``output`` (while active)."""
        if self._active and isinstance(output, Tensor):
            self._produced[id(output)] = (i, output)

    def enter(self, *_: Any) -> None:
        """A tanh/sigmoid module's forward begins (a forward pre-hook): calls inside it are its own."""
        self._inside += 1

    def leave(self, *_: Any) -> None:
        """A tanh/sigmoid module's forward ended."""
        self._inside = max(self._inside - 1, 0)

    def stop(self) -> None:
        """Pop the mode when it is the innermost one, and forget the batch's outputs."""
        super().stop()
        self._produced = {}
        self._inside = 0

    def __torch_function__(
        self, func: Any, types: Any, args: Sequence[Any] = (), kwargs: dict[str, Any] | None = None
    ) -> Any:
        out = func(*args, **(kwargs or {}))
        kind = SATURATING_FUNCTIONS.get(func)
        if kind is None:
            return out
        self.called = True
        if self._inside or not args or not isinstance(out, Tensor):
            return out
        layer = self.producer(args[0])
        if layer is not None and out.is_floating_point() and out.numel():
            self.add(layer, bool(kind), flat_and_gain(out, tanh=bool(kind)).reshape(1, 2))
        return out

    def producer(self, value: Any) -> int | None:
        """The index of the layer whose output ``value`` is (this batch, while active), else ``None``."""
        hit = self._produced.get(id(value))
        return hit[0] if hit is not None and hit[1] is value else None

    def add(self, layer: int, tanh: bool, row: Tensor) -> None:
        """One call's ``[flat fraction, gain]`` row of a sigmoid (``tanh`` False) or tanh on ``layer``'s
        output."""
        previous = self.store.get((layer, int(tanh)))
        self.store[(layer, int(tanh))] = row if previous is None else torch.cat([previous, row])

    def pack(self, device: torch.device) -> Tensor:
        """Per layer, per kind (sigmoid, tanh), the mean ``[flat fraction, gain]`` (``-1`` not measured)."""
        rows = {2 * i + kind: value for (i, kind), value in self.store.items()}
        return means_by_index(rows, 2 * len(self.layers), 2, device).reshape(-1)


def dead_of(alive: dict[int, Tensor], count: int, device: torch.device) -> Tensor:
    """Per ReLU ``0..count-1``, the fraction of units never active in ``alive`` (``-1``: not measured)."""
    fractions = means_by_index(alive, count, 1, device).reshape(-1)
    return torch.where(fractions >= 0, 1.0 - fractions, fractions) if alive else fractions


def means_by_index(values: Mapping[int, Tensor], count: int, width: int, device: torch.device) -> Tensor:
    """Per index ``0..count-1``, the mean of ``values[i]`` over dim 0 (``[count, width]``
    float64, ``-1`` where not measured), in one segment mean. No sync.

    Example:
        >>> means_by_index({0: torch.tensor([True, False]), 2: torch.tensor([1.0, 1.0, 4.0])}, 3, 1,
        ...                torch.device("cpu")).reshape(-1).tolist()
        [0.5, -1.0, 2.0]
    """
    out = torch.full((count, width), -1.0, dtype=torch.float64, device=device)
    measured = [i for i in range(count) if i in values and values[i].numel()]
    if not measured:
        return out
    shape = (-1,) if width == 1 else (-1, width)
    parts = [values[i] if values[i].ndim == len(shape) else values[i].reshape(shape) for i in measured]
    try:
        flat = torch.cat(parts).to(device, torch.float64)  # one dtype and device: one copy
    except RuntimeError:  # several devices
        flat = torch.cat([p.to(device, torch.float64) for p in parts])
    lengths = torch.tensor([p.shape[0] for p in parts], device=device)
    means = torch.segment_reduce(flat, "mean", lengths=lengths, axis=0)
    where = torch.tensor(measured, device=device)
    return out.index_copy_(0, where, means if width > 1 else means.unsqueeze(1))


def combine(
    rows: list[list[float]],
    layout: dict[str, slice],
    step: int,
    epoch: int,
    groups: tuple[list[str], list[int], list[str]],
    layers: tuple[list[str], list[str], list[str], list[str]],
    host: tuple[str | None, float],
) -> CheckData:
    """Every rank's packed vector combined into one check's :class:`CheckData` (host floats)."""
    group_names, group_numel, families = groups
    relu, _, leaves, row_layers = layers

    def column(name: str) -> list[list[float]]:
        return [row[layout[name]] for row in rows]

    data = CheckData(step=step, epoch=epoch)
    losses = column("loss")
    data.loss_count, data.loss_mean, data.loss_std, data.loss_slope, data.loss_slope_se = loss_trend(losses)
    counts = [r[0] for r in column("loss_n")]  # each rank's losses, finite or not
    data.loss_nonfinite = round(sum(counts) - sum(r[0] for r in losses))
    data.loss_head = sum(r[0] for r in column("loss_head")) / len(rows)
    data.loss_first = sum(r[0] for r in column("loss_first")) / len(rows)
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
        for name, pairs in _saturation_entries(column("saturated"), column("saturated_calls"), layers):
            _saturation_into(data.saturated, data.saturation_gain, name, pairs)
        sums = [[sum(pair) for pair in zip(*(r[k::2] for r in column("nonfinite")))] for k in (0, 1)]
        for name, out, inputs in zip(leaves, *sums):
            if out > 0:
                data.nonfinite_modules.append(name or "<root>")
                if inputs > 0:
                    data.nonfinite_inputs.append(name or "<root>")
    if "saturated_init" in layout:  # the run's first check only
        init = _saturation_entries(column("saturated_init"), column("saturated_init_calls"), layers)
        fractions: dict[str, float] = {}
        gains: dict[str, float] = {}
        for name, pairs in init:
            _saturation_into(fractions, gains, name, pairs)
        data.saturated_init = {name: (f, gains[name]) for name, f in fractions.items()}
    records = column("step_records")
    for k in range(len(records[0]) // _STEP_RECORD):
        ranks_of_step = [r[_STEP_RECORD * k : _STEP_RECORD * (k + 1)] for r in records]
        grad_sq = max(r[0] for r in ranks_of_step)  # the same all-reduced gradient on every rank (DDP)
        if any(r[2] >= 0 and not math.isfinite(r[3]) for r in ranks_of_step):  # read: a nan/inf batch
            data.nonfinite_batch_steps.append(k)
        if not math.isnan(grad_sq):
            rank = max(
                range(len(ranks_of_step)),
                key=lambda i: ranks_of_step[i][3] if math.isfinite(ranks_of_step[i][3]) else -1.0,
            )
            _, batch_index, row_index, extreme = ranks_of_step[rank]
            data.step_records.append((k, math.sqrt(grad_sq), int(batch_index), int(row_index), rank, extreme))
    if "dead_start" in layout:
        for name, values in zip(relu, zip(*column("dead_start"))):
            measured = [v for v in values if v >= 0]
            if measured:
                data.dead_start[name] = min(measured)
        for name, values in zip(row_layers, zip(*column("dead_rows_start"))):
            if max(values) >= 0:
                data.dead_rows_start[name or "<root>"] = max(values)
    if "loss_first_nonfinite" in layout:  # valid on the ranks with a loss that is not finite
        firsts = [f[0] for f, n, r in zip(column("loss_first_nonfinite"), counts, losses) if n > r[0]]
        data.first_nonfinite_step = round(min(firsts)) if firsts else None
    if "input_free" in layout:  # sums over ranks: the paired differences of every sampled batch
        summed = [float(sum(r[k] for r in column("input_free"))) for k in range(6)]
        total, squares, count, guess, floor, floors = summed
        if count >= 2:
            data.input_free_gap = total / count
            spread = max(squares / count - data.input_free_gap**2, 0.0)
            data.input_free_gap_se = math.sqrt(spread / (count - 1))
            data.input_free_loss = guess / count
            data.loss_floor = floor / count if floors == count else math.nan  # every call's floor, or none
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


_STEP_RECORD = 4  # squared gradient norm, batch index, row, its largest |input|
KEEP_BYTES = 32 * 2**20  # the batches an interval may keep for the check's one scan (more: each step scans)


class StepRecords:
    """Per step of an interval, the evidence of ``outlier_batches``: the gradient norm and the
    batch's largest |input| (kept by reference under :data:`KEEP_BYTES`, scanned at the check). No sync.

    Example:
        >>> records = StepRecords()
        >>> records.gradients(0, [torch.tensor([3.0, 4.0])])  # the norm of each tensor
        [tensor(5.)]
        >>> x = torch.randn(8, 3).clamp(-3, 3)
        >>> x[5, 1] = -999.0
        >>> records.inputs(0, (x, torch.zeros(8, dtype=torch.long)), 17)
        >>> records.pack(2, torch.device("cpu")).tolist()
        [25.0, 17.0, 5.0, 999.0, nan, -1.0, -1.0, nan]
    """

    def __init__(self) -> None:
        self.keep_batches = True  # False once a loader is seen refilling one buffer
        self.clear()

    def clear(self) -> None:
        self._norms: dict[int, list[Tensor]] = {}  # per step: its gradients' norms, one per tensor
        self._batches: dict[int, int] = {}  # per step: the batch index
        # per step, per floating tensor of its batch: (largest |value|, its flat index, values per row)
        self._largest: dict[int, list[tuple[Tensor, Tensor, int]]] = {}
        self._kept: dict[int, list[tuple[Tensor, int]]] = {}  # per step: its batch's tensors, versions
        self._kept_bytes = 0
        self._addresses: set[int] = set()

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_kept": {}, "_kept_bytes": 0, "_addresses": set()}

    def gradients(self, position: int, grads: list[Tensor]) -> list[Tensor]:
        """Record step ``position``'s gradients; returns their norms, one per tensor."""
        if not grads:
            return []
        if grads[0].requires_grad:  # a graph kept for a higher-order gradient: not ours to extend
            grads = [g.detach() for g in grads]
        norms = list(torch._foreach_norm(grads, 2.0))
        kept = self._norms.get(position)
        if kept is None:
            self._norms[position] = norms
        else:
            kept.extend(norms)
        return norms

    def inputs(self, position: int, batch: Any, batch_idx: int) -> None:
        """Record step ``position``'s batch: where its largest |value| is (a -999 sentinel shows here)."""
        self._batches[position] = batch_idx
        tensors: list[Tensor] = []
        size, plain = 0, True
        for t in flat_tensors(batch):  # one pass: the floating tensors with values, their bytes
            if t.is_floating_point() and t.ndim and t.nbytes:
                if t.requires_grad:
                    t = t.detach()
                plain = plain and type(t) is Tensor
                size += t.nbytes
                tensors.append(t)
        if not tensors:
            return
        if self.keep_batches and plain:
            addresses = {t.data_ptr() for t in tensors}
            if addresses & self._addresses:  # one buffer refilled: the batches kept with it are gone
                self.keep_batches = False
                self._kept = {
                    p: kept
                    for p, kept in self._kept.items()
                    if not {t.data_ptr() for t, _ in kept} & addresses
                }
            elif self._kept_bytes + size <= KEEP_BYTES:
                self._kept[position] = [(t, t._version) for t in tensors]
                self._kept_bytes += size
                self._addresses |= addresses
                return
        largest = []
        for t in tensors:
            value, index = t.abs().reshape(-1).max(0)
            largest.append((value, index, t.numel() // t.shape[0]))
        self._largest[position] = largest

    def pack(self, steps: int, device: torch.device) -> Tensor:
        """Per step (``steps`` slots): ``[squared gradient norm, batch index, row, largest |input|]``, NaN
        (``-1`` for the indices) where not recorded, as one flat float64 vector on ``device``: the host
        values in one tensor, the measured ones written into it by one ``index_copy_``. No sync."""
        host = [math.nan, -1.0, -1.0, math.nan] * steps
        for position, batch_idx in self._batches.items():
            if 0 <= position < steps:
                host[_STEP_RECORD * position + 1] = float(batch_idx)
        out = torch.tensor(host, dtype=torch.float64, device=device)
        where: list[int] = []
        parts: list[Tensor] = []
        grads = {k: v for k, v in self._norms.items() if 0 <= k < steps}
        if grads:
            where += [_STEP_RECORD * k for k in grads]
            parts.append(_squared_sums(list(grads.values()), device))
        columns = self._columns(steps)
        if columns and all(j == 0 for j, _, _, _ in columns):  # one floating tensor per batch: no max
            recorded = [p for _, positions, _, _ in columns for p in positions]  # each step in one column
            rows_of = [row for _, _, _, row in columns]
            largest_of = [largest.to(device, torch.float64) for _, _, largest, _ in columns]
            row = torch.cat(rows_of) if len(rows_of) > 1 else rows_of[0]
            parts += [row.to(device, torch.float64), *largest_of]
        elif columns:
            recorded = sorted({p for _, positions, _, _ in columns for p in positions})
            rows, values = _largest_rows(columns, steps, device)
            index = torch.tensor(recorded, dtype=torch.long, device=device)
            parts += [rows.index_select(0, index), values.index_select(0, index)]
        if columns:
            where += [_STEP_RECORD * p + 2 for p in recorded] + [_STEP_RECORD * p + 3 for p in recorded]
        if parts:
            values = torch.cat(parts) if len(parts) > 1 else parts[0]
            out.index_copy_(0, torch.tensor(where, dtype=torch.long, device=device), values)
        return out

    def _columns(self, steps: int) -> list[tuple[int, list[int], Tensor, Tensor]]:
        """Per tensor slot and layout: ``(slot, steps, largest |values|, their rows)``."""
        groups: dict[tuple[Any, ...], list[tuple[int, Tensor]]] = {}
        for position, kept in self._kept.items():
            if 0 <= position < steps and all(t._version == version for t, version in kept):
                for j, (t, _) in enumerate(kept):
                    groups.setdefault((j, t.shape, t.dtype, t.device), []).append((position, t))
        scanned: dict[tuple[int, int], list[tuple[int, Tensor, Tensor]]] = {}
        for position, largest in self._largest.items():
            if 0 <= position < steps:
                for j, (value, index, per_row) in enumerate(largest):
                    scanned.setdefault((j, per_row), []).append((position, value, index))
        columns = []
        with torch.no_grad():
            for (j, *_), members in groups.items():
                stacked = torch.stack([t for _, t in members])
                values, index = stacked.abs().reshape(len(members), -1).max(1)
                per_row = members[0][1].numel() // members[0][1].shape[0]
                columns.append((j, [p for p, _ in members], values, index // per_row))
            for (j, per_row), entries in scanned.items():
                try:
                    values, index = (
                        torch.stack([v for _, v, _ in entries]),
                        torch.stack([i for _, _, i in entries]),
                    )
                except RuntimeError:  # batches on several devices
                    device = entries[0][1].device
                    values = torch.stack([v.to(device) for _, v, _ in entries])
                    index = torch.stack([i.to(device) for _, _, i in entries])
                columns.append((j, [p for p, _, _ in entries], values, index // per_row))
        return columns


def _squared_sums(norms: list[list[Tensor]], device: torch.device) -> Tensor:
    """Per step, the sum of its tensors' squared norms (float64): one stack when every step has as many."""
    count = len(norms[0])
    if all(len(step) == count for step in norms):
        try:
            stacked = torch.stack([n for step in norms for n in step])
        except RuntimeError:  # parameters on several devices
            pass
        else:
            return stacked.to(device, torch.float64).square().reshape(len(norms), count).sum(1)
    return torch.stack(
        [torch.stack([n.to(device, torch.float64) for n in step]).square().sum() for step in norms]
    )


def _largest_rows(
    columns: list[tuple[int, list[int], Tensor, Tensor]], steps: int, device: torch.device
) -> tuple[Tensor, Tensor]:
    """Per step, the row holding its batch's largest |value|, and that value (NaN wins: a NaN target beside
    finite inputs makes the batch non-finite)."""
    width = max(j for j, _, _, _ in columns) + 1
    values = torch.full((steps, width), -math.inf, dtype=torch.float64, device=device)
    rows = torch.full((steps, width), -1, dtype=torch.long, device=device)
    for j, positions, largest, row in columns:
        where = torch.tensor(positions, dtype=torch.long, device=device)
        values[:, j].index_copy_(0, where, largest.to(device, torch.float64))
        rows[:, j].index_copy_(0, where, row.to(device))
    best, row = values[:, 0], rows[:, 0]
    for j in range(1, width):  # the first tensor's value unless a later one is larger
        larger = (values[:, j] > best) | values[:, j].isnan()
        best, row = torch.where(larger, values[:, j], best), torch.where(larger, rows[:, j], row)
    return row.double(), best


def _pairs(rows: list[list[float]]) -> list[list[tuple[float, float]]]:
    """Every rank's flat ``[fraction, gain, fraction, gain, ...]`` as, per entry, the ranks' pairs."""
    per_rank = [list(zip(r[0::2], r[1::2])) for r in rows]
    return [list(entry) for entry in zip(*per_rank)]


def _saturation_entries(
    modules: list[list[float]], calls: list[list[float]], layers: tuple[list[str], ...]
) -> list[tuple[str, list[tuple[float, float]]]]:
    """(name, every rank's ``(flat fraction, gain)``) per module, then per function call."""
    saturating, row_layers = layers[1], layers[3]
    out = list(zip(saturating, _pairs(modules)))
    for k, values in enumerate(_pairs(calls)):
        out.append((f"{row_layers[k // 2] or '<root>'}:{('sigmoid', 'tanh')[k % 2]}", values))
    return out


def _saturation_into(
    fractions: dict[str, float], gains: dict[str, float], name: str, values: Sequence[tuple[float, float]]
) -> None:
    """The mean flat fraction and gain over the ranks that measured ``name`` (``-1``: not measured)."""
    measured = [(f, g) for f, g in values if f >= 0]
    if measured:
        fractions[name] = sum(f for f, _ in measured) / len(measured)
        gains[name] = sum(g for _, g in measured) / len(measured)


class ValidationBatches:
    """One validation pass's per-batch mean losses and sizes (device tensors)."""

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
            samples = float(batch_samples(batch))
            self.sizes.append(torch.full((), samples, dtype=torch.float64, device=loss.device))


def batch_samples(batch: Any) -> int:
    try:
        return int(extract_batch_size(batch))
    except Exception:  # any batch Lightning cannot size counts as one sample
        return 1


def flat_tensors(output: Any) -> list[Tensor]:
    """Every tensor in a nested output (lists, tuples, dicts)."""
    if isinstance(output, Tensor):
        return [output]
    if isinstance(output, (list, tuple)):
        out: list[Tensor] = []
        for item in output:  # a batch's tensors, without a call each
            if isinstance(item, Tensor):
                out.append(item)
            else:
                out += flat_tensors(item)
        return out
    if isinstance(output, dict):
        return [t for item in output.values() for t in flat_tensors(item)]
    return []


#: torch's loss functions -> the positions of their prediction arguments (one row per sample along dim 0).
INPUT_FREE_LOSSES: dict[Any, tuple[int, ...]] = {
    torch.nn.functional.cross_entropy: (0,),
    torch.nn.functional.nll_loss: (0,),
    torch.nn.functional.mse_loss: (0,),
    torch.nn.functional.l1_loss: (0,),
    torch.nn.functional.smooth_l1_loss: (0,),
    torch.nn.functional.huber_loss: (0,),
    torch.nn.functional.poisson_nll_loss: (0,),
    torch.nn.functional.gaussian_nll_loss: (0, 2),
    torch.nn.functional.binary_cross_entropy_with_logits: (0,),
    torch.nn.functional.binary_cross_entropy: (0,),
}
#: Losses whose minimum over the prediction is the target itself: the loss of the target as its own
#: prediction is the floor (the constant a full Gaussian likelihood or soft BCE targets carry).
FLOOR_AT_TARGET = {
    torch.nn.functional.mse_loss,
    torch.nn.functional.l1_loss,
    torch.nn.functional.smooth_l1_loss,
    torch.nn.functional.huber_loss,
    torch.nn.functional.gaussian_nll_loss,
    torch.nn.functional.binary_cross_entropy,
}


class InputFreeLoss(_SampledMode):
    """On sampled batches, each torch loss call evaluated again with the prediction replaced by
    its batch mean; keeps the paired differences on the device. No sync.

    Example:
        >>> mode = InputFreeLoss()
        >>> mode.start()
        >>> loss = torch.nn.functional.mse_loss(torch.tensor([[0.0], [2.0]]), torch.tensor([[0.0], [2.0]]))
        >>> mode.stop()
        >>> mode.pack(torch.device("cpu")).tolist()  # each row's loss at the mean guess 1.0: 1 - 0; floor 0
        [2.0, 2.0, 2.0, 2.0, 0.0, 2.0]
    """

    def __init__(self) -> None:
        super().__init__()
        self.sums: Tensor | None = None
        self.count = 0  # elements measured (a host count: shapes only)
        self.floor: Tensor | None = None  # the sum of the losses of the targets as their own predictions
        self.floors = 0  # ... over this many of the elements measured
        self.rows = 0  # the sampled batch's samples (0: unknown); a loss over k x as many rows groups them

    def clear(self) -> None:
        self.sums, self.count, self.floor, self.floors = None, 0, None, 0

    def pack(self, device: torch.device) -> Tensor:
        """``[sum, sum of squares, count, input-free loss sum, floor sum, floor count]`` since
        :meth:`clear` (zeros: none)."""
        if self.sums is None:
            return torch.zeros(6, device=device)
        total, squares, guess = self.sums.to(device).unbind()
        floor = self.floor.to(device) if self.floor is not None else torch.zeros_like(total)
        counts = [torch.full_like(total, float(n)) for n in (self.count, self.floors)]
        return torch.stack([total, squares, counts[0], guess, floor, counts[1]])

    def __torch_function__(
        self, func: Any, types: Any, args: Sequence[Any] = (), kwargs: dict[str, Any] | None = None
    ) -> Any:
        out = func(*args, **(kwargs or {}))
        predicted = INPUT_FREE_LOSSES.get(func)
        if predicted is not None and len(args) >= 2:
            # an unusual call: no evidence, never a failed step
            with contextlib.suppress(Exception):
                self._measure(func, predicted, list(args), dict(kwargs or {}))
        return out

    def _measure(
        self, func: Any, predicted: tuple[int, ...], args: list[Any], kwargs: dict[str, Any]
    ) -> None:
        first = args[0]
        if not (isinstance(first, Tensor) and first.is_floating_point() and first.ndim >= 1):
            return
        if first.shape[0] < 2 or len(args) > 3:  # one row has no mean; a positional reduction: left alone
            return
        kwargs.pop("size_average", None)
        kwargs.pop("reduce", None)
        kwargs["reduction"] = "none"
        with torch.no_grad():  # no graph: the arguments need no detach
            own = func(*args, **kwargs)
            target = args[1]
            at_target = func in FLOOR_AT_TARGET and isinstance(target, Tensor) and target.shape == first.shape
            floor = func(target.to(first.dtype), *args[1:], **kwargs) if at_target else None
            n, b = first.shape[0], self.rows
            # rows of k positions per sample (a flattened sequence, several heads): the mean over the samples
            # per position, sample-major or position-major, whichever is nearer the model's own (on device)
            layouts = [(b, n // b, 0), (n // b, b, 1)] if 1 < b < n and n % b == 0 else [(n, 1, 0)]
            guesses = []
            for layout in layouts:
                call_args, call_kwargs = list(args), dict(kwargs)
                for i in predicted:
                    value = args[i] if i < len(args) else kwargs.get("var")
                    if isinstance(value, Tensor) and value.shape[:1] == first.shape[:1]:
                        if i < len(args):
                            call_args[i] = _sample_mean(value, layout)
                        else:
                            call_kwargs["var"] = _sample_mean(value, layout)
                guesses.append(func(*call_args, **call_kwargs))
            if any(own.shape != g.shape for g in guesses):
                return
            # float64 sums (a non-finite loss makes them NaN: no evidence from that interval)
            rows = []
            for guess in guesses:
                diff = guess.double() - own
                rows.append(torch.stack([diff.sum(), diff.square().sum(), guess.sum(dtype=torch.float64)]))
            row = rows[0] if len(rows) == 1 else torch.where(rows[0][1] <= rows[1][1], rows[0], rows[1])
            self.sums = row if self.sums is None else self.sums + row
            self.count += diff.numel()
            if floor is not None and floor.shape == own.shape:  # a loss minimal at its target: its floor
                floor = floor.sum(dtype=torch.float64)
                self.floor = floor if self.floor is None else self.floor + floor
                self.floors += diff.numel()


def _sample_mean(value: Tensor, layout: tuple[int, int, int]) -> Tensor:
    """``value`` with each row replaced by the mean over the samples: its rows viewed as ``layout[:2]``, the
    samples along ``layout[2]``."""
    if layout[1] == 1:  # one row per sample: the batch mean
        return value.mean(0, keepdim=True, dtype=torch.float32).to(value.dtype).expand_as(value)
    shape = (*layout[:2], *value.shape[1:])
    mean = value.reshape(shape).mean(layout[2], keepdim=True, dtype=torch.float32).to(value.dtype)
    return mean.expand(shape).reshape(value.shape)
