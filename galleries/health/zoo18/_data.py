"""Zoo 18's data, all made in code or bundled with scikit-learn (no downloads): a heteroscedastic
regression table, a stochastic-block-model graph, bags of 8x8 digits, a generated text and the digits
themselves."""

from __future__ import annotations

import functools

import torch
from torch import Tensor
from torch.utils.data import DataLoader, Dataset, TensorDataset


def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def loader(*tensors: Tensor, batch: int, shuffle: bool = True, seed: int = 0) -> DataLoader:
    """A ``DataLoader`` over ``tensors`` (a fixed shuffle order from ``seed`` when shuffled)."""
    return loader_of(TensorDataset(*tensors), batch, shuffle, seed)


def loader_of(dataset: Dataset, batch: int, shuffle: bool = True, seed: int = 0) -> DataLoader:
    return DataLoader(dataset, batch_size=batch, shuffle=shuffle, generator=gen(seed) if shuffle else None)


# ------------------------------------------------------------------------------------ heteroscedastic
def heteroscedastic(rows: int, seed: int) -> tuple[Tensor, Tensor]:
    """``x ~ U(-2, 2)^4`` and ``y = sin(1.5 x0) + 0.5 x1 - 0.3 x2 x3 + s(x) e`` with a noise scale
    ``s(x) = 0.05 + 0.6 sigmoid(2 x0 + x1)`` that varies 10x over the inputs (``e`` standard normal)."""
    g = gen(seed)
    x = 4 * torch.rand(rows, 4, generator=g) - 2
    scale = 0.05 + 0.6 * torch.sigmoid(2 * x[:, 0] + x[:, 1])
    y = torch.sin(1.5 * x[:, 0]) + 0.5 * x[:, 1] - 0.3 * x[:, 2] * x[:, 3]
    return x, (y + scale * torch.randn(rows, generator=g)).unsqueeze(1)


# ------------------------------------------------------------------------------------ graph
NODES, COMMUNITIES = 400, 8


@functools.cache
def sbm_edges() -> tuple[Tensor, Tensor]:
    """A stochastic block model: 400 nodes in 8 communities of 50, edge probability 0.2 inside a community
    and 0.004 across; its ~2,200 undirected edges ``(E, 2)`` split 85/15 into training and held-out edges
    (a fixed shuffle)."""
    g = gen(18)
    community = torch.arange(NODES) // (NODES // COMMUNITIES)
    i, j = torch.triu_indices(NODES, NODES, 1)
    p = torch.where(community[i] == community[j], 0.2, 0.004)
    keep = torch.rand(len(p), generator=g) < p
    edges = torch.stack([i[keep], j[keep]], 1)
    edges = edges[torch.randperm(len(edges), generator=g)]
    cut = int(0.85 * len(edges))
    return edges[:cut], edges[cut:]


def link_validation() -> tuple[Tensor, Tensor]:
    """The held-out edges (label 1) and as many fixed random node pairs (label 0)."""
    _, held_out = sbm_edges()
    negatives = torch.randint(0, NODES, held_out.shape, generator=gen(19))
    pairs = torch.cat([held_out, negatives])
    return pairs, torch.cat([torch.ones(len(held_out)), torch.zeros(len(negatives))])


# ------------------------------------------------------------------------------------ digits
@functools.cache
def _digits() -> tuple[Tensor, Tensor]:
    from sklearn.datasets import load_digits

    bunch = load_digits()
    x = torch.tensor(bunch.data, dtype=torch.float32)
    y = torch.tensor(bunch.target, dtype=torch.long)
    order = torch.randperm(len(y), generator=gen(8))
    return x[order], y[order]


def digits(split: str, scale: float = 16.0) -> tuple[Tensor, Tensor]:
    """Scikit-learn's 1,797 8x8 digits (pixels 0..16 divided by ``scale``): the first 1,400 of a fixed
    shuffle train, the other 397 validate."""
    x, y = _digits()
    x = x / scale
    return (x[:1400], y[:1400]) if split == "train" else (x[1400:], y[1400:])


POSITIVE_DIGIT, BAG = 7, 8


def bags(split: str, count: int, seed: int) -> tuple[Tensor, Tensor]:
    """``count`` bags of 8 digit images drawn from ``split`` (``(count, 8, 64)``) and their labels: 1 when
    a bag holds a 7 (about 57% of them)."""
    x, y = digits(split)
    index = torch.randint(0, len(y), (count, BAG), generator=gen(seed))
    return x[index], (y[index] == POSITIVE_DIGIT).any(1).float()


# ------------------------------------------------------------------------------------ text
_SUBJECTS = ("the cat", "a dog", "my aunt", "the old man", "two birds", "the robot", "a child", "her uncle")
_VERBS = ("sees", "likes", "chases", "finds", "paints", "eats", "follows", "draws")
_OBJECTS = ("the ball", "a red hat", "the moon", "some bread", "the river", "a small box", "its shadow")
_TAILS = ("today", "again", "at night", "slowly", "in the garden", "with care", "", "", "")


@functools.cache
def text(chars: int = 90_000, seed: int = 18) -> str:
    """A generated English-like text: sentences ``subject verb object [tail].`` drawn at random."""
    g = gen(seed)
    out: list[str] = []
    size = 0
    while size < chars:
        parts = [words[int(torch.randint(len(words), (), generator=g))]
                 for words in (_SUBJECTS, _VERBS, _OBJECTS, _TAILS)]  # fmt: skip
        sentence = " ".join(p for p in parts if p) + ". "
        out.append(sentence)
        size += len(sentence)
    return "".join(out)[:chars]


@functools.cache
def alphabet() -> str:
    return "".join(sorted(set(text())))


def encode(s: str) -> Tensor:
    index = {c: i for i, c in enumerate(alphabet())}
    return torch.tensor([index[c] for c in s], dtype=torch.long)


def windows(split: str, length: int = 48) -> tuple[Tensor, Tensor]:
    """Non-overlapping windows of the encoded text (the first 90% trains, the rest validates): inputs
    ``(N, length)`` and next-character targets."""
    t = text()
    cut = int(0.9 * len(t))
    codes = encode(t[:cut] if split == "train" else t[cut:])
    n = (len(codes) - 1) // length
    x = codes[: n * length].reshape(n, length)
    y = codes[1 : n * length + 1].reshape(n, length)
    return x, y


class ArchiveDigits(Dataset):
    """Digit images and labels kept as the compressed ``.npz`` archive they came in (bytes, as read from a
    store). ``per_item``: ``__getitem__`` decompresses the whole archive to take one image (the data-stall
    bug; meant: decompress once, in ``__init__``)."""

    def __init__(self, images: Tensor, labels: Tensor, per_item: bool = True) -> None:
        import io

        import numpy as np

        buffer = io.BytesIO()
        np.savez_compressed(buffer, images=images.numpy(), labels=labels.numpy())
        self.blob = buffer.getvalue()
        self.per_item = per_item
        self.decoded = None if per_item else self.decompress()

    def decompress(self) -> tuple[Tensor, Tensor]:
        import io

        import numpy as np

        with np.load(io.BytesIO(self.blob)) as archive:
            return torch.from_numpy(archive["images"]), torch.from_numpy(archive["labels"])

    def __len__(self) -> int:
        return len(self.decoded[0]) if self.decoded is not None else len(self.decompress()[0])

    def __getitem__(self, i: int) -> tuple[Tensor, Tensor]:
        images, labels = self.decompress() if self.decoded is None else self.decoded
        return images[i], labels[i]
