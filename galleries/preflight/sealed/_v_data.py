"""Sealed gallery V's data (half ``v``): small seeded synthetic sets (traffic-sign crops, seismic traces
with a first arrival, sentence pairs with similarity scores, distorted digit scans with an opinion score,
Wi-Fi fingerprints of positions on a floor and eye crops with a gaze direction). Every builder is
deterministic (its own generator); random augmentation at read time draws from the global RNG."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from galleries.preflight.sealed._e_data import Rows
from galleries.sealed import digits, loaders
from galleries.sealed import gen as _gen

__all__ = ["Rows", "digits", "loaders"]


# --- traffic signs: a coloured disk with a white arrow ------------------------------------------------------
SIGN = 12
SIGN_CLASSES = 6  # 0..2 blue (mandatory) left, right, ahead; 3..5 red (prohibited) left, right, ahead
MIRROR = torch.tensor([1, 0, 2, 4, 3, 5])  # the class a sign shows when flipped left to right
_DISK = {0: (0.1, 0.25, 0.85), 1: (0.85, 0.1, 0.1)}


def _arrow(kind: int) -> torch.Tensor:
    """A 12 x 12 mask of a white arrow pointing left (0), right (1) or ahead (2)."""
    mask = torch.zeros(SIGN, SIGN)
    mask[5:7, 3:9] = 1  # the shaft
    for i in range(3):  # the head, at the left
        mask[5 - i : 7 + i, 3 + i] = 1
    if kind == 1:
        mask = mask.flip(-1)
    elif kind == 2:
        mask = mask.T.clone()
    return mask


def signs(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` RGB crops (3, 12, 12) of a sign centred to within a pixel, under random lighting and noise, and
    their classes. Left and right differ only by the mirror image; blue and red only by colour."""
    g = _gen(seed)
    grid = torch.arange(SIGN).float() - 5.5
    labels = torch.randint(SIGN_CLASSES, (n,), generator=g)
    images = torch.empty(n, 3, SIGN, SIGN)
    arrows = [_arrow(k) for k in range(3)]
    for i, label in enumerate(labels.tolist()):
        dy, dx = torch.randint(-1, 2, (2,), generator=g).tolist()
        disk = ((grid[:, None] ** 2 + grid[None, :] ** 2) <= 30).float()
        colour = torch.tensor(_DISK[label // 3])[:, None, None]
        background = 0.3 + 0.3 * torch.rand(3, 1, 1, generator=g)
        image = background * (1 - disk) + colour * disk
        image = torch.where(arrows[label % 3].bool(), torch.tensor(0.95), image)
        images[i] = image.roll((dy, dx), (-2, -1))
    light = 0.7 + 0.6 * torch.rand(n, 1, 1, 1, generator=g)
    return (images * light + 0.08 * torch.randn(n, 3, SIGN, SIGN, generator=g)).clamp(0, 1), labels


def as_bgr(images: torch.Tensor) -> torch.Tensor:
    """The BUG's loader: the crops as OpenCV reads them from disk (channels blue, green, red)."""
    return images.flip(-3)


def hflip(image: torch.Tensor, label: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The BUG: a random horizontal flip from the image-classification template, the label kept."""
    return (image.flip(-1), label) if torch.rand(()) < 0.5 else (image, label)


def hflip_mirrored(image: torch.Tensor, label: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """A random horizontal flip that relabels the sign as its mirror image (left <-> right)."""
    return (image.flip(-1), MIRROR[label]) if torch.rand(()) < 0.5 else (image, label)


# --- seismic phase picking: the first arrival in a three-second trace ---------------------------------------
RATE, TRACE, CROP = 100, 256, 200  # samples per second, stored trace, training crop


def traces(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` single-channel traces (1, 256) at 100 Hz: microseism and noise, then from the onset (0.6..1.8 s)
    a decaying wavelet of 4..12 Hz (amplitude 1..3 x the noise), normalised by their peak; and the onset
    time in seconds (as a catalogue gives it)."""
    g = _gen(seed)
    t = torch.arange(TRACE).float()
    onset = torch.randint(60, 181, (n, 1), generator=g).float()
    freq = 4 + 8 * torch.rand(n, 1, generator=g)
    decay = 20 + 40 * torch.rand(n, 1, generator=g)
    amp = 1 + 2 * torch.rand(n, 1, generator=g)
    lag = (t - onset).clamp(min=0)
    wavelet = amp * torch.exp(-lag / decay) * torch.sin(2 * math.pi * freq * lag / RATE) * (t >= onset)
    micro = 0.5 * torch.sin(2 * math.pi * 0.3 * t / RATE + 6.28 * torch.rand(n, 1, generator=g))
    wave = wavelet + micro + 0.3 * torch.randn(n, TRACE, generator=g)
    wave = wave / wave.abs().amax(-1, keepdim=True)
    return wave[:, None], onset[:, 0] / RATE


def random_crop(wave: torch.Tensor, onset: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Augmentation: a random 2-second window of the trace (it starts 0..0.56 s in); the onset is moved to
    the window's clock."""
    start = int(torch.randint(TRACE - CROP + 1, ()))
    return wave[:, start : start + CROP], onset - start / RATE


def random_crop_onset_kept(wave: torch.Tensor, onset: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The BUG: the same random window, with the catalogue's onset kept on the trace's clock."""
    start = int(torch.randint(TRACE - CROP + 1, ()))
    return wave[:, start : start + CROP], onset


def crop_and_polarity(wave: torch.Tensor, onset: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Augmentation: the random window and, half the time, the trace's polarity reversed (as a sensor wired
    the other way round records it)."""
    wave, onset = random_crop(wave, onset)
    return (-wave if torch.rand(()) < 0.5 else wave), onset


# --- semantic textual similarity: sentence pairs with a 0..5 score ------------------------------------------
VOCAB, TOPICS, PER_TOPIC, MAX_LEN = 201, 8, 25, 16  # token 0 pads


def _mixture(g: torch.Generator) -> torch.Tensor:
    """A random topic mixture, most of its weight on one to three topics."""
    mix = torch.rand(TOPICS, generator=g) ** 16
    return mix / mix.sum()


def _sentence(mix: torch.Tensor, length: int, g: torch.Generator) -> torch.Tensor:
    topics = torch.multinomial(mix, length, replacement=True, generator=g)
    tokens = 1 + topics * PER_TOPIC + torch.randint(PER_TOPIC, (length,), generator=g)
    return F.pad(tokens, (0, MAX_LEN - length))


def sentence_pairs(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``n`` pairs of sentences (token ids, 6..16 tokens, padded with 0) drawn from topic mixtures, the
    second's mixture a random blend of the first's and a fresh one; and their score, 5 x the cosine of the
    two mixtures (0..5)."""
    g = _gen(seed)
    a_side, b_side, scores = [], [], []
    for _ in range(n):
        mix_a, fresh = _mixture(g), _mixture(g)
        blend = torch.rand((), generator=g) ** 2
        mix_b = blend * mix_a + (1 - blend) * fresh
        lengths = torch.randint(6, MAX_LEN + 1, (2,), generator=g).tolist()
        a_side.append(_sentence(mix_a, lengths[0], g))
        b_side.append(_sentence(mix_b, lengths[1], g))
        scores.append(5 * F.cosine_similarity(mix_a, mix_b, dim=0))
    return torch.stack(a_side), torch.stack(b_side), torch.stack(scores)


def bucketed_by_length(a: torch.Tensor, b: torch.Tensor, scores: torch.Tensor):
    """The BUG: the pairs sorted by the first sentence's length (to bucket similar lengths) while the
    scores stay in the file's order."""
    order = (a != 0).sum(1).argsort(stable=True)
    return a[order], b[order], scores


def swap_and_drop(a: torch.Tensor, b: torch.Tensor, score: torch.Tensor):
    """Augmentation: the pair in either order (the score is symmetric) and a tenth of each sentence's
    tokens dropped (set to the padding id)."""
    if torch.rand(()) < 0.5:
        a, b = b, a
    a = a.masked_fill(torch.rand(MAX_LEN) < 0.1, 0)
    b = b.masked_fill(torch.rand(MAX_LEN) < 0.1, 0)
    return a, b, score


# --- no-reference image quality: distorted digit scans with an opinion score --------------------------------
def distorted(part: str, copies: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Each digit scan of ``part`` (1, 8, 8) in ``copies`` distorted versions (contrast reduced to 30..100%
    around mid-grey, Gaussian noise of 0..0.3) and its mean opinion score, 1 (bad) .. 5 (pristine)."""
    g = _gen(seed)
    x, _ = digits(part, (1, 8, 8))
    x = x.repeat(copies, 1, 1, 1)
    contrast = 0.3 + 0.7 * torch.rand(len(x), 1, 1, 1, generator=g)
    noise = 0.3 * torch.rand(len(x), 1, 1, 1, generator=g)
    scan = 0.5 + contrast * (x - 0.5) + noise * torch.randn(x.shape, generator=g)
    quality = (contrast - 0.3) / 0.7 * (1 - 0.8 * noise / 0.3)
    return scan, 1 + 4 * quality.flatten()


def photometric_jitter(scan: torch.Tensor, mos: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The BUG: the classifier template's photometric augmentation (contrast jitter x0.5..1.5 around
    mid-grey, then Gaussian noise of sigma 0..0.1), the score kept."""
    contrast = 0.5 + torch.rand(())
    scan = 0.5 + contrast * (scan - 0.5)
    return scan + 0.1 * torch.rand(()) * torch.randn(scan.shape), mos


def flips_and_turns(scan: torch.Tensor, mos: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Augmentation that keeps the quality: a random flip and quarter turn."""
    if torch.rand(()) < 0.5:
        scan = scan.flip(-1)
    return scan.rot90(int(torch.randint(4, ())), (-2, -1)), mos


# --- indoor positioning from Wi-Fi fingerprints -------------------------------------------------------------
FLOOR = (60.0, 20.0)  # metres along x, y
NOT_HEARD = 100.0  # the survey's value for an access point not heard (as in UJIIndoorLoc)
_APS = torch.stack(torch.meshgrid(torch.linspace(5, 55, 6), torch.tensor([4.0, 16.0]), indexing="xy"), -1)
APS = _APS.reshape(-1, 2)  # 12 access points


def fingerprints(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` surveyed positions (x, y in metres) uniformly over the floor and their received signal
    strengths (dBm) of the 12 access points (log-distance path loss, shadowing of 4 dB), ``NOT_HEARD`` below
    -90 dBm."""
    g = _gen(seed)
    xy = torch.rand(n, 2, generator=g) * torch.tensor(FLOOR)
    distance = torch.cdist(xy, APS)
    rssi = -30 - 30 * torch.log10(distance + 1) + 4 * torch.randn(n, len(APS), generator=g)
    return rssi.masked_fill(rssi < -90, NOT_HEARD), xy


def scaled(rssi: torch.Tensor) -> torch.Tensor:
    """The survey's readings as the network reads them: 0 for not heard, else (dBm + 100) / 70."""
    return torch.where(rssi == NOT_HEARD, torch.tensor(0.0), (rssi + 100) / 70)


def as_floor_plan_pixels(xy: torch.Tensor) -> torch.Tensor:
    """The BUG's labels: the positions as clicked on the floor-plan image (1 pixel a metre), read back as
    (row, column), that is (y, x)."""
    return xy.flip(-1)


def access_point_dropout(rssi: torch.Tensor, xy: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Augmentation: each heard access point is missed with probability 0.15 (switched off, blocked)."""
    return rssi.masked_fill(torch.rand(rssi.shape) < 0.15, 0.0), xy


# --- gaze estimation from eye crops -------------------------------------------------------------------------
EYE = (9, 15)  # rows, columns
YAW, PITCH = 30.0, 20.0  # the largest angles, degrees


def eyes(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` grey eye crops (9 x 15): a bright sclera, a dark iris (radius 2.2) displaced by the gaze, eyelid
    shading, lighting and noise; and the gaze (yaw, pitch) in degrees (yaw up to 30, pitch up to 20)."""
    g = _gen(seed)
    gaze = (2 * torch.rand(n, 2, generator=g) - 1) * torch.tensor([YAW, PITCH])
    rows = torch.arange(EYE[0]).float()[:, None]
    cols = torch.arange(EYE[1]).float()[None, :]
    cx = 7 + 5 * torch.sin(torch.deg2rad(gaze[:, 0]))[:, None, None]
    cy = 4 + 3 * torch.sin(torch.deg2rad(gaze[:, 1]))[:, None, None] / math.sin(math.radians(PITCH))
    iris = torch.sigmoid(4 * (2.2 - ((rows - cy) ** 2 + (cols - cx) ** 2).sqrt()))
    sclera = (((rows - 4) / 4.5) ** 2 + ((cols - 7) / 7.5) ** 2 <= 1).float()
    light = 0.6 + 0.4 * torch.rand(n, 1, 1, generator=g)
    image = light * (0.25 + 0.6 * sclera - 0.7 * iris * sclera)
    return image + 0.05 * torch.randn(n, *EYE, generator=g), gaze
