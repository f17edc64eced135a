"""Builders of zoo 24's runs: each returns ``(model, train_loader, val_loader or None)``.

Problem runs take the knob that holds the bug, so a proof builds the healthy twin (the bug fixed) with the
same code. Data, all made in code from fixed seeds: DNA sequences with a planted binding site, five-band
galaxy photometry with its redshift, every tic-tac-toe position with its minimax move, motor-insurance
policies with their exposure and claim amounts, blurred noisy 1-D signals with their sharp originals.
"""

from __future__ import annotations

import functools
import math

import torch
from lightning.pytorch.callbacks import StochasticWeightAveraging
from torch import Tensor, nn
from torch.optim import LBFGS, SGD, Adagrad, Adam, RMSprop, Rprop
from torch.optim.lr_scheduler import CosineAnnealingLR, ExponentialLR, LinearLR, StepLR
from torch.utils.data import DataLoader, Dataset, TensorDataset

from galleries.health.zoo24._models import MLP, DeblurCNN, MotifCNN, Task, bce, masked_ce, mse, tweedie


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def loader(*tensors: Tensor, batch: int = 64, shuffle: bool = True, seed: int = 0) -> DataLoader:
    """A loader over ``tensors``; shuffled with its own generator (``seed``), so its order is fixed."""
    generator = _gen(seed) if shuffle else None
    return DataLoader(TensorDataset(*tensors), batch_size=batch, shuffle=shuffle, generator=generator)


# ------------------------------------------------------------------------------------------------ DNA
MOTIF = "TGACGTCA"  # the cAMP response element, bound by CREB
SEQ_LEN = 100


@functools.cache
def dna_sequences(rows: int, seed: int) -> tuple[tuple[str, ...], Tensor]:
    """``rows`` random DNA sequences of 100 bases (upper case) and their labels ``(N, 1)``: half of them hold
    the motif (each base mutated with probability 0.1) at a random position."""
    g = _gen(seed)
    bases = torch.randint(0, 4, (rows, SEQ_LEN), generator=g)
    bound = torch.rand(rows, generator=g) < 0.5
    motif = torch.tensor(["ACGT".index(b) for b in MOTIF])
    for row in bound.nonzero().flatten().tolist():
        at = int(torch.randint(0, SEQ_LEN - len(MOTIF) + 1, (1,), generator=g))
        site = torch.where(
            torch.rand(len(MOTIF), generator=g) < 0.1, torch.randint(0, 4, (len(MOTIF),), generator=g), motif
        )
        bases[row, at : at + len(MOTIF)] = site
    seqs = tuple("".join("ACGT"[i] for i in row) for row in bases.tolist())
    return seqs, bound.float().unsqueeze(1)


def one_hot(seqs: tuple[str, ...] | list[str], alphabet: str = "ACGT") -> Tensor:
    """One-hot ``(N, 4, L)`` of equal-length sequences; a letter outside ``alphabet`` (``N``, an ambiguity
    code) encodes as all zeros."""
    table = torch.full((256,), len(alphabet), dtype=torch.long)
    for i, letter in enumerate(alphabet):
        table[ord(letter)] = i
    codes = torch.frombuffer(bytearray("".join(seqs), "ascii"), dtype=torch.uint8).long()
    hot = torch.nn.functional.one_hot(table[codes], len(alphabet) + 1)[:, : len(alphabet)].float()
    return hot.view(len(seqs), -1, len(alphabet)).transpose(1, 2).contiguous()


# ------------------------------------------------------------------------------------------------ photo-z
BANDS = (3550.0, 4700.0, 6200.0, 7500.0, 8900.0)  # u g r i z, effective wavelengths in angstrom


@functools.cache
def photometry(rows: int, seed: int) -> tuple[Tensor, Tensor]:
    """Five-band magnitudes ``(N, 5)`` (u g r i z, ~17-26 mag) of galaxies and their redshift ``(N, 1)`` in
    ``[0.02, 2]``: a red continuum whose 4000 A break redshifts through the bands (a strong break for
    early types, a weak one for star-forming ones), an r magnitude that dims with distance, and photometric
    noise that grows for faint sources."""
    g = _gen(seed)
    z = 0.02 + 1.98 * torch.rand(rows, generator=g) ** 1.4
    kind = torch.rand(rows, generator=g)  # 0: elliptical, 1: starburst
    wave = torch.tensor(BANDS)
    rest = wave / (1 + z.unsqueeze(1))  # each band's rest-frame wavelength
    break_depth = 0.4 + 1.6 * (1 - kind).unsqueeze(1)
    sed = break_depth * torch.sigmoid((4000.0 - rest) / 250.0) + (0.8 - 0.6 * kind).unsqueeze(1) * (
        rest / 5000.0 - 1
    )
    r = 18.0 + 5 * torch.log10(1 + 3 * z) + 0.9 * torch.randn(rows, generator=g)
    mags = r.unsqueeze(1) + sed - sed[:, 2:3]
    noise = 0.02 + 0.03 * torch.exp((mags - 22.0).clamp(max=3.0))
    mags = mags + noise * torch.randn(rows, 5, generator=g)
    return mags, z.unsqueeze(1)


# ------------------------------------------------------------------------------------------------ tic-tac-toe
LINES = ((0, 1, 2), (3, 4, 5), (6, 7, 8), (0, 3, 6), (1, 4, 7), (2, 5, 8), (0, 4, 8), (2, 4, 6))
PREFERENCE = (4, 0, 2, 6, 8, 1, 3, 5, 7)  # ties between equally good moves: centre, corners, edges


def _won(board: tuple[int, ...]) -> bool:
    return any(board[a] != 0 and board[a] == board[b] == board[c] for a, b, c in LINES)


@functools.cache
def _negamax(board: tuple[int, ...], player: int) -> int:
    """The value of ``board`` for ``player`` to move: ``10 - pieces`` for a win (sooner is better), 0 for a
    draw."""
    empty = [i for i in range(9) if board[i] == 0]
    if not empty:
        return 0
    best = -100
    for i in empty:
        after = (*board[:i], player, *board[i + 1 :])
        value = 10 - sum(v != 0 for v in after) if _won(after) else -_negamax(after, -player)
        best = max(best, value)
    return best


def best_move(board: tuple[int, ...], player: int) -> int:
    def value(i: int) -> int:
        after = (*board[:i], player, *board[i + 1 :])
        return 10 - sum(v != 0 for v in after) if _won(after) else -_negamax(after, -player)

    return max((i for i in PREFERENCE if board[i] == 0), key=value)  # max keeps the first of the best


@functools.cache
def tictactoe() -> tuple[Tensor, Tensor, Tensor]:
    """Every position reachable in play with the game still open (X moves first): the board from the mover's
    side ``(N, 18)`` (the mover's pieces, the opponent's), the legal moves ``(N, 9)`` (bool) and the minimax
    move ``(N,)``, in a fixed shuffled order."""
    seen: dict[tuple[int, ...], int] = {}
    frontier = [(0,) * 9]
    while frontier:
        board = frontier.pop()
        if board in seen or _won(board) or all(board):
            continue
        player = 1 if sum(v != 0 for v in board) % 2 == 0 else -1
        seen[board] = player
        frontier += [(*board[:i], player, *board[i + 1 :]) for i in range(9) if board[i] == 0]
    boards = sorted(seen)
    b = torch.tensor(boards, dtype=torch.float32) * torch.tensor([seen[k] for k in boards]).unsqueeze(1)
    x = torch.cat([(b == 1).float(), (b == -1).float()], 1)
    legal = b == 0
    move = torch.tensor([best_move(k, seen[k]) for k in boards])
    order = torch.randperm(len(boards), generator=_gen(24))
    return x[order], legal[order], move[order]


# ------------------------------------------------------------------------------------------------ insurance
@functools.cache
def policies(rows: int, seed: int) -> tuple[Tensor, Tensor, Tensor]:
    """Motor policies: 10 standardised rating factors ``(N, 10)`` (driver age, vehicle age, bonus-malus,
    log density, power, four region indicators, a diesel flag), the exposure in years ``(N, 1)`` (0.1 to 1)
    and the year's claim amount in thousands ``(N, 1)``: a Poisson number of claims at a rate that depends on
    the factors (young drivers, a high bonus-malus, dense areas), each a gamma severity of mean ~1.8 k."""
    g = _gen(seed)
    age = 18 + 62 * torch.rand(rows, generator=g)
    vehicle = 15 * torch.rand(rows, generator=g)
    bonus = 50 + 100 * torch.rand(rows, generator=g) ** 2
    density = torch.randn(rows, generator=g)
    power = torch.randn(rows, generator=g)
    region = torch.nn.functional.one_hot(torch.randint(0, 4, (rows,), generator=g), 4).float()
    diesel = (torch.rand(rows, generator=g) < 0.4).float()
    log_rate = (
        -2.2 + 1.3 * torch.exp(-(age - 18) / 7) + 0.018 * (bonus - 80) + 0.3 * density - 0.04 * vehicle
        + region @ torch.tensor([0.0, 0.3, -0.3, 0.5]) + 0.2 * diesel
    )  # fmt: skip
    exposure = 0.1 + 0.9 * torch.rand(rows, generator=g)
    counts = torch.poisson(exposure * log_rate.exp(), generator=g)
    severity_mean = 1.5 * torch.exp(0.25 * power)
    shape = 2.0
    amounts = torch.zeros(rows)
    for row in counts.nonzero().flatten().tolist():
        n = int(counts[row])
        draws = torch._standard_gamma(torch.full((n,), shape), generator=g) * severity_mean[row] / shape
        amounts[row] = draws.sum()
    raw = torch.stack([age, vehicle, bonus, density, power], 1)
    x = torch.cat([(raw - raw.mean(0)) / raw.std(0), region, diesel.unsqueeze(1)], 1)
    return x, exposure.unsqueeze(1), amounts.unsqueeze(1)


# ------------------------------------------------------------------------------------------------ deblurring
SIGNAL_LEN = 64
BLUR_SIGMA = 2.0


def blur(clean: Tensor, sigma: float = BLUR_SIGMA) -> Tensor:
    """A Gaussian blur ``(N, 1, L)`` with reflected edges."""
    half = int(3 * sigma)
    t = torch.arange(-half, half + 1, dtype=torch.float32)
    kernel = torch.exp(-0.5 * (t / sigma) ** 2)
    kernel = (kernel / kernel.sum()).view(1, 1, -1)
    return torch.nn.functional.conv1d(torch.nn.functional.pad(clean, (half, half), mode="reflect"), kernel)


@functools.cache
def signals(rows: int, seed: int) -> tuple[Tensor, Tensor]:
    """Sharp 1-D signals ``(N, 1, 64)`` (two to four steps plus a smooth wave) and their Gaussian-blurred
    (sigma 2 samples) copies with noise of std 0.03: ``(blurred, sharp)``."""
    g = _gen(seed)
    pos = torch.arange(SIGNAL_LEN, dtype=torch.float32)
    clean = torch.zeros(rows, SIGNAL_LEN)
    for _ in range(4):
        at = torch.randint(4, SIGNAL_LEN - 4, (rows, 1), generator=g)
        height = torch.randn(rows, 1, generator=g) * (torch.rand(rows, 1, generator=g) < 0.75)
        clean += height * (pos >= at)
    freq = 0.05 + 0.15 * torch.rand(rows, 1, generator=g)
    phase = 2 * math.pi * torch.rand(rows, 1, generator=g)
    clean += 0.5 * torch.sin(freq * pos + phase)
    clean = (clean - clean.mean(1, keepdim=True)).unsqueeze(1)
    blurred = blur(clean) + 0.03 * torch.randn(clean.shape, generator=g)
    return blurred, clean


# ------------------------------------------------------------------------------------------------ tasks
def _dna_task(make_optimizer, net=None, encode=one_hot, batch: int = 64, schedule=None):
    seqs, y = dna_sequences(2000, 0)
    vseqs, vy = dna_sequences(500, 1)
    model = Task(net if net is not None else MotifCNN(), bce, make_optimizer, schedule)
    return model, loader(encode(seqs), y, batch=batch), loader(encode(vseqs), vy, batch=500, shuffle=False)


def _photoz_task(make_optimizer, net=None, standardise: bool = True, schedule=None, callbacks=(),
                 val_rows: int = 1000, batch: int = 64):  # fmt: skip
    x, z = photometry(4000, 0)
    vx, vz = photometry(1000, 1)
    if standardise:
        mu, sd = x.mean(0), x.std(0)
        x, vx = (x - mu) / sd, (vx - mu) / sd
    model = Task(net if net is not None else MLP([5, 64, 64, 1]), mse, make_optimizer, schedule,
                 callbacks=callbacks)  # fmt: skip
    return model, loader(x, z, batch=batch), loader(vx[:val_rows], vz[:val_rows], batch=1000, shuffle=False)


TTT_TRAIN = 3600  # of the 4520 positions; the other 920 validate


def _ttt_task(make_optimizer, net=None, rows: int = TTT_TRAIN, moves=None, schedule=None, batch: int = 64):
    x, legal, move = tictactoe()
    train_move = move[:rows] if moves is None else moves(x[:rows], legal[:rows], move[:rows])
    model = Task(net if net is not None else MLP([18, 128, 128, 9]), masked_ce, make_optimizer, schedule)
    train = loader(x[:rows], legal[:rows], train_move, batch=batch)
    val = loader(x[TTT_TRAIN:], legal[TTT_TRAIN:], move[TTT_TRAIN:], batch=920, shuffle=False)
    return model, train, val


def _insurance_task(make_optimizer, net=None, exposure=None, scale: float = 1.0, schedule=None,
                    batch: int = 128):  # fmt: skip
    x, e, a = policies(6000, 0)
    vx, ve, va = policies(2000, 1)
    if exposure is not None:
        e = exposure(e)
    if net is None:
        net = MLP([10, 32, 32, 1])
        torch.nn.init.constant_(net.head.bias, math.log(float(a.sum() / e.sum()) * scale))
    model = Task(net, tweedie, make_optimizer, schedule)
    return model, loader(x, e, a * scale, batch=batch), loader(vx, ve, va * scale, batch=2000, shuffle=False)


def _deblur_task(make_optimizer, net=None, schedule=None, dataset=None, batch: int = 32, interval="step"):
    b, c = signals(2000, 0)
    vb, vc = signals(250, 1)
    model = Task(net if net is not None else DeblurCNN(), mse, make_optimizer, schedule, interval)
    train = loader(b, c, batch=batch) if dataset is None else DataLoader(dataset, batch, shuffle=True,
                                                                         generator=_gen(0))  # fmt: skip
    return model, train, loader(vb, vc, batch=250, shuffle=False)


# ------------------------------------------------------------------------------------------------ problems
def dna_lowercase(lowercase: bool = True):
    """The binding-site CNN, Adam ``3e-3``; the sequences come from a FASTA written in lower case (a
    soft-masked export) and the encoder knows only ``ACGT``, so every base encodes as all zeros."""
    encode = (lambda seqs: one_hot([s.lower() for s in seqs])) if lowercase else one_hot
    return _dna_task(lambda net: Adam(net.parameters(), lr=3e-3), encode=encode)


def dna_amsgrad(lr: float = 3e-6):
    """The binding-site CNN, Adam with AMSGrad at ``3e-6`` (meant ``3e-3``: the exponent mistyped)."""
    return _dna_task(lambda net: Adam(net.parameters(), lr=lr, amsgrad=True))


def dna_head_only(whole_net: bool = False):
    """The binding-site CNN, Adam ``3e-3`` built from ``net.head.parameters()`` (copied from a fine-tuning
    script): the convolution filters get gradients and never move."""
    return _dna_task(lambda net: Adam((net if whole_net else net.head).parameters(), lr=3e-3))


ZERO_EXPOSURE_ROWS = (441, 453, 375)  # policies cancelled on their start date: exposure 0


def insurance_zero_exposure(keep: bool = True):
    """Pure premium, Adam with AMSGrad ``1e-3``; three policies cancelled on their start date have exposure 0
    and were kept, so their offset ``log(exposure)`` is ``-inf`` and their batches' Tweedie loss NaN."""

    def exposure(e: Tensor) -> Tensor:
        e = e.clone()
        if keep:
            e[list(ZERO_EXPOSURE_ROWS)] = 0.0
        return e

    return _insurance_task(lambda net: Adam(net.parameters(), lr=1e-3, amsgrad=True), exposure=exposure)


def insurance_sgd(lr: float = 5.0):
    """Pure premium, SGD momentum 0.9 at ``5.0`` (meant ``0.05``)."""
    return _insurance_task(lambda net: SGD(net.parameters(), lr=lr, momentum=0.9))


def ttt_few_positions(rows: int = 300):
    """Move prediction, a width-512 MLP on the first ``300`` of the 3600 training positions (a debug subset
    left in), Adam ``3e-3``, batches of 50 (six steps an epoch)."""
    return _ttt_task(lambda net: Adam(net.parameters(), lr=3e-3), MLP([18, 512, 512, 9]), rows, batch=50)


PHOTOZ_EPOCH = 63  # steps an epoch: 4000 galaxies in batches of 64
SWA_START = 3  # 1-based: SWA begins in the third epoch at the old LR; from the fourth (step 189) LR = swa_lrs


def photoz_swa(swa_lr: float = 1.0):
    """Photo-z, Adam ``1e-3``, StochasticWeightAveraging(swa_lrs=1.0, swa_epoch_start=3, annealing_epochs=1):
    ``swa_lrs`` is the LR itself, written 1.0 to mean "keep the LR as it is"."""
    swa = StochasticWeightAveraging(swa_lr, swa_epoch_start=SWA_START, annealing_epochs=1)
    return _photoz_task(lambda net: Adam(net.parameters(), lr=1e-3), callbacks=[swa])


def photoz_raw_magnitudes(standardise: bool = False):
    """Photo-z, a ReLU MLP on the raw magnitudes (the StandardScaler left out: every band ~17-26 mag),
    Adam ``1e-3``."""
    return _photoz_task(lambda net: Adam(net.parameters(), lr=1e-3), standardise=standardise)


def photoz_rmsprop(lr: float = 0.1):
    """Photo-z, RMSprop(centered=True) at ``0.1``: the LR of the SGD recipe it replaced (meant ``1e-3``)."""
    return _photoz_task(lambda net: RMSprop(net.parameters(), lr=lr, centered=True))


LINEAR_ITERS = 30  # LinearLR's total_iters, meant in epochs (57 steps each) and stepped per step


def ttt_linear_to_zero(total_iters: int = LINEAR_ITERS):
    """Move prediction, Adam ``3e-3`` under LinearLR(start_factor=1, end_factor=0, total_iters=30) meant
    over 30 epochs but stepped every step (``interval="step"``): the LR is 0 from step 30."""
    return _ttt_task(
        lambda net: Adam(net.parameters(), lr=3e-3), schedule=lambda o: LinearLR(o, 1.0, 0.0, total_iters)
    )


def photoz_deep_sigmoid(act: type[nn.Module] = nn.Sigmoid):
    """Photo-z, an MLP of six sigmoid hidden layers (width 64; a textbook architecture), SGD momentum 0.9 at
    ``0.03``."""
    net = MLP([5, 64, 64, 64, 64, 64, 64, 1], act=act)
    return _photoz_task(lambda n: SGD(n.parameters(), lr=0.03, momentum=0.9), net)


class BlurredSignals(Dataset):
    """Sharp signals blurred when read (the blur is the data set's transform) with fresh noise of std 0.03.
    ``whole_table``: ``__getitem__`` blurs the whole table and picks its row (meant: blur the one row)."""

    def __init__(self, sharp: Tensor, whole_table: bool) -> None:
        self.sharp, self.whole_table = sharp, whole_table

    def __len__(self) -> int:
        return len(self.sharp)

    def __getitem__(self, i: int) -> tuple[Tensor, Tensor]:
        blurred = blur(self.sharp)[i] if self.whole_table else blur(self.sharp[i : i + 1])[0]
        return blurred + 0.03 * torch.randn(blurred.shape), self.sharp[i]


def deblur_whole_table(whole_table: bool = True):
    """Deblurring, Adam ``1e-3``, the training signals blurred on the fly by :class:`BlurredSignals`, which
    blurs all 2000 signals for every item it returns."""
    _, sharp = signals(2000, 0)
    dataset = BlurredSignals(sharp, whole_table)
    return _deblur_task(lambda net: Adam(net.parameters(), lr=1e-3), dataset=dataset)


GLITCH_ROWS = (300, 1100, 1700)  # recordings with one sample at the converter's full scale


def deblur_glitches(glitched: bool = True):
    """Deblurring, Adam ``1e-3``; three training recordings carry an ADC glitch (one sample at full scale,
    80, ~100x the signals' std) in the sharp reference and so in its blurred copy."""
    blurred, sharp = signals(2000, 0)
    if glitched:
        sharp = sharp.clone()
        noise = blurred - blur(sharp)
        for row, at in zip(GLITCH_ROWS, (20, 40, 33)):
            sharp[row, 0, at] = 80.0
        blurred = blur(sharp) + noise
    vb, vs = signals(250, 1)
    model = Task(DeblurCNN(), mse, lambda net: Adam(net.parameters(), lr=1e-3))
    return model, loader(blurred, sharp, batch=32), loader(vb, vs, batch=250, shuffle=False)


# ------------------------------------------------------------------------------------------------ healthy
def dna_rprop_big_batches():
    """The binding-site CNN, Rprop (its default step sizes) on batches of 250: 8 steps an epoch."""
    return _dna_task(lambda net: Rprop(net.parameters(), lr=0.01), batch=250)


STEPLR_EVERY = 100


def dna_steplr():
    """The binding-site CNN, Adam ``1e-2`` under StepLR(step_size=100, gamma=0.2) stepped per step, as
    meant: the LR falls 5x at steps 100 and 200."""
    return _dna_task(
        lambda net: Adam(net.parameters(), lr=1e-2), schedule=lambda o: StepLR(o, STEPLR_EVERY, 0.2)
    )


def dna_known_motif_filters():
    """The binding-site CNN with its filters set from the known CRE site (filter 0 scores the motif, the
    rest random) and frozen on purpose; only the linear read-out trains, Adam ``5e-2``."""
    net = MotifCNN()
    with torch.no_grad():
        site = one_hot([MOTIF + "A"])[0]
        site[:, -1] = 0.0
        net.body.weight[0] = site - 0.25
        net.body.bias[0] = -4.0  # fires from 7 of the 8 bases on
    net.body.requires_grad_(False)
    return _dna_task(lambda n: Adam(n.head.parameters(), lr=5e-2), net)


LBFGS_STEPS = 30


def photoz_lbfgs():
    """Photo-z, LBFGS (strong Wolfe line search, at most 4 evaluations a step) on the whole training set as
    one batch: one optimizer step an epoch, several loss evaluations in each (Lightning's closure)."""
    return _photoz_task(
        lambda net: LBFGS(
            net.parameters(), lr=1.0, max_iter=4, history_size=20, line_search_fn="strong_wolfe"
        ),
        batch=4000,
    )


def photoz_swa_healthy():
    """Photo-z, Adam ``1e-3`` with StochasticWeightAveraging(swa_lrs=5e-4) from epoch 3: a constant, halved
    LR after the switch and the averaged weights at the end."""
    return photoz_swa(5e-4)


def photoz_tiny_val():
    """Photo-z, Adam ``1e-3``, validated on 16 galaxies only (every 20 steps): a jumpy validation loss."""
    return _photoz_task(lambda net: Adam(net.parameters(), lr=1e-3), val_rows=16)


DOLLARS = 1000.0


def insurance_dollars():
    """Pure premium in dollars (the k$ amounts times 1000), the read-out's bias started at the log of the
    claims per exposure year, Adam ``1e-3``; Tweedie losses ~45, gradients ~10, clipped by value (Trainer's
    ``gradient_clip_algorithm="value"``)."""
    return _insurance_task(lambda net: Adam(net.parameters(), lr=1e-3), scale=DOLLARS)


def insurance_sgd_weight_decay():
    """Pure premium, SGD momentum 0.9 at ``0.05`` with weight decay 0.05 (large: a ridge-like shrinkage for a
    noisy portfolio), ExponentialLR(0.995) stepped per step."""
    return _insurance_task(
        lambda net: SGD(net.parameters(), lr=0.05, momentum=0.9, weight_decay=0.05),
        schedule=lambda o: ExponentialLR(o, 0.995),
    )


NOISY_MOVES = 0.3


def ttt_noisy_moves():
    """Move prediction with 30% of the training moves replaced by a random legal move on purpose (the
    targets mix in an exploration policy; validation keeps the minimax moves), Adam ``3e-3``."""

    def noisy(x: Tensor, legal: Tensor, move: Tensor) -> Tensor:
        g = _gen(31)
        random_legal = torch.multinomial(legal.float(), 1, generator=g).squeeze(1)
        return torch.where(torch.rand(len(move), generator=g) < NOISY_MOVES, random_legal, move)

    return _ttt_task(lambda net: Adam(net.parameters(), lr=3e-3), moves=noisy)


def ttt_adagrad_decay():
    """Move prediction, Adagrad ``0.1`` with ``lr_decay=1e-2``: an effective LR that shrinks every step."""
    return _ttt_task(lambda net: Adagrad(net.parameters(), lr=0.1, lr_decay=1e-2))


def ttt_linear_decay_whole_run():
    """Move prediction, Adam ``3e-3`` under LinearLR(1 -> 0) over the run's 300 steps, as meant: the LR
    reaches 0 at the last step."""
    return ttt_linear_to_zero(300)


def deblur_cosine():
    """Deblurring, Adam ``2e-3`` under CosineAnnealingLR(T_max=300, eta_min=0): the LR fades to ~0."""
    return _deblur_task(
        lambda net: Adam(net.parameters(), lr=2e-3), schedule=lambda o: CosineAnnealingLR(o, 300)
    )


ACCUMULATE = 8
ACCUMULATE_STEPS = 50  # optimizer steps: 400 batches


def deblur_accumulated():
    """Deblurring, Adam ``2e-3`` on batches of 16 with ``accumulate_grad_batches=8`` (Trainer): one optimizer
    step every 8 batches (an effective batch of 128)."""
    return _deblur_task(lambda net: Adam(net.parameters(), lr=2e-3), batch=16)


def row_order(train: DataLoader) -> DataLoader:
    """A loader of the row indices that ``train`` (shuffled by :func:`loader`) yields, in its order: same
    batch size, same generator seed; iterated again, the next epoch's."""
    return DataLoader(range(len(train.dataset)), train.batch_size, shuffle=True, generator=_gen(0))
