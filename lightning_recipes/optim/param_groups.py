"""Parameter groups: weight decay for weight matrices only (never biases, norms or embeddings), layer-wise LR
decay (BEiT / ELECTRA) from the depth of every parameter in the model's repeated blocks, and LRs by name."""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable, Mapping
from typing import Any

from torch import nn

from lightning_recipes._blocks import BlockSpec, find_blocks, infer_block_classes, resolve_block_classes
from lightning_recipes._validation import check_in_range, check_positive, did_you_mean
from lightning_recipes._warn_once import warn_once
from lightning_recipes.optim.tied import parameter_names

__all__ = [
    "NORM_LAYERS",
    "check_layer_decay",
    "check_lr_scale",
    "layer_depths",
    "layer_name",
    "layer_scale",
    "match_lr_scale",
    "param_groups",
]

#: Module types whose parameters go to the ``no_decay`` group (normalisation layers).
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
    layer_decay: float | None = None,
    block_classes: BlockSpec | None = None,
    lr_scale: Mapping[str, float] | None = None,
    split: Iterable[str] = (),
    lr: float | None = None,
) -> list[dict[str, Any]]:
    """Split a module's trainable parameters into named ``"decay"`` and ``"no_decay"`` groups.

    ``"no_decay"`` (``layer_adaptation=False`` for Lamb) takes tensors of fewer than 2 dimensions, norm
    layers, embeddings (unless ``decay_embeddings``) and names from ``no_weight_decay()`` or the ``no_decay``
    globs. With ``layer_decay`` (depths from :func:`layer_depths`), ``lr_scale`` (module path or regex ->
    factor) or ``split`` (prefixes with groups of their own), each group carries ``"lr"`` (``lr`` required)
    and ``"lr_scale"``. ``ValueError`` for an entry that selects no parameter or one another entry selects.

    Example:
        >>> from torch import nn
        >>> model = nn.Sequential(nn.Embedding(10, 4), nn.Linear(4, 4), nn.LayerNorm(4))
        >>> groups = param_groups(model, weight_decay=0.1)
        >>> [(g["name"], g["weight_decay"], len(g["params"])) for g in groups]
        [('decay', 0.1, 1), ('no_decay', 0.0, 4)]
        >>> from lightning_recipes.testing import TinyTransformerLM
        >>> groups = param_groups(TinyTransformerLM(n_layers=2), 0.1, layer_decay=0.5, lr=1e-3)
        >>> [(g["name"], g["lr"]) for g in groups if g["name"].endswith("/decay")]
        [('block_0/decay', 0.00025), ('block_1/decay', 0.0005), ('head/decay', 0.001)]
    """
    if isinstance(weight_decay, bool) or not isinstance(weight_decay, (int, float)) or not weight_decay >= 0:
        raise ValueError(f"`weight_decay` must be a number >= 0, got {weight_decay!r}.")
    if isinstance(no_decay, str):
        raise ValueError(
            f"`no_decay` must be an iterable of names or patterns, not a string: got {no_decay!r}; "
            "wrap it in a list."
        )
    patterns = list(no_decay)
    if lr is not None:
        check_positive("lr", lr)

    excluded_names: set[str] = set()
    for prefix, submodule in module.named_modules():
        names_fn = getattr(submodule, "no_weight_decay", None)
        if callable(names_fn):
            excluded_names.update(f"{prefix}.{name}" if prefix else name for name in names_fn())

    no_decay_ids: set[int] = set()
    for prefix, submodule in module.named_modules(remove_duplicate=False):
        for local_name, param in submodule.named_parameters(recurse=False):
            if not param.requires_grad:
                continue
            name = f"{prefix}.{local_name}" if prefix else local_name
            if (
                param.ndim < 2
                or isinstance(submodule, NORM_LAYERS)
                or (isinstance(submodule, _EMBEDDINGS) and not decay_embeddings)
                or name in excluded_names
                or any(fnmatch.fnmatchcase(name, pattern) for pattern in patterns)
            ):
                no_decay_ids.add(id(param))

    # keep the module's parameter order inside each group (stable optimizer state order)
    ordered = [p for p in module.parameters() if p.requires_grad]
    if not ordered:
        raise RuntimeError(f"`module` ({type(module).__name__}) has no trainable parameter to optimize.")
    keys = _group_keys(module, ordered, layer_decay, block_classes, lr_scale, split)
    if lr is None and (layer_decay is not None or lr_scale):
        asked = f"layer_decay={layer_decay!r}" if layer_decay is not None else f"lr_scale={lr_scale!r}"
        raise ValueError(  # an optimizer ignores an unknown group key: the scales would silently not apply
            f"`{asked}` scales each group's LR, so `param_groups` needs the base LR: pass `lr=` (the "
            "optimizer's peak LR); each group then carries `lr` x its scale, which every optimizer uses. "
            "Got `lr=None`."
        )
    by_key: dict[tuple[str, float, bool], list[nn.Parameter]] = {}
    for param in ordered:
        label, scale = ("", 1.0) if keys is None else keys[id(param)]
        by_key.setdefault((label, scale, id(param) in no_decay_ids), []).append(param)
    labels = [""] if keys is None else list(dict.fromkeys(label for label, _ in keys.values()))
    groups = []
    for (label, scale, is_no_decay), params in sorted(
        by_key.items(), key=lambda kv: (labels.index(kv[0][0]), kv[0][2])
    ):
        kind = "no_decay" if is_no_decay else "decay"
        group: dict[str, Any] = {
            "params": params,
            "weight_decay": 0.0 if is_no_decay else float(weight_decay),
            "name": f"{label}/{kind}" if label else kind,
        }
        if keys is not None:  # scaled or split groups say their scale
            group["lr_scale"] = scale
        if lr is not None:
            group["lr"] = float(lr) * scale
        if is_no_decay:
            group["layer_adaptation"] = False
        groups.append(group)
    return groups


def _group_keys(
    module: nn.Module,
    ordered: list[nn.Parameter],
    layer_decay: float | None,
    block_classes: BlockSpec | None,
    lr_scale: Mapping[str, float] | None,
    split: Iterable[str],
) -> dict[int, tuple[str, float]] | None:
    """Parameter id -> (group label, LR scale), or ``None`` when no scaling or split is asked for."""
    if isinstance(split, str):
        raise ValueError(f"`split` must be an iterable of module paths, not a string: got {split!r}.")
    prefixes = list(dict.fromkeys(split))
    if layer_decay is None and not lr_scale and not prefixes:
        return None
    if layer_decay is not None:
        check_layer_decay(layer_decay)
    if lr_scale is not None:
        check_lr_scale(lr_scale)
    all_names = parameter_names(module)  # every parameter, frozen ones included, under each of its names
    wanted = {id(p) for p in ordered}
    depths, blocks = layer_depths(module, block_classes) if layer_decay is not None else ({}, [])
    scale_keys = list(lr_scale or {})
    used: set[str] = set()
    labels: dict[int, tuple[str, float]] = {}
    tied_notes: list[str] = []

    def label_of(name: str) -> tuple[str, float, bool]:
        parts: list[str] = []
        scale = 1.0
        if layer_decay is not None:
            parts.append(layer_name(depths[name], len(blocks)))
            scale *= layer_scale(depths[name], len(blocks), layer_decay)
        key = match_lr_scale(name, scale_keys)
        if key is not None:
            used.add(key)
            parts.append(key)
            scale *= float(lr_scale[key])  # type: ignore[index]
        prefix = next((p for p in prefixes if name.startswith(p + ".") or name == p), None)
        if prefix is not None:
            used.add("\0split:" + prefix)
            if prefix != key:
                parts.append(prefix)
        return "/".join(parts), scale, prefix is not None

    for pid, names in all_names.items():
        options = [label_of(name) for name in names]
        # one tensor, one group: its first name's, unless another of its names is split out
        chosen = next((i for i, o in enumerate(options) if o[2]), 0)
        if len({o[:2] for o in options}) > 1:
            others = ", ".join(
                f"as {n!r} it would be in {o[0] or 'the default group'} (LR x{o[1]:.3g})"
                for n, o in zip(names, options)
                if o[:2] != options[chosen][:2]
            )
            tied_notes.append(
                f"{' and '.join(repr(n) for n in names)} are one tied parameter: it is in "
                f"{options[chosen][0] or 'the default group'} (LR x{options[chosen][1]:.3g}) as "
                f"{names[chosen]!r}; {others}"
            )
        if pid in wanted:
            labels[pid] = options[chosen][:2]
    if tied_notes:
        warn_once(
            f"param_groups on {type(module).__name__}: a tied (shared) parameter takes one group and one LR: "
            + "; ".join(tied_notes)
            + ". Untie the weights to give them different LRs, or set them to agree."
        )
    for key in scale_keys:
        if key not in used:
            raise ValueError(
                f"`lr_scale` entry {key!r} selects no parameter of {type(module).__name__} (keys are "
                "module-path prefixes like 'backbone' or regexes matching a whole parameter name such as "
                f"'backbone.0.weight'); parameter names start with "
                f"{sorted({n.split('.')[0] for ns in all_names.values() for n in ns})}."
            )
    for prefix in prefixes:
        if "\0split:" + prefix not in used:
            names = [name for name, _ in module.named_modules() if name]
            raise ValueError(
                f"`split` prefix {prefix!r} names no module with parameters in {type(module).__name__}"
                f"{did_you_mean(prefix, names)}."
            )
    return labels


def layer_depths(
    module: nn.Module, block_classes: BlockSpec | None = None
) -> tuple[dict[str, int], list[str]]:
    """``(depths, blocks)``: each parameter's depth (0 before the first block, ``j + 1`` in block ``j``,
    ``L + 1`` after the last) under every name, and the block names (outermost ``block_classes``, default
    inferred) in order. A last block no parameter follows is the head. ``ValueError`` without blocks.

    Example:
        >>> from lightning_recipes.testing import TinyTransformerLM
        >>> depths, blocks = layer_depths(TinyTransformerLM(n_layers=2))
        >>> blocks, depths["token_embedding.weight"], depths["blocks.1.fc.weight"], depths["head.weight"]
        (['blocks.0', 'blocks.1'], 0, 2, 3)
        >>> mlp = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 2))
        >>> depths, blocks = layer_depths(mlp)  # the last Linear is the output layer: the head
        >>> blocks, [depths[f"{i}.weight"] for i in (0, 2, 4)]
        (['0', '2'], [1, 2, 3])
    """
    classes = resolve_block_classes(block_classes)
    try:
        classes = classes or infer_block_classes(module)
    except ValueError as err:
        raise ValueError(
            f"layer_decay needs the repeated blocks of {type(module).__name__} (embeddings -> blocks -> "
            "head) and found none: no composite submodule type with parameters occurs twice. Pass "
            "`block_classes` (e.g. OptimizerRecipe(block_classes='my_pkg.Block')), or use `lr_scale` "
            "to set learning rates by module name."
        ) from err
    order = {name: index for index, (name, _) in enumerate(module.named_modules())}
    blocks = [name for names in find_blocks(module, classes).values() for name in names]
    blocks.sort(key=lambda name: order[name])  # registration order, across stacks
    if not blocks:
        looked_for = ", ".join(f"{c.__module__}.{c.__qualname__}" for c in classes)
        raise ValueError(
            f"layer_decay found no block of {type(module).__name__}: no submodule is an instance of "
            f"{looked_for}. Pass the model's block class as `block_classes`."
        )
    # every name, tied ones included (a tied output layer sits where its module does: with the head)
    names = [name for name, _ in module.named_parameters(remove_duplicate=False)]

    def block_of(name: str) -> int | None:
        return next((j for j, b in enumerate(blocks) if name.startswith(b + ".")), None)

    if names and block_of(names[-1]) == len(blocks) - 1:
        # nothing follows the last block: it is the output layer, so the head (trains at the peak LR)
        blocks.pop()
    inside = [block_of(n) for n in names]
    last = max((i for i, j in enumerate(inside) if j is not None), default=-1)
    depths: dict[str, int] = {}
    current = 0  # before the first block: embeddings
    for index, (name, block) in enumerate(zip(names, inside)):
        if block is not None:
            current = block + 1
        elif index > last:
            current = len(blocks) + 1
        depths[name] = current
    if len(blocks) < 2:
        found = f"only {blocks}" if blocks else "none"
        kinds = ", ".join(c.__qualname__ for c in classes)
        warn_once(
            f"layer_decay on {type(module).__name__}: it has no repeated blocks besides the output layer "
            f"(blocks of {kinds}: {found}), so layer decay degenerates to {len(blocks) + 2} LR levels "
            "(embeddings, that block, head) instead of one per block. Pass `block_classes` naming the "
            "model's repeated block, or set per-module LRs with `lr_scale`."
        )
    return depths, blocks


def layer_scale(depth: int, num_blocks: int, layer_decay: float) -> float:
    """The LR scale at ``depth``: ``layer_decay ** (num_blocks + 1 - depth)``.

    Example:
        >>> [layer_scale(d, 2, 0.5) for d in range(4)]
        [0.125, 0.25, 0.5, 1.0]
    """
    return float(layer_decay) ** (num_blocks + 1 - depth)


def layer_name(depth: int, num_blocks: int) -> str:
    """The group-name part of a depth: ``embed``, ``block_0`` ... ``block_{L-1}``, ``head``.

    Example:
        >>> [layer_name(d, 2) for d in range(4)]
        ['embed', 'block_0', 'block_1', 'head']
    """
    if depth == 0:
        return "embed"
    return "head" if depth == num_blocks + 1 else f"block_{depth - 1}"


def check_lr_scale(lr_scale: Any) -> None:
    """``lr_scale``: a mapping of module-path prefixes or regexes to LR factors > 0.

    Example:
        >>> check_lr_scale({"backbone": 0.1})
        >>> check_lr_scale({"backbone": 0})
        Traceback (most recent call last):
        ...
        ValueError: `lr_scale['backbone']` must be a finite number > 0, got 0.
    """
    if not isinstance(lr_scale, Mapping) or not lr_scale:
        raise ValueError(
            "`lr_scale` must be a non-empty mapping of module-path prefixes or regexes to LR factors, "
            f"e.g. {{'backbone': 0.1}}, got {lr_scale!r}."
        )
    for key, value in lr_scale.items():
        if not isinstance(key, str) or not key:
            raise ValueError(f"`lr_scale` keys must be non-empty strings, got {key!r}.")
        try:
            re.compile(key)
        except re.error as err:
            raise ValueError(
                f"`lr_scale` key {key!r} is neither a module path nor a valid regex: {err}."
            ) from err
        check_positive(f"lr_scale[{key!r}]", value)


def check_layer_decay(layer_decay: Any) -> None:
    """``layer_decay`` in (0, 1]."""
    check_in_range("layer_decay", layer_decay, 0.0, 1.0, low_open=True)


def match_lr_scale(name: str, keys: list[str]) -> str | None:
    """The ``lr_scale`` key that selects ``name`` (equal, a module-path prefix, or a full regex match).

    Example:
        >>> match_lr_scale("backbone.0.weight", ["head", "backbone"])
        'backbone'
    """
    hits = [k for k in keys if name == k or name.startswith(k + ".") or re.fullmatch(k, name) is not None]
    if len(hits) > 1:
        raise ValueError(
            f"`lr_scale` entries {hits} all select parameter {name!r}: each parameter may match one entry."
        )
    return hits[0] if hits else None
