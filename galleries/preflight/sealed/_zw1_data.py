"""Sealed gallery ZW1's data (half ``zw1``): small seeded synthetic sets (pairs of frames of a smooth texture
moved by a sub-pixel displacement, 4 x 4 mini-sudoku puzzles and their solutions, daily rainfall with many dry
days, captchas of 3 or 4 scikit-learn digits side by side, and European option quotes priced by
Black-Scholes). Every builder is deterministic (its own generator); random augmentation at read time draws
from the global RNG."""

from __future__ import annotations

import itertools
from functools import cache

import torch
import torch.nn.functional as F
from torch.utils.data import Dataset, WeightedRandomSampler

from galleries.sealed import digits, loaders
from galleries.sealed import gen as _gen

__all__ = ["Rows", "digits", "loaders"]


class Rows(Dataset):
    """Rows of equally long tensors (columns), each read through ``transform`` (its columns as arguments) if
    one is given; a single column without a transform is read as itself."""

    def __init__(self, *columns: torch.Tensor, transform=None) -> None:
        self.columns, self.transform = columns, transform

    def __len__(self) -> int:
        return len(self.columns[0])

    def __getitem__(self, i: int):
        row = tuple(column[i] for column in self.columns)
        if self.transform is not None:
            return self.transform(*row)
        return row[0] if len(row) == 1 else row


# --- optical flow: two frames of a smooth texture, the second moved by (dx, dy) -----------------------------
SIDE, TEXTURE, MAX_SHIFT = 16, 32, 2.5


def frame_pairs(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` pairs of 16 x 16 frames cut from the middle of a smooth random 32 x 32 texture (with a little
    sensor noise): in the second frame the texture has moved by (dx, dy) pixels, uniform in [-2.5, 2.5]
    (sub-pixel, bilinear); the pair (n, 2, 16, 16) and the displacement (n, 2) as (dx, dy), x to the right
    and y down."""
    g = _gen(seed)
    texture = F.interpolate(torch.randn(n, 1, 10, 10, generator=g), size=TEXTURE, mode="bicubic")
    shift = MAX_SHIFT * (2 * torch.rand(n, 2, generator=g) - 1)
    ys, xs = torch.meshgrid(torch.arange(SIDE).float(), torch.arange(SIDE).float(), indexing="ij")
    origin = (TEXTURE - SIDE) / 2

    def cut(dx: torch.Tensor, dy: torch.Tensor) -> torch.Tensor:
        # frame(x, y) = texture(x - dx, y - dy): the content moves by +d
        gx = (origin + xs - dx[:, None, None]) / (TEXTURE - 1) * 2 - 1
        gy = (origin + ys - dy[:, None, None]) / (TEXTURE - 1) * 2 - 1
        return F.grid_sample(texture, torch.stack([gx, gy], -1), align_corners=True)[:, 0]

    zero = torch.zeros(n)
    frames = torch.stack([cut(zero, zero), cut(shift[:, 0], shift[:, 1])], 1)
    return frames + 0.02 * torch.randn(frames.shape, generator=g), shift


def flip_and_negate(frames: torch.Tensor, shift: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Both frames mirrored left-right half the time, and the horizontal displacement negated with them."""
    if torch.rand(()) < 0.5:
        return frames.flip(-1), shift * torch.tensor([-1.0, 1.0])
    return frames, shift


def flip_frames(frames: torch.Tensor, shift: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Both frames mirrored left-right half the time (the image-classification flip: the target is kept)."""
    if torch.rand(()) < 0.5:
        return frames.flip(-1), shift
    return frames, shift


def swap_and_negate(frames: torch.Tensor, shift: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The two frames swapped half the time (played backwards), the displacement negated with them."""
    if torch.rand(()) < 0.5:
        return frames.flip(0), -shift
    return frames, shift


# --- 4 x 4 mini-sudoku --------------------------------------------------------------------------------------
CELLS, DIGITS = 16, 4
BOXES = [[r * 4 + c for r in rows for c in cols] for rows in ((0, 1), (2, 3)) for cols in ((0, 1), (2, 3))]
GROUPS = [[r * 4 + c for c in range(4)] for r in range(4)] + [[r * 4 + c for r in range(4)] for c in range(4)]
GROUPS += BOXES


@cache
def solutions() -> torch.Tensor:
    """All 288 completed 4 x 4 sudoku grids, digits 1..4, (288, 16)."""
    rows = list(itertools.permutations(range(1, 5)))
    found = []
    for grid in itertools.product(rows, repeat=4):
        flat = [v for row in grid for v in row]
        if all(len({flat[i] for i in group}) == 4 for group in GROUPS):
            found.append(flat)
    return torch.tensor(found)


def puzzles(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` puzzles: a random completed grid with 5..8 of its 16 cells blanked (0); the puzzle (n, 16) and
    the solution (n, 16), digits 1..4."""
    g = _gen(seed)
    solution = solutions()[torch.randint(len(solutions()), (n,), generator=g)]
    blanks = torch.randint(5, 9, (n, 1), generator=g)
    order = torch.rand(n, CELLS, generator=g).argsort(-1).argsort(-1)
    return torch.where(order < blanks, 0, solution), solution


def encode(puzzle: torch.Tensor, solution: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The puzzle and its solution as class indices 0..3 (digit - 1)."""
    return puzzle, solution - 1


def encode_mod4(puzzle: torch.Tensor, solution: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The puzzle and its solution as class indices by ``digit % 4`` (4 becomes class 0)."""
    return puzzle, solution % DIGITS


def _relabel(grid: torch.Tensor, perm: torch.Tensor) -> torch.Tensor:
    return torch.cat([torch.zeros(1, dtype=grid.dtype), perm + 1])[grid]


def relabel_digits(puzzle: torch.Tensor, solution: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """A random renaming of the four digits (a symmetry of sudoku) applied to the puzzle and its solution."""
    perm = torch.randperm(DIGITS)
    return encode(_relabel(puzzle, perm), _relabel(solution, perm))


def relabel_puzzle_only(puzzle: torch.Tensor, solution: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """A random renaming of the four digits, written as an input transform: the puzzle's only."""
    return encode(_relabel(puzzle, torch.randperm(DIGITS)), solution)


# --- zero-inflated daily rainfall (a hurdle model) ----------------------------------------------------------
FEATURES = 6
AMOUNT_SCALE = 5.0  # mm: the amounts' rough scale, used to weigh the amount loss against the rain loss


def rain_truth(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The chance of rain and the mean amount on a wet day (mm) for weather features ``x``."""
    logit = 1.3 * x[:, 0] - 0.9 * x[:, 1] + 0.6 * x[:, 2] * x[:, 3] - 1.4
    mean = torch.exp(1.4 + 0.3 * x[:, 0] + 0.4 * torch.tanh(2 * x[:, 4]) - 0.2 * x[:, 5])
    return torch.sigmoid(logit), mean


def rainfall(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` days: six standardised weather features and the day's rainfall (mm): 0 on a dry day (about two
    days in four), log-normal around the day's mean amount on a wet one."""
    g = _gen(seed)
    x = torch.randn(n, FEATURES, generator=g)
    p, mean = rain_truth(x)
    wet = torch.rand(n, generator=g) < p
    amount = mean * torch.exp(0.3 * torch.randn(n, generator=g) - 0.045)
    return x, torch.where(wet, amount, torch.zeros(n))


def balanced_sampler(amount: torch.Tensor) -> WeightedRandomSampler:
    """Draws wet and dry days equally often (each weighted by the inverse of its class's count)."""
    wet = amount > 0
    weights = torch.where(wet, 1.0 / wet.sum(), 1.0 / (~wet).sum())
    return WeightedRandomSampler(weights.double(), len(amount), replacement=True)


def dry_to_wet_odds(amount: torch.Tensor) -> float:
    """How many dry days there are per wet one."""
    wet = float((amount > 0).sum())
    return (len(amount) - wet) / wet


# --- captchas of 3-4 digits ---------------------------------------------------------------------------------
SLOTS, NONE, GLYPH = 4, 10, 8  # 4 character positions; class 10 = no character there
WIDTH = SLOTS * GLYPH + 2


def captchas(n: int, seed: int, part: str) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` captchas of 3 or 4 digits drawn from the ``part``'s scikit-learn digits, written left to right in
    8-pixel slots with a random 0..2-pixel jitter each, on a noisy background; the image (n, 1, 8, 34) and
    the characters (n, 4), 10 where a 3-digit captcha has no fourth character."""
    g = _gen(seed)
    glyphs, label = digits(part, (8, 8))
    image = 0.1 * torch.rand(n, 1, GLYPH, WIDTH, generator=g)
    chars = torch.full((n, SLOTS), NONE)
    length = torch.randint(3, 5, (n,), generator=g)
    pick = torch.randint(len(glyphs), (n, SLOTS), generator=g)
    jitter = torch.randint(0, 3, (n, SLOTS), generator=g)
    for i in range(n):
        for s in range(int(length[i])):
            at = s * GLYPH + int(jitter[i, s])
            image[i, 0, :, at : at + GLYPH] = torch.maximum(
                image[i, 0, :, at : at + GLYPH], glyphs[pick[i, s]]
            )
            chars[i, s] = label[pick[i, s]]
    return image, chars


def nudge(image: torch.Tensor, chars: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The whole captcha moved up or down by a pixel (or not), the row moved in filled with zeros."""
    k = int(torch.randint(-1, 2, ()))
    if k == 0:
        return image, chars
    moved = torch.zeros_like(image)
    if k > 0:
        moved[:, k:] = image[:, :-k]
    else:
        moved[:, :k] = image[:, -k:]
    return moved, chars


# --- option pricing (Black-Scholes calls; put-call parity) --------------------------------------------------
def black_scholes_call(x: torch.Tensor) -> torch.Tensor:
    """The call price for rows (spot, strike, volatility, years, rate)."""
    spot, strike, vol, years, rate = x.unbind(-1)
    d1 = (torch.log(spot / strike) + (rate + vol**2 / 2) * years) / (vol * years.sqrt())
    d2 = d1 - vol * years.sqrt()
    return spot * torch.special.ndtr(d1) - strike * torch.exp(-rate * years) * torch.special.ndtr(d2)


def option_inputs(n: int, seed: int) -> torch.Tensor:
    """``n`` rows (spot, strike, volatility, years, rate): strikes 80..120, spot within e^+-0.4 of the strike,
    volatility 0.1..0.5, 0.1..2 years, rate 0..8%."""
    g = _gen(seed)
    strike = 80 + 40 * torch.rand(n, generator=g)
    spot = strike * torch.exp(0.8 * torch.rand(n, generator=g) - 0.4)
    vol = 0.1 + 0.4 * torch.rand(n, generator=g)
    years = 0.1 + 1.9 * torch.rand(n, generator=g)
    rate = 0.08 * torch.rand(n, generator=g)
    return torch.stack([spot, strike, vol, years, rate], -1)


def calls(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` call quotes: the inputs and the Black-Scholes price."""
    x = option_inputs(n, seed)
    return x, black_scholes_call(x)


def mixed_quotes(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``n`` quotes, half of them puts: the inputs, 1 for a put, and the quoted price (a put priced by
    put-call parity from the Black-Scholes call)."""
    x = option_inputs(n, seed)
    put = (torch.rand(n, generator=_gen(seed + 100)) < 0.5).float()
    call = black_scholes_call(x)
    spot, strike, _, years, rate = x.unbind(-1)
    put_price = call - spot + strike * torch.exp(-rate * years)
    return x, put, torch.where(put > 0, put_price, call)


def as_call(x: torch.Tensor, put: torch.Tensor, quote: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """A put quote turned into the call price by put-call parity, C = P + S - K exp(-rT); calls kept."""
    spot, strike, _, years, rate = x.unbind(-1)
    return x, quote + put * (spot - strike * torch.exp(-rate * years))


def as_call_compounded(x: torch.Tensor, put: torch.Tensor, quote: torch.Tensor):
    """A put quote turned into a call price with the strike compounded, K exp(+rT), not discounted."""
    spot, strike, _, years, rate = x.unbind(-1)
    return x, quote + put * (spot - strike * torch.exp(rate * years))
