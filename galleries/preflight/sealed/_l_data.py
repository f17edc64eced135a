"""Sealed gallery L's data: small seeded synthetic sets (ad impressions with categorical fields and a click,
observational rows with a treatment and an outcome, pedestrian-like tracks, positive-unlabelled rows, a 2-D
ring of Gaussian clusters to diffuse, and DNA sequences with a strand-oriented binding motif). Every builder
is deterministic (its own generator); random augmentation and sampling at read time draw from the global
RNG."""

from __future__ import annotations

import math
from functools import cache

import torch

from galleries.preflight.sealed._e_data import Rows
from galleries.sealed import gen as _gen
from galleries.sealed import loaders

__all__ = ["Rows", "loaders"]


# --- click-through rate: ad impressions with four categorical fields ----------------------------------------
FIELDS = (12, 20, 8, 16)  # the number of values of each field (site, ad, device, hour bucket)
KEEP_NEGATIVES = 0.25  # the share of non-clicks kept in training (clicks are all kept)


@cache
def _click_model() -> tuple[torch.Tensor, ...]:
    """The true click model: a bias, a weight per field value and a 4-d latent vector per field value whose
    pairwise dot products add up (a factorisation machine, so the model class can hold it)."""
    g = _gen(81)
    weights = [0.6 * torch.randn(size, generator=g) for size in FIELDS]
    factors = [0.7 * torch.randn(size, 4, generator=g) for size in FIELDS]
    return torch.tensor(-3.4), torch.cat(weights), torch.cat(factors)


def field_offsets() -> torch.Tensor:
    """Where each field's values start in one table holding every field's values."""
    return torch.tensor((0, *FIELDS[:-1])).cumsum(0)


def click_logit(codes: torch.Tensor) -> torch.Tensor:
    """The true log-odds of a click for impressions ``codes`` (n, 4): per-field codes 0..size-1."""
    bias, weights, factors = _click_model()
    rows = codes + field_offsets()
    v = factors[rows]  # (n, 4 fields, 4)
    pairs = 0.5 * (v.sum(1) ** 2 - (v**2).sum(1)).sum(-1)
    return bias + weights[rows].sum(1) + pairs


def impressions(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` impressions (field codes drawn with skewed popularity) and whether each was clicked (about 1 in
    6): (codes (n, 4) long, click (n,) float)."""
    g = _gen(seed)
    columns = []
    for size in FIELDS:
        popularity = torch.softmax(torch.randn(size, generator=_gen(82 + size)), 0)
        columns.append(torch.multinomial(popularity, n, replacement=True, generator=g))
    codes = torch.stack(columns, 1)
    click = (torch.rand(n, generator=g) < torch.sigmoid(click_logit(codes))).float()
    return codes, click


def downsampled_impressions(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The training log as the pipeline stores it: every click and a quarter of the non-clicks (drawn from
    ``n`` impressions)."""
    codes, click = impressions(n, seed)
    keep = (click == 1) | (torch.rand(n, generator=_gen(seed + 500)) < KEEP_NEGATIVES)
    return codes[keep], click[keep]


# --- uplift: observational rows with a treatment and an outcome ---------------------------------------------
COVARIATES = 6


def true_uplift(x: torch.Tensor) -> torch.Tensor:
    """The treatment's true effect on the outcome for rows ``x``: y(treated) - y(control)."""
    return 1.0 + x[:, 0] - torch.sin(2 * x[:, 3])


def observational(n: int, seed: int) -> tuple[torch.Tensor, ...]:
    """``n`` rows: covariates (n, 6), the treatment given (0/1, long; more often to rows with large x0), the
    logged propensity of that treatment policy and the observed outcome: (x, treated, propensity, y)."""
    g = _gen(seed)
    x = torch.randn(n, COVARIATES, generator=g)
    propensity = torch.sigmoid(0.8 * x[:, 0] - 0.4 * x[:, 1]).clamp(0.1, 0.9)
    treated = (torch.rand(n, generator=g) < propensity).long()
    control = x[:, 1] + 0.5 * x[:, 2] ** 2 - 0.5 * x[:, 4]
    y = control + treated * true_uplift(x) + 0.5 * torch.randn(n, generator=g)
    return x, treated, propensity, y


# --- trajectory forecasting: pedestrian-like tracks ---------------------------------------------------------
OBSERVED, FUTURE = 8, 12


def tracks(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` tracks in world coordinates (metres, anywhere in a 40 m square): 8 observed positions and the 12
    that follow, at a walking speed of 0.6..1.6 m per step, a random heading, a slowly drifting turn rate and
    position noise of 3 cm: ((n, 8, 2), (n, 12, 2))."""
    g = _gen(seed)
    steps = OBSERVED + FUTURE
    speed = 0.6 + torch.rand(n, 1, generator=g)
    heading = 2 * math.pi * torch.rand(n, 1, generator=g)
    turn = 0.08 * torch.randn(n, 1, generator=g) + 0.02 * torch.randn(n, steps, generator=g).cumsum(1)
    angle = heading + turn.cumsum(1)
    velocity = speed[..., None] * torch.stack([angle.cos(), angle.sin()], -1)
    start = 40 * torch.rand(n, 1, 2, generator=g) - 20
    path = start + velocity.cumsum(1) + 0.03 * torch.randn(n, steps, 2, generator=g)
    return path[:, :OBSERVED], path[:, OBSERVED:]


def relative_tracks(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The stored training form: the observed positions relative to the last observed one, and the future as
    per-step displacements (the first from the last observed position)."""
    history, future = tracks(n, seed)
    last = history[:, -1:]
    steps = torch.diff(torch.cat([last, future], 1), dim=1)
    return history - last, steps


def _rotation() -> torch.Tensor:
    angle = 2 * math.pi * torch.rand(())
    cos, sin = angle.cos(), angle.sin()
    return torch.stack([torch.stack([cos, -sin]), torch.stack([sin, cos])])


def rotate(history: torch.Tensor, steps: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Augmentation (every read): the whole scene turned by a random angle about the last observed position:
    the history and the future displacements alike."""
    turn = _rotation()
    return history @ turn.T, steps @ turn.T


def rotate_history_only(history: torch.Tensor, steps: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The BUG: the observed positions are turned; the future displacements are left as recorded."""
    return history @ _rotation().T, steps


# --- positive-unlabelled learning ---------------------------------------------------------------------------
PU_FEATURES, PRIOR, LABELLED = 10, 0.4, 0.3  # 40% of rows are positive; 30% of the positives are labelled


def pu_rows(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``n`` rows (10 features), their hidden class (40% positive; two overlapping clusters per class) and
    whether each is labelled (a random 30% of the positives; everything else is unlabelled):
    (x, positive, labelled)."""
    g = _gen(seed)
    positive = (torch.rand(n, generator=g) < PRIOR).long()
    centres = torch.randn(2, 2, PU_FEATURES, generator=_gen(91)) * 1.1
    mode = torch.randint(2, (n,), generator=g)
    x = centres[positive, mode] + torch.randn(n, PU_FEATURES, generator=g)
    labelled = ((torch.rand(n, generator=g) < LABELLED) & (positive == 1)).float()
    return x, positive, labelled


def pu_training(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """What a PU learner is given: the rows and the labelled flag (the hidden class dropped)."""
    x, _, labelled = pu_rows(n, seed)
    return x, labelled


# --- denoising diffusion on 2-D points ----------------------------------------------------------------------
STEPS_T = 100


def ring(n: int, seed: int) -> tuple[torch.Tensor]:
    """``n`` points of 8 tight Gaussian clusters (std .12) on a circle of radius 1.5."""
    g = _gen(seed)
    angle = 2 * math.pi * torch.randint(8, (n,), generator=g) / 8
    centre = 1.5 * torch.stack([angle.cos(), angle.sin()], 1)
    return (centre + 0.12 * torch.randn(n, 2, generator=g),)


def noise_schedule() -> tuple[torch.Tensor, torch.Tensor]:
    """The linear beta schedule over 100 steps: (alpha_t per step, cumulative product alpha-bar_t)."""
    alphas = 1 - torch.linspace(1e-3, 0.12, STEPS_T)
    return alphas, alphas.cumprod(0)


# --- DNA sequences: a strand-oriented binding motif ---------------------------------------------------------
BASES, LENGTH_DNA = "ACGT", 60  # one-hot channels in this order, so a complement is a flip of the channels
MOTIF = "TGACGCAT"


def encode(text: str) -> torch.Tensor:
    return torch.tensor(["ACGT".index(base) for base in text])


def reverse_complement(one_hot: torch.Tensor) -> torch.Tensor:
    """The other strand read 5' to 3': complement the bases (flip the ACGT channels) and reverse."""
    return one_hot.flip(0, 1)


def sequences(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` one-hot sequences (4, 60) of random bases and whether they bind (half do). A binder carries the
    motif TGACGCAT, on either strand (the motif or its reverse complement), at a random place; a non-binder
    carries the motif read backwards (TACGCAGT, which the factor does not bind: binding is oriented), on
    either strand. A base in the implanted motif is mutated at random 1 time in 10."""
    g = _gen(seed)
    bases = torch.randint(4, (n, LENGTH_DNA), generator=g)
    binds = torch.randint(2, (n,), generator=g)
    motif = encode(MOTIF)
    for row in range(n):
        site = motif if binds[row] else motif.flip(0)
        if torch.rand((), generator=g) < 0.5:
            site = 3 - site.flip(0)  # the other strand
        mutate = torch.rand(len(site), generator=g) < 0.1
        site = torch.where(mutate, torch.randint(4, (len(site),), generator=g), site)
        at = int(torch.randint(LENGTH_DNA - len(site) + 1, (), generator=g))
        bases[row, at : at + len(site)] = site
    return torch.nn.functional.one_hot(bases, 4).float().transpose(1, 2).contiguous(), binds


def reverse_complement_half(one_hot: torch.Tensor, binds: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Augmentation (half the reads): the sequence as read from the other strand."""
    return (reverse_complement(one_hot) if torch.rand(()) < 0.5 else one_hot), binds


def reverse_half(one_hot: torch.Tensor, binds: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The BUG: "the other strand" made by reversing the sequence along its length, without complementing."""
    return (one_hot.flip(1) if torch.rand(()) < 0.5 else one_hot), binds


def window_centred_tracks(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The BUG's stored form: each 20-step window (history and future together) centred on its own mean
    position, as the dataset script did before cutting it into observed and future parts: the centre the
    model reads its history against holds where the future goes."""
    history, future = tracks(n, seed)
    centre = torch.cat([history, future], 1).mean(1, keepdim=True)
    return history - centre, future - centre


# --- learned dynamics: a damped pendulum, rolled out --------------------------------------------------------
DT, STEPS_SIM = 0.1, 30


def pendulum(n: int, seed: int, steps: int = STEPS_SIM) -> torch.Tensor:
    """``n`` trajectories of a damped pendulum, (angle, angular velocity) at ``steps`` instants 0.1 s apart,
    from random starts (angle and velocity in [-2, 2]), integrated with 10 sub-steps: (n, steps, 2)."""
    g = _gen(seed)
    state = 4 * torch.rand(n, 2, generator=g) - 2
    out = [state]
    for _ in range(steps - 1):
        for _ in range(10):
            angle, velocity = state.unbind(-1)
            accel = -9.81 / 1.5 * torch.sin(angle) - 0.3 * velocity
            velocity = velocity + DT / 10 * accel
            state = torch.stack([angle + DT / 10 * velocity, velocity], -1)
        out.append(state)
    return torch.stack(out, 1)


def transitions(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Every consecutive pair (s_t, s_t+1) of ``n`` trajectories, flattened: ((m, 2), (m, 2))."""
    states = pendulum(n, seed)
    return states[:, :-1].reshape(-1, 2), states[:, 1:].reshape(-1, 2)


def transitions_rolled(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The BUG: next states made with ``torch.roll(states, -1, dims=1)``: every trajectory's last state is
    paired with its own first state as if one step followed the other."""
    states = pendulum(n, seed)
    return states.reshape(-1, 2), torch.roll(states, -1, dims=1).reshape(-1, 2)


def state_scales() -> tuple[torch.Tensor, torch.Tensor]:
    """The spread of the states and of the one-step changes in a reference batch of trajectories (the
    normalisers the model's inputs and outputs are scaled by)."""
    state, following = transitions(500, 99)
    return state.std(0), (following - state).std(0)


# --- graph-level classification: small padded graphs --------------------------------------------------------
MAX_NODES, ATOM_TYPES = 16, 4


def molecules(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """``n`` random graphs of 5..16 nodes, padded to 16: one-hot node types (4), a symmetric adjacency
    (a random tree plus a few extra bonds), the node mask and the label: whether the graph has more than 0.12
    bonds between a type-0 and a type-1 node per node (a property of the graph, not of its size)."""
    g = _gen(seed)
    size = torch.randint(5, MAX_NODES + 1, (n,), generator=g)
    types = torch.randint(ATOM_TYPES, (n, MAX_NODES), generator=g)
    mask = torch.arange(MAX_NODES) < size[:, None]
    adj = torch.zeros(n, MAX_NODES, MAX_NODES)
    for row in range(n):
        k = int(size[row])
        for node in range(1, k):
            parent = int(torch.randint(node, (), generator=g))
            adj[row, node, parent] = adj[row, parent, node] = 1.0
        extra = torch.randint(k, (2, 2), generator=g)
        adj[row, extra[0], extra[1]] = adj[row, extra[1], extra[0]] = 1.0
    adj = adj * (1 - torch.eye(MAX_NODES))
    nodes = torch.nn.functional.one_hot(types, ATOM_TYPES).float() * mask[..., None]
    bonds = (nodes[..., 0] * (adj @ nodes[..., 1:2]).squeeze(-1)).sum(1)  # type-0 to type-1 bonds
    return nodes, adj, mask, (bonds / size > 0.12).long()
