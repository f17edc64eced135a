"""Layer-wise LR decay (BEiT / ELECTRA): the depth of every parameter from the model's repeated blocks."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from torch import nn

from lightning_recipes._blocks import BlockSpec, find_blocks, infer_block_classes, resolve_block_classes
from lightning_recipes._validation import check_in_range, check_positive
from lightning_recipes._warn_once import warn_once

__all__ = [
    "check_layer_decay",
    "check_lr_scale",
    "layer_depths",
    "layer_name",
    "layer_scale",
    "match_lr_scale",
]


def layer_depths(
    module: nn.Module, block_classes: BlockSpec | None = None
) -> tuple[dict[str, int], list[str]]:
    """The depth of every parameter: 0 for what comes before the first block (embeddings), ``j + 1`` inside
    block ``j``, ``L + 1`` after the last of the ``L`` blocks (final norm, head).

    Blocks are the outermost instances of ``block_classes``, or of the classes the FSDP presets wrap
    (:func:`~lightning_recipes.strategies.infer_block_classes`), numbered in registration order across all
    stacks (an encoder-decoder's encoder below its decoder; parallel towers in registration order: use
    ``lr_scale`` to differ). A parameter between blocks ``j`` and ``j + 1`` belongs to block ``j``. A last
    block that no parameter follows is the output layer, so it is the head (BEiT / ELECTRA keep the head at
    the peak LR); fewer than two blocks left warns once. Tied parameters have a depth under each name.
    Cost: one walk over the modules.

    Args:
        module: The model.
        block_classes: The block class(es) or import path(s); ``None`` infers them.

    Returns:
        ``(depths, blocks)``: parameter name -> depth (every parameter under every name, frozen ones
        included), and the block module names in order (``len(blocks) == L``).

    Raises:
        ValueError: When no block is found (naming the classes looked for) or the classes cannot be inferred.

    Example:
        >>> from lightning_recipes.testing import TinyTransformerLM
        >>> depths, blocks = layer_depths(TinyTransformerLM(n_layers=2))
        >>> blocks
        ['blocks.0', 'blocks.1']
        >>> depths["token_embedding.weight"], depths["blocks.1.fc.weight"], depths["head.weight"]
        (0, 2, 3)
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
        # nothing follows the last block: it is the output layer (a plain MLP's last Linear, an FCN's last
        # conv), so it is the head and trains at the peak LR, not one factor below it
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
    """The LR scale at ``depth``: ``layer_decay ** (num_blocks + 1 - depth)`` (head 1, each block below one
    factor lower, embeddings lowest).

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
    """The ``lr_scale`` key that selects parameter ``name``: the key equals the name, is a module-path prefix
    of it (``"backbone"`` selects ``"backbone.0.weight"``) or is a regex matching the whole name.

    Raises:
        ValueError: When several keys select the same parameter (ambiguous factor).

    Example:
        >>> match_lr_scale("backbone.0.weight", ["head", "backbone"])
        'backbone'
        >>> match_lr_scale("blocks.3.fc.weight", [r"blocks\\.[0-3]\\..*"])
        'blocks\\\\.[0-3]\\\\..*'
    """
    hits = [k for k in keys if name == k or name.startswith(k + ".") or re.fullmatch(k, name) is not None]
    if len(hits) > 1:
        raise ValueError(
            f"`lr_scale` entries {hits} all select parameter {name!r}: each parameter may match one entry."
        )
    return hits[0] if hits else None
