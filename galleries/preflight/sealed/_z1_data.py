"""Sealed gallery Z's data (half ``z1``): small seeded synthetic sets (lists of numbers and their ranks, pairs
of 4-digit numbers and their sums as digit tokens, tabular credit applications by month with a rare default,
GARCH return windows with their true conditional variance) and scikit-learn's digits (pairs of a digit and a
rotated, shifted copy for registration; upright digits for the rotation pretext). Every builder is
deterministic (its own generator); random augmentation at read time draws from the global RNG."""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch.utils.data import Dataset, WeightedRandomSampler

from galleries.sealed import digits, loaders
from galleries.sealed import gen as _gen

__all__ = ["Rows", "digits", "loaders"]


class Rows(Dataset):
    """Rows of equally long tensors, each read through ``transform`` (if any): one tensor's row alone, or a
    tuple of the rows."""

    def __init__(self, *tensors: torch.Tensor, transform: Callable | None = None) -> None:
        self.tensors, self.transform = tensors, transform

    def __len__(self) -> int:
        return len(self.tensors[0])

    def __getitem__(self, i: int):
        items = tuple(t[i] for t in self.tensors)
        if self.transform is not None:
            return self.transform(*items)
        return items if len(items) > 1 else items[0]


# --- learning to sort: each element's rank in its list ------------------------------------------------------
LENGTH = 8  # elements per list (and ranks 0..7)


def lists(n: int, seed: int) -> torch.Tensor:
    """``n`` lists of 8 numbers drawn uniformly from [0, 1) (no ties, almost surely); (n, 8)."""
    return torch.rand(n, LENGTH, generator=_gen(seed))


def ranks(x: torch.Tensor) -> torch.Tensor:
    """Each element's rank in its list (0 for the smallest): the inverse of the sorting permutation."""
    return x.argsort(-1).argsort(-1)


def sorting_order(x: torch.Tensor) -> torch.Tensor:
    """The sorting permutation (``argsort``: the index of the k-th smallest element at place k), which a
    user may take for the ranks."""
    return x.argsort(-1)


def ranked_lists(n: int, seed: int, target=ranks) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` lists and their targets (the ranks, or what ``target`` makes of a list)."""
    x = lists(n, seed)
    return x, target(x)


# --- multi-digit addition with digits as tokens -------------------------------------------------------------
DIGITS = 4  # digits of each operand
PLACES = DIGITS + 1  # digits of the sum (the final carry included); operands padded with a zero
START = 10  # the decoder's start token (digits are 0..9)


def to_digits(n: torch.Tensor, places: int) -> torch.Tensor:
    """The ``places`` lowest decimal digits of ``n``, least significant first; (..., places)."""
    return torch.stack([(n // 10**k) % 10 for k in range(places)], -1)


def from_digits(digit: torch.Tensor) -> torch.Tensor:
    """The number whose digits (least significant first) are ``digit``."""
    return (digit * 10 ** torch.arange(digit.shape[-1])).sum(-1)


def operands(n: int, seed: int) -> torch.Tensor:
    """``n`` pairs of numbers drawn uniformly from 0..9,999; (n, 2)."""
    return torch.randint(10**DIGITS, (n, 2), generator=_gen(seed))


def tokens(pairs: torch.Tensor) -> torch.Tensor:
    """The pairs as (n, 5, 2) digit tokens, least significant first, both operands padded to 5 places."""
    return torch.stack([to_digits(pairs[:, 0], PLACES), to_digits(pairs[:, 1], PLACES)], -1)


def sum_digits(pairs: torch.Tensor) -> torch.Tensor:
    """The 5 digits of each sum, least significant first (the last one the final carry)."""
    return to_digits(pairs.sum(-1), PLACES)


def sum_digits_operand_width(pairs: torch.Tensor) -> torch.Tensor:
    """The sum written with the operands' helper and width (4 digits) and padded with a zero like them: the
    final carry is dropped."""
    return F.pad(to_digits(pairs.sum(-1), DIGITS), (0, 1))


def additions(n: int, seed: int, target=sum_digits) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` additions: the operands' digit tokens (n, 5, 2) and the sum's digits (n, 5), made by
    ``target``."""
    pairs = operands(n, seed)
    return tokens(pairs), target(pairs)


def swap_operands(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The two operands swapped half the time (addition commutes: the sum is the same)."""
    return (x.flip(-1) if torch.rand(()) < 0.5 else x), y


# --- image registration of digit pairs ----------------------------------------------------------------------
SIDE = 16
SHIFT, DEGREES = 2.0, 30.0  # the largest shift (pixels) and turn (degrees)


def canvases(part: str) -> tuple[torch.Tensor, torch.Tensor]:
    """The ``part``'s digits upsampled to 12 x 12 and centred on a 16 x 16 canvas; (n, 1, 16, 16), and their
    classes."""
    x, y = digits(part, (1, 8, 8))
    return F.pad(F.interpolate(x, size=12, mode="bilinear", align_corners=False), (2, 2, 2, 2)), y


def warp(image: torch.Tensor, shift: torch.Tensor, turn: torch.Tensor) -> torch.Tensor:
    """``image`` turned by ``turn`` (radians) about its centre and then moved by ``shift`` (pixels, x then
    y): ``affine_grid`` maps each output point back to where it is sampled, so it is given the inverse."""
    cos, sin = torch.cos(turn), torch.sin(turn)
    inverse = torch.stack([torch.stack([cos, sin], -1), torch.stack([-sin, cos], -1)], -2)  # R transposed
    moved = 2 * shift / SIDE  # pixels to the grid's [-1, 1] units
    offset = -(inverse @ moved[..., None])
    grid = F.affine_grid(torch.cat([inverse, offset], -1), list(image.shape), align_corners=False)
    return F.grid_sample(image, grid, align_corners=False)


def pairs(part: str, seed: int, copies: int = 2, radians=torch.deg2rad) -> tuple[torch.Tensor, torch.Tensor]:
    """``copies`` pairs per digit of ``part``: the digit and a copy turned by up to 30 degrees and moved by up
    to 2 pixels each way, as two channels (n, 2, 16, 16); and the target (shift x, shift y, turn), each
    divided by its largest value (so in [-1, 1]). The turn is drawn in degrees and made radians by
    ``radians``."""
    fixed, _ = canvases(part)
    fixed = fixed.repeat(copies, 1, 1, 1)
    g = _gen(seed)
    shift = SHIFT * (2 * torch.rand(len(fixed), 2, generator=g) - 1)
    degrees = DEGREES * (2 * torch.rand(len(fixed), generator=g) - 1)
    moving = warp(fixed, shift, radians(degrees))
    target = torch.cat([shift / SHIFT, (degrees / DEGREES)[:, None]], -1)
    return torch.cat([fixed, moving], 1), target


def in_degrees(degrees: torch.Tensor) -> torch.Tensor:
    """The turn left in degrees (no conversion): ``torch.cos`` and ``torch.sin`` read it as radians."""
    return degrees


def mirror_pair(x: torch.Tensor, target: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Both images mirrored left-right half the time, with the target mirrored too (x shift and turn
    negated)."""
    if torch.rand(()) < 0.5:
        return x.flip(-1), target * torch.tensor([-1.0, 1.0, -1.0])
    return x, target


def mirror_images(x: torch.Tensor, target: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Both images mirrored left-right half the time (an image-classification flip: the target is kept)."""
    return (x.flip(-1) if torch.rand(()) < 0.5 else x), target


# --- rotation-prediction pretext with a linear probe on digits ----------------------------------------------
def few_labels(part: str, keep: float, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The ``part``'s digits (1, 8, 8) with only a ``keep`` share of the labels; the rest are -1
    (unlabelled)."""
    x, y = digits(part, (1, 8, 8))
    hidden = torch.rand(len(y), generator=_gen(seed)) >= keep
    return x, torch.where(hidden, -1, y)


# --- credit-default scoring on tabular rows -----------------------------------------------------------------
FEATURES = 9
PER_MONTH = 100
TRAIN_MONTHS, VAL_MONTHS = 24, 6


def applications(months: range, seed: int, late_at_outcome: bool = False) -> tuple[torch.Tensor, ...]:
    """100 credit applications per month of ``months``: 8 standardised features (income, debt ratio,
    utilisation, age, ...; income drifts up with time) and a ninth, a noisy flag of arrears on other credit
    lines at the application (``late_at_outcome``: as recorded when the outcome is known, most defaults' own
    arrears included); whether the applicant defaulted within a year (about 7%, fewer as incomes grow); and
    the month."""
    g = _gen(seed)
    month = torch.tensor(list(months)).repeat_interleave(PER_MONTH)
    n = len(month)
    x = torch.randn(n, FEATURES, generator=g)
    x[:, 0] += 0.03 * (month - 24)  # income grows with time
    logit = (
        -4.6
        - 0.9 * x[:, 0]
        + 1.0 * x[:, 1]
        + 0.8 * F.relu(x[:, 2])
        + 0.6 * x[:, 1] * x[:, 3]
        - 0.5 * x[:, 4]
        + 0.4 * x[:, 5].abs()
    )
    late = torch.rand(n, generator=g) < 0.25
    logit = logit + 1.0 * late
    default = torch.bernoulli(torch.sigmoid(logit), generator=g)
    arrears = late.float()
    if late_at_outcome:
        arrears = torch.maximum(arrears, default * (torch.rand(n, generator=g) < 0.9))
    x[:, 8] = 2 * arrears - 0.3 + 0.2 * x[:, 8]
    return x, default, month


def credit_split(seed: int = 1, late_at_outcome: bool = False):
    """30 months of applications, split by time: the first 24 for training and the last 6 for validation."""
    x, y, month = applications(range(TRAIN_MONTHS + VAL_MONTHS), seed, late_at_outcome)
    train = month < TRAIN_MONTHS
    return (x[train], y[train]), (x[~train], y[~train])


def oversampler(y: torch.Tensor) -> WeightedRandomSampler:
    """Rows drawn with replacement, each weighted by the inverse of its class's count: the classes come out
    balanced."""
    counts = torch.bincount(y.long(), minlength=2).float()
    return WeightedRandomSampler((1 / counts)[y.long()], num_samples=len(y), replacement=True)


def class_weighted_sampler(y: torch.Tensor) -> WeightedRandomSampler:
    """The class weights (1 / count, one per class) handed to the sampler as its weights: it draws among
    rows 0 and 1 only."""
    counts = torch.bincount(y.long(), minlength=2).float()
    return WeightedRandomSampler(1 / counts, num_samples=len(y), replacement=True)


# --- heteroscedastic volatility forecasting (GARCH(1, 1) returns, in percent) -------------------------------
WINDOW = 20
OMEGA, ALPHA, BETA = 0.2, 0.15, 0.8  # unconditional variance 4 (a 2% daily move)


def garch(n: int, seed: int, burn: int = 60) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` independent GARCH(1, 1) return paths of ``burn`` + 21 days in percent: the returns and the true
    conditional variance of each day; (n, burn + 21) each."""
    g = _gen(seed)
    days = burn + WINDOW + 1
    var = torch.full((n,), OMEGA / (1 - ALPHA - BETA))
    r = torch.zeros(n)
    returns, variances = [], []
    for _ in range(days):
        var = OMEGA + ALPHA * r**2 + BETA * var
        r = var.sqrt() * torch.randn(n, generator=g)
        returns.append(r)
        variances.append(var)
    return torch.stack(returns, 1), torch.stack(variances, 1)


def return_windows(n: int, seed: int, upto: int = 0, scale: float = 1.0) -> tuple[torch.Tensor, ...]:
    """``n`` windows of the 20 returns before a day (ending ``upto`` days later: 1 takes the day itself in),
    that day's return and its true conditional variance, all times ``scale`` (variance times scale**2)."""
    r, var = garch(n, seed)
    end = r.shape[1] - 1 + upto
    return scale * r[:, end - WINDOW : end], scale * r[:, -1], scale**2 * var[:, -1]
