"""Sealed gallery J: video clip classification with a 3-D CNN, keyword spotting on filterbank frames,
sequential (next-item) recommendation with a causal transformer and with a session GRU, link prediction with
a graph autoencoder (logistic and ranking losses), 3-D human pose lifting from 2-D keypoints (flip
augmentation, a served weight average), multi-label tagging of token documents and speech enhancement by
spectral masking. Written blind (see the package docstring); each bug is proved against its healthy twin in
``test_proofs_j.py``."""

from __future__ import annotations

from functools import partial
from typing import Any

from galleries.preflight.sealed import SealedCase
from galleries.preflight.sealed import _j_data as d
from galleries.preflight.sealed import _j_models as m


# --- data builders (each returns preflight's data keyword arguments) ----------------------------------------
def video_data(sampler=d.sample_frames) -> dict[str, Any]:
    """1,000 training clips, 6 frames drawn per read by ``sampler``; 300 validation clips, evenly spaced."""
    train = d.Rows(*d.clips(1000, 1), transform=sampler)
    return {**d.loaders(train, d.Rows(*d.evenly_spaced(300, 2))), "num_classes": 4}


def keyword_data(digital_silence: bool = False) -> dict[str, Any]:
    """2,000 training clips (shifted in time per read) and 500 validation clips, built by the same code."""
    train = d.Rows(*d.utterances(2000, 1, digital_silence), transform=d.time_shift)
    val = d.Rows(*d.utterances(500, 2, digital_silence))
    return {**d.loaders(train, val, batch_size=64), "num_classes": d.KEYWORDS + 2}


def session_data() -> dict[str, Any]:
    """2,000 training and 300 validation sessions of 13 items."""
    return d.loaders(d.Rows(*d.sessions(2000, 1)), d.Rows(*d.sessions(300, 2)), batch_size=64)


def short_session_data() -> dict[str, Any]:
    """2,000 training and 300 validation sessions of 4..13 items, right-padded, with their lengths."""
    return d.loaders(d.Rows(*d.short_sessions(2000, 1)), d.Rows(*d.short_sessions(300, 2)), batch_size=64)


def link_data() -> dict[str, Any]:
    """Training edges (positives only: the model draws its negatives); validation edges with fixed
    negatives."""
    train = d.community_graph()["train"]
    return d.loaders(d.Rows(train[:, 0], train[:, 1]), d.Rows(*d.scored_edges("val")), batch_size=64)


def pose_data(augment=d.flip) -> dict[str, Any]:
    """2,000 training people (flipped per read by ``augment``) and 500 validation people."""
    train = d.Rows(*d.poses(2000, 1), transform=augment)
    return d.loaders(train, d.Rows(*d.poses(500, 2)), batch_size=64)


def tag_data(to_multi_hot=d.to_multi_hot) -> dict[str, Any]:
    """2,000 training and 500 validation documents; the exported tag lists become multi-hots per read."""
    train = d.Rows(*d.tag_lists(2000, 1), transform=to_multi_hot)
    val = d.Rows(*d.tag_lists(500, 2), transform=to_multi_hot)
    return d.loaders(train, val, batch_size=64)


def speech_data(normalise=d.peak_normalise) -> dict[str, Any]:
    """1,500 training and 300 validation recordings, peak-normalised per read by ``normalise``."""
    train = d.Rows(*d.noisy_speech(1500, 1), transform=normalise)
    val = d.Rows(*d.noisy_speech(300, 2), transform=normalise)
    return d.loaders(train, val, batch_size=64)


PAIRED = "each input is paired with its own target through sampling, collation and augmentation"
SERVED = "what validation reports is what the model does when served"
SPLIT = "what validation scores was not seen in training"
SCHEDULE = "the loop's state machines (schedulers, accumulation, averaging) advance as declared"
DEPENDS = "the output depends on what the task says it depends on"
TASK_LOSS = "the loss scores the target the task declares"
CLEAN = "the training data is drawn as the data the model will serve"


# --- the cases ----------------------------------------------------------------------------------------------
BUGS: list[SealedCase] = [
    SealedCase(
        "video_frames_sampled_out_of_order",
        "video clip classification (3-D CNN, segment sampling)",
        m.Clip3DCNN,
        partial(video_data, d.sample_frames_unsorted),
        "The 6 training frames are drawn with randperm(12)[:6] and used in the order drawn: the clip plays "
        "shuffled, a blob moving right looks like one moving left, and the model only learns the axis.",
        PAIRED,
    ),
    SealedCase(
        "keyword_silence_as_zeros",
        "keyword spotting (silence and unknown classes)",
        m.KeywordNet,
        partial(keyword_data, digital_silence=True),
        "The silence class is generated as torch.zeros clips, for training and validation alike: the model "
        "learns that silence is exactly zero, and real silence (room noise) is called a word.",
        CLEAN,
    ),
    SealedCase(
        "keyword_one_cycle_stepped_per_epoch",
        "keyword spotting (one-cycle schedule)",
        m.KeywordNetScheduleByEpoch,
        keyword_data,
        "The one-cycle schedule is sized in batches but returned as [optimizer], [scheduler], which "
        "Lightning steps once per epoch: the whole run stays at the start of the warm-up, a 25th of the "
        "learning rate.",
        SCHEDULE,
    ),
    SealedCase(
        "next_item_attention_unmasked",
        "sequential recommendation (SASRec-style causal transformer)",
        m.NextItemTransformerNoMask,
        session_data,
        "The encoder runs without the causal mask: each position attends to the next one, whose item is its "
        "target, so training and validation copy the answer and the served next item is a guess.",
        DEPENDS,
    ),
    SealedCase(
        "session_gru_served_after_padding",
        "sequential recommendation (GRU over right-padded sessions)",
        m.SessionGRULastColumn,
        short_session_data,
        "predict() reads states[:, -1]: for a short session that is the GRU state after its padding, not "
        "after its last item, while training (and validation) score every real position correctly.",
        SERVED,
    ),
    SealedCase(
        "link_validation_edges_in_message_graph",
        "link prediction (graph autoencoder, edge split)",
        m.LinkGCNAllEdges,
        link_data,
        "The adjacency the GCN propagates over is built from every known edge, validation edges included: "
        "validation asks about links the encoder passes messages along, and overstates the model on new "
        "ones.",
        SPLIT,
    ),
    SealedCase(
        "link_edges_one_direction",
        "link prediction (graph autoencoder, undirected graph)",
        m.LinkGCNOneWay,
        link_data,
        "The edge list holds each pair once (i < j) and is not made undirected: messages flow from lower to "
        "higher node ids only, and half the nodes hear from few or none of their neighbours.",
        DEPENDS,
    ),
    SealedCase(
        "link_ranking_arguments_swapped",
        "link prediction (graph autoencoder, margin ranking loss)",
        m.LinkGCNRankingSwapped,
        link_data,
        "margin_ranking_loss(neg, pos, ones): with target 1 the first argument must rank higher, so the "
        "model learns to score random node pairs above real links.",
        TASK_LOSS,
    ),
    SealedCase(
        "pose_flip_without_joint_swap",
        "3-D human pose lifting from 2-D keypoints (flip augmentation)",
        m.PoseLifter,
        partial(pose_data, d.flip_without_swap),
        "The mirror augmentation negates x but does not swap left and right joints: a mirrored person reads "
        "as one turned round with the depth not turned, and the model blurs the depth of the nose and hands.",
        PAIRED,
    ),
    SealedCase(
        "pose_weight_average_too_slow",
        "3-D human pose lifting (served exponential moving average)",
        m.PoseLifterSlowAverage,
        pose_data,
        "The served weight average has a fixed decay of .999 from step 0: after a few hundred steps it is "
        "still mostly the random init, while validation (on the live weights) looks fine.",
        SERVED,
    ),
    SealedCase(
        "pose_served_without_centring",
        "3-D human pose lifting (serving path)",
        m.PoseLifterUncentred,
        pose_data,
        "The dataset centred the keypoints on the pelvis; predict() feeds the detector's image coordinates "
        "as they come, so every served pose is shifted by where the person stands.",
        SERVED,
    ),
    SealedCase(
        "tags_padding_scattered_as_tag_zero",
        "multi-label tagging of token documents",
        m.TagNet,
        partial(tag_data, d.to_multi_hot_with_padding),
        "The exported tag lists are padded with 0 and scattered into the multi-hot whole: every document "
        "with fewer than 3 tags gains tag 0, and the model learns to put tag 0 on everything.",
        PAIRED,
    ),
    SealedCase(
        "speech_target_left_unnormalised",
        "speech enhancement (spectral masking, peak normalisation)",
        m.MaskEnhancer,
        partial(speech_data, d.peak_normalise_input_only),
        "The dataset divides the mixture by its peak but leaves the clean target at the recording level: the "
        "bounded mask cannot reach loud targets, and served output is scaled wrongly for every recording.",
        PAIRED,
    ),
]

HEALTHY: list[SealedCase] = [
    SealedCase(*row)
    for row in (
        (
            "video_segments_in_time_order",
            "video clips (6 of 12 frames drawn per read, in time order)",
            m.Clip3DCNN,
            video_data,
        ),
        (
            "keyword_one_cycle_per_batch",
            "keyword spotting (silence is room noise; circular time shifts)",
            m.KeywordNet,
            keyword_data,
        ),
        (
            "next_item_causal_tied_output",
            "sequential recommendation (causal transformer, output tied to the item table: loss ~17 at init)",
            m.NextItemTransformer,
            session_data,
        ),
        (
            "session_gru_padded",
            "sequential recommendation (GRU, padding ignored in the loss)",
            m.SessionGRU,
            short_session_data,
        ),
        (
            "link_gae_fresh_negatives",
            "link prediction (random negatives drawn every step)",
            m.LinkGCN,
            link_data,
        ),
        (
            "link_margin_ranking",
            "link prediction (margin ranking loss, exactly 0 once margins are met)",
            m.LinkGCNRanking,
            link_data,
        ),
        (
            "pose_flip_swapped_served_average",
            "3-D pose lifting (constant pelvis target, frozen weight average)",
            m.PoseLifter,
            pose_data,
        ),
        (
            "tags_with_untagged_documents",
            "multi-label tagging (a fifth of the targets all zero)",
            m.TagNet,
            tag_data,
        ),
        (
            "speech_sigmoid_mask",
            "speech enhancement (a mask bounded in [0, 1]; loss on the masked mixture)",
            m.MaskEnhancer,
            speech_data,
        ),
    )
]
