"""Builders of zoo 15's runs: each returns ``(model, train_loader, val_loader or None)``.

Problem runs take the knob that holds the bug, so a proof builds the healthy twin (the bug fixed) with the
same code. Data: scikit-learn's bundled 8x8 digits and wine tables; made in code, from fixed seeds: noisy
sinusoid sequences (four frequencies), insurance-style claim counts with an exposure offset, a heteroscedastic
regression and topic documents of word tokens.
"""

from __future__ import annotations

import functools
import math
import re
from collections import Counter
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor, nn
from torch.optim import SGD, Adadelta, Adam, RMSprop
from torch.optim.lr_scheduler import (
    ChainedScheduler,
    ConstantLR,
    CyclicLR,
    ExponentialLR,
    LambdaLR,
    ReduceLROnPlateau,
)
from torch.utils.data import DataLoader, Dataset, TensorDataset

from galleries.health.zoo15._models import (
    BagClassifier,
    DigitsCNN,
    HeteroRegressor,
    PoissonRegressor,
    SequenceGRU,
    Task,
    WineAutoencoder,
)


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def loader(x: Tensor, y: Tensor, batch: int, shuffle: bool = True) -> DataLoader:
    return DataLoader(TensorDataset(x, y), batch_size=batch, shuffle=shuffle)


# ------------------------------------------------------------------------------------------------ data
@functools.cache
def _digits() -> tuple[Tensor, Tensor]:
    from sklearn.datasets import load_digits

    bunch = load_digits()
    x = torch.tensor(bunch.data, dtype=torch.float32).reshape(-1, 1, 8, 8) / 16.0
    y = torch.tensor(bunch.target, dtype=torch.long)
    order = torch.randperm(len(y), generator=_gen(15))
    return x[order], y[order]


def digits() -> tuple[tuple[Tensor, Tensor], tuple[Tensor, Tensor]]:
    """Scikit-learn's 8x8 digits (1797 images, intensities scaled to [0, 1]): the first 1400 of a fixed
    shuffle train, the other 397 validate."""
    x, y = _digits()
    return (x[:1400], y[:1400]), (x[1400:], y[1400:])


@functools.cache
def _wine() -> Tensor:
    from sklearn.datasets import load_wine

    x = torch.tensor(load_wine().data, dtype=torch.float32)
    return x[torch.randperm(len(x), generator=_gen(15))]


def wine() -> tuple[Tensor, Tensor]:
    """Scikit-learn's wine table (178 wines, 13 chemical measurements), standardised with the training rows'
    statistics: the first 140 rows of a fixed shuffle train, the other 38 validate."""
    x = _wine()
    x = (x - x[:140].mean(0)) / x[:140].std(0)
    return x[:140], x[140:]


FREQUENCIES = (0.25, 0.4, 0.55, 0.7)  # radians per step, one per class
SEQ_LEN = 24


def sequences(rows: int, seed: int, noise: float = 0.8) -> tuple[Tensor, Tensor]:
    """``(N, 24, 2)`` sequences: channel 0 a unit sinusoid at one of four frequencies (the class) with a
    random phase plus Gaussian noise, channel 1 noise alone."""
    g = _gen(seed)
    labels = torch.randint(0, len(FREQUENCIES), (rows,), generator=g)
    t = torch.arange(SEQ_LEN, dtype=torch.float32)
    freq = torch.tensor(FREQUENCIES)[labels]
    phase = 2 * math.pi * torch.rand(rows, generator=g)
    signal = torch.sin(freq[:, None] * t + phase[:, None])
    x = torch.stack([signal, torch.zeros_like(signal)], -1)
    return x + noise * torch.randn(rows, SEQ_LEN, 2, generator=g), labels


def claims(rows: int, seed: int, base: float = 0.3) -> tuple[Tensor, Tensor]:
    """Claim counts of ``rows`` policies: six standardised risk factors, an exposure in years (0.2 to 1)
    and a Poisson count whose log rate is ``base`` + a nonlinear function of the factors + ``log exposure``.
    Returns ``(N, 7)`` inputs (the factors, then the log exposure) and ``(N, 1)`` float counts."""
    g = _gen(seed)
    x = torch.randn(rows, 6, generator=g)
    exposure = 0.2 + 0.8 * torch.rand(rows, generator=g)
    eta = base + 0.5 * x[:, 0] - 0.4 * x[:, 1] + 0.3 * x[:, 2] + 0.3 * x[:, 0] * x[:, 1]
    eta = eta + 0.3 * torch.sin(2 * x[:, 3])
    counts = torch.poisson((eta + exposure.log()).exp(), generator=g)
    return torch.cat([x, exposure.log()[:, None]], 1), counts[:, None]


def hetero(rows: int, seed: int) -> tuple[Tensor, Tensor]:
    """A heteroscedastic regression: ``x`` uniform on ``[-3, 3]^2``, ``y = 2 sin(1.5 x0) + 0.5 x1`` plus
    noise of std ``0.1 + 0.4 |x0|`` (in metres)."""
    g = _gen(seed)
    x = 6 * torch.rand(rows, 2, generator=g) - 3
    std = 0.1 + 0.4 * x[:, 0].abs()
    y = 2 * torch.sin(1.5 * x[:, 0]) + 0.5 * x[:, 1] + std * torch.randn(rows, generator=g)
    return x, y[:, None]


TOPICS, TOPIC_WORDS, WORDS, DOC_LEN = 4, 30, 600, 32


@functools.cache
def documents(rows: int, seed: int) -> tuple[tuple[tuple[str, ...], ...], Tensor]:
    """``rows`` documents of 12 to 32 word tokens (``"w17"``) and their topic (of four): each token is one of
    the topic's 30 words with probability 0.3, else a background word (Zipf-like over 480 words)."""
    g = _gen(seed)
    labels = torch.randint(0, TOPICS, (rows,), generator=g)
    background = 1.0 / (torch.arange(WORDS - TOPICS * TOPIC_WORDS, dtype=torch.float32) + 5.0)
    docs = []
    for label in labels.tolist():
        length = int(torch.randint(12, DOC_LEN + 1, (1,), generator=g))
        topical = torch.rand(length, generator=g) < 0.3
        own = label * TOPIC_WORDS + torch.randint(0, TOPIC_WORDS, (length,), generator=g)
        common = TOPICS * TOPIC_WORDS + torch.multinomial(background, length, True, generator=g)
        docs.append(tuple(f"w{int(i)}" for i in torch.where(topical, own, common)))
    return tuple(docs), labels


PAD, UNK, VOCAB = 0, 1, 500


def vocabulary(docs: Any, size: int = VOCAB, keys_are_pairs: bool = False) -> dict[Any, int]:
    """Token -> id for the ``size`` commonest tokens of ``docs`` (0: padding, 1: unknown).
    ``keys_are_pairs``: the bug of ``enumerate(counts.most_common())`` unpacked as ``i, word``: the keys are
    ``(word, count)`` pairs and no token is ever found."""
    counts = Counter(tok for doc in docs for tok in doc)
    if keys_are_pairs:
        return {word: i + 2 for i, word in enumerate(counts.most_common(size))}
    return {word: i + 2 for i, (word, _) in enumerate(counts.most_common(size))}


def encode(docs: Any, vocab: dict[Any, int]) -> Tensor:
    """``(N, 32)`` token ids, padded with 0."""
    ids = torch.zeros(len(docs), DOC_LEN, dtype=torch.long)
    for i, doc in enumerate(docs):
        ids[i, : len(doc)] = torch.tensor([vocab.get(tok, UNK) for tok in doc])
    return ids


# ------------------------------------------------------------------------------------------------ tasks
def _digits_task(make_optimizer, net: nn.Module | None = None, schedule=None, batch: int = 64):
    (x, y), (vx, vy) = digits()
    model = Task(net if net is not None else DigitsCNN(), "ce", make_optimizer, schedule)
    return model, loader(x, y, batch), loader(vx, vy, 397, shuffle=False)


Relabel = Callable[[Tensor], Tensor]


def _sequence_task(make_optimizer, net: nn.Module | None = None, schedule=None, val_fraction: float = 0.1,
                   labels: Relabel | None = None, inputs: Relabel | None = None,
                   batch: int = 32):  # fmt: skip
    """Sequences: 1000 recordings split by ``val_fraction`` (the last rows validate)."""
    x, y = sequences(1000, 0)
    cut = round(len(y) * (1 - val_fraction))
    (x, y), (vx, vy) = (x[:cut], y[:cut]), (x[cut:], y[cut:])
    if labels is not None:
        y = labels(y)
    if inputs is not None:
        x, vx = inputs(x), inputs(vx)
    model = Task(net if net is not None else SequenceGRU(), "ce", make_optimizer, schedule)
    return model, loader(x, y, batch), loader(vx, vy, len(vy), shuffle=False)


def _wine_task(make_optimizer, net: nn.Module | None = None):
    x, vx = wine()
    model = Task(net if net is not None else WineAutoencoder(), "mse", make_optimizer)
    return model, loader(x, x, 14), loader(vx, vx, 38, shuffle=False)


def _claims_task(make_optimizer, net: nn.Module | None = None, schedule=None, base: float = 0.3,
                 y: Tensor | None = None, shuffle: bool = True, interval: str = "step",
                 monitor: str | None = None, rows: int = 3200):  # fmt: skip
    tx, ty = claims(rows, 0, base)
    vx, vy = claims(800, 1, base)
    model = Task(net if net is not None else PoissonRegressor(), "poisson", make_optimizer, schedule,
                 interval, monitor)  # fmt: skip
    return model, loader(tx, ty if y is None else y, 32, shuffle), loader(vx, vy, 800, shuffle=False)


def _hetero_task(make_optimizer, schedule=None, y: Tensor | None = None, val_rows: int = 600,
                 interval: str = "step", monitor: str | None = None, rows: int = 1280):  # fmt: skip
    tx, ty = hetero(rows, 0)
    vx, vy = hetero(600, 1)
    model = Task(HeteroRegressor(), "gaussian", make_optimizer, schedule, interval, monitor)
    train = loader(tx, ty if y is None else y, 32)
    return model, train, loader(vx[:val_rows], vy[:val_rows], val_rows, shuffle=False)


def _topics_task(make_optimizer, net: nn.Module | None = None, keys_are_pairs: bool = False,
                 batch: int = 32):  # fmt: skip
    docs, y = documents(2000, 0)
    vdocs, vy = documents(500, 1)
    vocab = vocabulary(docs, keys_are_pairs=keys_are_pairs)
    model = Task(net if net is not None else BagClassifier(VOCAB + 2), "ce", make_optimizer)
    return model, loader(encode(docs, vocab), y, batch), loader(encode(vdocs, vocab), vy, 500, shuffle=False)


# ------------------------------------------------------------------------------------------------ problems
def topics_pairs_vocabulary(keys_are_pairs: bool = True):
    """Topic documents, Adam ``3e-3`` with betas ``(0.9, 0.98)``; the vocabulary is built with
    ``for i, word in enumerate(counts.most_common())``, so its keys are ``(word, count)`` pairs and every
    token is encoded as the unknown id."""
    make = lambda n: Adam(n.parameters(), 3e-3, betas=(0.9, 0.98))  # noqa: E731
    return _topics_task(make, keys_are_pairs=keys_are_pairs)


def topics_adadelta(lr: float = 1e-3):
    """Topic documents, Adadelta at ``1e-3`` (an Adam-style LR; Adadelta's is ~1.0)."""
    return _topics_task(lambda n: Adadelta(n.parameters(), lr=lr))


BAD_CLAIM_ROWS = (1290, 1302, 1307)  # read in order, 32 a batch: all in batch 40


def claims_missing_counts(missing: bool = True):
    """Claim counts read in order, SGD (no momentum) ``0.02``; three policies whose count is missing in the
    export are read as NaN (the ``dropna`` was run on the features only)."""
    _, y = claims(3200, 0)
    y = y.clone()
    if missing:
        y[list(BAD_CLAIM_ROWS)] = float("nan")
    return _claims_task(lambda n: SGD(n.parameters(), lr=0.02), y=y, shuffle=False)


def topics_unit_norm_pad_nan(guarded: bool = False):
    """Topic documents, Adam ``3e-3``: the embeddings are initialised to unit norm by ``w / ||w||`` after
    the padding row was zeroed, so the padding row is ``0 / 0`` = NaN; the masked mean multiplies it by 0,
    which leaves NaN."""
    net = BagClassifier(VOCAB + 2)
    with torch.no_grad():
        w = net.bag.weight
        w[PAD] = 0.0
        w.div_(w.norm(dim=1, keepdim=True).clamp(min=1e-12) if guarded else w.norm(dim=1, keepdim=True))
    return _topics_task(lambda n: Adam(n.parameters(), 3e-3), net)


def digits_zero_gamma(zero_gamma: bool = True):
    """Digits CNN, SGD (no momentum) ``0.05``; every BatchNorm's scale initialised to 0 (the zero-gamma
    trick for the last BN of residual blocks, applied to a plain CNN): every ReLU input is exactly 0."""
    net = DigitsCNN()
    if zero_gamma:
        for module in net.modules():
            if isinstance(module, nn.BatchNorm2d):
                nn.init.zeros_(module.weight)
    return _digits_task(lambda n: SGD(n.parameters(), lr=0.05), net)


def wine_sgd(lr: float = 2.0):
    """Wine autoencoder, SGD (no momentum) at ``2.0`` (meant ``0.2``)."""
    return _wine_task(lambda n: SGD(n.parameters(), lr=lr))


def sequences_val_fraction(val_fraction: float = 0.9):
    """Sequence classifier, Adam ``3e-3`` with betas ``(0.8, 0.99)``, batches of 20; the config's
    ``val_fraction`` is 0.9 (meant 0.1): it trains on 100 recordings and validates on 900."""
    make = lambda n: Adam(n.parameters(), 3e-3, betas=(0.8, 0.99))  # noqa: E731
    return _sequence_task(make, val_fraction=val_fraction, batch=20)


def claims_cyclic(max_lr: float = 0.3):
    """Claim counts, Adam betas ``(0.7, 0.99)`` under CyclicLR triangular2 from ``1e-4`` to ``0.3`` (meant
    ``3e-3``), 40 steps up, 40 down."""
    return _claims_task(
        lambda n: Adam(n.parameters(), 1e-4, betas=(0.7, 0.99)),
        schedule=lambda o: CyclicLR(o, 1e-4, max_lr, 40, mode="triangular2", cycle_momentum=False),
    )


def hetero_plateau(mode: str = "max"):
    """Heteroscedastic regression on 640 rows (20 steps an epoch), RMSprop momentum 0.9 at ``3e-4`` under
    ReduceLROnPlateau(monitor="val_loss", factor 0.1, patience 1) with ``mode="max"`` (copied from a config
    that monitored accuracy), validated every epoch."""
    return _hetero_task(
        lambda n: RMSprop(n.parameters(), lr=3e-4, momentum=0.9),
        schedule=lambda o: ReduceLROnPlateau(o, mode=mode, factor=0.1, patience=1),
        interval="epoch",
        monitor="val_loss",
        rows=640,
    )


def sequences_head_only(whole: bool = False):
    """Sequence classifier, Adam ``3e-3`` given ``net.head.parameters()`` (left from a fine-tuning recipe):
    the GRU gets gradients and never changes."""
    return _sequence_task(lambda n: Adam(n.parameters() if whole else n.head.parameters(), 3e-3))


def tokenize(text: str) -> list[str]:
    return re.findall(r"[a-z0-9']+", text.lower())


class RawDocuments(Dataset):
    """Topic documents as raw text; tokenised and encoded per batch by the loader's ``collate_fn``."""

    def __init__(self, texts: list[str], labels: Tensor) -> None:
        self.texts, self.labels = texts, labels

    def __len__(self) -> int:
        return len(self.texts)

    def __getitem__(self, i: int) -> tuple[str, int]:
        return self.texts[i], int(self.labels[i])


class EncodeBatch:
    """Tokenises and encodes a batch of texts; ``rebuild``: first rebuilds the vocabulary from the whole
    corpus (the bug: every batch tokenises and counts the entire corpus again)."""

    def __init__(self, corpus: list[str], rebuild: bool) -> None:
        self.corpus, self.rebuild = corpus, rebuild
        self.vocab = self.build_vocabulary()

    def build_vocabulary(self) -> dict[Any, int]:
        return vocabulary([tokenize(text) for text in self.corpus])

    def __call__(self, items: list[tuple[str, int]]) -> tuple[Tensor, Tensor]:
        vocab = self.build_vocabulary() if self.rebuild else self.vocab
        texts, labels = zip(*items)
        return encode([tokenize(text) for text in texts], vocab), torch.tensor(labels)


def topics_rebuilding_collate(rebuild: bool = True):
    """Topic documents kept as raw text, Adam ``3e-3``; the loader's ``collate_fn`` tokenises the batch and,
    by the bug, first rebuilds the vocabulary from the whole corpus on every batch."""
    docs, y = documents(2000, 0)
    vdocs, vy = documents(500, 1)
    collate = EncodeBatch([" ".join(doc) for doc in docs], rebuild)
    model = Task(BagClassifier(VOCAB + 2), "ce", lambda n: Adam(n.parameters(), 3e-3))
    train = DataLoader(RawDocuments(collate.corpus, y), batch_size=32, shuffle=True, collate_fn=collate)
    return model, train, loader(encode(vdocs, collate.vocab), vy, 500, shuffle=False)


MM_ROWS = 6  # of the 1280 training rows, a second sensor's, logged in millimetres


def hetero_millimetres(mixed: bool = True):
    """Heteroscedastic regression, Adam ``1e-3``; 6 of the 1280 training targets come from a second sensor
    that logs millimetres, merged without converting (x1000)."""
    _, y = hetero(1280, 0)
    y = y.clone()
    if mixed:
        rows = torch.randperm(len(y), generator=_gen(7))[:MM_ROWS]
        y[rows] *= 1000.0
    return _hetero_task(lambda n: Adam(n.parameters(), 1e-3), y=y)


def sequences_raw_units(scaled: bool = False):
    """Sequence classifier, Adam ``3e-3``, on the sensor's raw units (baseline 250, 40 units per signal
    unit): the scaler is fitted but never applied."""
    raw = (lambda x: x) if scaled else (lambda x: 250.0 + 40.0 * x)
    return _sequence_task(lambda n: Adam(n.parameters(), 3e-3), inputs=raw)


# ------------------------------------------------------------------------------------------------ healthy
WARMUP = 100


def digits_hand_warmup():
    """Digits CNN, SGD (no momentum) ``0.1`` with a warm-up written by hand in LambdaLR:
    ``min(1, (step + 1) / 100)``."""
    return _digits_task(
        lambda n: SGD(n.parameters(), lr=0.1),
        schedule=lambda o: LambdaLR(o, lambda step: min(1.0, (step + 1) / WARMUP)),
    )


def sequences_noisy_labels(noisy: float = 0.3):
    """Sequence classifier, Adam ``3e-3``, with 30% of the training labels replaced by random ones on purpose
    (a robustness study); the validation labels are clean."""

    def corrupt(y: Tensor) -> Tensor:
        g = _gen(31)
        replace = torch.rand(len(y), generator=g) < noisy
        return torch.where(replace, torch.randint(0, len(FREQUENCIES), (len(y),), generator=g), y)

    return _sequence_task(lambda n: Adam(n.parameters(), 3e-3), labels=corrupt)


class PCAEncoder(nn.Linear):
    """A frozen linear encoder onto the training rows' first ``code`` principal components."""

    def __init__(self, x: Tensor, code: int = 3) -> None:
        super().__init__(x.shape[1], code)
        mean = x.mean(0)
        _, _, v = torch.linalg.svd(x - mean, full_matrices=False)
        with torch.no_grad():
            self.weight.copy_(v[:code])
            self.bias.copy_(-v[:code] @ mean)
        self.requires_grad_(False)


def wine_frozen_pca_encoder():
    """Wine autoencoder whose encoder is the training rows' 3-component PCA projection, frozen on purpose;
    only the decoder trains (Adam ``3e-3``)."""
    x, _ = wine()
    net = WineAutoencoder()
    net.encoder = PCAEncoder(x)
    return _wine_task(lambda n: Adam([p for p in n.parameters() if p.requires_grad], 3e-3), net)


COUNTS_BASE = math.log(200.0)


def claims_counts_in_hundreds():
    """Claim counts of a fleet (hundreds per policy-year), RMSprop momentum 0.5 at ``1e-3``, the readout's
    bias started at the log of the mean rate: a Poisson NLL (without ``log y!``) of about -700."""
    net = PoissonRegressor()
    nn.init.constant_(net.body[-1].bias, COUNTS_BASE)
    return _claims_task(lambda n: RMSprop(n.parameters(), lr=1e-3, momentum=0.5), net, base=COUNTS_BASE)


def hetero_tiny_val():
    """Heteroscedastic regression, RMSprop momentum 0.9 at ``3e-4``, validated on 12 rows only."""
    return _hetero_task(lambda n: RMSprop(n.parameters(), lr=3e-4, momentum=0.9), val_rows=12)


def topics_big_batches():
    """Topic documents in batches of 500 (four steps an epoch), Adam ``1e-2`` with betas ``(0.5, 0.9)``."""
    return _topics_task(lambda n: Adam(n.parameters(), 1e-2, betas=(0.5, 0.9)), batch=500)


def claims_plateau_halving():
    """Claim counts on 960 policies (30 steps an epoch), SGD (no momentum) ``0.1`` under
    ReduceLROnPlateau(monitor="val_loss", mode="min", factor 0.5, patience 0), validated every epoch."""
    return _claims_task(
        lambda n: SGD(n.parameters(), lr=0.1),
        schedule=lambda o: ReduceLROnPlateau(o, mode="min", factor=0.5, patience=0),
        interval="epoch",
        monitor="val_loss",
        rows=960,
    )


CONSTANT_STEPS = 60


def digits_chained_constant_exponential():
    """Digits CNN, SGD (no momentum) ``0.1`` under ChainedScheduler(ConstantLR(factor 0.1, 60 steps),
    ExponentialLR(0.995)): a tenth of the LR for 60 steps, then a 10x jump and a slow decay."""
    return _digits_task(
        lambda n: SGD(n.parameters(), lr=0.1),
        schedule=lambda o: ChainedScheduler([ConstantLR(o, 0.1, CONSTANT_STEPS), ExponentialLR(o, 0.995)]),
    )


def wine_adadelta():
    """Wine autoencoder, Adadelta at its usual ``1.0``: slow, but steady."""
    return _wine_task(lambda n: Adadelta(n.parameters(), lr=1.0))


def sequences_cyclic():
    """Sequence classifier, Adam with betas ``(0.5, 0.99)`` under CyclicLR triangular2 from ``3e-4`` to
    ``6e-3``, 30 steps up and 30 down: the LR swings five times, the swings halving."""
    return _sequence_task(
        lambda n: Adam(n.parameters(), 3e-4, betas=(0.5, 0.99)),
        schedule=lambda o: CyclicLR(o, 3e-4, 6e-3, 30, mode="triangular2", cycle_momentum=False),
    )
