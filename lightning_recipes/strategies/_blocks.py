"""Find the repeated blocks of a model (transformer layers, residual blocks): the unit FSDP wraps and
checkpoints."""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Sequence

from torch import nn

__all__ = ["BlockSpec", "LazyBlockPolicy", "infer_block_classes", "resolve_block_classes"]

# A block class, its import path (``"pkg.module.Class"``, handy in LightningCLI YAML), or a sequence of them.
BlockSpec = type[nn.Module] | str | Sequence[type[nn.Module] | str]

_CONTAINERS = (nn.ModuleList, nn.ModuleDict, nn.Sequential, nn.ParameterList, nn.ParameterDict)


def resolve_block_classes(spec: BlockSpec | None) -> tuple[type[nn.Module], ...] | None:
    """Turn ``block_classes`` (classes or import paths) into a tuple of ``nn.Module`` subclasses.

    Raises:
        ValueError: When a path cannot be imported or names something that is not an ``nn.Module`` class.

    Example:
        >>> resolve_block_classes("lightning_recipes.testing.TransformerBlock")
        (<class 'lightning_recipes.testing.models.TransformerBlock'>,)
    """
    if spec is None:
        return None
    items: Iterable[type[nn.Module] | str] = [spec] if isinstance(spec, (str, type)) else spec
    classes = []
    for item in items:
        cls = _import_class(item) if isinstance(item, str) else item
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


class LazyBlockPolicy:
    """An FSDP1 ``auto_wrap_policy`` (callable protocol) that infers the block classes from the root it is
    given.

    FSDP calls the policy on the root module first, so the inference happens inside the Strategy's own set-up,
    after ``configure_model`` has built the layers (#17157). The same instance then serves as the activation
    checkpointing policy, so both wrap exactly the same blocks. Pickles (``ddp_spawn``).

    Example:
        >>> from lightning_recipes.testing import TinyTransformerLM
        >>> policy, model = LazyBlockPolicy(), TinyTransformerLM()
        >>> top = policy(model, recurse=True, nonwrapped_numel=0)
        >>> top, policy(model.blocks[0], recurse=False, nonwrapped_numel=0)
        (True, True)
        >>> policy.block_classes
        (<class 'lightning_recipes.testing.models.TransformerBlock'>,)
    """

    def __init__(self, block_classes: tuple[type[nn.Module], ...] | None = None) -> None:
        self.block_classes = block_classes

    def __call__(self, module: nn.Module, recurse: bool, nonwrapped_numel: int) -> bool:
        if self.block_classes is None:
            self.block_classes = infer_block_classes(_unwrap(module))
        if recurse:
            return True
        return isinstance(module, self.block_classes)

    def __repr__(self) -> str:
        names = (
            "inferred at setup" if self.block_classes is None else [c.__name__ for c in self.block_classes]
        )
        return f"{type(self).__name__}({names})"


def _unwrap(module: nn.Module) -> nn.Module:
    # FSDP1 hands the policy the root it wraps; activation checkpointing may hand it an FSDP wrapper.
    inner = getattr(module, "_fsdp_wrapped_module", None)
    return inner if isinstance(inner, nn.Module) else module


def _import_class(path: str) -> object:
    module_name, _, attr = path.rpartition(".")
    if not module_name:
        raise ValueError(
            f"`block_classes` entries must be full import paths like 'pkg.module.Class', got {path!r}."
        )
    try:
        return getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as err:
        raise ValueError(f"`block_classes` entry {path!r} cannot be imported: {err}.") from err
