"""Sealed gallery J's data: small seeded synthetic sets (video clips of a moving blob, keyword-spotting
feature frames, item sessions from a Markov chain, a community graph split into edges, 3-D poses seen in 2-D,
tagged token documents and noisy speech spectrograms). Every builder is deterministic (its own generator);
random augmentation at read time draws from the global RNG."""

from __future__ import annotations

import math

import torch

from galleries.preflight.sealed._e_data import Rows
from galleries.sealed import gen as _gen
from galleries.sealed import loaders

__all__ = ["Rows", "loaders"]


# --- video clips: a blob moving right, left, down or up -----------------------------------------------------
SIDE, FRAMES, KEPT, SPEED = 12, 12, 6, 0.5
VAL_FRAMES = torch.arange(0, FRAMES, FRAMES // KEPT)


def clips(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` clips of 12 frames (1 x 12 x 12) of a Gaussian blob that moves half a pixel per frame in one of
    four directions (the label: 0 right, 1 left, 2 down, 3 up), with pixel noise. A clip moving right covers
    the same pixels as one moving left: only the order of the frames tells them apart."""
    g = _gen(seed)
    label = torch.randint(4, (n,), generator=g)
    travel = SPEED * (FRAMES - 1)
    forward = label % 2 == 0
    start = torch.where(forward, 2.0, 2.0 + travel) + 2 * torch.rand(n, generator=g)
    across = 2 + 8 * torch.rand(n, generator=g)
    step = torch.where(forward, SPEED, -SPEED)
    along = start[:, None] + step[:, None] * torch.arange(FRAMES)
    horizontal = (label < 2)[:, None]
    col = torch.where(horizontal, along, across[:, None])
    row = torch.where(horizontal, across[:, None], along)
    grid = torch.arange(SIDE).float()
    bump_r = torch.exp(-((grid - row[..., None]) ** 2) / 2)  # (n, frames, side)
    bump_c = torch.exp(-((grid - col[..., None]) ** 2) / 2)
    noise = 0.15 * torch.randn(n, FRAMES, SIDE, SIDE, generator=g)
    video = bump_r[..., :, None] * bump_c[..., None, :] + noise
    return video[:, None], label  # (n, 1, frames, side, side)


def sample_frames(clip: torch.Tensor, label: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Segment-style sampling (a fresh draw per read): 6 of the 12 frames, kept in time order."""
    keep = torch.randperm(FRAMES)[:KEPT].sort().values
    return clip[:, keep], label


def sample_frames_unsorted(clip: torch.Tensor, label: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The BUG: 6 of the 12 frames drawn with ``randperm`` and used in the order drawn, not in time order."""
    keep = torch.randperm(FRAMES)[:KEPT]
    return clip[:, keep], label


def evenly_spaced(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Validation and held-out clips: every other frame, in order."""
    video, label = clips(n, seed)
    return video[:, :, VAL_FRAMES].clone(), label


# --- keyword spotting: 40 frames of 12 filterbank energies --------------------------------------------------
STEPS, BINS, WORD = 40, 12, 10
KEYWORDS, OTHER_WORDS = 5, 10
SILENCE, UNKNOWN = 0, 1  # classes 2..6 are the keywords


def _templates() -> torch.Tensor:
    """The spectro-temporal patterns of the 5 keywords and 10 other words, (15, 10 frames, 12 bins)."""
    smooth = torch.randn(KEYWORDS + OTHER_WORDS, WORD, BINS, generator=_gen(71)).cumsum(1) / 2
    return smooth - smooth.mean((1, 2), keepdim=True)


def background(n: int, g: torch.Generator) -> torch.Tensor:
    """Room noise: a random spectral tilt and level per clip plus frame-to-frame jitter."""
    tilt = torch.randn(n, 1, 1, generator=g) * torch.linspace(-1, 1, BINS)
    level = 0.5 * torch.randn(n, 1, 1, generator=g)
    return tilt + level + 0.4 * torch.randn(n, STEPS, BINS, generator=g)


def utterances(n: int, seed: int, digital_silence: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` clips (40 frames x 12 bins) and their class: 0 silence (room noise only), 1 unknown (one of 10
    other words), 2..6 a keyword; a word is spoken at a random gain and onset over the room noise. With
    ``digital_silence`` (the BUG) the silence clips are generated as ``torch.zeros``, not as recorded room
    noise."""
    g = _gen(seed)
    label = torch.randint(KEYWORDS + 2, (n,), generator=g)
    word = torch.where(
        label >= 2, label - 2, KEYWORDS + torch.randint(OTHER_WORDS, (n,), generator=g)
    )  # the template spoken
    x = background(n, g)
    onset = torch.randint(0, STEPS - WORD + 1, (n,), generator=g)
    gain = 1.0 + torch.rand(n, generator=g)
    frames = onset[:, None] + torch.arange(WORD)
    spoken = label != SILENCE
    rows = torch.arange(n)[:, None].expand(-1, WORD)
    x[rows[spoken], frames[spoken]] += gain[spoken, None, None] * _templates()[word[spoken]]
    if digital_silence:
        x[~spoken] = 0.0
    return x, label


def time_shift(x: torch.Tensor, label: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Augmentation: a random circular shift of up to 5 frames either way (a fresh draw per read)."""
    return torch.roll(x, int(torch.randint(-5, 6, ())), dims=0), label


# --- item sessions (sequential recommendation) --------------------------------------------------------------
ITEMS, SESSION = 40, 13  # item ids 1..40; 0 pads


def _transitions() -> torch.Tensor:
    """A sparse Markov chain over the items: each item leads to 3 successors with probabilities .65/.25/.1."""
    g = _gen(61)
    table = torch.zeros(ITEMS + 1, ITEMS + 1)
    for item in range(1, ITEMS + 1):
        table[item, 1 + torch.randperm(ITEMS, generator=g)[:3]] = torch.tensor([0.65, 0.25, 0.1])
    return table


def sessions(n: int, seed: int) -> tuple[torch.Tensor]:
    """``n`` sessions of 13 item ids (1..40) walked along the chain from a random first item."""
    g, table = _gen(seed), _transitions()
    items = torch.empty(n, SESSION, dtype=torch.long)
    items[:, 0] = torch.randint(1, ITEMS + 1, (n,), generator=g)
    for t in range(1, SESSION):
        items[:, t] = torch.multinomial(table[items[:, t - 1]], 1, generator=g).squeeze(1)
    return (items,)


def short_sessions(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Sessions of 4..13 items, right-padded with 0 to 13, and their lengths."""
    (items,) = sessions(n, seed)
    length = torch.randint(4, SESSION + 1, (n,), generator=_gen(seed + 500))
    items[torch.arange(SESSION) >= length[:, None]] = 0
    return items, length


# --- link prediction on a community graph -------------------------------------------------------------------
NODES, GROUPS, NODE_FEATURES = 240, 8, 16


@torch.no_grad()
def community_graph() -> dict[str, torch.Tensor]:
    """A stochastic block model: 240 nodes in 8 communities (edge probability .25 within, .006 across), node
    features that hint at the community under heavy noise, and the undirected edges (i < j) split at random
    into training (70%), validation (10%) and held-out test (20%) edges."""
    g = _gen(51)
    group = torch.arange(NODES) % GROUPS
    same = group[:, None] == group[None]
    p = torch.where(same, 0.25, 0.006)
    upper = torch.triu(torch.rand(NODES, NODES, generator=g) < p, diagonal=1)
    edges = upper.nonzero()
    edges = edges[torch.randperm(len(edges), generator=g)]
    cut1, cut2 = int(0.7 * len(edges)), int(0.8 * len(edges))
    centres = torch.randn(GROUPS, NODE_FEATURES, generator=g)
    x = 0.6 * centres[group] + torch.randn(NODES, NODE_FEATURES, generator=g)
    negatives = torch.randint(NODES, (2, len(edges) - cut1, 2), generator=g)
    return {
        "x": x,
        "train": edges[:cut1],
        "val": edges[cut1:cut2],
        "test": edges[cut2:],
        "val_negatives": negatives[0],
        "test_negatives": negatives[1],
    }


def scored_edges(part: str) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The ``part``'s positive edges and as many fixed random node pairs as negatives: (src, dst, label)."""
    graph = community_graph()
    pos, neg = graph[part], graph[f"{part}_negatives"][: len(graph[part])]
    pairs = torch.cat([pos, neg])
    return pairs[:, 0], pairs[:, 1], torch.cat([torch.ones(len(pos)), torch.zeros(len(neg))])


# --- 3-D pose from 2-D keypoints ----------------------------------------------------------------------------
JOINTS = (
    "pelvis",
    "neck",
    "head",
    "nose",
    "l_shoulder",
    "l_hand",
    "r_shoulder",
    "r_hand",
    "l_foot",
    "r_foot",
)
MIRROR = (0, 1, 2, 3, 6, 7, 4, 5, 9, 8)  # each joint's left/right counterpart


def _arm(n: int, g: torch.Generator, side: float) -> torch.Tensor:
    """Hand offsets from the shoulder: length .5, pointing forward-ish (z > 0), outward or inward."""
    d = torch.stack(
        [
            side * torch.randn(n, generator=g) * 0.7,
            torch.randn(n, generator=g),
            torch.rand(n, generator=g) + 0.3,
        ],
        1,
    )
    return 0.5 * d / d.norm(dim=1, keepdim=True)


def poses(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` people (body frame: x their left, y up, z forward) turned by a random yaw and seen by an
    orthographic camera looking along z: the 2-D keypoints (x, y) with noise .01 and the 3-D joints in camera
    coordinates, both relative to the pelvis: ((n, 10, 2), (n, 10, 3)). The 2-D view fixes the turn only
    through which side each named joint lies on, so the depth of the nose and hands depends on left and
    right being told apart."""
    g = _gen(seed)
    body = torch.zeros(n, len(JOINTS), 3)
    body[:, 1] = torch.tensor([0.0, 0.5, 0.0])
    body[:, 2] = torch.tensor([0.0, 0.7, 0.0])
    body[:, 3] = torch.tensor([0.0, 0.7, 0.15])
    body[:, 4] = torch.tensor([0.2, 0.5, 0.0])
    body[:, 6] = torch.tensor([-0.2, 0.5, 0.0])
    body[:, 5] = body[:, 4] + _arm(n, g, 1.0)
    body[:, 7] = body[:, 6] + _arm(n, g, -1.0)
    stride = 0.3 * torch.randn(n, generator=g)
    body[:, 8] = torch.stack([torch.full((n,), 0.12), torch.full((n,), -0.8), stride], 1)
    body[:, 9] = torch.stack([torch.full((n,), -0.12), torch.full((n,), -0.8), -stride], 1)
    yaw = (2 * torch.rand(n, generator=g) - 1) * math.pi
    cos, sin = yaw.cos()[:, None], yaw.sin()[:, None]
    x, y, z = body.unbind(-1)
    camera = torch.stack([x * cos + z * sin, y, -x * sin + z * cos], -1)
    return camera[..., :2] + 0.01 * torch.randn(n, len(JOINTS), 2, generator=g), camera


def raw_keypoints(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Held-out people as a detector hands them over: 2-D keypoints in image coordinates (the pelvis anywhere
    in the frame), and the pelvis-relative 3-D joints to compare with."""
    keypoints, joints = poses(n, seed)
    return keypoints + 2 * torch.rand(n, 1, 2, generator=_gen(seed + 500)) - 1, joints


def flip(keypoints: torch.Tensor, joints: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Augmentation (half the reads): mirror the person left-right, negating x and swapping each joint with
    its left/right counterpart, in the keypoints and the 3-D target alike."""
    if torch.rand(()) < 0.5:
        sign = torch.tensor([-1.0, 1.0, 1.0])
        return keypoints[list(MIRROR)] * sign[:2], joints[list(MIRROR)] * sign
    return keypoints, joints


def flip_without_swap(keypoints: torch.Tensor, joints: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The BUG: the mirror negates x but keeps every joint's name, so a mirrored left hand is still called
    the left hand."""
    if torch.rand(()) < 0.5:
        sign = torch.tensor([-1.0, 1.0, 1.0])
        return keypoints * sign[:2], joints * sign
    return keypoints, joints


# --- multi-label tagging of token documents -----------------------------------------------------------------
VOCAB, TAGS, LENGTH, MAX_TAGS = 1000, 6, 24, 3
TAG_RATES = (0.35, 0.3, 0.25, 0.2, 0.15, 0.1)


def documents(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` documents of 24 token ids (1..999) and their tags as a multi-hot (n, 6). Each tag has 12 cue
    words; a tagged document holds 3 of its cues among background words (which can be any word, cues
    included). At most 3 tags a document; about 1 in 5 documents has none."""
    g = _gen(seed)
    tagged = torch.rand(n, TAGS, generator=g) < torch.tensor(TAG_RATES)
    order = torch.rand(n, TAGS, generator=g).argsort(1)  # surplus tags are dropped at random
    kept = torch.zeros_like(tagged)
    for row in range(n):
        active = [t for t in order[row].tolist() if tagged[row, t]][:MAX_TAGS]
        kept[row, active] = True
    tokens = torch.randint(1, VOCAB, (n, LENGTH), generator=g)
    cues = 1 + torch.randperm(VOCAB - 1, generator=_gen(41))[: TAGS * 12].view(TAGS, 12)
    for row in range(n):
        slots = torch.randperm(LENGTH, generator=g)
        for i, tag in enumerate(kept[row].nonzero().flatten().tolist()):
            pick = torch.randint(12, (3,), generator=g)
            tokens[row, slots[3 * i : 3 * i + 3]] = cues[tag, pick]
    return tokens, kept.float()


def tag_lists(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The same documents with their tags as the annotation tool exports them: a list of tag ids per document,
    padded with 0 to 3 entries, and how many are real."""
    tokens, multi_hot = documents(n, seed)
    ids = torch.zeros(n, MAX_TAGS, dtype=torch.long)
    count = multi_hot.sum(1).long()
    for row in range(n):
        ids[row, : count[row]] = multi_hot[row].nonzero().flatten()
    return tokens, ids, count


def to_multi_hot(tokens: torch.Tensor, ids: torch.Tensor, count: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Per read: the tag ids scattered into a multi-hot, the padding slots left out."""
    real = torch.arange(MAX_TAGS) < count
    return tokens, torch.zeros(TAGS).index_put_((ids[real],), torch.ones(int(real.sum())))


def to_multi_hot_with_padding(tokens: torch.Tensor, ids: torch.Tensor, count: torch.Tensor):
    """The BUG: the padded id list is scattered whole, so every document with fewer than 3 tags gains tag 0
    from its padding."""
    return tokens, torch.zeros(TAGS).scatter_(0, ids, 1.0)


# --- speech enhancement: magnitude spectrograms of speech in noise ------------------------------------------
FRAMES_S, BANDS = 32, 16


def noisy_speech(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` pairs of magnitude spectrograms (32 frames x 16 bands): the noisy mixture and the clean speech in
    it. Speech: 1..5 harmonics of a per-clip pitch, voiced in syllables (on/off runs of frames); noise: a
    tilted, flickering floor at a random level; each clip recorded at a random gain between .5 and 4."""
    g = _gen(seed)
    bands = torch.arange(BANDS).float()
    pitch = 1.5 + 1.5 * torch.rand(n, 1, generator=g)
    harmonics = torch.arange(1, 6).float()
    weight = torch.rand(n, 5, generator=g)
    profile = (weight[..., None] * torch.exp(-((bands - pitch[..., None] * harmonics[:, None]) ** 2))).sum(1)
    voiced = (torch.rand(n, FRAMES_S // 4, generator=g) < 0.6).float().repeat_interleave(4, 1)
    clean = voiced[..., None] * profile[:, None, :]
    tilt = torch.exp(torch.randn(n, 1, 1, generator=g) * torch.linspace(-0.5, 0.5, BANDS))
    level = 0.2 + 0.6 * torch.rand(n, 1, 1, generator=g)
    noise = level * tilt * (1 + 0.3 * torch.randn(n, FRAMES_S, BANDS, generator=g)).abs()
    gain = torch.exp(math.log(0.5) + math.log(8) * torch.rand(n, 1, 1, generator=g))
    return gain * (clean + noise), gain * clean


def peak_normalise(mixture: torch.Tensor, clean: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per read: the pair divided by the mixture's peak (the recording level is not the model's business)."""
    peak = mixture.amax()
    return mixture / peak, clean / peak


def peak_normalise_input_only(
    mixture: torch.Tensor, clean: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """The BUG: the mixture is divided by its peak and the clean target is left at the recording level."""
    return mixture / mixture.amax(), clean
