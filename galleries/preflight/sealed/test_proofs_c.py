"""Proofs for sealed gallery C, with plain torch and Lightning (no ``lightning_recipes``): every bug costs
more than a stated minimum and than 3x the seed noise of its healthy twin on the same clean held-out data (or,
for a validation lie, its validation figure overstates the held-out one by more than the twin's does); every
healthy case fits: its training and validation losses fall."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

from galleries import sealed
from galleries.preflight.sealed import _c_data as d
from galleries.preflight.sealed import _c_models as m
from galleries.preflight.sealed import c
from galleries.sealed import Proof, TrainLosses, trained, twin_runs  # noqa: F401 (imported from here too)

BUGS = {case.id: case for case in c.BUGS}


# --- task metrics on clean held-out data: errors, lower is better -------------------------------------------
def _mismatch(predicted: torch.Tensor, target: torch.Tensor) -> float:
    return (predicted != target).float().mean().item()


@torch.no_grad()
def digit_error(model) -> float:
    x, y = d.digits("test")
    return _mismatch(model(x).argmax(-1), y)


@torch.no_grad()
def new_digit_error(model) -> float:
    """On training digits that no copy was made of (the same writers as the copies)."""
    x, y = (t[360:] for t in d.shuffled_training_digits())
    return _mismatch(model(x).argmax(-1), y)


@torch.no_grad()
def balanced_digit_error(model) -> float:
    """The mean over the ten classes of each class's error rate."""
    x, y = d.digits("test")
    wrong = model(x).argmax(-1) != y
    return torch.stack([wrong[y == k].float().mean() for k in range(10)]).mean().item()


@torch.no_grad()
def tagging_error(model) -> float:
    tokens, tags = d.entity_sentences(500, 3)
    real = tags != -100
    return _mismatch(model(tokens).argmax(-1)[real], tags[real])


@torch.no_grad()
def next_token_error(model) -> float:
    """Each position predicted from its prefix alone (as when generating)."""
    ids = d.chains(400, 3)
    predicted = torch.stack([model(ids[:, : t + 1])[:, -1].argmax(-1) for t in range(d.LM_LEN - 1)], dim=1)
    return _mismatch(predicted, ids[:, 1:])


@torch.no_grad()
def ranking_error(model) -> float:
    """1 - AUC: the share of never-liked items a held-out liked item does not outscore, per held-out row."""
    users, items = torch.arange(d.USERS), torch.arange(d.ITEMS)
    scores = model(users[:, None].expand(-1, d.ITEMS), items[None].expand(d.USERS, -1))
    u, i = d.preferences()[1].unbind(1)
    unliked = ~d.liked_matrix()[u]
    beaten = (scores[u] >= scores[u, i][:, None]) & unliked
    return (beaten.sum(1) / unliked.sum(1)).mean().item()


@torch.no_grad()
def hamming_error(model) -> float:
    x, y = d.multilabel(1000, 3)
    return _mismatch((model(x) > 0).float(), y)


@torch.no_grad()
def price_error(model) -> float:
    """Mean squared error in raw units over the target's variance."""
    x, y = d.prices(1000, 3)
    return ((model.predict(x) - y) ** 2).mean().item() / y.var().item()


@torch.no_grad()
def sequence_error(model) -> float:
    x, lengths, y = d.sequences(600, 3)
    return _mismatch(model(x, lengths).argmax(-1), y)


@torch.no_grad()
def online_pulse_error(model) -> float:
    """Each step's prediction from the stream up to that step (what an online detector has)."""
    x, y = d.pulse_stream(200, 3)
    online = torch.stack([model(x[..., : t + 1])[:, -1] for t in range(d.STREAM_LEN)], dim=1)
    return _mismatch((online > 0).float(), y)


@torch.no_grad()
def point_error(model) -> float:
    points, mask, y = d.point_sets(600, 3)
    return _mismatch(model(points, mask).argmax(-1), y)


@torch.no_grad()
def shop_error(model) -> float:
    """New rows, their shop encoded with the training rows' targets."""
    (shop, _, y), (new_shop, nums, new_y) = d.shop_rows(2000, 1), d.shop_rows(1000, 3)
    return _mismatch((model(d.target_encode(shop, y, new_shop), nums) > 0).float(), new_y)


def reported(predict: Callable[[Any, tuple], tuple[torch.Tensor, torch.Tensor]]):
    """The error the user's validation reports: ``predict(model, batch)`` -> (predicted, target) over the
    validation loader."""

    @torch.no_grad()
    def error(model, loaders: dict[str, Any]) -> float:
        pairs = [predict(model, batch) for batch in loaders["val_dataloaders"]]
        return _mismatch(
            torch.cat([p.flatten() for p, _ in pairs]), torch.cat([t.flatten() for _, t in pairs])
        )

    return error


val_class_error = reported(lambda model, batch: (model(batch[0]).argmax(-1), batch[-1]))
val_pulse_error = reported(lambda model, batch: ((model(batch[0]) > 0).float(), batch[1]))
val_shop_error = reported(lambda model, batch: ((model(batch[0], batch[1]) > 0).float(), batch[2]))


IMBALANCED = (
    lambda: m.DigitNet(class_weights=m.class_weights(d.imbalanced(*d.digits("train"))[1])),
    c.imbalanced_data,
)
LM = (m.ChainLM, c.lm_data)
RECOMMENDER = (m.MatrixFactorisation, c.recommendation_data)

PROOFS = {
    "sampler_weights_per_class_not_per_sample": Proof(
        (m.DigitNet, lambda: c.imbalanced_data(per_sample_weights=True)), balanced_digit_error, 0.2, 6
    ),
    "digits_sorted_by_class_never_shuffled": Proof(
        (m.DigitNet, lambda: c.sorted_digit_data(shuffle=True)), digit_error, 0.1, 6
    ),
    "digits_cross_entropy_on_probabilities": Proof(
        (lambda: m.DigitNet(sgd=True), c.digit_data), digit_error, 0.03, 6
    ),
    "class_weights_proportional_not_inverse": Proof(IMBALANCED, balanced_digit_error, 0.05, 6),
    "augmented_copies_split_after_copying": Proof(
        (m.DigitNet, lambda: c.copied_digit_data(split_first=True)),
        new_digit_error,
        0.03,
        8,
        lie=val_class_error,
        worse=False,
    ),
    "ema_update_rebinds_loop_variable": Proof((m.EmaDigitNet, c.digit_data), digit_error, 0.3, 4),
    "plateau_scheduler_mode_max_on_loss": Proof((m.PlateauDigitNet, c.digit_data), digit_error, 0.03, 8),
    "manual_accumulation_zero_grad_every_batch": Proof(
        (lambda: m.AccumulatingDigitNet(sgd=True), c.digit_data), digit_error, 0.05, 6
    ),
    "probe_checkpoint_loaded_with_strict_false": Proof((m.ProbeDigitNet, c.digit_data), digit_error, 0.05, 6),
    "curriculum_sampler_stage_never_advances": Proof((m.DigitNet, c.curriculum_data), digit_error, 0.03, 6),
    "tagging_attention_mask_inverted": Proof((m.EntityTagger, c.tagging_data), tagging_error, 0.08, 5),
    "causal_lm_without_future_mask": Proof(
        LM,
        next_token_error,
        0.1,
        6,
        lie=reported(lambda model, batch: (model(batch[0]).argmax(-1), batch[1])),
    ),
    "causal_lm_labels_shifted_twice": Proof(LM, next_token_error, 0.3, 6),
    "bpr_margin_reversed": Proof(RECOMMENDER, ranking_error, 0.3, 10),
    "users_and_items_share_one_table": Proof(RECOMMENDER, ranking_error, 0.05, 10),
    "multilabel_softmax_cross_entropy": Proof((m.TagMLP, c.multilabel_data), hamming_error, 0.1, 6),
    "regression_relu_on_standardised_target": Proof((m.PriceRegressor, c.price_data), price_error, 0.2, 8),
    "regression_target_scaled_per_batch": Proof(
        (lambda: m.PriceRegressor("minmax"), c.price_data), price_error, 0.1, 8
    ),
    "sequence_classifier_reads_padded_last_step": Proof(
        (m.SequenceClassifier, c.sequence_data), sequence_error, 0.2, 4
    ),
    "online_detector_conv_sees_future": Proof(
        (m.PulseDetector, c.pulse_data), online_pulse_error, 0.02, 8, lie=val_pulse_error
    ),
    "point_sets_centred_on_batch_centroid": Proof((m.DeepSets, c.point_data), point_error, 0.1, 6),
    "target_encoding_includes_own_row": Proof(
        (m.ShopNet, lambda: c.shop_data(out_of_fold=True)),
        shop_error,
        0.05,
        6,
        lie=val_shop_error,
        worse=False,
    ),
}


def test_every_bug_has_a_proof() -> None:
    sealed.check_gallery(c, PROOFS, bugs=20, healthy=10)


@pytest.mark.parametrize("case_id", list(PROOFS))
def test_bug_is_real(case_id: str) -> None:
    sealed.check_bug_is_real(BUGS[case_id], PROOFS[case_id])


@pytest.mark.parametrize("case", c.HEALTHY, ids=lambda case: case.id)
def test_healthy_case_fits(case) -> None:
    sealed.check_healthy_case_fits(case, epochs=3)
