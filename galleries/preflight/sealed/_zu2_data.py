"""Sealed gallery ZU2's data (half ``zu2``): small seeded synthetic sets (protein chains whose residues are
drawn from the propensities of their helix / strand / coil segments, pairs of frames of tracked objects with
vanished objects and clutter, reactions between two fingerprinted reactants with a bounded yield, depth
patches of a bar on a table with a parallel-jaw grasp angle and whether it holds, periodic initial conditions
of the 1-D heat equation with their exact solution at time T). Every builder is deterministic (its own
generator); random augmentation at read time draws from the global RNG."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch.nn.utils.rnn import pad_sequence
from torch.utils.data import Dataset, WeightedRandomSampler

from galleries.sealed import gen as _gen
from galleries.sealed import loaders

__all__ = ["Rows", "loaders"]


class Rows(Dataset):
    """Rows of equally long columns (tensors or lists), read as a tuple, passed through ``transform`` (called
    with the row's parts) on every read when one is given."""

    def __init__(self, *columns, transform=None) -> None:
        self.columns, self.transform = columns, transform

    def __len__(self) -> int:
        return len(self.columns[0])

    def __getitem__(self, i: int):
        row = tuple(c[i] for c in self.columns)
        return self.transform(*row) if self.transform is not None else row


# --- protein secondary structure: residues one-hot over 20 amino acids, states H (0), E (1), C (2) ----------
AMINO, STATES, MAX_CHAIN = 20, 3, 48
PROPENSITY = torch.softmax(1.3 * torch.randn(STATES, AMINO, generator=_gen(77)), -1)  # P(residue | state)
SEGMENT = {0: (5, 12), 1: (3, 7), 2: (2, 6)}  # each state's segment lengths (inclusive)


def chains(n: int, seed: int) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """``n`` chains of 24..48 residues: segments of helix, strand and coil (a state never follows itself),
    each residue drawn from its state's amino-acid propensities; one-hot residues (L, 20) and states (L,)."""
    g = _gen(seed)
    seqs, labels = [], []
    for _ in range(n):
        length = int(torch.randint(24, MAX_CHAIN + 1, (), generator=g))
        states, state = [], int(torch.randint(3, (), generator=g))
        while len(states) < length:
            low, high = SEGMENT[state]
            states += [state] * int(torch.randint(low, high + 1, (), generator=g))
            state = (state + 1 + int(torch.randint(2, (), generator=g))) % 3
        label = torch.tensor(states[:length])
        residue = torch.multinomial(PROPENSITY[label], 1, generator=g)[:, 0]
        seqs.append(F.one_hot(residue, AMINO).float())
        labels.append(label)
    return seqs, labels


def pad_chains(batch) -> tuple[torch.Tensor, torch.Tensor]:
    """Collate chains padded to the batch's longest: residues (B, L, 20) (zeros on padding) and states
    (B, L) (-100 on padding, cross-entropy's ignore index)."""
    seqs, labels = zip(*batch, strict=True)
    return pad_sequence(list(seqs), batch_first=True), pad_sequence(list(labels), True, -100)


def pad_chains_sorted(batch) -> tuple[torch.Tensor, torch.Tensor]:
    """Collate as :func:`pad_chains`, the chains sorted longest first (for packing) with
    ``sorted(seqs, key=len)``; the labels stacked as they came."""
    seqs, labels = zip(*batch, strict=True)
    seqs = sorted(seqs, key=len, reverse=True)
    return pad_sequence(list(seqs), batch_first=True), pad_sequence(list(labels), True, -100)


def chain_matrix(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` chains collated by :func:`pad_chains` into one padded batch."""
    return pad_chains(list(zip(*chains(n, seed), strict=True)))


# --- data association: 6 tracked objects in frame t, their detections (and clutter) in frame t + 1 ---------
OBJECTS, CLUTTER, APPEARANCE = 6, 3, 4
COLUMNS = OBJECTS + CLUTTER  # the next frame's detection slots (padded); the class COLUMNS is "vanished"


def frame_pairs(n: int, seed: int) -> dict[str, torch.Tensor]:
    """``n`` pairs of frames: six objects crowded in a 4 x 4 area with a velocity each; frame t's detections
    (``rows``: position, position one frame earlier, appearance; (n, 6, 8)); frame t + 1's (``cols``:
    position, appearance; (n, 9, 6)) hold each object that is still seen (85%) where it moved, plus 0..3
    clutter detections, in random order, padded with zeros (``valid`` (n, 9)); ``match`` (n, 6) the column of
    each row's object in frame t + 1, or 9 where it vanished."""
    g = _gen(seed)
    pos = 4 * torch.rand(n, OBJECTS, 2, generator=g)
    vel = 0.6 * torch.randn(n, OBJECTS, 2, generator=g)
    app = torch.randn(n, OBJECTS, APPEARANCE, generator=g)
    prev = pos - vel + 0.08 * torch.randn(n, OBJECTS, 2, generator=g)
    seen_pos = pos + 0.05 * torch.randn(n, OBJECTS, 2, generator=g)
    rows = torch.cat([seen_pos, prev, app + 0.6 * torch.randn(n, OBJECTS, APPEARANCE, generator=g)], -1)
    nxt = torch.cat([pos + vel + 0.15 * torch.randn(n, OBJECTS, 2, generator=g), app], -1)
    nxt[..., 2:] += 0.6 * torch.randn(n, OBJECTS, APPEARANCE, generator=g)
    clutter = torch.cat(
        [-1 + 6 * torch.rand(n, CLUTTER, 2, generator=g), torch.randn(n, CLUTTER, APPEARANCE, generator=g)],
        -1,
    )
    still = torch.rand(n, OBJECTS, generator=g) < 0.85
    n_clutter = torch.randint(CLUTTER + 1, (n,), generator=g)
    cols = torch.zeros(n, COLUMNS, 2 + APPEARANCE)
    valid = torch.zeros(n, COLUMNS, dtype=torch.bool)
    match = torch.full((n, OBJECTS), COLUMNS)
    for i in range(n):
        dets = torch.cat([nxt[i][still[i]], clutter[i, : int(n_clutter[i])]])
        owner = torch.cat([still[i].nonzero()[:, 0], torch.full((int(n_clutter[i]),), -1)])
        order = torch.randperm(len(dets), generator=g)
        cols[i, : len(dets)], valid[i, : len(dets)] = dets[order], True
        for slot, obj in enumerate(owner[order].tolist()):
            if obj >= 0:
                match[i, obj] = slot
    return {"rows": rows, "cols": cols, "valid": valid, "match": match}


class FramePairs(Dataset):
    """Frame pairs read as dicts (``rows``, ``cols``, ``valid``, ``match``)."""

    def __init__(self, pairs: dict[str, torch.Tensor], target=None) -> None:
        self.pairs = pairs
        self.target = target

    def __len__(self) -> int:
        return len(self.pairs["match"])

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        item = {key: value[i] for key, value in self.pairs.items()}
        if self.target is not None:
            item["match"] = self.target(item["match"])
        return item


def vanished_as_zero(match: torch.Tensor) -> torch.Tensor:
    """The targets as a matching written with ``torch.where(found, column, 0)``: a vanished object's row
    labelled with column 0."""
    return torch.where(match < COLUMNS, match, 0)


# --- reaction yield: two reactants, 32-bit fingerprints, a yield in percent ---------------------------------
BITS, LIBRARY = 32, 120


def _chemistry() -> tuple[torch.Tensor, ...]:
    g = _gen(91)
    library = (torch.rand(LIBRARY, BITS, generator=g) < 0.25).float()
    library[:, :8] = 0.0
    library[: LIBRARY // 2, :4] = 1.0  # the aryl halides' groups
    library[LIBRARY // 2 :, 4:8] = 1.0  # the partners' (amines')
    w = 0.6 * torch.randn(BITS, generator=g)
    a = torch.randn(BITS, BITS, generator=g) / 4
    return library, w, (a + a.T) / 2


LIBRARY_FP, _W, _INTERACTION = _chemistry()


def true_yield(fp_a: torch.Tensor, fp_b: torch.Tensor) -> torch.Tensor:
    """The yield (percent) of a reaction: a sigmoid of each reactant's own reactivity plus a symmetric
    interaction between their groups (the same whichever reactant is named first)."""
    score = fp_a @ _W + fp_b @ _W + ((fp_a @ _INTERACTION) * fp_b).sum(-1) + 2.0
    return 100 * torch.sigmoid(score)


def reactions(n: int, seed: int, canonical: bool = True) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``n`` couplings of an aryl halide (the library's first half) with a partner (its second half): their
    fingerprints (n, 32) each and the measured yield (percent, noise 4 points, clipped to 0..100). With
    ``canonical`` the halide comes first (as the lab's sheet lists them), otherwise the order is random."""
    g = _gen(seed)
    a = torch.randint(LIBRARY // 2, (n,), generator=g)
    b = LIBRARY // 2 + torch.randint(LIBRARY // 2, (n,), generator=g)
    if not canonical:
        swap = torch.rand(n, generator=g) < 0.5
        a, b = torch.where(swap, b, a), torch.where(swap, a, b)
    fp_a, fp_b = LIBRARY_FP[a], LIBRARY_FP[b]
    measured = (true_yield(fp_a, fp_b) + 4 * torch.randn(n, generator=g)).clamp(0, 100)
    return fp_a, fp_b, measured


def swap_half(fp_a: torch.Tensor, fp_b: torch.Tensor, y: torch.Tensor):
    """The reactants listed the other way round half the time (the yield is the same)."""
    return (fp_b, fp_a, y) if torch.rand(()) < 0.5 else (fp_a, fp_b, y)


# --- grasp success: 16 x 16 height maps of a bar on a table, a parallel-jaw grasp at the centre -------------
PATCH = 16


def _render(phi: torch.Tensor, width: torch.Tensor, height: torch.Tensor, g: torch.Generator) -> torch.Tensor:
    c = torch.arange(PATCH).float() - (PATCH - 1) / 2
    v, u = torch.meshgrid(c, c, indexing="ij")  # rows (v), columns (u)
    cos, sin = phi.cos()[:, None, None], phi.sin()[:, None, None]
    along, across = u * cos + v * sin, -u * sin + v * cos
    inside = torch.sigmoid(2 * (6 - along.abs())) * torch.sigmoid(
        2 * (width[:, None, None] / 2 - across.abs())
    )
    return height[:, None, None] * inside + 0.03 * torch.randn(len(phi), PATCH, PATCH, generator=g)


def grasps(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``n`` grasp attempts: a height map (n, 1, 16, 16) of a bar (orientation 0..pi, width 2..7 px, height
    0.2..1) on a table, the grasp angle (the jaws' closing direction, 0..pi) and whether the grasp held
    (1.0, about one attempt in ten): the jaws close across the bar (within 20 degrees of its normal), the
    bar fits the 5-px opening and stands over 0.4 tall."""
    g = _gen(seed)
    phi = math.pi * torch.rand(n, generator=g)
    width = 2 + 5 * torch.rand(n, generator=g)
    height = 0.2 + 0.8 * torch.rand(n, generator=g)
    angle = math.pi * torch.rand(n, generator=g)
    off = torch.remainder(angle - phi, math.pi) - math.pi / 2
    held = (off.abs() < math.radians(20)) & (width < 5) & (height > 0.4)
    return _render(phi, width, height, g)[:, None], angle, held.float()


def turn(depth: torch.Tensor, angle: torch.Tensor, held: torch.Tensor):
    """The patch turned by a random number of quarter turns (torch.rot90), the grasp angle turned with it
    (a quarter turn of the image moves every direction by -pi/2 in these (row, column) coordinates)."""
    k = int(torch.randint(4, ()))
    return depth.rot90(k, (-2, -1)), torch.remainder(angle - k * math.pi / 2, math.pi), held


def turn_patch_only(depth: torch.Tensor, angle: torch.Tensor, held: torch.Tensor):
    """The patch turned by a random number of quarter turns; the grasp angle kept as recorded."""
    k = int(torch.randint(4, ()))
    return depth.rot90(k, (-2, -1)), angle, held


def stretch_per_patch(depth: torch.Tensor, angle: torch.Tensor, held: torch.Tensor):
    """Each patch min-max scaled to 0..1 on its own (a "normalise the depth image" step)."""
    low, high = depth.min(), depth.max()
    return (depth - low) / (high - low + 1e-6), angle, held


def stretch_and_turn(depth: torch.Tensor, angle: torch.Tensor, held: torch.Tensor):
    """:func:`stretch_per_patch`, then :func:`turn`."""
    return turn(*stretch_per_patch(depth, angle, held))


def balanced_sampler(held: torch.Tensor) -> WeightedRandomSampler:
    """Draws held and failed grasps equally often (each sample weighted by one over its class's count)."""
    counts = torch.bincount(held.long(), minlength=2).float()
    return WeightedRandomSampler((1 / counts)[held.long()], num_samples=len(held), replacement=True)


# --- the 1-D heat equation u_t = u_xx on [0, 2 pi), periodic ------------------------------------------------
GRID, T_END = 64, 0.03


def initial_conditions(n: int, seed: int) -> torch.Tensor:
    """``n`` initial temperatures on the 64-point grid: a mean plus Fourier modes 1..20 with amplitudes
    falling as 1/k, and a random step (n, 64)."""
    g = _gen(seed)
    x = torch.arange(GRID) * 2 * math.pi / GRID
    k = torch.arange(1, 21).float()
    amp = torch.randn(n, 20, generator=g) / k
    phase = 2 * math.pi * torch.rand(n, 20, generator=g)
    u = (amp[..., None] * torch.cos(k[None, :, None] * x + phase[..., None])).sum(1)
    start = torch.randint(GRID, (n, 1), generator=g)
    step = ((torch.arange(GRID) - start) % GRID < GRID // 3).float()
    return u + torch.randn(n, 1, generator=g) + torch.randn(n, 1, generator=g) * step


def wavenumbers() -> torch.Tensor:
    """The angular wavenumber of each rfft bin on [0, 2 pi): 0, 1, ..., 32."""
    return torch.fft.rfftfreq(GRID, d=1 / GRID)


def wavenumbers_per_spacing() -> torch.Tensor:
    """The rfft bins' frequencies as ``rfftfreq(n, d=dx)`` gives them with dx = 2 pi / n: cycles per unit
    length (k / 2 pi), not the angular wavenumber."""
    return torch.fft.rfftfreq(GRID, d=2 * math.pi / GRID)


def solve(u0: torch.Tensor, k=wavenumbers) -> torch.Tensor:
    """The exact solution at T: each Fourier mode damped by exp(-k^2 T)."""
    return torch.fft.irfft(torch.fft.rfft(u0) * torch.exp(-(k() ** 2) * T_END), n=GRID)


def heat_pairs(n: int, seed: int, k=wavenumbers) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` (initial, final) pairs (n, 1, 64), the final solved by :func:`solve` with ``k``."""
    u0 = initial_conditions(n, seed)
    return u0[:, None], solve(u0, k)[:, None]
