"""Proofs for sealed gallery D, with plain torch and Lightning (no ``lightning_recipes``): every bug costs
more than a stated minimum and than 3x the seed noise of its healthy twin on the same clean held-out data (or,
for a validation lie, its validation figure overstates the held-out one by more than the twin's does); every
healthy case fits: its training and validation losses fall."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import pytest
import torch

from galleries import sealed
from galleries.preflight.sealed import _d_data as d
from galleries.preflight.sealed import _d_models as m
from galleries.preflight.sealed import d as gallery
from galleries.sealed import Proof

BUGS = {case.id: case for case in gallery.BUGS}


# --- task metrics on clean held-out data: errors, lower is better -------------------------------------------
def _relative_mse(predicted: torch.Tensor, target: torch.Tensor) -> float:
    """Mean squared error over the target's variance, per output, averaged over outputs."""
    return (((predicted - target) ** 2).mean(0) / target.var(0)).mean().item()


def _mismatch(predicted: torch.Tensor, target: torch.Tensor) -> float:
    return (predicted != target).float().mean().item()


def regression_error(make: Callable[[int, int], tuple[torch.Tensor, torch.Tensor]]):
    """The relative MSE of ``model.predict`` on ``make(500, 3)``, in one batch."""

    @torch.no_grad()
    def error(model) -> float:
        x, y = make(500, 3)
        return _relative_mse(model.predict(x), y)

    return error


@torch.no_grad()
def val_count_error(model, loaders: dict[str, Any]) -> float:
    """The figure validation reports: the relative MSE over the validation loader."""
    pairs = [(model.predict(x), y) for x, y in loaders["val_dataloaders"]]
    return _relative_mse(torch.cat([p for p, _ in pairs]), torch.cat([y for _, y in pairs]))


@torch.no_grad()
def ordinal_error(model) -> float:
    """Mean absolute error in levels."""
    x, y = d.ordinal_rows(1000, 3)
    return (model.predict(x) - y).abs().float().mean().item()


@torch.no_grad()
def survival_error(model) -> float:
    """Mean absolute error of the predicted log time against the true (never censored) log event time."""
    x, _, _, log_t = d.survival(1000, 3)
    return (model.predict(x) - log_t).abs().mean().item()


@torch.no_grad()
def reconstruction_error(model) -> float:
    x = d.digits("test")[0]
    return ((model.reconstruct(x) - x) ** 2).mean().item()


@torch.no_grad()
def forecast_error(model) -> float:
    """Windows scaled by their lookback alone (all a served forecaster has): MSE in scaled units."""
    lookback, future = d.scale_windows(d.series(500, 3))
    return ((model(lookback) - future) ** 2).mean().item()


@torch.no_grad()
def text_error(model) -> float:
    """Test reviews padded the way the model's pipeline pads them."""
    docs, labels = d.documents(600, 3, pad=model.embed.padding_idx)
    return _mismatch(model(docs).argmax(-1), labels)


@torch.no_grad()
def digit_error(model) -> float:
    x, y = d.digits("test")
    return _mismatch(model(x).argmax(-1), y)


@torch.no_grad()
def coarse_error(model) -> float:
    """The coarse head's error (digit >= 5)."""
    x, y = d.digits("test")
    return _mismatch(model(x)[1].argmax(-1), (y >= 5).long())


@torch.no_grad()
def verification_error(model) -> float:
    """Test digit pairs called the same when their distance is below 0.5."""
    a, b, same = d.digit_pairs("test", 1000, 3)
    return _mismatch((model(a, b) < 0.5).float(), same)


COUNTING = (m.DotCounter, gallery.counting)
SEQUENCE = (m.SequenceRegressor, gallery.sequence_data)
ORDINAL = (m.OrdinalNet, gallery.ordinal_data)
SURVIVAL = (m.SurvivalNet, gallery.survival_data)
THREE_SCALES = (m.ThreeScaleRegressor, gallery.three_scale_data)
MOE = (m.MixtureOfExperts, gallery.regime_data)
VAE = (m.DigitVAE, gallery.vae_data)
count_error, sequence_error = regression_error(d.dots), regression_error(d.level_sequences)
three_scale_error, regime_error = regression_error(d.three_scales), regression_error(d.regimes)

PROOFS = {
    "counting_crop_augmentation_keeps_count": Proof(COUNTING, count_error, 0.05, 6),
    "counting_global_max_pool": Proof(COUNTING, count_error, 0.3, 6),
    "counting_val_images_from_train_seed": Proof(
        (m.DotCounterMLP, gallery.small_counting_data),
        count_error,
        0.05,
        30,
        lie=val_count_error,
        worse=False,
    ),
    "gru_regressor_reads_first_step": Proof(SEQUENCE, sequence_error, 0.1, 5),
    "gru_one_cycle_stepped_per_epoch": Proof(
        (m.OneCycleSequenceRegressor, gallery.sequence_data), sequence_error, 0.04, 5
    ),
    "gru_each_sequence_standardised": Proof(SEQUENCE, sequence_error, 0.1, 5),
    "ordinal_cumulative_targets_from_zero": Proof(ORDINAL, ordinal_error, 0.3, 6),
    "ordinal_sampler_epoch_is_one_batch": Proof(
        (m.OrdinalNet, partial(gallery.ordinal_data, num_samples=1000)), ordinal_error, 0.1, 20
    ),
    "survival_censored_rows_fitted_as_events": Proof(SURVIVAL, survival_error, 0.1, 6),
    "survival_event_flag_means_censored": Proof(SURVIVAL, survival_error, 0.2, 6),
    "multi_output_unscaled_in_reverse_order": Proof(THREE_SCALES, three_scale_error, 1.0, 6),
    "multi_output_loss_in_raw_units": Proof(THREE_SCALES, three_scale_error, 0.1, 6),
    "moe_gate_softmax_over_batch": Proof(MOE, regime_error, 0.2, 8),
    "moe_experts_are_one_module": Proof(MOE, regime_error, 0.1, 8),
    "moe_gate_optimizer_never_stepped": Proof(
        (m.TwoOptimizerMixture, gallery.regime_data), regime_error, 0.1, 8
    ),
    "vae_recon_averaged_kl_summed_over_batch": Proof(VAE, reconstruction_error, 0.01, 8),
    "vae_decoder_left_out_of_optimizer": Proof(VAE, reconstruction_error, 0.01, 8),
    "forecast_window_scaled_with_its_future": Proof(
        (m.Forecaster, gallery.forecast_data), forecast_error, 0.05, 6
    ),
    "distillation_student_frozen_not_teacher": Proof(
        (m.DistilledStudent, gallery.digit_data), digit_error, 0.3, 4
    ),
    "text_padding_id_is_a_word_id": Proof((m.BagOfWords, gallery.text_data), text_error, 0.05, 8),
    "pseudo_label_unlabelled_filled_with_zero": Proof(
        (m.PseudoLabelNet, gallery.semi_supervised_data), digit_error, 0.2, 8
    ),
    "siamese_pair_flag_means_different": Proof(
        (m.SiameseNet, gallery.pairs_data), verification_error, 0.2, 5
    ),
    "hierarchical_coarse_loss_on_fine_logits": Proof(
        (m.HierarchicalNet, gallery.digit_data), coarse_error, 0.2, 4
    ),
}


def test_every_bug_has_a_proof() -> None:
    sealed.check_gallery(gallery, PROOFS, bugs=20, healthy=12)


@pytest.mark.parametrize("case_id", list(PROOFS))
def test_bug_is_real(case_id: str) -> None:
    sealed.check_bug_is_real(BUGS[case_id], PROOFS[case_id])


@pytest.mark.parametrize("case", gallery.HEALTHY, ids=lambda case: case.id)
def test_healthy_case_fits(case) -> None:
    sealed.check_healthy_case_fits(case, epochs=3)
