"""Proofs for sealed gallery B, with plain torch and Lightning (no ``lightning_recipes``): every bug costs
more than a stated minimum and than 3x the seed noise of its healthy twin on the same clean held-out data (or,
for a validation lie, its validation figure overstates the held-out one); every healthy case fits and its loss
falls."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import lightning.pytorch as pl
import pytest
import torch

from galleries.preflight.sealed import _b_data as d
from galleries.preflight.sealed import _b_models as m
from galleries.preflight.sealed import b
from galleries.sealed import fit, trained

BUGS = {case.id: case for case in b.BUGS}


# --- task metrics on clean held-out data: errors, lower is better -------------------------------------------
@torch.no_grad()
def mlm_error(model) -> float:
    ids = d.chain_sequences(500, 3)
    inputs, labels = d.mask_tokens(ids, torch.Generator().manual_seed(9))
    chosen = labels != -100
    return 1.0 - (model(inputs).argmax(-1)[chosen] == labels[chosen]).float().mean().item()


@torch.no_grad()
def padded_mlm_loss(model) -> float:
    """Cross-entropy on masked real tokens of held-out padded chains."""
    ids = d.padded_chain_sequences(500, 3)
    inputs, labels = d.mask_tokens(ids, torch.Generator().manual_seed(9), maskable=ids != d.PAD)
    return torch.nn.functional.cross_entropy(model(inputs).flatten(0, 1), labels.flatten()).item()


@torch.no_grad()
def tagging_error(model) -> float:
    batch = m.tagging_collate_sorted(d.tagging_sequences(400, 3))
    real = batch["tags"] != -100
    predicted = model(batch["tokens"], batch["lengths"]).argmax(-1)
    return 1.0 - (predicted[real] == batch["tags"][real]).float().mean().item()


@torch.no_grad()
def segmentation_error(model) -> float:
    """1 - the mean intersection-over-union of the two object classes."""
    images, masks = d.stripe_scenes(300, 3)
    predicted = model(images).argmax(1)
    ious = [((predicted == c) & (masks == c)).sum() / ((predicted == c) | (masks == c)).sum() for c in (1, 2)]
    return 1.0 - torch.stack(ious).mean().item()


@torch.no_grad()
def quantile_error(model) -> float:
    """The mean pinball loss over the three quantiles (inputs standardised once, with the training
    statistics)."""
    x, y = d.heteroscedastic(1000, 3)
    mean, std = b.quantile_stats()
    pred = model((x - mean) / std)
    return torch.stack([m.pinball(pred[:, k], y, q).mean() for k, q in enumerate(d.QUANTILES)]).mean().item()


@torch.no_grad()
def tabular_error(model) -> float:
    cats, nums, y = d.tabular(1000, 3)
    return ((model(cats, nums) > 0).float() != y).float().mean().item()


@torch.no_grad()
def new_customer_error(model) -> float:
    """New customers: unknown to the model (id 0)."""
    _, nums, y = d.customer_rows(100, 10, seed=3)
    return torch.nn.functional.mse_loss(model(torch.zeros(len(y), dtype=torch.long), nums), y).item()


@torch.no_grad()
def forecast_error(model) -> float:
    x, y = d.windows(d.seasonal_series(40, 96, 3))
    return torch.nn.functional.mse_loss(model(x), y).item()


@torch.no_grad()
def ordinal_error(model) -> float:
    x, y = d.ordinal(1000, 3)
    return (m.CoralOrdinal.grade(model(x)) - y).abs().float().mean().item()


@torch.no_grad()
def multilabel_error(model) -> float:
    x, y = (torch.from_numpy(a) for a in d.multilabel_numpy(1000, 3))
    return ((model(x) > 0).float() != y).float().mean().item()


@torch.no_grad()
def counting_error(model) -> float:
    images, counts = d.blobs(300, 3)
    return (model(images) - counts).abs().mean().item()


@torch.no_grad()
def reported_loss(model, loaders: dict[str, Any]) -> float:
    """The validation figure the user sees: the model's validation loss over the validation loader."""
    return torch.stack([model.loss(batch) for batch in loaders["val_dataloaders"]]).mean().item()


@dataclass(frozen=True)
class Proof:
    twin: Callable[[], pl.LightningModule]
    twin_data: Callable[[], dict[str, Any]]
    error: Callable[[pl.LightningModule], float]
    min_gap: float
    epochs: int
    lie: bool = False  # prove the validation figure overstates the held-out one
    worse: bool = (
        True  # prove the model is worse than its twin (not for a split bug: same model, honest figure)
    )


PROOFS = {
    "mlm_labels_read_after_masking": Proof(m.MaskedLM, b.mlm_data, mlm_error, 0.3, 4),
    "mlm_padding_masked_and_scored": Proof(
        m.MaskedLM,
        lambda: b.mlm_data(m.mlm_collate_real_tokens, d.padded_chain_sequences),
        padded_mlm_loss,
        0.1,
        4,
        lie=True,
        worse=False,
    ),
    "tagging_gru_not_batch_first": Proof(m.GRUTagger, b.tagging_data, tagging_error, 0.05, 5),
    "tagging_collate_sorts_tokens_not_tags": Proof(
        m.SortedPackedGRUTagger, lambda: b.tagging_data(m.tagging_collate_sorted), tagging_error, 0.1, 5
    ),
    "segmentation_flips_image_not_mask": Proof(m.SegNet, b.segmentation_data, segmentation_error, 0.1, 6),
    "segmentation_encoder_detached": Proof(m.SegNet, b.segmentation_data, segmentation_error, 0.05, 6),
    "quantile_heads_broadcast_over_batch": Proof(m.QuantileMLP, b.quantile_data, quantile_error, 0.1, 6),
    "quantile_standardise_in_place": Proof(m.QuantileMLP, b.quantile_data, quantile_error, 0.1, 6),
    "tabular_zip_drops_a_column": Proof(m.TabularNet, b.tabular_data, tabular_error, 0.05, 6),
    "tabular_rows_split_across_customers": Proof(
        m.CustomerSpend,
        lambda: b.customer_data(split_by_customer=True),
        new_customer_error,
        2.0,
        10,
        lie=True,
        worse=False,
    ),
    "forecast_target_is_last_input": Proof(m.Forecaster, b.forecast_data, forecast_error, 0.1, 8, lie=True),
    "ordinal_thresholds_never_stepped": Proof(m.CoralOrdinal, b.ordinal_data, ordinal_error, 0.2, 10),
    "multilabel_features_and_labels_shuffled_separately": Proof(
        m.MultiLabelMLP, b.multilabel_data, multilabel_error, 0.1, 10
    ),
    "multilabel_functional_dropout_in_eval": Proof(
        m.MultiLabelDropoutMLP, b.multilabel_data, multilabel_error, 0.01, 10
    ),
    "counting_warmup_never_stepped": Proof(m.BlobCounter, b.counting_data, counting_error, 0.3, 10),
}


def test_every_bug_has_a_proof() -> None:
    assert set(PROOFS) == set(BUGS)


@pytest.mark.parametrize("case_id", list(PROOFS))
def test_bug_is_real(case_id: str) -> None:
    case, proof = BUGS[case_id], PROOFS[case_id]
    twins = [trained(proof.twin, proof.twin_data, seed, proof.epochs) for seed in (0, 1)]
    buggy, buggy_loaders = trained(case.model, case.data, 0, proof.epochs)
    healthy = [proof.error(model) for model, _ in twins]
    noise = abs(healthy[0] - healthy[1])
    bug_error = proof.error(buggy)
    assert buggy.train_losses.fell(), "a silent bug: its training loss falls"
    print(f"\n{case_id}: bug {bug_error:.4f}  twin {healthy[0]:.4f} / {healthy[1]:.4f} (noise {noise:.4f})")
    if proof.lie:
        reported = reported_loss(buggy, buggy_loaders)
        twin_lies = [proof.error(model) - reported_loss(model, loaders) for model, loaders in twins]
        lie = bug_error - reported
        print(f"  reported val {reported:.4f}: overstated by {lie:.4f}; the twin's {twin_lies[0]:.4f}")
        assert lie > proof.min_gap and lie > 3 * noise, (lie, noise)
        assert lie > proof.min_gap + max(twin_lies), (lie, twin_lies)
    if proof.worse:
        gap = bug_error - healthy[0]
        assert gap > proof.min_gap and gap > 3 * noise, (gap, noise)


@pytest.mark.parametrize("case", b.HEALTHY, ids=lambda case: case.id)
def test_healthy_case_fits(case) -> None:
    pl.seed_everything(0, verbose=False)
    loaders = case.data()
    model = case.model()

    def val_loss() -> float:
        model.eval()
        with torch.no_grad():
            return torch.stack([model.loss(batch) for batch in loaders["val_dataloaders"]]).mean().item()

    before = val_loss()
    fit(model, loaders, epochs=2)
    after = val_loss()
    print(f"\n{case.id}: val loss {before:.4f} -> {after:.4f}")
    assert before - after > 0.2 * abs(before)
