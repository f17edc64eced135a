"""Proofs for sealed gallery L, with plain torch and Lightning (no ``lightning_recipes``): every bug costs
more than a stated minimum and than 3x the seed noise of its healthy twin on the same clean held-out data;
every healthy case fits: its training and validation losses fall."""

from __future__ import annotations

import pytest
import torch

from galleries import sealed
from galleries.preflight.sealed import _l_data as d
from galleries.preflight.sealed import _l_models as m
from galleries.preflight.sealed import l as gallery
from galleries.sealed import Proof

BUGS = {case.id: case for case in gallery.BUGS}


# --- task metrics on clean held-out data: errors, lower is better -------------------------------------------
@torch.no_grad()
def click_log_loss(model) -> float:
    """The log loss of the served click probability against the true one, on held-out impressions as they
    arrive (no downsampling)."""
    codes, _ = d.impressions(20000, 3)
    p, q = torch.sigmoid(d.click_logit(codes)), model.predict(codes).clamp(1e-6, 1 - 1e-6)
    return -(p * q.log() + (1 - p) * (1 - q).log()).mean().item()


@torch.no_grad()
def uplift_error(model) -> float:
    """The root mean squared error of the served uplift against the true effect (PEHE) on held-out rows."""
    x, *_ = d.observational(4000, 3)
    return ((model.predict(x) - d.true_uplift(x)) ** 2).mean().sqrt().item()


@torch.no_grad()
def track_error(model) -> float:
    """The average displacement error (metres) of the served future positions on held-out tracks."""
    history, future = d.tracks(2000, 3)
    return (model.predict(history) - future).norm(dim=-1).mean().item()


@torch.no_grad()
def track_validation_error(model, loaders) -> float:
    """What validation reports: the average displacement error on the validation loader, in the frame the
    model was trained in."""
    errors = [
        (pred - true).norm(dim=-1).flatten()
        for pred, true in map(model.positions, loaders["val_dataloaders"])
    ]
    return torch.cat(errors).mean().item()


@torch.no_grad()
def pu_error(model) -> float:
    """The error rate of the served class on held-out rows whose true class is known."""
    x, positive, _ = d.pu_rows(4000, 3)
    return (model.predict(x) != positive).float().mean().item()


@torch.no_grad()
def noise_error(model) -> float:
    """The MSE of the served noise estimate on held-out points noised by the true forward process, at every
    step of the schedule (fixed steps and noise)."""
    (x0,) = d.ring(4000, 3)
    t = torch.arange(len(x0)) % d.STEPS_T
    noise = torch.randn(x0.shape, generator=sealed.gen(4))
    level = d.noise_schedule()[1][t][:, None]
    x_t = level.sqrt() * x0 + (1 - level).sqrt() * noise
    return ((model.predict_noise(x_t, t) - noise) ** 2).mean().item()


@torch.no_grad()
def rollout_error(model) -> float:
    """The mean distance between the served 20-step rollout and the true trajectory, from held-out starts."""
    states = d.pendulum(500, 3, steps=20)
    return (model.rollout(states[:, 0], 20) - states).norm(dim=-1).mean().item()


@torch.no_grad()
def graph_error(model) -> float:
    """The error rate on held-out graphs."""
    *graphs, label = d.molecules(2000, 3)
    return (model.predict(*graphs) != label).float().mean().item()


@torch.no_grad()
def dna_error(model) -> float:
    """The error rate on held-out sequences."""
    one_hot, binds = d.sequences(2000, 3)
    return (model.predict(one_hot) != binds).float().mean().item()


CLICK, UPLIFT = (m.ClickFM, gallery.click_data), (m.UpliftNet, gallery.uplift_data)
TRACKS, RING = (m.TrackForecaster, gallery.track_data), (m.Denoiser, gallery.ring_data)
PENDULUM = (m.PendulumStep, gallery.pendulum_data)

PROOFS = {
    "ctr_field_codes_share_rows": Proof(CLICK, click_log_loss, 0.005, 4),
    "ctr_downsampling_not_undone": Proof(CLICK, click_log_loss, 0.05, 4),
    "uplift_factual_loss_broadcasts": Proof(UPLIFT, uplift_error, 0.3, 10),
    "uplift_heads_unpacked_reversed": Proof(UPLIFT, uplift_error, 0.5, 10),
    "tracks_rotated_history_only": Proof(TRACKS, track_error, 1.0, 6),
    "tracks_served_without_running_sum": Proof(TRACKS, track_error, 1.0, 6),
    "tracks_centred_on_whole_window": Proof(TRACKS, track_error, 0.3, 6, lie=track_validation_error),
    "pu_prior_from_labelled_share": Proof((m.PUClassifier, gallery.pu_data), pu_error, 0.05, 8),
    "pu_warm_up_never_stepped": Proof((m.PUClassifierAscent, gallery.pu_data), pu_error, 0.03, 8),
    "diffusion_per_step_alpha": Proof(RING, noise_error, 0.1, 10),
    "diffusion_clean_point_target": Proof(RING, noise_error, 0.3, 10),
    "pendulum_pairs_rolled_around": Proof(PENDULUM, rollout_error, 0.05, 6),
    "pendulum_rollout_wrong_normaliser": Proof(PENDULUM, rollout_error, 0.3, 6),
    "graph_messages_without_self_loop": Proof((m.GraphClassifier, gallery.graph_data), graph_error, 0.05, 8),
    "dna_reversed_not_complemented": Proof((m.MotifCNN, gallery.dna_data), dna_error, 0.1, 6),
}


def test_every_bug_has_a_proof() -> None:
    sealed.check_gallery(gallery, PROOFS, bugs=15, healthy=10)


@pytest.mark.parametrize("case_id", list(PROOFS))
def test_bug_is_real(case_id: str) -> None:
    sealed.check_bug_is_real(BUGS[case_id], PROOFS[case_id])


@pytest.mark.parametrize("case", gallery.HEALTHY, ids=lambda case: case.id)
def test_healthy_case_fits(case) -> None:
    sealed.check_healthy_case_fits(case, epochs=4)
