"""Data for sealed gallery A: scikit-learn's digits and small seeded synthetic sets, with the datasets a
user of each task would write (some of them with the gallery's planted data bugs behind a flag).

Every builder is seeded: the same call gives the same data. The ``heldout_*`` builders give the clean
held-out data the proofs score on (never seen in training or validation).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import torch
from sklearn.datasets import load_digits
from torch.utils.data import DataLoader, Dataset, TensorDataset

BATCH = 64


@lru_cache(maxsize=1)
def _digits() -> tuple[np.ndarray, np.ndarray]:
    x, y = load_digits(return_X_y=True)
    order = np.random.default_rng(0).permutation(len(y))
    return (x[order] / 16.0).astype(np.float32), y[order].astype(np.int64)


def digits(split: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Images (N, 64) in [0, 1] and labels of a fixed split: ``train`` 1200, ``val`` 200, ``test`` 397."""
    x, y = _digits()
    part = {"train": slice(0, 1200), "val": slice(1200, 1400), "test": slice(1400, None)}[split]
    return torch.from_numpy(x[part].copy()), torch.from_numpy(y[part].copy())


def augment(image: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
    """A strong view of a digit: 30% of its pixels dropped and Gaussian noise (sd 0.35) added."""
    keep = (torch.rand(64, generator=generator) > 0.3).float()
    return image * keep + 0.35 * torch.randn(64, generator=generator)


# ----------------------------------------------------------------------------------------------- contrastive
class DigitViews(Dataset):
    """Two augmented views of each digit, with the index and label as metadata.

    ``seeded_views=True`` is the planted bug: each view's generator is seeded with the sample's index "for
    reproducible augmentation", so both views are the same image.
    """

    def __init__(self, images: torch.Tensor, labels: torch.Tensor, seeded_views: bool = False) -> None:
        self.images, self.labels, self.seeded_views = images, labels, seeded_views

    def __len__(self) -> int:
        return len(self.images)

    def _view(self, index: int) -> torch.Tensor:
        generator = torch.Generator().manual_seed(index) if self.seeded_views else None
        return augment(self.images[index], generator)

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        return {
            "view1": self._view(index),
            "view2": self._view(index),
            "index": torch.tensor(index),
            "label": self.labels[index],
        }


def contrastive_data(seeded_views: bool = False) -> dict:
    loaders = {}
    for split, shuffle in (("train", True), ("val", False)):
        x, y = digits(split)
        loaders[split] = DataLoader(
            DigitViews(x, y, seeded_views), batch_size=BATCH, shuffle=shuffle, drop_last=shuffle
        )
    return {"train_dataloaders": loaders["train"], "val_dataloaders": loaders["val"]}


def heldout_view_pairs() -> tuple[torch.Tensor, torch.Tensor]:
    """Two independent fixed views of each test digit (the proofs' pair-retrieval set)."""
    x, _ = digits("test")
    generator = torch.Generator().manual_seed(1234)
    first = torch.stack([augment(image, generator) for image in x])
    second = torch.stack([augment(image, generator) for image in x])
    return first, second


# ----------------------------------------------------------------------------------------------- triplets
class DigitTriplets(Dataset):
    """(anchor, positive, negative) digits, a fresh positive and negative per read.

    ``negative_first=True`` is the planted bug: it serves (anchor, negative, positive), as the sampler of
    another codebase did, while the model unpacks (anchor, positive, negative).
    """

    def __init__(self, images: torch.Tensor, labels: torch.Tensor, negative_first: bool = False) -> None:
        self.images, self.labels, self.negative_first = images, labels, negative_first
        self.by_class = [torch.nonzero(labels == c).flatten() for c in range(10)]
        self.others = [torch.nonzero(labels != c).flatten() for c in range(10)]

    def __len__(self) -> int:
        return len(self.images)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        label = int(self.labels[index])
        same, other = self.by_class[label], self.others[label]
        positive = self.images[same[torch.randint(len(same), ())]]
        negative = self.images[other[torch.randint(len(other), ())]]
        if self.negative_first:
            return self.images[index], negative, positive
        return self.images[index], positive, negative


def triplet_data(negative_first: bool = False) -> dict:
    train = DigitTriplets(*digits("train"), negative_first=negative_first)
    val = DigitTriplets(*digits("val"), negative_first=negative_first)
    return {
        "train_dataloaders": DataLoader(train, batch_size=BATCH, shuffle=True, drop_last=True),
        "val_dataloaders": DataLoader(val, batch_size=BATCH),
    }


# ---------------------------------------------------------------------------------------------- siamese pairs
class DigitPairs(Dataset):
    """(first, second, same) pairs of digits, same class half of the time, drawn afresh per read."""

    def __init__(self, images: torch.Tensor, labels: torch.Tensor) -> None:
        self.images, self.labels = images, labels
        self.by_class = [torch.nonzero(labels == c).flatten() for c in range(10)]

    def __len__(self) -> int:
        return len(self.images)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        label = int(self.labels[index])
        same = bool(torch.rand(()) < 0.5)
        if same:
            pool = self.by_class[label]
            other = int(pool[torch.randint(len(pool), ())])
        else:
            other = int(torch.randint(len(self.images), ()))
            same = int(self.labels[other]) == label
        return self.images[index], self.images[other], torch.tensor(float(same))


def pair_data() -> dict:
    return {
        "train_dataloaders": DataLoader(DigitPairs(*digits("train")), batch_size=BATCH, shuffle=True),
        "val_dataloaders": DataLoader(DigitPairs(*digits("val")), batch_size=BATCH),
    }


def heldout_pairs() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A fixed set of 800 test pairs, half of them same-class."""
    x, y = digits("test")
    generator = torch.Generator().manual_seed(99)
    first = torch.randint(len(x), (800,), generator=generator)
    second = torch.randint(len(x), (800,), generator=generator)
    for k in range(400):  # the first half: a same-class partner
        pool = torch.nonzero(y == y[first[k]]).flatten()
        second[k] = pool[torch.randint(len(pool), (), generator=generator)]
    return x[first], x[second], (y[first] == y[second]).float()


# ----------------------------------------------------------------------------------------------- denoising
class NoisyDigits(Dataset):
    """(noisy, clean) digits with fresh Gaussian noise per read.

    ``in_place=True`` is the planted bug: the noise is added with ``+=`` to the stored image, so the target is
    the noisy input itself and the stored images get noisier with every epoch.
    """

    def __init__(self, images: torch.Tensor, sigma: float = 0.3, in_place: bool = False) -> None:
        self.images, self.sigma, self.in_place = images, sigma, in_place

    def __len__(self) -> int:
        return len(self.images)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        clean = self.images[index]
        if self.in_place:
            noisy = clean
            noisy += self.sigma * torch.randn(64)
        else:
            noisy = clean + self.sigma * torch.randn(64)
        return noisy, clean


def denoising_data(in_place: bool = False, noisy_validation: bool = True) -> dict:
    """``noisy_validation=False`` is a planted bug: the validation set is built without "augmentation", and
    the noise is the augmentation, so validation scores reconstructing clean digits from clean digits."""
    train = NoisyDigits(digits("train")[0], in_place=in_place)
    val = NoisyDigits(digits("val")[0], sigma=0.3 if noisy_validation else 0.0, in_place=in_place)
    return {
        "train_dataloaders": DataLoader(train, batch_size=BATCH, shuffle=True),
        "val_dataloaders": DataLoader(val, batch_size=BATCH),
    }


def heldout_noisy_digits(sigma: float = 0.3) -> tuple[torch.Tensor, torch.Tensor]:
    clean = digits("test")[0]
    return clean + sigma * torch.randn(clean.shape, generator=torch.Generator().manual_seed(7)), clean


# ----------------------------------------------------------------------------------------------- images only
def image_data() -> dict:
    """Digits as 1-tuples (autoencoders, VAEs): the image is its own target."""
    return {
        "train_dataloaders": DataLoader(TensorDataset(digits("train")[0]), batch_size=BATCH, shuffle=True),
        "val_dataloaders": DataLoader(TensorDataset(digits("val")[0]), batch_size=BATCH),
    }


def labelled_digit_data() -> dict:
    """Digits with labels for validation; training batches are images only (an unlabelled transfer set)."""
    return {
        "train_dataloaders": DataLoader(TensorDataset(digits("train")[0]), batch_size=BATCH, shuffle=True),
        "val_dataloaders": DataLoader(TensorDataset(*digits("val")), batch_size=BATCH),
    }


# ----------------------------------------------------------------------------------------------- multi-task
def ink(images: torch.Tensor) -> torch.Tensor:
    """The regression target of the multi-task models: the standardised share of the top half's pixels that
    are inked (> 0.5)."""
    share = (images.view(-1, 8, 8)[:, :4] > 0.5).float().mean(dim=(1, 2))
    return (share - 0.28) / 0.1


def multitask_data() -> dict:
    loaders = {}
    for split, shuffle in (("train", True), ("val", False)):
        x, y = digits(split)
        loaders[split] = DataLoader(TensorDataset(x, y, ink(x)), batch_size=BATCH, shuffle=shuffle)
    return {"train_dataloaders": loaders["train"], "val_dataloaders": loaders["val"]}


# ----------------------------------------------------------------------------------------------- seq2seq
VOCAB = 10  # 0 is padding, 1 is the start token, 2..9 are symbols
PAD, BOS, MAX_LEN = 0, 1, 7


def _sequences(count: int, seed: int, min_len: int = 3) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Sources of ``min_len``..7 symbols from a Markov chain (the next symbol is the previous one plus one,
    wrapping, half of the time), their lengths, and targets: each source reversed, padded with 0."""
    generator = torch.Generator().manual_seed(seed)
    lengths = torch.randint(min_len, MAX_LEN + 1, (count,), generator=generator)
    source = torch.zeros(count, MAX_LEN, dtype=torch.long)
    target = torch.zeros(count, MAX_LEN, dtype=torch.long)
    for row, length in enumerate(lengths.tolist()):
        symbols = [int(torch.randint(8, (), generator=generator))]
        for _ in range(length - 1):
            step = torch.rand((), generator=generator) < 0.5
            symbols.append((symbols[-1] + 1) % 8 if step else int(torch.randint(8, (), generator=generator)))
        source[row, :length] = torch.tensor(symbols) + 2
        target[row, :length] = torch.tensor(symbols[::-1]) + 2
    return source, lengths, target


def seq2seq_data() -> dict:
    train = TensorDataset(*_sequences(2000, seed=11))
    val = TensorDataset(*_sequences(300, seed=12))
    return {
        "train_dataloaders": DataLoader(train, batch_size=BATCH, shuffle=True),
        "val_dataloaders": DataLoader(val, batch_size=BATCH),
    }


def heldout_sequences() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return _sequences(500, seed=13)


# ----------------------------------------------------------------------------------------------- two-tower
N_ITEMS, HISTORY = 120, 5


@lru_cache(maxsize=1)
def _world() -> tuple[torch.Tensor, torch.Tensor]:
    """Item factors (N_ITEMS, 6) and a generator state: users pick items by softmax of taste . item."""
    generator = torch.Generator().manual_seed(21)
    return torch.randn(N_ITEMS, 6, generator=generator), torch.randn(N_ITEMS, 6, generator=generator)


def item_features() -> torch.Tensor:
    """Noisy item factors a user would have from a content model (the frozen item features)."""
    factors, noise = _world()
    return factors + 0.3 * noise


def _sessions(count: int, seed: int, history_has_target: bool = False) -> dict[str, torch.Tensor]:
    """Sessions of six distinct items a user picked by taste; history = the first five, target = the sixth.

    ``history_has_target=True`` is the planted bug: the history is "the user's items" from the whole log, the
    target included.
    """
    factors, _ = _world()
    generator = torch.Generator().manual_seed(seed)
    taste = torch.randn(count, 6, generator=generator)
    scores = 1.5 * taste @ factors.T
    picks = torch.multinomial(torch.softmax(scores, dim=1), HISTORY + 1, generator=generator)
    history = picks if history_has_target else picks[:, :HISTORY]
    if history_has_target:  # "the user's items", shuffled so the target is not always last
        history = torch.gather(
            history, 1, torch.argsort(torch.rand(history.shape, generator=generator), dim=1)
        )
    return {
        "history": history,
        "item": picks[:, HISTORY],
        "day": torch.randint(0, 365, (count,), generator=generator),
    }


class Sessions(Dataset):
    def __init__(self, columns: dict[str, torch.Tensor]) -> None:
        self.columns = columns

    def __len__(self) -> int:
        return len(self.columns["item"])

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        return {name: column[index] for name, column in self.columns.items()}


def two_tower_data(history_has_target: bool = False) -> dict:
    train = Sessions(_sessions(3000, seed=22, history_has_target=history_has_target))
    val = Sessions(_sessions(400, seed=23, history_has_target=history_has_target))
    return {
        "train_dataloaders": DataLoader(train, batch_size=BATCH, shuffle=True),
        "val_dataloaders": DataLoader(val, batch_size=BATCH),
        "input_key": "history",
        "target_key": "item",
        "num_classes": N_ITEMS,
    }


def heldout_sessions() -> dict[str, torch.Tensor]:
    return _sessions(1000, seed=24)
