"""Zoo 12's networks (plain torch): a 1-D CNN that classifies waveforms, a deep residual 1-D CNN and a small
U-Net that denoises 8x8 digits. The trainer is the first zoo's :class:`Task`."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from galleries.health.zoo1._models import Task

__all__ = ["FilterBank", "ResidualSignalNet", "SignalCNN", "Task", "TinyUNet"]


class SignalCNN(nn.Module):
    """Waveforms ``(N, channels, T)``: two 1-D convolutions (``act`` between), a mean over time, a linear
    head over ``classes``."""

    def __init__(self, channels: int = 1, classes: int = 4, width: int = 16, act: type[nn.Module] = nn.ReLU):
        super().__init__()
        self.conv1 = nn.Conv1d(channels, width, 9, padding=4)
        self.conv2 = nn.Conv1d(width, 2 * width, 5, padding=2, stride=2)
        self.act = act()
        self.head = nn.Linear(2 * width, classes)

    def forward(self, x: Tensor) -> Tensor:
        h = self.act(self.conv2(self.act(self.conv1(x))))
        return self.head(h.mean(2))


class FilterBank(nn.Module):
    """A fixed band of ``bands`` Gabor-like filters (cosine carriers under a Hann window), frozen on purpose
    (``requires_grad=False``), then a trainable :class:`SignalCNN` over the band magnitudes."""

    def __init__(self, bands: int = 12, size: int = 33, classes: int = 4) -> None:
        super().__init__()
        t = torch.arange(size) - size // 2
        freqs = torch.linspace(0.02, 0.45, bands)
        window = torch.hann_window(size, periodic=False)
        bank = torch.cos(2 * math.pi * freqs[:, None] * t[None]) * window
        self.bank = nn.Conv1d(1, bands, size, padding=size // 2, bias=False)
        with torch.no_grad():
            self.bank.weight.copy_(bank.unsqueeze(1) / bank.norm(dim=1, keepdim=True).unsqueeze(1))
        self.bank.requires_grad_(False)
        self.net = SignalCNN(channels=bands, classes=classes)

    def forward(self, x: Tensor) -> Tensor:
        return self.net(self.bank(x).abs())


class ResidualSignalNet(nn.Module):
    """A deep residual 1-D CNN: a stem, ``blocks`` branches ``h + conv(relu(conv(h)))`` with no normalisation,
    a mean over time and a linear head; ``branch_scale`` multiplies each branch (``1 / blocks`` or a zero
    init keep the depth tame)."""

    def __init__(self, blocks: int = 24, width: int = 8, classes: int = 4, branch_scale: float = 1.0) -> None:
        super().__init__()
        self.stem = nn.Conv1d(1, width, 9, padding=4)
        self.branches = nn.ModuleList(
            nn.Sequential(
                nn.Conv1d(width, width, 5, padding=2),
                nn.ReLU(),
                nn.Conv1d(width, width, 5, padding=2),
            )
            for _ in range(blocks)
        )
        for branch in self.branches:
            for conv in (branch[0], branch[2]):
                nn.init.kaiming_normal_(conv.weight, nonlinearity="relu")
        self.head = nn.Linear(width, classes)
        self.branch_scale = branch_scale

    def forward(self, x: Tensor) -> Tensor:
        h = self.stem(x)
        for branch in self.branches:
            h = h + self.branch_scale * branch(h)
        return self.head(h.mean(2))


class TinyUNet(nn.Module):
    """A two-level U-Net for ``(N, 1, 8, 8)`` images: ``down`` (two 3x3 convolutions), a 2x max-pool,
    ``mid`` at 4x4, a 2x upsample, ``up`` over the upsampled and skipped maps, a 1x1 ``out``."""

    def __init__(self, width: int = 16) -> None:
        super().__init__()
        self.down = nn.Sequential(nn.Conv2d(1, width, 3, padding=1), nn.ReLU(),
                                  nn.Conv2d(width, width, 3, padding=1), nn.ReLU())  # fmt: skip
        self.mid = nn.Sequential(nn.Conv2d(width, 2 * width, 3, padding=1), nn.ReLU(),
                                 nn.Conv2d(2 * width, 2 * width, 3, padding=1), nn.ReLU())  # fmt: skip
        self.up = nn.Sequential(nn.Conv2d(3 * width, width, 3, padding=1), nn.ReLU(),
                                nn.Conv2d(width, width, 3, padding=1), nn.ReLU())  # fmt: skip
        self.out = nn.Conv2d(width, 1, 1)

    def forward(self, x: Tensor) -> Tensor:
        skip = self.down(x)
        low = self.mid(F.max_pool2d(skip, 2))
        h = self.up(torch.cat([F.interpolate(low, scale_factor=2.0), skip], 1))
        return self.out(h)
