"""Sealed gallery X (issue #34, half ``x``): image denoising by residual learning (and Noise2Noise), bearing
fault diagnosis from raw vibration windows (a 1-D CNN with a step decay; envelope spectra), video frame
interpolation (the frame between two others), defect segmentation on textured plates (cross-entropy plus
Dice, downsampled masks, "don't care" borders), heart rate from wrist PPG windows (a band-limited spectrum)
and metric learning of digits with a triplet loss served as nearest-neighbour retrieval. Written blind (see
the package docstring); each bug is proved against its healthy twin in ``test_proofs_x.py``."""

from __future__ import annotations

from functools import partial
from typing import Any

from galleries.preflight.sealed import SealedCase
from galleries.preflight.sealed import _x_data as d
from galleries.preflight.sealed import _x_models as m


# --- data builders (each returns preflight's data keyword arguments) ----------------------------------------
def denoise_data(augment=d.add_noise) -> dict[str, Any]:
    """The 1,000 training digits, noised afresh on every read by ``augment``, and 300 validation digits with
    fixed noise."""
    train = d.Rows(d.digits("train", (1, 8, 8))[0], transform=augment)
    return d.loaders(train, d.Rows(*d.noisy_digits("val", 2)))


def noise2noise_data() -> dict[str, Any]:
    """Pairs of independent noisy copies: fresh per read in training, fixed in validation."""
    train = d.Rows(d.digits("train", (1, 8, 8))[0], transform=d.two_noisy_copies)
    return d.loaders(train, d.Rows(*d.noisy_pairs("val", 2)))


def bearing_data(augment=None) -> dict[str, Any]:
    """2,000 training windows (augmented per read by ``augment``) and 400 validation windows."""
    train = d.Rows(*d.vibrations(2000, 1), transform=augment)
    return {**d.loaders(train, d.Rows(*d.vibrations(400, 2)), batch_size=64), "num_classes": d.FAULTS}


def interpolation_data(pair=d.middle_frame, val_pair=d.middle_frame) -> dict[str, Any]:
    """1,200 training clips of 4 frames and 300 validation clips, each read as (two frames, target) by
    ``pair`` (``val_pair`` in validation)."""
    train = d.Rows(d.clips(1200, 1), transform=pair)
    val = d.Rows(d.clips(300, 2), transform=val_pair)
    return d.loaders(train, val, batch_size=64)


def defect_data(truncate: bool = False, augment=d.turn_together, target=None) -> dict[str, Any]:
    """1,500 training plates (turned per read by ``augment``) and 300 validation plates, downsampled to 16 x
    16 (masks thresholded at half, or truncated with ``truncate``; or made by ``target``)."""
    make = target or partial(d.downsampled, truncate=truncate)
    train = d.Rows(*make(*d.plates(1500, 1)), transform=augment)
    return d.loaders(train, d.Rows(*make(*d.plates(300, 2))), batch_size=64)


def heart_rate_data() -> dict[str, Any]:
    """3,000 training windows and 500 validation windows."""
    return d.loaders(d.Rows(*d.ppg(3000, 1)), d.Rows(*d.ppg(500, 2)), batch_size=64)


def triplet_data(val_part: str = "val") -> dict[str, Any]:
    """Triplets of the 1,000 training digits (drawn afresh per read) and fixed triplets of the ``val_part``
    digits (the 300 validation digits)."""
    return d.loaders(d.Triplets("train"), d.Triplets(val_part, seed=2), batch_size=64)


PAIRED = "each input is paired with its own target through sampling, collation and augmentation"
TASK_LOSS = "the loss scores the target the task declares"
DEPENDS = "the output depends on what the task says it depends on"
SCHEDULE = "the loop's state machines (schedulers, accumulation, optimisation steps) advance as declared"
HELD_OUT = "validation data are held out from training"
CONVENTION = "the served output is read with the convention the model was trained with"


# --- the cases ----------------------------------------------------------------------------------------------
BUGS: list[SealedCase] = [
    SealedCase(
        "denoise_residual_trained_on_clean",
        "image denoising (DnCNN-like residual learning)",
        m.DenoiserTrainedOnClean,
        denoise_data,
        "The loss scores the network's raw output against the clean image, while the model serves noisy - "
        "output (the residual convention): the network learns the clean digit and the served image is "
        "mostly the noise, negated.",
        CONVENTION,
    ),
    SealedCase(
        "denoise_flip_on_noisy_only",
        "image denoising (flip augmentation)",
        m.Denoiser,
        partial(denoise_data, d.add_noise_then_flip),
        "The left-right flip is applied to the noisy input after the noise is added, not to the clean "
        "target: half the pairs are mirror images, and the denoiser learns a blur of a digit and its mirror.",
        PAIRED,
    ),
    SealedCase(
        "bearing_step_decay_per_batch",
        "bearing fault diagnosis from vibration windows (step decay)",
        m.BearingCNNDecayPerStep,
        bearing_data,
        "The StepLR(step_size=2) meant per epoch is scheduled with interval 'step': the learning rate halves "
        "every two batches and training stops in effect after about 20 batches.",
        SCHEDULE,
    ),
    SealedCase(
        "bearing_head_reads_last_step",
        "bearing fault diagnosis from vibration windows (1-D CNN pooling)",
        m.BearingCNNLastStep,
        bearing_data,
        "The head reads the convolutional features at the last time step (h[..., -1]) instead of averaging "
        "them over time: it sees only the window's end, one or two impacts, and cannot tell their rate.",
        DEPENDS,
    ),
    SealedCase(
        "interpolation_middle_index_of_even_clip",
        "video frame interpolation (the frame between two neighbours)",
        m.Interpolator,
        partial(interpolation_data, d.middle_by_length, d.middle_by_length),
        "The target is indexed clip[len(clip) // 2], the middle only of odd clips: for the 4-frame clips "
        "it is frame 2, one of the inputs, and the model learns to copy it.",
        PAIRED,
    ),
    SealedCase(
        "defect_mask_and_plate_turned_apart",
        "defect segmentation on textured plates (rotation augmentation)",
        m.DefectSegmenter,
        partial(defect_data, augment=d.turn_each),
        "The random quarter turn is a per-tensor transform applied to the plate and to its mask separately: "
        "each draws its own turn, and three pairs in four are mismatched.",
        PAIRED,
    ),
    SealedCase(
        "defect_dice_score_added",
        "defect segmentation on textured plates (cross-entropy plus Dice)",
        m.DefectSegmenterDiceScore,
        defect_data,
        "The Dice term is added as the Dice score instead of 1 - Dice: the loss rewards missing the defects "
        "and the served masks shrink.",
        TASK_LOSS,
    ),
    SealedCase(
        "defect_mask_downsampled_by_truncation",
        "defect segmentation on textured plates (downsampled masks)",
        m.DefectSegmenter,
        partial(defect_data, True),
        "The masks are average-pooled with the plates and cast with .long(), which truncates: only cells "
        "wholly inside a defect stay 1, and every served defect is eroded by its border.",
        PAIRED,
    ),
    SealedCase(
        "heart_rate_band_at_wrong_rate",
        "heart rate from wrist PPG windows (band-limited spectrum)",
        m.HeartRateNetBandAt100Hz,
        heart_rate_data,
        "The heart-rate band is placed with a 100 Hz sample rate copied from chest-strap code instead of "
        "the wristband's 25 Hz: the bins kept are the breathing band's, and the pulse above 53 bpm is masked "
        "out.",
        DEPENDS,
    ),
    SealedCase(
        "triplet_positive_negative_swapped",
        "metric learning of digits (triplet loss, nearest-neighbour retrieval)",
        m.TripletEmbedderSwapped,
        triplet_data,
        "triplet_margin_loss is called with the negative in the positive's place: anchors are pulled towards "
        "other digits and pushed from their own, and retrieval finds other digits first.",
        TASK_LOSS,
    ),
    SealedCase(
        "triplet_validation_from_training_digits",
        "metric learning of digits (validation split)",
        m.TripletEmbedder,
        partial(triplet_data, "train"),
        "The validation triplets are built from the training digits (Triplets('train', seed=2), a copied "
        "line): the validation queries are in the searched gallery, each finds itself, and the reported "
        "retrieval is perfect.",
        HELD_OUT,
    ),
]

HEALTHY: list[SealedCase] = [
    SealedCase(*row)
    for row in (
        (
            "denoise_noise2noise",
            "image denoising (Noise2Noise: noisy targets only, the loss stays above the noise variance)",
            m.DenoiserNoise2Noise,
            noise2noise_data,
        ),
        (
            "bearing_envelope_spectrum_shifted",
            "bearing fault diagnosis (fixed envelope-spectrum features blind to phase; random circular "
            "shifts)",
            m.BearingEnvelope,
            partial(bearing_data, d.circular_shift),
        ),
        (
            "interpolation_played_backwards",
            "video frame interpolation (the two input frames swapped at random: the middle frame is the "
            "same)",
            m.Interpolator,
            partial(interpolation_data, d.middle_either_way),
        ),
        (
            "defect_border_dont_care",
            "defect segmentation (targets with a third value, 2, on borders, masked out of both loss terms)",
            m.DefectSegmenterIgnoreBorder,
            partial(defect_data, target=d.ignore_border),
        ),
        (
            "heart_rate_band_limited",
            "heart rate from PPG (most spectrum bins, the strong breathing band among them, ignored on "
            "purpose; standardised targets)",
            m.HeartRateNet,
            heart_rate_data,
        ),
        (
            "triplet_unit_embeddings",
            "metric learning (triplets drawn afresh per read; unit-length embeddings)",
            m.TripletEmbedder,
            triplet_data,
        ),
    )
]
