"""Sealed gallery E's data: small seeded synthetic sets (directed graphs, ranked lists, two-eyed faces,
density samples, trajectories, springs of atoms, tabular rows with missing values) and scikit-learn's digits
(super-resolution, masked patches, bags, one-class scoring). Every builder is deterministic (its own
generator); random augmentation at read time draws from the global RNG."""

from __future__ import annotations

import itertools
import math

import torch
import torch.nn.functional as F
from sklearn.datasets import make_moons
from torch.utils.data import Dataset

from galleries.sealed import digits, loaders
from galleries.sealed import gen as _gen

__all__ = ["Rows", "digits", "loaders"]


class Rows(Dataset):
    """Row ``i`` of each stored tensor, through ``transform(*row)`` on every read when one is given."""

    def __init__(self, *tensors: torch.Tensor, transform=None) -> None:
        self.tensors, self.transform = tensors, transform

    def __len__(self) -> int:
        return len(self.tensors[0])

    def __getitem__(self, i: int):
        row = tuple(t[i] for t in self.tensors)
        return self.transform(*row) if self.transform else row


# --- directed graphs (node regression) ----------------------------------------------------------------------
NODES = 10


def graphs(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``n`` directed graphs of 10 nodes with 4 features; ``adj[j, i] = 1`` for an edge j -> i. A node's
    target is the sum of feature 0 over its in-neighbours plus half its own feature 1."""
    g = _gen(seed)
    x = torch.randn(n, NODES, 4, generator=g)
    adj = (torch.rand(n, NODES, NODES, generator=g) < 0.25).float() * (1 - torch.eye(NODES))
    y = (adj * x[..., 0:1]).sum(1) + 0.5 * x[..., 1]
    return x, adj, y


def permute_nodes(x: torch.Tensor, adj: torch.Tensor, y: torch.Tensor, edges_too: bool = True):
    """A random node order (the task is permutation-equivariant): features, targets and, with
    ``edges_too``, the adjacency's rows and columns. Without it (the BUG) the edges stay where they were."""
    order = torch.randperm(NODES)
    return x[order], adj[order][:, order] if edges_too else adj, y[order]


# --- ranked lists (learning to rank) ------------------------------------------------------------------------
DOCS, FEATURES = 10, 6


def ranked_lists(n: int, seed: int, clicks: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` queries of 10 documents with 6 features; a document's grade (3, 2, 1 or 0) is its place in its
    list by a noisy linear score (top 1, next 2, next 3, rest). With ``clicks`` (the BUG of the logs'
    export) a 7th column: the click count the document got, which follows its grade and is 0 for a new one."""
    w = torch.randn(FEATURES, generator=_gen(71))
    g = _gen(seed)
    x = torch.randn(n, DOCS, FEATURES, generator=g)
    score = x @ w / w.norm() + 0.3 * torch.randn(n, DOCS, generator=g)
    place = score.argsort(-1, descending=True).argsort(-1)
    grade = torch.tensor([3.0, 2, 2, 1, 1, 1, 0, 0, 0, 0])[place]
    if clicks:
        x = torch.cat([x, (grade + 0.3 * torch.randn(n, DOCS, generator=g)).clamp(min=0)[..., None]], -1)
    return x, grade


# --- two-eyed faces (keypoints) -----------------------------------------------------------------------------
SIDE = 12


def faces(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """12x12 images holding two identical blobs, the left eye (x in 1..5) and the right eye (x in 6..10),
    each at its own height, on faint noise. Target: (left x, left y, right x, right y) / 11."""
    g = _gen(seed)
    lx, rx = 1 + 4 * torch.rand(n, generator=g), 6 + 4 * torch.rand(n, generator=g)
    ly, ry = (2 + 8 * torch.rand(n, generator=g) for _ in range(2))
    grid = torch.arange(SIDE).float()

    def blob(cx: torch.Tensor, cy: torch.Tensor) -> torch.Tensor:
        return torch.exp(-((grid - cx[:, None]) ** 2)[:, None, :] - ((grid - cy[:, None]) ** 2)[:, :, None])

    images = blob(lx, ly) + blob(rx, ry) + 0.05 * torch.randn(n, SIDE, SIDE, generator=g)
    return images.flatten(1), torch.stack([lx, ly, rx, ry], 1) / (SIDE - 1)


def flip_face(image: torch.Tensor, eyes: torch.Tensor, swap: bool = True, row_col: bool = False):
    """A random horizontal flip: the image, each eye's x mirrored and (``swap``) the eyes' names swapped,
    since the mirrored left eye is the new right one. Without ``swap`` (a BUG) "left" may name either eye;
    with ``row_col`` (a BUG: a helper written for (row, column) keypoints) each eye's height is mirrored
    instead."""
    if torch.rand(()) < 0.5:
        return image, eyes
    image = image.view(SIDE, SIDE).flip(-1).flatten()
    lx, ly, rx, ry = eyes
    if row_col:  # mirrors coordinate 1 of each (x, y) pair, the column in (row, column) order
        return image, torch.stack([rx, 1 - ry, lx, 1 - ly])
    return image, torch.stack([1 - rx, ry, 1 - lx, ly] if swap else [1 - lx, ly, 1 - rx, ry])


# --- digits: super-resolution and masked patches ------------------------------------------------------------
def low_resolution(x: torch.Tensor) -> torch.Tensor:
    """Flat 8x8 digits averaged over 2x2 blocks and blown back up to 8x8 (the super-resolution input)."""
    small = F.avg_pool2d(x.view(-1, 1, 8, 8), 2)
    return F.interpolate(small, scale_factor=2, mode="nearest").flatten(1)


def superres(part: str) -> tuple[torch.Tensor, torch.Tensor]:
    x = digits(part)[0]
    return low_resolution(x), x


def flip_pair(low: torch.Tensor, high: torch.Tensor, one_draw: bool = True):
    """A random horizontal flip of the input and its target: one draw for both; the BUG (``one_draw=False``)
    draws for each tensor apart, so half the flipped inputs keep an unflipped target."""

    def flip(image: torch.Tensor, draw: torch.Tensor) -> torch.Tensor:
        return image.view(8, 8).flip(-1).flatten() if draw < 0.5 else image

    draw = torch.rand(())
    return flip(low, draw), flip(high, draw if one_draw else torch.rand(()))


PATCHES, HIDDEN_PATCHES = 16, 6


def patch_mask(generator: torch.Generator | None = None) -> torch.Tensor:
    """A flat 8x8 mask (1 = hidden) over 6 of the 16 2x2 patches, drawn from ``generator``."""
    hidden = torch.zeros(PATCHES)
    hidden[torch.randperm(PATCHES, generator=generator)[:HIDDEN_PATCHES]] = 1
    return hidden.view(1, 1, 4, 4).repeat_interleave(2, -1).repeat_interleave(2, -2).flatten()


def with_mask(image: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(the image, a fresh mask from the global RNG): the model hides the masked pixels itself."""
    return image, patch_mask()


def fixed_masks(x: torch.Tensor, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Every image of ``x`` with one mask from a seeded generator (deterministic validation and test sets)."""
    g = _gen(seed)
    return x, torch.stack([patch_mask(g) for _ in range(len(x))])


def with_mask_seeded_per_read(image: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """BUG: a 'reproducible' mask from a generator seeded on every read, so every image hides the same
    6 patches in every epoch."""
    return image, patch_mask(_gen(0))


# --- variable-length sequences -----------------------------------------------------------------------------
MAX_LEN = 16


def sequences(n: int, seed: int, left_pad: bool = False) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(padded values (n, 16, 1), lengths 4..16, target = first value + half the last). Padded on the right;
    the BUG (``left_pad``, a tokenizer-style setting) pads on the left."""
    g = _gen(seed)
    lengths = torch.randint(4, MAX_LEN + 1, (n,), generator=g)
    values = torch.randn(n, MAX_LEN, generator=g)
    keep = torch.arange(MAX_LEN) < lengths[:, None]
    values = values * keep
    target = values[:, 0] + 0.5 * values[torch.arange(n), lengths - 1]
    if left_pad:
        values = torch.stack([row.roll(MAX_LEN - int(k)) for row, k in zip(values, lengths, strict=True)])
    return values[..., None], lengths, target


# --- bags of digits (multiple-instance learning) ------------------------------------------------------------
BAG = 8


def bags(part: str, n: int, seed: int, first_instance_label: bool = False):
    """``n`` bags of 8 digits from ``part``; half the bags hold one or two 7s. Label: the bag holds a 7. The
    BUG (``first_instance_label``): the label of the bag's first instance (is it a 7) instead."""
    x, y = digits(part)
    g = _gen(seed)
    sevens, others = torch.nonzero(y == 7).flatten(), torch.nonzero(y != 7).flatten()
    picks = others[torch.randint(len(others), (n, BAG), generator=g)]
    positive = torch.rand(n, generator=g) < 0.5
    for i in torch.nonzero(positive).flatten().tolist():
        places = torch.randperm(BAG, generator=g)[: int(torch.randint(1, 3, (), generator=g))]
        picks[i, places] = sevens[torch.randint(len(sevens), (len(places),), generator=g)]
    label = (y[picks[:, 0]] == 7) if first_instance_label else positive
    return x[picks], label.float()


# --- one-class scoring --------------------------------------------------------------------------------------
def normal_digits(part: str) -> torch.Tensor:
    """The digits 0..4 of ``part`` (the normal class of a one-class scorer; 5..9 are anomalies)."""
    x, y = digits(part)
    return x[y < 5]


# --- 2-D densities ------------------------------------------------------------------------------------------
def moons(n: int, seed: int) -> torch.Tensor:
    """Two interleaved half-circles, standardised (a 2-D density to fit)."""
    x = torch.tensor(make_moons(n, noise=0.08, random_state=seed)[0], dtype=torch.float32)
    return (x - torch.tensor([0.5, 0.25])) / torch.tensor([0.87, 0.5])


def two_branches(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """x in [-1, 1]; y on one of two branches (+-(x^2 + 0.5)) with equal odds, plus noise 0.05."""
    g = _gen(seed)
    x = 2 * torch.rand(n, 1, generator=g) - 1
    sign = torch.where(torch.rand(n, 1, generator=g) < 0.5, -1.0, 1.0)
    return x, (sign * (x**2 + 0.5) + 0.05 * torch.randn(n, 1, generator=g)).squeeze(1)


# --- trajectories (behaviour cloning) -----------------------------------------------------------------------
def expert(state: torch.Tensor) -> torch.Tensor:
    """The expert's action: half the way to the goal, each coordinate capped at 0.2."""
    return (0.5 * (state[..., 2:] - state[..., :2])).clamp(-0.2, 0.2)


def trajectories(episodes: int, seed: int, late_actions: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """(state = position and goal, the expert's action) over 10-step episodes with noisy moves. The BUG
    (``late_actions``): each state is logged with the action taken at the next step."""
    g = _gen(seed)
    pos, goal = 2 * torch.rand(episodes, 2, generator=g) - 1, 2 * torch.rand(episodes, 2, generator=g) - 1
    states, actions = [], []
    for _ in range(11):
        state = torch.cat([pos, goal], -1)
        states.append(state)
        actions.append(expert(state))
        pos = pos + actions[-1] + 0.05 * torch.randn(episodes, 2, generator=g)
    s, a = torch.stack(states[:10], 1), torch.stack(actions[1:] if late_actions else actions[:10], 1)
    return s.flatten(0, 1), a.flatten(0, 1)


# --- springs of atoms (energy and forces) -------------------------------------------------------------------
ATOMS = 4
PAIRS = list(itertools.combinations(range(ATOMS), 2))


def pair_energy(r: torch.Tensor) -> torch.Tensor:
    """A Morse-like pair potential of the distance."""
    return (1 - torch.exp(-1.5 * (r - 1.0))) ** 2


def distances(pos: torch.Tensor) -> torch.Tensor:
    i, j = zip(*PAIRS, strict=True)
    return (pos[:, list(i)] - pos[:, list(j)]).norm(dim=-1)


def molecules(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(positions (4 atoms in 2-D, jittered around a square), energy, forces = -dE/dpositions)."""
    g = _gen(seed)
    square = torch.tensor([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    pos = (square + 0.25 * torch.randn(n, ATOMS, 2, generator=g)).requires_grad_()
    energy = pair_energy(distances(pos)).sum(-1)
    (grad,) = torch.autograd.grad(energy.sum(), pos)
    return pos.detach(), energy.detach(), -grad


# --- tabular rows with missing values -----------------------------------------------------------------------
def tabular_rows(
    n: int, seed: int, mask_after_fill: bool = False, complete: bool = False
) -> dict[str, torch.Tensor]:
    """Five features; feature 0 is not measured (NaN) when it is below -0.3 (about 38% of rows), so its
    absence tells that it is low. Target 2 x0 + x1 - x2. The pipeline fills NaN with 0 and marks the missing
    cells; a BUG (``mask_after_fill``) computes the marks after the fill, so none is marked. ``complete``
    rows (a BUG for validation) come from a back-filled table where every value was measured."""
    g = _gen(seed)
    x = torch.randn(n, 5, generator=g)
    target = 2 * x[:, 0] + x[:, 1] - x[:, 2] + 0.1 * torch.randn(n, generator=g)
    if not complete:
        x[x[:, 0] < -0.3, 0] = math.nan
    filled = torch.nan_to_num(x, nan=0.0)
    missing = torch.isnan(filled if mask_after_fill else x).float()
    return {"features": filled, "missing": missing, "target": target, "row_id": torch.arange(n)}


class Records(Dataset):
    """Dict rows of a dict of tensors (the batch is a dict; ``row_id`` is metadata)."""

    def __init__(self, columns: dict[str, torch.Tensor]) -> None:
        self.columns = columns

    def __len__(self) -> int:
        return len(self.columns["target"])

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {key: column[i] for key, column in self.columns.items()}
