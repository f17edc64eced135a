"""Tied (shared) parameters: one tensor registered under several module paths (GPT-2's ``lm_head.weight``
is ``transformer.wte.weight``). Freezing, grouping or scaling one of the names acts on all of them."""

from __future__ import annotations

from torch import nn

__all__ = ["parameter_names", "tied_parameters"]


def parameter_names(module: nn.Module) -> dict[int, list[str]]:
    """Every name of every parameter, by ``id``, in registration order (several for tied ones).

    Example:
        >>> model = nn.Sequential(nn.Embedding(5, 3), nn.Linear(3, 5, bias=False))
        >>> model[1].weight = model[0].weight  # tie the output layer to the embedding
        >>> sorted(parameter_names(model).values())
        [['0.weight', '1.weight']]
    """
    names: dict[int, list[str]] = {}
    for name, param in module.named_parameters(remove_duplicate=False):
        names.setdefault(id(param), []).append(name)
    return names


def tied_parameters(module: nn.Module) -> list[list[str]]:
    """The names of each parameter shared by several module paths (an empty list when nothing is tied).

    Example:
        >>> model = nn.Sequential(nn.Embedding(5, 3), nn.Linear(3, 5, bias=False))
        >>> tied_parameters(model)
        []
        >>> model[1].weight = model[0].weight
        >>> tied_parameters(model)
        [['0.weight', '1.weight']]
    """
    return [names for names in parameter_names(module).values() if len(names) > 1]
