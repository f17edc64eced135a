"""Sealed gallery ZX1 (issue #34, half ``zx1``): keypoint detection by heatmaps (the head and tail of a pin on
a small canvas, read out by argmax or soft-argmax), extractive span question answering (start and end
pointers over a short passage of key-value fields), prototypical few-shot classification of digits (episodic
batches of support and query sets; class prototypes as mean embeddings), density estimation with a
normalising flow (a small RealNVP of affine couplings on two moons; negative log-likelihood), behaviour
cloning in a walled gridworld (a policy trained on an expert's state-action pairs, served by rolling it out)
and pairwise skill rating (Bradley-Terry: which of two players wins, from their ids and the match's
features). Written blind (see the package docstring); each bug is proved against its healthy twin in
``test_proofs_zx1.py``."""

from __future__ import annotations

from functools import partial
from typing import Any

from galleries.preflight.sealed import SealedCase
from galleries.preflight.sealed import _zx1_data as d
from galleries.preflight.sealed import _zx1_models as m


# --- data builders (each returns preflight's data keyword arguments) ----------------------------------------
def pin_data(augment=d.crop, val_read=d.to_heatmaps) -> dict[str, Any]:
    """1,500 training canvases, read per draw through ``augment`` (a random crop by default), and 400
    validation canvases read through ``val_read``."""
    train = d.Rows(*d.pins(1500, 1), transform=augment)
    return d.loaders(train, d.Rows(*d.pins(400, 2), transform=val_read), batch_size=64)


def span_data(encoder=d.encode, val_encoder=d.encode, unanswerable: float = 0.0) -> dict[str, Any]:
    """2,000 training passages read through ``encoder`` and 500 validation passages through
    ``val_encoder``."""
    train = d.Passages(d.records(2000, 1, unanswerable), encoder)
    return d.loaders(train, d.Passages(d.records(500, 2, unanswerable), val_encoder), batch_size=64)


def episode_data(**sampler: Any) -> dict[str, Any]:
    """60 fresh 5-way 5-shot episodes (5 queries a class) of the training digits per epoch and 30 fixed
    ones of the validation digits; ``sampler`` changes the training sampler only."""
    return {
        "train_dataloaders": d.episode_loader("train", **sampler),
        "val_dataloaders": d.episode_loader("val", seed=2, episodes=30),
    }


def moon_data(scale: float = 1.0, augment=None) -> dict[str, Any]:
    """3,000 training points (read through ``augment``) and 1,000 validation points, at ``scale``."""
    train = d.Rows(d.moons(3000, 1, scale), transform=augment)
    return d.loaders(train, d.Rows(d.moons(1000, 2, scale)), batch_size=64)


def demo_data(**options: Any) -> dict[str, Any]:
    """The expert's state-action pairs along 600 shortest paths for training and 150 for validation."""
    train = d.Rows(*d.demonstrations(600, 1, **options))
    val = d.Rows(*d.demonstrations(150, 2, **options))
    return {**d.loaders(train, val, batch_size=64), "num_classes": 4}


def match_data(both_ways: bool = False, relabel: bool = False) -> dict[str, Any]:
    """2,000 training matches (each also seen from the other side with ``both_ways``; ids re-encoded by
    first appearance in training with ``relabel``) and 500 validation matches."""
    x, _, won = d.matches(2000, 1)
    val, _, val_won = d.matches(500, 2)
    if relabel:
        x, val = d.relabelled(x, val)
    if both_ways:
        x, won = d.both_ways(x, won)
    return d.loaders(d.Rows(x, won), d.Rows(val, val_won), batch_size=64)


PAIRED = "each input is paired with its own target through sampling, collation and augmentation"
TASK_LOSS = "the loss scores the target the task declares"
DEPENDS = "the output depends on what the task says it depends on"
SCHEDULE = "the loop's state machines (schedulers, accumulation, optimisation steps) advance as declared"
CONVENTION = "the served output is read with the convention the model was trained with"
COVERAGE = "the training batches are drawn from the whole training set, every class included"
TRAINED = "every parameter the task needs is handed to the optimizer"


# --- the cases ----------------------------------------------------------------------------------------------
BUGS: list[SealedCase] = [
    SealedCase(
        "pin_cross_entropy_over_keypoints",
        "keypoint detection by heatmaps (spatial cross-entropy, argmax read-out)",
        m.PinDetectorChannelSoftmax,
        pin_data,
        "The heatmap loss is F.cross_entropy(logits, heat) on (B, K, H, W) tensors, which takes the keypoint "
        "axis as the classes: each pixel's softmax runs over head and tail instead of each keypoint's over "
        "the canvas, and the served argmax of a keypoint's map lands anywhere.",
        TASK_LOSS,
    ),
    SealedCase(
        "pin_heatmap_grid_xy_indexing",
        "keypoint detection by heatmaps (Gaussian targets, argmax read-out)",
        m.PinDetector,
        partial(pin_data, partial(d.crop, indexing="xy"), partial(d.to_heatmaps, indexing="xy")),
        "The target heatmaps are drawn on a torch.meshgrid(..., indexing='xy') grid unpacked as (rows, "
        "cols): every Gaussian sits at (col, row), the network learns mirrored maps it can barely fit, and "
        "the served (row, col) read-out is transposed.",
        CONVENTION,
    ),
    SealedCase(
        "pin_crop_moves_keypoints_back",
        "keypoint detection by heatmaps (random-crop augmentation)",
        m.PinDetector,
        partial(pin_data, d.crop_points_moved_back),
        "The random crop shifts the canvas by its offset but moves the keypoints by the offset with the "
        "opposite sign: the heatmaps of most training canvases sit up to 4 pixels each way from the pin they "
        "belong to.",
        PAIRED,
    ),
    SealedCase(
        "span_end_loss_on_start_logits",
        "extractive span question answering (start and end pointers)",
        m.SpanReaderEndFromStart,
        span_data,
        "The end term of the loss is F.cross_entropy(start_logits, end), a copy-pasted line: the end head "
        "is never trained and the served spans end at random positions.",
        TASK_LOSS,
    ),
    SealedCase(
        "span_end_as_slice_served_inclusive",
        "extractive span question answering (answer offsets)",
        m.SpanReader,
        partial(span_data, d.encode_end_exclusive, d.encode_end_exclusive),
        "The dataset writes the answer's end as a Python slice end (one past the last token) while the "
        "reader serves (start, end) as inclusive positions: every served answer carries the next field's "
        "key or a pad.",
        CONVENTION,
    ),
    SealedCase(
        "span_fields_shuffled_after_offsets",
        "extractive span question answering (field-order augmentation)",
        m.SpanReader,
        partial(span_data, d.encode_shuffled_after_spans),
        "The answer's offsets are computed before the passage's fields are shuffled for augmentation: the "
        "targets point at whatever field landed there, and the reader learns to guess positions.",
        PAIRED,
    ),
    SealedCase(
        "proto_squared_distance_as_logit",
        "prototypical few-shot classification of digits (episodes, mean-embedding prototypes)",
        m.ProtoNetDistanceAsLogit,
        episode_data,
        "The squared distances to the prototypes are passed to cross-entropy as logits without their minus "
        "sign: queries are pushed away from their own class's prototype, and the nearest prototype served "
        "is another class's.",
        TASK_LOSS,
    ),
    SealedCase(
        "proto_episode_classes_randperm_of_way",
        "prototypical few-shot classification of digits (episodic batch sampler)",
        m.ProtoNet,
        partial(episode_data, perm_of_way=True),
        "The episode sampler draws its classes as torch.randperm(way) instead of torch.randperm(10)[:way]: "
        "every training episode holds digits 0-4, and the embedding never learns to separate 5-9.",
        COVERAGE,
    ),
    SealedCase(
        "flow_coupling_masks_not_alternating",
        "density estimation with a normalising flow (RealNVP affine couplings)",
        m.RealNVPSameMask,
        moon_data,
        "Every coupling layer gets the same mask ([[1, 0]] * 6, the alternation forgotten): the first "
        "coordinate passes through untransformed, and its density stays the base normal's.",
        DEPENDS,
    ),
    SealedCase(
        "flow_log_det_subtracted",
        "density estimation with a normalising flow (negative log-likelihood)",
        m.RealNVPLogDetSubtracted,
        moon_data,
        "The loss subtracts the couplings' log-determinant instead of adding it: the flow is rewarded for "
        "squeezing the data towards the mode, and the served density is far too concentrated.",
        TASK_LOSS,
    ),
    SealedCase(
        "flow_served_without_log_det",
        "density estimation with a normalising flow (served log-density)",
        m.RealNVPServedWithoutLogDet,
        moon_data,
        "predict returns the base density of the latent point without the log-determinant of the couplings: "
        "the served log-density is not the data's (and not even normalised).",
        CONVENTION,
    ),
    SealedCase(
        "bc_actions_indexed_clockwise",
        "behaviour cloning on a gridworld (action encoding)",
        m.Policy,
        partial(demo_data, actions=d.CLOCKWISE),
        "The demonstrations store each expert move as its index in a clockwise list (up, right, down, left) "
        "while the environment numbers its moves up, down, left, right: the rolled-out policy turns the "
        "wrong way three moves in four.",
        CONVENTION,
    ),
    SealedCase(
        "bc_state_paired_with_previous_action",
        "behaviour cloning on a gridworld (state-action pairs)",
        m.Policy,
        partial(demo_data, lag=1),
        "The state-action pairs are built as zip(states[1:], actions): each state is labelled with the "
        "move that led into it, so the policy repeats its last move at every turn and overshoots.",
        PAIRED,
    ),
    SealedCase(
        "bc_goal_on_agent_plane",
        "behaviour cloning on a gridworld (one-hot state encoding)",
        m.PolicyGoalOnAgentPlane,
        demo_data,
        "The state encoder scatters the goal onto the agent's plane (obs[:, 0], a copied line): the goal "
        "plane stays empty, the policy cannot tell the agent from the goal, and many of its paths run the "
        "wrong way.",
        DEPENDS,
    ),
    SealedCase(
        "bc_warmup_stepped_per_epoch",
        "behaviour cloning on a gridworld (learning-rate warm-up)",
        m.PolicyWarmupPerEpoch,
        demo_data,
        "configure_optimizers returns [optimizer], [warm_up], which Lightning steps once an epoch: the "
        "100-step linear warm-up lasts 100 epochs and the policy trains at a few hundredths of its learning "
        "rate.",
        SCHEDULE,
    ),
    SealedCase(
        "bt_skills_added",
        "pairwise skill rating (Bradley-Terry with match features)",
        m.BradleyTerrySummed,
        match_data,
        "The logit adds the two players' skills instead of subtracting them: it is symmetric in the players "
        "and cannot say which is the stronger; only the match features are learnt.",
        DEPENDS,
    ),
    SealedCase(
        "bt_sigmoid_twice",
        "pairwise skill rating (Bradley-Terry, binary cross-entropy)",
        m.BradleyTerryDoubleSigmoid,
        match_data,
        "binary_cross_entropy_with_logits is given the win probability instead of the logit: the trained "
        "probability never falls below a half, the skills are driven apart, and the served probabilities "
        "are overconfident.",
        TASK_LOSS,
    ),
    SealedCase(
        "bt_optimizer_without_skills",
        "pairwise skill rating (Bradley-Terry, optimizer set-up)",
        m.BradleyTerrySkillsNotOptimised,
        match_data,
        "The optimizer is built on self.effects.parameters() (a head-only fine-tuning line): the players' "
        "skills stay at their initial 0 and every match is predicted from its features alone.",
        TRAINED,
    ),
    SealedCase(
        "bt_ids_relabelled_for_training",
        "pairwise skill rating (Bradley-Terry, player ids)",
        m.BradleyTerry,
        partial(match_data, relabel=True),
        "The player ids are re-encoded for training by a label encoder (codes in order of first appearance) "
        "that is not applied when serving: the served model looks up the skills of other players.",
        CONVENTION,
    ),
]

HEALTHY: list[SealedCase] = [
    SealedCase(*row)
    for row in (
        (
            "pin_flips_with_heatmaps",
            "keypoint detection by heatmaps (random left-right and up-down flips of canvas and heatmaps "
            "together; no keypoint renamed; tiny, mostly-zero targets)",
            m.PinDetector,
            partial(pin_data, d.flip_both),
        ),
        (
            "pin_soft_argmax_regression",
            "keypoint detection (integral regression: soft-argmax coordinates under an L1 loss, no heatmap "
            "targets)",
            m.PinSoftArgmax,
            partial(pin_data, d.to_points, d.to_points),
        ),
        (
            "span_fields_shuffled",
            "extractive span question answering (the passage's fields shuffled per read, offsets computed "
            "after)",
            m.SpanReader,
            partial(span_data, d.encode_shuffled),
        ),
        (
            "span_unanswerable_to_cls",
            "extractive span question answering (a fifth of the questions unanswerable: start and end both "
            "point at the CLS token, position 0)",
            m.SpanReader,
            partial(span_data, unanswerable=0.2),
        ),
        (
            "proto_cosine_learnt_temperature",
            "prototypical few-shot classification (cosine logits times a learnt temperature; episode "
            "classes renamed 0..4 every batch)",
            m.ProtoNetCosine,
            episode_data,
        ),
        (
            "flow_negative_nll",
            "density estimation with RealNVP (data at a quarter of unit scale: the negative log-likelihood "
            "falls below zero, as a continuous density's may)",
            m.RealNVP,
            partial(moon_data, 0.25),
        ),
        (
            "flow_jittered_points",
            "density estimation with RealNVP (a fresh Gaussian jitter of every point per read)",
            m.RealNVP,
            partial(moon_data, augment=d.jitter),
        ),
        (
            "bc_random_tie_breaks",
            "behaviour cloning (the expert breaks ties between equally short moves at random: the same "
            "state carries different labels, and the loss cannot reach 0)",
            m.Policy,
            partial(demo_data, random_ties=True),
        ),
        (
            "bt_each_match_both_ways",
            "pairwise skill rating (every match duplicated from the other side: ids swapped, features "
            "negated, result flipped)",
            m.BradleyTerry,
            partial(match_data, both_ways=True),
        ),
    )
]
