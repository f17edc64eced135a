"""Sealed gallery F: single-object detection (class and box heads), audio-like tone classification with a 1-D
CNN, forecasting-based anomaly detection, multi-modal fusion, subject-level sensor regression, a
class-conditional decoder, a character-level CNN, gradient checkpointing, early-exit heads, layers shared
across depth, an implicit neural representation with a custom autograd Function, a hand-kept running
normaliser, heteroscedastic regression, a Bradley-Terry reward model and rare-event detection. Written blind
(see the package docstring); each bug is proved against its healthy twin in ``test_proofs_f.py``."""

from __future__ import annotations

from functools import partial
from typing import Any

from galleries.preflight.sealed import SealedCase
from galleries.preflight.sealed import _f_data as d
from galleries.preflight.sealed import _f_models as m


# --- data builders (each returns preflight's data keyword arguments) ----------------------------------------
def rows_data(make, n: int = 1000, transform=None, classes: int | None = None, **kw) -> dict[str, Any]:
    """``make(n, 1)`` for training (through ``transform`` per read, if given) and ``make(300, 2)`` for
    validation."""
    out = d.loaders(d.Rows(*make(n, 1), transform=transform), d.Rows(*make(300, 2)), **kw)
    return {**out, "num_classes": classes} if classes else out


def part_data(make, transform=None, classes: int | None = None) -> dict[str, Any]:
    """``make(part)`` for the ``train`` and ``val`` parts of the digits."""
    return rows_data(lambda n, seed: make("train" if seed == 1 else "val"), 0, transform, classes)


def detection_data(move_box: bool | None = None) -> dict[str, Any]:
    """Digits on a canvas; with ``move_box`` set, random shifts (the BUG: ``False``, the box stays)."""
    transform = None if move_box is None else partial(d.shift_canvas, move_box=move_box)
    return part_data(d.canvases, transform, 10)


def tone_data(transform=None, curriculum: bool | None = None) -> dict[str, Any]:
    """Tones as (clip, class) through ``transform`` if given; with ``curriculum`` set, easiest clips first
    (the BUG, ``False``: the schedule's fraction never grows)."""
    clip, label, noise = d.tones(1000, 1)
    kw = {} if curriculum is None else {"sampler": d.Curriculum(noise, integer_division=not curriculum)}
    train = d.Rows(clip, label, noise, transform=transform or (lambda c, y, _: (c, y)))
    return {**d.loaders(train, d.Rows(*d.tones(300, 2)[:2]), **kw), "num_classes": 5}


def series_data(in_order: bool = False) -> dict[str, Any]:
    """Anomaly-free chunks; ``in_order``: overlapping windows of 4 long series, served unshuffled."""
    if in_order:
        return d.loaders(
            d.Rows(d.sliding_chunks(4, 250, 1)), d.Rows(d.series_chunks(300, 2)[0]), shuffle=False
        )
    return rows_data(lambda n, seed: d.series_chunks(n, seed)[:1])


def fusion_data() -> dict[str, Any]:
    train, val = (d.Records(d.fused_digits(part)) for part in ("train", "val"))
    return {**d.loaders(train, val), "target_key": "target", "num_classes": 20}


def subject_data(by_subject: bool = True) -> dict[str, Any]:
    """Sensor rows of 60 subjects split by subject (the BUG, ``by_subject=False``: by row)."""
    train, val = d.subject_split(by_subject)
    return d.loaders(d.Rows(*train), d.Rows(*val))


def decoder_data(sorted_images: bool = False) -> dict[str, Any]:
    """(image, class) rows; the BUG (``sorted_images``): the images are sorted by ink for a curriculum and the
    labels are not, so each image keeps another image's class."""
    x, y = d.digits("train")
    if sorted_images:
        x = x[x.sum(1).argsort()]
    return d.loaders(d.Rows(x, y), d.Rows(*d.digits("val")))


def event_weight(inverted: bool = False) -> float:
    """``pos_weight`` from the training labels: negatives / positives (the BUG, ``inverted``: the inverse)."""
    label = d.rare_events(2000, 1)[1]
    ratio = (1 - label).sum().item() / label.sum().item()
    return 1 / ratio if inverted else ratio


digit_data = partial(part_data, d.digits, classes=10)
chars = partial(rows_data, d.motif_strings, classes=4)
fields = partial(rows_data, d.field)
curves = partial(rows_data, d.noisy_curve)
sensors = partial(rows_data, d.sensor_rows)
pairs = partial(rows_data, d.preference_pairs)
events = partial(rows_data, d.rare_events, 2000, batch_size=64)

PAIRED = "each input is paired with its own target through sampling, collation and augmentation"
STEPPED = "every trained parameter is stepped"
GRADIENT = "every parameter that shapes the output gets a gradient"
SCHEDULE = "the loop's state machines (schedulers, accumulation, sampler epochs) advance as declared"
SERVED = "what validation reports is what the model does when served"
NO_LEAK = "no input carries the target"


# --- the cases ----------------------------------------------------------------------------------------------
BUGS: list[SealedCase] = [
    SealedCase(
        "det_shift_leaves_box",
        "single-object detection (class + box heads, shift augmentation)",
        m.Detector,
        partial(detection_data, move_box=False),
        "The random shift moves the digit on the canvas but not its box, so the box targets carry up to 2 "
        "pixels of noise and the box head learns blurred positions.",
        PAIRED,
    ),
    SealedCase(
        "det_box_snapped_to_anchors",
        "single-object detection (class + box heads, anchor target encoding)",
        m.Detector,
        partial(part_data, d.canvases, d.snap_to_anchors, 10),
        "The target encoder assigns each box to the nearest of three anchors and drops the residual, so the "
        "box head learns positions off by up to 2 pixels.",
        "the loss scores the target the task declares",
    ),
    SealedCase(
        "tones_time_stretch_changes_class",
        "audio-like tone classification (1-D CNN, augmentation)",
        m.ToneNet,
        partial(tone_data, d.time_stretch),
        "A speed augmentation in 0.6..1.4 scales each tone's frequency past its neighbours' while the label "
        "stays, so many training clips carry another class's label.",
        "augmentation preserves the target (or moves it with the input)",
    ),
    SealedCase(
        "tones_epoch_decay_stepped_per_batch",
        "audio-like tone classification (1-D CNN, LR schedule)",
        partial(m.ToneNet, scheduler="step"),
        tone_data,
        "ExponentialLR(gamma=0.7), meant per epoch, is configured with interval 'step', so the LR is ~0 "
        "after 20 batches and the model stops learning early in epoch 0.",
        SCHEDULE,
    ),
    SealedCase(
        "tones_curriculum_never_widens",
        "audio-like tone classification (curriculum sampler)",
        m.ToneNet,
        partial(tone_data, curriculum=False),
        "The curriculum's fraction uses epoch // (epochs - 1), which stays 0, so the sampler serves only the "
        "10% least noisy clips and the model never learns the noisy ones.",
        SCHEDULE,
    ),
    SealedCase(
        "anomaly_window_includes_target",
        "forecasting-based anomaly detection on series chunks",
        m.ForecasterWindowIncludesTarget,
        series_data,
        "The input window is chunk[:, 1:], which ends at the value to forecast, so the model copies it and a "
        "spike is forecast as well as a normal step: anomalies score like normal chunks.",
        NO_LEAK,
    ),
    SealedCase(
        "fusion_side_key_typo",
        "multi-modal fusion (image + side code, dict batches)",
        m.FusionNetSideKeyTypo,
        fusion_data,
        "The model reads batch.get('aux', zeros) where the loader's key is 'side', so the side branch sees "
        "zeros and the label (digit + 10 x scanner) can only be guessed.",
        "everything supplied is used",
    ),
    SealedCase(
        "fusion_functional_dropout_at_serving",
        "multi-modal fusion (image + side code, modality dropout)",
        m.FusionNetFunctionalDropout,
        fusion_data,
        "Modality dropout is F.dropout(side, 0.3), active in eval mode too, so the served model loses the "
        "side code of 30% of its inputs.",
        SERVED,
    ),
    SealedCase(
        "subjects_split_by_row",
        "sensor regression across subjects (validation split)",
        m.SubjectRegressor,
        partial(subject_data, by_subject=False),
        "Rows are split at random, so every validation subject is also a training subject whose offset the "
        "model memorised from the device fingerprint; validation overstates it on new subjects.",
        "splits do not share subjects",
    ),
    SealedCase(
        "decoder_images_sorted_apart_from_labels",
        "class-conditional decoder (digit from its class)",
        m.ConditionalDecoder,
        partial(decoder_data, sorted_images=True),
        "The images were sorted by ink for a curriculum while the labels kept their order, so each class is "
        "decoded to a mix of every digit.",
        PAIRED,
    ),
    SealedCase(
        "chars_conv_over_embedding_axis",
        "character-level CNN (motif classification)",
        m.CharCNNNoTranspose,
        chars,
        "The embeddings go into Conv1d as (batch, positions, embedding) without a transpose; 24 positions "
        "and 24 dimensions fit the shapes, and the filters slide over embedding dimensions.",
        "the output depends on what the task says it depends on",
    ),
    SealedCase(
        "tones_accumulation_zeroed_per_micro_batch",
        "audio-like tone classification (manual gradient accumulation)",
        partial(m.ToneNetAccumulated, zero_every_micro_batch=True),
        tone_data,
        "Manual accumulation calls zero_grad before each of the 4 micro-batches, so each step is the "
        "gradient of the last 8 rows and 3/4 of the data is read but never learnt from.",
        SCHEDULE,
    ),
    SealedCase(
        "checkpoint_reentrant_block_frozen",
        "digit classification with activation checkpointing",
        m.CheckpointedNetReentrant,
        digit_data,
        "Reentrant checkpointing of the first block on inputs that do not require grad: its weights get no "
        "gradient and stay a random 24-unit projection.",
        GRADIENT,
    ),
    SealedCase(
        "early_exit_on_raw_logits",
        "digit classification with early-exit heads",
        m.EarlyExitNetLogitConfidence,
        digit_data,
        "The exit confidence is the largest logit, not a probability; it passes 0.9 nearly always, so served "
        "inputs leave at the cheap rank-3 first head.",
        SERVED,
    ),
    SealedCase(
        "field_custom_softplus_wrong_backward",
        "implicit neural representation (coordinate MLP, custom autograd Function)",
        m.FieldNetWrongBackward,
        fields,
        "The hand-written softplus's backward multiplies by sigmoid(-x) instead of sigmoid(x), so every "
        "gradient through it has the wrong size and the field is fitted coarsely.",
        "the gradient is the derivative of the loss",
    ),
    SealedCase(
        "field_step_warmup_stepped_per_epoch",
        "implicit neural representation (coordinate MLP, LR warm-up)",
        m.FieldNetWarmupPerEpoch,
        fields,
        "A 30-step warm-up is configured with interval 'epoch', so the LR ramps over 30 epochs and the run "
        "ends with it at a fraction of its value.",
        SCHEDULE,
    ),
    SealedCase(
        "sensor_running_var_fed_std",
        "sensor regression (hand-kept running normaliser buffers)",
        m.SensorRegressorStdBuffer,
        sensors,
        "The running 'var' buffer is updated with the batch's std, so the served model divides by sqrt(std) "
        "and its inputs are scaled up to 17x; training uses batch statistics and looks fine.",
        SERVED,
    ),
    SealedCase(
        "hetero_log_std_loss_log_var_predict",
        "heteroscedastic regression (Gaussian NLL)",
        m.HeteroscedasticNetLogStdInLoss,
        curves,
        "The loss treats the head as a log-std while predict reads it as a log-variance, so the served "
        "variance is the standard deviation: far too wide where the noise is small.",
        "what validation reports is what the model does when served",
    ),
    SealedCase(
        "hetero_mean_detached",
        "heteroscedastic regression (Gaussian NLL)",
        m.HeteroscedasticNetMeanDetached,
        curves,
        "The mean is detached in the loss, so the mean head never gets a gradient and the variance head "
        "absorbs the whole error.",
        GRADIENT,
    ),
    SealedCase(
        "reward_winner_convention_flipped",
        "preference (reward) model, Bradley-Terry on pairs",
        m.RewardModelWinnerFlipped,
        pairs,
        "The annotation's winner field (0 = first item won) is read the other way round, so the model learns "
        "to rank the rejected item higher; its loss falls like the healthy one's.",
        PAIRED,
    ),
    SealedCase(
        "reward_grad_norm_clipped_to_1e-3",
        "preference (reward) model, Bradley-Terry on pairs (SGD, gradient clipping)",
        m.RewardModelSGDClippedTo1e3,
        pairs,
        "clip_grad_norm_ is called with max_norm=1e-3 (meant 1.0), so each SGD step is at most a thousandth "
        "of the planned one: the loss creeps down and the ranking stays close to the random start.",
        "every trained parameter is stepped as declared",
    ),
    SealedCase(
        "events_pos_weight_inverted",
        "rare-event detection (3% positives, weighted BCE)",
        lambda: m.EventDetector(event_weight(inverted=True)),
        events,
        "pos_weight is positives / negatives instead of its inverse, so the events weigh 1/1000 of what "
        "was meant and the served detector flags almost none of them.",
        "the loss weights what the task declares",
    ),
]

ROLLED, DECAYED = partial(tone_data, d.roll_and_gain), partial(m.ToneNet, scheduler="epoch")
CURRICULUM, IN_ORDER = partial(tone_data, curriculum=True), partial(series_data, in_order=True)
MODALITY_DROPOUT, CHOSEN_FIRST = partial(m.FusionNet, dropout=0.3), partial(m.RewardModel, chosen_first=True)
CHOSEN_PAIRS = partial(rows_data, partial(d.preference_pairs, chosen_first=True))
SHIFTS, WEIGHTED = partial(detection_data, move_box=True), lambda: m.EventDetector(event_weight())
HEALTHY: list[SealedCase] = [
    SealedCase(*row)
    for row in (
        ("det_plain", "single-object detection (CE + 5 L1, not ln C)", m.Detector, detection_data),
        ("det_shift_moves_box", "detection (shift augmentation moving the box)", m.Detector, SHIFTS),
        (
            "det_two_optimizers_manual",
            "detection (manual, SGD trunk + Adam heads)",
            m.DetectorTwoOptimizersManual,
            detection_data,
        ),
        ("tones_roll_and_gain", "tone classification (label-preserving augmentation)", m.ToneNet, ROLLED),
        ("tones_decay_per_epoch", "tone classification (per-epoch LR decay)", DECAYED, tone_data),
        ("tones_curriculum_widens", "tone classification (curriculum sampler)", m.ToneNet, CURRICULUM),
        ("anomaly_forecaster", "forecasting-based anomaly detection", m.Forecaster, series_data),
        (
            "anomaly_overlapping_windows_in_order",
            "anomaly detection (unshuffled windows)",
            m.Forecaster,
            IN_ORDER,
        ),
        ("fusion_dict_with_row_ids", "multi-modal fusion (dict batches, metadata)", m.FusionNet, fusion_data),
        ("fusion_modality_dropout", "multi-modal fusion (modality dropout)", MODALITY_DROPOUT, fusion_data),
        ("subjects_split_by_subject", "sensor regression across subjects", m.SubjectRegressor, subject_data),
        ("decoder_class_conditional", "class-conditional decoder", m.ConditionalDecoder, decoder_data),
        ("chars_cnn_masked_padding", "character-level CNN (variable lengths)", m.CharCNN, chars),
        (
            "chars_manual_accumulation",
            "character-level CNN (manual accumulation)",
            m.CharCNNAccumulated,
            chars,
        ),
        ("checkpoint_non_reentrant", "digits (activation checkpointing)", m.CheckpointedNet, digit_data),
        ("shared_block_four_times", "digits (one block shared across depth)", m.SharedBlockNet, digit_data),
        ("early_exit_softmax", "digits (early exits, 3 summed CEs)", m.EarlyExitNet, digit_data),
        ("field_custom_softplus", "coordinate MLP (custom autograd Function)", m.FieldNet, fields),
        ("sensor_running_norm_by_hand", "sensor regression (hand-kept buffers)", m.SensorRegressor, sensors),
        ("hetero_gaussian_nll", "heteroscedastic regression (NLL below zero)", m.HeteroscedasticNet, curves),
        ("reward_chosen_first_constant_target", "reward model (target always 1)", CHOSEN_FIRST, CHOSEN_PAIRS),
        ("reward_sgd_grad_norm_clipped_at_1", "reward model (SGD, clip norm 1)", m.RewardModelSGD, pairs),
        ("events_weighted_bce", "rare-event detection (3% positives, pos_weight)", WEIGHTED, events),
    )
]
