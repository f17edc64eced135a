"""Sealed gallery Z, half ``z2`` (issue #34): online handwriting recognition from pen trajectories (a GRU
over (dx, dy, pen-up) moves of drawn digits), transliteration of a made-up script as seq2seq with teacher
forcing (a small Transformer), learned lossy compression of digits (a rate-distortion autoencoder with
quantisation noise in training), binary hashing codes for digit retrieval (a pairwise DPSH loss),
motor-imagery EEG classification across subjects (band powers, subject-wise splits, per-subject
standardisation) and poker hands as unordered sets of cards (Deep Sets). Written blind (see the package
docstring); each bug is proved against its healthy twin in ``test_proofs_z2.py``."""

from __future__ import annotations

from functools import partial
from typing import Any

import torch

from galleries.preflight.sealed import SealedCase
from galleries.preflight.sealed import _z2_data as d
from galleries.preflight.sealed import _z2_models as m
from galleries.sealed import gen


# --- data builders (each returns preflight's data keyword arguments) ----------------------------------------
def handwriting_data(augment=None) -> dict[str, Any]:
    """1,200 training trajectories (augmented per read by ``augment``) and 300 validation ones."""
    train = d.Rows(*d.pen_digits(1200, 1), transform=augment)
    return {**d.loaders(train, d.Rows(*d.pen_digits(300, 2)), batch_size=64), "num_classes": 10}


def transliteration_data(augment=None, val_augment=None) -> dict[str, Any]:
    """1,600 training words with their transliterations (passed per read through ``augment``) and 300
    validation words (through ``val_augment``)."""
    train = d.Rows(*d.words(1600, 1), transform=augment)
    return d.loaders(train, d.Rows(*d.words(300, 2), transform=val_augment), batch_size=64)


def codec_data() -> dict[str, Any]:
    """The 1,000 training digits and the 300 validation digits (64 pixels in [0, 1]), no labels."""
    return d.loaders(d.Rows(d.digits("train")[0]), d.Rows(d.digits("val")[0]), batch_size=32)


def hashing_data(class_by_class: bool = False) -> dict[str, Any]:
    """The 1,000 training digits with their classes, shuffled (or read class by class, unshuffled, with
    ``class_by_class``), and the 300 validation digits."""
    if class_by_class:
        return d.loaders(d.Rows(*d.class_by_class("train")), d.Rows(*d.digits("val")), 64, shuffle=False)
    return d.loaders(d.Rows(*d.digits("train")), d.Rows(*d.digits("val")), batch_size=64)


EEG_WINDOWS = 200


def eeg_data(augment=None, split: str = "subjects", val_windows: int = EEG_WINDOWS) -> dict[str, Any]:
    """200 windows of each of 10 subjects: training on subjects 0..7 (augmented per read by ``augment``) and
    validation on subjects 8 and 9 (``split="subjects"``); or on subject 9 alone, ``val_windows`` of its
    windows (``"one subject"``); or the windows of all ten split at random, 1,600 and 400 (``"windows"``)."""
    x, label, subject = d.eeg(range(10), EEG_WINDOWS, 1)
    if split == "windows":
        train = torch.randperm(len(x), generator=gen(5)) < 8 * EEG_WINDOWS
        val = ~train
    else:
        train = subject < (9 if split == "one subject" else 8)
        val = ~train & (torch.arange(len(x)) % EEG_WINDOWS < val_windows)
    return {
        **d.loaders(d.Rows(x[train], label[train], transform=augment), d.Rows(x[val], label[val]), 64),
        "num_classes": 3,
    }


def poker_data(augment=None) -> dict[str, Any]:
    """3,000 training hands and 500 validation hands, as the hand evaluator's export lists them (each hand
    sorted), passed per read through ``augment``."""
    train = d.Rows(*d.hands(3000, 1, dealt=False), transform=augment)
    return {**d.loaders(train, d.Rows(*d.hands(500, 2, dealt=False)), 64), "num_classes": len(d.HANDS)}


DEPENDS = "the output depends on what the task says it depends on"
TRAINED = "every parameter meant to learn receives gradient and is updated"
TASK_LOSS = "the loss scores the target the task declares"
PAIRED = "each input is paired with its own target through sampling, collation and augmentation"
SAMPLED = "training batches are drawn independently of the labels (shuffled)"
HELD_OUT = "validation data are held out from training the way the served data are (new subjects)"
CONVENTION = "the model is trained on the inputs it is served (train and serve agree)"
INVARIANT = "the model is invariant to the symmetries the task has, and only to those"


# --- the cases ----------------------------------------------------------------------------------------------
BUGS: list[SealedCase] = [
    SealedCase(
        "pen_gru_time_major",
        "online handwriting recognition from pen trajectories (GRU)",
        m.PenGRUTimeMajor,
        handwriting_data,
        "nn.GRU was built without batch_first=True and fed (batch, time, features): it runs along the "
        "batch, and out[:, -1] is a state over the batch's last moves, not each drawing's whole trajectory.",
        DEPENDS,
    ),
    SealedCase(
        "pen_gru_optimizer_on_head_only",
        "online handwriting recognition from pen trajectories (optimizer set-up)",
        m.PenGRUHeadOnly,
        handwriting_data,
        "configure_optimizers, copied from a fine-tuning recipe, gives Adam self.head.parameters() only: "
        "the GRU stays at its random initialisation and only the read-out learns.",
        TRAINED,
    ),
    SealedCase(
        "translit_target_not_shifted",
        "transliteration as seq2seq (teacher forcing)",
        m.TransliteratorUnshifted,
        transliteration_data,
        "The decoder reads tgt[:, :-1] and is scored on tgt[:, :-1] too (the shift was lost): each position "
        "sees the token it must predict and learns to copy it, and greedy decoding repeats BOS.",
        TASK_LOSS,
    ),
    SealedCase(
        "translit_no_causal_mask",
        "transliteration as seq2seq (Transformer decoder)",
        m.TransliteratorNoCausalMask,
        transliteration_data,
        "nn.Transformer is called without tgt_mask: in training each decoder position attends to the whole "
        "target, reads the next token off it, and greedy decoding, which has no future to read, spells "
        "garbage.",
        DEPENDS,
    ),
    SealedCase(
        "codec_no_quantisation_noise",
        "learned lossy compression (rate-distortion autoencoder)",
        m.CodecNoNoise,
        codec_data,
        "The training path uses the continuous latents (the uniform-noise proxy of rounding was dropped): "
        "the encoder hides the image in values inside the zero bin, priced at almost no bits, and the "
        "served, rounded code is nearly all zeros.",
        CONVENTION,
    ),
    SealedCase(
        "codec_round_in_training",
        "learned lossy compression (quantisation in training)",
        m.CodecHardRound,
        codec_data,
        "The latents are rounded with torch.round in training too: its gradient is zero, so the encoder "
        "never learns and only the decoder and the entropy model fit its random codes.",
        TRAINED,
    ),
    SealedCase(
        "hashing_batches_class_by_class",
        "binary hashing codes for retrieval (data loading)",
        m.Hasher,
        partial(hashing_data, True),
        "The training digits are read class by class (one folder per class) and the loader is built without "
        "shuffle=True: nearly every batch holds one class, the pairwise loss sees almost no dissimilar "
        "pairs, and the codes of different digits are never pushed apart.",
        SAMPLED,
    ),
    SealedCase(
        "hashing_bce_arguments_swapped",
        "binary hashing codes for retrieval (pairwise loss)",
        m.HasherArgumentsSwapped,
        hashing_data,
        "binary_cross_entropy_with_logits is called as (similar, logits), scikit-learn's (truth, prediction) "
        "order: the loss is linear in the inner products, ignores the dissimilar pairs, and all codes "
        "collapse together.",
        TASK_LOSS,
    ),
    SealedCase(
        "eeg_mirrored_hands_not_swapped",
        "motor-imagery EEG across subjects (hemisphere-mirror augmentation)",
        m.BandPowerNet,
        partial(eeg_data, d.mirrored),
        "The left-right mirror augmentation swaps the channels of the two hemispheres but not the labels: "
        "half the left-hand windows look like right-hand ones and the model cannot tell the hands apart.",
        PAIRED,
    ),
    SealedCase(
        "eeg_windows_split_at_random",
        "motor-imagery EEG across subjects (validation split)",
        m.BandPowerNet,
        partial(eeg_data, split="windows"),
        "The validation windows are drawn at random from all ten subjects instead of held-out subjects: "
        "every validation subject is also a training subject, and the reported accuracy is the "
        "within-subject one, far above what a new user gets.",
        HELD_OUT,
    ),
    SealedCase(
        "poker_cards_concatenated",
        "poker hands as unordered sets of cards (Deep Sets pooling)",
        m.HandNetConcatenated,
        poker_data,
        "The five card vectors are concatenated instead of summed: the head learns card slots of the sorted "
        "training hands (pairs side by side) and misreads hands served in the order dealt.",
        INVARIANT,
    ),
    SealedCase(
        "poker_ranks_relabelled",
        "poker hands as unordered sets of cards (symmetry augmentation)",
        m.HandNet,
        partial(poker_data, d.ranks_relabelled),
        "The augmentation renames ranks by a random permutation as if, like suits, they were symmetric: "
        "straights lose their consecutive ranks, and the model cannot tell a straight from a high card.",
        INVARIANT,
    ),
]

HEALTHY: list[SealedCase] = [
    SealedCase(*row)
    for row in (
        (
            "pen_gru_drawn_backwards",
            "online handwriting (half the drawings played backwards: moves reversed and negated, pen-up "
            "flags kept with their moves)",
            m.PenGRU,
            partial(handwriting_data, d.backwards_half_the_time),
        ),
        (
            "translit_reversed_source",
            "transliteration (source letters reversed in training and serving, as Sutskever et al.; "
            "label smoothing 0.1)",
            m.TransliteratorReversedSource,
            partial(transliteration_data, d.reverse_source, d.reverse_source),
        ),
        (
            "codec_mixed_quantisation",
            "learned compression (rounded latents with a straight-through gradient for the decoder, noisy "
            "ones for the rate)",
            m.CodecMixed,
            codec_data,
        ),
        (
            "codec_low_rate",
            "learned compression at a low rate on purpose (most latents round to zero on nearly every digit)",
            m.CodecLowRate,
            codec_data,
        ),
        (
            "hashing_straight_through_codes",
            "binary hashing (the loss scores sign(u) itself, with a straight-through gradient)",
            m.HasherStraightThrough,
            hashing_data,
        ),
        (
            "eeg_mirrored_with_hands",
            "motor-imagery EEG (hemisphere mirror augmentation that swaps the left and right hands)",
            m.BandPowerNet,
            partial(eeg_data, d.mirrored_with_labels),
        ),
        (
            "eeg_one_subject_validation",
            "motor-imagery EEG (a tiny validation set: 60 windows of one held-out subject)",
            m.BandPowerNet,
            partial(eeg_data, split="one subject", val_windows=60),
        ),
        (
            "poker_suits_relabelled",
            "poker hands (suits renamed at random and cards shuffled per read: true symmetries)",
            m.HandNet,
            partial(poker_data, d.suits_relabelled),
        ),
    )
]
