"""Checkpoints hold plain types only (``torch.load(path, weights_only=True)`` reads them anywhere): our
objects in ``hyper_parameters`` are stored as their ``to_dict()``, named under :data:`TYPES_KEY`."""

from __future__ import annotations

from typing import Any

import torch
import yaml

__all__ = ["TYPES_KEY", "plain_hyperparameters", "rebuild_hyperparameters", "register_plain_type"]

#: Where a checkpoint lists the hyperparameters saved as dicts, and the type each was (by name).
TYPES_KEY = "lightning_recipes/hparams_types"

_TYPES: dict[str, type] = {}


def register_plain_type(cls: type) -> None:
    """Let ``cls`` (with ``to_dict()``, rebuilt by ``cls(**d)``) live in hyperparameters as a dict: in
    checkpoints and in ``hparams.yaml`` (a mapping); older checkpoints that pickled it load under
    ``weights_only=True``."""
    _TYPES[cls.__name__] = cls
    for dumper in (yaml.Dumper, yaml.SafeDumper):
        yaml.add_representer(cls, _as_mapping, Dumper=dumper)
    torch.serialization.add_safe_globals([cls])


def _as_mapping(dumper: yaml.Dumper, obj: Any) -> yaml.Node:
    return dumper.represent_dict(obj.to_dict())


def plain_hyperparameters(checkpoint: dict[str, Any]) -> None:
    """Replace each registered object in ``checkpoint["hyper_parameters"]`` (Lightning's copy) by its
    ``to_dict()``, and record which."""
    hparams = checkpoint.get("hyper_parameters")
    if not isinstance(hparams, dict):
        return
    types = dict(checkpoint.get(TYPES_KEY) or {})
    for name, value in list(hparams.items()):
        cls = _TYPES.get(type(value).__name__)
        if cls is not None and type(value) is cls:
            hparams[name] = value.to_dict()  # type: ignore[attr-defined]  # registered types have it
            types[name] = cls.__name__
    if types:
        checkpoint[TYPES_KEY] = types


def rebuild_hyperparameters(module: Any, checkpoint: dict[str, Any]) -> None:
    """Turn the dicts :func:`plain_hyperparameters` wrote back into objects, in ``module.hparams`` and every
    attribute of ``module`` holding the same dict."""
    types = checkpoint.get(TYPES_KEY)
    hparams = getattr(module, "hparams", None)
    if not isinstance(types, dict) or hparams is None:
        return
    for name, type_name in types.items():
        cls = _TYPES.get(str(type_name))
        value = hparams.get(name)
        if cls is None or not isinstance(value, dict):
            continue
        rebuilt = cls(**value)
        hparams[name] = rebuilt
        for attribute, held in list(vars(module).items()):
            if held is value:
                setattr(module, attribute, rebuilt)
