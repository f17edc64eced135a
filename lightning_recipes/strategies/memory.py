"""Memory of training under each strategy preset: the per-device estimate (parameters, gradients, optimizer
state, gathered parameters, activations) and the measurement of one real step."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import lightning.pytorch as pl
import torch
from torch import Tensor, nn

from lightning_recipes._blocks import BlockSpec, infer_block_classes, resolve_block_classes
from lightning_recipes._console import new_table, render
from lightning_recipes._names import PRECISIONS
from lightning_recipes._validation import check_choice, check_int
from lightning_recipes.harness.optimizers import optimizers_from_config
from lightning_recipes.optim.names import OPTIMIZERS
from lightning_recipes.strategies._layout import GIB, LAYOUTS, MemoryLayout, autocast_dtype

__all__ = [
    "OPTIMIZER_STATES",
    "ActivationMeasurement",
    "MemoryEstimate",
    "StepMemory",
    "estimate_memory",
    "measure_activations",
    "measure_step_memory",
    "optimizer_name",
    "read_optimizer",
]

# optimizer -> (state tensors per parameter, bytes of a per-tensor ``step`` scalar)
OPTIMIZER_STATES: dict[str, tuple[int, int]] = {
    name: (spec.state_tensors, spec.step_bytes) for name, spec in OPTIMIZERS.items()
}


@dataclass(frozen=True)
class MemoryEstimate:
    """Bytes on the most loaded device for one training configuration, rows adding up to :attr:`total`;
    ``host`` bytes (offload) and ``bytes_per_param`` before sharding (the "16 bytes for AdamW" figure)."""

    strategy: str
    precision: str
    optimizer: str
    devices: int
    num_nodes: int
    num_params: int
    parameters: int
    gradients: int
    optimizer_state: int
    master_weights: int
    gathered: int = 0
    activations: int | None = None
    host: int = 0
    bytes_per_param: float = 0.0
    notes: tuple[str, ...] = field(default=())

    @property
    def world_size(self) -> int:
        return self.devices * self.num_nodes

    @property
    def total(self) -> int:
        """Device bytes: the sum of all rows (activations count as 0 when not measured)."""
        rows = (self.parameters, self.gradients, self.optimizer_state, self.master_weights, self.gathered)
        return sum(rows) + (self.activations or 0)

    def fits(self, device_memory_gb: float, *, headroom: float = 0.1) -> bool:
        """Whether :attr:`total` fits in ``device_memory_gb`` GiB with a ``headroom`` fraction free."""
        return self.total <= device_memory_gb * GIB * (1.0 - headroom)

    def rows(self) -> list[tuple[str, int | None]]:
        return [
            ("parameters", self.parameters),
            ("gradients", self.gradients),
            ("optimizer state", self.optimizer_state),
            ("master weights", self.master_weights),
            ("gathered", self.gathered),
            ("activations", self.activations),
            ("total per device", self.total),
            ("host (offload)", self.host),
        ]

    def table(self) -> Any:
        """A ``rich`` table of the rows in GiB and bytes (without rich, a plain-text one)."""
        title = (
            f"{self.strategy}: {self.num_params:,} params, {self.optimizer}, {self.precision},"
            f" {self.devices} device(s) x {self.num_nodes} node(s)"
        )
        table = new_table(title, title_justify="left", expand=True, fitting=True)
        table.add_column("per device")
        table.add_column("GiB", justify="right")
        table.add_column("bytes", justify="right")
        for name, value in self.rows():
            if value is None:
                table.add_row(name, "-", "not measured (pass sample_batch=)")
            else:
                table.add_row(name, f"{value / GIB:.2f}", f"{value:,}")
        return table

    def __str__(self) -> str:
        return render(self.table(), *self.notes)


def estimate_memory(
    model_or_num_params: nn.Module | int,
    *,
    optimizer: str | None = None,
    precision: str = "32-true",
    strategy: str = "ddp",
    devices: int = 1,
    num_nodes: int = 1,
    activation_checkpointing: bool | None = None,
    sample_batch: Any = None,
    block_classes: BlockSpec | None = None,
    forward_fn: Callable[[nn.Module, Any], Any] | None = None,
) -> MemoryEstimate:
    """Estimate per-device memory of training under a ``strategy`` preset (a key of
    :data:`~lightning_recipes.strategies.PRESETS`). Activations are measured on ``sample_batch`` (through
    ``forward_fn``); a model (possibly on ``meta``) gives exact per-tensor sizes. ``optimizer=None``: the
    model's own (:func:`read_optimizer`), else ``adamw``. Rows: ``docs/guides/strategies.md``.

    Example:
        >>> est = estimate_memory(7_000_000_000, optimizer="adamw", precision="bf16-mixed",
        ...                       strategy="deepspeed_zero3", devices=8)
        >>> round(est.bytes_per_param, 3), round(est.total / 2**30, 1)
        (16.0, 13.0)
    """
    notes: list[str] = []
    optimizer = _optimizer(model_or_num_params, optimizer, notes)
    layout = _check(strategy, optimizer, precision, devices, num_nodes)
    states, step_bytes = OPTIMIZER_STATES[optimizer]
    deepspeed_16 = layout.family == "deepspeed" and ("16" in precision and not precision.startswith("32"))
    half = precision in ("16-true", "bf16-true") or deepspeed_16
    param_bytes = 2 if half else 8 if precision == "64-true" else 4
    state_bytes = 4 if deepspeed_16 else param_bytes
    master_bytes = 4 if deepspeed_16 else 0
    compute_bytes = 2 if ("16" in precision and precision != "32-true") else param_bytes
    group = devices if layout.hybrid else devices * num_nodes

    if isinstance(model_or_num_params, nn.Module):
        model = model_or_num_params
        shapes = [tuple(p.shape) for p in model.parameters() if p.requires_grad]
        num_params = sum(math.prod(s) for s in shapes)
        n_tensors = len(shapes)
        full = num_params
        local = sum(_local_numel(s, group, layout.row_chunks) for s in shapes)
    else:
        model = None
        num_params = int(model_or_num_params)
        if num_params <= 0:
            raise ValueError(
                f"`model_or_num_params` must be a module or a positive count, got {num_params!r}."
            )
        n_tensors = 0
        full, local = num_params, math.ceil(num_params / group)
        if step_bytes:
            notes.append("per-tensor optimizer scalars (AdamW `step`) need a model; not counted")

    def numel(sharded: bool) -> int:
        return local if sharded else full

    def place(nbytes: int, offloaded: bool) -> tuple[int, int]:
        return (0, nbytes) if offloaded else (nbytes, 0)

    parameters, host_p = place(numel(layout.shard_params) * param_bytes, layout.offload_params)
    grad_elem_bytes = 4 if layout.offload_grads and layout.family == "deepspeed" else param_bytes
    gradients, host_g = place(numel(layout.shard_grads) * grad_elem_bytes, layout.offload_grads)
    opt_numel = numel(layout.shard_optimizer)
    opt_total = opt_numel * states * state_bytes + n_tensors * step_bytes * (1 if states else 0)
    optimizer_state, host_o = place(opt_total, layout.offload_optimizer)
    master_weights, host_m = place(opt_numel * master_bytes, layout.offload_optimizer)

    checkpointing = (
        layout.activation_checkpointing if activation_checkpointing is None else activation_checkpointing
    )
    blocks = None
    if model is not None and (layout.gathers or sample_batch is not None):
        blocks = resolve_block_classes(block_classes) or _try_infer(model, notes)
    gathered = 0
    if layout.keeps_gathered and group > 1:
        gathered = full * compute_bytes
    elif layout.gathers and group > 1:
        if model is None or blocks is None:
            notes.append("transient gathered parameters need a model with repeated blocks; not counted")
        else:
            gathered = _gathered_numel(model, blocks) * compute_bytes
    activations = None
    if sample_batch is not None:
        if model is None:
            raise ValueError("`sample_batch` needs a model, not a parameter count, to measure activations.")
        measured = measure_activations(
            model,
            sample_batch,
            block_classes=blocks,
            forward_fn=forward_fn,
            autocast_dtype=autocast_dtype(precision),
        )
        activations = measured.total(checkpointing and blocks is not None)
    return MemoryEstimate(
        strategy=strategy,
        precision=precision,
        optimizer=optimizer,
        devices=devices,
        num_nodes=num_nodes,
        num_params=num_params,
        parameters=parameters,
        gradients=gradients,
        optimizer_state=optimizer_state,
        master_weights=master_weights,
        gathered=gathered,
        activations=activations,
        host=host_p + host_g + host_o + host_m,
        bytes_per_param=float(param_bytes + grad_elem_bytes + states * state_bytes + master_bytes),
        notes=tuple(notes),
    )


def _optimizer(model_or_num_params: nn.Module | int, given: str | None, notes: list[str]) -> str:
    if not isinstance(model_or_num_params, nn.Module):
        return "adamw" if given is None else given
    name, source = read_optimizer(model_or_num_params)
    if given is None:
        if name is None:
            notes.append(f"optimizer state counted for adamw: the model's optimizer is unknown ({source})")
            return "adamw"
        notes.append(f"optimizer {name}: read from {source}")
        return name
    if name is not None and name != given:
        notes.append(f"optimizer state counted for {given} as asked, though {source} says {name}")
    return given


def _check(strategy: str, optimizer: str, precision: str, devices: int, num_nodes: int) -> MemoryLayout:
    check_choice("strategy", strategy, sorted(LAYOUTS))
    check_choice("optimizer", optimizer, sorted(OPTIMIZER_STATES))
    check_choice("precision", str(precision), PRECISIONS)
    check_int("devices", devices, minimum=1)
    check_int("num_nodes", num_nodes, minimum=1)
    return LAYOUTS[strategy]


def _local_numel(shape: tuple[int, ...], group: int, row_chunks: bool) -> int:
    """Elements on the most loaded rank: FSDP2 chunks dim 0, others split the flat tensor."""
    numel = math.prod(shape)
    if group == 1:
        return numel
    if row_chunks and shape:
        return math.ceil(shape[0] / group) * (numel // shape[0] if shape[0] else 0)
    return math.ceil(numel / group)


def _gathered_numel(model: nn.Module, blocks: tuple[type[nn.Module], ...]) -> int:
    block_modules = [m for m in model.modules() if isinstance(m, blocks)]
    in_blocks = {id(p) for m in block_modules for p in m.parameters()}
    root = sum(p.numel() for p in model.parameters() if id(p) not in in_blocks)
    sizes = sorted((sum(p.numel() for p in m.parameters()) for m in block_modules), reverse=True)
    return root + sum(sizes[:2])


def _try_infer(model: nn.Module, notes: list[str]) -> tuple[type[nn.Module], ...] | None:
    try:
        return infer_block_classes(model)
    except ValueError as err:
        notes.append(str(err))
        return None


def read_optimizer(model: nn.Module) -> tuple[str | None, str]:
    """The optimizer name ``model`` trains with (from its recipe, else from what ``configure_optimizers()``
    builds) and where it was read; ``(None, why)`` when it cannot be told.

    Example:
        >>> from lightning_recipes.testing import TinyClassifier
        >>> read_optimizer(TinyClassifier())  # its configure_optimizers() builds SGD without momentum
        ('sgd', "the model's configure_optimizers()")
        >>> read_optimizer(nn.Linear(2, 2))
        (None, 'Linear has no configure_optimizers')
    """
    resolve = getattr(model, "resolve_recipe", None)
    if callable(resolve):
        try:
            name = resolve()["optimizer"]
        except (ValueError, TypeError) as err:
            return None, f"its recipe could not be read: {err}"
        return str(name), "the model's recipe"
    configure = getattr(model, "configure_optimizers", None)
    if not callable(configure):
        return None, f"{type(model).__name__} has no configure_optimizers"
    try:
        built = configure()
    except Exception as err:  # user code outside a Trainer: anything may go wrong; say what
        return None, f"configure_optimizers() failed outside a Trainer ({type(err).__name__}: {err})"
    optimizers = optimizers_from_config(built)
    if len(optimizers) != 1:
        return None, f"configure_optimizers() returned {len(optimizers)} optimizers, not one"
    name = optimizer_name(optimizers[0])
    if name is None:
        return None, f"{type(optimizers[0]).__name__} is not in the optimizer table"
    return name, "the model's configure_optimizers()"


def optimizer_name(optimizer: torch.optim.Optimizer) -> str | None:
    """The table name of an optimizer instance (``SGD`` with momentum is ``sgd_momentum``), or ``None``.

    Example:
        >>> optimizer_name(torch.optim.SGD([nn.Parameter(torch.zeros(1))], lr=0.1, momentum=0.9))
        'sgd_momentum'
    """
    cls = type(optimizer).__name__
    group = optimizer.param_groups[0] if optimizer.param_groups else optimizer.defaults
    if cls == "SGD":
        return "sgd_momentum" if group.get("momentum", 0) else "sgd"
    if cls == "RMSprop":
        return "rmsprop_momentum" if group.get("momentum", 0) or group.get("centered") else "rmsprop"
    for name, spec in OPTIMIZERS.items():
        if spec.class_name == cls:
            return name
    return None


@dataclass
class ActivationMeasurement:
    """Result of :func:`measure_activations`, in bytes: everything ``saved`` for backward, the ``largest``
    storage, the ``block_inputs`` (what checkpointing keeps), the most one block saves and what is saved
    ``outside`` any block."""

    saved: int
    largest: int
    block_inputs: int
    block_max: int
    outside: int

    def total(self, activation_checkpointing: bool) -> int:
        """Activation bytes at the backward peak, with or without checkpointing of the blocks."""
        held = self.outside + self.block_inputs + self.block_max if activation_checkpointing else self.saved
        return min(held, self.saved) + self.largest


def default_forward(model: nn.Module, batch: Any) -> Any:
    """``model(batch)`` for a tensor, ``model(batch[0])`` for a tuple/list, ``model(**batch)`` for a dict."""
    if isinstance(batch, Tensor):
        return model(batch)
    if isinstance(batch, (tuple, list)):
        return model(batch[0])
    if isinstance(batch, dict):
        return model(**batch)
    raise TypeError(f"`sample_batch` must be a Tensor, tuple, list or dict, got {type(batch).__name__}.")


def measure_activations(
    model: nn.Module,
    batch: Any,
    *,
    block_classes: tuple[type[nn.Module], ...] | None = None,
    forward_fn: Callable[[nn.Module, Any], Any] | None = None,
    autocast_dtype: torch.dtype | None = None,
) -> ActivationMeasurement:
    """Account every tensor autograd saves for backward in one forward pass on ``batch``, by innermost block
    (parameters excluded, storages counted once). Works on CPU; the model is not changed.

    Example:
        >>> import torch
        >>> from lightning_recipes.testing import TinyTransformerLM, TransformerBlock
        >>> model, ids = TinyTransformerLM(), torch.randint(0, 64, (2, 16))
        >>> m = measure_activations(model, ids, block_classes=(TransformerBlock,))
        >>> m.saved > m.outside + m.block_inputs + m.block_max > 0
        True
    """
    forward = forward_fn or default_forward
    param_storages = {p.untyped_storage().data_ptr() for p in model.parameters()}
    seen: dict[int, int] = {}
    per_block: dict[int, int] = {}
    block_inputs = 0
    stack: list[int] = []

    def pack(tensor: Tensor) -> Tensor:
        storage = tensor.untyped_storage()
        key = storage.data_ptr()
        if key and key not in param_storages and key not in seen:
            seen[key] = storage.nbytes()
            owner = stack[-1] if stack else -1
            per_block[owner] = per_block.get(owner, 0) + storage.nbytes()
        return tensor

    def pre_hook(module: nn.Module, args: tuple[Any, ...]) -> None:
        nonlocal block_inputs
        if not stack:  # only outermost blocks are checkpoint units
            block_inputs += sum(a.untyped_storage().nbytes() for a in args if isinstance(a, Tensor))
        stack.append(id(module))

    def post_hook(module: nn.Module, args: tuple[Any, ...], output: Any) -> None:
        stack.pop()

    handles = []
    for module in model.modules():
        if block_classes and isinstance(module, block_classes):
            handles.append(module.register_forward_pre_hook(pre_hook))
            handles.append(module.register_forward_hook(post_hook))
    device_type = next((p.device.type for p in model.parameters()), "cpu")
    autocast = (
        torch.autocast(device_type, dtype=autocast_dtype) if autocast_dtype else contextlib.nullcontext()
    )
    try:
        with torch.enable_grad(), autocast, torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            output = forward(model, batch)
        del output
    finally:
        for handle in handles:
            handle.remove()
    outside = per_block.pop(-1, 0)
    return ActivationMeasurement(
        saved=sum(seen.values()),
        largest=max(seen.values(), default=0),
        block_inputs=block_inputs,
        block_max=max(per_block.values(), default=0),
        outside=outside,
    )


@dataclass(frozen=True)
class StepMemory:
    """Bytes of one training step: ``activations`` alive when ``training_step`` returns, and the ``peak``."""

    activations: int
    peak: int
    device: str


def measure_step_memory(model: pl.LightningModule, batch: Any, *, batch_idx: int = 0) -> StepMemory:
    """The bytes ``training_step(batch, batch_idx)`` and ``backward`` hold, counted on a copy of ``model``
    (works on CPU; the model and the RNG streams are left as they were).

    Example:
        >>> from lightning_recipes.strategies import checkpoint_blocks
        >>> from lightning_recipes.testing import TinyTransformerLM, random_token_loader
        >>> batch = next(iter(random_token_loader(vocab_size=64, seq_len=64)))
        >>> plain = measure_step_memory(TinyTransformerLM(n_layers=4), batch)
        >>> model = TinyTransformerLM(n_layers=4)
        >>> _ = checkpoint_blocks(model)
        >>> plain.activations > 3 * measure_step_memory(model, batch).activations
        True
    """
    import copy

    from torch.distributed._tools.mem_tracker import MemTracker

    from lightning_recipes.harness import Harness, preserved_rng

    copied = copy.deepcopy(model)
    context = Harness(copied, [batch], device=model.device)
    tracker = MemTracker()
    tracker.track_external(copied)
    with preserved_rng(), tracker:
        loss = context.training_loss(copied, batch, batch_idx)
        after_forward = tracker.get_tracker_snapshot("current")
        loss.backward()
        peak = tracker.get_tracker_snapshot("peak")
    device = model.device

    def total(snapshot: dict[Any, dict[Any, int]], kind: str) -> int:
        return sum(
            value
            for dev, stats in snapshot.items()
            if torch.device(dev).type == device.type
            for key, value in stats.items()
            if str(key).endswith(kind)
        )

    return StepMemory(total(after_forward, ".ACT"), total(peak, "Total"), str(device))
