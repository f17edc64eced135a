"""Proofs for sealed gallery J, with plain torch and Lightning (no ``lightning_recipes``): every bug costs
more than a stated minimum and than 3x the seed noise of its healthy twin on the same clean held-out data (and
where the bug also flatters validation, its validation figure overstates the held-out one by more than the
twin's does); every healthy case fits: its training and validation losses fall."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from galleries import sealed
from galleries.preflight.sealed import _j_data as d
from galleries.preflight.sealed import _j_models as m
from galleries.preflight.sealed import j as gallery
from galleries.sealed import Proof

BUGS = {case.id: case for case in gallery.BUGS}


# --- task metrics on clean held-out data: errors, lower is better -------------------------------------------
@torch.no_grad()
def clip_error(model) -> float:
    """The error rate on held-out clips (every other frame, in order)."""
    clip, label = d.evenly_spaced(1000, 3)
    return (model.predict(clip) != label).float().mean().item()


@torch.no_grad()
def keyword_error(model) -> float:
    """The error rate on held-out clips recorded as they will be served (silence is room noise)."""
    x, label = d.utterances(2000, 3)
    return (model.predict(x) != label).float().mean().item()


@torch.no_grad()
def keyword_validation_error(model, loaders: dict[str, Any]) -> float:
    """What validation reports: the error rate on the validation loader."""
    wrong = [(model.predict(x) != label).float() for x, label in loaders["val_dataloaders"]]
    return torch.cat(wrong).mean().item()


@torch.no_grad()
def next_item_miss(model) -> float:
    """1 - hit@1 of the served next item after the first 12 items of held-out sessions."""
    (items,) = d.sessions(2000, 3)
    return (model.predict(items[:, :-1]) != items[:, -1]).float().mean().item()


@torch.no_grad()
def next_item_validation_miss(model, loaders: dict[str, Any]) -> float:
    """What validation reports: 1 - hit@1 of the next item at every position of the validation sessions."""
    misses = [
        (model(items[:, :-1]).argmax(-1) != items[:, 1:]).float().flatten()
        for (items,) in loaders["val_dataloaders"]
    ]
    return torch.cat(misses).mean().item()


@torch.no_grad()
def short_session_miss(model) -> float:
    """1 - hit@1 of the served next item after all but the last item of held-out sessions of 4..13 items."""
    items, length = d.short_sessions(2000, 3)
    rows = torch.arange(len(items))
    target, history = items[rows, length - 1].clone(), items.clone()
    history[rows, length - 1] = 0
    return (model.predict(history, length - 1) != target).float().mean().item()


def auc(score: torch.Tensor, label: torch.Tensor) -> float:
    pos, neg = score[label == 1][:, None], score[label == 0][None]
    return ((pos > neg).float() + 0.5 * (pos == neg).float()).mean().item()


@torch.no_grad()
def link_miss(model) -> float:
    """1 - the AUROC of the served link probability on held-out edges (never observed) against random
    pairs."""
    src, dst, label = d.scored_edges("test")
    return 1 - auc(model.predict(src, dst), label)


@torch.no_grad()
def link_validation_miss(model, loaders: dict[str, Any]) -> float:
    """What validation reports: 1 - the AUROC on the validation edges and their fixed negatives."""
    src, dst, label = d.scored_edges("val")
    return 1 - auc(model.predict(src, dst), label)


@torch.no_grad()
def mpjpe(model) -> float:
    """The mean per-joint position error of the served 3-D pose of held-out people from image keypoints."""
    keypoints, joints = d.raw_keypoints(2000, 3)
    return (model.predict(keypoints) - joints).norm(dim=-1).mean().item()


@torch.no_grad()
def tag_f1_miss(model) -> float:
    """1 - the macro F1 (over the 6 tags) of the served probabilities at .5 on held-out documents."""
    tokens, tags = d.documents(2000, 3)
    predicted = model.predict(tokens) > 0.5
    hit = (predicted & (tags == 1)).sum(0).float()
    f1 = 2 * hit / (predicted.sum(0) + tags.sum(0)).clamp_min(1)
    return 1 - f1.mean().item()


@torch.no_grad()
def speech_error(model) -> float:
    """The MSE of the served enhanced spectrogram against the clean speech of held-out recordings (at their
    own levels), relative to the clean speech's variance."""
    mixture, clean = d.noisy_speech(1000, 3)
    return (((model.predict(mixture) - clean) ** 2).mean() / clean.var()).item()


VIDEO, KEYWORD = (m.Clip3DCNN, gallery.video_data), (m.KeywordNet, gallery.keyword_data)
LINK, POSE = (m.LinkGCN, gallery.link_data), (m.PoseLifter, gallery.pose_data)

PROOFS = {
    "video_frames_sampled_out_of_order": Proof(VIDEO, clip_error, 0.2, 6),
    "keyword_silence_as_zeros": Proof(KEYWORD, keyword_error, 0.05, 4, lie=keyword_validation_error),
    "keyword_one_cycle_stepped_per_epoch": Proof(KEYWORD, keyword_error, 0.1, 4),
    "next_item_attention_unmasked": Proof(
        (m.NextItemTransformer, gallery.session_data), next_item_miss, 0.05, 8, lie=next_item_validation_miss
    ),
    "session_gru_served_after_padding": Proof(
        (m.SessionGRU, gallery.short_session_data), short_session_miss, 0.1, 4
    ),
    "link_ranking_arguments_swapped": Proof((m.LinkGCNRanking, gallery.link_data), link_miss, 0.2, 40),
    "link_validation_edges_in_message_graph": Proof(
        LINK, link_miss, 0.03, 40, lie=link_validation_miss, worse=False
    ),
    "link_edges_one_direction": Proof(LINK, link_miss, 0.02, 40),
    "pose_flip_without_joint_swap": Proof(POSE, mpjpe, 0.02, 4),
    "pose_weight_average_too_slow": Proof(POSE, mpjpe, 0.05, 4),
    "pose_served_without_centring": Proof(POSE, mpjpe, 0.1, 4),
    "tags_padding_scattered_as_tag_zero": Proof((m.TagNet, gallery.tag_data), tag_f1_miss, 0.03, 8),
    "speech_target_left_unnormalised": Proof((m.MaskEnhancer, gallery.speech_data), speech_error, 0.1, 4),
}


def test_every_bug_has_a_proof() -> None:
    sealed.check_gallery(gallery, PROOFS, bugs=13, healthy=9)


@pytest.mark.parametrize("case_id", list(PROOFS))
def test_bug_is_real(case_id: str) -> None:
    sealed.check_bug_is_real(BUGS[case_id], PROOFS[case_id])


@pytest.mark.parametrize("case", gallery.HEALTHY, ids=lambda case: case.id)
def test_healthy_case_fits(case) -> None:
    sealed.check_healthy_case_fits(case, epochs=4)
