"""Proofs for sealed gallery H, with plain torch and Lightning (no ``lightning_recipes``): every bug costs
more than a stated minimum and than 3x the seed noise of its healthy twin on the same clean held-out data (or,
for a validation lie, its validation figure overstates the held-out one by more than the twin's does); every
healthy case fits: its training and validation losses fall."""

from __future__ import annotations

import math
from functools import partial
from typing import Any

import pytest
import torch

from galleries import sealed
from galleries.preflight.sealed import _h_data as d
from galleries.preflight.sealed import _h_models as m
from galleries.preflight.sealed import h as gallery
from galleries.sealed import Proof

BUGS = {case.id: case for case in gallery.BUGS}


# --- task metrics on clean held-out data: errors, lower is better -------------------------------------------
def _error_rate(predicted: torch.Tensor, target: torch.Tensor) -> float:
    return (predicted.argmax(-1) != target).float().mean().item()


@torch.no_grad()
def node_error(model) -> float:
    """The error on the test nodes of the (correctly loaded) graph."""
    graph = d.node_graph()
    test = graph["test"]
    return _error_rate(model(graph["x"], graph["adj"])[test], graph["label"][test])


@torch.no_grad()
def ctc_error(model) -> float:
    """1 - the exact-match rate of the served letter sequences on held-out frames."""
    frames, letters, _, counts = d.letter_frames(800, 3)
    served = model.predict(frames)
    truth = [row[:count] for row, count in zip(letters.tolist(), counts.tolist(), strict=True)]
    return 1 - sum(s == t for s, t in zip(served, truth, strict=True)) / len(truth)


def _verification_error(model, a: torch.Tensor, b: torch.Tensor, same: torch.Tensor) -> float:
    return (model.predict(a, b) != same.bool()).float().mean().item()


@torch.no_grad()
def verification_error(model) -> float:
    """The share of held-out pairs (of the test digits) served the wrong same/different answer."""
    return _verification_error(model, *d.digit_pairs("test", 1000, 6))


@torch.no_grad()
def choice_error(model) -> float:
    context, options, mask, answer = d.choices(2000, 3)
    return _error_rate(model(context, options, mask), answer)


@torch.no_grad()
def speaker_error(model) -> float:
    frames, speaker = d.utterances(1000, 3)
    return _error_rate(model(frames), speaker)


@torch.no_grad()
def new_recording_error(model) -> float:
    """The speaker error on utterances of new recordings (2 per speaker, channels never heard)."""
    frames, speaker, _ = d.recordings(5, 2)
    return _error_rate(model(frames), speaker)


@torch.no_grad()
def speaker_val_figure(model, loaders: dict[str, Any]) -> float:
    rows = [(model(frames), speaker) for frames, speaker in loaders["val_dataloaders"]]
    return _error_rate(torch.cat([p for p, _ in rows]), torch.cat([y for _, y in rows]))


@torch.no_grad()
def change_miss(model) -> float:
    """The share of held-out series whose predicted change is more than 2 steps from the real one."""
    series, change = d.level_changes(1000, 3)
    return ((model(series).argmax(-1) - change).abs() > 2).float().mean().item()


@torch.no_grad()
def ranking_error(model) -> float:
    """1 - AUC: for each held-out click, the share of the user's unclicked catalogue items ranked above it."""
    parts = d.clicks()
    clicked = torch.zeros(d.USERS, d.ITEMS, dtype=torch.bool)
    for user, item in parts.values():
        clicked[user, item] = True
    user, item = parts["test"]
    scores = model.all_scores(user)
    above = (scores > scores.gather(1, item[:, None])) & ~clicked[user]
    return (above.sum(1) / (~clicked[user]).sum(1)).mean().item()


@torch.no_grad()
def forecast_nll(model) -> float:
    """The Gaussian negative log-likelihood of held-out next values under the served mean and std."""
    window, target = d.noisy_season(2000, 3)
    mean, std = model.predict(window)
    nll = 0.5 * ((target - mean) / std) ** 2 + std.log() + 0.5 * math.log(2 * math.pi)
    return nll.mean().item()


NODE, CTC = (m.NodeSAGE, gallery.graph_data), (m.CTCNet, gallery.ctc_data)
PAIRS, CHANGE = (m.SiameseNet, gallery.pair_data), (m.ChangeNet, gallery.change_data)

PROOFS = {
    "node_own_features_overwritten": Proof(NODE, node_error, 0.05, 4),
    "node_edge_ids_shifted": Proof(NODE, node_error, 0.05, 4),
    "ctc_default_blank_is_a_letter": Proof(CTC, ctc_error, 0.2, 6),
    "ctc_blanks_dropped_before_merging": Proof(CTC, ctc_error, 0.1, 6),
    "siamese_label_convention_flipped": Proof(PAIRS, verification_error, 0.2, 6),
    "siamese_norm_without_dim": Proof(PAIRS, verification_error, 0.2, 6),
    "choice_context_repeat_not_interleaved": Proof(
        (m.ChoiceScorer, gallery.choice_data), choice_error, 0.2, 6
    ),
    "choice_unfrozen_layers_never_stepped": Proof(
        (m.ChoiceScorerWarmup, gallery.choice_data), choice_error, 0.2, 6
    ),
    "speaker_utterance_mean_removed": Proof((m.SpeakerNet, gallery.speaker_data), speaker_error, 0.1, 6),
    "speaker_split_by_utterance": Proof(
        (m.SpeakerNet, gallery.session_data), new_recording_error, 0.1, 6, lie=speaker_val_figure, worse=False
    ),
    "change_reversal_keeps_index": Proof(
        (m.ChangeNet, partial(gallery.change_data, move_change=True)), change_miss, 0.03, 4
    ),
    "change_warmup_stepped_per_epoch": Proof(CHANGE, change_miss, 0.1, 4),
    "bpr_item_ids_factorised": Proof((m.BPR, gallery.click_data), ranking_error, 0.1, 4),
    "gaussian_std_passed_as_variance": Proof(
        (m.GaussianForecaster, gallery.forecast_data), forecast_nll, 0.3, 6
    ),
}


def test_every_bug_has_a_proof() -> None:
    sealed.check_gallery(gallery, PROOFS, bugs=14, healthy=13)


@pytest.mark.parametrize("case_id", list(PROOFS))
def test_bug_is_real(case_id: str) -> None:
    sealed.check_bug_is_real(BUGS[case_id], PROOFS[case_id])


@pytest.mark.parametrize("case", gallery.HEALTHY, ids=lambda case: case.id)
def test_healthy_case_fits(case) -> None:
    sealed.check_healthy_case_fits(case, epochs=4)
