"""The field gallery's data: learnable synthetic tasks (a random teacher network, sequences, tiny images),
labels independent of the inputs, and datasets that stall, change sequence length or send zeros mid-run."""

from __future__ import annotations

import time

import torch
from torch import Tensor
from torch.utils.data import DataLoader, Dataset, TensorDataset


def _generator(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def teacher_data(n: int, d: int = 16, k: int = 4, label_noise: float = 0.0, seed: int = 0) -> TensorDataset:
    """``n`` Gaussian inputs labelled by a fixed random two-layer tanh teacher; a ``label_noise`` fraction of
    the labels replaced by random classes. The teacher depends on ``d, k`` only (train and validation share
    it)."""
    teacher = _generator(1234 + d * 31 + k)
    w1 = torch.randn(d, 32, generator=teacher) / d**0.5
    w2 = torch.randn(32, k, generator=teacher) / 32**0.5
    g = _generator(seed)
    x = torch.randn(n, d, generator=g)
    y = (torch.tanh(x @ w1) @ w2).argmax(1)
    flip = torch.rand(n, generator=g) < label_noise
    y[flip] = torch.randint(0, k, (int(flip.sum()),), generator=g)
    return TensorDataset(x, y)


def random_label_data(n: int, d: int = 16, k: int = 4, seed: int = 0) -> TensorDataset:
    """Gaussian inputs with uniformly random labels: nothing to learn beyond the class prior."""
    g = _generator(seed)
    return TensorDataset(torch.randn(n, d, generator=g), torch.randint(0, k, (n,), generator=g))


def sequence_data(n: int, steps: int = 12, d: int = 4, seed: int = 0) -> TensorDataset:
    """Sequences ``(n, steps, d)``; 4 classes: the sign of the running sum of feature 0 and of the last value
    of feature 1 (the model must carry a sum through time)."""
    g = _generator(seed)
    x = torch.randn(n, steps, d, generator=g)
    y = (x[:, :, 0].sum(1) > 0).long() * 2 + (x[:, -1, 1] > 0).long()
    return TensorDataset(x, y)


def random_label_sequences(n: int, steps: int = 10, d: int = 4, seed: int = 0) -> TensorDataset:
    """Sequences with uniformly random labels among 4 classes."""
    g = _generator(seed)
    return TensorDataset(torch.randn(n, steps, d, generator=g), torch.randint(0, 4, (n,), generator=g))


def blob_images(n: int, size: int = 8, noise: float = 0.5, seed: int = 0) -> TensorDataset:
    """``(n, 1, size, size)`` images: a bright 3x3 blob in one of 4 quadrants (the label), Gaussian noise."""
    g = _generator(seed)
    y = torch.randint(0, 4, (n,), generator=g)
    x = noise * torch.randn(n, 1, size, size, generator=g)
    half = size // 2
    for i in range(n):
        r = int(y[i] // 2) * half + int(torch.randint(0, half - 2, (1,), generator=g))
        c = int(y[i] % 2) * half + int(torch.randint(0, half - 2, (1,), generator=g))
        x[i, 0, r : r + 3, c : c + 3] += 1.5
    return TensorDataset(x, y)


def loader(data: Dataset, batch_size: int, shuffle: bool = True) -> DataLoader:
    """A single-process loader (``num_workers=0``); shuffled with a fixed generator."""
    return DataLoader(
        data, batch_size=batch_size, shuffle=shuffle, generator=_generator(7) if shuffle else None
    )


class SlowDecode(Dataset):
    """Wraps a dataset; each item costs ``seconds_per_item`` of real sleep (decoding in the loader)."""

    def __init__(self, data: Dataset, seconds_per_item: float) -> None:
        self.data = data
        self.seconds_per_item = seconds_per_item

    def __len__(self) -> int:
        return len(self.data)  # type: ignore[arg-type]

    def __getitem__(self, index: int) -> tuple[Tensor, Tensor]:
        time.sleep(self.seconds_per_item)
        return self.data[index]


class SensorDropout(Dataset):
    """Positive features (``exp`` of a teacher task's inputs, e.g. durations) in a fixed order; from item
    ``first_zero`` on, one feature of every item reads exactly 0 (a sensor that died)."""

    def __init__(self, n: int, first_zero: int, d: int = 8, k: int = 3) -> None:
        base = teacher_data(n, d=d, k=k, seed=3)
        self.x = torch.exp(base.tensors[0])
        self.x[first_zero:, 2] = 0.0
        self.y = base.tensors[1]

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, index: int) -> tuple[Tensor, Tensor]:
        return self.x[index], self.y[index]


class LengthCurriculum(Dataset):
    """Sequence items in a fixed order: ``short`` steps long before item ``switch``, ``long`` steps from it on
    (a curriculum that jumps to long sequences); labels as :func:`sequence_data`."""

    def __init__(self, n: int, switch: int, short: int, long: int, d: int = 4) -> None:
        self.short_part = sequence_data(switch, steps=short, d=d, seed=11)
        self.long_part = sequence_data(n - switch, steps=long, d=d, seed=12)
        self.switch = switch

    def __len__(self) -> int:
        return len(self.short_part) + len(self.long_part)

    def __getitem__(self, index: int) -> tuple[Tensor, Tensor]:
        if index < self.switch:
            return self.short_part[index]
        return self.long_part[index - self.switch]
