"""Sealed gallery ZX (issue #34, half ``zx2``): image colourisation (the colour channels of small synthetic
coloured shapes predicted from their grey version), unsupervised domain adaptation with a gradient-reversal
domain classifier (DANN: labelled source digits, unlabelled stained target digits, judged on the target),
value learning on a small Markov decision process (fitted Q-iteration with TD targets from logged gridworld
transitions, judged by the greedy policy's return), next-basket prediction (the multi-hot next purchase from a
history of baskets), selective classification with a reject option (a classifier plus an abstain score,
judged by its risk at a fixed coverage) and formal-language recognition (is a bracket string balanced? a small
GRU over tokens of variable length, with padding). Written blind (see the package docstring); each bug is
proved against its healthy twin in ``test_proofs_zx2.py``."""

from __future__ import annotations

from functools import partial
from typing import Any

from torch.utils.data import DataLoader

from galleries.preflight.sealed import SealedCase
from galleries.preflight.sealed import _zx2_data as d
from galleries.preflight.sealed import _zx2_models as m


# --- data builders (each returns preflight's data keyword arguments) ----------------------------------------
def colour_data(grey=d.luma, pair=None) -> dict[str, Any]:
    """1,000 training images, read per item as (grey, colour) by ``pair`` (or made grey by ``grey``), and
    300 fixed validation pairs (made grey by ``grey``)."""
    train = d.Rows(d.shapes(1000, 1), transform=pair or partial(d.grey_pair, grey=grey))
    return d.loaders(train, d.Rows(*d.grey_pairs(300, 2, grey)), batch_size=64)


def dann_data(target_from_source: bool = False) -> dict[str, Any]:
    """The 1,000 labelled source training digits, each read with a random unlabelled target digit (the
    training digits through the stained sensor, or, with ``target_from_source``, the source tensors
    themselves); validation on the 300 validation digits in the target domain, labelled."""
    source, label = d.digits("train")
    target = source if target_from_source else d.stained(source, 1)
    train = d.SourceAndTarget(source, label, target)
    return {**d.loaders(train, d.Rows(*d.target_digits("val", 2))), "num_classes": 10}


def fqi_data(log=d.transitions) -> dict[str, Any]:
    """4,000 logged training transitions (state, action, reward, next state, done) made by ``log`` and
    1,000 validation transitions."""
    return d.loaders(d.Rows(*log(4000, 1)), d.Rows(*d.transitions(1000, 2)), batch_size=64)


def basket_data(pair=None, val_pair=None) -> dict[str, Any]:
    """2,000 training shoppers and 400 validation shoppers, each read as (history, next basket), through
    ``pair`` (``val_pair`` in validation) when given."""
    train = d.Rows(*d.shoppers(2000, 1), transform=pair)
    return d.loaders(train, d.Rows(*d.shoppers(400, 2), transform=val_pair), batch_size=64)


def selective_data(val_rows: int = 500) -> dict[str, Any]:
    """3,000 training points and ``val_rows`` validation points, with their (noisy) labels."""
    train, val = d.Rows(*d.noisy_points(3000, 1)), d.Rows(*d.noisy_points(val_rows, 2))
    return {**d.loaders(train, val, batch_size=64), "num_classes": d.CLASSES}


def bracket_data(augment=None, collate=d.pad_right, odd_negatives: bool = False) -> dict[str, Any]:
    """3,000 training strings (``augment`` applied to half of the reads; negatives made by dropping a
    bracket with ``odd_negatives``) and 600 validation strings (made the same way), encoded and padded in
    batches by ``collate``."""
    train = d.Brackets(*d.bracket_strings(3000, 1, odd_negatives), augment=augment)
    val = d.Brackets(*d.bracket_strings(600, 2, odd_negatives))
    return {
        "train_dataloaders": DataLoader(train, batch_size=64, shuffle=True, collate_fn=collate),
        "val_dataloaders": DataLoader(val, batch_size=256, collate_fn=collate),
    }


PAIRED = "each input is paired with its own target through sampling, collation and augmentation"
TASK_LOSS = "the loss scores the target the task declares"
DEPENDS = "the output depends on what the task says it depends on"
TRAINED = "every part of the model that the task needs is trained towards the task"
SYNCED = (
    "the loop's state machines (target-network syncs, schedulers, optimisation steps) advance as declared"
)
RANGE = "the served output can take every value the target takes"
CONVENTION = "the served output is read with the convention the model was trained with"
SERVED_INPUT = "the inputs are prepared in training as they are when the model is served"


# --- the cases ----------------------------------------------------------------------------------------------
BUGS: list[SealedCase] = [
    SealedCase(
        "colour_offsets_through_sigmoid",
        "image colourisation (grey plus predicted chroma offsets)",
        m.ColouriserSigmoidOffsets,
        colour_data,
        "The offset head ends in a sigmoid left from an RGB head: no channel can be served darker than the "
        "grey level, so red shapes come out pink and the green and blue ones washed out.",
        RANGE,
    ),
    SealedCase(
        "colour_grey_made_in_bgr_order",
        "image colourisation (grey inputs made from the colour images)",
        m.Colouriser,
        partial(colour_data, d.luma_bgr),
        "The grey inputs are made with the luminance weights in BGR order (0.114 R + 0.587 G + 0.299 B, from "
        "an OpenCV loader) while the served grey photos are true luminance: red shapes are served too dark "
        "for what the model learned, blue ones too bright, and their colours come out wrong.",
        SERVED_INPUT,
    ),
    SealedCase(
        "dann_gradient_reversal_dropped",
        "unsupervised domain adaptation (DANN, gradient-reversal domain classifier)",
        m.DANNWithoutReversal,
        dann_data,
        "The gradient-reversal layer was lost in a refactor: the features are trained to help the domain "
        "classifier, not to fool it, and the target digits are misread more often than with no adaptation.",
        TASK_LOSS,
    ),
    SealedCase(
        "dann_target_set_is_source",
        "unsupervised domain adaptation (DANN, unlabelled target data)",
        m.DANN,
        partial(dann_data, target_from_source=True),
        "The unlabelled 'target' tensors are the source tensors (a copied line): the domain classifier is "
        "asked to separate two copies of one set, nothing is adapted, and the stained digits are read as by "
        "a source-only model.",
        "the unlabelled adaptation data come from the domain the model is served on",
    ),
    SealedCase(
        "fqi_target_network_syncs_itself",
        "value learning on a gridworld (fitted Q-iteration with a target network)",
        m.QNetSyncsItself,
        fqi_data,
        "The periodic sync loads the target network's own state dict into it (a slip for the online "
        "network's): the target stays random, the values never carry the goal back more than a step, and the "
        "greedy policy wanders.",
        SYNCED,
    ),
    SealedCase(
        "fqi_done_flag_ignored",
        "value learning on a gridworld (TD targets at terminal states)",
        m.QNetIgnoresDone,
        fqi_data,
        "The TD target leaves out (1 - done): the step into the goal bootstraps from the never-trained "
        "values of the terminal state, so the goal is worth no more than any cell and the greedy policy does "
        "not head for it.",
        TASK_LOSS,
    ),
    SealedCase(
        "fqi_bootstrap_with_logged_action",
        "value learning on a gridworld (TD targets)",
        m.QNetLoggedAction,
        fqi_data,
        "The bootstrap gathers Q_target(s', a) with the logged action instead of the max over actions: it "
        "learns the value of repeating an action forever, and the greedy policy walks into walls.",
        TASK_LOSS,
    ),
    SealedCase(
        "fqi_next_state_from_shuffled_log",
        "value learning on a gridworld (transitions from a log)",
        m.QNet,
        partial(fqi_data, d.transitions_next_from_shifted_log),
        "The next state is read as the following row's state, right for the episode log as written but not "
        "after the log was shuffled: every transition leads to a random cell, and the values learn only the "
        "step cost.",
        PAIRED,
    ),
    SealedCase(
        "basket_target_is_last_history_basket",
        "next-basket prediction (targets from purchase histories)",
        m.NextBasket,
        partial(basket_data, d.baskets_last_in_history, d.baskets_last_in_history),
        "The target is indexed baskets[t - 1], the last basket of the history itself, not baskets[t]: the "
        "model learns to copy the last basket and misses what the shopper buys next.",
        PAIRED,
    ),
    SealedCase(
        "basket_cross_entropy_on_argmax",
        "next-basket prediction (multi-hot targets)",
        m.NextBasketFirstItemOnly,
        basket_data,
        "The loss is cross_entropy(logits, basket.argmax(-1)) from the classifier template: each basket "
        "teaches only its lowest item id, and the recommendations lean to low ids.",
        TASK_LOSS,
    ),
    SealedCase(
        "basket_last_basket_read_from_front",
        "next-basket prediction (oldest-first, left-padded histories)",
        m.NextBasketOldestAsLast,
        basket_data,
        "The 'last basket' feature is history[:, 0], written for newest-first histories: with oldest-first, "
        "left-padded histories it is a pad or the oldest basket, and what follows the latest purchase is "
        "missed.",
        DEPENDS,
    ),
    SealedCase(
        "selective_entropy_served_as_confidence",
        "selective classification (softmax response, reject option)",
        m.SoftmaxResponseEntropy,
        selective_data,
        "The served confidence is the predictive entropy, a measure of doubt: the reject rule keeps the "
        "highest scores, so it answers the most doubtful points and rejects the surest.",
        CONVENTION,
    ),
    SealedCase(
        "selective_selector_head_not_optimised",
        "selective classification (a learned selector head)",
        m.SelectorHeadNotOptimised,
        selective_data,
        "configure_optimizers lists only the body's and the classifier's parameters: the selector head keeps "
        "its random weights, and the served confidence does not tell right answers from wrong.",
        TRAINED,
    ),
    SealedCase(
        "brackets_reversed_without_mirroring",
        "formal-language recognition (balanced brackets, reversal augmentation)",
        m.BracketGRU,
        partial(bracket_data, d.backwards),
        "The reversal augmentation reads the string backwards without turning the brackets around: a "
        "balanced '(()[])' becomes ')][)(((' ... still labelled balanced, and the model learns a blur of the "
        "language and its mirror.",
        PAIRED,
    ),
    SealedCase(
        "brackets_negatives_by_dropping_a_bracket",
        "formal-language recognition (balanced brackets, generated negatives)",
        m.BracketGRU,
        partial(bracket_data, odd_negatives=True),
        "The unbalanced training strings were made by dropping one bracket from balanced ones: every one has "
        "odd length, the GRU learns the parity of the length, and calls every even-length near miss "
        "balanced.",
        "the training inputs carry the task's signal, not a shortcut the served inputs lack",
    ),
]

HEALTHY: list[SealedCase] = [
    SealedCase(*row)
    for row in (
        (
            "colour_bins_cross_entropy",
            "image colourisation as classification (chroma quantised into 49 bins, a per-pixel "
            "cross-entropy; the served colour is a probability-weighted mean, green solved from luminance)",
            m.ColouriserBins,
            colour_data,
        ),
        (
            "colour_heavy_augmentation",
            "image colourisation (mirror, quarter turns and brightness changes of the colour image, the grey "
            "input made from it afterwards)",
            m.Colouriser,
            partial(colour_data, pair=d.turned_grey_pair),
        ),
        (
            "dann_adversarial_domain_loss",
            "unsupervised domain adaptation (DANN: the features raise the domain loss on purpose; annealed "
            "learning rate per step)",
            m.DANN,
            dann_data,
        ),
        (
            "fqi_double_dqn_huber_polyak",
            "value learning (Double DQN targets, a Huber loss, a Polyak-averaged target network, rewards "
            "scaled down by 10)",
            m.DoubleQNetHuber,
            fqi_data,
        ),
        (
            "basket_listwise_softmax",
            "next-basket prediction (a softmax over items against the normalised multi-hot basket)",
            m.NextBasketListwise,
            basket_data,
        ),
        (
            "basket_item_dropout",
            "next-basket prediction (20% of the history's items dropped at random per read)",
            m.NextBasket,
            partial(basket_data, d.drop_history_items),
        ),
        (
            "selective_deep_gamblers",
            "selective classification (an abstain output with the gambler's loss; heavy label noise on "
            "purpose)",
            m.DeepGamblers,
            selective_data,
        ),
        (
            "selective_selector_tiny_validation",
            "selective classification (a selector head on detached features; a 48-row validation set)",
            m.SelectorHead,
            partial(selective_data, 48),
        ),
        (
            "brackets_mirror_augmentation",
            "formal-language recognition (strings read backwards with their brackets turned around: the "
            "label is kept and right)",
            m.BracketGRU,
            partial(bracket_data, d.mirror),
        ),
        (
            "brackets_left_padded_last_column",
            "formal-language recognition (left-padded batches read unpacked at the last column)",
            m.BracketGRULeftPadded,
            partial(bracket_data, collate=d.pad_left),
        ),
    )
]
