"""Proofs for sealed gallery G, with plain torch and Lightning (no ``lightning_recipes``): every bug costs
more than a stated minimum and than 3x the seed noise of its healthy twin on the same clean held-out data (or,
for a validation lie, its validation figure overstates the held-out one by more than the twin's does); every
healthy case fits: its training and validation losses fall."""

from __future__ import annotations

from functools import partial
from typing import Any

import pytest
import torch
import torch.nn.functional as F

from galleries import sealed
from galleries.preflight.sealed import _g_data as d
from galleries.preflight.sealed import _g_models as m
from galleries.preflight.sealed import g as gallery
from galleries.sealed import Proof

BUGS = {case.id: case for case in gallery.BUGS}


# --- task metrics on clean held-out data: errors, lower is better -------------------------------------------
def _relative_mse(predicted: torch.Tensor, target: torch.Tensor) -> float:
    return (((predicted - target) ** 2).mean() / target.var()).item()


def _error_rate(predicted: torch.Tensor, target: torch.Tensor) -> float:
    return (predicted.argmax(-1) != target).float().mean().item()


@torch.no_grad()
def span_error(model) -> float:
    """1 - the exact-match rate of the served (inclusive) spans."""
    tokens, start, end = d.spans(1000, 3)
    s, e = model.predict(tokens)
    return 1 - ((s == start) & (e == end)).float().mean().item()


@torch.no_grad()
def topic_error(model) -> float:
    """The share of words whose nearest other word (cosine) is from another topic."""
    words = F.normalize(model.words.weight, dim=-1)
    similarity = (words @ words.T).fill_diagonal_(-2)
    topic = torch.arange(d.WORDS) // (d.WORDS // d.TOPICS)
    return (topic[similarity.argmax(-1)] != topic).float().mean().item()


@torch.no_grad()
def rating_error(model) -> float:
    user, item, rating = d.ratings("test")
    return _relative_mse(model(user, item), rating)


@torch.no_grad()
def _val_figure(predict, loaders: dict[str, Any]) -> float:
    """The relative MSE of ``predict(*batch)`` against each validation batch's last tensor."""
    rows = [(predict(*batch), batch[-1]) for batch in loaders["val_dataloaders"]]
    return _relative_mse(torch.cat([p for p, _ in rows]), torch.cat([y for _, y in rows]))


def rating_val_figure(model, loaders: dict[str, Any]) -> float:
    return _val_figure(lambda user, item, _: model(user, item), loaders)


def _episode_error(model, episodes) -> float:
    wrong = [(model(s, q).argmax(-1) != label).float() for s, q, label in episodes]
    return torch.cat([w.flatten() for w in wrong]).mean().item()


@torch.no_grad()
def episode_error(model) -> float:
    """The error on 200 clean episodes of the held-out validation images (the images validation uses, so
    that only the episodes' construction differs)."""
    episodes = d.Episodes("val", 200, seed=1000)
    return _episode_error(model, torch.utils.data.DataLoader(episodes, batch_size=50))


@torch.no_grad()
def episode_val_figure(model, loaders: dict[str, Any]) -> float:
    return _episode_error(model, loaders["val_dataloaders"])


@torch.no_grad()
def pinn_error(model) -> float:
    """The squared error against the exact solution exp(-1.5 x), relative to its mean square."""
    x = torch.linspace(0, 2, 201)[:, None]
    exact = torch.exp(-d.DECAY * x)
    return (((model(x) - exact) ** 2).mean() / (exact**2).mean()).item()


@torch.no_grad()
def policy_error(model) -> float:
    """The share of states where the greedy action is not the optimal one (right)."""
    return (model(torch.arange(d.STATES)).argmax(-1) != 1).float().mean().item()


def attacked_error(model) -> float:
    """The error rate on held-out digits under an FGSM attack of eps 0.15 with the model's own gradient."""
    x, y = sealed.digits("test")
    with torch.enable_grad():
        x = x.clone().requires_grad_()
        (grad,) = torch.autograd.grad(F.cross_entropy(model(x), y), x)
    with torch.no_grad():
        return _error_rate(model((x + 0.15 * grad.sign()).clamp(0, 1)), y)


@torch.no_grad()
def set_error(model) -> float:
    image, points = d.point_sets(1000, 3)
    return m.matched_error(model(image), points).mean().item()


@torch.no_grad()
def depth_error(model) -> float:
    image, depth = d.depth_scenes(500, 3)
    return _relative_mse(model.predict(image), depth)


@torch.no_grad()
def spectrogram_error(model) -> float:
    return _error_rate(*_served(model, *d.spectrograms(1000, 3)))


@torch.no_grad()
def activity_error(model) -> float:
    return _error_rate(*_served(model, *d.sensor_windows(16000, 3)))


def _served(model, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return model.predict(x), y


@torch.no_grad()
def tail_miss(model) -> float:
    """1 - hits@1: the share of held-out triples whose nearest entity to h + r is not the tail."""
    head, relation, tail = d.triples("test")
    return (model(head, relation).argmin(-1) != tail).float().mean().item()


@torch.no_grad()
def digit_nll(model) -> float:
    """The negative log-likelihood of the served probabilities on held-out digits."""
    x, y = sealed.digits("test")
    return F.nll_loss(model.predict(x).clamp_min(1e-8).log(), y).item()


@torch.no_grad()
def cascade_error(model) -> float:
    x, _, y = d.cascade_rows(1000, 3)
    return _relative_mse(model.predict(x), y)


def cascade_val_figure(model, loaders: dict[str, Any]) -> float:
    """What validation scores: stage 2 on the input the loss gives it."""
    return _val_figure(lambda x, q, _: model.reported(x, q), loaders)


@torch.no_grad()
def log_price_error(model) -> float:
    x, price = d.priced_rows(1000, 3)
    return _relative_mse(model.predict(x).log(), price.log())


SPAN, SGNS, MF = (
    (m.SpanNet, gallery.span_data),
    (m.SkipGram, gallery.skipgram_data),
    (m.RatingsMF, gallery.ratings_data),
)
PROTO, PINN, Q = (
    (m.ProtoNet, gallery.episode_data),
    (m.DecayPINN, gallery.pinn_data),
    (m.ChainQ, gallery.q_data),
)
DIGITS_FGSM, ACTIVITY = (m.FGSMNet, gallery.digit_data), (m.ActivityNet, gallery.activity_data)

PROOFS = {
    "span_shift_leaves_positions": Proof(
        (m.SpanNet, partial(gallery.span_data, shift=True)), span_error, 0.2, 4
    ),
    "span_end_exclusive_decoded_inclusive": Proof(SPAN, span_error, 0.5, 4),
    "sgns_negatives_scored_as_positives": Proof(SGNS, topic_error, 0.3, 3),
    "mf_factors_zero_initialised": Proof(MF, rating_error, 0.2, 6),
    "mf_validation_rows_also_trained": Proof(MF, rating_error, 0.05, 6, lie=rating_val_figure, worse=False),
    "proto_val_queries_drawn_from_support": Proof(
        PROTO, episode_error, 0.03, 6, lie=episode_val_figure, worse=False
    ),
    "pinn_derivative_wrt_standardised_input": Proof(PINN, pinn_error, 0.05, 6),
    "pinn_residual_averaged_before_squaring": Proof(PINN, pinn_error, 0.05, 6),
    "qlearn_target_sync_loads_nothing": Proof(Q, policy_error, 0.3, 8),
    "qlearn_done_mask_inverted": Proof(Q, policy_error, 0.3, 8),
    "fgsm_step_descends_the_loss": Proof(DIGITS_FGSM, attacked_error, 0.1, 6),
    "set_mse_without_matching": Proof((m.SetNet, gallery.set_data), set_error, 0.01, 4),
    "depth_holes_scored_as_zero_depth": Proof((m.DepthNet, gallery.depth_data), depth_error, 0.2, 4),
    "depth_ema_without_warmup": Proof((m.DepthNetEMA, gallery.depth_data), depth_error, 0.3, 4),
    "spectrogram_exported_upside_down": Proof(
        (m.SpectrogramNet, gallery.spectrogram_data), spectrogram_error, 0.2, 4
    ),
    "activity_view_instead_of_transpose": Proof(ACTIVITY, activity_error, 0.1, 4),
    "activity_labels_by_window_number": Proof(ACTIVITY, activity_error, 0.3, 4),
    "activity_train_override_ignores_mode": Proof(
        (partial(m.ActivityNet, dropout=0.5), gallery.activity_data), activity_error, 0.03, 4
    ),
    "kg_relations_left_out_of_optimizer": Proof((m.TransE, gallery.kg_data), tail_miss, 0.1, 8),
    "cascade_teacher_forced_in_validation": Proof(
        (m.Cascade, gallery.cascade_data), cascade_error, 0.2, 6, lie=cascade_val_figure, worse=False
    ),
    "price_band_column_leaks_target": Proof((m.PriceNet, gallery.price_data), log_price_error, 0.1, 6),
    "temperature_dropped_at_serving": Proof((m.TemperatureNet, gallery.digit_data), digit_nll, 0.3, 4),
}


def test_every_bug_has_a_proof() -> None:
    sealed.check_gallery(gallery, PROOFS, bugs=22, healthy=18)


@pytest.mark.parametrize("case_id", list(PROOFS))
def test_bug_is_real(case_id: str) -> None:
    sealed.check_bug_is_real(BUGS[case_id], PROOFS[case_id])


@pytest.mark.parametrize("case", gallery.HEALTHY, ids=lambda case: case.id)
def test_healthy_case_fits(case) -> None:
    sealed.check_healthy_case_fits(case, epochs=4)
