"""Builders of zoo 9's runs: each returns ``(model, train_loader, val_loader or None)``.

Problem runs take the knob that holds the bug, so a proof builds the healthy twin (the bug fixed) with the
same code. Data: made in code here (a topical corpus of word pairs, a Markov-chain language, Bishop's inverse
sine problem) or scikit-learn's digits (the sparse autoencoder).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor
from torch.optim import SGD, Adam, NAdam
from torch.optim.lr_scheduler import ConstantLR, ExponentialLR, LinearLR, SequentialLR
from torch.utils.data import DataLoader, TensorDataset

from galleries.health.zoo1 import _data as data
from galleries.health.zoo9._models import (
    EMALanguageTask,
    LSTMLanguageModel,
    MDNTask,
    MixtureDensityNet,
    SkipGram,
    SkipGramTask,
    SparseAETask,
    SparseAutoEncoder,
)

loader, _gen = data.loader, data._gen

VOCAB, TOPICS, NEGATIVES = 200, 10, 5


# ------------------------------------------------------------------------------------------------ data
def word_pairs(rows: int, seed: int = 0, on_topic: float = 0.9) -> tuple[Tensor, Tensor]:
    """``(centre, context)`` pairs of a 200-word vocabulary in 10 topics of 20 words: the centre uniform, the
    context a word of the centre's topic with probability ``on_topic`` (else any word)."""
    g = _gen(seed)
    centre = torch.randint(0, VOCAB, (rows,), generator=g)
    size = VOCAB // TOPICS
    same = (centre // size) * size + torch.randint(0, size, (rows,), generator=g)
    anywhere = torch.randint(0, VOCAB, (rows,), generator=g)
    return centre, torch.where(torch.rand(rows, generator=g) < on_topic, same, anywhere)


def _pair_loaders(centre: Tensor, context: Tensor, batch: int = 64, on_topic: float = 0.9):
    vc, vx = word_pairs(2000, 1, on_topic)
    negatives = torch.randint(0, VOCAB, (2000, NEGATIVES), generator=_gen(2))
    val = DataLoader(TensorDataset(vc, vx, negatives), batch_size=2000)
    train = DataLoader(TensorDataset(centre, context), batch_size=batch, shuffle=True, generator=_gen(0))
    return train, val


LM_VOCAB = 32


def markov_text(rows: int, seed: int = 0, length: int = 33) -> Tensor:
    """Token lines ``(rows, length)`` of a fixed Markov chain over tokens 1-31: each token is followed by one
    of three successors with probabilities 0.6, 0.3, 0.1 (0 is never used)."""
    table = _gen(7)
    successors = torch.stack([torch.randperm(LM_VOCAB - 1, generator=table)[:3] + 1 for _ in range(LM_VOCAB)])
    g = _gen(seed)
    tokens = torch.empty(rows, length, dtype=torch.long)
    tokens[:, 0] = torch.randint(1, LM_VOCAB, (rows,), generator=g)
    probs = torch.tensor([0.6, 0.3, 0.1])
    for t in range(1, length):
        pick = torch.multinomial(probs, rows, replacement=True, generator=g)
        tokens[:, t] = successors[tokens[:, t - 1], pick]
    return tokens


def _text_loaders(batch: int = 32):
    train = DataLoader(TensorDataset(markov_text(2048, 0)), batch_size=batch, shuffle=True, generator=_gen(0))
    return train, DataLoader(TensorDataset(markov_text(256, 1)), batch_size=256)


def inverse_sine(rows: int, seed: int = 0) -> tuple[Tensor, Tensor]:
    """Bishop's inverse problem: ``y ~ U(0, 1)``, ``x = y + 0.3 sin(2 pi y) + U(-0.1, 0.1)``; predict ``y``
    from ``x`` (up to three branches for one ``x``). Both ``(N, 1)``."""
    g = _gen(seed)
    y = torch.rand(rows, 1, generator=g)
    x = y + 0.3 * torch.sin(2 * math.pi * y) + 0.2 * (torch.rand(rows, 1, generator=g) - 0.5)
    return x, y


def _mdn(make_optimizer, rows: int = 2000, net: MixtureDensityNet | None = None, val_rows: int = 500,
         y: Tensor | None = None, batch: int = 32):  # fmt: skip
    (x, ty), (vx, vy) = inverse_sine(rows, 0), inverse_sine(val_rows, 1)
    model = MDNTask(net or MixtureDensityNet(), make_optimizer)
    shuffle = y is None  # given targets are read in order
    train = loader(x, ty if y is None else y, batch, shuffle=shuffle)
    return model, train, loader(vx, vy, val_rows, shuffle=False)


def _sparse_ae(make_optimizer, l1: float = 1e-3, net: SparseAutoEncoder | None = None, schedule=None,
               scale: float = 1.0):  # fmt: skip
    (tx, ty), (vx, vy) = data.digits("train"), data.digits("val")
    model = SparseAETask(net or SparseAutoEncoder(), make_optimizer, l1, schedule)
    return model, loader(tx * scale, ty, 32), loader(vx * scale, vy, 397, shuffle=False)


# ------------------------------------------------------------------------------------------------ problems
def skipgram_zero_init(zero: bool = True):
    """Skip-gram, Adam ``1e-2``, with both embedding tables initialised at zero (word2vec zeroes only the
    output table)."""
    train, val = _pair_loaders(*word_pairs(25600, 0))
    return SkipGramTask(SkipGram(zero_input=zero), lambda p: Adam(p, lr=1e-2)), train, val


def skipgram_shuffled_apart(apart: bool = True):
    """Skip-gram, Adam ``1e-2``; the centre and the context columns were shuffled each on its own (meant:
    one permutation of the rows), so the training pairs are unrelated words."""
    centre, context = word_pairs(25600, 0)
    if apart:
        centre = centre[torch.randperm(len(centre), generator=_gen(3))]
        context = context[torch.randperm(len(context), generator=_gen(4))]
    train, val = _pair_loaders(centre, context)
    return SkipGramTask(SkipGram(), lambda p: Adam(p, lr=1e-2)), train, val


def skipgram_amsgrad(lr: float = 1e-6):
    """Skip-gram, Adam with amsgrad at ``1e-6`` (meant ``1e-2``)."""
    train, val = _pair_loaders(*word_pairs(25600, 0))
    return SkipGramTask(SkipGram(), lambda p: Adam(p, lr=lr, amsgrad=True)), train, val


def lm_ema(through_ema: bool = True):
    """The LSTM language model, Adam ``3e-3``, an EMA copy (decay 0.99) for validation; the training step
    runs the EMA copy (meant the network)."""
    train, val = _text_loaders()
    model = EMALanguageTask(LSTMLanguageModel(), lambda p: Adam(p, lr=3e-3), train_through_ema=through_ema)
    return model, train, val


def lm_exponential(per_batch: bool = True):
    """The LSTM language model, Adam ``3e-3`` under ``ExponentialLR(gamma=0.9)`` stepped every batch (meant
    every epoch of 64 batches)."""
    train, val = _text_loaders()
    model = EMALanguageTask(LSTMLanguageModel(), lambda p: Adam(p, lr=3e-3), decay=0.0,
                            make_schedule=lambda o: ExponentialLR(o, 0.9),
                            interval="step" if per_batch else "epoch")  # fmt: skip
    return model, train, val


def lm_sgd(lr: float = 200.0):
    """The LSTM language model, plain SGD at ``lr``: ``200`` (a zero too many for the ``20`` of PyTorch's
    word-language-model example) or ``20`` (aggressive, and stable on this model)."""
    train, val = _text_loaders()
    return EMALanguageTask(LSTMLanguageModel(), lambda p: SGD(p, lr=lr), decay=0.0), train, val


def lm_few_lines(lines: int = 48):
    """A wide LSTM language model (width 256) on ``48`` lines (a debug subset left in), Adam ``3e-3``, batches
    of 16 (3 steps an epoch)."""
    train = DataLoader(TensorDataset(markov_text(lines, 0)), batch_size=16, shuffle=True, generator=_gen(0))
    val = DataLoader(TensorDataset(markov_text(256, 1)), batch_size=256)
    model = EMALanguageTask(LSTMLanguageModel(width=256), lambda p: Adam(p, lr=3e-3), decay=0.0)
    return model, train, val


MISSING_ROW = 60 * 32 + 11  # read in order: in batch 60 of the 63 an epoch
FLOAT_MAX = float(torch.finfo(torch.float32).max)


def mdn_missing_target(marker: float | None = FLOAT_MAX):
    """The mixture density network, NAdam ``2e-3``, read in order; one missing target was filled with
    float32's largest value (a "missing" marker), left in."""
    y = inverse_sine(2000, 0)[1].clone()
    if marker is not None:
        y[MISSING_ROW] = marker
    return _mdn(lambda p: NAdam(p, lr=2e-3), y=y)


def sae_l1(l1: float = 1.0):
    """The sparse autoencoder, Adam ``3e-3``, the codes' L1 weight ``1.0`` (meant ``1e-3``)."""
    return _sparse_ae(lambda p: Adam(p, lr=3e-3), l1=l1)


def sae_bias_init(bias: float | None = -3.0):
    """The sparse autoencoder whose code biases start at ``-3`` ("sparse from the start"), Adam ``3e-3``, L1
    ``1e-3``."""
    net = SparseAutoEncoder()
    if bias is not None:
        torch.nn.init.constant_(net.encoder.bias, bias)
    return _sparse_ae(lambda p: Adam(p, lr=3e-3), l1=1e-3, net=net)


# ------------------------------------------------------------------------------------------------ healthy
def mdn_plain():
    """The mixture density network, Adam ``3e-3``: its NLL goes below zero."""
    return _mdn(lambda p: Adam(p, lr=3e-3))


def mdn_tiny_validation():
    """The mixture density network, Adam ``3e-3``, validated on 12 points."""
    return _mdn(lambda p: Adam(p, lr=3e-3), val_rows=12)


WARMUP = 200


def lm_sgd_20():
    """The LSTM language model, plain SGD at ``20``, unclipped."""
    return lm_sgd(20.0)


def sae_long_warmup():
    """The sparse autoencoder, Adam ``3e-3`` warmed up linearly from 1% over 200 steps, then constant."""

    def schedule(o):
        warm = LinearLR(o, start_factor=0.01, end_factor=1.0, total_iters=WARMUP)
        return SequentialLR(o, [warm, ConstantLR(o, factor=1.0, total_iters=1)], milestones=[WARMUP])

    return _sparse_ae(lambda p: Adam(p, lr=3e-3), schedule=schedule)


def sae_raw_pixels():
    """The sparse autoencoder on raw pixel counts (0-16, not scaled to 0-1), Adam ``3e-3``: a huge first
    gradient."""
    return _sparse_ae(lambda p: Adam(p, lr=3e-3), l1=1e-4, scale=16.0)


def skipgram_noisy():
    """Skip-gram, Adam ``1e-2``, on pairs whose context is on the centre's topic only half of the time (the
    rest any word): a high floor."""
    train, val = _pair_loaders(*word_pairs(25600, 0, on_topic=0.5), on_topic=0.5)
    return SkipGramTask(SkipGram(), lambda p: Adam(p, lr=1e-2)), train, val


def skipgram_sgd_slow():
    """Skip-gram, plain SGD at ``20`` from word2vec's near-zero start: a slow start."""
    train, val = _pair_loaders(*word_pairs(25600, 0))
    return SkipGramTask(SkipGram(), lambda p: SGD(p, lr=20.0)), train, val
