"""Sealed gallery ZV1's data (half ``zv1``): small seeded synthetic sets (one-hot DNA windows bound where a
transcription factor's site lies on either strand, galaxies' magnitudes in five bands with their redshift,
every tic-tac-toe position with the moves a perfect player would make, motor policies with their exposure,
claims and true pure premium, piecewise-constant signals smeared by a known motion blur). Every builder is
deterministic (its own generator); random augmentation at read time draws from the global RNG."""

from __future__ import annotations

import math
from functools import cache

import torch
import torch.nn.functional as F
from torch.utils.data import Dataset

from galleries.sealed import gen as _gen
from galleries.sealed import loaders

__all__ = ["Rows", "loaders"]


class Rows(Dataset):
    """Rows of equally long tensors, read as a tuple (a lone tensor as itself), passed through ``transform``
    (called with the row's parts) on every read when one is given."""

    def __init__(self, *tensors: torch.Tensor, transform=None) -> None:
        self.tensors, self.transform = tensors, transform

    def __len__(self) -> int:
        return len(self.tensors[0])

    def __getitem__(self, i: int):
        row = tuple(t[i] for t in self.tensors)
        if self.transform is not None:
            return self.transform(*row)
        return row if len(row) > 1 else row[0]


# --- DNA binding sites: one-hot windows (length, 4) in ACGT order -------------------------------------------
BASES, LENGTH = "ACGT", 60
MOTIF = torch.tensor(["ACGT".index(b) for b in "GATAAGGC"])  # the factor's site (not a palindrome)


def complement(seq: torch.Tensor) -> torch.Tensor:
    """A <-> T and C <-> G on base indices in ACGT order."""
    return 3 - seq


SITES = {  # the site on each strand, and its two mirror images (reversed only, complemented only), not bound
    "forward": MOTIF,
    "reverse_strand": complement(MOTIF).flip(0),
    "reversed": MOTIF.flip(0),
    "complemented": complement(MOTIF),
}


def _holds(seq: torch.Tensor, site: torch.Tensor) -> torch.Tensor:
    return (seq.unfold(1, len(site), 1) == site).all(-1).any(-1)


def scan_both_strands(seq: torch.Tensor) -> torch.Tensor:
    """Bound (1.0) where the site lies on either strand: the forward site or its reverse complement."""
    return (_holds(seq, SITES["forward"]) | _holds(seq, SITES["reverse_strand"])).float()


def scan_forward_strand(seq: torch.Tensor) -> torch.Tensor:
    """Bound only where the forward site is read on the given strand (``str.find(motif)``)."""
    return _holds(seq, SITES["forward"]).float()


def sequences(n: int, seed: int, scan=scan_both_strands) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` random 60-base windows: half carry the site (forward or on the reverse strand, one each), a
    quarter carry one of its mirror images (a near-miss that is not bound), a quarter nothing; one-hot (n,
    60, 4) and the label ``scan`` reads off the bases."""
    g = _gen(seed)
    seq = torch.randint(4, (n, LENGTH), generator=g)
    kind = torch.randint(8, (n,), generator=g)
    names = ("forward", "forward", "reverse_strand", "reverse_strand", "reversed", "complemented")
    at = torch.randint(LENGTH - len(MOTIF) + 1, (n,), generator=g)
    for i in range(n):
        if int(kind[i]) < len(names):
            seq[i, int(at[i]) : int(at[i]) + len(MOTIF)] = SITES[names[int(kind[i])]]
    return F.one_hot(seq, 4).float(), scan(seq)


def reverse_complement(x: torch.Tensor) -> torch.Tensor:
    """The other strand of a (length, 4) one-hot window in ACGT order: read backwards, each base complemented
    (flipping the base axis swaps A <-> T and C <-> G)."""
    return x.flip(-2).flip(-1)


def rc_half(x: torch.Tensor, label: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The window or, half the time, its reverse complement (the same binding, read on the other strand)."""
    return (reverse_complement(x) if torch.rand(()) < 0.5 else x), label


def reverse_half(x: torch.Tensor, label: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The window or, half the time, the window read backwards along its length (not complemented)."""
    return (x.flip(-2) if torch.rand(()) < 0.5 else x), label


# --- photometric redshift: AB magnitudes in u, g, r, i, z ---------------------------------------------------
BANDS = torch.tensor([355.0, 469.0, 617.0, 748.0, 893.0])  # the filters' centres (nm)
Z_MIN, Z_MAX = 0.05, 1.0


def galaxies(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``n`` galaxies of redshift 0.05..1.0 and a random type (red: steep continuum and a strong 4000 A
    break; blue: flat and weak), their five observed magnitudes (brightness 17.5..22.5) with noise growing
    towards faint bands, the redshift and each magnitude's error (n, 5)."""
    g = _gen(seed)
    z = Z_MIN + (Z_MAX - Z_MIN) * torch.rand(n, 1, generator=g)
    kind = torch.rand(n, 1, generator=g)
    bright = 17.5 + 5 * torch.rand(n, 1, generator=g)
    rest = BANDS / (1 + z)
    slope = -(0.5 + 2.0 * kind) * torch.log(rest / 600)
    brk = (0.3 + 1.4 * kind) * torch.sigmoid((400 - rest) / 15)
    mags = bright + slope + brk
    error = 0.02 + 0.06 * 10 ** (0.4 * (mags - 23))
    return mags + error * torch.randn(n, 5, generator=g), z[:, 0], error


def sorted_catalogue(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A spectroscopic catalogue of ``n`` galaxies as it comes: in order of increasing redshift."""
    mags, z, error = galaxies(n, seed)
    order = z.argsort()
    return mags[order], z[order], error[order]


def renoise(mags: torch.Tensor, z: torch.Tensor, error: torch.Tensor):
    """A fresh draw of the photometric noise on every read (each magnitude moved by its own error)."""
    return mags + error * torch.randn_like(mags), z, error


# --- tic-tac-toe: every position where someone is to move, with the moves a perfect player makes ------------
LINES = ((0, 1, 2), (3, 4, 5), (6, 7, 8), (0, 3, 6), (1, 4, 7), (2, 5, 8), (0, 4, 8), (2, 4, 6))


def _won(board: tuple[int, ...], who: int) -> bool:
    return any(all(board[i] == who for i in line) for line in LINES)


def _to_move(board: tuple[int, ...]) -> int:
    return 1 if sum(board) == 0 else -1  # X (1) opens; boards hold 1 (X), -1 (O), 0 (empty)


@cache
def _value(board: tuple[int, ...]) -> int:
    """The game's value for the side to move under perfect play: a win is worth more the sooner it comes
    (1 + the empty cells left), a loss less the later it comes, a draw 0."""
    side = _to_move(board)
    if _won(board, -side):
        return -(1 + board.count(0))
    if 0 not in board:
        return 0
    return max(-_value(_play(board, move, side)) for move in range(9) if board[move] == 0)


def _play(board: tuple[int, ...], move: int, side: int) -> tuple[int, ...]:
    return (*board[:move], side, *board[move + 1 :])


@cache
def _positions() -> list[tuple[int, ...]]:
    seen: set[tuple[int, ...]] = set()
    todo = [(0,) * 9]
    while todo:
        board = todo.pop()
        if board in seen or _won(board, 1) or _won(board, -1) or 0 not in board:
            continue
        seen.add(board)
        todo += [_play(board, move, _to_move(board)) for move in range(9) if board[move] == 0]
    return sorted(seen)


def move_scores(board: tuple[int, ...], root_for_x: bool = False) -> list[float]:
    """Each move's worth to the side to move (-inf where the cell is taken): minus the value of the position
    it leaves. With ``root_for_x`` the root ranks O's moves by the value they leave to X, as for X's own."""
    side = _to_move(board)
    sign = -1 if root_for_x and side == -1 else 1
    return [sign * -_value(_play(board, move, side)) if board[move] == 0 else -math.inf for move in range(9)]


def encode(boards: torch.Tensor) -> torch.Tensor:
    """Boards (n, 9) of 1 (X) / -1 (O) / 0 as the side to move sees them: its own stones, then the
    opponent's (n, 18)."""
    side = torch.where(boards.sum(-1, keepdim=True) == 0, 1, -1)
    return torch.cat([(boards == side).float(), (boards == -side).float()], -1)


PART_SIZES = {"train": 2800, "val": 600}  # the rest (1,120 positions) is held out


@cache
def _tictactoe(root_for_x: bool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    boards = torch.tensor(_positions())
    scores = torch.tensor([move_scores(b, root_for_x) for b in _positions()])
    best = scores == scores.max(-1, keepdim=True).values
    order = torch.randperm(len(boards), generator=_gen(0))
    return boards[order], scores.argmax(-1)[order], best[order].float()


def tictactoe(part: str, root_for_x: bool = False) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A fixed part (``train``: 2,800, ``val``: 600, ``test``: 1,120) of the 4,520 positions where someone
    is to move: the encoded board (n, 18), the expert's move (the first best one) and the mask of every best
    move (n, 9), all under perfect play (``root_for_x``: the expert picks O's moves as if it were X)."""
    boards, move, best = _tictactoe(root_for_x)
    start = {"train": 0, "val": PART_SIZES["train"], "test": sum(PART_SIZES.values())}[part]
    stop = {"train": PART_SIZES["train"], "val": sum(PART_SIZES.values()), "test": len(boards)}[part]
    return encode(boards[start:stop]), move[start:stop].clone(), best[start:stop].clone()


_CELLS = torch.arange(9).view(3, 3)


def _turn_cells(x: torch.Tensor, k: int) -> torch.Tensor:
    """The 9 cells of each plane of ``x`` (18,) turned by ``k`` quarter turns (torch.rot90's direction)."""
    return x.view(2, 3, 3).rot90(k, (-2, -1)).reshape(18)


def turn_move(move: torch.Tensor, k: int) -> torch.Tensor:
    """Where cell ``move`` lands when the board is turned by ``k`` quarter turns (as :func:`_turn_cells`)."""
    return (_CELLS.rot90(k).reshape(9) == move).nonzero()[0, 0]


def rotate(x: torch.Tensor, move: torch.Tensor, best: torch.Tensor):
    """The position turned by a random number of quarter turns, its moves turned with it."""
    k = int(torch.randint(4, ()))
    return _turn_cells(x, k), turn_move(move, k), best.view(3, 3).rot90(k).reshape(9)


def rotate_move_clockwise(x: torch.Tensor, move: torch.Tensor, best: torch.Tensor):
    """The position turned by ``rot90`` (counter-clockwise), the expert's move by a hand-written clockwise
    map: for a quarter or three-quarter turn the move lands on the cell opposite its own."""
    k = int(torch.randint(4, ()))
    return _turn_cells(x, k), turn_move(move, -k), best.view(3, 3).rot90(k).reshape(9)


# --- insurance claims: motor policies with exposure, claim count and amount ---------------------------------
FEATURES = 6


def policies(n: int, seed: int) -> tuple[torch.Tensor, ...]:
    """``n`` policies: features (n, 6) (driver age, vehicle power, density, three regions), the exposure (a
    tenth to a whole year), the number of claims (Poisson at the policy's yearly frequency, 0.2..2.5, times
    its exposure), their total amount (each claim gamma, shape 2, mean 5..20 hundred) and the true pure
    premium (frequency x mean severity, per year)."""
    g = _gen(seed)
    age, power, density = (2 * torch.rand(n, generator=g) - 1 for _ in range(3))
    region = torch.randint(3, (n,), generator=g)
    x = torch.cat([torch.stack([age, power, density], -1), F.one_hot(region, 3).float()], -1)
    frequency = torch.exp(
        -0.2 + 0.5 * density - 0.4 * age + 0.5 * age**2 + torch.tensor([0, 0.4, -0.4])[region]
    )
    severity = 10 * torch.exp(0.4 * power + 0.2 * density - 0.3 * age)  # in hundreds
    exposure = 0.1 + 0.9 * torch.rand(n, generator=g)
    count = torch.poisson(exposure * frequency, generator=g)
    # a gamma of shape 2 per claim: their sum is the sum of 2 x count unit exponentials, times mean / 2
    draws = -torch.log(torch.rand(n, 2 * int(count.max()), generator=g))
    amount = (draws * (torch.arange(draws.shape[1]) < 2 * count[:, None])).sum(-1) * severity / 2
    return x, exposure, count, amount, frequency * severity


def claim_rows(n: int, seed: int, per_year: bool = False, claimants_only: bool = False):
    """The rows a model trains on: (features, exposure, claim count, amount); the amount divided by the
    exposure with ``per_year``; only the policies with a claim with ``claimants_only``."""
    x, exposure, count, amount, _ = policies(n, seed)
    if per_year:
        amount = amount / exposure
    if claimants_only:
        keep = count > 0
        x, exposure, count, amount = x[keep], exposure[keep], count[keep], amount[keep]
    return x, exposure, count, amount


# --- 1-D deblurring: piecewise-constant signals, a known causal motion blur ---------------------------------
SIGNAL, KERNEL_TAPS, NOISE = 128, 12, 0.05
KERNEL = torch.exp(-torch.arange(KERNEL_TAPS).float() / 3)
KERNEL = KERNEL / KERNEL.sum()  # k[0] on the sample itself, then the trail behind it


def signals(n: int, seed: int) -> torch.Tensor:
    """``n`` piecewise-constant signals of 128 samples (3..7 steps of random level) plus a gentle slope;
    (n, 1, 128)."""
    g = _gen(seed)
    t = torch.arange(SIGNAL).float()
    out = 0.5 * torch.randn(n, 1, generator=g) * (t / SIGNAL - 0.5)
    for i in range(n):
        edges = torch.randint(SIGNAL, (int(torch.randint(3, 8, (), generator=g)),), generator=g)
        for edge in edges:
            out[i, int(edge) :] += torch.randn((), generator=g)
    return out[:, None]


def blur(clean: torch.Tensor) -> torch.Tensor:
    """The motion blur as the sensor applies it: y[n] = sum_j k[j] x[n - j] (a convolution: conv1d, which
    correlates, with the kernel flipped), the signal's first value held before its start."""
    padded = F.pad(clean, (KERNEL_TAPS - 1, 0), mode="replicate")
    return F.conv1d(padded, KERNEL.flip(0).view(1, 1, -1))


def blur_correlated(clean: torch.Tensor) -> torch.Tensor:
    """The blur as F.conv1d computes it with the kernel unflipped: y[n] = sum_j k[j] x[n + j], the trail
    ahead of each sample (a cross-correlation)."""
    padded = F.pad(clean, (0, KERNEL_TAPS - 1), mode="replicate")
    return F.conv1d(padded, KERNEL.view(1, 1, -1))


def degrade(clean: torch.Tensor, smear=blur, sigma: float = NOISE) -> tuple[torch.Tensor, torch.Tensor]:
    """The observed signal (blurred, then fresh white noise of ``sigma``) and the clean one."""
    observed = smear(clean[None])[0]
    return observed + sigma * torch.randn_like(observed), clean


def degrade_correlated(clean: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`degrade` with the blur simulated by :func:`blur_correlated`."""
    return degrade(clean, blur_correlated)


def degrade_any_noise(clean: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`degrade` with a noise level drawn per read (0.02..0.1)."""
    return degrade(clean, sigma=0.02 + 0.08 * float(torch.rand(())))


def observed_pairs(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` fixed (observed, clean) pairs with the true blur and noise."""
    clean = signals(n, seed)
    return blur(clean) + NOISE * torch.randn(clean.shape, generator=_gen(seed + 100)), clean
