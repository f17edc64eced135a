"""Builders of zoo 26's runs: each returns ``(model, train_loader, val_loader or None)``.

Problem runs take the knob that holds the bug, so a proof builds the healthy twin (the bug fixed) with the
same code. Data, all made in code: rectified pairs of textured scanlines with a piecewise-constant disparity,
mixtures of a harmonic tone and band-limited noise bursts as STFT magnitudes, bracket words (balanced and
near-miss), phantoms of random ellipses and their parallel-beam sinograms, and irregularly sampled light
curves of pulsating, eclipsing and flaring stars.
"""

from __future__ import annotations

import functools
import math
import statistics

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.optim import SGD, Adagrad, Adam, AdamW, RAdam
from torch.optim.lr_scheduler import (
    ChainedScheduler,
    CosineAnnealingWarmRestarts,
    ExponentialLR,
    LambdaLR,
    LinearLR,
    PolynomialLR,
)
from torch.utils.data import DataLoader, Dataset, TensorDataset

from galleries.health.zoo26._models import (
    MLP,
    BracketRNN,
    LightCurveSet,
    MaskNet,
    StereoCNN,
    Task,
    TomoNet,
    mse,
)


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def loader(*tensors: Tensor, batch: int, shuffle: bool = True, seed: int = 0) -> DataLoader:
    """A loader of in-memory tensors; shuffled with its own generator (the same order in every run)."""
    return DataLoader(TensorDataset(*tensors), batch_size=batch, shuffle=shuffle,
                      generator=_gen(seed) if shuffle else None)  # fmt: skip


# ------------------------------------------------------------------------------------------------ stereo
WIDTH, MAX_DISPARITY = 64, 6


@functools.cache
def scanlines(rows: int, seed: int) -> tuple[Tensor, Tensor, Tensor]:
    """``rows`` rectified pairs of 8-bit scanlines ``(rows, 64)`` (left, right) and the left one's disparity
    ``(rows, 64)`` in pixels: a smoothed random texture seen by the right camera, and by the left one through
    two to three fronto-parallel segments at disparities 0-6 (linear interpolation), with sensor noise
    (cached: callers copy before changing)."""
    g = _gen(seed)
    pad = MAX_DISPARITY + 2
    texture = torch.randn(rows, 1, WIDTH + 2 * pad, generator=g)
    texture = F.avg_pool1d(texture, 3, 1, 1).squeeze(1)
    texture = 128 + 40 * texture / texture.std(1, keepdim=True)
    cuts = torch.sort(torch.randint(8, WIDTH - 8, (rows, 2), generator=g), 1).values
    levels = torch.rand(rows, 3, generator=g) * MAX_DISPARITY
    x = torch.arange(WIDTH).expand(rows, -1)
    segment = (x >= cuts[:, :1]).long() + (x >= cuts[:, 1:]).long()
    disparity = levels.gather(1, segment)
    right = texture[:, pad : pad + WIDTH]
    pos = pad + x - disparity  # the left pixel x sees the right image at x - d
    lo = pos.floor().long()
    frac = pos - lo
    left = texture.gather(1, lo) * (1 - frac) + texture.gather(1, lo + 1) * frac
    left = left + 2 * torch.randn(left.shape, generator=g)
    right = right + 2 * torch.randn(right.shape, generator=g)
    return left.clamp(0, 255), right.clamp(0, 255), disparity


def standardise(line: Tensor) -> Tensor:
    """Each scanline to zero mean and unit standard deviation (the camera's gain and offset removed)."""
    return (line - line.mean(1, keepdim=True)) / line.std(1, keepdim=True)


SATURATED = (92, 329, 341)  # rows where the sky saturated the sensor: constant 255 in both cameras


def _stereo_task(make_optimizer, schedule=None, saturated: bool = False, batch: int = 32, rows: int = 3200,
                 net: nn.Module | None = None):  # fmt: skip
    """Disparity regression (MSE, pixels) on ``rows`` training pairs (400 validate), a dilated CNN;
    ``saturated``: the :data:`SATURATED` rows are constant 255."""
    left, right, d = (t.clone() for t in scanlines(rows, 0))
    if saturated:
        left[list(SATURATED)] = 255.0
        right[list(SATURATED)] = 255.0
    vl, vr, vd = scanlines(400, 1)
    x = torch.stack([standardise(left), standardise(right)], 1)
    vx = torch.stack([standardise(vl), standardise(vr)], 1)
    model = Task(net if net is not None else StereoCNN(), mse, make_optimizer, schedule)
    return model, loader(x, d, batch=batch), loader(vx, vd, batch=400, shuffle=False)


# ------------------------------------------------------------------------------------------------ separation
RATE, SAMPLES, N_FFT, HOP = 8000, 1024, 64, 32


@functools.cache
def mixtures(rows: int, seed: int) -> tuple[Tensor, Tensor]:
    """``rows`` mixtures of a harmonic tone (a random 150-600 Hz fundamental, four harmonics, a slow swell)
    and band-limited noise bursts, as compressed STFT magnitudes ``|X| ** 0.5`` ``(rows, 1, 33, 33)``, and the
    tone's own ``(rows, 1, 33, 33)``."""
    g = _gen(seed)
    t = torch.arange(SAMPLES) / RATE
    f0 = 150 + 450 * torch.rand(rows, 1, generator=g)
    phase = 2 * math.pi * torch.rand(rows, 4, generator=g)
    amps = torch.rand(rows, 4, generator=g) / torch.arange(1, 5)
    tone = sum(amps[:, k : k + 1] * torch.sin(2 * math.pi * (k + 1) * f0 * t + phase[:, k : k + 1])
               for k in range(4))  # fmt: skip
    swell = 0.5 + 0.5 * torch.sin(2 * math.pi * torch.rand(rows, 1, generator=g) * 4 * t)
    tone = tone * swell
    noise = torch.randn(rows, SAMPLES, generator=g)
    centre = 0.2 + 0.6 * torch.rand(rows, 1, generator=g)  # the band, as a fraction of Nyquist
    spec = torch.fft.rfft(noise)
    freq = torch.linspace(0, 1, spec.shape[1])
    spec = spec * torch.exp(-0.5 * ((freq - centre) / 0.08) ** 2)
    noise = torch.fft.irfft(spec, SAMPLES)
    bursts = (torch.rand(rows, 8, generator=g) < 0.5).float().repeat_interleave(SAMPLES // 8, 1)
    noise = noise / noise.std(1, keepdim=True) * 0.6 * bursts
    window = torch.hann_window(N_FFT)

    def mag(signal: Tensor) -> Tensor:
        return torch.stft(signal, N_FFT, HOP, window=window, return_complex=True).abs().sqrt().unsqueeze(1)

    return mag(tone + noise), mag(tone)


def mask_loss(net: nn.Module, batch) -> Tensor:
    """The MSE of the masked mixture against the tone's magnitude."""
    mix, tone = batch
    return F.mse_loss(net(torch.log1p(mix)) * mix, tone)


def snr_loss(net: nn.Module, batch) -> Tensor:
    """Minus the signal-to-noise ratio (dB) of the masked mixture against the tone: a negative loss."""
    mix, tone = batch
    error = (net(torch.log1p(mix)) * mix - tone).pow(2).sum((1, 2, 3))
    return -(10 * torch.log10(tone.pow(2).sum((1, 2, 3)) / error)).mean()


def _separation_task(make_optimizer, net: nn.Module | None = None, loss=mask_loss, batch: int = 16,
                     rows: int = 2400):  # fmt: skip
    mix, tone = mixtures(rows, 0)
    vmix, vtone = mixtures(300, 1)
    model = Task(net if net is not None else MaskNet(), loss, make_optimizer)
    return model, loader(mix, tone, batch=batch), loader(vmix, vtone, batch=300, shuffle=False)


# ------------------------------------------------------------------------------------------------ brackets
MAX_LEN = 24
VOCAB = {"[": 1, "]": 2}  # 0 pads, 3 is <unk>
UNK = 3


def _dyck_word(length: int, g: torch.Generator) -> str:
    """A uniformly-ish random balanced word of ``length`` (even) brackets: a random walk kept >= 0 that must
    return to 0."""
    depth, out = 0, []
    for i in range(length):
        left = length - i
        p_open = 0.0 if depth >= left else (1.0 if depth == 0 else 0.5)
        if float(torch.rand(1, generator=g)) < p_open:
            out.append("(")
            depth += 1
        else:
            out.append(")")
            depth -= 1
    return "".join(out)


def _balanced(word: str) -> bool:
    depth = 0
    for c in word:
        depth += 1 if c == "(" else -1
        if depth < 0:
            return False
    return depth == 0


@functools.cache
def bracket_words(rows: int, seed: int) -> tuple[tuple[str, ...], Tensor]:
    """``rows`` words of 2-24 round brackets, half balanced (Dyck words); the others near misses of the same
    lengths: a balanced word with one bracket flipped (the counts differ) or rotated (the counts match, a
    prefix closes more than it opens). Returns the words and their labels (1: balanced)."""
    g = _gen(seed)
    words, labels = [], []
    for _ in range(rows):
        length = 2 * int(torch.randint(1, MAX_LEN // 2 + 1, (1,), generator=g))
        word = _dyck_word(length, g)
        if float(torch.rand(1, generator=g)) < 0.5:
            words.append(word)
            labels.append(1.0)
            continue
        if float(torch.rand(1, generator=g)) < 0.5:
            i = int(torch.randint(0, length, (1,), generator=g))
            word = word[:i] + (")" if word[i] == "(" else "(") + word[i + 1 :]
        else:
            shift = 1 + int(torch.randint(0, length - 1, (1,), generator=g))
            word = word[shift:] + word[:shift]
            if _balanced(word):
                word = ")" + word[1:-1] + "("
        words.append(word)
        labels.append(0.0)
    return tuple(words), torch.tensor(labels)


def encode(words: tuple[str, ...], vocab: dict[str, int]) -> tuple[Tensor, Tensor]:
    """Token ids padded with 0 to 24 ``(rows, 24)`` (characters not in ``vocab``: ``UNK``) and lengths."""
    ids = torch.zeros(len(words), MAX_LEN, dtype=torch.long)
    for i, w in enumerate(words):
        ids[i, : len(w)] = torch.tensor([vocab.get(c, UNK) for c in w])
    return ids, torch.tensor([len(w) for w in words])


def bracket_loss(net: nn.Module, batch) -> Tensor:
    tokens, lengths, y = batch
    return F.binary_cross_entropy_with_logits(net(tokens, lengths), y)


def _bracket_task(make_optimizer, vocab: dict[str, int] | None = None, batch: int = 32, rows: int = 4000):
    """Balanced-bracket recognition: ``rows`` training words (500 validate), encoded with ``vocab`` (the
    round brackets unless given), a recurrent classifier over packed sequences."""
    vocab = vocab if vocab is not None else {"(": 1, ")": 2}
    words, y = bracket_words(rows, 0)
    vwords, vy = bracket_words(500, 1)
    model = Task(BracketRNN(), bracket_loss, make_optimizer)
    return (model, loader(*encode(words, vocab), y, batch=batch),
            loader(*encode(vwords, vocab), vy, batch=500, shuffle=False))  # fmt: skip


# ------------------------------------------------------------------------------------------------ tomography
SIDE, ANGLES, BINS = 16, 12, 24


@functools.cache
def projector() -> Tensor:
    """The parallel-beam projection matrix ``(12 * 24, 16 * 16)``: for each of 12 angles over 180 degrees,
    each pixel's value split between the two detector bins nearest its centre's projection (pixel-driven)."""
    c = torch.arange(SIDE) - (SIDE - 1) / 2
    yy, xx = torch.meshgrid(c, c, indexing="ij")
    rows = []
    for a in torch.arange(ANGLES) * math.pi / ANGLES:
        s = xx.flatten() * torch.cos(a) + yy.flatten() * torch.sin(a) + (BINS - 1) / 2
        lo = s.floor().long().clamp(0, BINS - 2)
        frac = (s - lo).clamp(0, 1)
        m = torch.zeros(BINS, SIDE * SIDE)
        m[lo, torch.arange(SIDE * SIDE)] += 1 - frac
        m[lo + 1, torch.arange(SIDE * SIDE)] += frac
        rows.append(m)
    return torch.cat(rows)


@functools.cache
def phantoms(rows: int, seed: int) -> tuple[Tensor, Tensor]:
    """``rows`` phantoms ``(rows, 16, 16)`` of one to three random ellipses of densities 0.3-1 inside a
    disc, and their sinograms ``(rows, 12, 24)`` with 5% detector noise, scaled by 1/16."""
    g = _gen(seed)
    c = torch.arange(SIDE) - (SIDE - 1) / 2
    yy, xx = torch.meshgrid(c, c, indexing="ij")
    image = torch.zeros(rows, SIDE, SIDE)
    for k in range(3):
        present = (torch.rand(rows, 1, 1, generator=g) < (1.0 if k == 0 else 0.6)).float()
        cx, cy = ((torch.rand(rows, 2, 1, 1, generator=g) - 0.5) * 8).unbind(1)
        ax, ay = (1.5 + 3.5 * torch.rand(rows, 2, 1, 1, generator=g)).unbind(1)
        th = torch.rand(rows, 1, 1, generator=g) * math.pi
        u = (xx - cx) * torch.cos(th) + (yy - cy) * torch.sin(th)
        v = -(xx - cx) * torch.sin(th) + (yy - cy) * torch.cos(th)
        density = 0.3 + 0.7 * torch.rand(rows, 1, 1, generator=g)
        image = image + present * density * ((u / ax) ** 2 + (v / ay) ** 2 <= 1).float()
    sino = (projector() @ image.flatten(1).T).T / SIDE
    sino = sino + 0.05 * sino.std() * torch.randn(sino.shape, generator=g)
    return sino.view(rows, ANGLES, BINS), image


def _tomo_task(make_optimizer, schedule=None, net: nn.Module | None = None, rows: int = 2400):
    """Reconstruction (MSE per pixel) from sinograms: ``rows`` training phantoms, 400 validate; a learned
    back-projection and a residual CNN."""
    sino, image = phantoms(rows, 0)
    vsino, vimage = phantoms(400, 1)
    model = Task(net if net is not None else TomoNet(ANGLES * BINS, SIDE), mse, make_optimizer, schedule)
    return model, loader(sino, image, batch=32), loader(vsino, vimage, batch=400, shuffle=False)


# ----------------------------------------------------------------------------------------------- light curves
OBS, TELESCOPES = 40, 200
SECONDS = 86400.0  # a day, in the units of the archive whose times were left unconverted


@functools.cache
def light_curves(rows: int, seed: int, weights: tuple[float, ...] = (1 / 3, 1 / 3, 1 / 3)):
    """``rows`` light curves of 12-40 observations at irregular times over 100 days ``(rows, 40)`` (times,
    magnitudes, zero-padded), their masks and telescopes ``(rows, 40)``, and the class (drawn with
    ``weights``): 0 a pulsator (a 0.2-20 day period, 0.2-0.8 mag sawtooth), 1 an eclipsing binary (flat,
    0.3-1 mag dips over 8% of a 1-10 day period), 2 a flare star (flat, flares brightening it by 0.3-1.5
    mag and decaying in a day). Magnitudes around 14-18, 0.03 mag noise (cached: callers copy)."""
    g = _gen(seed)
    label = torch.multinomial(torch.tensor(weights), rows, replacement=True, generator=g)
    count = torch.randint(12, OBS + 1, (rows,), generator=g)
    mask = (torch.arange(OBS) < count.unsqueeze(1)).float()
    t = torch.sort(torch.rand(rows, OBS, generator=g) * 100, 1).values
    t = torch.where(mask.bool(), t, torch.full_like(t, 100.0))
    period = torch.exp(torch.empty(rows, 1).uniform_(math.log(0.2), math.log(20), generator=g))
    phase = torch.frac(t / period + torch.rand(rows, 1, generator=g))
    amp = 0.2 + 0.6 * torch.rand(rows, 1, generator=g)
    pulsator = amp * (phase - 0.5)
    eb_period = 1 + 9 * torch.rand(rows, 1, generator=g)
    eb_phase = torch.frac(t / eb_period + torch.rand(rows, 1, generator=g))
    depth = 0.3 + 0.7 * torch.rand(rows, 1, generator=g)
    eclipse = depth * (eb_phase < 0.08).float()
    starts = torch.rand(rows, 4, generator=g) * 100
    heights = (0.3 + 1.2 * torch.rand(rows, 4, generator=g)) * (torch.rand(rows, 4, generator=g) < 0.7)
    since = t.unsqueeze(-1) - starts.unsqueeze(1)
    flare = -(heights.unsqueeze(1) * torch.exp(-since.clamp_min(0)) * (since >= 0)).sum(-1)
    signal = torch.stack([pulsator, eclipse, flare], 1).gather(1, label.view(-1, 1, 1).expand(-1, 1, OBS))
    base = 14 + 4 * torch.rand(rows, 1, generator=g)
    mag = (base + signal.squeeze(1) + 0.03 * torch.randn(rows, OBS, generator=g)) * mask
    scope = torch.randint(0, TELESCOPES, (rows, 1), generator=g).expand(-1, OBS).clone()
    return t * mask, mag, mask, scope, label


def curve_features(t: Tensor, mag: Tensor, mask: Tensor) -> Tensor:
    """Per observation: the time since the previous one (days / 10), the magnitude less the curve's median
    and the phase of the curve (0-1): ``(rows, 40, 3)``."""
    dt = torch.diff(t, dim=1, prepend=t[:, :1]) / 10
    masked = torch.where(mask.bool(), mag, torch.full_like(mag, float("nan")))
    centre = masked.nanmedian(1, keepdim=True).values
    return torch.stack([dt, (mag - centre) * mask, t / 100], -1) * mask.unsqueeze(-1)


def curve_loss(net: nn.Module, batch) -> Tensor:
    x, mask, y = batch[0], batch[1], batch[-1]
    scope = batch[2] if len(batch) == 4 else None
    return F.cross_entropy(net(x, mask, scope), y)


def _curves_task(make_optimizer, net: nn.Module | None = None, weights=(1 / 3, 1 / 3, 1 / 3),
                 in_seconds: int = 0, telescopes: bool = False, batch: int = 32,
                 min_obs: int = 0):  # fmt: skip
    """Variable-star classification: 2,400 training curves (``in_seconds``: that many of them with their
    times in seconds, not days; ``min_obs``: only the curves with at least that many observations), 600
    validate; a masked deep set."""
    t, mag, mask, scope, y = (v.clone() for v in light_curves(2400, 0, weights))
    if min_obs:
        keep = mask.sum(1) >= min_obs
        t, mag, mask, scope, y = t[keep], mag[keep], mask[keep], scope[keep], y[keep]
    if in_seconds:
        t[list(SECONDS_ROWS[:in_seconds])] *= SECONDS
    vt, vmag, vmask, vscope, vy = light_curves(600, 1, weights)
    x, vx = curve_features(t, mag, mask), curve_features(vt, vmag, vmask)
    net = net if net is not None else LightCurveSet(telescopes=TELESCOPES if telescopes else 0)
    model = Task(net, curve_loss, make_optimizer)
    extra, vextra = ((scope,), (vscope,)) if telescopes else ((), ())
    return (model, loader(x, mask, *extra, y, batch=batch),
            loader(vx, vmask, *vextra, vy, batch=600, shuffle=False))  # fmt: skip


# ------------------------------------------------------------------------------------------------ problems
def stereo_saturated(saturated: bool = True):
    """Stereo, AdamW ``2e-3`` with AMSGrad; three scanlines where the sky saturated both sensors (constant
    255) are standardised by their standard deviation, 0: 0/0 inputs."""
    return _stereo_task(lambda p: AdamW(p, lr=2e-3, amsgrad=True), saturated=saturated)


WARMUP = 50


def _warm_nesterov(optimizer):
    return ChainedScheduler([LinearLR(optimizer, 0.01, 1.0, WARMUP), ExponentialLR(optimizer, 0.995)])


def stereo_nesterov(lr: float = 5.0):
    """Stereo, SGD with Nesterov momentum 0.9 at ``5.0`` (meant ``2e-2``) under a ChainedScheduler of a
    50-step LinearLR warm-up from 1% and an ExponentialLR(0.995): even 1% of it is too high."""
    return _stereo_task(lambda p: SGD(p, lr=lr, momentum=0.9, nesterov=True), schedule=_warm_nesterov)


def brackets_square_vocab(vocab: dict[str, int] = VOCAB):
    """Brackets, an LSTM, RAdam ``1e-2``; the words are encoded with the vocabulary of the square-bracket
    recipe it came from (``{"[": 1, "]": 2}``), so every round bracket is ``<unk>``: only the length is
    left."""
    return _bracket_task(lambda p: RAdam(p, lr=1e-2), vocab=vocab)


def brackets_adagrad(lr: float = 1e-5):
    """Brackets, an LSTM, Adagrad at ``1e-5`` (meant ``0.1``)."""
    return _bracket_task(lambda p: Adagrad(p, lr=lr))


def tomo_uncapped_warmup(capped: bool = False):
    """Tomography, RAdam ``1e-2`` under a LambdaLR warm-up ``(step + 1) / 10`` left without its
    ``min(1, ...)``: the LR keeps rising, 30x its peak by step 300."""

    def warm(step: int) -> float:
        return min(1.0, (step + 1) / 10) if capped else (step + 1) / 10

    return _tomo_task(lambda p: RAdam(p, lr=1e-2), schedule=lambda o: LambdaLR(o, warm))


def tomo_zero_branch(everything: bool = True):
    """Tomography, RAdam ``2e-3``; the residual refinement zero-initialised in every layer (meant its last
    convolution only, the usual residual trick): no gradient reaches any of its weights."""
    net = TomoNet(ANGLES * BINS, SIDE)
    for i, m in enumerate(net.refine):
        if isinstance(m, nn.Conv2d) and (everything or i == len(net.refine) - 1):
            nn.init.zeros_(m.weight)
            nn.init.zeros_(m.bias)
    return _tomo_task(lambda p: RAdam(p, lr=2e-3), net=net)


EPOCH_STEPS = 75  # 2,400 phantoms in batches of 32


def tomo_polynomial(total_iters: int = EPOCH_STEPS):
    """Tomography, RAdam ``2e-3`` under PolynomialLR(power=2) stepped per step with ``total_iters =
    len(train_loader)`` (one epoch's steps, meant the whole run's 300): the LR reaches 0 at step 75."""
    return _tomo_task(lambda p: RAdam(p, lr=2e-3),
                      schedule=lambda o: PolynomialLR(o, total_iters=total_iters, power=2.0))  # fmt: skip


def separation_frozen_encoder(frozen: bool = True):
    """Separation, AdamW ``3e-3``; the encoder is frozen (``requires_grad_(False)``, from the fine-tuning
    recipe whose pretrained checkpoint is never loaded here): only the 1x1 head learns, on random
    features."""
    net = MaskNet()
    net.encoder.requires_grad_(not frozen)
    return _separation_task(lambda p: AdamW([q for q in p if q.requires_grad], lr=3e-3), net)


def separation_rounded_mask(binarise: bool = True):
    """Separation, Adam ``3e-3``; the mask is rounded to 0/1 inside ``forward`` (an ideal binary mask, meant
    at inference only): ``torch.round`` passes a zero gradient."""
    return _separation_task(lambda p: Adam(p, lr=3e-3), MaskNet(binarise=binarise))


def curves_deep_tanh(depth: int = 14):
    """Light curves, ``phi`` a ``depth``-layer tanh MLP of width 32 at PyTorch's default init (no
    normalisation, no skips), SGD ``0.05`` with momentum 0.9."""
    phi = MLP([3] + [32] * depth, act=nn.Tanh)
    return _curves_task(lambda p: SGD(p, lr=0.05, momentum=0.9), LightCurveSet(phi=phi))


class CurveList(Dataset):
    """Light curves as a list of variable-length ``(times, magnitudes)`` (as read from the survey's files),
    and their classes."""

    def __init__(self, t: Tensor, mag: Tensor, mask: Tensor, y: Tensor) -> None:
        n = mask.sum(1).long()
        self.curves = [(t[i, : n[i]], mag[i, : n[i]]) for i in range(len(y))]
        self.y = y

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, i: int):
        return (*self.curves[i], self.y[i])


def collate_curves(items, dataset: CurveList | None = None, zero_point: float = 0.0):
    """Pads a batch of curves to 40 observations and makes their features; ``dataset``: the survey's zero
    point (the median of the curves' medians over all of ``dataset``) is recomputed for every batch (meant
    once, as ``zero_point``)."""
    if dataset is not None:
        zero_point = statistics.median(float(mags.median()) for _, mags in dataset.curves)
    t = torch.zeros(len(items), OBS)
    mag = torch.zeros(len(items), OBS)
    mask = torch.zeros(len(items), OBS)
    for i, (ti, mi, _) in enumerate(items):
        t[i, : len(ti)], mag[i, : len(mi)], mask[i, : len(ti)] = ti, mi - zero_point, 1.0
    y = torch.stack([item[2] for item in items])
    return curve_features(t, mag, mask), mask, y


def curves_zero_point_per_batch(per_batch: bool = True):
    """Light curves from a list Dataset whose ``collate_fn`` recomputes the survey's zero point over the
    whole training set for every batch (meant once), AdamW ``3e-3``, batches of 16."""
    model, _, val = _curves_task(lambda p: AdamW(p, lr=3e-3))
    t, mag, mask, _, y = light_curves(2400, 0)
    data = CurveList(t, mag, mask, y)
    zero_point = statistics.median(float(mags.median()) for _, mags in data.curves)
    collate = (functools.partial(collate_curves, dataset=data) if per_batch
               else functools.partial(collate_curves, zero_point=zero_point))  # fmt: skip
    return model, DataLoader(data, batch_size=16, shuffle=True, generator=_gen(0), collate_fn=collate), val


QUALITY_CUT = 38


def curves_quality_cut(min_obs: int = QUALITY_CUT):
    """Light curves kept only with at least 38 observations (a quality cut meant at 18): ~250 of 2,400
    curves train a width-128 deep set, AdamW ``3e-3``, batches of 128 (two steps an epoch)."""
    return _curves_task(lambda p: AdamW(p, lr=3e-3), LightCurveSet(width=128), min_obs=min_obs, batch=128)


SECONDS_ROWS = (5, 400, 900, 1300, 1750, 2200)  # curves from the archive that counts time in seconds


def curves_times_in_seconds(count: int = len(SECONDS_ROWS)):
    """Light curves, AdamW ``3e-3``; six curves merged from a second archive keep its times in seconds since
    the first observation (meant converted to days): their time features are 86,400x the others'."""
    return _curves_task(lambda p: AdamW(p, lr=3e-3), in_seconds=count)


# ------------------------------------------------------------------------------------------------ healthy
def stereo_bf16_value_clip():
    """Stereo, AdamW ``2e-3`` with AMSGrad (trained under ``precision="bf16-mixed"`` with value clipping)."""
    return stereo_saturated(saturated=False)


def stereo_nesterov_high_lr():
    """Stereo, SGD with Nesterov momentum at ``2e-2`` (high, as stereo recipes run it) under the chained
    warm-up and decay."""
    return stereo_nesterov(lr=2e-2)


def brackets_batch_8():
    """Brackets, an LSTM over packed sequences, RAdam ``1e-2`` on batches of 8."""
    return _bracket_task(lambda p: RAdam(p, lr=1e-2), batch=8)


def brackets_sgd_plateau():
    """Brackets, an LSTM, plain SGD ``1.0``: it sits at ln 2 while the LSTM finds the depth counter, then
    drops."""
    return _bracket_task(lambda p: SGD(p, lr=1.0))


def tomo_warm_restarts():
    """Tomography, SGD ``0.5`` with momentum 0.9 under CosineAnnealingWarmRestarts(T_0=50, T_mult=2): the LR
    jumps back to its peak at steps 50 and 150."""
    return _tomo_task(lambda p: SGD(p, lr=0.5, momentum=0.9),
                      schedule=lambda o: CosineAnnealingWarmRestarts(o, T_0=50, T_mult=2))  # fmt: skip


def tomo_heavy_decay():
    """Tomography, AdamW ``2e-3`` with decoupled ``weight_decay=0.5`` (strong shrinkage toward zero)."""
    return _tomo_task(lambda p: AdamW(p, lr=2e-3, weight_decay=0.5))


def separation_snr():
    """Separation on minus the SNR in dB (a loss below zero), AdamW ``3e-3``."""
    return _separation_task(lambda p: AdamW(p, lr=3e-3), loss=snr_loss)


def separation_accumulated():
    """Separation, Adagrad ``0.05``, batches of 4 accumulated 4 at a time (``accumulate_grad_batches=4``)."""
    return _separation_task(lambda p: Adagrad(p, lr=0.05), batch=4)


IMBALANCE = (0.9, 0.05, 0.05)


def curves_imbalanced():
    """Light curves, 90% pulsators and 5% each of eclipsing binaries and flare stars (in training and
    validation), AdamW ``3e-3``."""
    return _curves_task(lambda p: AdamW(p, lr=3e-3), weights=IMBALANCE)


def curves_telescope_embedding():
    """Light curves with a learned embedding of the telescope (200 of them), AdamW ``3e-3``: a batch touches
    ~32 of its rows."""
    return _curves_task(lambda p: AdamW(p, lr=3e-3), telescopes=True)
