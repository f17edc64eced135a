"""Sealed gallery ZU (issue #34, half ``zu2``): protein secondary-structure tagging (a 3-state label per
residue from one-hot amino acids; variable chain lengths, padding), data association for tracking (each object
of one frame matched to a detection of the next, or to "vanished"; clutter, padded columns), reaction yield
regression from a pair of reactant fingerprints (order-invariant, a bounded 0-100% target), grasp-success
prediction from small synthetic depth patches (rare positives, rotation augmentation that turns the grasp
angle too) and a surrogate for the periodic 1-D heat equation (initial condition in, solution at time T out).
Written blind (see the package docstring); each bug is proved against its healthy twin in
``test_proofs_zu2.py``."""

from __future__ import annotations

from functools import partial
from typing import Any

from galleries.preflight.sealed import SealedCase
from galleries.preflight.sealed import _zu2_data as d
from galleries.preflight.sealed import _zu2_models as m


# --- data builders (each returns preflight's data keyword arguments) ----------------------------------------
def structure_data(collate=d.pad_chains) -> dict[str, Any]:
    """1,500 training chains (collated into padded batches by ``collate``) and 300 validation chains, padded
    once."""
    train = d.Rows(*d.chains(1500, 1))
    val = d.Rows(*d.chain_matrix(300, 2))
    return {**d.loaders(train, val, batch_size=64, collate_fn=collate), "num_classes": d.STATES}


def association_data(target=None) -> dict[str, Any]:
    """2,000 training frame pairs (each target read through ``target``) and 400 validation pairs, as dict
    batches."""
    train = d.FramePairs(d.frame_pairs(2000, 1), target)
    val = d.FramePairs(d.frame_pairs(400, 2))
    loaders = d.loaders(train, val, batch_size=64)
    return {**loaders, "input_key": "rows", "target_key": "match", "num_classes": d.COLUMNS + 1}


def yield_data(copy_first: bool = False, augment=None) -> dict[str, Any]:
    """2,000 training reactions (read through ``augment``) and 400 validation reactions from the lab's
    sheet (halide first); with ``copy_first`` the pair is built from the first reactant's column twice."""
    fp_a, fp_b, y = d.reactions(2000, 1)
    train = d.Rows(fp_a, fp_a if copy_first else fp_b, y, transform=augment)
    return d.loaders(train, d.Rows(*d.reactions(400, 2)), batch_size=64)


def grasp_data(augment=d.turn, balanced: bool = True) -> dict[str, Any]:
    """2,500 training grasps (augmented per read by ``augment``; drawn held / failed equally often with
    ``balanced``) and 500 validation grasps."""
    depth, angle, held = d.grasps(2500, 1)
    train = d.Rows(depth, angle, held, transform=augment)
    kwargs = {"sampler": d.balanced_sampler(held)} if balanced else {}
    return d.loaders(train, d.Rows(*d.grasps(500, 2)), batch_size=64, **kwargs)


def heat_data(k=d.wavenumbers) -> dict[str, Any]:
    """1,500 training (initial, final) pairs solved with wavenumbers ``k`` and 300 validation pairs solved
    with the same."""
    return d.loaders(d.Rows(*d.heat_pairs(1500, 1, k)), d.Rows(*d.heat_pairs(300, 2, k)), batch_size=32)


PAIRED = "each input is paired with its own target through sampling, collation and augmentation"
TARGET = "the target is the quantity the task declares, encoded as the task defines it"
TASK_LOSS = "the loss scores the target the task declares"
DEPENDS = "the output depends on what the task says it depends on"
SCHEDULE = "the loop's state machines (schedulers, accumulation, optimisation steps) advance as declared"
SERVED = "the served output is computed in eval mode, without training-time randomness"
INVARIANT = "the output is invariant to the symmetries the task declares"
TRAINED = "every parameter meant to learn is updated by the optimiser"
TRAIN_SERVE = "inputs are made the same way in training as in serving"


# --- the cases ----------------------------------------------------------------------------------------------
BUGS: list[SealedCase] = [
    SealedCase(
        "structure_collate_sorts_chains_only",
        "protein secondary-structure tagging (padding collate)",
        m.SecondaryStructure,
        partial(structure_data, d.pad_chains_sorted),
        "The collate sorts the chains longest first for packing but stacks the labels in the order they "
        "came: each batch's chains are tagged with other chains' states.",
        PAIRED,
    ),
    SealedCase(
        "structure_gru_not_batch_first",
        "protein secondary-structure tagging (bidirectional GRU)",
        m.SecondaryStructureTimeFirst,
        structure_data,
        "The GRU is built without batch_first=True on (chains, residues, features) batches: it runs across "
        "the chains of the batch, and no residue sees its neighbours in its own chain.",
        DEPENDS,
    ),
    SealedCase(
        "structure_functional_dropout_at_serving",
        "protein secondary-structure tagging (dropout on the embedded residues)",
        m.SecondaryStructureDropoutAlways,
        structure_data,
        "The dropout on the embedded residues is F.dropout(h, 0.5) without training=self.training: it keeps "
        "dropping half of the features when the model is served in eval mode, and the served tags are noisy.",
        SERVED,
    ),
    SealedCase(
        "association_softmax_over_rows",
        "data association for tracking (per-row classification over the next frame's detections)",
        m.AssociatorSoftmaxOverRows,
        association_data,
        "The log-softmax is taken over dim 1 (the rows) of the (batch, rows, columns) scores: each detection "
        "is normalised over the objects instead of each object over the detections, so clutter and the "
        "'vanished' class are never scored against the true match, and the served argmax over columns is "
        "off.",
        TASK_LOSS,
    ),
    SealedCase(
        "association_vanished_labelled_column_zero",
        "data association for tracking (target encoding of vanished objects)",
        m.Associator,
        partial(association_data, d.vanished_as_zero),
        "The targets are built with torch.where(found, column, 0): an object that vanished is labelled as "
        "matching the first detection of the next frame instead of the 'vanished' class.",
        TARGET,
    ),
    SealedCase(
        "association_velocity_backwards",
        "data association for tracking (motion model)",
        m.AssociatorVelocityBackwards,
        association_data,
        "The object's displacement is computed as previous minus current position: each object is expected "
        "behind where it was, and fast objects are matched to the wrong detections.",
        DEPENDS,
    ),
    SealedCase(
        "yield_bce_arguments_swapped",
        "reaction yield regression (binary cross-entropy on the yield fraction)",
        m.YieldNetArgumentsSwapped,
        yield_data,
        "binary_cross_entropy_with_logits is called as (y / 100, logits): the yield is the logit and the "
        "model's output the target, a loss that falls forever as every output grows and every yield is "
        "served near 100%.",
        TASK_LOSS,
    ),
    SealedCase(
        "yield_second_reactant_copied",
        "reaction yield regression (pair construction)",
        m.YieldNet,
        partial(yield_data, True),
        "The dataset is built as Rows(fp_a, fp_a, y), the first reactant's column twice: the model never "
        "sees the second reactant and serves each reaction the average yield of its first.",
        PAIRED,
    ),
    SealedCase(
        "yield_pair_concatenated",
        "reaction yield regression (order-invariant pair encoder)",
        m.YieldNetConcat,
        yield_data,
        "The two fingerprints are concatenated into one input and trained on the sheet's order (halide "
        "first) only: the served yield changes when the same reactants are listed the other way round.",
        INVARIANT,
    ),
    SealedCase(
        "grasp_rotation_keeps_angle",
        "grasp-success prediction (rotation augmentation)",
        m.GraspNet,
        partial(grasp_data, d.turn_patch_only),
        "The rotation augmentation turns the depth patch by quarter turns but keeps the recorded grasp "
        "angle: on every odd turn the jaws now close along the bar, and the grasp is still labelled held.",
        PAIRED,
    ),
    SealedCase(
        "grasp_depth_stretched_per_patch",
        "grasp-success prediction (depth normalisation)",
        m.GraspNet,
        partial(grasp_data, d.stretch_and_turn),
        "Each depth patch is min-max scaled to 0..1 on its own before training: every bar comes out the "
        "same height, and the model cannot tell a bar too low to grip from a tall one.",
        TRAIN_SERVE,
    ),
    SealedCase(
        "grasp_manual_conv_optimizer_never_stepped",
        "grasp-success prediction (manual optimisation with two optimisers)",
        m.GraspNetManualHeadOnly,
        grasp_data,
        "The manual training step zeroes the head's and the convolutions' optimisers but calls step on the "
        "head's only: the convolutions never leave their random initialisation.",
        TRAINED,
    ),
    SealedCase(
        "heat_zero_padding",
        "surrogate for the 1-D heat equation (periodic domain)",
        m.HeatCNNZeroPadding,
        heat_data,
        "The convolutions use Conv1d's default zero padding instead of padding_mode='circular': near both "
        "ends of the periodic grid the model sees a cold wall instead of the other end of the ring.",
        DEPENDS,
    ),
    SealedCase(
        "heat_steplr_interval_step",
        "surrogate for the 1-D heat equation (StepLR)",
        m.HeatCNNStepLRPerStep,
        heat_data,
        "The StepLR meant per epoch (0.3x every 4 epochs) is configured with interval 'step': the learning "
        "rate is cut every 4 batches and is negligible before the end of the first epoch.",
        SCHEDULE,
    ),
    SealedCase(
        "heat_reference_wavenumber_per_spacing",
        "surrogate for the 1-D heat equation (training targets from a spectral solver)",
        m.HeatCNN,
        partial(heat_data, d.wavenumbers_per_spacing),
        "The reference solver's wavenumbers are rfftfreq(n, d=dx): cycles per unit length, 2 pi times too "
        "small, so the targets are damped about 40 times too little and the model learns too little "
        "diffusion.",
        TARGET,
    ),
]

HEALTHY: list[SealedCase] = [
    SealedCase(*row)
    for row in (
        (
            "structure_bigru",
            "protein secondary-structure tagging (bidirectional GRU; padded labels as the ignore index)",
            m.SecondaryStructure,
            structure_data,
        ),
        (
            "structure_per_chain_mean",
            "protein secondary-structure tagging (a padding mask; each chain's mean loss, then the mean over "
            "chains)",
            m.SecondaryStructurePerChain,
            structure_data,
        ),
        (
            "structure_plus_helix_content",
            "protein secondary-structure tagging (cross-entropy plus a squared error on each chain's helix "
            "content)",
            m.SecondaryStructureComposition,
            structure_data,
        ),
        (
            "association_vanished_class",
            "data association for tracking (masked padded columns; a learned 'vanished' class)",
            m.Associator,
            association_data,
        ),
        (
            "association_two_way",
            "data association for tracking (row-wise and column-wise cross-entropies summed; padded columns "
            "ignored)",
            m.AssociatorTwoWay,
            association_data,
        ),
        (
            "yield_soft_bce",
            "reaction yield regression (a symmetric pair encoder; binary cross-entropy on the yield "
            "fraction, never 0)",
            m.YieldNet,
            yield_data,
        ),
        (
            "yield_percent_mse",
            "reaction yield regression (squared error in percentage points: losses in the hundreds)",
            m.YieldNetPercentMSE,
            yield_data,
        ),
        (
            "yield_concat_swap_augmented",
            "reaction yield regression (concatenated fingerprints; the order swapped at random per read)",
            m.YieldNetConcat,
            partial(yield_data, augment=d.swap_half),
        ),
        (
            "grasp_balanced_sampler",
            "grasp-success prediction (rare positives drawn as often as negatives; patch and angle turned "
            "together)",
            m.GraspNet,
            grasp_data,
        ),
        (
            "grasp_pos_weight",
            "grasp-success prediction (no sampler; the rare positives weighted in the loss)",
            m.GraspNetPosWeight,
            partial(grasp_data, balanced=False),
        ),
        (
            "grasp_manual_optimisation",
            "grasp-success prediction (manual optimisation: two optimisers at different learning rates)",
            m.GraspNetManual,
            grasp_data,
        ),
        (
            "heat_circular_cnn",
            "surrogate for the 1-D heat equation (residual CNN, circular padding, StepLR per epoch)",
            m.HeatCNN,
            heat_data,
        ),
        (
            "heat_standardised_inside",
            "surrogate for the 1-D heat equation (each raw-scale input standardised inside the model and the "
            "output put back on its scale)",
            m.HeatCNNScaled,
            heat_data,
        ),
        (
            "heat_conservation_penalty",
            "surrogate for the 1-D heat equation (squared error plus a penalty on any change of the mean "
            "temperature)",
            m.HeatCNNConservation,
            heat_data,
        ),
        (
            "heat_spectral_multiplier",
            "surrogate for the 1-D heat equation (a learned complex multiplier per Fourier mode)",
            m.HeatSpectral,
            heat_data,
        ),
    )
]
