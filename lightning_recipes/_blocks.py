"""Find the repeated blocks of a model (transformer layers, residual blocks): the unit FSDP wraps and
checkpoints, layer decay counts and ``speed_tune`` compiles. Serves the whole package (``optim/``,
``strategies/``, ``tune/``); imports nothing of it."""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Sequence

from torch import nn

__all__ = ["BlockSpec", "import_class", "infer_block_classes", "outermost_blocks", "resolve_block_classes"]

#: A block class, its import path (``"pkg.module.Class"``, handy in LightningCLI YAML), or a sequence of them.
BlockSpec = type[nn.Module] | str | Sequence[type[nn.Module] | str]

_CONTAINERS = (nn.ModuleList, nn.ModuleDict, nn.Sequential, nn.ParameterList, nn.ParameterDict)


def resolve_block_classes(spec: BlockSpec | None) -> tuple[type[nn.Module], ...] | None:
    """Turn ``block_classes`` (classes or import paths) into a tuple of ``nn.Module`` subclasses (``None``
    stays ``None``).

    Raises:
        ValueError: When a path cannot be imported or names something that is not an ``nn.Module`` class.

    Example:
        >>> resolve_block_classes("lightning_recipes.testing.TransformerBlock")
        (<class 'lightning_recipes.testing.models.TransformerBlock'>,)
        >>> resolve_block_classes("torch.nn.TransformerEncoderLayer")
        (<class 'torch.nn.modules.transformer.TransformerEncoderLayer'>,)
    """
    if spec is None:
        return None
    items: Iterable[type[nn.Module] | str] = [spec] if isinstance(spec, (str, type)) else spec
    classes = []
    for item in items:
        cls = import_class(item) if isinstance(item, str) else item
        if not (isinstance(cls, type) and issubclass(cls, nn.Module)):
            raise ValueError(
                f"`block_classes` must hold nn.Module subclasses or their import paths, got {item!r}."
            )
        classes.append(cls)
    if not classes:
        raise ValueError("`block_classes` must name at least one class, got an empty sequence.")
    return tuple(classes)


def infer_block_classes(model: nn.Module) -> tuple[type[nn.Module], ...]:
    """The repeated submodule type that holds the most parameters: what FSDP should wrap and checkpoint.

    Rule: among module types that occur at least twice, are not containers (``ModuleList`` ...) and are not
    the root, prefer composite modules (with children) over leaves such as ``nn.Linear``; pick the type whose
    instances hold the most parameters in total; on a tie the outermost type wins (a block beats its own
    attention sub-module).

    Raises:
        ValueError: When no submodule type repeats; pass ``block_classes=...`` then.

    Example:
        >>> from lightning_recipes.testing import TinyTransformerLM
        >>> infer_block_classes(TinyTransformerLM(n_layers=3))
        (<class 'lightning_recipes.testing.models.TransformerBlock'>,)
    """
    counts: dict[type[nn.Module], int] = {}
    numel: dict[type[nn.Module], int] = {}
    depth: dict[type[nn.Module], int] = {}
    composite: dict[type[nn.Module], bool] = {}
    for name, module in model.named_modules():
        if not name or isinstance(module, _CONTAINERS):
            continue
        cls = type(module)
        counts[cls] = counts.get(cls, 0) + 1
        numel[cls] = numel.get(cls, 0) + sum(p.numel() for p in module.parameters())
        depth[cls] = min(depth.get(cls, 1 << 30), name.count("."))
        composite[cls] = composite.get(cls, False) or any(True for _ in module.children())
    repeated = [cls for cls, count in counts.items() if count >= 2 and numel[cls] > 0]
    if not repeated:
        raise ValueError(
            f"Cannot infer the block classes of {type(model).__name__}: no submodule type with parameters "
            "occurs twice. Pass `block_classes=...` (the transformer/residual block class) to the preset."
        )
    best = max(repeated, key=lambda cls: (composite[cls], numel[cls], -depth[cls]))
    return (best,)


def outermost_blocks(module: nn.Module, block_classes: tuple[type[nn.Module], ...]) -> list[nn.Module]:
    """The instances of ``block_classes`` in ``module`` that are not inside another such instance.

    Each instance is listed once, in registration order, even when it is registered under two names (a block
    shared between an encoder and a decoder): checkpointing or sharding it twice is an error in torch.

    Example:
        >>> from lightning_recipes.testing import TinyTransformerLM, TransformerBlock
        >>> len(outermost_blocks(TinyTransformerLM(n_layers=3), (TransformerBlock,)))
        3
    """
    found: dict[int, nn.Module] = {}

    def visit(node: nn.Module) -> None:
        for child in node.children():
            if isinstance(child, block_classes):
                found.setdefault(id(child), child)
            else:
                visit(child)

    visit(module)
    return list(found.values())


def import_class(path: str) -> object:
    """The object a full import path (``"pkg.module.Class"``) names.

    Raises:
        ValueError: For a path without a module part, or one that cannot be imported.

    Example:
        >>> import_class("torch.nn.Linear")
        <class 'torch.nn.modules.linear.Linear'>
    """
    module_name, _, attr = path.rpartition(".")
    if not module_name:
        raise ValueError(
            f"`block_classes` entries must be full import paths like 'pkg.module.Class', got {path!r}."
        )
    try:
        return getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as err:
        raise ValueError(f"`block_classes` entry {path!r} cannot be imported: {err}.") from err
