"""``preset(name, **overrides)``: Lightning strategies configured right by default, registered as
``recipes_<name>``."""

from __future__ import annotations

import functools
import importlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from lightning.pytorch.strategies import Strategy, StrategyRegistry
from torch import nn

from lightning_recipes._blocks import infer_block_classes
from lightning_recipes._names import PRESET_ROWS
from lightning_recipes._validation import check_choice
from lightning_recipes.strategies._layout import LAYOUTS, MemoryLayout

__all__ = ["PRESETS", "Preset", "preset", "register_presets"]


@dataclass(frozen=True)
class Preset:
    """One strategy preset of :data:`PRESETS`: its ``engine``, the ``defaults`` passed to
    :attr:`strategy_class`, a ``description`` and its memory ``layout``.

    Example:
        >>> PRESETS["fsdp_offload"].engine, PRESETS["fsdp_offload"].layout.offload_optimizer
        ('fsdp', True)
        >>> PRESETS["ddp_spawn"].strategy_class.__name__
        'RecipesDDPStrategy'
    """

    engine: str
    defaults: dict[str, Any]
    description: str
    layout: MemoryLayout

    def __post_init__(self) -> None:
        check_choice("engine", self.engine, _ENGINES)

    def __iter__(self) -> Iterator[Any]:
        """``engine, defaults, description``: code written when presets were 3-tuples keeps unpacking them."""
        return iter((self.engine, self.defaults, self.description))

    def __getitem__(self, index: int) -> Any:
        """``record[i]`` as in the old 3-tuples."""
        return tuple(self)[index]

    @property
    def strategy_class(self) -> type[Strategy]:
        """The Lightning strategy class this preset builds (imported on first use)."""
        module, name = _CLASSES[self.engine]
        return getattr(importlib.import_module(f"lightning_recipes.strategies.{module}"), name)  # type: ignore[no-any-return]


_CLASSES = {
    "ddp": ("ddp", "RecipesDDPStrategy"),
    "fsdp": ("fsdp", "RecipesFSDPStrategy"),
    "fsdp2": ("fsdp2", "RecipesFSDP2Strategy"),
    "deepspeed": ("deepspeed_strategy", "RecipesDeepSpeedStrategy"),
}
_ENGINES = tuple(_CLASSES)


#: The one table of presets, name -> :class:`Preset`.
PRESETS: dict[str, Preset] = {
    name: Preset(
        engine, {"gradient_as_bucket_view": True, **args} if engine == "ddp" else args, text, LAYOUTS[name]
    )
    for name, (engine, args, text) in PRESET_ROWS.items()
}


def preset(name: str, *, model: nn.Module | None = None, **overrides: Any) -> Strategy:
    """Build a Lightning strategy from the preset ``name`` (a key of :data:`PRESETS`); ``overrides`` win.
    ``model`` (FSDP presets only) infers ``block_classes`` now. What cannot run is refused at set-up.

    Example:
        >>> preset("ddp", start_method="fork")  # doctest: +ELLIPSIS
        <lightning_recipes.strategies.ddp.RecipesDDPStrategy object at ...>
        >>> PRESETS["ddp"].defaults  # what it passes, before your overrides
        {'gradient_as_bucket_view': True}
    """
    key = name.removeprefix("recipes_")
    if key not in PRESETS:
        raise ValueError(f"`name` must be one of {sorted(PRESETS)}, got {name!r}.")
    record = PRESETS[key]
    kwargs = {**record.defaults, **overrides}
    if model is not None:
        if record.engine not in ("fsdp", "fsdp2"):
            raise ValueError(
                f"`model` is only used by the FSDP presets (to infer block classes), got name={name!r}."
            )
        kwargs.setdefault("block_classes", infer_block_classes(model))
    if record.engine != "ddp":
        kwargs.setdefault("preset_name", f"recipes_{key}")
    return record.strategy_class(**kwargs)


def register_presets(registry: Any = StrategyRegistry) -> list[str]:
    """Register every preset as ``recipes_<name>`` in Lightning's ``StrategyRegistry`` (idempotent).

    Example:
        >>> "recipes_fsdp2" in register_presets()
        True
    """
    names = []
    for key, record in PRESETS.items():
        name = f"recipes_{key}"
        registry.register(name, functools.partial(preset, key), description=record.description, override=True)
        names.append(name)
    return names
