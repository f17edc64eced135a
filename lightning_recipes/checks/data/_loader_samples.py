"""What a loader serves (indices, labels, a batch at all), read cheaply from its sampler and dataset."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor
from torch.utils.data import DataLoader, IterableDataset, Subset, TensorDataset

from lightning_recipes.harness.batches import Key, target_key_of
from lightning_recipes.harness.isolation import preserved_loader_rng


@dataclass(frozen=True)
class ServedIndices:
    """The indices one epoch serves, in order, the batches they fill, and whether the cap cut the epoch."""

    indices: list[int]
    batches: int
    complete: bool


def served_indices(loader: Any, max_indices: int) -> ServedIndices | None:
    """The indices one epoch of ``loader`` serves, from its sampler alone (RNGs kept), or ``None``."""
    if not isinstance(loader, DataLoader) or isinstance(loader.dataset, IterableDataset):
        return None
    source: Any = loader.batch_sampler if loader.batch_sampler is not None else loader.sampler
    indices: list[int] = []
    batches = 0
    try:
        with preserved_loader_rng(loader):
            for item in source:
                items = item if isinstance(item, (list, tuple, Tensor)) else [item]
                indices.extend(int(i) for i in items)
                batches += 1
                if len(indices) >= max_indices:
                    return ServedIndices(indices, batches, complete=False)
    except (TypeError, ValueError):  # indices that are not integers (keys of a custom dataset)
        return None
    return ServedIndices(indices, batches, complete=True)


def yields_a_batch(loader: Any) -> bool:
    """Whether iterating ``loader`` gives at least one batch (RNG left as it was). Reads one batch."""
    served = served_indices(loader, max_indices=1)
    if served is not None:
        return served.batches > 0
    with preserved_loader_rng(loader):
        for _ in loader:
            return True
    return False


def dataset_labels(dataset: Any, indices: Sequence[int], target_key: Key) -> Tensor | None:
    """The integer label at each of ``indices``, read cheaply; ``None`` unless each is one integer."""
    index = torch.as_tensor(list(indices), dtype=torch.long)
    if isinstance(dataset, Subset):
        parent = torch.as_tensor(list(dataset.indices), dtype=torch.long)
        return dataset_labels(dataset.dataset, parent[index].tolist() if len(index) else [], target_key)
    if isinstance(dataset, TensorDataset):
        position = target_key if isinstance(target_key, int) else (-1 if len(dataset.tensors) >= 2 else None)
        if position is None or isinstance(target_key, str):
            return None
        return _integer_labels(dataset.tensors[position][index])
    declared = getattr(dataset, "targets", None)
    if isinstance(declared, (list, tuple, Tensor)) and len(declared) == len(dataset):
        labels = torch.as_tensor(declared) if not isinstance(declared, Tensor) else declared
        return _integer_labels(labels[index])
    values = []
    for i in index.tolist():
        target = _target_of(dataset[i], target_key)
        if target is None:
            return None
        values.append(target)
    return _integer_labels(torch.stack(values)) if values else torch.zeros(0, dtype=torch.long)


def _target_of(sample: Any, target_key: Key) -> Tensor | None:
    key = target_key_of(sample, target_key)
    if isinstance(sample, Mapping):
        value = sample.get(key) if key is not None else None
    elif isinstance(sample, (list, tuple)) and len(sample) >= 2 and isinstance(key, int):
        value = sample[key]  # the given index, else the last
    else:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, Tensor)):
        return None
    tensor = torch.as_tensor(value)
    return tensor if tensor.numel() == 1 else None


def _integer_labels(labels: Tensor) -> Tensor | None:
    if labels.is_floating_point() or labels.is_complex() or labels.dtype == torch.bool:
        return None
    labels = labels.reshape(len(labels), -1) if labels.ndim else labels.reshape(1, 1)
    return labels[:, 0].to(torch.long) if labels.shape[1] == 1 else None  # else a sequence or mask per sample


def distinct_loader(
    loader: DataLoader[Any], indices: Sequence[int], batch_size: int | None = None
) -> DataLoader[Any]:
    """A loader over the distinct ``indices`` of ``loader``'s dataset, with its batch size and collate."""
    unique = list(dict.fromkeys(indices))
    size = loader.batch_size or batch_size or 1
    return DataLoader(Subset(loader.dataset, unique), batch_size=size, collate_fn=loader.collate_fn)


def check_pair(name: str, value: Any, allowed: str, *, descending: bool = False) -> None:
    """Raise unless ``value`` is ``(warn, fail)`` in (0, 1] with warn <= fail (reversed if ``descending``)."""
    pair = list(value) if isinstance(value, (tuple, list)) else []
    numbers = len(pair) == 2 and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in pair)
    inside = numbers and all(0 < v < 1 or (v == 1 and not descending) for v in pair)
    if not inside or (pair[1] > pair[0] if descending else pair[0] > pair[1]):
        raise ValueError(f"`{name}` must be a pair (warn, fail) of {allowed}, got {value!r}.")
