"""Sealed gallery C: image classification (sampling, curricula, class weights, EMA, schedulers, linear
probes, augmentation and splits), entity tagging, causal language modelling, recommendation, multi-label
classification, regression with scaled and log targets, time-series classification, online event detection
with 1-D convolutions, point sets and tabular data with a target-encoded category. Written blind (see the
package docstring); each bug is proved against its healthy twin in ``test_proofs_c.py``."""

from __future__ import annotations

from functools import partial
from typing import Any

import torch
from torch.utils.data import TensorDataset, WeightedRandomSampler

from galleries.preflight.sealed import SealedCase
from galleries.preflight.sealed import _c_data as d
from galleries.preflight.sealed import _c_models as m


# --- data builders (each returns preflight's data keyword arguments) ----------------------------------------
def digit_data(
    train: tuple[torch.Tensor, torch.Tensor] | None = None, augment: bool = False, seeded: bool = False, **kw
) -> dict[str, Any]:
    x, y = train if train is not None else d.digits("train")
    dataset = d.ShiftedDigits(x, y, seeded) if augment else TensorDataset(x, y)
    return {**d.loaders(dataset, TensorDataset(*d.digits("val")), **kw), "num_classes": 10}


def imbalanced_data(per_sample_weights: bool | None = None) -> dict[str, Any]:
    """Digits 5-9 cut to 8%; with ``per_sample_weights`` set, a class-balancing sampler (the BUG when False:
    the 10 class weights are given where the sampler wants one weight per sample)."""
    x, y = d.imbalanced(*d.digits("train"))
    if per_sample_weights is None:
        return digit_data((x, y))
    weights = m.class_weights(y)
    sampler = WeightedRandomSampler(weights[y] if per_sample_weights else weights, num_samples=len(y))
    return digit_data((x, y), sampler=sampler)


def sorted_digit_data(shuffle: bool) -> dict[str, Any]:
    """The training digits ordered by class, as read folder by folder."""
    x, y = d.digits("train")
    order = y.argsort(stable=True)
    return digit_data((x[order], y[order]), shuffle=shuffle)


def curriculum_data(sampler=d.CurriculumSampler) -> dict[str, Any]:
    x, y = d.digits("train")
    return digit_data((x, y), sampler=sampler(d.typicality(x, y)))


def copied_digit_data(split_first: bool) -> dict[str, Any]:
    """Four jittered copies of 360 digits (of mixed writers), split 80/20: by digit (``split_first``) or,
    the BUG, by copy, so that validation holds copies of training digits."""
    x, y = d.shuffled_training_digits()
    g = torch.Generator().manual_seed(3)

    def copies(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.cat([torch.stack([d.jitter(image, g) for image in x]) for _ in range(4)]), y.repeat(4)

    if split_first:
        train, val = copies(x[:288], y[:288]), copies(x[288:360], y[288:360])
    else:
        cx, cy = copies(x[:360], y[:360])
        perm = torch.randperm(len(cx), generator=g)
        train, val = (cx[perm[:1152]], cy[perm[:1152]]), (cx[perm[1152:]], cy[perm[1152:]])
    return {**d.loaders(TensorDataset(*train), TensorDataset(*val)), "num_classes": 10}


def tagging_data() -> dict[str, Any]:
    loaders = d.loaders(
        TensorDataset(*d.entity_sentences(1500, 1)), TensorDataset(*d.entity_sentences(300, 2))
    )
    return {**loaders, "num_classes": 3}


def lm_data() -> dict[str, Any]:
    def shifted(ids: torch.Tensor) -> TensorDataset:
        return TensorDataset(ids[:, :-1], ids[:, 1:])

    return {**d.loaders(shifted(d.chains(1500, 1)), shifted(d.chains(300, 2))), "num_classes": d.LM_VOCAB}


def recommendation_data() -> dict[str, Any]:
    train, held_out = d.preferences()
    return d.loaders(TensorDataset(train), TensorDataset(held_out), batch_size=64)


def multilabel_data(unknown: float = 0.0) -> dict[str, Any]:
    def dataset(n: int, seed: int) -> TensorDataset:
        x, y = d.multilabel(n, seed)
        hidden = torch.rand(y.shape, generator=torch.Generator().manual_seed(seed)) < unknown
        return TensorDataset(x, y.masked_fill(hidden, -1.0))

    return d.loaders(dataset(2000, 1), dataset(400, 2))


def price_data(targets=d.prices) -> dict[str, Any]:
    return d.loaders(TensorDataset(*targets(1500, 1)), TensorDataset(*targets(400, 2)))


def sequence_data() -> dict[str, Any]:
    loaders = d.loaders(TensorDataset(*d.sequences(1000, 1)), TensorDataset(*d.sequences(300, 2)))
    return {**loaders, "num_classes": 4}


def pulse_data() -> dict[str, Any]:
    return d.loaders(TensorDataset(*d.pulse_stream(800, 1)), TensorDataset(*d.pulse_stream(200, 2)))


def point_data(min_points: int = d.POINTS) -> dict[str, Any]:
    loaders = d.loaders(
        TensorDataset(*d.point_sets(1500, 1, min_points)), TensorDataset(*d.point_sets(300, 2, min_points))
    )
    return {**loaders, "num_classes": 4}


def shop_data(out_of_fold: bool) -> dict[str, Any]:
    """Rows (encoded shop, numbers, target). Healthy: training rows encoded out of fold (5 folds), validation
    rows with the training rows. The BUG: every row encoded with all rows, its own target included."""
    (shop, nums, y), (v_shop, v_nums, v_y) = d.shop_rows(2000, 1), d.shop_rows(500, 2)
    if out_of_fold:
        encoded = d.target_encode(shop, y, shop, exclude=torch.arange(len(y)) % 5)
        v_encoded = d.target_encode(shop, y, v_shop)
    else:
        everything = d.target_encode(
            torch.cat([shop, v_shop]), torch.cat([y, v_y]), torch.cat([shop, v_shop])
        )
        encoded, v_encoded = everything[: len(y)], everything[len(y) :]
    return d.loaders(TensorDataset(encoded, nums, y), TensorDataset(v_encoded, v_nums, v_y))


# --- the cases ----------------------------------------------------------------------------------------------
BUGS: list[SealedCase] = [
    SealedCase(
        id="sampler_weights_per_class_not_per_sample",
        task="imbalanced image classification (resampling)",
        model=m.DigitNet,
        data=partial(imbalanced_data, per_sample_weights=False),
        bug="WeightedRandomSampler is given the 10 class weights instead of one weight per sample, so it "
        "draws only samples 0-9 and the model trains on ten digits.",
        invariant="the loader serves the dataset it was given (every sample can be drawn)",
    ),
    SealedCase(
        id="digits_sorted_by_class_never_shuffled",
        task="image classification",
        model=m.DigitNet,
        data=partial(sorted_digit_data, shuffle=False),
        bug="The training set is read class folder by class folder and the loader has shuffle=False, so "
        "every batch holds one class and each epoch ends by fitting the last classes only.",
        invariant="batches are drawn from the whole training distribution",
    ),
    SealedCase(
        id="digits_cross_entropy_on_probabilities",
        task="image classification",
        model=partial(m.DigitNetSoftmaxTwice, sgd=True),
        data=digit_data,
        bug="The loss applies cross_entropy to softmax probabilities, a second softmax that flattens the "
        "loss and shrinks its gradients, so the classifier learns slowly and stays poor.",
        invariant="the loss's input is what the loss expects (logits, not probabilities)",
    ),
    SealedCase(
        id="class_weights_proportional_not_inverse",
        task="imbalanced image classification (class weights)",
        model=lambda: m.DigitNet(class_weights=m.class_weights(d.imbalanced(*d.digits("train"))[1], False)),
        data=imbalanced_data,
        bug="The class weights are the class frequencies rather than their inverse, so the rare digits 5-9 "
        "weigh ~12x less instead of ~12x more and are rarely predicted.",
        invariant="the loss weights balance the classes the way they are declared to",
    ),
    SealedCase(
        id="augmented_copies_split_after_copying",
        task="image classification with augmentation (train/val split)",
        model=m.DigitNet,
        data=partial(copied_digit_data, split_first=False),
        bug="Four augmented copies of each digit are made before the random 80/20 split, so validation "
        "holds near-copies of training digits and overstates accuracy on new digits.",
        invariant="training and validation share no sample (nor copies of one)",
    ),
    SealedCase(
        id="ema_update_rebinds_loop_variable",
        task="image classification with weight averaging (EMA)",
        model=m.EmaDigitNetRebinds,
        data=digit_data,
        bug="The EMA update assigns to the loop variable instead of updating the tensor in place, so the "
        "averaged weights used for validation and serving stay at their random initialisation.",
        invariant="the averaged weights advance as declared",
    ),
    SealedCase(
        id="plateau_scheduler_mode_max_on_loss",
        task="image classification (learning-rate schedule)",
        model=m.PlateauDigitNetModeMax,
        data=digit_data,
        bug="ReduceLROnPlateau monitors the training loss with mode='max', so every improving epoch counts "
        "as a plateau and the rate is cut tenfold each epoch from the second.",
        invariant="the scheduler advances as declared (the rate falls only on a plateau)",
    ),
    SealedCase(
        id="manual_accumulation_zero_grad_every_batch",
        task="image classification (manual gradient accumulation)",
        model=partial(m.AccumulatingDigitNetClearsEveryBatch, sgd=True),
        data=digit_data,
        bug="Manual accumulation over 4 batches calls zero_grad() at the top of every step, so each update "
        "holds only the last batch's gradient divided by 4: three batches in four are wasted.",
        invariant="each optimizer step uses the gradients of its whole accumulation window",
    ),
    SealedCase(
        id="probe_checkpoint_loaded_with_strict_false",
        task="linear probe on a frozen pretrained encoder",
        model=m.ProbeDigitNetNothingLoaded,
        data=digit_data,
        bug="The encoder checkpoint is loaded with strict=False and its key prefix matches nothing, so the "
        "frozen encoder stays random and the probe learns on random features.",
        invariant="frozen parts hold the weights they were meant to (a load that loads nothing is an error)",
    ),
    SealedCase(
        id="curriculum_sampler_stage_never_advances",
        task="curriculum learning",
        model=m.DigitNet,
        data=partial(curriculum_data, d.CurriculumSamplerOwnHook),
        bug="The curriculum sampler's epoch hook is named advance(), which Lightning never calls (it calls "
        "set_epoch), so training sees only the easiest 20% of the digits for the whole run.",
        invariant="the sampler's epoch advances as declared",
    ),
    SealedCase(
        id="tagging_attention_mask_inverted",
        task="token tagging (NER)",
        model=m.EntityTaggerMaskInverted,
        data=tagging_data,
        bug="A True-for-real-tokens attention mask is passed as key_padding_mask (True = ignore), so every "
        "token attends to padding only and entity types that depend on the sentence are guessed.",
        invariant="the output depends on the input's real tokens, not on its padding",
    ),
    SealedCase(
        id="causal_lm_without_future_mask",
        task="causal language modelling",
        model=m.ChainLMNoFutureMask,
        data=lm_data,
        bug="The attention gets no causal mask, so each position reads the next token; teacher-forced "
        "validation is near perfect while prediction from a prefix is poor.",
        invariant="the output does not depend on the future where the task is causal",
    ),
    SealedCase(
        id="causal_lm_labels_shifted_twice",
        task="causal language modelling",
        model=m.ChainLMShiftsAgain,
        data=lm_data,
        bug="The dataset already shifts the labels and the loss shifts them again, so the model learns the "
        "token after next and its next-token predictions are wrong.",
        invariant="each output is scored against its own position's target",
    ),
    SealedCase(
        id="bpr_margin_reversed",
        task="recommendation (user and item ids)",
        model=m.MatrixFactorisationReversed,
        data=recommendation_data,
        bug="The BPR margin is sampled-minus-liked, so the loss falls while the model ranks unliked items "
        "above liked ones.",
        invariant="the loss rewards what the task's metric rewards",
    ),
    SealedCase(
        id="users_and_items_share_one_table",
        task="recommendation (user and item ids)",
        model=m.MatrixFactorisationOneTable,
        data=recommendation_data,
        bug="One embedding table serves user and item ids, so user k and item k share a vector and every "
        "score is forced symmetric.",
        invariant="distinct inputs have distinct parameters (no accidental tying)",
    ),
    SealedCase(
        id="multilabel_softmax_cross_entropy",
        task="multi-label classification",
        model=m.TagMLPSoftmax,
        data=multilabel_data,
        bug="Multi-hot targets go through cross_entropy (a softmax over labels) instead of a per-label "
        "sigmoid loss, so the labels compete and per-label thresholds are meaningless.",
        invariant="the loss matches the target's structure (independent labels)",
    ),
    SealedCase(
        id="regression_relu_on_standardised_target",
        task="regression with a standardised target",
        model=m.PriceRegressorReluHead,
        data=price_data,
        bug="The regressor's last layer is a ReLU while the standardised target is negative for half the "
        "rows, which all get predicted as the mean.",
        invariant="the output can reach the target's range",
    ),
    SealedCase(
        id="regression_target_scaled_per_batch",
        task="regression with target normalisation",
        model=partial(m.PriceRegressorBatchMinMax, scaling="minmax"),
        data=price_data,
        bug="The target is min-max scaled with each batch's own min and max, so a row's target depends on "
        "its batch-mates and predictions unscaled with the training range are biased.",
        invariant="each sample's target depends on that sample only",
    ),
    SealedCase(
        id="sequence_classifier_reads_padded_last_step",
        task="time-series classification",
        model=m.SequenceClassifierLastPadded,
        data=sequence_data,
        bug="The packed GRU's summary is the unpacked output at the last step, which is zero padding for "
        "every sequence but the longest of its batch.",
        invariant="the output depends on the real part of the input, not on its padding",
    ),
    SealedCase(
        id="online_detector_conv_sees_future",
        task="online event detection (1-D conv, causal)",
        model=m.PulseDetectorCentred,
        data=pulse_data,
        bug="The 'causal' conv stack uses same padding, so each step's output reads 6 future steps; offline "
        "validation overstates the online detector, which has no future.",
        invariant="the output does not depend on the future where the task is causal",
    ),
    SealedCase(
        id="point_sets_centred_on_batch_centroid",
        task="point-set classification",
        model=m.DeepSetsBatchCentred,
        data=point_data,
        bug="Sets are centred on the batch's centroid instead of their own, so a set's input depends on its "
        "batch-mates and the model never gets translation invariance.",
        invariant="each sample's output depends on its own sample only",
    ),
    SealedCase(
        id="target_encoding_includes_own_row",
        task="tabular classification with a target-encoded category",
        model=m.ShopNet,
        data=partial(shop_data, out_of_fold=False),
        bug="Each row's shop is target-encoded with a mean that includes the row's own target (and the "
        "validation rows'), so the feature leaks the label and validation overstates accuracy.",
        invariant="no input carries the target",
    ),
]

HEALTHY: list[SealedCase] = [
    SealedCase(
        id="imbalanced_inverse_frequency_weights",
        task="imbalanced image classification (class weights)",
        model=lambda: m.DigitNet(class_weights=m.class_weights(d.imbalanced(*d.digits("train"))[1])),
        data=imbalanced_data,
    ),
    SealedCase(
        id="imbalanced_balanced_sampler",
        task="imbalanced image classification (resampling)",
        model=m.DigitNet,
        data=partial(imbalanced_data, per_sample_weights=True),
    ),
    SealedCase(
        id="heavy_label_smoothing",
        task="image classification",
        model=partial(m.DigitNet, smoothing=0.4),
        data=digit_data,
    ),
    SealedCase(
        id="augmentation_seeded_by_index",
        task="image classification with augmentation",
        model=m.DigitNet,
        data=partial(digit_data, augment=True, seeded=True),
    ),
    SealedCase(
        id="tiny_training_set",
        task="image classification",
        model=m.DigitNet,
        data=lambda: digit_data(tuple(t[:100] for t in d.digits("train")), batch_size=16),
    ),
    SealedCase(
        id="frozen_pretrained_linear_probe",
        task="linear probe on a frozen pretrained encoder",
        model=m.ProbeDigitNet,
        data=digit_data,
    ),
    SealedCase(
        id="manual_gradient_accumulation",
        task="image classification (gradient accumulation)",
        model=m.AccumulatingDigitNet,
        data=digit_data,
    ),
    SealedCase(
        id="ema_weights_for_evaluation",
        task="image classification with weight averaging (EMA)",
        model=m.EmaDigitNet,
        data=digit_data,
    ),
    SealedCase(
        id="tagging_padding_ignored_by_attention_and_loss",
        task="token tagging (NER)",
        model=m.EntityTagger,
        data=tagging_data,
    ),
    SealedCase(
        id="bpr_with_sampled_negatives",
        task="recommendation (user and item ids)",
        model=m.MatrixFactorisation,
        data=recommendation_data,
    ),
    SealedCase(
        id="multilabel_unknown_labels_masked",
        task="multi-label classification",
        model=m.TagMLP,
        data=partial(multilabel_data, unknown=0.2),
    ),
    SealedCase(
        id="regression_on_log_target",
        task="regression with log targets",
        model=partial(m.PriceRegressor, scaling="log"),
        data=partial(price_data, d.positive_amounts),
    ),
    SealedCase(
        id="point_sets_of_varying_size_masked",
        task="point-set classification",
        model=m.DeepSets,
        data=partial(point_data, min_points=12),
    ),
    SealedCase(
        id="target_encoding_out_of_fold",
        task="tabular classification with a target-encoded category",
        model=m.ShopNet,
        data=partial(shop_data, out_of_fold=True),
    ),
]
