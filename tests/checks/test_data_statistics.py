"""The arithmetic of ``data``: the pairing rules of ``_relation`` (lookup tables, the verdict of a gap)
and the sample scan, pinned to hand-computed values."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from lightning_recipes._stats import label_shift
from lightning_recipes.checks.data._relation import (
    Relation,
    features,
    lookup_scores,
    neighbours_alike,
    relations,
)
from lightning_recipes.checks.data.data_check import scan_samples


def test_lookup_scores_are_per_feature_and_per_sample():
    x = torch.tensor([[0.0, 5.0], [0.0, 5.0], [1.0, 5.0], [1.0, 6.0]])  # column 0 is the label
    y = torch.tensor([0, 0, 1, 1])
    assert lookup_scores(x, y, x, y, classes=2).tolist() == [[1, 1, 1, 1], [1, 1, 0, 1]]
    values = torch.tensor([1.0, 1.0, 3.0, 3.0])  # regression: bin means, 1 - squared error / variance
    scores = lookup_scores(x, values, x, values, classes=0)
    assert scores[0].tolist() == [1.0, 1.0, 1.0, 1.0]
    assert scores[1].tolist() == pytest.approx([2 / 3, 2 / 3, -1 / 3, 1.0])  # bin 5: mean 5/3; var 4/3


@pytest.mark.parametrize(
    ("own", "other", "noise", "level"),
    [
        (0.93, 0.10, 0.02, "fail"),
        (0.53, 0.32, 0.03, "fail"),
        (0.90, 0.72, 0.03, "warn"),
        (0.9, 0.85, 0.01, "pass"),
        (0.93, 0.10, 0.5, "pass"),
    ],
)
def test_a_gap_is_judged_by_its_size_and_its_noise(own, other, noise, level):
    assert Relation("nearest neighbours", "val", own, other, noise, noise, 5.0).level == level


def test_a_gap_counts_only_for_a_rule_that_holds_where_it_was_fitted_and_not_on_the_other_side():
    marker = Relation("one feature", "train", 0.95, 0.10, 0.02, 0.01, 5.0, "x[:, 3]", 0.12)
    assert marker.level == "fail"
    assert replace(marker, other_within=0.9).level == "pass"  # it predicts validation too: a moved relation
    assert replace(marker, own=0.015, other=-0.3).level == "pass"  # no better than the mean where fitted


def test_images_are_pooled_to_16x16():
    assert features(torch.zeros(2, 3, 32, 32)).shape == (2, 768)
    assert features(torch.zeros(2, 1, 8, 8)).shape == (2, 64)


def test_neighbours_alike_in_a_walk_not_in_its_shuffle():
    g = torch.Generator().manual_seed(0)
    walk = torch.randn(200, 3, generator=g).cumsum(0)
    assert neighbours_alike(walk) and not neighbours_alike(walk[torch.randperm(200, generator=g)])


def _split(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 8, generator=g)
    return x, (x[:, 0] + 0.5 * x[:, 1] > 0).long()


@pytest.mark.parametrize("shuffle", [False, True])
def test_relations_find_labels_that_no_longer_follow_the_inputs(shuffle):
    (x_t, y_t), (x_v, y_v) = _split(600, 0), _split(300, 1)
    if shuffle:
        y_t = y_t[torch.randperm(600, generator=torch.Generator().manual_seed(2))]
    found = relations((x_t, y_t, {}), (x_v, y_v, {}), 2, both_ways=True)
    failed = [r.fitted for r in found if r.level == "fail"]
    assert failed == (["val"] if shuffle else [])
    # the main target's rules are fitted on training only: training-side shuffles are training_pairs'
    assert not [r for r in relations((x_t, y_t, {}), (x_v, y_v, {}), 2) if r.level == "fail"]


def test_scan_samples_counts_blank_and_repeated_rows():
    x = torch.tensor([[0.0, 0.0, 0.0, 0.0], [1.0, 2.0, 3.0, 4.0], [1.0, 2.0, 3.0, 4.0]])
    assert scan_samples([x, torch.arange(8.0).view(2, 4)]) == (5, 1, 1, 4)
    assert scan_samples([torch.zeros(4, 3)]) is None  # fewer than 4 values per sample


def test_label_shift_needs_both_size_and_significance():
    assert not label_shift({0: 10, 1: 10}, {0: 10, 1: 10})["significant"]
    shifted = label_shift({0: 250, 1: 250}, {0: 160, 1: 40})
    assert shifted["significant"] and shifted["tv"] == pytest.approx(0.3)
