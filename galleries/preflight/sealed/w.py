"""Sealed gallery V, half ``w``: seismic P-wave onset picking (a CNN with a dense head over the trace),
hospital length of stay predicted at admission (a ward-code embedding), aqueous solubility from molecular
fingerprints with enumerated tautomers (a one-cycle schedule), the share of abnormal cells in a
flow-cytometry sample (a deep set over a variable number of cells; a share as a soft target),
no-reference image quality assessment (a mean opinion score, a plateau schedule) and the stability change
of protein point mutations (antisymmetry under reversal). Written blind (see the package docstring); each
bug is proved against its healthy twin in ``test_proofs_w.py``."""

from __future__ import annotations

from functools import partial
from typing import Any

import torch

from galleries.preflight.sealed import SealedCase
from galleries.preflight.sealed import _w_data as d
from galleries.preflight.sealed import _w_models as m


# --- data builders (each returns preflight's data keyword arguments) ----------------------------------------
def picking_data(aligned: bool = False, raw_onset: bool = False, augment=None) -> dict[str, Any]:
    """3,000 training traces (augmented per read by ``augment``) and 400 validation traces, built the same
    way (windows cut around the pick with ``aligned``; onsets counted at 100 Hz with ``raw_onset``)."""
    train = d.Rows(*d.traces(3000, 1, aligned, raw_onset), transform=augment)
    val = d.Rows(*d.traces(400, 2, aligned, raw_onset))
    return {**d.loaders(train, val, batch_size=64), "num_classes": d.TRACE}


def stay_data(whole_stay_labs: bool = False, extract_codes: bool = False) -> dict[str, Any]:
    """3,000 training admissions and 600 validation admissions from the same extract (lab tests counted
    over the whole stay with ``whole_stay_labs``; wards by the extract's codes with ``extract_codes``)."""
    train = d.Rows(*d.stays(3000, 1, whole_stay_labs, extract_codes))
    val = d.Rows(*d.stays(600, 2, whole_stay_labs, extract_codes))
    return d.loaders(train, val, batch_size=64)


def solubility_data(split_after_enumeration: bool = False) -> dict[str, Any]:
    """1,000 measured molecules, each enumerated into 5 forms: split 800 / 200 by molecule, or (with
    ``split_after_enumeration``) the 5,000 rows shuffled and split 4,000 / 1,000 (batches of 64)."""
    bits, log_s = d.molecules(d.TRAIN_MOLECULES + 200, 1)
    if split_after_enumeration:
        rows, targets = d.enumerated(bits, log_s, 5)
        order = torch.randperm(len(rows), generator=d.gen(6))
        train, val = order[: d.TRAIN_MOLECULES * d.COPIES], order[d.TRAIN_MOLECULES * d.COPIES :]
        return d.loaders(d.Rows(rows[train], targets[train]), d.Rows(rows[val], targets[val]), batch_size=64)
    cut = d.TRAIN_MOLECULES
    train = d.Rows(*d.enumerated(bits[:cut], log_s[:cut], 5))
    val = d.Rows(*d.enumerated(bits[cut:], log_s[cut:], 7))
    return d.loaders(train, val, batch_size=64)


def cytometry_data(augment=None) -> dict[str, Any]:
    """2,000 training samples (augmented per read by ``augment``) and 400 validation samples: (cells padded
    to 120, cell count, blast share)."""
    train = d.Rows(*d.samples(2000, 1), transform=augment)
    return d.loaders(train, d.Rows(*d.samples(400, 2)), batch_size=64)


def quality_data(augment=d.flips_and_turns) -> dict[str, Any]:
    """The 1,000 training digits, each distorted 4 ways and scored (augmented per read by ``augment``), and
    the 300 validation digits, distorted once."""
    train = d.Rows(*d.distorted("train", 1, copies=4), transform=augment)
    return d.loaders(train, d.Rows(*d.distorted("val", 2)))


def stability_data(augment=d.reverse_mutations) -> dict[str, Any]:
    """3,000 training mutations (augmented per read by ``augment``) and 500 validation mutations."""
    train = d.Rows(*d.mutations(3000, 1), transform=augment)
    return d.loaders(train, d.Rows(*d.mutations(500, 2)), batch_size=64)


PAIRED = "each input is paired with its own target through sampling, collation and augmentation"
CONVENTION = "training labels follow the convention the served model is read with"
SERVED = "the training inputs are drawn as the served inputs are"
HONEST = "validation data is unseen in training and built as served data is"
SCHEDULE = "the loop's state machines (schedulers, accumulation, optimisation steps) advance as declared"
MASKED = "padding never counts as data"
DEPENDS = "the output depends on what the task says it depends on"
TASK_LOSS = "the loss scores the target the task declares"


# --- the cases ----------------------------------------------------------------------------------------------
BUGS: list[SealedCase] = [
    SealedCase(
        "picking_windows_aligned_on_pick",
        "seismic P-wave onset picking (catalogue windows)",
        m.Picker,
        partial(picking_data, True),
        "The training windows are cut a fixed 30 samples before each catalogue pick, so every training "
        "onset sits at sample 30: the dense head learns the position, and on continuous data the picker "
        "answers about 30 wherever the onset is.",
        SERVED,
    ),
    SealedCase(
        "picking_onset_at_recording_rate",
        "seismic P-wave onset picking (decimated traces)",
        m.Picker,
        partial(picking_data, raw_onset=True),
        "The traces are decimated from 100 Hz to 50 Hz but the onset labels stay sample indices at 100 Hz: "
        "every pick is learned at twice its time, and served picks land far too late.",
        CONVENTION,
    ),
    SealedCase(
        "stay_labs_counted_over_whole_stay",
        "hospital length of stay at admission (tabular, ward embedding)",
        m.StayNet,
        partial(stay_data, True),
        "The lab-test count comes from an extract that counts the whole stay, not the first 24 hours: it "
        "grows with the length of stay, the model leans on it, validation (same extract) looks excellent, "
        "and at admission, where only the first day's tests exist, the predictions are far off.",
        HONEST,
    ),
    SealedCase(
        "solubility_split_after_enumeration",
        "aqueous solubility from fingerprints (enumerated tautomers)",
        m.SolubilityNet,
        partial(solubility_data, True),
        "The molecules are enumerated into 5 forms before the random split: almost every validation row has "
        "siblings of the same molecule (same measured value) in training, and the validation error reports "
        "memorised assay noise as skill.",
        HONEST,
    ),
    SealedCase(
        "stay_ward_codes_from_extract",
        "hospital length of stay at admission (ward embedding)",
        m.StayNet,
        partial(stay_data, extract_codes=True),
        "The training extract's ward column was factorised in order of first appearance, so its codes are "
        "not the hospital's ward ids the served model is called with: each ward's learned effect is "
        "applied to another ward.",
        CONVENTION,
    ),
    SealedCase(
        "cytometry_mean_over_padding",
        "share of abnormal cells in a flow-cytometry sample (deep set over padded cells)",
        m.BlastShareMeanOverPadding,
        cytometry_data,
        "The set pooling takes the mean over all 120 slots, padding included: a sample of 30 cells is "
        "three-quarters padding, its blasts' signal is diluted by the count, and the share is misjudged "
        "for every sample that is not full.",
        MASKED,
    ),
    SealedCase(
        "cytometry_sigmoid_twice",
        "share of abnormal cells in a flow-cytometry sample (soft-target cross-entropy)",
        m.BlastShareSigmoidTwice,
        cytometry_data,
        "The network's last layer is a sigmoid and the loss is binary_cross_entropy_with_logits, which "
        "applies another: training pulls the served share towards the logit of the true share, and every "
        "sample with fewer than half blasts is served as nearly 0.",
        TASK_LOSS,
    ),
    SealedCase(
        "quality_noise_augmentation_keeps_score",
        "no-reference image quality assessment (mean opinion score)",
        m.QualityNet,
        partial(quality_data, d.noise_too),
        "The augmentation copied from a classifier adds Gaussian noise to the training images but keeps "
        "their opinion scores: noise, one of the distortions being scored, is taught to cost less than it "
        "does, and noisy images are scored too high.",
        PAIRED,
    ),
    SealedCase(
        "quality_plateau_on_batch_loss",
        "no-reference image quality assessment (plateau schedule)",
        m.QualityNetPlateauPerStep,
        quality_data,
        "ReduceLROnPlateau watches train_loss_step with interval 'step': the noisy batch loss fails to "
        "improve for three batches again and again, the rate is halved every few batches, and the run ends "
        "undertrained.",
        SCHEDULE,
    ),
    SealedCase(
        "stability_reverse_keeps_sign",
        "protein stability change of point mutations (reverse-mutation augmentation)",
        m.StabilityNet,
        partial(stability_data, d.reverse_mutations_sign_kept),
        "The reverse-mutation augmentation swaps the wild type and the mutant but keeps ddG instead of "
        "negating it: the reversed rows teach the opposite sign, and the predictions shrink towards 0.",
        PAIRED,
    ),
    SealedCase(
        "stability_mutant_columns_copied",
        "protein stability change of point mutations (one-hot columns)",
        m.StabilityNetWildTwice,
        stability_data,
        "The mutant's one-hot columns are sliced x[:, :20], copied from the wild type's line: the network "
        "never sees the residue it mutates to and predicts ddG from the wild type and the site alone.",
        DEPENDS,
    ),
]

HEALTHY: list[SealedCase] = [
    SealedCase(*row)
    for row in (
        (
            "picking_soft_onset_polarity_flips",
            "seismic P-wave onset picking (a Gaussian over the samples around the onset as target: the loss "
            "never reaches 0; random polarity flips)",
            m.PickerSoftOnset,
            partial(picking_data, augment=d.flip_polarity),
        ),
        (
            "stay_ward_embedding_inert_wards",
            "hospital length of stay (log target; a ward embedding of which half the wards change nothing)",
            m.StayNet,
            stay_data,
        ),
        (
            "solubility_enumerated_one_cycle",
            "aqueous solubility (five near-duplicate rows per molecule on purpose, split by molecule; a "
            "one-cycle schedule over the trainer's steps)",
            m.SolubilityNetOneCycle,
            solubility_data,
        ),
        (
            "cytometry_subsampled_cells",
            "share of abnormal cells (a random 60..100% of each sample's cells per read, zero-padded and "
            "masked; counts vary four-fold)",
            m.BlastShare,
            partial(cytometry_data, d.subsample_cells),
        ),
        (
            "cytometry_soft_target_logit",
            "share of abnormal cells (binary cross-entropy with logits against a share as a soft target: "
            "the loss never reaches 0)",
            m.BlastShareLogit,
            cytometry_data,
        ),
        (
            "quality_flips_and_turns",
            "image quality assessment (score-preserving flips and quarter turns; a plateau schedule on the "
            "epoch's training loss)",
            m.QualityNet,
            quality_data,
        ),
        (
            "stability_antisymmetric_by_construction",
            "protein stability change (g(w, m) - g(m, w): every output exactly 0 at initialisation; no "
            "augmentation)",
            m.AntisymmetricStabilityNet,
            partial(stability_data, None),
        ),
    )
]
