"""Sealed gallery G: extractive span prediction, skip-gram embeddings with negative sampling, matrix
factorisation for ratings, prototypical few-shot episodes, a physics-informed loss, offline Q-learning with a
target network, adversarial (FGSM) training, set prediction with a matching loss, dense depth regression, a
2-D CNN on spectrograms, activity recognition from sensor windows, knowledge-graph embeddings (TransE),
stochastic depth, weight- and spectral-normed layers, a cascade, regression on log prices, a learned
temperature and label smoothing in bits. Written blind (see the package docstring); each bug is proved
against its healthy twin in ``test_proofs_g.py``."""

from __future__ import annotations

from functools import partial
from typing import Any

import torch

from galleries.preflight.sealed import SealedCase
from galleries.preflight.sealed import _g_data as d
from galleries.preflight.sealed import _g_models as m
from galleries.sealed import gen


# --- data builders (each returns preflight's data keyword arguments) ----------------------------------------
def rows_data(make, n: int = 1000, transform=None, classes: int | None = None, **kw) -> dict[str, Any]:
    """``make(n, 1)`` for training (through ``transform`` per read, if given) and ``make(300, 2)`` for
    validation."""
    out = d.loaders(d.Rows(*make(n, 1), transform=transform), d.Rows(*make(300, 2)), **kw)
    return {**out, "num_classes": classes} if classes else out


def digit_data() -> dict[str, Any]:
    return rows_data(lambda n, seed: d.digits("train" if seed == 1 else "val"), classes=10)


def span_data(shift: bool | None = None, **kw) -> dict[str, Any]:
    """Span rows; ``shift`` set: a random shift of the context on every read that moves the span (``True``)
    or not (the BUG, ``False``)."""
    transform = None if shift is None else partial(d.shift_context, move_span=shift)
    return rows_data(partial(d.spans, **kw), transform=transform)


def skipgram_data() -> dict[str, Any]:
    """(centre, context) pairs with 5 fresh negatives per read; validation's negatives are fixed."""
    centre, context = d.skipgram_pairs(1000, 2)
    fixed = torch.randint(d.WORDS, (1000, 5), generator=gen(9))
    train = d.Rows(*d.skipgram_pairs(6000, 1), transform=d.with_negatives)
    return d.loaders(train, d.Rows(centre, context, fixed), batch_size=128)


def ratings_data(with_val_rows: bool = False, repeated: bool = False) -> dict[str, Any]:
    """(user, item, rating) rows; ``with_val_rows`` (the BUG): the validation rows were also added to
    training."""
    train, val = d.ratings("train", repeated), d.ratings("val")
    if with_val_rows:
        train = tuple(torch.cat(pair) for pair in zip(train, val, strict=True))
    return d.loaders(d.Rows(*train), d.Rows(*val))


def episode_data(queries_from_support: bool = False) -> dict[str, Any]:
    """Fresh 4-way 1-shot training episodes of the training digits; fixed validation episodes of the
    validation digits (the BUG, ``queries_from_support``: their queries repeat the support images)."""
    train = d.Episodes("train", 400)
    val = d.Episodes("val", 60, seed=100, queries_from_support=queries_from_support)
    return d.loaders(train, val, batch_size=8)


def kg_data() -> dict[str, Any]:
    """Training triples (8 passes per epoch) and validation triples."""
    return d.loaders(d.Rows(*(part.repeat(8) for part in d.triples("train"))), d.Rows(*d.triples("val")))


def activity_data(label_by_window_number: bool = False) -> dict[str, Any]:
    train = d.sensor_windows(16000, 1, label_by_window_number)
    val = d.sensor_windows(5000, 2, label_by_window_number)
    return {**d.loaders(d.Rows(*train), d.Rows(*val)), "num_classes": d.ACTIVITIES}


def spectrogram_data(transform=None, upside_down: bool = False) -> dict[str, Any]:
    return rows_data(partial(d.spectrograms, upside_down=upside_down), transform=transform, classes=4)


pinn_data = partial(rows_data, d.collocation, 2000, batch_size=64)
q_data = partial(rows_data, d.transitions, 2000, batch_size=64)
set_data = partial(rows_data, d.point_sets, 2000)
depth_data = partial(rows_data, partial(d.depth_scenes, holes=0.3))
cascade_data = partial(rows_data, d.cascade_rows)


def price_data(band: str = "mean") -> dict[str, Any]:
    """Priced rows whose band column is its mean (or, the BUG, ``band="true"``: the real band)."""
    return rows_data(partial(d.priced_rows, band=band))


PAIRED = "each input is paired with its own target through sampling, collation and augmentation"
STEPPED = "every trained parameter is stepped"
SERVED = "what validation reports is what the model does when served"
NO_LEAK = "no input carries the target"
TASK_LOSS = "the loss scores the target the task declares"
DEPENDS = "the output depends on what the task says it depends on"


# --- the cases ----------------------------------------------------------------------------------------------
BUGS: list[SealedCase] = [
    SealedCase(
        "span_shift_leaves_positions",
        "extractive span prediction (start/end logits, shift augmentation)",
        m.SpanNet,
        partial(span_data, shift=False),
        "The augmentation shifts the context right by 0..4 tokens but leaves the start/end labels, so most "
        "training answers point up to 4 tokens before the real span.",
        "augmentation preserves the target (or moves it with the input)",
    ),
    SealedCase(
        "span_end_exclusive_decoded_inclusive",
        "extractive span prediction (label convention)",
        m.SpanNet,
        partial(span_data, end_exclusive=True),
        "The labeller writes exclusive ends (one past the last token) while the model's decoding reads them "
        "as inclusive, so every served answer carries one extra token.",
        TASK_LOSS,
    ),
    SealedCase(
        "sgns_negatives_scored_as_positives",
        "skip-gram word embeddings with negative sampling",
        m.SkipGramNegativesAsPositives,
        skipgram_data,
        "The negatives' term is log s(u.n) instead of log s(-u.n): every word is pulled toward every other, "
        "the loss falls fast and the embeddings carry no topic.",
        TASK_LOSS,
    ),
    SealedCase(
        "mf_factors_zero_initialised",
        "matrix factorisation for ratings",
        m.RatingsMFZeroFactors,
        ratings_data,
        "The user and item factor tables are zero-initialised like the biases; their gradients are each "
        "other's zeros, so only the biases learn and the taste term stays 0.",
        "every parameter that shapes the output gets a gradient",
    ),
    SealedCase(
        "mf_validation_rows_also_trained",
        "matrix factorisation for ratings (validation)",
        m.RatingsMF,
        partial(ratings_data, with_val_rows=True),
        "The validation ratings were appended to the training rows for 'more data', so validation scores "
        "memorised ratings and overstates accuracy on unseen pairs.",
        "splits do not share rows",
    ),
    SealedCase(
        "proto_val_queries_drawn_from_support",
        "prototypical few-shot episodes (validation)",
        m.ProtoNet,
        partial(episode_data, queries_from_support=True),
        "The validation episodes draw their queries from the support images (1-shot: each query is its "
        "class's prototype), so validation reports 0% error where clean episodes of the same images give 6%.",
        "splits do not share rows",
    ),
    SealedCase(
        "pinn_derivative_wrt_standardised_input",
        "physics-informed loss (ODE residual by autograd)",
        m.DecayPINNStandardisedDerivative,
        pinn_data,
        "u' is taken with respect to the standardised input, not x (missing the chain rule's 1/0.577), so "
        "the network solves u' = -2.6 u instead of -1.5 u.",
        TASK_LOSS,
    ),
    SealedCase(
        "pinn_residual_averaged_before_squaring",
        "physics-informed loss (ODE residual by autograd)",
        m.DecayPINNMeanResidual,
        pinn_data,
        "The penalty is mean(residual)^2 instead of mean(residual^2): residuals of opposite sign cancel and "
        "a curve that is wrong almost everywhere has zero loss.",
        TASK_LOSS,
    ),
    SealedCase(
        "qlearn_target_sync_loads_nothing",
        "offline Q-learning on a replay buffer (target network)",
        m.ChainQSyncKeysMismatch,
        q_data,
        "The target network is synced with load_state_dict(self.state_dict(), strict=False): no key "
        "matches, nothing is copied, and TD targets bootstrap from a random network forever.",
        "the loop's state machines (schedulers, accumulation, averaging) advance as declared",
    ),
    SealedCase(
        "qlearn_done_mask_inverted",
        "offline Q-learning on a replay buffer (terminal flags)",
        m.ChainQDoneInverted,
        q_data,
        "The bootstrap is multiplied by done instead of 1 - done: only terminal steps look ahead, so Q is "
        "the immediate reward and the greedy policy grabs 0.1 instead of walking to the goal.",
        TASK_LOSS,
    ),
    SealedCase(
        "fgsm_step_descends_the_loss",
        "adversarial (FGSM) training on digits",
        m.FGSMNetDescends,
        digit_data,
        "The perturbation is x - eps sign(grad), a step that lowers the loss: training sees easier inputs, "
        "and the model is as fragile under attack as an undefended one.",
        TASK_LOSS,
    ),
    SealedCase(
        "set_mse_without_matching",
        "set prediction (3 points from an image)",
        m.SetNetFixedOrder,
        set_data,
        "The loss is plain MSE against the points in their stored (arbitrary) order instead of the best "
        "matching, so every slot learns the average place, near the centre.",
        TASK_LOSS,
    ),
    SealedCase(
        "depth_holes_scored_as_zero_depth",
        "dense depth regression from images (missing returns)",
        m.DepthNetHolesScored,
        depth_data,
        "Missing depth pixels (stored as 0) are scored like measurements, so the model learns to shrink "
        "every depth toward 70% of the truth.",
        TASK_LOSS,
    ),
    SealedCase(
        "depth_ema_without_warmup",
        "dense depth regression served from a weight average (EMA)",
        m.DepthNetEMANoWarmup,
        depth_data,
        "The served EMA uses decay 0.999 from step 0 with no warm-up; the run is 128 steps long, so the "
        "average is still 88% the random initial network.",
        "the loop's state machines (schedulers, accumulation, averaging) advance as declared",
    ),
    SealedCase(
        "spectrogram_exported_upside_down",
        "2-D CNN on spectrograms (data export)",
        m.SpectrogramNet,
        partial(spectrogram_data, upside_down=True),
        "The training and validation spectrograms were exported as images (highest frequency in row 0) while "
        "served ones come from the STFT, low bins first: every served up-chirp reads as a down-chirp.",
        SERVED,
    ),
    SealedCase(
        "activity_view_instead_of_transpose",
        "activity recognition from multi-channel sensor windows",
        m.ActivityNetViewNotPermute,
        activity_data,
        "Channels-last windows are reshaped to (n, 6, 32) instead of transposed; the shapes fit and the "
        "convolutions slide over interleaved channels and time.",
        DEPENDS,
    ),
    SealedCase(
        "activity_labels_by_window_number",
        "activity recognition from multi-channel sensor windows (windowing)",
        m.ActivityNet,
        partial(activity_data, label_by_window_number=True),
        "Window i (steps 16i..16i+31) is labelled with the activity at step i, not at its middle, so after "
        "the first segments windows and labels come apart.",
        PAIRED,
    ),
    SealedCase(
        "activity_train_override_ignores_mode",
        "activity recognition (dropout, frozen normaliser)",
        partial(m.ActivityNetTrainIgnoresMode, dropout=0.5),
        activity_data,
        "A train() override that keeps the frozen normaliser in eval calls super().train() without mode, so "
        "eval() leaves dropout 0.5 on in validation and serving.",
        SERVED,
    ),
    SealedCase(
        "kg_relations_left_out_of_optimizer",
        "knowledge-graph embeddings (TransE distances, 1-N scoring)",
        m.TransERelationsNotOptimised,
        kg_data,
        "The optimizer is built on the entity table only: the relation vectors stay random and the entities "
        "cannot fit four random translations.",
        STEPPED,
    ),
    SealedCase(
        "cascade_teacher_forced_in_validation",
        "a cascade (stage 2 reads stage 1's estimate)",
        m.CascadeTeacherForced,
        cascade_data,
        "Stage 2 is fed the true first-stage quantity in training and validation; served, it gets stage 1's "
        "estimate, and validation reports an error the cascade never reaches.",
        SERVED,
    ),
    SealedCase(
        "price_band_column_leaks_target",
        "regression on log prices mapped back",
        m.PriceNet,
        partial(price_data, band="true"),
        "A 'price band' column (round log price, known only after the sale) is in the training and "
        "validation rows; new rows carry its mean, and the model leaned on it.",
        NO_LEAK,
    ),
    SealedCase(
        "temperature_dropped_at_serving",
        "digit classification with a learned temperature",
        m.TemperatureNetServedWithout,
        digit_data,
        "predict() applies softmax to the raw logits, not logits / T with the learned T (~0.1), so the "
        "served probabilities are ~10x too flat.",
        SERVED,
    ),
]

PADDED, SHIFTED = partial(span_data, padded=True), partial(span_data, shift=True)
REPEATED, PERMUTED = partial(ratings_data, repeated=True), partial(set_data, transform=d.permute_points)
MASKED_FRAMES, LAZY = partial(spectrogram_data, transform=d.mask_time), partial(m.SpectrogramNet, lazy=True)
THREE_CHANNELS, DROPOUT = partial(m.ActivityNet, channels=3), partial(m.ActivityNet, dropout=0.5)
HEALTHY: list[SealedCase] = [
    SealedCase(*row)
    for row in (
        ("span_padding_masked", "span prediction (variable lengths, pads masked)", m.SpanNet, PADDED),
        ("span_shift_moves_positions", "span prediction (shift moving the span)", m.SpanNet, SHIFTED),
        (
            "sgns_fresh_negatives",
            "skip-gram (negatives drawn per read, no labels)",
            m.SkipGram,
            skipgram_data,
        ),
        ("mf_global_mean_from_zero", "matrix factorisation (init loss ~13)", m.RatingsMF, ratings_data),
        ("mf_repeated_ratings", "matrix factorisation (pairs rated twice, legit)", m.RatingsMF, REPEATED),
        (
            "proto_episode_relative_labels",
            "few-shot (the same 0..9 query labels every episode)",
            m.ProtoNet,
            episode_data,
        ),
        ("pinn_inputs_only", "physics-informed loss (the batch has no target)", m.DecayPINN, pinn_data),
        ("qlearn_frozen_target_synced", "offline Q-learning (frozen target network)", m.ChainQ, q_data),
        ("fgsm_adversarial_training", "FGSM training (loss reads an input gradient)", m.FGSMNet, digit_data),
        ("set_matching_order_per_read", "set prediction (target order random per read)", m.SetNet, PERMUTED),
        ("depth_holes_masked", "depth regression (zeros in the target masked)", m.DepthNet, depth_data),
        ("depth_ema_with_warmup", "depth regression (served weights are an EMA)", m.DepthNetEMA, depth_data),
        (
            "spectrogram_time_masking",
            "spectrogram CNN (SpecAugment time masks)",
            m.SpectrogramNet,
            MASKED_FRAMES,
        ),
        ("spectrogram_lazy_head", "spectrogram CNN (LazyLinear head)", LAZY, spectrogram_data),
        (
            "activity_accelerometer_only",
            "activity recognition (3 of 6 channels read)",
            THREE_CHANNELS,
            activity_data,
        ),
        (
            "activity_dropout_frozen_normaliser",
            "activity recognition (dropout, frozen BN)",
            DROPOUT,
            activity_data,
        ),
        ("kg_transe_one_to_n", "TransE distances, CE over 60 entities", m.TransE, kg_data),
        ("stochastic_depth_rescaled", "digits, stochastic depth", m.StochasticDepthNet, digit_data),
        ("weight_and_spectral_norm", "digits, parametrised weights", m.NormedNet, digit_data),
        ("cascade_on_own_estimate", "a cascade on stage 1's estimate", m.Cascade, cascade_data),
        ("price_log_target", "log-price regression (a constant column)", m.PriceNet, price_data),
        (
            "temperature_learned",
            "digits, learned temperature (init loss >> ln 10)",
            m.TemperatureNet,
            digit_data,
        ),
        ("smoothed_loss_in_bits", "digits, label smoothing 0.1, loss in bits", m.SmoothedBitsNet, digit_data),
    )
]
