"""Sealed gallery ZZ2 (issue #34, half ``zz2``): missing-value imputation on a table (masked reconstruction),
treatment-effect (uplift) estimation with a two-headed T-learner on data with a known effect, trajectory
prediction (future 2-D positions from past ones), image inpainting (square holes in 8 x 8 digits), keyword
spotting on spectrograms (2-D convolutions over frequency x time) and one-step dynamics of a damped pendulum
with a time step. Written blind (see the package docstring); each bug is proved against its healthy twin in
``test_proofs_zz2.py``."""

from __future__ import annotations

from functools import partial
from typing import Any

from torch.utils.data import WeightedRandomSampler

from galleries.preflight.sealed import SealedCase
from galleries.preflight.sealed import _zz2_data as d
from galleries.preflight.sealed import _zz2_models as m


# --- data builders (each returns preflight's data keyword arguments) ----------------------------------------
def imputation_data(hide=d.mask_out) -> dict[str, Any]:
    """2,000 training rows, a fresh share of entries hidden per read by ``hide``, and 400 validation rows
    with fixed hidden entries."""
    train = d.Rows(d.table(2000, 1), transform=hide)
    return d.loaders(train, d.Rows(*d.masked_table(400, 2)), batch_size=64)


def uplift_data(make=d.uplift, shift: float = 0.0) -> dict[str, Any]:
    """2,500 customers made by ``make`` (features, treatment, outcome; treated less often with a negative
    ``shift``), the first 2,000 for training and the last 500 for validation."""
    x, t, y = make(2500, 1, shift)
    return d.loaders(
        d.Rows(x[:2000], t[:2000], y[:2000]), d.Rows(x[2000:], t[2000:], y[2000:]), batch_size=64
    )


def trajectory_data(pair=d.split, val_pair=d.split) -> dict[str, Any]:
    """2,000 training tracks and 400 validation tracks, each read as (observed, future) by ``pair``
    (``val_pair`` in validation)."""
    train = d.Rows(d.tracks(2000, 1), transform=pair)
    return d.loaders(train, d.Rows(d.tracks(400, 2), transform=val_pair), batch_size=64)


def inpainting_data(cut=d.cut_hole) -> dict[str, Any]:
    """The 1,000 training digits, holed afresh on every read by ``cut``, and the 300 validation digits with
    fixed 4 x 4 holes."""
    train = d.Rows(*d.digits("train", (1, 8, 8)), transform=cut)
    return d.loaders(train, d.Rows(*d.holed_digits("val", 2)))


def keyword_data(augment=None, inverse: bool | None = None) -> dict[str, Any]:
    """2,000 training clips (augmented per read by ``augment``) and 500 validation clips; drawn by a
    weighted sampler when ``inverse`` is given (each clip weighted by its class share, inverted if
    ``inverse``)."""
    spec, label = d.spectrograms(2000, 1)
    kwargs: dict[str, Any] = {}
    if inverse is not None:
        share = d.class_shares(label)[label]
        weights = 1 / share if inverse else share
        kwargs["sampler"] = WeightedRandomSampler(weights.double(), len(label))
    train = d.Rows(spec, label, transform=augment)
    loaded = d.loaders(train, d.Rows(*d.spectrograms(500, 2)), batch_size=64, **kwargs)
    return {**loaded, "num_classes": d.CLASSES}


def pendulum_data(make=d.pendulum, augment=None) -> dict[str, Any]:
    """2,000 training transitions made by ``make`` (augmented per read by ``augment``) and 400 validation
    transitions."""
    train = d.Rows(*make(2000, 1), transform=augment)
    return d.loaders(train, d.Rows(*make(400, 2)), batch_size=64)


PAIRED = "each input is paired with its own target through sampling, collation and augmentation"
TASK_LOSS = "the loss scores the target the task declares"
SCHEDULE = "the loop's state machines (schedulers, accumulation, optimisation steps) advance as declared"
CONVENTION = "the served output is read with the convention the model was trained with"
NO_LEAK = "the input does not carry the target it is scored against"
LABEL_KEPT = "augmentation keeps the label true"
SAMPLED = "the sampler draws the rows in the proportions it declares"
CLEAN_TARGET = (
    "the target the loss scores is the uncorrupted truth, and reading the data does not change them"
)
FRESH = "random corruption and augmentation are drawn afresh for every row and read"


# --- the cases ----------------------------------------------------------------------------------------------
BUGS: list[SealedCase] = [
    SealedCase(
        "imputation_loss_on_observed_entries",
        "missing-value imputation on a table (masked reconstruction)",
        m.ImputerGradesObserved,
        imputation_data,
        "The loss is weighted by 1 - mask, the mask taken for the observed entries: the network learns to "
        "copy the values it is shown, and nothing trains the values it must fill in.",
        TASK_LOSS,
    ),
    SealedCase(
        "imputation_masked_fill_result_dropped",
        "missing-value imputation on a table (masked reconstruction)",
        m.Imputer,
        partial(imputation_data, d.mask_out_unassigned),
        "The hiding transform calls hidden.masked_fill(mask, 0.0) and drops its result: the 'hidden' entries "
        "still hold their true values, the network learns to copy them, and served rows (truly missing) "
        "are filled with near-zero guesses.",
        NO_LEAK,
    ),
    SealedCase(
        "uplift_both_heads_on_every_row",
        "treatment-effect (uplift) estimation (two-headed T-learner)",
        m.TLearnerBothHeadsEveryRow,
        uplift_data,
        "Both heads' squared errors are taken on every row instead of each on its own arm's rows: both "
        "learn the mixed outcome and the served effect (head 1 - head 0) is near zero for everyone.",
        TASK_LOSS,
    ),
    SealedCase(
        "uplift_treatment_left_unshuffled",
        "treatment-effect (uplift) estimation (shuffle before the split)",
        m.TLearner,
        partial(uplift_data, d.uplift_shuffled_apart),
        "The rows are shuffled before the split with x, y = x[perm], y[perm], and the treatment column, "
        "kept in its own array, is not permuted: treatments are paired with other customers' outcomes and "
        "the learned effect is washed out.",
        PAIRED,
    ),
    SealedCase(
        "uplift_effect_served_reversed",
        "treatment-effect (uplift) estimation (serving the effect)",
        m.TLearnerServedReversed,
        uplift_data,
        "The served effect is head 0 - head 1 (control minus treated): every customer's uplift comes out "
        "with its sign flipped, and the campaign targets those it helps least.",
        CONVENTION,
    ),
    SealedCase(
        "trajectory_future_sliced_one_early",
        "trajectory prediction (past and future windows)",
        m.TrajectoryMLP,
        partial(trajectory_data, d.split_overlapping, d.split_overlapping),
        "The future is sliced track[PAST - 1 : PAST - 1 + FUTURE], one step early: it starts at the last "
        "observed position, and every served future lags the real one by a step.",
        PAIRED,
    ),
    SealedCase(
        "trajectory_halves_reversed_apart",
        "trajectory prediction (time-reversal augmentation)",
        m.TrajectoryMLP,
        partial(trajectory_data, d.reversed_halves),
        "The time-reversal augmentation flips the observed part and the future each in place after the "
        "split instead of reversing the track and splitting it: half the training pairs are walks that "
        "jump back and run the wrong way.",
        PAIRED,
    ),
    SealedCase(
        "trajectory_served_from_first_position",
        "trajectory prediction (serving the positions)",
        m.TrajectoryMLPServedFromStart,
        trajectory_data,
        "predict adds the predicted offsets to past[:, :1], the first observed position, not to the last "
        "one they were trained from: every served future is displaced back along the track by the observed "
        "distance.",
        CONVENTION,
    ),
    SealedCase(
        "inpainting_hole_cut_into_stored_digit",
        "image inpainting (holes cut at read time)",
        m.Inpainter,
        partial(inpainting_data, d.cut_hole_in_place),
        "The hole is zeroed in place into the dataset's own digit (a view) which is also returned as the "
        "target: the target has the hole too, the stored digits collect holes epoch after epoch, and the "
        "network learns to leave holes empty.",
        CLEAN_TARGET,
    ),
    SealedCase(
        "inpainting_hole_generator_reseeded_per_read",
        "image inpainting (reproducible random holes)",
        m.Inpainter,
        partial(inpainting_data, d.cut_hole_reseeded),
        "The hole transform seeds its own generator on every call (torch.Generator().manual_seed(0), for "
        "reproducible holes): every digit, every epoch, gets the same 4 x 4 hole, and holes anywhere else "
        "are painted poorly.",
        FRESH,
    ),
    SealedCase(
        "inpainting_composite_mask_inverted",
        "image inpainting (serving the composite)",
        m.InpainterCompositeFlipped,
        inpainting_data,
        "The served composite keeps the network's pixels where the mask is 0 and the input where it is 1 "
        "(the mask read as 'valid pixels'): every hole is served as the zeros it was given.",
        CONVENTION,
    ),
    SealedCase(
        "keyword_time_shift_rolls_frequency",
        "keyword spotting on spectrograms (time-shift augmentation)",
        m.KeywordCNN,
        partial(keyword_data, d.time_shift_on_frequency),
        "The time-shift augmentation rolls dims=-2, the frequency axis of these (frequency, time) clips: "
        "keywords that differ by pitch are turned into one another, and wrapped bands make new patterns.",
        LABEL_KEPT,
    ),
    SealedCase(
        "keyword_sampler_weights_not_inverted",
        "keyword spotting on spectrograms (class-balancing sampler)",
        m.KeywordCNN,
        partial(keyword_data, inverse=False),
        "The WeightedRandomSampler meant to balance the classes is given each clip's class share instead of "
        "its inverse: the common 'unknown' class is drawn even more often, and the keywords are rarely "
        "seen.",
        SAMPLED,
    ),
    SealedCase(
        "pendulum_simulated_with_default_step",
        "one-step dynamics of a pendulum (variable time step)",
        m.PendulumStep,
        partial(pendulum_data, d.pendulum_default_step),
        "The simulator is called as step(state), its default dt of 0.1 s, while the sampled dt goes into "
        "the inputs: every target is a 0.1 s step and the served states are wrong for every other dt.",
        PAIRED,
    ),
    SealedCase(
        "pendulum_warmup_stepped_per_epoch",
        "one-step dynamics of a pendulum (learning-rate warm-up)",
        m.PendulumStepWarmupPerEpoch,
        pendulum_data,
        "The 100-step linear warm-up (LambdaLR) is returned as [optimizer], [scheduler], so Lightning steps "
        "it once per epoch: the learning rate stays at a few hundredths of its target all run.",
        SCHEDULE,
    ),
    SealedCase(
        "pendulum_served_times_dt_twice",
        "one-step dynamics of a pendulum (serving the next state)",
        m.PendulumStepServedTimesDt,
        pendulum_data,
        "predict adds dt * self(x) to the state, but forward already returns the change over dt: the served "
        "change is shrunk by the time step (to 2..30% of it).",
        CONVENTION,
    ),
]

HEALTHY: list[SealedCase] = [
    SealedCase(*row)
    for row in (
        (
            "imputation_heavy_masking_hidden_loss",
            "missing-value imputation (10..60% of entries hidden per read; only hidden entries scored, most "
            "outputs ungraded)",
            m.Imputer,
            partial(imputation_data, d.mask_out_heavy),
        ),
        (
            "uplift_rare_treatment_arm_balanced",
            "uplift T-learner (about 13% treated, strongly confounded; each arm's error averaged on its own "
            "rows)",
            m.TLearnerArmBalanced,
            partial(uplift_data, shift=-2.0),
        ),
        (
            "trajectory_time_reversed_tracks",
            "trajectory prediction (half the tracks played backwards, reversed whole before the split)",
            m.TrajectoryMLP,
            partial(trajectory_data, d.reversed_whole),
        ),
        (
            "trajectory_rotated_mirrored_scenes",
            "trajectory prediction (whole tracks turned by a random angle and mirrored per read)",
            m.TrajectoryMLP,
            partial(trajectory_data, d.rotated_whole),
        ),
        (
            "inpainting_hole_only_loss_any_size",
            "image inpainting (holes of 2x2 to 5x5; the loss scores only the hole's pixels)",
            m.InpainterHoleLoss,
            partial(inpainting_data, d.cut_any_hole),
        ),
        (
            "keyword_specaugment_smoothed",
            "keyword spotting (SpecAugment blanks bands of frequency and time; label smoothing 0.2, the "
            "loss stays above the targets' entropy)",
            m.KeywordCNNSmoothed,
            partial(keyword_data, d.spec_augment),
        ),
        (
            "keyword_balanced_sampler",
            "keyword spotting (half the clips 'unknown'; a sampler weighting each clip by its inverse class "
            "share)",
            m.KeywordCNN,
            partial(keyword_data, inverse=True),
        ),
        (
            "pendulum_noise_injected_states",
            "one-step dynamics (input states jittered per read, targets clean: the model learns to correct "
            "the drift)",
            m.PendulumStep,
            partial(pendulum_data, augment=d.jitter_state),
        ),
    )
]
