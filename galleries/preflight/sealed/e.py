"""Sealed gallery E: message passing over directed graphs, learning to rank, keypoints, super-resolution,
masked-patch reconstruction, mixup, mixture density networks, normalizing flows, one-class scoring,
variable-length (packed) sequences, multiple-instance learning, behaviour cloning, energy-and-force
regression and tabular rows with missing values. Written blind (see the package docstring); each bug is
proved against its healthy twin in ``test_proofs_e.py``."""

from __future__ import annotations

from functools import partial
from typing import Any

from torch.utils.data import TensorDataset

from galleries.preflight.sealed import SealedCase
from galleries.preflight.sealed import _e_data as d
from galleries.preflight.sealed import _e_models as m


# --- data builders (each returns preflight's data keyword arguments) ----------------------------------------
def rows_data(make, transform=None, train_seed: int = 1, n: int = 1000, **kw) -> dict[str, Any]:
    """``make(n, seed)`` -> a tuple of tensors for training (through ``transform`` per read, if given) and
    ``make(300, 2)`` for validation."""
    return d.loaders(d.Rows(*make(n, train_seed), transform=transform), d.Rows(*make(300, 2)), **kw)


def graph_data(edges_too: bool | None = None) -> dict[str, Any]:
    """Directed graphs; with ``edges_too`` set, a random node order per read (the BUG: ``False``, the
    adjacency keeps the old order)."""
    transform = None if edges_too is None else partial(d.permute_nodes, edges_too=edges_too)
    return rows_data(d.graphs, transform)


def rank_data(clicks: bool = False) -> dict[str, Any]:
    """Ranked lists; the BUG (``clicks``): the export keeps the logged click count as a feature."""
    return rows_data(partial(d.ranked_lists, clicks=clicks), n=600)


def face_data(swap: bool = True, row_col: bool = False) -> dict[str, Any]:
    """Faces with random horizontal flips (BUGS: ``swap=False``, the eyes keep their names; ``row_col``, the
    flip mirrors the heights)."""
    return rows_data(d.faces, partial(d.flip_face, swap=swap, row_col=row_col))


def superres_data(one_draw: bool | None = None) -> dict[str, Any]:
    """Low- and high-resolution digits; with ``one_draw`` set, random flips (the BUG: ``False``, drawn per
    tensor)."""
    transform = None if one_draw is None else partial(d.flip_pair, one_draw=one_draw)
    return d.loaders(d.Rows(*d.superres("train"), transform=transform), d.Rows(*d.superres("val")))


def patch_data(mask=d.with_mask) -> dict[str, Any]:
    """Digits with a fresh patch mask per read (the BUG, ``d.with_mask_seeded_per_read``: the same mask);
    validation digits with one seeded mask each."""
    x_val = d.digits("val")[0]
    return d.loaders(d.Rows(d.digits("train")[0], transform=mask), d.Rows(*d.fixed_masks(x_val, 2)))


def digit_data() -> dict[str, Any]:
    return {**d.loaders(d.Rows(*d.digits("train")), d.Rows(*d.digits("val"))), "num_classes": 10}


def one_class_data() -> dict[str, Any]:
    return d.loaders(TensorDataset(d.normal_digits("train")), TensorDataset(d.normal_digits("val")))


def bag_data(first_instance_label: bool = False, shuffle_instances: bool = False) -> dict[str, Any]:
    """Bags of digits (the BUG, ``first_instance_label``: labelled by their first instance); with
    ``shuffle_instances``, each bag's order is drawn anew per read."""
    transform = (lambda bag, label: (bag[d.torch.randperm(d.BAG)], label)) if shuffle_instances else None
    train = d.Rows(*d.bags("train", 1000, 1, first_instance_label), transform=transform)
    return d.loaders(train, d.Rows(*d.bags("val", 300, 2, first_instance_label)))


def trajectory_data(late_actions: bool = False) -> dict[str, Any]:
    """Expert trajectories (the BUG, ``late_actions``: each state logged with the next step's action)."""
    make = partial(d.trajectories, late_actions=late_actions)
    return d.loaders(d.Rows(*make(100, 1)), d.Rows(*make(30, 2)), batch_size=64)


def sequence_data(left_pad: bool = False) -> dict[str, Any]:
    """Variable-length sequences padded to 16 steps, on the right (the BUG, ``left_pad``: on the left)."""
    return rows_data(partial(d.sequences, left_pad=left_pad))


def tabular_data(mask_after_fill: bool = False, complete_val: bool = False) -> dict[str, Any]:
    """Dict batches (features, missing marks, target, row id); BUGS: ``mask_after_fill`` marks the missing
    cells after filling them; ``complete_val`` validates on back-filled rows with nothing missing."""
    make = partial(d.tabular_rows, mask_after_fill=mask_after_fill)
    val = d.Records(make(300, 2, complete=complete_val))
    return {**d.loaders(d.Records(make(1000, 1)), val), "target_key": "target"}


faces = partial(rows_data, d.faces)
SHUFFLED_NODES = partial(graph_data, edges_too=True)
densities = partial(rows_data, lambda n, seed: (d.moons(n, seed),))
branches = partial(rows_data, d.two_branches)
molecules = partial(rows_data, d.molecules)

PAIRED = "each input is paired with its own target through sampling, collation and augmentation"
STEPPED = "every trained parameter is stepped"

# --- the cases ----------------------------------------------------------------------------------------------
BUGS: list[SealedCase] = [
    SealedCase(
        "gnn_messages_along_out_edges",
        "node regression by message passing over directed graphs",
        m.GraphNetOutEdges,
        graph_data,
        "The layer aggregates adj @ messages, the sum over a node's out-neighbours, where the target is "
        "made of what its in-neighbours send, so each node listens to the wrong nodes.",
        "the output depends on what the task says it depends on",
    ),
    SealedCase(
        "gnn_node_shuffle_leaves_edges",
        "node regression by message passing over directed graphs (augmentation)",
        m.GraphNet,
        partial(graph_data, edges_too=False),
        "A node-order augmentation permutes the features and targets but not the adjacency, so the edges "
        "join other nodes than the ones the targets were computed from.",
        PAIRED,
    ),
    SealedCase(
        "rank_click_count_leaks_grade",
        "learning to rank (ListNet over query lists)",
        partial(m.ListRanker, features=d.FEATURES + 1),
        partial(rank_data, clicks=True),
        "The training export keeps each document's logged click count, which follows its grade; the ranker "
        "leans on it and ranks new documents (no clicks yet) worse.",
        "no input carries the target",
    ),
    SealedCase(
        "keypoints_flip_keeps_eye_names",
        "keypoint regression (left and right eye, flip augmentation)",
        m.EyeLocator,
        partial(face_data, swap=False),
        "The horizontal flip mirrors each eye's x but does not swap the names, so after a flip 'left' marks "
        "the right eye and the model learns to point between the eyes.",
        PAIRED,
    ),
    SealedCase(
        "keypoints_flip_mirrors_heights",
        "keypoint regression (left and right eye, flip augmentation)",
        m.EyeLocator,
        partial(face_data, row_col=True),
        "The flip helper was written for (row, column) keypoints: on these (x, y) eyes it mirrors the "
        "heights and leaves each x where it was, so flipped faces teach wrong positions.",
        PAIRED,
    ),
    SealedCase(
        "keypoints_ema_updated_per_epoch",
        "keypoint regression served from a weight average (EMA)",
        m.EyeLocatorEMAPerEpoch,
        faces,
        "The EMA with a per-step decay of 0.98 is updated once per epoch, so the served average is still "
        "mostly its random start.",
        "the loop's state machines (averaging) advance as declared",
    ),
    SealedCase(
        "superres_flip_drawn_per_tensor",
        "image super-resolution (paired flip augmentation)",
        m.SuperResolver,
        partial(superres_data, one_draw=False),
        "The flip is drawn separately for the low-resolution input and its high-resolution target, so half "
        "the pairs are mirror images of each other and the outputs blur towards symmetric.",
        PAIRED,
    ),
    SealedCase(
        "superres_unfrozen_encoder_never_stepped",
        "image super-resolution (frozen warm-up, then unfrozen)",
        m.StagedSuperResolverTrainableOnly,
        superres_data,
        "The optimizer is built from the parameters trainable at the start, so the encoder unfrozen at "
        "epoch 1 gets gradients but keeps its random weights.",
        STEPPED,
    ),
    SealedCase(
        "masked_patches_loss_on_visible",
        "masked-patch reconstruction of digits",
        m.PatchFillerVisibleLoss,
        patch_data,
        "The loss weights the visible pixels (a 1 = keep mask convention), so the model learns to copy "
        "what it sees and never fills a hidden patch.",
        "the loss scores what the task asks for",
    ),
    SealedCase(
        "masked_patches_same_mask_every_read",
        "masked-patch reconstruction of digits",
        m.PatchFiller,
        partial(patch_data, d.with_mask_seeded_per_read),
        "The mask comes from a generator seeded on every read, so every image hides the same 6 patches in "
        "every epoch and the model cannot fill the other 10.",
        "the loader serves the variety the pipeline declares (a fresh mask per read)",
    ),
    SealedCase(
        "masked_patches_validated_on_all_pixels",
        "masked-patch reconstruction of digits (validation)",
        m.PatchFillerWholeImageValidation,
        patch_data,
        "Validation pastes the visible pixels back and reports the error over all 64 pixels, 40 of them "
        "exact, so it overstates how well the hidden patches are filled.",
        "what validation reports is what the model does",
    ),
    SealedCase(
        "mixup_labels_from_second_permutation",
        "image classification with mixup",
        m.MixupDigitNetTwoPermutations,
        digit_data,
        "The labels are mixed with a second randperm, so the partner label belongs to another image than "
        "the one blended in: about half the label mass is noise.",
        PAIRED,
    ),
    SealedCase(
        "mdn_weighted_sum_of_log_likelihoods",
        "mixture density network (two-branch target)",
        m.MixtureDensityNetJensen,
        branches,
        "The loss is sum(w * log N) instead of -logsumexp(log w + log N), so one component takes all the "
        "weight and spreads over both branches.",
        "the loss is the likelihood it is declared to be",
    ),
    SealedCase(
        "flow_log_det_subtracted",
        "normalizing flow (2-D density)",
        m.FlowLogDetSubtracted,
        densities,
        "The log-determinant is subtracted, so the loss falls by squeezing every sample to the origin and "
        "the density assigned to new samples is far too low.",
        "the loss is the likelihood it is declared to be",
    ),
    SealedCase(
        "flow_couplings_never_alternate",
        "normalizing flow (2-D density)",
        partial(m.Flow, alternate=False),
        densities,
        "Every coupling transforms the same coordinate, so the first coordinate passes through untouched and "
        "its marginal stays a standard normal.",
        "every part of the output is shaped by parameters",
    ),
    SealedCase(
        "packed_sequences_padded_on_the_left",
        "variable-length sequence regression (pack_padded_sequence)",
        m.PackedSequenceRegressor,
        partial(sequence_data, left_pad=True),
        "The pipeline pads on the left (a tokenizer setting) while pack_padded_sequence assumes right "
        "padding, so the GRU reads padding and the first steps: never the last value, in short sequences "
        "not even the first.",
        "the output depends on every part of the input the task reads",
    ),
    SealedCase(
        "mil_bag_label_from_first_instance",
        "multiple-instance learning (bags of digits)",
        m.BagClassifier,
        partial(bag_data, first_instance_label=True),
        "Each bag is labelled by its first instance (is it a 7) instead of by any instance, so most "
        "positive bags train as negatives.",
        PAIRED,
    ),
    SealedCase(
        "bc_state_logged_with_next_action",
        "behaviour cloning (state -> continuous action)",
        m.Cloner,
        partial(trajectory_data, late_actions=True),
        "The logger pairs each state with the action taken at the next step, so the policy learns to act "
        "one step late.",
        PAIRED,
    ),
    SealedCase(
        "bc_head_reinitialised_every_epoch",
        "behaviour cloning (state -> continuous action)",
        m.ClonerHeadResetEachEpoch,
        trajectory_data,
        "The head's custom initialisation sits in on_train_epoch_start, so every epoch discards the trained "
        "head and the served policy's head has had one epoch.",
        "the loop's state persists across epochs",
    ),
    SealedCase(
        "forces_without_create_graph",
        "energy and force regression (pair potential)",
        m.PairPotentialDetachedForces,
        molecules,
        "autograd.grad is called without create_graph=True, so the force term of the loss is a constant to "
        "the optimizer and the forces are never fitted.",
        "every part of the loss moves the parameters",
    ),
    SealedCase(
        "forces_sign_flipped",
        "energy and force regression (pair potential)",
        m.PairPotentialForceSign,
        molecules,
        "The forces are taken as +dE/dx, so the energy and force terms pull the potential opposite ways "
        "and both are fitted poorly.",
        "each output is scored against its own target",
    ),
    SealedCase(
        "tabular_validated_on_back_filled_rows",
        "tabular regression with missing values (validation)",
        m.MissingAwareRegressor,
        partial(tabular_data, complete_val=True),
        "The validation split comes from the back-filled table where every value was measured, so it "
        "overstates the model on served rows, 38% of which lack feature 0.",
        "what validation reports is what the model does on the data it will serve",
    ),
    SealedCase(
        "tabular_missing_marked_after_fill",
        "tabular regression with missing values (dict batches)",
        m.MissingAwareRegressor,
        partial(tabular_data, mask_after_fill=True),
        "The missing marks are computed after NaN was filled with 0, so none is set and a missing (low) "
        "value reads as a typical 0.",
        "everything supplied is used",
    ),
]

SHUFFLED_BAGS, ATTENTION_MIL = (
    partial(bag_data, shuffle_instances=True),
    partial(m.BagClassifier, attention=True),
)
PER_QUERY = partial(m.ListRanker, per_query=True)
HEALTHY: list[SealedCase] = [
    SealedCase(*row)
    for row in (
        ("gnn_in_edge_sum", "node regression by message passing", m.GraphNet, graph_data),
        ("gnn_node_order_shuffled", "node regression (node-order augmentation)", m.GraphNet, SHUFFLED_NODES),
        ("rank_listnet", "learning to rank (ListNet over query lists)", m.ListRanker, rank_data),
        ("rank_standardised_per_query", "learning to rank (per-query feature scaling)", PER_QUERY, rank_data),
        ("keypoints_flip_swaps_eyes", "keypoint regression (flip augmentation)", m.EyeLocator, face_data),
        ("keypoints_ema_per_step", "keypoint regression served from an EMA", m.EyeLocatorEMA, faces),
        ("superres_paired_flips", "image super-resolution (paired flips)", m.SuperResolver, superres_data),
        (
            "superres_frozen_then_unfrozen",
            "image super-resolution (frozen warm-up, then unfrozen)",
            m.StagedSuperResolver,
            superres_data,
        ),
        ("masked_patches_reconstruction", "masked-patch reconstruction", m.PatchFiller, patch_data),
        ("mixup_one_permutation", "image classification with mixup", m.MixupDigitNet, digit_data),
        ("mdn_mixture_likelihood", "mixture density network (NLL < 0)", m.MixtureDensityNet, branches),
        ("flow_alternating_couplings", "normalizing flow (2-D density)", m.Flow, densities),
        (
            "flow_bits_with_constant_offset",
            "normalizing flow (loss in bits + 8)",
            m.FlowInBitsWithOffset,
            densities,
        ),
        (
            "flow_two_optimizers_manual",
            "flow (manual optimisation, two optimizers)",
            m.FlowTwoOptimizersManual,
            densities,
        ),
        ("one_class_fixed_centre_no_bias", "one-class scoring (deep SVDD)", m.OneClassNet, one_class_data),
        (
            "mil_attention_over_shuffled_instances",
            "multiple-instance learning (attention pooling, instance order drawn per read)",
            ATTENTION_MIL,
            SHUFFLED_BAGS,
        ),
        (
            "packed_sequences_padded_on_the_right",
            "variable-length sequence regression (pack_padded_sequence)",
            m.PackedSequenceRegressor,
            sequence_data,
        ),
        ("bc_expert_actions", "behaviour cloning (state -> continuous action)", m.Cloner, trajectory_data),
        ("forces_from_energy_gradient", "energy and force regression", m.PairPotential, molecules),
        (
            "tabular_missing_marked_with_row_ids",
            "tabular regression with missing values (dict batches, metadata field)",
            m.MissingAwareRegressor,
            tabular_data,
        ),
    )
]
