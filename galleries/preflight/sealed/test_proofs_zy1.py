"""Proofs for sealed gallery ZY's first half (``zy1``), with plain torch and Lightning (no
``lightning_recipes``): every bug costs more than a stated minimum and than 3x the seed noise of its healthy
twin on the same clean held-out data; every healthy case fits: its training and validation losses fall."""

from __future__ import annotations

import math

import pytest
import torch

from galleries import sealed
from galleries.preflight.sealed import _zy1_data as d
from galleries.preflight.sealed import _zy1_models as m
from galleries.preflight.sealed import zy1 as gallery
from galleries.sealed import Proof

BUGS = {case.id: case for case in gallery.BUGS}


# --- task metrics on clean held-out data (seed 3): errors, lower is better ----------------------------------
@torch.no_grad()
def hetero_nll(model) -> float:
    """The mean Gaussian negative log-likelihood of 2,000 held-out targets under the served mean and
    standard deviation (in the target's units)."""
    x, y = d.hetero(2000, 3)
    mean, std = model.predict(x)
    return (std.log() + 0.5 * ((y - mean) / std) ** 2 + 0.5 * math.log(2 * math.pi)).mean().item()


@torch.no_grad()
def mdn_nll(model) -> float:
    """The mean negative log-likelihood of 2,000 held-out targets under the served mixture."""
    x, y = d.inverted_sinusoid(2000, 3)
    log_weight, mean, scale = model.predict(x)
    return -torch.logsumexp(log_weight + m.MDN.components(mean, scale, y), -1).mean().item()


@torch.no_grad()
def mil_error(model) -> float:
    """The share of 1,000 held-out bags of the test digits labelled wrong."""
    bags, labels = d.digit_bags("test", 1000, 3)
    x, labels = d.pad_bags(list(zip(bags, labels, strict=True)))
    return (model.predict(x) != labels).float().mean().item()


@torch.no_grad()
def graph_error(model) -> float:
    """The mean absolute error of the served same-type edge count on 2,000 held-out graphs."""
    adj, feats, mask, y = d.graphs(2000, 3)
    return (model.predict((adj, feats, mask)) - y).abs().mean().item()


@torch.no_grad()
def pinn_error(model) -> float:
    """The root mean squared error of the served curve against the exact solution on a grid of [0, 8]."""
    t = torch.linspace(0, d.HORIZON, 401)[:, None]
    return (model.predict(t) - d.logistic(t)).pow(2).mean().sqrt().item()


@torch.no_grad()
def langid_error(model) -> float:
    """The share of 2,000 held-out strings (500 per language: the balanced error) whose language is wrong."""
    ids, lang = d.strings([500] * d.LANGS, 3)
    return (model.predict(ids) != lang).float().mean().item()


HETERO, MDN = (m.HeteroNet, gallery.hetero_data), (m.MDN, gallery.mdn_data)
MIL, GRAPH = (m.AttentionMIL, gallery.mil_data), (m.GraphNet, gallery.graph_data)
PINN = (m.PINN, gallery.pinn_data)
SAMPLED = (m.NgramLangID, gallery.langid_balanced_sampling_data)
SPLIT = (m.NgramLangID, gallery.langid_split_data)

PROOFS = {
    "hetero_std_served_in_standardised_units": Proof(HETERO, hetero_nll, 1.0, 6),
    "hetero_nll_without_log_variance": Proof(HETERO, hetero_nll, 0.3, 6),
    "mdn_weight_averaged_component_nll": Proof(MDN, mdn_nll, 0.3, 20),
    "mdn_warmup_stepped_per_epoch": Proof(MDN, mdn_nll, 0.2, 20),
    "mil_attention_softmax_over_batch": Proof(MIL, mil_error, 0.05, 6),
    "mil_bag_label_share_of_sevens": Proof(MIL, mil_error, 0.1, 6),
    "graph_mean_readout_of_a_count": Proof(GRAPH, graph_error, 0.1, 25),
    "graph_permutation_on_features_only": Proof(GRAPH, graph_error, 0.3, 25),
    "pinn_residual_in_scaled_time": Proof(PINN, pinn_error, 0.05, 6),
    "pinn_derivative_without_create_graph": Proof(PINN, pinn_error, 0.05, 6),
    "langid_sampler_weights_not_inverted": Proof(SAMPLED, langid_error, 0.05, 6),
    "langid_split_before_shuffle": Proof(SPLIT, langid_error, 0.1, 6),
}


def test_every_bug_has_a_proof() -> None:
    sealed.check_gallery(gallery, PROOFS, bugs=11, healthy=7)


@pytest.mark.parametrize("case_id", list(PROOFS))
def test_bug_is_real(case_id: str) -> None:
    sealed.check_bug_is_real(BUGS[case_id], PROOFS[case_id])


@pytest.mark.parametrize("case", gallery.HEALTHY, ids=lambda case: case.id)
def test_healthy_case_fits(case) -> None:
    sealed.check_healthy_case_fits(case, epochs=6)
