"""Proofs for sealed gallery Z's second half (``z2``), with plain torch and Lightning (no
``lightning_recipes``): every bug costs more than a stated minimum and than 3x the seed noise of its healthy
twin on the same clean held-out data (or its validation figure overstates that data's); every healthy case
fits: its training and validation losses fall."""

from __future__ import annotations

import pytest
import torch

from galleries import sealed
from galleries.preflight.sealed import _z2_data as d
from galleries.preflight.sealed import _z2_models as m
from galleries.preflight.sealed import z2 as gallery
from galleries.sealed import Proof

BUGS = {case.id: case for case in gallery.BUGS}


# --- task metrics on clean held-out data: errors, lower is better -------------------------------------------
@torch.no_grad()
def handwriting_error(model) -> float:
    """The share of 2,000 held-out drawn digits read as another digit."""
    seq, label = d.pen_digits(2000, 3)
    return (model.predict(seq) != label).float().mean().item()


@torch.no_grad()
def transliteration_error(model) -> float:
    """The share of 500 held-out words whose greedy transliteration is not exactly right."""
    src, tgt = d.words(500, 3)
    return (model.predict(src) != tgt).any(-1).float().mean().item()


@torch.no_grad()
def rate_distortion(model) -> float:
    """The rate-distortion cost of the served codes of the 497 held-out digits: the mean squared error of the
    reconstructions plus ``beta`` x their mean bits per image (the twin's ``beta``)."""
    x, _ = d.digits("test")
    x_hat, bits = model.predict(x)
    return ((x_hat - x).pow(2).mean() + m.Codec.beta * bits.mean()).item()


@torch.no_grad()
def retrieval_error(model) -> float:
    """1 - precision@10: the share of the 10 training digits nearest (Hamming distance between the served
    codes; ties broken by a fixed random jitter) to each of the 497 held-out digits that are of another
    class."""
    query, query_class = d.digits("test")
    base, base_class = d.digits("train")
    q, b = model.predict(query), model.predict(base)
    distance = (q.shape[1] - q @ b.T) / 2 + 0.5 * torch.rand(len(q), len(b), generator=sealed.gen(0))
    nearest = distance.topk(10, largest=False).indices
    return (base_class[nearest] != query_class[:, None]).float().mean().item()


@torch.no_grad()
def eeg_error(model) -> float:
    """The share of 2,000 windows of 20 new subjects (100 each, each subject standardised on their own
    windows) whose imagery is misread."""
    x, label, _ = d.eeg(range(100, 120), 100, 3)
    return (model.predict(x) != label).float().mean().item()


@torch.no_grad()
def validation_eeg_error(model, loaders) -> float:
    """The error the validation set reports."""
    x, label = loaders["val_dataloaders"].dataset.columns
    return (model.predict(x) != label).float().mean().item()


@torch.no_grad()
def poker_error(model) -> float:
    """The share of 4,000 held-out hands, in the order dealt, given the wrong category."""
    cards, label = d.hands(4000, 3)
    return (model.predict(cards) != label).float().mean().item()


PEN, TRANSLIT = (m.PenGRU, gallery.handwriting_data), (m.Transliterator, gallery.transliteration_data)
CODEC, HASH = (m.Codec, gallery.codec_data), (m.Hasher, gallery.hashing_data)
EEG, POKER = (m.BandPowerNet, gallery.eeg_data), (m.HandNet, gallery.poker_data)

PROOFS = {
    "pen_gru_time_major": Proof(PEN, handwriting_error, 0.1, 8),
    "pen_gru_optimizer_on_head_only": Proof(PEN, handwriting_error, 0.1, 8),
    "translit_target_not_shifted": Proof(TRANSLIT, transliteration_error, 0.3, 8),
    "translit_no_causal_mask": Proof(TRANSLIT, transliteration_error, 0.3, 8),
    "codec_no_quantisation_noise": Proof(CODEC, rate_distortion, 0.01, 10),
    "codec_round_in_training": Proof(CODEC, rate_distortion, 0.01, 10),
    "hashing_batches_class_by_class": Proof(HASH, retrieval_error, 0.2, 10),
    "hashing_bce_arguments_swapped": Proof(HASH, retrieval_error, 0.2, 10),
    "eeg_mirrored_hands_not_swapped": Proof(EEG, eeg_error, 0.08, 10),
    "eeg_windows_split_at_random": Proof(EEG, eeg_error, 0.05, 10, lie=validation_eeg_error, worse=False),
    "poker_cards_concatenated": Proof(POKER, poker_error, 0.3, 8),
    "poker_ranks_relabelled": Proof(POKER, poker_error, 0.05, 8),
}
HEALTHY_EPOCHS = {"pen_gru_drawn_backwards": 8, "translit_reversed_source": 8, "poker_suits_relabelled": 8}


def test_every_bug_has_a_proof() -> None:
    sealed.check_gallery(gallery, PROOFS, bugs=11, healthy=7)


@pytest.mark.parametrize("case_id", list(PROOFS))
def test_bug_is_real(case_id: str) -> None:
    sealed.check_bug_is_real(BUGS[case_id], PROOFS[case_id])


@pytest.mark.parametrize("case", gallery.HEALTHY, ids=lambda case: case.id)
def test_healthy_case_fits(case) -> None:
    sealed.check_healthy_case_fits(case, epochs=HEALTHY_EPOCHS.get(case.id, 10))
