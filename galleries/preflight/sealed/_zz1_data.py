"""Sealed gallery ZZ1's data (half ``zz1``): small seeded synthetic sets: queries of graded documents
(learning to rank), graphs of a few communities with noisy node features (node classification), sensor
readings of a healthy machine and of its faults (anomaly detection), images of sharp shapes and their 2x
downsampled copies (super-resolution) and canvases with one shape to classify and box (localisation). Every
builder is deterministic (its own generator); the task's hidden constants come from one fixed generator, the
same for every seed; random augmentation at read time draws from the global RNG."""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch.utils.data import Dataset

from galleries.sealed import gen, loaders

__all__ = ["Rows", "gen", "loaders"]


class Rows(Dataset):
    """Rows of equally long tensors, each read as a tuple, passed through ``transform(*row)`` if given."""

    def __init__(self, *tensors: torch.Tensor, transform: Callable | None = None) -> None:
        self.tensors, self.transform = tensors, transform

    def __len__(self) -> int:
        return len(self.tensors[0])

    def __getitem__(self, i: int):
        row = tuple(t[i] for t in self.tensors)
        return self.transform(*row) if self.transform else row


_HIDDEN = gen(2024)  # the tasks' hidden constants (drawn once, in this order)


# --- learning to rank: queries of 6..12 graded documents ----------------------------------------------------
DOCS, FEATS = 12, 12
_MATCH = torch.randn(4, generator=_HIDDEN)
_QUALITY = torch.randn(4, generator=_HIDDEN)


def queries(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``n`` queries of 6..12 documents padded to 12: features (n, 12, 12), relevance grades 0..4 (n, 12)
    and the mask of real documents (n, 12). A document is relevant (grade >= 1) when its topical match
    (features 0..3) is high; a relevant document's grade (1..4) is set by its quality (features 4..7), a
    direction the match does not tell; features 8..11 are noise. Padding: zero features, grade 0."""
    g = gen(seed)
    size = torch.randint(6, DOCS + 1, (n, 1), generator=g)
    mask = torch.arange(DOCS) < size
    x = torch.randn(n, DOCS, FEATS, generator=g)
    match = x[..., :4] @ _MATCH / _MATCH.norm() + 0.3 * torch.randn(n, DOCS, generator=g)
    quality = x[..., 4:8] @ _QUALITY / _QUALITY.norm() + 0.3 * torch.randn(n, DOCS, generator=g)
    grade = torch.where(match > 0.25, 1 + torch.bucketize(quality, torch.tensor([-0.6, 0.2, 0.9])), 0)
    return x * mask[..., None], grade * mask, mask


def binarised(x: torch.Tensor, grade: torch.Tensor, mask: torch.Tensor):
    """The row with its grade cut to relevant or not (``grade > 0``), as a click log would give it."""
    return x, (grade > 0).long(), mask


def ndcg(order: torch.Tensor, grade: torch.Tensor, k: int = 5) -> torch.Tensor:
    """NDCG@k (gains 2^grade - 1) of each query's served ``order`` (document indices, best first); a query
    with no relevant document scores 1."""
    gains = (2.0 ** grade.gather(1, order[:, :k]) - 1) / torch.log2(torch.arange(k) + 2.0)
    ideal = (2.0 ** grade.sort(-1, descending=True).values[:, :k] - 1) / torch.log2(torch.arange(k) + 2.0)
    dcg, best = gains.sum(-1), ideal.sum(-1)
    return torch.where(best > 0, dcg / best.clamp_min(1e-9), torch.ones_like(dcg))


# --- graph node classification: a few communities per graph -------------------------------------------------
NODES, CLASSES, NODE_FEATS = 32, 4, 8
_CENTRES = F.normalize(torch.randn(CLASSES, NODE_FEATS, generator=_HIDDEN), dim=-1)


def graphs(n: int, seed: int, directed_once: bool = False, labelled: float = 1.0, first: bool = False):
    """``n`` graphs of 32 nodes from a stochastic block model (4 classes; an edge within a class with
    probability 0.4, across with 0.02), their nodes stored community by community: node features (n, 32,
    8) = the class centre plus strong noise (alone they tell the class less than half the time), the
    symmetric 0/1 adjacency (n, 32, 32) without self-loops (each undirected edge stored once, above the
    diagonal, with ``directed_once``), the labels (n, 32) and the mask of labelled nodes (n, 32): a random
    ``labelled`` share (the first nodes in storage order with ``first``); unlabelled nodes carry label 0."""
    g = gen(seed)
    y = torch.randint(CLASSES, (n, NODES), generator=g).sort(-1).values
    same = y[:, :, None] == y[:, None, :]
    upper = (torch.rand(n, NODES, NODES, generator=g) < torch.where(same, 0.4, 0.02)).float().triu(1)
    adj = upper if directed_once else upper + upper.transpose(1, 2)
    x = _CENTRES[y] + 1.3 * torch.randn(n, NODES, NODE_FEATS, generator=g)
    if first:
        known = (torch.arange(NODES) < labelled * NODES).expand(n, NODES)
    else:
        known = torch.rand(n, NODES, generator=g) < labelled
    return x, adj, y * known, known


def shuffle_nodes(x, adj, y, known):
    """The nodes in a random order: features, labels, mask, and the adjacency's rows and columns."""
    p = torch.randperm(NODES)
    return x[p], adj[p][:, p], y[p], known[p]


def shuffle_nodes_keep_graph(x, adj, y, known):
    """The nodes in a random order: features, labels and mask permuted; the adjacency left as read."""
    p = torch.randperm(NODES)
    return x[p], adj, y[p], known[p]


def drop_edges(x, adj, y, known, rate: float = 0.2):
    """DropEdge: each undirected edge removed with probability ``rate`` (both directions together)."""
    keep = (torch.rand(NODES, NODES) >= rate).float().triu(1)
    keep = keep + keep.T
    return x, adj * keep, y, known


# --- anomaly detection: readings of a healthy machine on a 3-d manifold in 24 sensors -----------------------
SENSORS, STATES = 24, 3
_MIX = torch.randn(STATES, SENSORS, generator=_HIDDEN) / math.sqrt(STATES)
_BEND = torch.randn(STATES, SENSORS, generator=_HIDDEN) / math.sqrt(STATES)
_STUCK = torch.randn(SENSORS, generator=_HIDDEN)
NORMAL, FAULT_A, FAULT_B = 0, 1, 2
GAIN = 1.6


def readings(n: int, seed: int, faults: float = 0.0) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` rows of 24 sensors and their status: a healthy machine's rows (status 0) lie near a bent 3-d
    manifold, with sensor noise; a ``faults`` share are fault rows, half of fault A (status 1: a stuck
    valve: the readings sit near one fixed off-manifold state, moving a little), half of fault B (status 2:
    a healthy row whose sensor gains all drifted, scaled by 1.6). The rows are in random order."""
    g = gen(seed)
    status = torch.zeros(n, dtype=torch.long)
    k = int(n * faults)
    status[: k // 2], status[k // 2 : k] = FAULT_A, FAULT_B
    status = status[torch.randperm(n, generator=g)]
    z = torch.randn(n, STATES, generator=g)
    x = z @ _MIX + 0.5 * torch.tanh(z @ _BEND) + 0.1 * torch.randn(n, SENSORS, generator=g)
    x = torch.where((status == FAULT_A)[:, None], _STUCK + 0.3 * x, x)
    return torch.where((status == FAULT_B)[:, None], GAIN * x, x), status


def healthy_rows(n: int, seed: int, drop: tuple[int, ...] = (FAULT_A, FAULT_B)) -> torch.Tensor:
    """The rows of a log of ``n`` readings (a fifth of them faults) whose status is not in ``drop``."""
    x, status = readings(n, seed, faults=0.2)
    return x[~torch.isin(status, torch.tensor(drop))]


def auroc(score: torch.Tensor, anomalous: torch.Tensor) -> float:
    """The area under the ROC curve of ``score`` for telling anomalous rows (ties counted half)."""
    pos, neg = score[anomalous], score[~anomalous]
    greater = (pos[:, None] > neg[None, :]).float().mean()
    ties = (pos[:, None] == neg[None, :]).float().mean()
    return (greater + 0.5 * ties).item()


def with_noise(x: torch.Tensor, sigma: float = 0.2) -> tuple[torch.Tensor, torch.Tensor]:
    """A denoising autoencoder's pair: the row with fresh Gaussian noise, and the clean row."""
    return x + sigma * torch.randn_like(x), x


def as_pair(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """An autoencoder's pair: the row and itself."""
    return x, x


# --- super-resolution: sharp shapes at 16 x 16 from their 8 x 8 area-averaged copies ------------------------
HR = 16


def shapes(n: int, seed: int) -> torch.Tensor:
    """``n`` 16 x 16 images (n, 1, 16, 16) in [0, 1]: up to three sharp-edged rectangles and discs of random
    size, place and brightness over a dim random gradient."""
    g = gen(seed)
    ys, xs = torch.meshgrid(torch.arange(HR).float() + 0.5, torch.arange(HR).float() + 0.5, indexing="ij")
    slope = 0.2 * torch.rand(n, 2, generator=g)
    image = (slope[:, :1, None] * ys + slope[:, 1:, None] * xs) / HR
    for _ in range(3):
        centre = 2 + 12 * torch.rand(n, 2, 1, 1, generator=g)
        half = 1.5 + 3.5 * torch.rand(n, 2, 1, 1, generator=g)
        dy, dx = ys - centre[:, 0], xs - centre[:, 1]
        box = (dy.abs() < half[:, 0]) & (dx.abs() < half[:, 1])
        disc = dy**2 + dx**2 < half[:, 0] ** 2
        shape = torch.where(torch.rand(n, 1, 1, generator=g) < 0.5, box, disc)
        shape &= torch.rand(n, 1, 1, generator=g) < 0.85
        image = torch.where(shape, 0.3 + 0.7 * torch.rand(n, 1, 1, generator=g), image)
    return image[:, None]


def downsample(hr: torch.Tensor) -> torch.Tensor:
    """The camera's low-resolution copy: each 2 x 2 block averaged."""
    return F.avg_pool2d(hr, 2)


def strided(hr: torch.Tensor) -> torch.Tensor:
    """Every second pixel of each row and column (``hr[..., ::2, ::2]``): no averaging."""
    return hr[..., ::2, ::2]


CROP = 10  # the high-resolution crop's side (the low-resolution crop's is 5)


def crop_pair(hr: torch.Tensor, make_input=downsample, even: bool = True, turn: bool = False):
    """(low-resolution input, high-resolution target) for a random 10 x 10 crop of the image: the input made
    from the image by ``make_input`` and cropped at half the target's offset, drawn even (or any, and
    halved rounding down, without ``even``); with ``turn`` the image first gets one of the 8 symmetries of
    the square."""
    if turn:
        hr = hr.rot90(int(torch.randint(4, ())), (-2, -1))
        hr = hr.flip(-1) if torch.rand(()) < 0.5 else hr
    step = 2 if even else 1
    i, j = (step * int(torch.randint((HR - CROP) // step + 1, ())) for _ in range(2))
    low = make_input(hr)[..., i // 2 : i // 2 + CROP // 2, j // 2 : j // 2 + CROP // 2]
    return low, hr[..., i : i + CROP, j : j + CROP]


# --- single-object localisation on a 24 x 32 canvas ---------------------------------------------------------
H, W, KINDS = 24, 32, 3  # kinds: 0 square, 1 disc, 2 cross (class 3, "nothing", only in ``empty`` canvases)
SCALE = torch.tensor([W, H, W, H]).float()
_MIRROR = torch.tensor([-1.0, 1, -1, 1]), torch.tensor([1.0, 0, 1, 0])


def canvases(n: int, seed: int, empty: float = 0.0):
    """``n`` noisy 24 x 32 canvases (n, 1, 24, 32) with one shape (a square, a disc or a cross, 6..14 pixels
    wide, anywhere, of random brightness) and a few faint strokes as clutter; the class (n,) and the box as a
    list of one box, as detection datasets store them (n, 1, 4): (x_min, y_min, x_max, y_max) over the
    canvas width and height, in [0, 1]. With ``empty``, that share of canvases has no shape: class 3 and the
    box (0, 0, 0, 0)."""
    g = gen(seed)
    kind = torch.randint(KINDS, (n,), generator=g)
    size = 8 + 6 * torch.rand(n, generator=g)
    x0 = torch.rand(n, generator=g) * (W - size)
    y0 = torch.rand(n, generator=g) * (H - size)
    ys, xs = torch.meshgrid(torch.arange(H).float() + 0.5, torch.arange(W).float() + 0.5, indexing="ij")
    u = (xs - x0[:, None, None]) / size[:, None, None]  # 0..1 across the box
    v = (ys - y0[:, None, None]) / size[:, None, None]
    inside = (u > 0) & (u < 1) & (v > 0) & (v < 1)
    disc = (u - 0.5) ** 2 + (v - 0.5) ** 2 < 0.25
    cross = inside & (((u - 0.5).abs() < 0.17) | ((v - 0.5).abs() < 0.17))
    which = kind[:, None, None]
    shape = torch.where(which == 0, inside, torch.where(which == 1, disc, cross))
    image = 0.2 * torch.randn(n, H, W, generator=g)
    for _ in range(3):  # faint strokes
        row = torch.randint(H, (n, 1, 1), generator=g)
        image += 0.3 * (ys.long() == row) * (torch.rand(n, 1, W, generator=g) < 0.5)
    image += (0.8 + 0.6 * torch.rand(n, 1, 1, generator=g)) * shape
    box = torch.stack([x0, y0, x0 + size, y0 + size], -1) / SCALE
    if empty:
        none = torch.rand(n, generator=g) < empty
        image = torch.where(none[:, None, None], 0.2 * torch.randn(n, H, W, generator=g), image)
        kind, box = torch.where(none, KINDS, kind), box * ~none[:, None]
    return image[:, None], kind, box[:, None]


def flip(image: torch.Tensor, kind: torch.Tensor, box: torch.Tensor):
    """Mirrored left-right half the time, the box mirrored with it (x_min and x_max swap)."""
    if torch.rand(()) < 0.5:
        return image.flip(-1), kind, (box * _MIRROR[0] + _MIRROR[1])[..., [2, 1, 0, 3]]
    return image, kind, box


def flip_without_swap(image: torch.Tensor, kind: torch.Tensor, box: torch.Tensor):
    """Mirrored left-right half the time, each x coordinate mirrored where it stands (x -> 1 - x)."""
    if torch.rand(()) < 0.5:
        return image.flip(-1), kind, box * _MIRROR[0] + _MIRROR[1]
    return image, kind, box


def shift(image: torch.Tensor, kind: torch.Tensor, box: torch.Tensor):
    """Moved by up to 4 pixels each way (a shape never past the canvas's edge), the box moved with it; an
    empty canvas keeps its empty box."""
    if kind == KINDS:
        dx, dy = (int(torch.randint(-4, 5, ())) for _ in range(2))
        return torch.roll(image, (dy, dx), (-2, -1)), kind, box
    room_before, room_after = (box[0, :2] * SCALE[:2]).tolist(), ((1 - box[0, 2:]) * SCALE[:2]).tolist()
    dx, dy = (
        int(torch.randint(max(-4, -math.floor(a)), min(4, math.floor(b)) + 1, ()))
        for a, b in zip(room_before, room_after, strict=True)
    )
    moved = torch.roll(image, (dy, dx), (-2, -1))
    return moved, kind, box + torch.tensor([dx / W, dy / H, dx / W, dy / H])


def iou(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """The intersection over union of boxes (..., 4) as (x_min, y_min, x_max, y_max), box by box (0 for an
    inverted box)."""
    w = (torch.minimum(a[..., 2], b[..., 2]) - torch.maximum(a[..., 0], b[..., 0])).clamp_min(0)
    h = (torch.minimum(a[..., 3], b[..., 3]) - torch.maximum(a[..., 1], b[..., 1])).clamp_min(0)
    inter = w * h
    return inter / (_area(a) + _area(b) - inter).clamp_min(1e-9)


def _area(box: torch.Tensor) -> torch.Tensor:
    return (box[..., 2] - box[..., 0]).clamp_min(0) * (box[..., 3] - box[..., 1]).clamp_min(0)
