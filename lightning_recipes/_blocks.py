"""Find the repeated blocks of a model (transformer layers, residual blocks): the unit FSDP wraps and
checkpoints, layer decay counts and ``speed_tune`` compiles."""

from __future__ import annotations

import importlib
from collections import Counter
from collections.abc import Iterable, Sequence

from lightning.pytorch.utilities import rank_zero_info, rank_zero_warn
from torch import nn

from lightning_recipes._warn_once import say_once

__all__ = [
    "BlockSpec",
    "block_classes_for",
    "describe_blocks",
    "find_blocks",
    "import_class",
    "infer_block_classes",
    "outermost_blocks",
    "resolve_block_classes",
]

#: A block class, its import path (``"pkg.module.Class"``, handy in LightningCLI YAML), or a sequence of them.
BlockSpec = type[nn.Module] | str | Sequence[type[nn.Module] | str]

_CONTAINERS = (nn.ModuleList, nn.ModuleDict, nn.Sequential, nn.ParameterList, nn.ParameterDict)


def resolve_block_classes(spec: BlockSpec | None) -> tuple[type[nn.Module], ...] | None:
    """``block_classes`` (classes or import paths) as a tuple of ``nn.Module`` subclasses (``None`` stays).

    Example:
        >>> resolve_block_classes("lightning_recipes.testing.TransformerBlock")
        (<class 'lightning_recipes.testing.models.TransformerBlock'>,)
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
    """The model's repeated block types, every stack's, in this order of trust: the classes a Hugging Face
    ``_no_split_modules`` names that sit in a layer list or repeat; else the composite entry types that repeat
    in a layer list; else the repeated type holding the most parameters. Only outermost instances count.
    ``ValueError`` when no type repeats: pass ``block_classes``.

    Example:
        >>> from lightning_recipes.testing import TinyTransformerLM
        >>> infer_block_classes(TinyTransformerLM(n_layers=3))
        (<class 'lightning_recipes.testing.models.TransformerBlock'>,)
        >>> infer_block_classes(nn.Transformer(16, 2, 2, 2, 32))  # doctest: +NORMALIZE_WHITESPACE
        (<class 'torch.nn.modules.transformer.TransformerEncoderLayer'>,
         <class 'torch.nn.modules.transformer.TransformerDecoderLayer'>)
    """
    declared, owner = _declared_classes(model)
    listed = [cls for cls in _uncovered_lists(model, declared).values() if cls not in declared]
    candidates = declared + listed
    source = " + ".join([f"{owner}._no_split_modules"] * bool(declared) + ["layer lists"] * bool(listed))
    if not candidates:
        candidates, source = [_largest_repeated_class(model)], "the repeated type holding most parameters"
    classes = tuple(dict.fromkeys(type(block) for block in outermost_blocks(model, tuple(candidates))))
    say_once(
        rank_zero_info, f"blocks of {type(model).__name__} ({source}): {describe_blocks(model, classes)}"
    )
    return classes


def find_blocks(model: nn.Module, block_classes: BlockSpec | None = None) -> dict[str, list[str]]:
    """The blocks of ``model`` by stack: the path of each layer list -> the names of its blocks (the outermost
    instances of :func:`block_classes_for`), in registration order.

    Example:
        >>> find_blocks(nn.Transformer(16, 2, 2, 2, 32))  # doctest: +NORMALIZE_WHITESPACE
        {'encoder.layers': ['encoder.layers.0', 'encoder.layers.1'],
         'decoder.layers': ['decoder.layers.0', 'decoder.layers.1']}
    """
    classes = block_classes_for(model, block_classes)
    stacks: dict[str, list[str]] = {}
    for name in _block_names(model, classes):
        stacks.setdefault(name.rpartition(".")[0], []).append(name)
    return stacks


def block_classes_for(
    model: nn.Module, block_classes: BlockSpec | None = None
) -> tuple[type[nn.Module], ...]:
    """``block_classes`` resolved, or inferred when ``None``; given classes that leave a layer list of
    ``model`` outside every block warn once.

    Example:
        >>> block_classes_for(nn.Transformer(16, 2, 2, 2, 32), "torch.nn.TransformerEncoderLayer")
        (<class 'torch.nn.modules.transformer.TransformerEncoderLayer'>,)
    """
    classes = resolve_block_classes(block_classes)
    if classes is None:
        return infer_block_classes(model)
    missed = _uncovered_lists(model, classes)
    if missed and any(isinstance(module, classes) for module in model.modules()):  # none: callers raise
        lists = ", ".join(f"{path or '<root>'} ({cls.__name__})" for path, cls in missed.items())
        say_once(
            rank_zero_warn,
            f"`block_classes` {[c.__name__ for c in classes]} leave layer lists of "
            f"{type(model).__name__} outside every block: {lists}. Those layers are not checkpointed, "
            "not wrapped by FSDP and get no depth of their own in layer decay; name their class in "
            "`block_classes` too (or pass `block_classes=None` to infer them all).",
        )
    return classes


def describe_blocks(model: nn.Module, block_classes: BlockSpec | None = None) -> str:
    """One line naming the stacks of blocks and their sizes (what :func:`find_blocks` returns).

    Example:
        >>> describe_blocks(nn.Transformer(16, 2, 2, 2, 32))
        '2 stacks: encoder.layers (2 x TransformerEncoderLayer), decoder.layers (2 x TransformerDecoderLayer)'
    """
    stacks = find_blocks(model, block_classes)
    modules = dict(model.named_modules())
    parts = []
    for path, names in stacks.items():
        kinds = "/".join(dict.fromkeys(type(modules[name]).__name__ for name in names))
        parts.append(f"{path or '<root>'} ({len(names)} x {kinds})")
    return f"{len(stacks)} stack{'s' * (len(stacks) != 1)}: {', '.join(parts)}"


def _declared_classes(model: nn.Module) -> tuple[list[type[nn.Module]], str]:
    """The ``_no_split_modules`` classes that sit in a layer list or repeat, and the outermost declarer."""
    listed: set[str] = set()
    owners = []
    for module in model.modules():
        names = getattr(module, "_no_split_modules", None)
        if names and isinstance(names, (list, tuple, set, frozenset)):
            listed.update(str(name) for name in names)
            owners.append(type(module).__name__)
    if not listed:
        return [], ""
    counts = Counter(type(module) for module in model.modules())
    in_lists = {type(c) for m in model.modules() if isinstance(m, _CONTAINERS) for c in m.children()}
    return [c for c in counts if c.__name__ in listed and (counts[c] >= 2 or c in in_lists)], owners[0]


def _uncovered_lists(model: nn.Module, classes: Sequence[type[nn.Module]]) -> dict[str, type[nn.Module]]:
    """Path -> entry class of each outermost layer list (2+ composite modules of one class in a container)
    that neither holds nor lies in a block of ``classes``."""
    blocks = _block_names(model, tuple(classes)) if classes else []
    found: dict[str, type[nn.Module]] = {}
    for path, module in model.named_modules():
        if not isinstance(module, _CONTAINERS) or any(_nested(path, p) for p in [*blocks, *found]):
            continue
        counts = Counter(type(c) for c in module.children() if _composite(c))
        repeated = [cls for cls, count in counts.items() if count >= 2]
        if repeated:
            found[path] = repeated[0]
    return found


def _nested(path: str, other: str) -> bool:
    """Whether one of the two module paths is the other or holds it (``""`` is the root)."""
    a, b = path + ".", other + "."
    return not path or not other or a.startswith(b) or b.startswith(a)


def _composite(module: nn.Module) -> bool:
    return (
        not isinstance(module, _CONTAINERS)
        and any(True for _ in module.children())
        and any(True for _ in module.parameters())
    )


def _block_names(model: nn.Module, classes: tuple[type[nn.Module], ...]) -> list[str]:
    """The names of the outermost instances of ``classes``, in registration order."""
    names: list[str] = []
    for name, sub in model.named_modules():
        if name and isinstance(sub, classes) and not any(name.startswith(b + ".") for b in names):
            names.append(name)
    return names


def _largest_repeated_class(model: nn.Module) -> type[nn.Module]:
    # class -> (composite, parameters, -depth of the outermost) over all instances: the order of preference
    rank: dict[type[nn.Module], tuple[bool, int, int]] = {}
    counts: Counter[type[nn.Module]] = Counter()
    for name, module in model.named_modules():
        if name and not isinstance(module, _CONTAINERS):
            composite, numel, depth = rank.get(type(module), (False, 0, -(1 << 30)))
            rank[type(module)] = (
                composite or any(True for _ in module.children()),
                numel + sum(p.numel() for p in module.parameters()),
                max(depth, -name.count(".")),
            )
            counts[type(module)] += 1
    repeated = [cls for cls, count in counts.items() if count >= 2 and rank[cls][1] > 0]
    if not repeated:
        raise ValueError(
            f"Cannot infer the block classes of {type(model).__name__}: no submodule type with parameters "
            "occurs twice. Pass `block_classes=...` (the transformer/residual block class) to the preset."
        )
    return max(repeated, key=rank.__getitem__)


def outermost_blocks(module: nn.Module, block_classes: tuple[type[nn.Module], ...]) -> list[nn.Module]:
    """The instances of ``block_classes`` in ``module`` not inside another one, each once (even when shared
    under two names), in registration order.

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
    """The object a full import path (``"pkg.module.Class"``) names (``ValueError`` when it cannot import).

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
