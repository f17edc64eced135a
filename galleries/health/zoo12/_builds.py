"""Builders of zoo 12's runs: each returns ``(model, train_loader, val_loader or None)``.

Problem runs take the knob that holds the bug, so a proof builds the healthy twin (the bug fixed) with the
same code. Data: audio-like waveforms made in code here (four wave shapes, mono or stereo) or scikit-learn's
digits as 8x8 images (the U-Net denoiser).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor
from torch.optim import SGD, Adam, Adamax, AdamW, NAdam, RAdam
from torch.optim.lr_scheduler import CyclicLR, LambdaLR, MultiStepLR
from torch.utils.data import DataLoader, Dataset

from galleries.health.zoo1 import _data as data
from galleries.health.zoo12._models import FilterBank, ResidualSignalNet, SignalCNN, Task, TinyUNet

loader, _gen = data.loader, data._gen
LENGTH = 128


# ------------------------------------------------------------------------------------------------ data
def waveforms(rows: int, seed: int = 0, noise: float = 0.1) -> tuple[Tensor, Tensor]:
    """Mono clips ``(N, 1, 128)``: a sine, square, sawtooth or triangle wave (the label) of 2-8 cycles, a
    random phase and a 0.5-1 amplitude, plus Gaussian noise."""
    g = _gen(seed)
    label = torch.randint(0, 4, (rows,), generator=g)
    cycles = 2 + 6 * torch.rand(rows, 1, generator=g)
    phase = torch.rand(rows, 1, generator=g)
    t = (torch.arange(LENGTH) / LENGTH * cycles + phase) % 1.0  # (N, T) position in the cycle
    sine = torch.sin(2 * math.pi * t)
    square = torch.where(t < 0.5, 1.0, -1.0)
    saw = 2 * t - 1
    triangle = 1 - 4 * (t - 0.5).abs()
    wave = torch.stack([sine, square, saw, triangle])[label, torch.arange(rows)]
    wave = wave * (0.5 + 0.5 * torch.rand(rows, 1, generator=g))
    return (wave + noise * torch.randn(wave.shape, generator=g)).unsqueeze(1), label


def noisy_digits(split: str, noise: float = 0.3, seed: int = 0) -> tuple[Tensor, Tensor]:
    """Digits ``(N, 1, 8, 8)`` in [0, 1] with Gaussian noise (the input) and clean (the target)."""
    clean = data.digits(split, images=True)[0]
    return clean + noise * torch.randn(clean.shape, generator=_gen(seed)), clean


# ------------------------------------------------------------------------------------------------ tasks
def _signals(make_optimizer, net=None, x: Tensor | None = None, y: Tensor | None = None, schedule=None,
             rows: int = 2400, noise: float = 0.1, val_rows: int = 400, shuffle: bool = True):  # fmt: skip
    (tx, ty), (vx, vy) = waveforms(rows, 0, noise), waveforms(val_rows, 1, noise)
    tx, ty = (tx if x is None else x), (ty if y is None else y)
    model = Task(net or SignalCNN(), "ce", make_optimizer, schedule)
    return model, loader(tx, ty, 32, shuffle=shuffle), loader(vx, vy, 400, shuffle=False)


def _unet(make_optimizer, net=None, schedule=None, scale: float = 1.0):
    (tx, ty), (vx, vy) = noisy_digits("train"), noisy_digits("val", seed=1)
    model = Task(net or TinyUNet(), "mse", make_optimizer, schedule)
    return model, loader(scale * tx, scale * ty, 32), loader(scale * vx, scale * vy, 397, shuffle=False)


# ------------------------------------------------------------------------------------------------ problems
def signal_radam(lr: float = 1e-7):
    """A 1-D CNN tone classifier, RAdam at ``1e-7`` (meant ``3e-3``: the exponent's sign slipped)."""
    return _signals(lambda p: RAdam(p, lr=lr))


def stereo(rows: int, seed: int, inverted: bool) -> tuple[Tensor, Tensor, Tensor]:
    """Stereo takes of :func:`waveforms`: both channels carry the wave with their own noise (0.05); with
    ``inverted`` the right channel was wired in reverse polarity. Returns ``(left, right, labels)``."""
    x, y = waveforms(rows, seed, noise=0.0)
    g = _gen(seed + 100)
    left = x + 0.05 * torch.randn(x.shape, generator=g)
    right = (-x if inverted else x) + 0.05 * torch.randn(x.shape, generator=g)
    return left, right, y


def signal_downmix(fix_polarity: bool = False):
    """The tone classifier, Adam ``3e-3``, fed the mono downmix ``(left + right) / 2`` of stereo takes whose
    right channel is in reverse polarity: the wave cancels and only the noise is left (the fix flips the
    right channel first)."""

    def mono(rows: int, seed: int) -> tuple[Tensor, Tensor]:
        left, right, y = stereo(rows, seed, inverted=True)
        return (left + (-right if fix_polarity else right)) / 2, y

    (tx, ty), (vx, vy) = mono(2400, 0), mono(400, 1)
    model = Task(SignalCNN(), "ce", lambda p: Adam(p, lr=3e-3))
    return model, loader(tx, ty, 32), loader(vx, vy, 400, shuffle=False)


UNET_BLOCK_LRS = {"down": 2e-3, "mid": 2e-3, "out": 2e-3}  # copied from an encoder-only model: no "up"


def unet_block_lrs(block_lrs: dict[str, float] = UNET_BLOCK_LRS):
    """The U-Net denoiser, AdamW with per-block LRs looked up by the parameter name's first part; blocks
    missing from the table (``up``) are left out of the optimizer, yet get gradients."""
    net = TinyUNet()

    def make(params):
        groups = [
            {"params": [p for n, p in net.named_parameters() if n.split(".")[0] == block], "lr": lr}
            for block, lr in block_lrs.items()
        ]
        return AdamW(groups, weight_decay=1e-4)

    return _unet(make, net)


def signal_eps_zero(eps: float = 0.0):
    """The tone classifier on mono takes stored as stereo (the right channel all zeros), Adam ``3e-3`` with
    ``eps=0`` ("for exactness"): the silent channel's weights get exact zero gradients, ``0 / 0``."""
    (tx, ty), (vx, vy) = waveforms(2400, 0), waveforms(400, 1)
    tx, vx = torch.cat([tx, torch.zeros_like(tx)], 1), torch.cat([vx, torch.zeros_like(vx)], 1)
    model = Task(SignalCNN(channels=2), "ce", lambda p: Adam(p, lr=3e-3, eps=eps))
    return model, loader(tx, ty, 32), loader(vx, vy, 400, shuffle=False)


NAN_ROW = 50 * 32 + 3  # read in order: in batch 50 of the 75 an epoch


def signal_nan_clip(broken: bool = True):
    """The tone classifier, Adam ``3e-3``, clips read in order; one clip's decoder failed half-way and left
    NaN samples (12 of its 128)."""
    x, y = waveforms(2400, 0)
    if broken:
        x[NAN_ROW, 0, 60:72] = math.nan
    return _signals(lambda p: Adam(p, lr=3e-3), x=x, y=y, shuffle=False)


def signal_few_clips(rows: int = 64):
    """A wide tone classifier (width 64) on ``64`` noisy clips (noise 0.8): the training list was sliced for a
    smoke test and never restored; Adam ``3e-3``."""
    return _signals(lambda p: Adam(p, lr=3e-3), net=SignalCNN(width=64), rows=rows, noise=0.8)


def unet_cyclic(gamma: float = 1.025):
    """The U-Net denoiser, Adam under an ``exp_range`` CyclicLR from ``1e-4`` to ``3e-3`` (50 steps up, 50
    down) whose amplitude decays by ``gamma ** step``, with ``gamma = 1.025`` (meant ``0.975``): every cycle's
    peak is ~12x the one before."""
    return _unet(lambda p: Adam(p, lr=3e-3),
                 schedule=lambda o: CyclicLR(o, 1e-4, 3e-3, step_size_up=50, mode="exp_range", gamma=gamma,
                                             cycle_momentum=False))  # fmt: skip


def signal_multistep(milestones: tuple[int, ...] = (10, 20, 30)):
    """The tone classifier, Adam ``3e-3`` under MultiStepLR at milestones 10, 20, 30 with gamma 0.1 (meant
    epochs, stepped every batch): the LR is ``3e-6`` by step 30."""
    return _signals(lambda p: Adam(p, lr=3e-3), schedule=lambda o: MultiStepLR(o, list(milestones), 0.1))


def signal_raw_counts(scale: float = 32767.0):
    """A tone classifier with tanh activations fed raw 16-bit sample counts (the ``/ 32768`` left out),
    Adam ``3e-3``."""
    (tx, ty), (vx, vy) = waveforms(2400, 0), waveforms(400, 1)
    model = Task(SignalCNN(act=torch.nn.Tanh), "ce", lambda p: Adam(p, lr=3e-3))
    return model, loader(scale * tx, ty, 32), loader(scale * vx, vy, 400, shuffle=False)


def residual_deep(branch_scale: float = 1.0):
    """A 24-block residual 1-D CNN, no normalisation, He-initialised branches added at full scale (a gain
    ~3 a block), Adam ``3e-3``."""
    return _signals(lambda p: Adam(p, lr=3e-3), net=ResidualSignalNet(branch_scale=branch_scale))


MU = 255.0
OVERSAMPLE = 32  # the stored takes: 32 x 128 = 4096 mu-law codes each, decimated to 128 samples on read


def mu_law_encode(x: Tensor) -> Tensor:
    """8-bit mu-law codes (0-255) of samples in [-1, 1]."""
    y = x.clamp(-1, 1).sign() * torch.log1p(MU * x.clamp(-1, 1).abs()) / math.log1p(MU)
    return ((y + 1) / 2 * MU).round().to(torch.uint8)


class MuLawClips(Dataset):
    """Clips stored as 4096 mu-law codes, decoded code by code in Python and decimated 32x on every read (no
    cache, no workers)."""

    def __init__(self, codes: Tensor, y: Tensor) -> None:
        self.codes, self.y = codes, y

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, i: int) -> tuple[Tensor, Tensor]:
        samples = []
        for code in self.codes[i].tolist():
            v = 2 * code / MU - 1
            samples.append(math.copysign((1 + MU) ** abs(v) - 1, v) / MU)
        x = torch.tensor(samples).view(LENGTH, OVERSAMPLE).mean(1)
        return x.unsqueeze(0), self.y[i]


def signal_mulaw_reads():
    """The tone classifier, Adam ``3e-3``, its clips stored as 4096 mu-law codes each and decoded in Python on
    every read, 32 a batch."""
    model, train, val = _signals(lambda p: Adam(p, lr=3e-3))
    x, y = train.dataset.tensors
    codes = mu_law_encode(x.squeeze(1).repeat_interleave(OVERSAMPLE, 1) / 2)
    return model, DataLoader(MuLawClips(codes, y), 32, shuffle=True, generator=_gen(0)), val


# ------------------------------------------------------------------------------------------------ healthy
def unet_pixel_counts():
    """The U-Net denoiser on pixels in 0-255 (not rescaled), Adam ``3e-3``: an MSE in the thousands."""
    return _unet(lambda p: Adam(p, lr=3e-3), scale=255.0)


def signal_label_noise(redrawn: float = 0.4):
    """The tone classifier with 40% of the labels (train and validation) redrawn at random, Adam ``3e-3``."""
    model, train, val = _signals(lambda p: Adam(p, lr=3e-3))
    g = _gen(7)
    for dl in (train, val):
        y = dl.dataset.tensors[1]
        mask = torch.rand(len(y), generator=g) < redrawn
        y[mask] = torch.randint(0, 4, (int(mask.sum()),), generator=g)
    return model, train, val


WARMUP = 150


def signal_long_warmup():
    """The tone classifier, NAdam ``2e-3`` under a quadratic warm-up over 150 steps."""
    return _signals(lambda p: NAdam(p, lr=2e-3),
                    schedule=lambda o: LambdaLR(o, lambda s: min(1.0, ((s + 1) / WARMUP) ** 2)))  # fmt: skip


def filterbank_frozen():
    """A fixed Gabor filter bank (frozen on purpose) under a trainable 1-D CNN, Adamax ``2e-3``."""
    return _signals(lambda p: Adamax(p, lr=2e-3), net=FilterBank())


def unet_sgd_slow():
    """The U-Net denoiser, SGD ``0.02`` with momentum 0.9: slow but steady."""
    return _unet(lambda p: SGD(p, lr=0.02, momentum=0.9))


def signal_tiny_val():
    """The tone classifier, Adam ``3e-3``, validated on 8 clips every 10 steps."""
    model, train, _ = _signals(lambda p: Adam(p, lr=3e-3))
    vx, vy = waveforms(8, 3)
    return model, train, loader(vx, vy, 8, shuffle=False)


def signal_adamax_aggressive():
    """The tone classifier, Adamax at ``0.02`` (ten times the usual), stable."""
    return _signals(lambda p: Adamax(p, lr=0.02))


def residual_scaled():
    """The 24-block residual 1-D CNN with each branch scaled by ``0.1``, Adam ``3e-3``."""
    return residual_deep(branch_scale=0.1)
