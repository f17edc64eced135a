"""Sealed gallery B: masked LM, token tagging, segmentation, quantile regression, tabular data with
categorical codes, forecasting, ordinal regression, multi-label classification and counting. Written blind
(see the package docstring); each bug is proved against its healthy twin in ``test_proofs_b.py``."""

from __future__ import annotations

from typing import Any

import torch
from torch.utils.data import TensorDataset

from galleries.preflight.sealed import SealedCase
from galleries.preflight.sealed import _b_data as d
from galleries.preflight.sealed import _b_models as m


# --- data builders (each returns preflight's data keyword arguments) ----------------------------------------
def mlm_data(collate=m.mlm_collate, sequences=d.chain_sequences) -> dict[str, Any]:
    def dataset(n: int, seed: int) -> TensorDataset:
        return TensorDataset(sequences(n, seed), torch.arange(n))

    loaders = d.loaders(dataset(1200, 1), dataset(400, 2), collate_fn=collate)
    return {**loaders, "input_key": "input_ids", "target_key": "labels", "num_classes": d.MLM_VOCAB}


def tagging_data(collate=d.pad_tagging) -> dict[str, Any]:
    loaders = d.loaders(d.tagging_sequences(800, 1), d.tagging_sequences(300, 2), collate_fn=collate)
    return {**loaders, "input_key": "tokens", "target_key": "tags", "num_classes": 3}


def segmentation_data(dataset=d.FlipAugmented) -> dict[str, Any]:
    train = dataset(*d.stripe_scenes(640, 1))
    return {**d.loaders(train, TensorDataset(*d.stripe_scenes(200, 2))), "num_classes": 3}


def imbalanced_segmentation_data() -> dict[str, Any]:
    def scenes(n: int, seed: int) -> TensorDataset:
        images, masks = d.stripe_scenes(n, seed, objects=1)
        masks[:, 0, :] = masks[:, -1, :] = masks[:, :, 0] = masks[:, :, -1] = (
            255  # unreliable border: ignored
        )
        return TensorDataset(images, masks)

    return {**d.loaders(scenes(640, 1), scenes(200, 2)), "num_classes": 3}


def quantile_stats() -> tuple[torch.Tensor, torch.Tensor]:
    x, _ = d.heteroscedastic(1500, 1)
    return x.mean(0), x.std(0)


def quantile_data(dataset=d.Standardised) -> dict[str, Any]:
    mean, std = quantile_stats()
    return d.loaders(
        dataset(*d.heteroscedastic(1500, 1), mean, std), dataset(*d.heteroscedastic(400, 2), mean, std)
    )


def _tabular_dataset(n: int, seed: int, rare: bool = False) -> list[dict[str, torch.Tensor]]:
    cats, nums, y = d.tabular(n, seed)
    if rare:  # about 13% positives: a positive row whose first numeric column is above 1
        y = y * (nums[:, 0] > 1.0).float()
    return [{"cat": cats[i], "num": nums[i], "label": y[i], "row_id": torch.tensor(i)} for i in range(n)]


def tabular_data(rare: bool = False) -> dict[str, Any]:
    loaders = d.loaders(_tabular_dataset(2000, 1, rare), _tabular_dataset(500, 2, rare))
    return {**loaders, "target_key": "label"}


def customer_data(split_by_customer: bool) -> dict[str, Any]:
    ids, nums, y = d.customer_rows(200, 10, seed=1)
    if split_by_customer:
        is_val = ids > 160
    else:  # BUG (for the lie): a random 20% of rows, so every validation customer is also a training customer
        is_val = torch.rand(len(ids), generator=torch.Generator().manual_seed(0)) < 0.2
    val_ids = d.known_or_unknown(ids[is_val], known=ids[~is_val].unique())
    train = TensorDataset(ids[~is_val], nums[~is_val], y[~is_val])
    return d.loaders(train, TensorDataset(val_ids, nums[is_val], y[is_val]))


def forecast_data(window=d.windows, horizon: int = 1) -> dict[str, Any]:
    def dataset(count: int, seed: int) -> TensorDataset:
        series = d.seasonal_series(count, 96, seed)
        return TensorDataset(*(window(series) if horizon == 1 else window(series, horizon=horizon)))

    return d.loaders(dataset(100, 1), dataset(20, 2))


def ordinal_data() -> dict[str, Any]:
    return d.loaders(TensorDataset(*d.ordinal(2000, 1)), TensorDataset(*d.ordinal(400, 2)))


def multilabel_data(shuffle=d.shuffled_multilabel) -> dict[str, Any]:
    x, y = shuffle(2400, 1)
    return d.loaders(TensorDataset(x[:2000], y[:2000]), TensorDataset(x[2000:], y[2000:]))


def counting_data() -> dict[str, Any]:
    return d.loaders(TensorDataset(*d.blobs(1200, 1)), TensorDataset(*d.blobs(200, 2)))


BUGS: list[SealedCase] = [
    SealedCase(
        id="mlm_labels_read_after_masking",
        task="masked language modelling",
        model=m.MaskedLM,
        data=lambda: mlm_data(m.mlm_collate_labels_after_masking),
        bug="The collate masks the ids in place and then reads the labels from them, so every label is the "
        "MASK token the input already shows.",
        invariant="the target is not a copy of the (corrupted) input: it needs the task to be predicted",
    ),
    SealedCase(
        id="mlm_padding_masked_and_scored",
        task="masked language modelling",
        model=m.MaskedLM,
        data=lambda: mlm_data(m.mlm_collate_masks_padding, d.padded_chain_sequences),
        bug="Masked positions are drawn over padding too, so PAD tokens are masked and scored as easy labels "
        "and the validation loss looks far better than the loss on real tokens.",
        invariant="padding positions do not count in the loss or the metric",
    ),
    SealedCase(
        id="tagging_gru_not_batch_first",
        task="token tagging",
        model=m.GRUTaggerTimeMajor,
        data=tagging_data,
        bug="The GRU lacks batch_first=True, so it recurs across the sentences of a batch instead of along "
        "each sentence; tags that depend on the previous token are never learned.",
        invariant="each sample's output depends on its own sample only",
    ),
    SealedCase(
        id="tagging_collate_sorts_tokens_not_tags",
        task="token tagging",
        model=m.SortedPackedGRUTagger,
        data=lambda: tagging_data(m.tagging_collate_sorted_tokens_only),
        bug="The collate sorts the token sequences by length for packing but pads the tags in the original "
        "order, so sentences get another sentence's tags.",
        invariant="collation keeps each input with its own target",
    ),
    SealedCase(
        id="segmentation_flips_image_not_mask",
        task="semantic segmentation",
        model=m.SegNet,
        data=lambda: segmentation_data(d.ImageOnlyFlips),
        bug="The random horizontal/vertical flips are applied to the image but not to its mask.",
        invariant="augmentation keeps each input with its own target",
    ),
    SealedCase(
        id="segmentation_encoder_detached",
        task="semantic segmentation",
        model=m.SegNetCachedFeatures,
        data=segmentation_data,
        bug="The encoder's features are detached before the head, so the encoder never gets a gradient and "
        "stays at its random initialisation.",
        invariant="every parameter that shapes the output gets a gradient",
    ),
    SealedCase(
        id="quantile_heads_broadcast_over_batch",
        task="quantile regression",
        model=m.QuantileMLPBroadcast,
        data=quantile_data,
        bug="Each quantile head's (B, 1) output minus the (B,) target broadcasts to (B, B), so the heads "
        "learn the marginal quantiles of y and ignore x.",
        invariant="each prediction is scored against its own target",
    ),
    SealedCase(
        id="quantile_standardise_in_place",
        task="quantile regression",
        model=m.QuantileMLP,
        data=lambda: quantile_data(d.StandardisedInPlace),
        bug="The dataset standardises its stored rows in place when they are read, so every epoch "
        "standardises already standardised data and the inputs drift towards a constant.",
        invariant="reading the data does not change the data",
    ),
    SealedCase(
        id="tabular_zip_drops_a_column",
        task="tabular classification with categorical codes",
        model=lambda: m.TabularNet(cardinalities=d.CARDINALITIES[:2]),
        data=tabular_data,
        bug="The embedding list was built from a cardinality list missing the third categorical column, and "
        "zip() silently drops that column, the most predictive one.",
        invariant="every supplied input moves the output",
    ),
    SealedCase(
        id="tabular_rows_split_across_customers",
        task="tabular regression with an id column",
        model=m.CustomerSpend,
        data=lambda: customer_data(split_by_customer=False),
        bug="Rows are split at random, so every validation customer is also a training customer and the "
        "validation error hides how badly the model does on new customers.",
        invariant="training and validation share no subject",
    ),
    SealedCase(
        id="forecast_target_is_last_input",
        task="time-series forecasting",
        model=m.Forecaster,
        data=lambda: forecast_data(d.windows_off_by_one),
        bug="The one-step target is read one index early, at the last input step, so the model learns to "
        "copy its input and the validation error is near zero.",
        invariant="the input holds nothing from the target's time or later",
    ),
    SealedCase(
        id="ordinal_thresholds_never_stepped",
        task="ordinal regression",
        model=m.CoralOrdinalPlainThresholds,
        data=ordinal_data,
        bug="The ordinal thresholds are a plain tensor with requires_grad=True, not an nn.Parameter: they "
        "get gradients but the optimizer never steps them, so all thresholds stay at zero.",
        invariant="every parameter that gets a gradient is stepped",
    ),
    SealedCase(
        id="multilabel_features_and_labels_shuffled_separately",
        task="multi-label classification",
        model=m.MultiLabelMLP,
        data=lambda: multilabel_data(d.shuffled_multilabel_twice),
        bug="Features and labels are shuffled by two calls of the same generator, i.e. by two different "
        "permutations, before the split.",
        invariant="each input keeps its own target",
    ),
    SealedCase(
        id="multilabel_functional_dropout_in_eval",
        task="multi-label classification",
        model=m.MultiLabelDropoutAlwaysOn,
        data=multilabel_data,
        bug="F.dropout is called without training=self.training, so dropout stays on at evaluation and "
        "every prediction is a random draw.",
        invariant="evaluation mode is deterministic: the train/eval switch reaches every stochastic layer",
    ),
    SealedCase(
        id="counting_warmup_never_stepped",
        task="object counting (Poisson regression)",
        model=m.BlobCounterWarmupNeverStepped,
        data=counting_data,
        bug="Under manual optimisation the step-wise warmup scheduler is never stepped, so training runs at "
        "10% of the learning rate throughout.",
        invariant="the learning-rate schedule advances as declared",
    ),
]

HEALTHY: list[SealedCase] = [
    SealedCase(
        id="mlm_ignore_index_with_seq_id",
        task="masked language modelling",
        model=m.MaskedLM,
        data=mlm_data,
        bug=None,
    ),
    SealedCase(
        id="mlm_padded_real_tokens_masked",
        task="masked language modelling",
        model=m.MaskedLM,
        data=lambda: mlm_data(m.mlm_collate_real_tokens, d.padded_chain_sequences),
        bug=None,
    ),
    SealedCase(
        id="tagging_packed_gru_lengths",
        task="token tagging",
        model=m.PackedGRUTagger,
        data=tagging_data,
        bug=None,
    ),
    SealedCase(
        id="segmentation_imbalanced_weighted_ignore_border",
        task="semantic segmentation",
        model=lambda: m.SegNet(class_weights=(0.2, 1.0, 1.0), ignore_index=255),
        data=imbalanced_segmentation_data,
        bug=None,
    ),
    SealedCase(
        id="quantile_pinball_summed",
        task="quantile regression",
        model=m.QuantileMLPSummed,
        data=quantile_data,
        bug=None,
    ),
    SealedCase(
        id="tabular_frozen_one_hot_rare_positive",
        task="tabular classification with categorical codes",
        model=m.OneHotTabularNet,
        data=lambda: tabular_data(rare=True),
        bug=None,
    ),
    SealedCase(
        id="forecast_window_normalised_summed_horizon",
        task="time-series forecasting",
        model=lambda: m.NormalisedForecaster(horizon=6),
        data=lambda: forecast_data(d.windows, horizon=6),
        bug=None,
    ),
    SealedCase(
        id="ordinal_coral_thresholds",
        task="ordinal regression",
        model=m.CoralOrdinal,
        data=ordinal_data,
        bug=None,
    ),
    SealedCase(
        id="counting_manual_optimisation_warmup",
        task="object counting (Poisson regression)",
        model=m.BlobCounter,
        data=counting_data,
        bug=None,
    ),
]
