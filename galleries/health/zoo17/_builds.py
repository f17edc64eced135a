"""Builders of zoo 17's runs: each returns ``(model, train_loader, val_loader or None)``.

Problem runs take the knob that holds the bug, so a proof builds the healthy twin (the bug fixed) with the
same code. Data, all made here: keyword clips (five spoken-keyword-like patterns of three windowed tones at a
random time in noise, 160 samples), scikit-learn's bundled 8x8 digits restored from noisy or 2x downsampled
copies, and token sequences whose every position is labelled with how often its token occurs (counting).
"""

from __future__ import annotations

import functools
import math

import torch
from torch import Tensor, nn
from torch.optim import SGD, AdamW, RAdam
from torch.optim.lr_scheduler import CosineAnnealingWarmRestarts, ExponentialLR, MultiStepLR
from torch.utils.data import DataLoader, Dataset, TensorDataset

from galleries.health.zoo17._models import (
    CountingTransformer,
    EmaTask,
    EmaTaskFixed,
    KeywordNet,
    ManualTask,
    RestoreNet,
    Task,
)


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def loader(x: Tensor, y: Tensor, batch: int, shuffle: bool = True) -> DataLoader:
    return DataLoader(TensorDataset(x, y), batch_size=batch, shuffle=shuffle)


# ------------------------------------------------------------------------------------------------ data
FREQS = (0.05, 0.11, 0.19, 0.29)  # the tones' frequencies, in cycles per sample
KEYWORDS = ((0, 1, 2), (2, 1, 0), (0, 2, 0), (3, 1, 3), (1, 3, 2))  # each keyword: three tones in order
CLIP, TONE = 160, 32


@functools.cache
def _clips(rows: int, seed: int) -> tuple[Tensor, Tensor]:
    g = _gen(seed)
    y = torch.randint(0, len(KEYWORDS), (rows,), generator=g)
    x = 0.3 * torch.randn(rows, CLIP, generator=g)
    t = torch.arange(TONE, dtype=torch.float32)
    window = torch.hann_window(TONE, periodic=False)
    start = torch.randint(0, CLIP - 3 * TONE, (rows,), generator=g)
    amp = 0.4 + 0.6 * torch.rand(rows, generator=g)
    phase = 2 * math.pi * torch.rand(rows, 3, generator=g)
    for i in range(rows):
        for j, tone in enumerate(KEYWORDS[int(y[i])]):
            s = int(start[i]) + TONE * j
            x[i, s : s + TONE] += amp[i] * window * torch.sin(2 * math.pi * FREQS[tone] * t + phase[i, j])
    return x, y


def keyword_clips(rows: int, seed: int) -> tuple[Tensor, Tensor]:
    """``rows`` clips ``(rows, 160)`` within about [-2, 2] (noise std 0.3) and their keyword (five classes):
    three Hann-windowed tones of 32 samples each, in the keyword's order, at a random start and loudness
    (amplitude 0.4 to 1)."""
    x, y = _clips(rows, seed)
    return x.clone(), y.clone()


@functools.cache
def _digits() -> Tensor:
    from sklearn.datasets import load_digits

    images = torch.tensor(load_digits().images, dtype=torch.float32).unsqueeze(1)  # (1797, 1, 8, 8), 0..16
    return images[torch.randperm(len(images), generator=_gen(17))]


def digits(split: str, scale: float = 1 / 16) -> Tensor:
    """The 8x8 digits ``(N, 1, 8, 8)`` times ``scale`` (default: in [0, 1]); ``train``: the first 1400 of a
    fixed shuffle, ``val``: the other 397."""
    x = _digits() * scale
    return x[:1400].clone() if split == "train" else x[1400:].clone()


def noisy(x: Tensor, std: float, seed: int) -> Tensor:
    return x + std * torch.randn(x.shape, generator=_gen(seed))


def downsampled(x: Tensor) -> Tensor:
    """The 2x super-resolution input: each 2x2 block averaged, then repeated back to 8x8."""
    return nn.functional.interpolate(nn.functional.avg_pool2d(x, 2), scale_factor=2, mode="nearest")


VOCAB, LENGTH = 6, 16
COUNTS = LENGTH + 1


def counting(rows: int, seed: int) -> tuple[Tensor, Tensor]:
    """``rows`` sequences of 16 tokens from a vocabulary of 6 and, per position, how many times that
    position's token occurs in its sequence (1..16, 17 classes)."""
    tokens = torch.randint(0, VOCAB, (rows, LENGTH), generator=_gen(seed))
    counts = (tokens.unsqueeze(2) == tokens.unsqueeze(1)).sum(2)
    return tokens, counts


# ------------------------------------------------------------------------------------------------ tasks
def _task(net, loss, make_optimizer, schedule=None, manual: dict | None = None) -> Task:
    if manual is not None:
        return ManualTask(net, loss, make_optimizer, schedule, **manual)
    return Task(net, loss, make_optimizer, schedule)


def _kws_task(make_optimizer, net: nn.Module | None = None, schedule=None, train=None, batch: int = 64,
              manual: dict | None = None, val_rows: int = 500, shuffle: bool = True):  # fmt: skip
    x, y = train if train is not None else keyword_clips(2000, 0)
    vx, vy = keyword_clips(500, 1)
    model = _task(net if net is not None else KeywordNet(), "ce", make_optimizer, schedule, manual)
    return (
        model,
        loader(x, y, batch, shuffle=shuffle),
        loader(vx[:val_rows], vy[:val_rows], val_rows, shuffle=False),
    )


def _restore_task(make_optimizer, net: nn.Module | None = None, schedule=None, mode: str = "denoise",
                  scale: float = 1 / 16, train: Tensor | None = None, val_rows: int = 397, batch: int = 32,
                  manual: dict | None = None):  # fmt: skip
    clean, vclean = (digits("train", scale) if train is None else train), digits("val", scale)
    if mode == "denoise":
        x, vx = noisy(clean, 0.3 * 16 * scale, 1), noisy(vclean, 0.3 * 16 * scale, 2)
    else:
        x, vx = downsampled(clean), downsampled(vclean)
    model = _task(net if net is not None else RestoreNet(), "mse", make_optimizer, schedule, manual)
    return model, loader(x, clean, batch), loader(vx[:val_rows], vclean[:val_rows], val_rows, shuffle=False)


def _counting_task(make_optimizer, net: nn.Module | None = None, schedule=None, rows: int = 4000,
                   manual: dict | None = None, model_cls: type[Task] | None = None):  # fmt: skip
    x, y = counting(rows, 0)
    vx, vy = counting(500, 1)
    net = net if net is not None else CountingTransformer(VOCAB, COUNTS)
    if model_cls is not None:
        model = model_cls(net, "tokens", make_optimizer, schedule)
    else:
        model = _task(net, "tokens", make_optimizer, schedule, manual)
    return model, loader(x, y, 64), loader(vx, vy, 500, shuffle=False)


def amsgrad(lr: float, weight_decay: float = 1e-2):
    return lambda p: AdamW(p, lr=lr, weight_decay=weight_decay, amsgrad=True)


# ------------------------------------------------------------------------------------------------ problems
def kws_dead_bias(bias: float | None = -3.0):
    """Keyword spotting, RAdam ``3e-3``; every conv bias set to ``-3`` by an init helper written for another
    model's gates (meant: PyTorch's default init), so every ReLU is off on every clip."""
    net = KeywordNet()
    if bias is not None:
        for m in net.features:
            if isinstance(m, nn.Conv1d):
                nn.init.constant_(m.bias, bias)
    return _kws_task(lambda p: RAdam(p, lr=3e-3), net)


def kws_sgd_low(lr: float = 1e-6):
    """Keyword spotting, SGD with Nesterov momentum 0.99 at ``1e-6`` (meant ``3e-3``)."""
    return _kws_task(lambda p: SGD(p, lr=lr, momentum=0.99, nesterov=True))


def kws_deep_sigmoid(act: type[nn.Module] = nn.Sigmoid):
    """Keyword spotting with eight conv layers and sigmoid activations (meant ReLU), AdamW+amsgrad
    ``1e-3``."""
    return _kws_task(amsgrad(1e-3), KeywordNet(layers=8, act=act))


SILENT_BATCHES = (45, 47)  # the batches (of 64, read in recording order) holding a silent clip
SILENT_ROWS = tuple(64 * b + 9 for b in SILENT_BATCHES)


def _peak_normalised(x: Tensor) -> Tensor:
    return x / x.abs().amax(1, keepdim=True)


def kws_silent_clips(silent: bool = True):
    """Keyword spotting on 4000 clips read in recording order (not shuffled), AdamW+amsgrad ``3e-3``; two
    clips are recorder dropouts (all zeros) and every clip is peak-normalised ``x / max|x|``, so those two
    become ``0 / 0 = NaN``."""
    x, y = keyword_clips(4000, 0)
    if silent:
        x[list(SILENT_ROWS)] = 0.0
    x = _peak_normalised(x)
    model, train, val = _kws_task(amsgrad(3e-3), train=(x, y), shuffle=False)
    val.dataset.tensors = (_peak_normalised(val.dataset.tensors[0]), val.dataset.tensors[1])
    return model, train, val


def kws_int16_tanh(scaled: bool = False):
    """Keyword spotting with tanh activations on clips stored as 16-bit PCM (``round(x / 2 * 32767)``) and
    fed raw, the ``/ 32768`` left out; AdamW+amsgrad ``1e-3``."""
    (x, y), (vx, vy) = keyword_clips(2000, 0), keyword_clips(500, 1)
    pcm, vpcm = (x / 2 * 32767).round(), (vx / 2 * 32767).round()
    if scaled:
        pcm, vpcm = pcm / 32768, vpcm / 32768
    model, train, val = _kws_task(amsgrad(1e-3), KeywordNet(act=nn.Tanh), train=(pcm, y))
    val.dataset.tensors = (vpcm, vy)
    return model, train, val


TAPS = 48


def _lowpass() -> list[float]:
    """A 48-tap Hann-windowed sinc low-pass at half the 2x rate's Nyquist (the anti-alias filter)."""
    k = torch.arange(TAPS, dtype=torch.float64) - (TAPS - 1) / 2
    h = 0.5 * torch.sinc(0.5 * k) * torch.hann_window(TAPS, periodic=False, dtype=torch.float64)
    return (h / h.sum()).tolist()


class FilteredClips(Dataset):
    """Clips recorded at twice the rate (320 samples; here interpolated from the 160-sample clips),
    low-passed and decimated to 160 samples *per item in Python* (a 48-tap FIR in nested loops) when
    ``in_python``; else done once, vectorised."""

    def __init__(self, x: Tensor, y: Tensor, in_python: bool = True) -> None:
        self.raw = nn.functional.interpolate(x.unsqueeze(1), scale_factor=2, mode="linear").squeeze(1)
        self.y, self.in_python, self.taps = y, in_python, _lowpass()
        kernel = torch.tensor(self.taps, dtype=torch.float32).flip(0).view(1, 1, TAPS)
        padded = nn.functional.pad(self.raw.unsqueeze(1), (TAPS // 2, TAPS // 2 - 1))
        self.ready = nn.functional.conv1d(padded, kernel).squeeze(1)[:, ::2].contiguous()

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, i: int) -> tuple[Tensor, Tensor]:
        if not self.in_python:
            return self.ready[i], self.y[i]
        raw = self.raw[i].tolist()
        padded = [0.0] * (TAPS // 2) + raw + [0.0] * (TAPS // 2 - 1)
        taps = self.taps
        out = [sum(padded[t + k] * taps[TAPS - 1 - k] for k in range(TAPS)) for t in range(0, len(raw), 2)]
        return torch.tensor(out), self.y[i]


def kws_python_filter(in_python: bool = True):
    """Keyword spotting, AdamW+amsgrad ``3e-3``, batches of 64 from :class:`FilteredClips`: the anti-alias
    filter and decimation run per item in Python inside ``__getitem__`` (meant: once, vectorised)."""
    x, y = keyword_clips(2000, 0)
    data = FilteredClips(x, y, in_python)
    model, _, val = _kws_task(amsgrad(3e-3))
    vx, vy = val.dataset.tensors
    val.dataset.tensors = (FilteredClips(vx, vy, False).ready, vy)
    return model, DataLoader(data, batch_size=64, shuffle=True), val


def kws_same_clips_every_epoch(rows: int = 128):
    """Keyword spotting, AdamW+amsgrad ``3e-3``, batches of 32: the clip generator meant to draw fresh clips
    every epoch is re-seeded with a constant, so every epoch is the same ``128`` clips."""
    return _kws_task(amsgrad(3e-3), train=keyword_clips(rows, 0), batch=32)


def kws_exponential_up(gamma: float = 1.01):
    """Keyword spotting, AdamW+amsgrad ``3e-3`` under ExponentialLR stepped per step with ``gamma=1.01``
    (meant ``0.99``: a decay written as a growth): the LR doubles every 70 steps."""
    return _kws_task(amsgrad(3e-3), schedule=lambda o: ExponentialLR(o, gamma))


def _unit_filters(net: nn.Module) -> None:
    """An init from an edge-detector prior: every conv filter made zero-mean and unit-norm."""
    with torch.no_grad():
        for m in net.modules():
            if isinstance(m, nn.Conv2d):
                w = m.weight.flatten(1)
                w = w - w.mean(1, keepdim=True)
                m.weight.copy_((w / w.norm(dim=1, keepdim=True)).view_as(m.weight))


def restore_unit_filters(skip_1x1: bool = True):
    """Denoising digits, RAdam ``1e-3``, after :func:`_unit_filters`; applied to the 1x1 skip projection too,
    whose filters hold one weight each (``w - mean(w) = 0``, then ``0 / 0``), so its weights are NaN.
    (``skip_1x1=False``: the init spares the 1x1 layer.)"""
    net = RestoreNet()
    skip = net.skip
    if not skip_1x1:
        net.skip = nn.Identity()
    _unit_filters(net)
    net.skip = skip
    return _restore_task(lambda p: RAdam(p, lr=1e-3), net)


def restore_scaled_lr(per_256: bool = False):
    """2x super-resolution of digits, SGD momentum 0.9 with the linear scaling rule written as
    ``base_lr * batch_size`` (``0.1 * 32 = 3.2``), meant ``base_lr * batch_size / 256`` (``0.0125``)."""
    lr = 0.1 * 32 / 256 if per_256 else 0.1 * 32
    return _restore_task(lambda p: SGD(p, lr=lr, momentum=0.9), mode="sr")


OUTLIER_ROWS = 8  # training images from the second source, left in 0..16 units


def restore_mixed_sources(outliers: int = OUTLIER_ROWS):
    """2x super-resolution of digits, AdamW+amsgrad ``1e-3``; the training images merge two sources and the
    ``/ 16`` scaling was applied to the first only, so ``8`` images (of 1400) sit in 0..16 units."""
    clean = digits("train")
    scattered = torch.randperm(len(clean), generator=_gen(3))[:outliers]
    clean[scattered] *= 16
    return _restore_task(amsgrad(1e-3), mode="sr", train=clean)


EPOCH = 63  # counting: 4000 sequences in batches of 64


def counting_manual_decay(every: int = 1):
    """Counting under manual optimisation, AdamW+amsgrad ``2e-3``; ExponentialLR(gamma=0.9), tuned as a
    per-epoch decay, is stepped in ``training_step`` after every optimizer step (``every=1``; meant every
    epoch, ``63``), so the LR falls 100x in 44 steps."""
    return _counting_task(amsgrad(2e-3), schedule=lambda o: ExponentialLR(o, 0.9), manual={"every": every})


def counting_ema_optimizer(fixed: bool = False):
    """Counting, AdamW+amsgrad ``2e-3``, validated with an EMA of the weights; ``configure_optimizers``
    hands the optimizer ``self.ema.parameters()`` (the EMA copy, which gets no gradients), not the net's."""
    return _counting_task(amsgrad(2e-3), model_cls=EmaTask if not fixed else EmaTaskFixed)


# ------------------------------------------------------------------------------------------------ healthy
def kws_noisy_labels(noisy: float = 0.3):
    """Keyword spotting with 30% of the training labels replaced by a random keyword (crowd-sourced labels;
    the validation labels are the checked ones), AdamW+amsgrad ``1e-3``."""
    x, y = keyword_clips(2000, 0)
    g = _gen(23)
    flip = torch.rand(len(y), generator=g) < noisy
    y = torch.where(flip, torch.randint(0, len(KEYWORDS), y.shape, generator=g), y)
    return _kws_task(amsgrad(1e-3), train=(x, y))


def kws_sgd_nesterov():
    """Keyword spotting, SGD with Nesterov momentum 0.99 at ``3e-3`` (the fixed :func:`kws_sgd_low`): a
    loss flat for its first ~60 steps, then a steady fall."""
    return kws_sgd_low(3e-3)


def kws_manual_accumulate():
    """Keyword spotting under manual optimisation, RAdam ``3e-3``: two batches of 64 accumulated per
    optimizer step and the gradient norm clipped to 1."""
    return _kws_task(lambda p: RAdam(p, lr=3e-3), manual={"accumulate": 2, "clip": 1.0})


def counting_bf16():
    """Counting, AdamW+amsgrad ``2e-3``, trained with ``precision="bf16-mixed"`` on the CPU (bf16 matmuls:
    a noisier loss)."""
    return _counting_task(amsgrad(2e-3))


def counting_onehot_frozen():
    """Counting with the token embedding a fixed one-hot code, frozen on purpose; AdamW+amsgrad ``2e-3``."""
    net = CountingTransformer(VOCAB, COUNTS)
    with torch.no_grad():
        net.embed.weight.copy_(torch.eye(VOCAB, net.embed.embedding_dim))
    net.embed.requires_grad_(False)
    return _counting_task(amsgrad(2e-3), net)


STEP_DOWN = (200, 260)


def counting_step_decay():
    """Counting, AdamW+amsgrad ``2e-3`` under MultiStepLR([200, 260], gamma=0.2): two step decays."""
    return _counting_task(amsgrad(2e-3), schedule=lambda o: MultiStepLR(o, list(STEP_DOWN), 0.2))


def restore_raw_units():
    """Denoising digits in their raw 0..16 units (noise std 4.8): MSE in the tens at first; AdamW+amsgrad
    ``3e-3``."""
    return _restore_task(amsgrad(3e-3), scale=1.0)


RESTART = 50


def restore_warm_restarts():
    """Denoising digits, AdamW+amsgrad ``3e-3`` under CosineAnnealingWarmRestarts(T_0=50, T_mult=2): the LR
    jumps back up at steps 50 and 150."""
    return _restore_task(amsgrad(3e-3), schedule=lambda o: CosineAnnealingWarmRestarts(o, RESTART, 2))


def restore_tiny_val():
    """2x super-resolution of digits, RAdam ``3e-3``, validated on 8 images only."""
    return _restore_task(lambda p: RAdam(p, lr=3e-3), mode="sr", val_rows=8)
