"""Proofs of sealed gallery A with plain torch and Lightning (no ``lightning_recipes`` code).

For every bug: the buggy model and its healthy twin (the same model and data with the bug fixed) are trained
with a real ``Trainer`` on the same seed and scored on the same clean held-out data with a task metric
(higher is better). The bug is real when the twin's lead exceeds a stated minimum and three times the seed
noise (the twin trained with a second seed). For a validation lie, the figure the buggy model's validation
reports also overstates its held-out figure. For every healthy look-alike: a short fit runs and its training
loss falls.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import lightning.pytorch as pl
import pytest
import torch
import torch.nn.functional as F

from galleries.preflight.sealed import _a_data as data
from galleries.preflight.sealed import _a_models as models
from galleries.preflight.sealed.a import BUGS, HEALTHY
from galleries.sealed import TrainLosses


# ----------------------------------------------------------------------------------------------- task metrics
@torch.no_grad()
def pair_retrieval(model: models.SimCLR) -> float:
    """Share of held-out digits whose first view's nearest of 32 second views (cosine) is its own."""
    first, second = data.heldout_view_pairs()
    a, b = F.normalize(model(first), dim=1), F.normalize(model(second), dim=1)
    hits = [(a[s : s + 32] @ b[s : s + 32].T).argmax(dim=1).eq(torch.arange(32)) for s in range(0, 384, 32)]
    return torch.cat(hits).float().mean().item()


@torch.no_grad()
def nearest_neighbour_accuracy(model: models.TripletNet) -> float:
    """1-NN class accuracy of held-out digits against the training digits, in the embedding."""
    train_x, train_y = data.digits("train")
    test_x, test_y = data.digits("test")
    nearest = torch.cdist(model(test_x), model(train_x)).argmin(dim=1)
    return train_y[nearest].eq(test_y).float().mean().item()


@torch.no_grad()
def verification_accuracy(model: models.SiameseVerifier) -> float:
    first, second, same = data.heldout_pairs()
    return (model(first, second) > 0).float().eq(same).float().mean().item()


@torch.no_grad()
def negative_denoising_mse(model: models.Denoiser) -> float:
    noisy, clean = data.heldout_noisy_digits()
    return -F.mse_loss(model(noisy), clean).item()


@torch.no_grad()
def negative_reconstruction_mse(model: models.AutoEncoder) -> float:
    x, _ = data.digits("test")
    return -F.mse_loss(model(x), x).item()


@torch.no_grad()
def elbo(model: models.VAE) -> float:
    """The held-out ELBO per digit (nats), averaged over 5 fixed posterior samples."""
    x, _ = data.digits("test")
    generator = torch.Generator().manual_seed(5)
    return -sum(sum(model.terms(x, generator)).item() for _ in range(5)) / 5


@torch.no_grad()
def negative_ink_mse(model: models.MultiTask) -> float:
    x, _ = data.digits("test")
    _, predicted = model(x)
    return -F.mse_loss(predicted.reshape(-1), data.ink(x)).item()


@torch.no_grad()
def student_accuracy(model: models.Distiller) -> float:
    x, y = data.digits("test")
    return model(x).argmax(dim=1).eq(y).float().mean().item()


@torch.no_grad()
def greedy_token_accuracy(model: models.Seq2Seq) -> float:
    source, lengths, target = data.heldout_sequences()
    mask = target != data.PAD
    return (model.generate(source, lengths) == target)[mask].float().mean().item()


@torch.no_grad()
def recall_at_10(model: models.TwoTower) -> float:
    sessions = data.heldout_sessions()
    top = model.scores(sessions["history"]).topk(10, dim=1).indices
    return (top == sessions["item"][:, None]).any(dim=1).float().mean().item()


# ----------------------------------------------------------------------------------------------- training
def fit(build: Callable[[], pl.LightningModule], loaders: dict[str, Any], epochs: int, seed: int):
    """Train ``build()`` on ``loaders`` (preflight keyword arguments) for ``epochs``; the model (in eval
    mode), its training losses and the metrics its last validation logged."""
    pl.seed_everything(seed, verbose=False)
    model = build()
    losses = TrainLosses()
    trainer = pl.Trainer(
        max_epochs=epochs,
        accelerator="cpu",
        devices=1,
        enable_progress_bar=False,
        logger=False,
        enable_checkpointing=False,
        enable_model_summary=False,
        callbacks=[losses],
        num_sanity_val_steps=0,
    )
    trainer.fit(
        model, train_dataloaders=loaders["train_dataloaders"], val_dataloaders=loaders["val_dataloaders"]
    )
    reported = {name: float(value) for name, value in trainer.callback_metrics.items()}
    return model.eval(), losses.losses, reported


@dataclass(frozen=True)
class Proof:
    """How a bug is proved: its twin, the training length, the held-out metric (higher is better), the least
    lead the twin must have over the bug, and (for a validation lie) the metric its validation logs.

    With ``lie_only`` the bug trains as its twin does and only its validation figure is wrong: the proof
    compares how far each one's validation overstates its held-out score (a logged loss counts negated).
    """

    twin_model: Callable[[], pl.LightningModule]
    twin_data: Callable[[], dict[str, Any]]
    epochs: int
    score: Callable[[Any], float]
    min_gap: float
    reported: str | None = None
    reported_is_loss: bool = False
    lie_only: bool = False

    def claimed(self, reported: dict[str, float]) -> float:
        assert self.reported is not None
        return -reported[self.reported] if self.reported_is_loss else reported[self.reported]


PROOFS: dict[str, Proof] = {
    "contrastive_views_seeded_by_index": Proof(models.SimCLR, data.contrastive_data, 8, pair_retrieval, 0.05),
    "triplet_negative_served_as_positive": Proof(
        models.TripletNet, data.triplet_data, 3, nearest_neighbour_accuracy, 0.2
    ),
    "siamese_gradients_never_zeroed": Proof(
        models.SiameseVerifier, data.pair_data, 8, verification_accuracy, 0.05
    ),
    "denoising_noise_added_in_place": Proof(
        models.Denoiser, data.denoising_data, 5, negative_denoising_mse, 0.02
    ),
    "denoising_validated_without_noise": Proof(
        models.Denoiser,
        data.denoising_data,
        5,
        negative_denoising_mse,
        0.005,
        reported="val_loss",
        reported_is_loss=True,
        lie_only=True,
    ),
    "autoencoder_epoch_decay_stepped_per_batch": Proof(
        models.AutoEncoder, data.image_data, 10, negative_reconstruction_mse, 0.005
    ),
    "vae_kl_weight_never_warms_up": Proof(models.VAE, data.image_data, 8, elbo, 5.0),
    "multitask_regression_target_broadcast": Proof(
        models.MultiTask, data.multitask_data, 6, negative_ink_mse, 0.3
    ),
    "distillation_teacher_left_trainable": Proof(
        models.Distiller, data.labelled_digit_data, 6, student_accuracy, 0.05
    ),
    "seq2seq_decoder_input_not_shifted": Proof(
        models.Seq2Seq, data.seq2seq_data, 3, greedy_token_accuracy, 0.2, reported="val_token_acc"
    ),
    "seq2seq_encoder_state_dropped": Proof(models.Seq2Seq, data.seq2seq_data, 3, greedy_token_accuracy, 0.2),
    "two_tower_history_contains_target": Proof(
        models.TwoTower, data.two_tower_data, 4, recall_at_10, 0.05, reported="val_recall_at_10"
    ),
    "two_tower_item_tower_under_no_grad": Proof(models.TwoTower, data.two_tower_data, 4, recall_at_10, 0.05),
}

_twin_runs: dict[tuple, tuple[float, dict[str, float]]] = {}


def twin_run(proof: Proof, seed: int) -> tuple[float, dict[str, float]]:
    """The twin's held-out score and logged validation metrics with ``seed`` (computed once per twin, seed and
    length: bugs may share a twin)."""
    key = (proof.twin_model, proof.twin_data, proof.epochs, proof.score, seed)
    if key not in _twin_runs:
        twin, _, reported = fit(proof.twin_model, proof.twin_data(), proof.epochs, seed=seed)
        _twin_runs[key] = proof.score(twin), reported
    return _twin_runs[key]


def test_every_bug_has_a_proof() -> None:
    assert {case.id for case in BUGS} == set(PROOFS)
    assert len({case.task for case in BUGS}) >= 6 and len(BUGS) >= 11 and len(HEALTHY) >= 5


@pytest.mark.parametrize("case", BUGS, ids=lambda case: case.id)
def test_bug_is_real(case) -> None:
    proof = PROOFS[case.id]
    buggy, buggy_losses, reported = fit(case.model, case.data(), proof.epochs, seed=0)
    bug_score = proof.score(buggy)
    (twin_score, twin_reported), (again_score, again_reported) = twin_run(proof, 0), twin_run(proof, 1)
    head, tail = sum(buggy_losses[:5]) / 5, sum(buggy_losses[-5:]) / 5
    assert tail < head, f"the bug's training loss should fall: {head:.4f} -> {tail:.4f}"
    if proof.lie_only:
        overstated = proof.claimed(reported) - bug_score
        twin_overstated = proof.claimed(twin_reported) - twin_score
        gap = overstated - twin_overstated
        noise = abs(twin_overstated - (proof.claimed(again_reported) - again_score))
        what = f"validation overstates by {overstated:.4f}, the twin's by {twin_overstated:.4f}"
    else:
        gap, noise = twin_score - bug_score, abs(twin_score - again_score)
        what = f"twin {twin_score:.4f} (seed 1: {again_score:.4f}), bug {bug_score:.4f}"
    print(f"{case.id}: {what}; gap {gap:.4f}, seed noise {noise:.4f}")
    assert gap > proof.min_gap, f"{what}: gap {gap:.4f} <= {proof.min_gap}"
    assert gap > 3 * noise, f"{what}: gap {gap:.4f} <= 3 x seed noise {noise:.4f}"
    if proof.reported is not None and not proof.lie_only:
        claimed = proof.claimed(reported)
        print(f"{case.id}: validation reports {claimed:.4f}, held out {bug_score:.4f}")
        assert claimed > bug_score + proof.min_gap, f"validation {claimed:.4f} vs held out {bug_score:.4f}"


@pytest.mark.parametrize("case", HEALTHY, ids=lambda case: case.id)
def test_healthy_trains(case) -> None:
    _, losses, _ = fit(case.model, case.data(), epochs=2, seed=0)
    head, tail = sum(losses[:5]) / 5, sum(losses[-5:]) / 5
    print(f"{case.id}: loss {head:.4f} -> {tail:.4f}")
    assert all(torch.isfinite(torch.tensor(losses))) and tail < head
