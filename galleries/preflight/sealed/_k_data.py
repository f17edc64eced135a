"""Sealed gallery K's data: small seeded synthetic sets (frame pairs of drifting blobs for optical-flow-like
regression, two-channel weather-like grids advected by a wind, a query and document corpus with mined hard
negatives, tone clips with captions) and scikit-learn's digits (an actively labelled pool, and a few labels
among many unlabelled rows). Every builder is deterministic (its own generator); random augmentation at read
time draws from the global RNG."""

from __future__ import annotations

import math
from functools import cache

import torch
import torch.nn.functional as F

from galleries.preflight.sealed._e_data import Rows
from galleries.sealed import digits, loaders, mlp
from galleries.sealed import gen as _gen

__all__ = ["Rows", "digits", "loaders"]


# --- optical-flow-like regression: a frame pair and the motion between them ---------------------------------
SIDE, PAD, BLOBS = 16, 2, 6


def blob_pairs(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` pairs of 20x20 frames of 6 Gaussian blobs (random places, widths and signed brightness) and the
    motion (u, v) in pixels, each in [-2, 2], that carries the first frame into the second (u along the
    columns, v along the rows): (frames (n, 2, 20, 20), flow (n, 2))."""
    g = _gen(seed)
    side = SIDE + 2 * PAD
    centres = torch.rand(n, BLOBS, 2, generator=g) * side
    sign = torch.where(torch.rand(n, BLOBS, generator=g) < 0.5, -1.0, 1.0)
    brightness = sign * (0.5 + torch.rand(n, BLOBS, generator=g))
    width = 1.0 + 1.5 * torch.rand(n, BLOBS, generator=g)
    flow = 4 * torch.rand(n, 2, generator=g) - 2
    rows, cols = torch.meshgrid(torch.arange(float(side)), torch.arange(float(side)), indexing="ij")

    def render(at: torch.Tensor) -> torch.Tensor:
        d2 = (cols - at[..., 0, None, None]) ** 2 + (rows - at[..., 1, None, None]) ** 2
        return (brightness[..., None, None] * torch.exp(-d2 / (2 * width[..., None, None] ** 2))).sum(1)

    return torch.stack([render(centres), render(centres + flow[:, None])], 1), flow


def centre_crop(frames: torch.Tensor, flow: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The central 16x16 window of both frames (validation and serving)."""
    return frames[..., PAD : PAD + SIDE, PAD : PAD + SIDE], flow


def _crop(frame: torch.Tensor, top: int, left: int) -> torch.Tensor:
    return frame[..., top : top + SIDE, left : left + SIDE]


def jitter_and_flip(frames: torch.Tensor, flow: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Training augmentation: one random 16x16 crop of the pair (both frames at the same place) and a
    horizontal flip half the time, which mirrors the motion too: u changes sign."""
    top, left = torch.randint(0, 2 * PAD + 1, (2,)).tolist()
    frames = _crop(frames, top, left)
    if torch.rand(()) < 0.5:
        frames, flow = frames.flip(-1), flow * torch.tensor([-1.0, 1.0])
    return frames, flow


def jitter_and_flip_keep_flow(frames: torch.Tensor, flow: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The BUG: the image recipe's flip (frames only): the flipped pairs move the other way along the
    columns, but their target still says u."""
    top, left = torch.randint(0, 2 * PAD + 1, (2,)).tolist()
    frames = _crop(frames, top, left)
    if torch.rand(()) < 0.5:
        frames = frames.flip(-1)
    return frames, flow


def jitter_each_frame(frames: torch.Tensor, flow: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The BUG: the random crop is applied to each frame on its own (a per-image transform mapped over the
    pair), so the two crops differ and their offset adds a random shift to the motion the target states."""
    crops = [_crop(frame, *torch.randint(0, 2 * PAD + 1, (2,)).tolist()) for frame in frames]
    frames = torch.stack(crops)
    if torch.rand(()) < 0.5:
        frames, flow = frames.flip(-1), flow * torch.tensor([-1.0, 1.0])
    return frames, flow


# --- weather-like grids: two fields advected by a wind ------------------------------------------------------
GRID, WAVES = 12, 3
TEMPERATURE, PRESSURE = (285.0, 8.0), (1010.0, 4.0)  # kelvin, hectopascal: (mean, spread)
GAPS = 0.08


def _field(g: torch.Generator, n: int, wind: torch.Tensor, steps: int) -> torch.Tensor:
    """A periodic field of 3 plane waves per sample, carried by the sample's wind: (n, steps, 12, 12), unit
    spread."""
    k = torch.randint(-2, 3, (n, WAVES, 2), generator=g).float()
    k[(k == 0).all(-1)] = torch.tensor([1.0, 0.0])
    amplitude = 0.5 + torch.rand(n, WAVES, generator=g)
    phase = 2 * math.pi * torch.rand(n, WAVES, generator=g)
    cells = torch.arange(float(GRID))
    y, x = torch.meshgrid(cells, cells, indexing="ij")
    frames = []
    for t in range(steps):
        shift_x, shift_y = (x - wind[:, 0, None, None] * t), (y - wind[:, 1, None, None] * t)
        arg = k[..., 0, None, None] * shift_x[:, None] + k[..., 1, None, None] * shift_y[:, None]
        waves = amplitude[..., None, None] * torch.cos(2 * math.pi / GRID * arg + phase[..., None, None])
        frames.append(waves.sum(1))
    field = torch.stack(frames, 1)
    return field / amplitude.pow(2).sum(1).div(2).sqrt()[:, None, None, None]


def weather(n: int, seed: int, gaps: float = GAPS) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` samples of a temperature (K) and a pressure (hPa) field on a periodic 12x12 grid, carried by a
    wind of up to one cell a step: (the two past frames (n, 2, 2, 12, 12), the next frame (n, 2, 12, 12)).
    The next frame is an observation with gaps: a share ``gaps`` of its cells is NaN (stations down)."""
    g = _gen(seed)
    wind = 2 * torch.rand(n, 2, generator=g) - 1
    temperature = TEMPERATURE[0] + TEMPERATURE[1] * _field(g, n, wind, 3)
    pressure = PRESSURE[0] + PRESSURE[1] * _field(g, n, wind, 3)
    frames = torch.stack([temperature, pressure], 2)
    past, future = frames[:, :2].clone(), frames[:, 2].clone()
    future[torch.rand(future.shape, generator=g) < gaps] = float("nan")
    return past, future


def filled_with_zero(past: torch.Tensor, future: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The BUG: the gaps are filled with 0 (``nan_to_num``) so that the loss stays finite."""
    return past, torch.nan_to_num(future)


@cache
def weather_stats() -> tuple[torch.Tensor, torch.Tensor]:
    """Per-channel mean and spread of the training frames (the two past frames of ``weather(1500, 1)``)."""
    past, _ = weather(1500, 1)
    return past.mean(dim=(0, 1, 3, 4)), past.std(dim=(0, 1, 3, 4))


@cache
def weather_stats_global() -> tuple[torch.Tensor, torch.Tensor]:
    """The BUG: one mean and spread over the whole tensor, as for images, both channels pooled."""
    past, _ = weather(1500, 1)
    return past.mean().expand(2).clone(), past.std().expand(2).clone()


# --- retrieval with mined hard negatives --------------------------------------------------------------------
PRODUCTS, PARAPHRASES, LATENT, RAW = 250, 4, 12, 32
QUERIES_PER_PRODUCT, MINED = 4, 4
NOISE = 0.3


@cache
def _catalogue() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The products' latents and the fixed maps from a latent to raw document and query features."""
    g = _gen(101)
    latent = torch.randn(PRODUCTS, LATENT, generator=g)
    return latent, torch.randn(LATENT, RAW, generator=g), torch.randn(LATENT, RAW, generator=g)


def _raw(latent: torch.Tensor, to_raw: torch.Tensor, g: torch.Generator) -> torch.Tensor:
    noisy = latent + NOISE * torch.randn(latent.shape, generator=g)
    return torch.tanh(noisy @ to_raw / math.sqrt(LATENT))


@cache
def corpus() -> tuple[torch.Tensor, torch.Tensor]:
    """A catalogue of 250 products, 4 documents each (paraphrases: the product's latent plus noise, through a
    fixed non-linear map to 32 raw features): (documents (1000, 32), their product)."""
    latent, to_doc, _ = _catalogue()
    product = torch.arange(PRODUCTS).repeat_interleave(PARAPHRASES)
    return _raw(latent[product], to_doc, _gen(102)), product


def queries(n_per_product: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``n_per_product`` queries for every product (its latent plus noise, through the query map): (queries
    (n, 32), product)."""
    latent, _, to_query = _catalogue()
    product = torch.arange(PRODUCTS).repeat(n_per_product)
    return _raw(latent[product], to_query, _gen(seed)), product


def first_stage_scores(query_product: torch.Tensor, seed: int) -> torch.Tensor:
    """What the first-stage retriever (a lexical ranker) scored each document for each query: close to the
    products' true relatedness, with noise (queries x documents)."""
    g = _gen(seed)
    _, product = corpus()
    latent = _catalogue()[0]
    related = F.normalize(latent, dim=1) @ F.normalize(latent, dim=1).T
    return related[query_product][:, product] + 0.3 * torch.randn(
        len(query_product), len(product), generator=g
    )


def mined_rows(n_per_product: int, seed: int, exclude: str = "product") -> tuple[torch.Tensor, ...]:
    """Training rows: (query, the positive document's features, 4 hard negatives' features). The positive is
    the listing the click logs point at, the product's first document; the negatives are the first stage's
    top-ranked documents for the query, excluding every document of the query's product
    (``exclude="product"``), or, the BUG (``exclude="positive"``), only the clicked document itself: the
    product's other listings rank top and become the hard 'negatives'."""
    documents, product = corpus()
    query, query_product = queries(n_per_product, seed)
    positive = query_product * PARAPHRASES  # the listing the click logs point at: each product's first
    scores = first_stage_scores(query_product, seed + 700)
    rows = torch.arange(len(query))
    if exclude == "product":
        scores[product[None, :] == query_product[:, None]] = -math.inf
    else:
        scores[rows, positive] = -math.inf
    negatives = scores.topk(MINED, dim=1).indices
    return query, documents[positive], documents[negatives]


# --- contrastive audio-text: tone clips and their captions --------------------------------------------------
SAMPLES = 256
PITCHES = {"low": (0.02, 0.04), "mid": (0.06, 0.09), "high": (0.13, 0.2)}  # cycles per sample
WORDS = {
    "low": ["low", "deep", "bass"],
    "mid": ["mid", "medium", "middle"],
    "high": ["high", "shrill", "treble"],
    "steady": ["steady", "constant", "smooth"],
    "pulsed": ["pulsed", "beeping", "pulsing"],
    "buzzy": ["buzzy", "harsh", "raspy"],
}
PATTERNS = ("steady", "pulsed", "buzzy")
ARTICLES, NOUNS = ["a", "the", "one"], ["tone", "sound", "noise"]
VOCAB = ["<pad>", *ARTICLES, *NOUNS, *(word for words in WORDS.values() for word in words)]
CAPTION = 4


def _tokens(words: list[str]) -> torch.Tensor:
    return torch.tensor([VOCAB.index(word) for word in words])


def clips(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``n`` clips of 256 samples: a tone of a pitch band (low, mid, high), steady, pulsed or buzzy (with
    harmonics), at a random phase and loudness, in noise; a caption naming its pitch and pattern with random
    synonyms, in either order ("a deep beeping sound", "the harsh treble tone"); and its class (pitch x 3 +
    pattern): (clips, caption tokens (n, 4), class)."""
    g = _gen(seed)
    pitch, pattern = torch.randint(3, (n,), generator=g), torch.randint(3, (n,), generator=g)
    bands = torch.tensor(list(PITCHES.values()))
    low, high = bands[pitch, 0], bands[pitch, 1]
    frequency = low + (high - low) * torch.rand(n, generator=g)
    t = torch.arange(float(SAMPLES))
    phase = 2 * math.pi * torch.rand(n, 1, generator=g)
    wave = torch.sin(2 * math.pi * frequency[:, None] * t + phase)
    harmonics = 0.6 * torch.sin(4 * math.pi * frequency[:, None] * t) + 0.4 * torch.sin(
        6 * math.pi * frequency[:, None] * t
    )
    wave = torch.where((pattern == 2)[:, None], wave + harmonics, wave)
    gate = ((t // 24) % 2 == 0).float()
    wave = torch.where((pattern == 1)[:, None], wave * gate, wave)
    loudness = 0.5 + torch.rand(n, 1, generator=g)
    audio = loudness * wave + 0.3 * torch.randn(n, SAMPLES, generator=g)
    pitch_names, captions = list(PITCHES), []
    for p, q in zip(pitch.tolist(), pattern.tolist(), strict=True):
        pick = torch.randint(3, (4,), generator=g).tolist()
        adjectives = [WORDS[pitch_names[p]][pick[0]], WORDS[PATTERNS[q]][pick[1]]]
        if pick[3] == 0:
            adjectives.reverse()
        captions.append(_tokens([ARTICLES[pick[2]], *adjectives, NOUNS[pick[3]]]))
    return audio, torch.stack(captions), pitch * 3 + pattern


def class_prompts() -> torch.Tensor:
    """One caption per class, "a {pitch} {pattern} sound" in the first synonyms (zero-shot prompts)."""
    return torch.stack([_tokens(["a", WORDS[p][0], WORDS[q][0], "sound"]) for p in PITCHES for q in PATTERNS])


def gain_and_shift(audio: torch.Tensor, caption: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Training augmentation: a random gain (0.5x to 2x) and a random circular time shift (what a caption
    of pitch and pattern does not describe)."""
    gain = 0.5 + 1.5 * torch.rand(())
    return gain * torch.roll(audio, int(torch.randint(SAMPLES, ()))), caption


def speed_perturb(audio: torch.Tensor, caption: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The BUG: the speech recipe's speed perturbation (resampling by 0.5x to 2x, then cropped or tiled back
    to 256 samples): it also moves the pitch by up to an octave either way, which the caption names."""
    rate = 2 ** (2 * torch.rand(()) - 1)
    length = int(SAMPLES / rate)
    resampled = F.interpolate(audio[None, None], size=length, mode="linear", align_corners=False)[0, 0]
    audio = resampled.repeat(math.ceil(SAMPLES / length))[:SAMPLES]
    return gain_and_shift(audio, caption)


# --- active learning: an uncertainty-sampled labelled set ---------------------------------------------------
SEED_LABELS, BUDGET = 40, 160


@cache
def seed_model() -> torch.nn.Module:
    """The round-0 model of the labelling loop: an MLP fitted on 40 randomly labelled pool digits (built apart
    from the global RNG)."""
    with torch.random.fork_rng():
        torch.manual_seed(202)
        net = mlp(64, 64, 10)
        optimizer = torch.optim.Adam(net.parameters(), lr=1e-2)
        x, y = digits("train")
        seed_rows = torch.randperm(len(y), generator=_gen(203))[:SEED_LABELS]
        for _ in range(300):
            optimizer.zero_grad()
            F.cross_entropy(net(x[seed_rows]), y[seed_rows]).backward()
            optimizer.step()
    return net.eval()


def acquired(most_uncertain: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """The labelled set after one acquisition round: the 40 seed rows plus the 160 pool digits the seed model
    is least sure of (highest predictive entropy), labelled by the annotators. The BUG
    (``most_uncertain=False``): ``topk(..., largest=False)``, the 160 it is surest of."""
    x, y = digits("train")
    seed_rows = torch.randperm(len(y), generator=_gen(203))[:SEED_LABELS]
    model = seed_model()
    with torch.no_grad():
        probabilities = model(x).softmax(-1)
    entropy = -(probabilities * probabilities.clamp_min(1e-12).log()).sum(-1)
    pool = torch.ones(len(y), dtype=torch.bool)
    pool[seed_rows] = False
    candidates = pool.nonzero().squeeze(1)
    picked = candidates[entropy[candidates].topk(BUDGET, largest=most_uncertain).indices]
    rows = torch.cat([seed_rows, picked])
    return x[rows], y[rows]


def labelled_split(oversample_first: bool = False) -> tuple[torch.Tensor, ...]:
    """The acquired labelled set split 80/20 into training and validation rows (there is no other labelled
    data to validate on), the training rows then repeated 5 times to make an epoch: (train x, train y, val x,
    val y). The BUG (``oversample_first``): the set is repeated 5 times before the split, so nearly every
    validation digit also has copies among the training rows."""
    x, y = acquired()
    if oversample_first:
        x, y = x.repeat(5, 1), y.repeat(5)
    order = torch.randperm(len(y), generator=_gen(204))
    train, val = order[: int(0.8 * len(y))], order[int(0.8 * len(y)) :]
    train_x, train_y = x[train], y[train]
    if not oversample_first:
        train_x, train_y = train_x.repeat(5, 1), train_y.repeat(5)
    return train_x, train_y, x[val], y[val]


# --- semi-supervised: a few labels among many unlabelled rows -----------------------------------------------
LABELLED = 100
UNLABELLED = -1


def few_labels(unknown: int = UNLABELLED) -> tuple[torch.Tensor, torch.Tensor]:
    """The 1,000 training digits of which the first 100 keep their labels; the others' label is ``unknown``
    (-1, which the loss ignores). The BUG (``unknown=0``): the label column was allocated with ``zeros`` and
    only the known rows were written, so the unlabelled rows read as class 0."""
    x, y = digits("train")
    labels = torch.full_like(y, unknown)
    labels[:LABELLED] = y[:LABELLED]
    return x, labels
