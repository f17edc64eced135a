"""Data of the development gallery, generated in code (or scikit-learn's digits), small and CPU-cheap.

Every case's data factory takes ``fixed`` (build the healthy twin's data: the bug fixed) and ``seed`` (the
order of the training batches and the draws of the augmentation) and returns the data keyword arguments of
``preflight``. ``held_out_*`` functions build the clean data both twins are scored on in the proofs.

Example:
    >>> data = shuffled_labels()
    >>> sorted(data)
    ['train_dataloaders', 'val_dataloaders']
    >>> x, y = next(iter(data["train_dataloaders"]))
    >>> tuple(x.shape), tuple(y.shape)
    ((64, 1, 8, 8), (64,))
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any

import torch
from torch import Tensor
from torch.utils.data import DataLoader, Dataset, TensorDataset

from galleries.preflight.stage._data_stage_data import digits, gen  # the shared builders

BATCH = 64


def loader(
    dataset: Dataset | tuple[Tensor, ...],
    batch_size: int = BATCH,
    shuffle: bool = True,
    seed: int = 0,
    **kwargs: Any,
) -> DataLoader:
    """A loader over ``dataset`` (tensors make a ``TensorDataset``), shuffled with a seeded generator."""
    if isinstance(dataset, tuple):
        dataset = TensorDataset(*dataset)
    return DataLoader(
        dataset, batch_size=batch_size, shuffle=shuffle, generator=gen(seed) if shuffle else None, **kwargs
    )


def pair(train: DataLoader, val: DataLoader, **extra: Any) -> dict[str, Any]:
    """The data keyword arguments of ``preflight``."""
    return {"train_dataloaders": train, "val_dataloaders": val, **extra}


# ---------------------------------------------------------------- digits


def held_out_digits(images: bool = False) -> DataLoader:
    """The 497 test digits, in order."""
    return loader(digits("test", images), shuffle=False)


# ---------------------------------------------------------------- shuffled_labels


class LabelLookupDigits(Dataset):
    """Digit images and labels kept apart (as two files); sample ``i`` is ``images[i]`` with
    ``labels[label_row[i]]``. The bug: the label rows were shuffled by an independent permutation (the images
    were re-ordered once, the labels once more), so no image keeps its own label."""

    def __init__(self, images: Tensor, labels: Tensor, label_row: Tensor) -> None:
        self.images, self.labels, self.label_row = images, labels, label_row

    def __len__(self) -> int:
        return len(self.images)

    def __getitem__(self, i: int) -> tuple[Tensor, Tensor]:
        return self.images[i], self.labels[self.label_row[i]]


def shuffled_labels(fixed: bool = False, seed: int = 0) -> dict[str, Any]:
    """1000 training digits (8x8 images) with their labels drawn through an independent permutation; clean
    validation digits. ``fixed``: every image with its own label."""
    x, y = digits("train", images=True)
    row = torch.arange(len(y)) if fixed else torch.randperm(len(y), generator=gen(7))
    train = loader(LabelLookupDigits(x, y, row), seed=seed)
    return pair(train, loader(digits("val", images=True), shuffle=False))


# ---------------------------------------------------------------- hflip_position_target

SIDE = 16


def blobs(n: int, seed: int) -> tuple[Tensor, Tensor]:
    """``n`` 1x16x16 images, each a bright Gaussian blob (sigma 1.2) at a random position plus faint noise;
    the target is the blob's centre ``(x, y)`` scaled to [-1, 1] (x: column, left to right)."""
    g = gen(seed)
    centre = 2.0 + (SIDE - 5.0) * torch.rand(n, 2, generator=g)  # columns/rows in [2, 13]
    grid = torch.arange(SIDE, dtype=torch.float32)
    dx = (grid[None, :] - centre[:, 0:1]) ** 2  # (n, W)
    dy = (grid[None, :] - centre[:, 1:2]) ** 2  # (n, H)
    image = torch.exp(-(dy[:, :, None] + dx[:, None, :]) / (2 * 1.2**2))
    image = image + 0.05 * torch.randn(n, SIDE, SIDE, generator=g)
    return image[:, None], (centre - (SIDE - 1) / 2) / ((SIDE - 1) / 2)


class FlipAugmentedBlobs(Dataset):
    """Blob images flipped left-right with probability 1/2 as they are read (an augmentation). The bug: the
    target's x is not mirrored with the image. ``mirror_target``: it is (the fix)."""

    def __init__(self, images: Tensor, targets: Tensor, mirror_target: bool) -> None:
        self.images, self.targets, self.mirror_target = images, targets, mirror_target

    def __len__(self) -> int:
        return len(self.images)

    def __getitem__(self, i: int) -> tuple[Tensor, Tensor]:
        image, target = self.images[i], self.targets[i]
        if torch.rand(()) < 0.5:
            image = image.flip(-1)
            if self.mirror_target:
                target = target * torch.tensor([-1.0, 1.0])
        return image, target


def hflip_position_target(fixed: bool = False, seed: int = 0) -> dict[str, Any]:
    """2000 blob images with random horizontal flips whose x target is not mirrored; 300 clean validation
    images. ``fixed``: the target mirrored with the image."""
    train = loader(FlipAugmentedBlobs(*blobs(2000, 1), mirror_target=fixed), seed=seed)
    return pair(train, loader(blobs(300, 2), shuffle=False))


def held_out_blobs() -> DataLoader:
    """500 clean blob images."""
    return loader(blobs(500, 3), shuffle=False)


# ---------------------------------------------------------------- distillation_t2_kl


@lru_cache(maxsize=1)
def teacher_weights() -> tuple[Tensor, Tensor]:
    """A multinomial logistic regression fitted on the training digits (scikit-learn, deterministic): the
    frozen teacher's weight (10, 64) and bias (10,)."""
    from sklearn.linear_model import LogisticRegression

    x, y = digits("train")
    fit = LogisticRegression(C=1.0, max_iter=2000).fit(x.numpy(), y.numpy())
    return torch.tensor(fit.coef_, dtype=torch.float32), torch.tensor(fit.intercept_, dtype=torch.float32)


def digits_flat(fixed: bool = False, seed: int = 0, **extra: Any) -> dict[str, Any]:
    """Training and validation digits as 64-pixel rows (no bug in the data; ``fixed`` is unused)."""
    return pair(loader(digits("train"), seed=seed), loader(digits("val"), shuffle=False), **extra)


def distillation(fixed: bool = False, seed: int = 0) -> dict[str, Any]:
    """Digits rows; ``num_classes=10`` passed as a user distilling a 10-class teacher would."""
    return digits_flat(fixed, seed, num_classes=10)


# ---------------------------------------------------------------- seq2seq

PAD, BOS = 0, 1
SEQ_VOCAB = 12  # tokens 2..11
SEQ_MAX = 10


def reverse_pairs(n: int, seed: int) -> dict[str, Tensor]:
    """Sources of 5-10 tokens (2..11, right-padded with 0 to 10) and targets: the source reversed, padded."""
    g = gen(seed)
    length = torch.randint(5, SEQ_MAX + 1, (n,), generator=g)
    tokens = torch.randint(2, SEQ_VOCAB, (n, SEQ_MAX), generator=g)
    keep = torch.arange(SEQ_MAX)[None, :] < length[:, None]
    src = torch.where(keep, tokens, torch.zeros_like(tokens))
    tgt = torch.zeros_like(src)
    for i in range(n):
        tgt[i, : length[i]] = src[i, : length[i]].flip(0)
    return {"src": src, "tgt": tgt}


class DictDataset(Dataset):
    """Rows of a dict of equally long tensors, as dicts."""

    def __init__(self, columns: dict[str, Tensor]) -> None:
        self.columns = columns

    def __len__(self) -> int:
        return len(next(iter(self.columns.values())))

    def __getitem__(self, i: int) -> dict[str, Tensor]:
        return {key: value[i] for key, value in self.columns.items()}


def seq2seq_reverse(fixed: bool = False, seed: int = 0) -> dict[str, Any]:
    """2000 training and 300 validation reverse-the-sequence pairs as ``{"src", "tgt"}`` dict batches."""
    return pair(
        loader(DictDataset(reverse_pairs(2000, 1)), seed=seed),
        loader(DictDataset(reverse_pairs(300, 2)), shuffle=False),
        input_key="src",
        target_key="tgt",
    )


# ---------------------------------------------------------------- quantile regression

QUANTILES = (0.1, 0.5, 0.9)


def heteroscedastic(n: int, seed: int) -> tuple[Tensor, Tensor]:
    """6 features in [-1, 1]; ``y = sin(2 x0) + x1^2 + (0.2 + 0.6 |x2|) * noise`` (noise spread varies)."""
    g = gen(seed)
    x = 2 * torch.rand(n, 6, generator=g) - 1
    y = torch.sin(2 * x[:, 0]) + x[:, 1] ** 2 + (0.2 + 0.6 * x[:, 2].abs()) * torch.randn(n, generator=g)
    return x, y


def quantile_regression(fixed: bool = False, seed: int = 0) -> dict[str, Any]:
    """2000 training and 400 validation rows of the heteroscedastic regression."""
    return pair(loader(heteroscedastic(2000, 1), seed=seed), loader(heteroscedastic(400, 2), shuffle=False))


def held_out_heteroscedastic() -> DataLoader:
    """1000 clean rows."""
    return loader(heteroscedastic(1000, 3), shuffle=False)


def held_out_seq2seq() -> DataLoader:
    """300 clean reverse-the-sequence pairs."""
    return loader(DictDataset(reverse_pairs(300, 3)), shuffle=False)


# ---------------------------------------------------------------- contrastive pairs (siamese)


def digit_pairs(split: str, n: int, seed: int) -> tuple[Tensor, Tensor, Tensor]:
    """``n`` pairs of digits (64-pixel rows) and whether they show the same digit (half of them do)."""
    x, y = digits(split)
    g = gen(seed)
    by_class = [torch.nonzero(y == c).flatten() for c in range(10)]
    first = torch.randint(0, len(y), (n,), generator=g)
    same = torch.rand(n, generator=g) < 0.5
    other_class = (y[first] + torch.randint(1, 10, (n,), generator=g)) % 10
    partner_class = torch.where(same, y[first], other_class)
    pick = torch.rand(n, generator=g)
    second = torch.stack(
        [by_class[c][int(p * len(by_class[c]))] for c, p in zip(partner_class.tolist(), pick.tolist())]
    )
    return x[first], x[second], same.long()


def collate_with_in_batch_negatives(items: list[tuple[Tensor, ...]]) -> tuple[Tensor, ...]:
    """Meant to add in-batch negatives; re-draws the partner of EVERY pair from the batch instead, so the
    pairs no longer match their ``same`` labels (the bug)."""
    first, second, same = torch.utils.data.default_collate(items)
    return first, second[torch.randperm(len(second))], same


def siamese_pairs(fixed: bool = False, seed: int = 0) -> dict[str, Any]:
    """2000 training pairs, collated with reshuffled partners; 400 clean validation pairs. ``fixed``: the
    default collate."""
    collate = None if fixed else collate_with_in_batch_negatives
    train = loader(digit_pairs("train", 2000, 1), seed=seed, collate_fn=collate)
    return pair(train, loader(digit_pairs("val", 400, 2), shuffle=False))


def held_out_pairs() -> DataLoader:
    """600 clean pairs of test digits."""
    return loader(digit_pairs("test", 600, 3), shuffle=False)


# ---------------------------------------------------------------- denoising autoencoder

NOISE = 0.4


class NoisyDigits(Dataset):
    """Digits served as ``(noisy, clean)``. The bug: the noise is added IN PLACE (``noisy += ...`` on the
    stored row): the stored digits drift further from clean at every read, and the target is the same noisy
    tensor as the input. ``in_place=False``: ``noisy = clean + noise`` (the fix)."""

    def __init__(self, images: Tensor, in_place: bool) -> None:
        self.images, self.in_place = images, in_place

    def __len__(self) -> int:
        return len(self.images)

    def __getitem__(self, i: int) -> tuple[Tensor, Tensor]:
        clean = self.images[i]
        if self.in_place:
            noisy = clean
            noisy += NOISE * torch.randn_like(clean)
        else:
            noisy = clean + NOISE * torch.randn_like(clean)
        return noisy, clean


def denoising(fixed: bool = False, seed: int = 0) -> dict[str, Any]:
    """Training digits with noise added in place as they are read; validation pairs noised once, cleanly.
    ``fixed``: the noise added out of place."""
    x, _ = digits("train")
    train = loader(NoisyDigits(x, in_place=not fixed), seed=seed)
    return pair(train, loader(noisy_pairs("val", 5), shuffle=False))


def noisy_pairs(split: str, seed: int) -> tuple[Tensor, Tensor]:
    """``(clean + noise, clean)`` for a split of digits, noise drawn once."""
    x, _ = digits(split)
    return x + NOISE * torch.randn(x.shape, generator=gen(seed)), x


def held_out_noisy_digits() -> DataLoader:
    """The test digits noised once, with their clean targets."""
    return loader(noisy_pairs("test", 6), shuffle=False)


# ---------------------------------------------------------------- multi-task


def digits_two_tasks(split: str) -> dict[str, Tensor]:
    """Digits as ``{"image", "digit", "parity"}`` (two tasks on one input)."""
    x, y = digits(split)
    return {"image": x, "digit": y, "parity": y % 2}


def multitask(fixed: bool = False, seed: int = 0) -> dict[str, Any]:
    """Digits with two targets (the bug is in the model's loss weights; ``fixed`` is unused)."""
    return pair(
        loader(DictDataset(digits_two_tasks("train")), seed=seed),
        loader(DictDataset(digits_two_tasks("val")), shuffle=False),
        input_key="image",
        target_key="digit",
    )


def held_out_two_tasks() -> DataLoader:
    """The test digits with both targets."""
    return loader(DictDataset(digits_two_tasks("test")), shuffle=False)


# ---------------------------------------------------------------- token tagging

TAG_VOCAB = 21  # tokens 1..20, 0 is padding
IGNORE = -100


def tagged_sentences(n: int, seed: int) -> list[tuple[Tensor, Tensor]]:
    """``n`` sequences of 4-16 tokens (1..20) with a tag per token: 0 for a token <= 10, else 1 after a
    token <= 10 and 2 after a token > 10 (the tag needs the previous token)."""
    g = gen(seed)
    out = []
    for length in torch.randint(4, 17, (n,), generator=g).tolist():
        tokens = torch.randint(1, TAG_VOCAB, (length,), generator=g)
        big = tokens > 10
        after_big = torch.cat([torch.tensor([False]), big[:-1]])
        tags = torch.where(big, torch.where(after_big, 2, 1), 0)
        out.append((tokens, tags))
    return out


def left_pad(sequences: list[Tensor], value: int) -> Tensor:
    """Pad on the LEFT (a helper from decoder-only generation code)."""
    width = max(len(s) for s in sequences)
    return torch.stack([torch.cat([torch.full((width - len(s),), value), s]) for s in sequences])


def right_pad(sequences: list[Tensor], value: int) -> Tensor:
    """Pad on the right."""
    return torch.nn.utils.rnn.pad_sequence(sequences, batch_first=True, padding_value=value)


def tagging_collate(tags_left: bool) -> Any:
    """Collate ``(tokens, tags)`` pairs into ``{"tokens", "tags"}``: tokens right-padded with 0, tags padded
    with -100 on the right, or (the bug) on the left with the generation helper."""

    def collate(items: list[tuple[Tensor, Tensor]]) -> dict[str, Tensor]:
        tokens = right_pad([t for t, _ in items], 0)
        tags = (left_pad if tags_left else right_pad)([t for _, t in items], IGNORE)
        return {"tokens": tokens, "tags": tags}

    return collate


class ListDataset(Dataset):
    """A list of samples."""

    def __init__(self, items: list[Any]) -> None:
        self.items = items

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, i: int) -> Any:
        return self.items[i]


def tagging(fixed: bool = False, seed: int = 0) -> dict[str, Any]:
    """2000 training sentences whose tags are padded on the left (tokens on the right); validation collated
    correctly. ``fixed``: tags padded on the right too."""
    train = loader(ListDataset(tagged_sentences(2000, 1)), seed=seed, collate_fn=tagging_collate(not fixed))
    val = loader(ListDataset(tagged_sentences(300, 2)), shuffle=False, collate_fn=tagging_collate(False))
    return pair(train, val, input_key="tokens", target_key="tags")


def held_out_tagging() -> DataLoader:
    """500 clean sentences, correctly collated."""
    return loader(ListDataset(tagged_sentences(500, 3)), shuffle=False, collate_fn=tagging_collate(False))


# ---------------------------------------------------------------- segmentation

FULL, CROP = 24, 16


def disc_scenes(n: int, seed: int) -> tuple[Tensor, Tensor]:
    """``n`` 1x24x24 images of 1-3 bright discs (radius 2-4) on noise (sd 0.3), and their 0/1 masks."""
    g = gen(seed)
    grid = torch.arange(FULL, dtype=torch.float32)
    masks = torch.zeros(n, 1, FULL, FULL)
    for i, count in enumerate(torch.randint(1, 4, (n,), generator=g).tolist()):
        for _ in range(count):
            cy, cx = (3 + (FULL - 6) * torch.rand(2, generator=g)).tolist()
            r = 2 + 2 * float(torch.rand((), generator=g))
            inside = (grid[:, None] - cy) ** 2 + (grid[None, :] - cx) ** 2 <= r**2
            masks[i, 0][inside] = 1.0
    return masks + 0.3 * torch.randn(masks.shape, generator=g), masks


class CroppedScenes(Dataset):
    """Random 16x16 crops of the scenes (augmentation). The bug (``paired=False``): the crop offset is drawn
    twice, once for the image and once for the mask. ``flip``: also a random left-right flip of both."""

    def __init__(self, images: Tensor, masks: Tensor, paired: bool, flip: bool = False) -> None:
        self.images, self.masks, self.paired, self.flip = images, masks, paired, flip

    def __len__(self) -> int:
        return len(self.images)

    @staticmethod
    def _offset() -> tuple[int, int]:
        top, left = torch.randint(0, FULL - CROP + 1, (2,)).tolist()
        return top, left

    def __getitem__(self, i: int) -> tuple[Tensor, Tensor]:
        top, left = self._offset()
        image = self.images[i, :, top : top + CROP, left : left + CROP]
        if not self.paired:
            top, left = self._offset()
        mask = self.masks[i, :, top : top + CROP, left : left + CROP]
        if self.flip and torch.rand(()) < 0.5:
            image, mask = image.flip(-1), mask.flip(-1)
        return image, mask


def centre_crops(n: int, seed: int) -> tuple[Tensor, Tensor]:
    """The centre 16x16 crops of ``n`` scenes."""
    images, masks = disc_scenes(n, seed)
    cut = slice((FULL - CROP) // 2, (FULL - CROP) // 2 + CROP)
    return images[..., cut, cut].clone(), masks[..., cut, cut].clone()


def segmentation(fixed: bool = False, seed: int = 0, flip: bool = False) -> dict[str, Any]:
    """1500 training scenes randomly cropped with the crop offset drawn separately for image and mask; 300
    validation centre crops. ``fixed``: one offset for both."""
    train = loader(CroppedScenes(*disc_scenes(1500, 1), paired=fixed, flip=flip), seed=seed)
    return pair(train, loader(centre_crops(300, 2), shuffle=False))


def segmentation_paired_flip(fixed: bool = False, seed: int = 0) -> dict[str, Any]:
    """Random crops and flips applied to image and mask together (healthy)."""
    return segmentation(fixed=True, seed=seed, flip=True)


def held_out_scenes() -> DataLoader:
    """500 clean centre crops."""
    return loader(centre_crops(500, 3), shuffle=False)


# ---------------------------------------------------------------- forecasting

WINDOW = 16


def oscillations(n_series: int, length: int, seed: int) -> Tensor:
    """``n_series`` series: two sinusoids (periods 8 and 13, random amplitudes and phases) plus noise."""
    g = gen(seed)
    t = torch.arange(length, dtype=torch.float32)
    amp = 0.5 + torch.rand(n_series, 2, generator=g)
    phase = 2 * math.pi * torch.rand(n_series, 2, generator=g)
    s = amp[:, :1] * torch.sin(2 * math.pi * t / 8 + phase[:, :1])
    s = s + amp[:, 1:] * torch.sin(2 * math.pi * t / 13 + phase[:, 1:])
    return s + 0.1 * torch.randn(n_series, length, generator=g)


def windows(series: Tensor, shift: int) -> tuple[Tensor, Tensor]:
    """Every window ``series[i + shift : i + shift + 16]`` with target ``series[i + 16]``: ``shift=0`` is a
    forecast, ``shift=1`` (the off-by-one bug) puts the target step at the end of its own input."""
    xs, ys = [], []
    for i in range(series.shape[1] - WINDOW - 1):
        xs.append(series[:, i + shift : i + shift + WINDOW])
        ys.append(series[:, i + WINDOW])
    return torch.cat(xs), torch.cat(ys)


def forecast(fixed: bool = False, seed: int = 0) -> dict[str, Any]:
    """Next-step forecasts from 16 past values (100 series of 40 steps: 2300 windows) whose training windows
    end at the target step (off by one); clean validation windows. ``fixed``: windows end before it."""
    x, y = windows(oscillations(100, 40, 1), shift=0 if fixed else 1)
    return pair(loader((x, y), seed=seed), loader(windows(oscillations(20, 40, 2), shift=0), shuffle=False))


def held_out_forecast() -> DataLoader:
    """Clean windows of 40 new series."""
    return loader(windows(oscillations(40, 40, 3), shift=0), shuffle=False)


def calendar_series(n_series: int, length: int, seed: int) -> dict[str, Tensor]:
    """Daily sales: a slow random walk plus a weekday effect; windows of 16 past days, the one-hot weekday of
    the day to forecast (known in advance) and its sales."""
    g = gen(seed)
    effect = torch.tensor([0.0, 0.2, 0.1, 0.3, 0.8, 1.5, -0.6])
    start = torch.randint(0, 7, (n_series, 1), generator=g)
    weekday = (start + torch.arange(length)) % 7
    level = 0.1 * torch.randn(n_series, length, generator=g).cumsum(1)
    sales = level + effect[weekday] + 0.1 * torch.randn(n_series, length, generator=g)
    past, day, target = [], [], []
    for i in range(length - WINDOW - 1):
        past.append(sales[:, i : i + WINDOW])
        day.append(torch.nn.functional.one_hot(weekday[:, i + WINDOW], 7).float())
        target.append(sales[:, i + WINDOW])
    return {"past": torch.cat(past), "weekday": torch.cat(day), "sales": torch.cat(target)}


def forecast_with_calendar(fixed: bool = False, seed: int = 0) -> dict[str, Any]:
    """Forecasts from past sales plus the target day's weekday, a known-future covariate (healthy)."""
    return pair(
        loader(DictDataset(calendar_series(100, 40, 1)), seed=seed),
        loader(DictDataset(calendar_series(20, 40, 2)), shuffle=False),
        input_key="past",
        target_key="sales",
    )


# ---------------------------------------------------------------- tabular sensors (raw units)

SENSORS = 12


def sensors(n: int, seed: int) -> tuple[Tensor, Tensor]:
    """12 sensor readings in raw units (offsets up to +-50, spreads 0.5-20); the class depends on the
    standardised readings (a linear rule and one interaction)."""
    g = gen(seed)
    fixed_g = gen(77)
    offset = 100 * torch.rand(SENSORS, generator=fixed_g) - 50
    spread = 0.5 + 19.5 * torch.rand(SENSORS, generator=fixed_g)
    weight = torch.randn(SENSORS, generator=fixed_g)
    z = torch.randn(n, SENSORS, generator=g)
    label = (z @ weight + 1.5 * z[:, 0] * z[:, 1] > 0).long()
    return z * spread + offset, label


def sensor_stats() -> tuple[Tensor, Tensor]:
    """Mean and standard deviation of the training sensors (what the pipeline normalises with)."""
    x, _ = sensors(2000, 1)
    return x.mean(0), x.std(0)


def sensor_loaders(fixed: bool = False, seed: int = 0) -> dict[str, Any]:
    """2000 training and 400 validation sensor rows (the bug is in the model; ``fixed`` is unused)."""
    return pair(loader(sensors(2000, 1), seed=seed), loader(sensors(400, 2), shuffle=False))


def held_out_sensors(batch_size: int = BATCH) -> DataLoader:
    """1000 new sensor rows, served in batches of ``batch_size``."""
    return loader(sensors(1000, 3), batch_size=batch_size, shuffle=False)


# ---------------------------------------------------------------- repeated measurements

PROFILE = 32


def patients(n_patients: int, scans: int, seed: int) -> tuple[Tensor, Tensor, Tensor]:
    """Each patient has a profile measured ``scans`` times (small noise); the diagnosis follows the profile
    only weakly (the best population model reaches ~0.65). Returns scans, diagnoses, patient ids."""
    g = gen(seed)
    profile = torch.randn(n_patients, PROFILE, generator=g)
    direction = torch.randn(PROFILE, generator=gen(99))
    score = profile @ direction / direction.norm() + 2.5 * torch.randn(n_patients, generator=g)
    diagnosis = (score > 0).long()
    x = profile.repeat_interleave(scans, 0) + 0.2 * torch.randn(n_patients * scans, PROFILE, generator=g)
    return x, diagnosis.repeat_interleave(scans), torch.arange(n_patients).repeat_interleave(scans)


def patient_split(fixed: bool = False, seed: int = 0) -> dict[str, Any]:
    """300 patients x 4 scans split 80/20 at random by SCAN: every validation patient also has scans in
    training. ``fixed``: split by patient."""
    x, y, patient = patients(300, 4, seed=1)
    if fixed:
        val = patient >= 240
    else:
        val = torch.zeros(len(y), dtype=torch.bool)
        val[torch.randperm(len(y), generator=gen(2))[: len(y) // 5]] = True
    return pair(loader((x[~val], y[~val]), seed=seed), loader((x[val], y[val]), shuffle=False))


def held_out_patients() -> DataLoader:
    """Scans of 150 new patients."""
    return loader(patients(150, 4, seed=3)[:2], shuffle=False)


# ---------------------------------------------------------------- nonlinear regression


def wavy(n: int, seed: int) -> tuple[Tensor, Tensor]:
    """8 features in [-1, 1]; ``y = sin(3 x0) cos(2 x1) + x2 x3 + 0.1 noise`` (no linear signal)."""
    g = gen(seed)
    x = 2 * torch.rand(n, 8, generator=g) - 1
    y = (
        torch.sin(3 * x[:, 0]) * torch.cos(2 * x[:, 1])
        + x[:, 2] * x[:, 3]
        + 0.1 * torch.randn(n, generator=g)
    )
    return x, y


def wavy_loaders(fixed: bool = False, seed: int = 0) -> dict[str, Any]:
    """3000 training and 500 validation rows (the bug is in the model; ``fixed`` is unused)."""
    return pair(loader(wavy(3000, 1), seed=seed), loader(wavy(500, 2), shuffle=False))


def held_out_wavy() -> DataLoader:
    """1000 new rows."""
    return loader(wavy(1000, 3), shuffle=False)


# ---------------------------------------------------------------- image + code matching


def digit_code_matches(split: str, seed: int) -> dict[str, Tensor]:
    """Digits with a claimed code (0-9) and whether the code is the digit shown (half of them are)."""
    x, y = digits(split)
    g = gen(seed)
    match = torch.rand(len(y), generator=g) < 0.5
    code = torch.where(match, y, (y + torch.randint(1, 10, y.shape, generator=g)) % 10)
    return {"image": x, "code": code, "match": match.long()}


def code_matching(fixed: bool = False, seed: int = 0) -> dict[str, Any]:
    """Image + code -> match (the bug is in the model; ``fixed`` is unused)."""
    return pair(
        loader(DictDataset(digit_code_matches("train", 1)), seed=seed),
        loader(DictDataset(digit_code_matches("val", 2)), shuffle=False),
        input_key="image",
        target_key="match",
    )


def held_out_code_matches() -> DataLoader:
    """The test digits with claimed codes."""
    return loader(DictDataset(digit_code_matches("test", 3)), shuffle=False)


# ---------------------------------------------------------------- tabular with categorical codes

STORES = [f"store-{k:02d}" for k in range(30)]


def store_sales(n: int, seed: int) -> tuple[list[str], Tensor, Tensor]:
    """Rows of (store name, 2 numeric features, sales): the store's effect (sd 1) + 0.5 x . w + noise."""
    g = gen(seed)
    effect = torch.randn(len(STORES), generator=gen(55))
    store = torch.randint(0, len(STORES), (n,), generator=g)
    features = torch.randn(n, 2, generator=g)
    sales = effect[store] + 0.5 * features @ torch.tensor([1.0, -0.5]) + 0.2 * torch.randn(n, generator=g)
    return [STORES[k] for k in store.tolist()], features, sales


def factorize(names: list[str], vocabulary: dict[str, int] | None = None) -> tuple[Tensor, dict[str, int]]:
    """Codes in order of first appearance (like ``pandas.factorize``), or through a given vocabulary."""
    if vocabulary is None:
        vocabulary = {}
        for name in names:
            vocabulary.setdefault(name, len(vocabulary))
    return torch.tensor([vocabulary[name] for name in names]), vocabulary


def store_table(codes: Tensor, features: Tensor, sales: Tensor) -> DictDataset:
    return DictDataset({"store": codes, "features": features, "sales": sales})


def sales_vocabulary(fixed: bool) -> dict[str, int]:
    """The vocabulary saved with the model: the first file's codes (bug) or one shared vocabulary (fix)."""
    names, _, _ = store_sales(1500, 1)
    return {name: k for k, name in enumerate(STORES)} if fixed else factorize(names)[1]


def store_codes(fixed: bool = False, seed: int = 0) -> dict[str, Any]:
    """Training sales from two files (1500 rows each), each encoded with its own ``factorize``: a code names
    a different store in each file. Validation and serving use the first file's vocabulary.
    ``fixed``: one vocabulary for every file."""
    vocabulary = sales_vocabulary(fixed)
    parts = []
    for file_seed in (1, 2):
        names, features, sales = store_sales(1500, file_seed)
        codes, _ = factorize(names, vocabulary if fixed else None)
        parts.append((codes, features, sales))
    train = store_table(*(torch.cat(column) for column in zip(*parts)))
    names, features, sales = store_sales(400, 3)
    val = store_table(factorize(names, vocabulary)[0], features, sales)
    return pair(
        loader(train, seed=seed), loader(val, shuffle=False), input_key="features", target_key="sales"
    )


def held_out_sales(fixed: bool) -> DataLoader:
    """1000 new rows encoded with the vocabulary saved with the model."""
    names, features, sales = store_sales(1000, 4)
    return loader(store_table(factorize(names, sales_vocabulary(fixed))[0], features, sales), shuffle=False)


# ---------------------------------------------------------------- masked LM

MLM_VOCAB = 22  # 0 pad (unused), 1 [MASK], tokens 2..21
MASK = 1
MLM_LEN = 16


def progressions(n: int, seed: int) -> Tensor:
    """Sequences of 16 tokens counting up from a random start by a step of 1-3, modulo 20 (tokens 2..21)."""
    g = gen(seed)
    start = torch.randint(0, 20, (n, 1), generator=g)
    step = torch.randint(1, 4, (n, 1), generator=g)
    return 2 + (start + step * torch.arange(MLM_LEN)) % 20


def bert_mask(
    items: list[Tensor], labels_after_masking: bool = False, generator: torch.Generator | None = None
) -> dict[str, Tensor]:
    """BERT masking: 15% of positions are predicted (labels elsewhere -100); of those 80% become [MASK],
    10% a random token and 10% stay as they are. ``labels_after_masking`` (the bug): the labels are read
    from the masked inputs, so most of them are [MASK] itself."""
    tokens = torch.stack(items)
    chosen = torch.rand(tokens.shape, generator=generator) < 0.15
    roll = torch.rand(tokens.shape, generator=generator)
    inputs = torch.where(chosen & (roll < 0.8), torch.full_like(tokens, MASK), tokens)
    random_tokens = torch.randint(2, MLM_VOCAB, tokens.shape, generator=generator)
    inputs = torch.where(chosen & (roll >= 0.8) & (roll < 0.9), random_tokens, inputs)
    source = inputs if labels_after_masking else tokens
    labels = torch.where(chosen, source, torch.full_like(tokens, IGNORE))
    return {"input_ids": inputs, "labels": labels}


def mlm_collate(items: list[Tensor]) -> dict[str, Tensor]:
    """:func:`bert_mask` as a collate (healthy)."""
    return bert_mask(items)


def mlm_collate_labels_after_masking(items: list[Tensor]) -> dict[str, Tensor]:
    """:func:`bert_mask` with the labels read after masking (the bug)."""
    return bert_mask(items, labels_after_masking=True)


def masked_lm(fixed: bool = True, seed: int = 0) -> dict[str, Any]:
    """3000 training and 400 validation progressions, masked as they are collated; ``fixed=False``: the
    training labels are read after masking (validation stays correct)."""
    collate = mlm_collate if fixed else mlm_collate_labels_after_masking
    return pair(
        loader(ListDataset(list(progressions(3000, 1))), seed=seed, collate_fn=collate),
        loader(ListDataset(list(progressions(400, 2))), shuffle=False, collate_fn=mlm_collate),
        input_key="input_ids",
        target_key="labels",
    )


def masked_lm_labels_after_masking(fixed: bool = False, seed: int = 0) -> dict[str, Any]:
    """The bug case's data (``masked_lm`` with ``fixed=False`` by default)."""
    return masked_lm(fixed=fixed, seed=seed)


def held_out_masked_lm() -> DataLoader:
    """600 new progressions, masked once with a seeded generator (the same positions for every model)."""
    items = list(progressions(600, 3))
    g = gen(9)
    batches = [bert_mask(items[i : i + BATCH], generator=g) for i in range(0, len(items), BATCH)]
    return DataLoader(ListDataset(batches), batch_size=None)


# ---------------------------------------------------------------- VAE and contrastive views


def digits_only(fixed: bool = False, seed: int = 0) -> dict[str, Any]:
    """Training and validation digits as one-element batches ``(x,)`` (no labels: the target is the input)."""
    return pair(loader((digits("train")[0],), seed=seed), loader((digits("val")[0],), shuffle=False))


class TwoViews(Dataset):
    """Two random views of each digit image: a shift of up to one pixel and pixel noise (SimCLR-style)."""

    def __init__(self, images: Tensor) -> None:
        self.images = images

    def __len__(self) -> int:
        return len(self.images)

    def _view(self, image: Tensor) -> Tensor:
        dy, dx = torch.randint(-1, 2, (2,)).tolist()
        shifted = torch.roll(image, shifts=(dy, dx), dims=(-2, -1))
        return shifted + 0.1 * torch.randn_like(shifted)

    def __getitem__(self, i: int) -> tuple[Tensor, Tensor]:
        return self._view(self.images[i]), self._view(self.images[i])


def two_views(fixed: bool = False, seed: int = 0) -> dict[str, Any]:
    """Pairs of views of the training and validation digit images."""
    return pair(
        loader(TwoViews(digits("train", images=True)[0]), seed=seed),
        loader(TwoViews(digits("val", images=True)[0]), shuffle=False),
    )
