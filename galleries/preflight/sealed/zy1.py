"""Sealed gallery ZY (issue #34, half ``zy1``): heteroscedastic regression (a mean and a log-variance, the
Gaussian negative log-likelihood), a mixture density network on the inverted sinusoid, multiple-instance
learning on bags of digits (positive if a bag holds a 7; attention or max pooling, padded bags and a mask),
graph-level regression on small random graphs (message passing, a sum readout), physics-informed fitting of
logistic growth (sparse observations plus an autograd ODE residual on collocation points) and character-level
language identification (a bag of character n-grams). Written blind (see the package docstring);
each bug is proved against its healthy twin in ``test_proofs_zy1.py``."""

from __future__ import annotations

from functools import partial
from typing import Any

from torch.utils.data import DataLoader, WeightedRandomSampler

from galleries.preflight.sealed import SealedCase
from galleries.preflight.sealed import _zy1_data as d
from galleries.preflight.sealed import _zy1_models as m


# --- data builders (each returns preflight's data keyword arguments) ----------------------------------------
def hetero_data() -> dict[str, Any]:
    """1,500 training points and 500 validation points of the noisy curve."""
    return d.loaders(d.Rows(*d.hetero(1500, 1)), d.Rows(*d.hetero(500, 2)), batch_size=64)


def mdn_data() -> dict[str, Any]:
    """2,000 training pairs and 500 validation pairs of the inverted sinusoid."""
    return d.loaders(
        d.Rows(*d.inverted_sinusoid(2000, 1)), d.Rows(*d.inverted_sinusoid(500, 2)), batch_size=64
    )


def mil_data(label: str = "any", augment=None, collate=d.pad_bags) -> dict[str, Any]:
    """600 training bags (each read through ``augment``) and 200 validation bags, of the training and the
    validation digits, padded per batch by ``collate``; labelled as ``label`` says."""
    train = d.Bags(*d.digit_bags("train", 600, 1, label), transform=augment)
    val = d.Bags(*d.digit_bags("val", 200, 2, label))
    return {
        "train_dataloaders": DataLoader(train, batch_size=32, shuffle=True, collate_fn=collate),
        "val_dataloaders": DataLoader(val, batch_size=200, collate_fn=collate),
    }


def graph_data(augment=d.permute_graph) -> dict[str, Any]:
    """800 training graphs (relabelled per read by ``augment``) and 200 validation graphs."""
    train = d.Rows(*d.graphs(800, 1), transform=augment)
    return d.loaders(train, d.Rows(*d.graphs(200, 2), transform=d.as_graph), batch_size=64)


def pinn_data() -> dict[str, Any]:
    """12 observations in the growth phase, cycled through 3,200 rows a training epoch, each with a
    collocation time drawn afresh; 12 other observations with 256 fixed collocation times for validation."""
    train = d.Collocation(*d.observations(12, 1), length=3200)
    return d.loaders(train, d.Collocation(*d.observations(12, 2), length=256, seed=5), batch_size=64)


def langid_balanced_sampling_data(inverse: bool = True) -> dict[str, Any]:
    """2,000 training strings of four languages in shares 55/25/15/5% (n-gram rows), drawn by a
    ``WeightedRandomSampler`` with the weight 1 / (the row's language count) (or, with ``inverse=False``, the
    count itself) to balance them; 500 validation strings in the same shares."""
    ids, lang = d.strings([1100, 500, 300, 100], 1)
    count = lang.bincount().float()
    weights = (1 / count if inverse else count)[lang]
    sampler = WeightedRandomSampler(weights, num_samples=len(lang), replacement=True)
    val_ids, val_lang = d.strings([275, 125, 75, 25], 2)
    train, val = d.Rows(d.ngrams(ids), lang), d.Rows(d.ngrams(val_ids), val_lang)
    return {**d.loaders(train, val, batch_size=64, sampler=sampler), "num_classes": d.LANGS}


def langid_split_data(ordered: bool = False) -> dict[str, Any]:
    """500 strings of each language (n-gram rows), split 1,500 for training and 500 for validation by
    slicing; generated language by language (``ordered``) or shuffled first."""
    ids, lang = d.strings([500] * d.LANGS, 1, ordered=ordered)
    grams = d.ngrams(ids)
    train, val = d.Rows(grams[:1500], lang[:1500]), d.Rows(grams[1500:], lang[1500:])
    return {**d.loaders(train, val, batch_size=64), "num_classes": d.LANGS}


CONVENTION = "the served output is read with the convention the model was trained with"
TASK_LOSS = "the loss scores the target the task declares"
SCHEDULE = "the loop's state machines (schedulers, accumulation, optimisation steps) advance as declared"
INDEPENDENT = "each example's output depends on that example alone, not on its batch-mates"
SAMPLE = "the training data are drawn from the distribution the task serves"
PAIRED = "each input is paired with its own target through sampling, collation and augmentation"
DEPENDS = "the output depends on what the task says it depends on"
GRADIENT = "every term of the loss passes its gradient to the parameters it depends on"
SPLIT = "training and validation are drawn from the same distribution (the split is random)"
PHYSICS = "the loss scores the target the task declares (the residual is the declared equation)"


# --- the cases ----------------------------------------------------------------------------------------------
BUGS: list[SealedCase] = [
    SealedCase(
        "hetero_std_served_in_standardised_units",
        "heteroscedastic regression (mean and log-variance, standardised target)",
        m.HeteroNetStdNotRescaled,
        hetero_data,
        "predict() maps the mean back to the target's units but not the standard deviation: the served "
        "uncertainty is 6.5 times too narrow and the held-out likelihood collapses.",
        CONVENTION,
    ),
    SealedCase(
        "hetero_nll_without_log_variance",
        "heteroscedastic regression (Gaussian negative log-likelihood)",
        m.HeteroNetNoLogVariance,
        hetero_data,
        "The 0.5 * log_var term of the negative log-likelihood was dropped as a constant: the loss falls by "
        "inflating every variance, and the served intervals are uselessly wide.",
        TASK_LOSS,
    ),
    SealedCase(
        "mdn_weight_averaged_component_nll",
        "mixture density network (inverted sinusoid)",
        m.MDNExpectedNLL,
        mdn_data,
        "The loss is sum_k pi_k * (-log N_k) instead of -log sum_k pi_k N_k: it is minimised by one "
        "component, and the mixture collapses to a single broad Gaussian over the three branches.",
        TASK_LOSS,
    ),
    SealedCase(
        "mdn_warmup_stepped_per_epoch",
        "mixture density network (linear learning-rate warm-up)",
        m.MDNWarmupPerEpoch,
        mdn_data,
        "The 500-iteration LinearLR warm-up is returned without 'interval': 'step', so Lightning steps it "
        "per epoch and the whole run trains at 1..5% of the learning rate.",
        SCHEDULE,
    ),
    SealedCase(
        "mil_attention_softmax_over_batch",
        "multiple-instance learning on bags of digits (attention pooling, padded bags and a mask)",
        m.AttentionMILSoftmaxOverBatch,
        mil_data,
        "The attention weights are normalised with softmax(dim=0), copied from single-bag code: batched, "
        "they are shared out among the bags of the batch, and a bag's score depends on its batch-mates.",
        INDEPENDENT,
    ),
    SealedCase(
        "mil_bag_label_share_of_sevens",
        "multiple-instance learning on bags of digits (bag label)",
        m.AttentionMIL,
        partial(mil_data, "mean"),
        "The bag label is written (instance_labels == 7).float().mean() instead of .max(): the targets are "
        "the share of 7s, 0.1..0.7, and the served bags (logit above 0) are almost never positive.",
        TASK_LOSS,
    ),
    SealedCase(
        "graph_mean_readout_of_a_count",
        "graph-level regression (message passing; readout)",
        m.GraphNetMeanReadout,
        graph_data,
        "The readout averages the node states over the real nodes: the target counts edges, the graph's "
        "size is divided out, and the count must be guessed from densities.",
        DEPENDS,
    ),
    SealedCase(
        "graph_permutation_on_features_only",
        "graph-level regression (node-permutation augmentation)",
        m.GraphNet,
        partial(graph_data, d.permute_features_only),
        "The node-permutation augmentation relabels the feature matrix but not the adjacency: every "
        "training graph's node types are scattered over the wrong nodes, and its count no longer matches.",
        PAIRED,
    ),
    SealedCase(
        "pinn_residual_in_scaled_time",
        "physics-informed fitting of logistic growth (scaled time input)",
        m.PINNDerivativeInScaledTime,
        pinn_data,
        "The ODE residual takes du/dtau for du/dt, forgetting the chain rule's 1/8 for the scaled time "
        "input: the physics asks for growth eight times slower, and the extrapolated plateau is wrong.",
        PHYSICS,
    ),
    SealedCase(
        "pinn_derivative_without_create_graph",
        "physics-informed fitting of logistic growth (autograd residual)",
        m.PINNDerivativeNotDifferentiated,
        pinn_data,
        "torch.autograd.grad is called with retain_graph=True instead of create_graph=True: du/dt is a "
        "constant to the optimiser, the residual never shapes the curve's slope, and the plateau is missed.",
        GRADIENT,
    ),
    SealedCase(
        "langid_sampler_weights_not_inverted",
        "character-level language identification (bag of n-grams, class-balancing sampler)",
        m.NgramLangID,
        partial(langid_balanced_sampling_data, False),
        "The WeightedRandomSampler is given each row's language count instead of its inverse: it "
        "over-samples the common languages further, and the rarest is almost never seen.",
        SAMPLE,
    ),
    SealedCase(
        "langid_split_before_shuffle",
        "character-level language identification (train/validation split)",
        m.NgramLangID,
        partial(langid_split_data, True),
        "The strings are split by slicing before they are shuffled: generated language by language, the "
        "training slice holds three languages and the fourth is validation only.",
        SPLIT,
    ),
]

HEALTHY: list[SealedCase] = [
    SealedCase(*row)
    for row in (
        (
            "hetero_gaussian_nll_goes_negative",
            "heteroscedastic regression (F.gaussian_nll_loss, softplus variance: the loss goes below zero)",
            m.HeteroGaussianNLL,
            hetero_data,
        ),
        (
            "hetero_mean_by_mse_variance_detached",
            "heteroscedastic regression (mean by squared error, variance by the likelihood of the detached "
            "mean)",
            m.HeteroMeanByMSE,
            hetero_data,
        ),
        (
            "mdn_spare_components",
            "mixture density network (eight components for three modes; per-step warm-up; negative loss)",
            m.MDNManyComponents,
            mdn_data,
        ),
        (
            "mil_max_pool_replicate_padding",
            "multiple-instance learning (max pooling, bags padded with copies of an instance, mask unused)",
            m.MaxMIL,
            partial(mil_data, collate=d.pad_bags_replicate),
        ),
        (
            "mil_attention_shuffled_instances",
            "multiple-instance learning (masked attention; instance order shuffled on every read)",
            m.AttentionMIL,
            partial(mil_data, augment=d.shuffle_instances),
        ),
        (
            "graph_mean_over_padded_axis",
            "graph-level regression (readout h.mean(1) over the zero-padded node axis: a scaled sum)",
            m.GraphNetMeanOverPadding,
            graph_data,
        ),
        (
            "pinn_hard_initial_condition",
            "physics-informed fitting (initial condition built into the network; 12 observations, residual "
            "on resampled collocation points)",
            m.PINNHardInitialCondition,
            pinn_data,
        ),
        (
            "langid_rare_languages_oversampled",
            "character-level language identification (imbalanced languages re-balanced by a weighted sampler "
            "with replacement; imbalanced validation)",
            m.NgramLangID,
            langid_balanced_sampling_data,
        ),
    )
]
