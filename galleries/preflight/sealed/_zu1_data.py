"""Sealed gallery ZU1's data (half ``zu1``): small seeded synthetic sets (stereo pairs of 1-D scanlines with a
piecewise-constant disparity, mixtures of a harmonic voice and bursts of noise as magnitude spectrograms,
bracket words with their Dyck membership, small phantoms with their parallel-beam sinograms, irregularly
sampled light curves of four kinds of variable star). Every builder is deterministic (its own generator) and
cached (its tensors are shared: nothing writes to them); random augmentation at read time draws from the
global RNG."""

from __future__ import annotations

import math
from functools import cache

import torch
import torch.nn.functional as F
from torch.utils.data import Dataset, Sampler, WeightedRandomSampler

from galleries.sealed import gen as _gen
from galleries.sealed import loaders

__all__ = ["Rows", "loaders"]


class Rows(Dataset):
    """Rows of equally long tensors, read as a tuple (a lone tensor as itself), or as a dict under ``keys``,
    passed through ``transform`` (called with the row's parts) on every read when one is given."""

    def __init__(self, *tensors: torch.Tensor, transform=None, keys: tuple[str, ...] | None = None) -> None:
        self.tensors, self.transform, self.keys = tensors, transform, keys

    def __len__(self) -> int:
        return len(self.tensors[0])

    def __getitem__(self, i: int):
        row = tuple(t[i] for t in self.tensors)
        if self.transform is not None:
            row = self.transform(*row)
        if self.keys is not None:
            return dict(zip(self.keys, row, strict=True))
        return row if len(row) > 1 else row[0]


# --- stereo: 1-D scanline pairs, a piecewise-constant disparity per left pixel ------------------------------
WIDTH, MAX_DISPARITY, CROP = 64, 8, 32


@cache
def stereo_pairs(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``n`` rectified pairs: a textured right scanline, the left one seeing each pixel x at right pixel
    x - d(x) (d piecewise constant, 0..7, in 2..4 runs), fresh texture where that falls off the right line
    (occluded), both with sensor noise; the pair (n, 2, 64) (left, right), the disparity (n, 64) and where it
    is observable (n, 64)."""
    g = _gen(seed)
    texture = torch.randn(n, 1, WIDTH + 2, generator=g)
    right = F.conv1d(texture, torch.tensor([[[0.3, 0.6, 0.3]]]))[:, 0]
    x = torch.arange(WIDTH)
    disparity = torch.zeros(n, WIDTH)
    for i in range(n):
        cuts = sorted(torch.randint(4, WIDTH - 4, (int(torch.randint(1, 4, (), generator=g)),), generator=g))
        for start, stop in zip([0, *cuts], [*cuts, WIDTH], strict=True):
            disparity[i, int(start) : int(stop)] = torch.randint(MAX_DISPARITY, (), generator=g).float()
    source = x - disparity.long()
    valid = source >= 0
    left = torch.where(valid, right.gather(1, source.clamp(min=0)), torch.randn(n, WIDTH, generator=g))
    pair = torch.stack([left, right], 1) + 0.05 * torch.randn(n, 2, WIDTH, generator=g)
    return pair, disparity, valid


def crop(pair: torch.Tensor, disparity: torch.Tensor, valid: torch.Tensor):
    """A random 32-pixel window of the pair and of its disparity; a pixel whose match falls left of the
    window is no longer observable."""
    at = int(torch.randint(WIDTH - CROP + 1, ()))
    window = slice(at, at + CROP)
    d = disparity[window]
    return pair[:, window], d, valid[window] & (torch.arange(CROP) - d >= 0)


def crop_images_only(pair: torch.Tensor, disparity: torch.Tensor, valid: torch.Tensor):
    """A random 32-pixel window of the pair; the disparity and its mask cut at [:32] (the window's size, not
    its place)."""
    at = int(torch.randint(WIDTH - CROP + 1, ()))
    d = disparity[:CROP]
    return pair[:, at : at + CROP], d, valid[:CROP] & (torch.arange(CROP) - d >= 0)


def raw_intensities(pair: torch.Tensor) -> torch.Tensor:
    """The pair as the camera records it: 8-bit-like grey levels around 128."""
    return 128 + 32 * pair


# --- source separation: a harmonic voice and bursts of noise, as STFT magnitudes ----------------------------
SAMPLES, N_FFT, HOP = 512, 64, 32


def _magnitude(wave: torch.Tensor) -> torch.Tensor:
    window = torch.hann_window(N_FFT)
    return torch.stft(wave, N_FFT, HOP, window=window, return_complex=True).abs()


@cache
def mixtures(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``n`` mixtures of a voice (three harmonics of a random pitch under a slow swell) and a noise (white,
    in 2..4 bursts), each 512 samples; the magnitude spectrograms (n, 33, 17) of the mixture, the voice and
    the noise."""
    g = _gen(seed)
    t = torch.arange(SAMPLES).float()
    f0 = 0.02 + 0.05 * torch.rand(n, 1, generator=g)
    voice = torch.zeros(n, SAMPLES)
    for k in (1, 2, 3):
        phase = 2 * math.pi * torch.rand(n, 1, generator=g)
        voice += torch.sin(2 * math.pi * k * f0 * t + phase) / k
    swell = 0.6 + 0.4 * torch.sin(2 * math.pi * t / SAMPLES * torch.rand(n, 1, generator=g) * 2)
    voice = voice * swell * (0.5 + torch.rand(n, 1, generator=g))
    bursts = torch.zeros(n, SAMPLES)
    for i in range(n):
        for _ in range(int(torch.randint(2, 5, (), generator=g))):
            start = int(torch.randint(SAMPLES - 64, (), generator=g))
            bursts[i, start : start + int(torch.randint(32, 160, (), generator=g))] = 1.0
    noise = bursts * torch.randn(n, SAMPLES, generator=g) * (0.3 + 0.7 * torch.rand(n, 1, generator=g))
    return _magnitude(voice + noise), _magnitude(voice), _magnitude(noise)


def gain(mixture: torch.Tensor, voice: torch.Tensor, noise: torch.Tensor):
    """The recording at a random level (x0.4..x2.5), the mixture and both sources alike."""
    g = math.exp(1.8 * float(torch.rand(())) - 0.9)
    return g * mixture, g * voice, g * noise


def gain_mixture_only(mixture: torch.Tensor, voice: torch.Tensor, noise: torch.Tensor):
    """The mixture at a random level (x0.4..x2.5); the sources as they were."""
    g = math.exp(1.8 * float(torch.rand(())) - 0.9)
    return g * mixture, voice, noise


# --- Dyck words: brackets as tokens (0 padding, 1 "(", 2 ")"), right-padded to 16 ---------------------------
MAX_LENGTH = 16


def balanced(word: list[int]) -> bool:
    """A Dyck word: no prefix closes more brackets than it opens, and the whole closes them all."""
    depth = 0
    for token in word:
        depth += 1 if token == 1 else -1
        if depth < 0:
            return False
    return depth == 0


def counts_match(word: list[int]) -> bool:
    """As many closing brackets as opening ones (the order unchecked)."""
    return word.count(1) == word.count(2)


def _dyck(half: int, g: torch.Generator) -> list[int]:
    word, depth = [], 0
    for step in range(2 * half):
        left = 2 * half - step
        opens = depth == 0 or (depth < left and bool(torch.rand((), generator=g) < 0.5))
        word.append(1 if opens else 2)
        depth += 1 if opens else -1
    return word


@cache
def bracket_words(n: int, seed: int, label=balanced) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``n`` words of even length 2..16: half random Dyck words, 30% a random arrangement of as many opening
    as closing brackets (mostly unbalanced), 20% a Dyck word with one bracket turned; the tokens (n, 16),
    the lengths and the label ``label`` gives (1.0: balanced)."""
    g = _gen(seed)
    words = []
    for _ in range(n):
        half = int(torch.randint(1, MAX_LENGTH // 2 + 1, (), generator=g))
        kind = float(torch.rand((), generator=g))
        word = _dyck(half, g)
        if 0.5 <= kind < 0.8:
            word = [word[int(j)] for j in torch.randperm(len(word), generator=g)]
        elif kind >= 0.8:
            j = int(torch.randint(len(word), (), generator=g))
            word[j] = 3 - word[j]
        words.append(word)
    tokens = torch.zeros(n, MAX_LENGTH, dtype=torch.long)
    for i, word in enumerate(words):
        tokens[i, : len(word)] = torch.tensor(word)
    lengths = torch.tensor([len(w) for w in words])
    return tokens, lengths, torch.tensor([float(label(w)) for w in words])


class Curriculum(Sampler):
    """Short words first: each epoch draws ``size`` indices (with replacement) among the words no longer
    than ``start + grow * epoch`` (Lightning calls ``set_epoch``)."""

    def __init__(self, lengths: torch.Tensor, size: int, start: int = 6, grow: int = 4) -> None:
        self.lengths, self.size, self.start, self.grow, self.epoch = lengths, size, start, grow, 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def pool(self) -> torch.Tensor:
        return (self.lengths <= self.start + self.grow * self.epoch).nonzero()[:, 0]

    def __len__(self) -> int:
        return self.size

    def __iter__(self):
        pool = self.pool()
        return iter(pool[torch.randint(len(pool), (self.size,))].tolist())


def curriculum(lengths: torch.Tensor, labels: torch.Tensor) -> Curriculum:
    """A :class:`Curriculum` drawing as many words per epoch as there are."""
    return Curriculum(lengths, len(lengths))


def class_balanced(lengths: torch.Tensor, labels: torch.Tensor) -> WeightedRandomSampler:
    """Draws (with replacement) each word with the weight of its class, one over the class's count: balanced
    and unbalanced words equally often."""
    counts = torch.bincount(labels.long(), minlength=2).float()
    return WeightedRandomSampler((1 / counts)[labels.long()], len(labels))


def label_weighted(lengths: torch.Tensor, labels: torch.Tensor) -> WeightedRandomSampler:
    """A balancing sampler handed the rows' labels (0.0 or 1.0) as their weights, the lookup of each class's
    weight forgotten."""
    return WeightedRandomSampler(labels, len(labels))


# --- tomography: 16x16 phantoms, parallel-beam projections at 12 angles over 180 degrees --------------------
SIZE, ANGLES = 16, 12


@cache
def projector() -> torch.Tensor:
    """The (256, 12 * 16) matrix taking a flattened image to its flattened sinogram: the image turned by each
    angle (bilinear) and summed along its columns."""
    basis = torch.eye(SIZE * SIZE).view(-1, 1, SIZE, SIZE)
    rows = []
    for a in range(ANGLES):
        theta = math.pi * a / ANGLES
        c, s = math.cos(theta), math.sin(theta)
        turn = torch.tensor([[c, -s, 0.0], [s, c, 0.0]]).expand(len(basis), 2, 3)
        grid = F.affine_grid(turn, list(basis.shape), align_corners=False)
        rows.append(F.grid_sample(basis, grid, align_corners=False).sum(-2)[:, 0])
    return torch.stack(rows, 1).reshape(SIZE * SIZE, ANGLES * SIZE)


def project(image: torch.Tensor) -> torch.Tensor:
    """The clean sinogram(s) (..., 12, 16) of image(s) (..., 16, 16)."""
    return (image.reshape(*image.shape[:-2], -1) @ projector()).view(*image.shape[:-2], ANGLES, SIZE)


SINOGRAM_NOISE = 0.1


@cache
def phantoms(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` phantoms: 1..3 axis-aligned ellipses of density 0.3..1 inside the field of view, the whole
    scaled by a dose-like factor (x0.5..x2); the noisy sinograms (n, 12, 16) and the images (n, 16, 16)."""
    g = _gen(seed)
    axis = (torch.arange(SIZE).float() + 0.5) / SIZE * 2 - 1
    yy, xx = torch.meshgrid(axis, axis, indexing="ij")
    images = torch.zeros(n, SIZE, SIZE)
    for i in range(n):
        for _ in range(int(torch.randint(1, 4, (), generator=g))):
            cy, cx = (0.9 * torch.rand(2, generator=g) - 0.45).tolist()
            ry, rx = (0.15 + 0.35 * torch.rand(2, generator=g)).tolist()
            inside = ((yy - cy) / ry) ** 2 + ((xx - cx) / rx) ** 2 <= 1
            images[i] += inside * (0.3 + 0.7 * float(torch.rand((), generator=g)))
    images = images * torch.exp(1.4 * torch.rand(n, 1, 1, generator=g) - 0.7)
    return project(images) + SINOGRAM_NOISE * torch.randn(n, ANGLES, SIZE, generator=g), images


def turn_scan(sinogram: torch.Tensor, image: torch.Tensor):
    """The phantom turned by a random number of quarter turns and scanned again (fresh noise)."""
    turned = image.rot90(int(torch.randint(4, ())), (-2, -1))
    return project(turned) + SINOGRAM_NOISE * torch.randn(ANGLES, SIZE), turned


def turn_image_only(sinogram: torch.Tensor, image: torch.Tensor):
    """The phantom's image turned by a random number of quarter turns; its sinogram as it was."""
    return sinogram, image.rot90(int(torch.randint(4, ())), (-2, -1))


# --- variable stars: irregularly sampled light curves, (time, magnitude) rows padded with zeros -------------
OBSERVATIONS, KINDS = 48, 4  # pulsator, eclipsing binary, long-period variable, constant


@cache
def light_curves(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``n`` stars of a random kind, each seen on the first 16..48 of 48 random nights over a year (times
    in days, sorted): a pulsator (sawtooth, period 0.3..1 d, fast rise), an eclipsing binary (flat with two
    dips a period, 0.5..3 d), a long-period variable (the same sawtooth, 60..250 d: told from a pulsator
    only by how its magnitude follows time) or a constant star, at a mean magnitude 12..18, with noise of
    0.02..0.08 mag; the curves (n, 48, 2) of (time, magnitude) rows zero-padded, the mask
    of the real rows (n, 48) and the kind."""
    g = _gen(seed)
    kind = torch.randint(KINDS, (n,), generator=g)
    count = torch.randint(16, OBSERVATIONS + 1, (n,), generator=g)
    times = torch.rand(n, OBSERVATIONS, generator=g).mul(365).sort(-1).values
    period = torch.rand(n, 1, generator=g)
    amplitude = 0.3 + 0.9 * torch.rand(n, 1, generator=g)
    phase = torch.rand(n, 1, generator=g)
    p = torch.where(kind[:, None] == 0, 0.3 + 0.7 * period, 0.5 + 2.5 * period)
    p = torch.where(kind[:, None] == 2, 60 + 190 * period, p)
    u = torch.remainder(times / p + phase, 1.0)
    sawtooth = torch.where(u < 0.15, 1 - u / 0.15, (u - 0.15) / 0.85) - 0.5  # fainter is larger
    dips = torch.exp(-(((u - 0.25) / 0.04) ** 2)) + 0.6 * torch.exp(-(((u - 0.75) / 0.04) ** 2))
    shape = torch.stack([sawtooth, dips, sawtooth, torch.zeros_like(u)], 1)
    shape = shape.gather(1, kind[:, None, None].expand(n, 1, OBSERVATIONS))[:, 0]
    noise = (0.02 + 0.06 * torch.rand(n, 1, generator=g)) * torch.randn(n, OBSERVATIONS, generator=g)
    mags = 12 + 6 * torch.rand(n, 1, generator=g) + amplitude * shape + noise
    mask = torch.arange(OBSERVATIONS) < count[:, None]
    curves = torch.stack([times, mags], -1) * mask[..., None]
    return curves, mask, kind


def _pad(rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    curve = torch.zeros(OBSERVATIONS, 2)
    curve[: len(rows)] = rows
    return curve, torch.arange(OBSERVATIONS) < len(rows)


def subsample(curve: torch.Tensor, mask: torch.Tensor, kind: torch.Tensor):
    """A random half or more of the star's observations (the nights a shorter survey would have kept)."""
    rows = curve[mask]
    keep = torch.randperm(len(rows))[: int(torch.randint(len(rows) // 2, len(rows) + 1, ()))].sort().values
    return (*_pad(rows[keep]), kind)


def subsample_sorting_times(curve: torch.Tensor, mask: torch.Tensor, kind: torch.Tensor):
    """A random half or more of the observations, put back in time order by sorting the kept times (the
    magnitudes left in the order they were drawn)."""
    rows = curve[mask]
    keep = torch.randperm(len(rows))[: int(torch.randint(len(rows) // 2, len(rows) + 1, ()))]
    return (*_pad(torch.stack([rows[keep, 0].sort().values, rows[keep, 1]], -1)), kind)


def shift_times(curve: torch.Tensor, mask: torch.Tensor, kind: torch.Tensor):
    """The whole curve moved by a random offset in time (0..100 days): the same star, seen another year."""
    moved = curve.clone()
    moved[mask, 0] += 100 * float(torch.rand(()))
    return moved, mask, kind
