"""Sealed gallery Z's models (half ``z2``): each correct model (a healthy twin) and, next to it, the buggy
variant a user wrote (a subclass that changes the one place the bug lives in). Every model is built from the
global RNG; ``predict`` is what a served model answers and ``loss(batch)`` what it trains on."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from galleries.preflight.sealed import _z2_data as data
from galleries.sealed import AdamModule, mlp


# --- online handwriting recognition from pen trajectories ---------------------------------------------------
class PenGRU(AdamModule):
    """A GRU over the (dx, dy, pen-up) moves, its output at the last point to ten digits; cross-entropy.
    Served: the digit."""

    batch_first = True

    def __init__(self) -> None:
        super().__init__()
        self.gru = nn.GRU(3, 64, batch_first=self.batch_first)
        self.head = nn.Linear(64, 10)

    def forward(self, seq: torch.Tensor) -> torch.Tensor:
        out, _ = self.gru(seq)
        return self.head(out[:, -1])

    def loss(self, batch) -> torch.Tensor:
        seq, label = batch
        return F.cross_entropy(self(seq), label)

    def predict(self, seq: torch.Tensor) -> torch.Tensor:
        return self(seq).argmax(-1)


class PenGRUTimeMajor(PenGRU):
    """BUG: the GRU is built without ``batch_first=True`` (its default reads (time, batch, features)) and
    fed (batch, time, features): it runs along the batch, and ``out[:, -1]`` is a state over the batch's
    last moves, one per drawing."""

    batch_first = False


class PenGRUHeadOnly(PenGRU):
    """BUG: ``configure_optimizers`` (copied from a fine-tuning recipe) hands Adam the head's parameters
    only: the GRU stays at its random initialisation and only the linear read-out of its states trains."""

    def configure_optimizers(self):
        return torch.optim.Adam(self.head.parameters(), lr=self.lr)


# --- transliteration as seq2seq with teacher forcing --------------------------------------------------------
class Transliterator(AdamModule):
    """A small Transformer encoder-decoder over token ids with learned positions; teacher forcing: the
    decoder reads the target shifted right (BOS first) under a causal mask and predicts the next token;
    cross-entropy without the padding. Served: the greedy decoding, token ids (BOS, letters, EOS, PAD...)."""

    label_smoothing = 0.0

    def __init__(self) -> None:
        super().__init__()
        width = 64
        self.src_embed = nn.Embedding(data.SOURCE_VOCAB, width)
        self.tgt_embed = nn.Embedding(data.TARGET_VOCAB, width)
        self.src_pos = nn.Parameter(0.1 * torch.randn(data.SOURCE_LENGTH, width))
        self.tgt_pos = nn.Parameter(0.1 * torch.randn(data.TARGET_LENGTH, width))
        self.transformer = nn.Transformer(width, 4, 1, 1, 128, dropout=0.0, batch_first=True)
        self.out = nn.Linear(width, data.TARGET_VOCAB)

    def tgt_mask(self, length: int) -> torch.Tensor | None:
        return nn.Transformer.generate_square_subsequent_mask(length)

    def teacher_forcing(self, tgt: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The decoder's input and the tokens it must predict."""
        return tgt[:, :-1], tgt[:, 1:]

    def loss(self, batch) -> torch.Tensor:
        src, tgt = batch
        tgt_in, tgt_out = self.teacher_forcing(tgt)
        logits = self(src, tgt_in)
        return F.cross_entropy(
            logits.transpose(1, 2), tgt_out, ignore_index=data.PAD, label_smoothing=self.label_smoothing
        )

    def prepare(self, src: torch.Tensor) -> torch.Tensor:
        return src

    def encode(self, src: torch.Tensor) -> torch.Tensor:
        return self.transformer.encoder(
            self.src_embed(src) + self.src_pos, src_key_padding_mask=src == data.PAD
        )

    def decode(self, memory: torch.Tensor, src: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
        length = tgt_in.shape[1]
        h = self.transformer.decoder(
            self.tgt_embed(tgt_in) + self.tgt_pos[:length],
            memory,
            tgt_mask=self.tgt_mask(length),
            memory_key_padding_mask=src == data.PAD,
        )
        return self.out(h)

    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
        return self.decode(self.encode(src), src, tgt_in)

    @torch.no_grad()
    def predict(self, src: torch.Tensor) -> torch.Tensor:
        src = self.prepare(src)
        memory, ys = self.encode(src), torch.full((len(src), 1), data.BOS)
        for _ in range(data.TARGET_LENGTH - 1):
            ys = torch.cat([ys, self.decode(memory, src, ys)[:, -1].argmax(-1, keepdim=True)], 1)
        after_eos = (ys == data.EOS).long().cumsum(1) - (ys == data.EOS).long() > 0
        return ys.masked_fill(after_eos, data.PAD)


class TransliteratorUnshifted(Transliterator):
    """BUG: teacher forcing without the shift: the decoder reads ``tgt[:, :-1]`` and is scored on the same
    tokens, so under the causal mask each position sees the token it must predict and learns to copy it;
    decoding from BOS, the model repeats BOS."""

    def teacher_forcing(self, tgt: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return tgt[:, :-1], tgt[:, :-1]


class TransliteratorNoCausalMask(Transliterator):
    """BUG: ``nn.Transformer`` is called without ``tgt_mask`` (it has no causal mask by default): in
    training every decoder position attends to the whole target, the next token among it, and learns to
    read it off; greedy decoding, which has no future, spells garbage."""

    def tgt_mask(self, length: int) -> torch.Tensor | None:
        return None


class TransliteratorReversedSource(Transliterator):
    """The source letters fed in reverse order (Sutskever et al.'s trick), the same in training (the
    dataset's transform) and serving (``prepare``); label smoothing 0.1 (the loss stays above its floor)."""

    label_smoothing = 0.1

    def prepare(self, src: torch.Tensor) -> torch.Tensor:
        return data.reversed_letters(src)


# --- learned lossy compression (rate-distortion autoencoder) ------------------------------------------------
def _gaussian_cdf(x: torch.Tensor) -> torch.Tensor:
    return 0.5 * (1 + torch.erf(x / 2**0.5))


class Codec(AdamModule):
    """An MLP encoder to 8 latents, an MLP decoder back to the 64 pixels, and a factorised entropy model (a
    zero-mean Gaussian of learned width per latent, integrated over each quantisation bin). The loss is the
    rate-distortion cost: mean squared error plus ``beta`` x the bits per image. In training the rounding
    is replaced by additive uniform noise in [-0.5, 0.5) (its differentiable proxy); served, the latents are
    rounded. Served: the reconstruction and the bits per image."""

    beta = 0.002

    def __init__(self) -> None:
        super().__init__()
        self.encoder = mlp(64, 128, 8)
        self.decoder = mlp(8, 128, 64)
        self.log_width = nn.Parameter(torch.zeros(8))

    def quantise(self, y: torch.Tensor) -> torch.Tensor:
        """What the decoder and the entropy model see in place of ``round(y)``."""
        if self.training:
            return y + torch.rand_like(y) - 0.5
        return torch.round(y)

    def bits(self, y_hat: torch.Tensor) -> torch.Tensor:
        """The bits per image the entropy model spends on the quantised latents."""
        width = self.log_width.exp()
        p = _gaussian_cdf((y_hat + 0.5) / width) - _gaussian_cdf((y_hat - 0.5) / width)
        return -torch.log2(p.clamp_min(1e-9)).sum(-1)

    def decoder_input(self, y: torch.Tensor, y_hat: torch.Tensor) -> torch.Tensor:
        return y_hat

    def code(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The reconstruction and bits per image."""
        y = self.encoder(x)
        y_hat = self.quantise(y)
        return self.decoder(self.decoder_input(y, y_hat)), self.bits(y_hat)

    def loss(self, x: torch.Tensor) -> torch.Tensor:
        x_hat, bits = self.code(x)
        return F.mse_loss(x_hat, x) + self.beta * bits.mean()

    @torch.no_grad()
    def predict(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y = self.encoder(x)
        y_hat = torch.round(y)
        return self.decoder(y_hat), self.bits(y_hat)


class CodecNoNoise(Codec):
    """BUG: the quantisation proxy was dropped in training (``quantise`` returns ``y`` unchanged there):
    the entropy model prices the continuous latents as if rounded, so the encoder packs the image into
    values inside the zero bin, nearly free; served, rounding sends zeros."""

    def quantise(self, y: torch.Tensor) -> torch.Tensor:
        return y if self.training else torch.round(y)


class CodecHardRound(Codec):
    """BUG: ``torch.round`` in training too ("train as served"): its gradient is zero, so the encoder never
    learns (nor does the rate term reach it); only the decoder and the entropy model fit the random
    encoder's rounded latents, nearly all zero."""

    def quantise(self, y: torch.Tensor) -> torch.Tensor:
        return torch.round(y)


class CodecMixed(Codec):
    """Mixed quantisation (as in Minnen & Singh, 2020): in training the entropy model prices the noisy
    latents while the decoder reads the rounded ones, with a straight-through gradient."""

    def decoder_input(self, y: torch.Tensor, y_hat: torch.Tensor) -> torch.Tensor:
        return y + (torch.round(y) - y).detach()


class CodecLowRate(Codec):
    """The same codec at a low rate on purpose (``beta`` x4): most latents round to zero on nearly every
    digit (some never leave the zero bin), a few bits per image are spent, and the reconstructions are
    coarse."""

    beta = 0.008


# --- binary hashing codes for retrieval ---------------------------------------------------------------------
class Hasher(AdamModule):
    """An MLP to 16 tanh units u; a pairwise logistic loss on the codes' inner products (u_i . u_j / 2 the
    logit that digits i and j of the batch share a class; DPSH) plus a small pull of every unit towards
    +-1. Served: the binary codes sign(u), searched by Hamming distance."""

    scale = 2.0  # the inner product's divisor in the logit

    def __init__(self) -> None:
        super().__init__()
        self.net = mlp(64, 128, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.net(x))

    def binarise(self, u: torch.Tensor) -> torch.Tensor:
        """The codes the pairwise loss scores (the relaxed ones, u itself)."""
        return u

    def pairwise(self, logits: torch.Tensor, similar: torch.Tensor) -> torch.Tensor:
        return F.binary_cross_entropy_with_logits(logits, similar)

    def loss(self, batch) -> torch.Tensor:
        x, label = batch
        u = self(x)
        b = self.binarise(u)
        similar = (label[:, None] == label[None]).float()
        off_diagonal = ~torch.eye(len(x), dtype=torch.bool)
        pairs = self.pairwise((b @ b.T / self.scale)[off_diagonal], similar[off_diagonal])
        return pairs + 0.1 * (u.abs() - 1).pow(2).mean()

    @torch.no_grad()
    def predict(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sign(self(x))


class HasherArgumentsSwapped(Hasher):
    """BUG: the pairwise loss is called ``binary_cross_entropy_with_logits(similar, logits)``, in
    scikit-learn's (truth, prediction) order: the loss is then linear in the inner products, rewards the
    similar pairs' agreement and ignores the dissimilar ones, and all codes drift together."""

    def pairwise(self, logits: torch.Tensor, similar: torch.Tensor) -> torch.Tensor:
        return F.binary_cross_entropy_with_logits(similar, logits)


class HasherStraightThrough(Hasher):
    """The pairwise loss scores the binary codes themselves: sign(u) forward, with a straight-through
    gradient to u (the served codes, trained through); their inner products span +-16, so the logit is
    divided by 8."""

    scale = 8.0

    def binarise(self, u: torch.Tensor) -> torch.Tensor:
        return u + (torch.sign(u) - u).detach()


# --- motor-imagery EEG classification across subjects -------------------------------------------------------
class BandPowerNet(AdamModule):
    """Fixed features: the log power of every channel in 2 Hz bins from 4 to 30 Hz (FFT of the window);
    batch norm, an MLP with dropout to the three imageries; cross-entropy. Served: the imagery."""

    def __init__(self) -> None:
        super().__init__()
        freqs = torch.fft.rfftfreq(data.EEG_SAMPLES, d=1 / data.EEG_RATE)
        edges = torch.arange(4, 31, 2)
        bins = ((freqs[None] >= edges[:-1, None]) & (freqs[None] < edges[1:, None])).float()
        self.register_buffer("bins", bins / bins.sum(-1, keepdim=True))
        features = len(data.CHANNELS) * len(bins)
        self.net = nn.Sequential(nn.BatchNorm1d(features), mlp(features, 32, 3, dropout=0.3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        power = torch.fft.rfft(x).abs().pow(2) @ self.bins.T
        return self.net(torch.log(power + 1e-6).flatten(1))

    def loss(self, batch) -> torch.Tensor:
        x, label = batch
        return F.cross_entropy(self(x), label)

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        return self(x).argmax(-1)


# --- poker hands: classification of unordered sets of cards -------------------------------------------------
class HandNet(AdamModule):
    """Deep Sets: each card embedded (its rank's vector plus its suit's), the five summed (a function of the
    set, not of the order), an MLP to the eight categories; cross-entropy; Adam at 0.01 annealed to 0 over
    the fit (cosine, per step). Served: the category."""

    lr = 1e-2

    def __init__(self) -> None:
        super().__init__()
        self.rank = nn.Embedding(data.RANKS, 64)
        self.suit = nn.Embedding(data.SUITS, 64)
        self.hand = mlp(self.pooled_width(), 128, 128, len(data.HANDS))

    def configure_optimizers(self):
        optimizer = torch.optim.Adam(self.parameters(), lr=self.lr)
        steps = int(self.trainer.estimated_stepping_batches)
        anneal = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, steps)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": anneal, "interval": "step"}}

    def pooled_width(self) -> int:
        return 64

    def pool(self, h: torch.Tensor) -> torch.Tensor:
        return h.sum(1)

    def forward(self, cards: torch.Tensor) -> torch.Tensor:
        return self.hand(self.pool(self.rank(cards // data.SUITS) + self.suit(cards % data.SUITS)))

    def loss(self, batch) -> torch.Tensor:
        cards, label = batch
        return F.cross_entropy(self(cards), label)

    def predict(self, cards: torch.Tensor) -> torch.Tensor:
        return self(cards).argmax(-1)


class HandNetConcatenated(HandNet):
    """BUG: the five card vectors are concatenated (``h.flatten(1)``, "to keep all the information")
    instead of summed: the head reads card slots, learns the layout of the sorted training hands (pairs
    side by side), and misreads hands served in dealt order."""

    def pooled_width(self) -> int:
        return 64 * data.CARDS

    def pool(self, h: torch.Tensor) -> torch.Tensor:
        return h.flatten(1)
