"""Weight-decay parameter groups: decay weight matrices, never biases, normalization layers or embeddings."""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable
from typing import Any

from torch import nn

__all__ = ["NORM_LAYERS", "param_groups"]

NORM_LAYERS: tuple[type[nn.Module], ...] = (
    nn.modules.batchnorm._NormBase,  # BatchNorm1d/2d/3d, SyncBatchNorm, LazyBatchNorm*, InstanceNorm*
    nn.LayerNorm,
    nn.GroupNorm,
    nn.LocalResponseNorm,
    *((nn.RMSNorm,) if hasattr(nn, "RMSNorm") else ()),
)
_EMBEDDINGS: tuple[type[nn.Module], ...] = (nn.Embedding, nn.EmbeddingBag)


def param_groups(
    module: nn.Module,
    weight_decay: float,
    *,
    no_decay: Iterable[str] = (),
    decay_embeddings: bool = False,
) -> list[dict[str, Any]]:
    """Split a module's trainable parameters into a ``"decay"`` and a ``"no_decay"`` group.

    Weight decay pulls weights toward zero; applied to biases, the scale/shift of normalization layers or
    embedding rows it only hurts (it fights the normalization and shrinks rare tokens). A parameter goes to
    ``"no_decay"`` if any of these hold, otherwise to ``"decay"``:

    - it has fewer than 2 dimensions (biases, norm scales, scalar gates);
    - it belongs to a normalization layer, detected by type (BatchNorm*, SyncBatchNorm, InstanceNorm*,
      LayerNorm, GroupNorm, RMSNorm, LocalResponseNorm, and subclasses) - whatever its shape;
    - it belongs to an ``nn.Embedding`` / ``nn.EmbeddingBag`` and ``decay_embeddings`` is False;
    - its name is returned by ``no_weight_decay()`` of the module or any submodule (timm's convention;
      names relative to that submodule), or matches a pattern of ``no_decay`` (``fnmatch`` globs on the full
      name, e.g. ``"*.pos_embed"``, ``"head.*"``).

    A parameter shared by several modules (tied weights) appears once, in ``"no_decay"`` if any owner
    says so. Frozen parameters (``requires_grad=False``) are left out. Groups carry a ``"name"`` (so
    ``LearningRateMonitor`` logs ``lr-AdamW/decay`` and ``lr-AdamW/no_decay``), and the no-decay group sets
    ``layer_adaptation=False`` (used by :class:`~lightning_recipes.optim.Lamb`, ignored by other optimizers).
    Empty groups are omitted. Cost: one walk over the modules, at configuration time only.

    Args:
        module: The model (usually the ``LightningModule`` itself).
        weight_decay: Weight decay of the ``"decay"`` group, >= 0.
        no_decay: Extra names or glob patterns to exclude from decay.
        decay_embeddings: Decay embedding tables too.

    Returns:
        A list of param-group dicts to pass to any ``torch.optim.Optimizer``.

    Raises:
        ValueError: If ``weight_decay`` is negative, or ``no_decay`` is a bare string.
        RuntimeError: If the module has no trainable parameter.

    Example:
        >>> from torch import nn
        >>> model = nn.Sequential(nn.Embedding(10, 4), nn.Linear(4, 4), nn.LayerNorm(4))
        >>> groups = param_groups(model, weight_decay=0.1)
        >>> [(g["name"], g["weight_decay"], len(g["params"])) for g in groups]
        [('decay', 0.1, 1), ('no_decay', 0.0, 4)]
    """
    if isinstance(weight_decay, bool) or not isinstance(weight_decay, (int, float)) or not weight_decay >= 0:
        raise ValueError(f"`weight_decay` must be a number >= 0, got {weight_decay!r}.")
    if isinstance(no_decay, str):
        raise ValueError(
            f"`no_decay` must be an iterable of names or patterns, not a string: got {no_decay!r}; "
            "wrap it in a list."
        )
    patterns = list(no_decay)

    excluded_names: set[str] = set()
    for prefix, submodule in module.named_modules():
        names_fn = getattr(submodule, "no_weight_decay", None)
        if callable(names_fn):
            excluded_names.update(f"{prefix}.{name}" if prefix else name for name in names_fn())

    no_decay_ids: set[int] = set()
    seen: dict[int, nn.Parameter] = {}
    for prefix, submodule in module.named_modules(remove_duplicate=False):
        for local_name, param in submodule.named_parameters(recurse=False):
            if not param.requires_grad:
                continue
            name = f"{prefix}.{local_name}" if prefix else local_name
            seen.setdefault(id(param), param)
            if (
                param.ndim < 2
                or isinstance(submodule, NORM_LAYERS)
                or (isinstance(submodule, _EMBEDDINGS) and not decay_embeddings)
                or name in excluded_names
                or any(fnmatch.fnmatchcase(name, pattern) for pattern in patterns)
            ):
                no_decay_ids.add(id(param))

    if not seen:
        raise RuntimeError(f"`module` ({type(module).__name__}) has no trainable parameter to optimize.")
    # keep the module's parameter order inside each group (stable optimizer state order)
    ordered = [p for p in module.parameters() if p.requires_grad]
    decay = [p for p in ordered if id(p) not in no_decay_ids]
    keep = [p for p in ordered if id(p) in no_decay_ids]
    if len(decay) + len(keep) != len(
        seen
    ):  # a parameter owned by no module cannot exist, but never drop one silently
        raise RuntimeError(
            f"param_groups lost parameters: {len(seen)} trainable, {len(decay)} + {len(keep)} grouped. "
            "Please report this."
        )
    groups: list[dict[str, Any]] = []
    if decay:
        groups.append({"params": decay, "weight_decay": float(weight_decay), "name": "decay"})
    if keep:
        groups.append({"params": keep, "weight_decay": 0.0, "name": "no_decay", "layer_adaptation": False})
    return groups
