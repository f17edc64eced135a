"""The parts of ``target_leakage`` (``checks/data/_leakage_probes.py``): the records its sub-tests return,
the batch plumbing, and the arithmetic (copy shares, label encodings, correlations), by hand."""

from __future__ import annotations

import dataclasses
from collections import namedtuple

import pytest
import torch

from lightning_recipes._stats import rank_correlation
from lightning_recipes.checks.data._leakage_probes import (
    Probe,
    _bands_of,
    _encodes_label,
    _name,
    copy_shares,
    other_values,
)
from lightning_recipes.harness.batches import entries, replace_entries


def test_a_probe_is_frozen_and_records_its_reason_or_its_evidence():
    with pytest.raises(dataclasses.FrozenInstanceError):
        Probe().reason = "changed"  # type: ignore[misc]
    assert Probe("not tokens").record() == {"reason": "not tokens"}
    found = Probe(leak=True, summary="s", evidence={"score": 1.0}).record()
    assert found == {"score": 1.0, "leak": True, "message": "s"}


def test_batch_entries_are_named_and_replaced_by_key():
    x, y = torch.zeros(2, 3), torch.ones(2)
    assert [label for _, label, _ in entries((x, y))] == ["batch[0]", "batch[1]"]
    assert [label for _, label, _ in entries({"x": x, "n": 3})] == ["batch['x']"]
    pair = namedtuple("pair", "x y")
    replaced = replace_entries(pair(x, y), {1: torch.zeros(2)})
    assert isinstance(replaced, pair) and replaced.y.tolist() == [0.0, 0.0]
    assert replace_entries({"x": x, "y": y}, {"y": x})["y"] is x
    assert replace_entries(x, {None: y}) is y  # a bare-tensor batch


@pytest.mark.parametrize(
    "targets",
    [
        torch.tensor([0, 1, 2, 1, -100]),
        torch.tensor([0.0, 2.0, 1.0, 2.0]),
        torch.rand(32),
        torch.tensor([[0.9, 0.1], [0.2, 0.8], [0.6, 0.4]]),
    ],
    ids=["labels", "labels_as_floats", "soft", "soft_rows"],
)
def test_other_values_differ_and_stay_in_range(targets):
    changed = other_values(targets, seed=0)
    assert changed is not None and changed.shape == targets.shape
    valid = targets != -100
    assert torch.equal(changed[~valid], targets[~valid])  # an ignored label stays ignored
    assert float((changed[valid] != targets[valid]).float().mean()) > 0.9
    assert changed[valid].min() >= targets[valid].min() and changed[valid].max() <= targets[valid].max()
    assert other_values(torch.ones(4), seed=0) is None


def test_copy_shares_by_hand():
    inputs = torch.tensor([[1, 2, 3, 4]])
    every = torch.ones(1, 4, dtype=torch.bool)
    assert copy_shares(inputs, inputs, every) == ([0.0, 1.0, 0.0, 0.0, 0.0], [3, 4, 3, 2, 2])
    next_token = torch.tensor([[2, 3, 4, 9]])  # target at t = input at t + 1
    assert copy_shares(next_token, inputs, every)[0] == [1.0, 0.0, 0.0, 0.0, 0.0]
    two_ahead = torch.tensor([[3, 4, 9, 9]])  # target at t = input at t + 2 (shifted twice)
    assert copy_shares(two_ahead, inputs, every)[0] == [0.0, 0.0, 0.0, 0.0, 1.0]


@pytest.mark.parametrize(
    ("column", "labels", "expected"),
    [
        ([0.5, 0.5, 0.9, 0.9], [0, 0, 1, 1], True),
        ([1.0, 2.0, 1.0, 1.0], [0, 0, 1, 1], False),  # varies within class 0
        ([0.5, 0.5, 0.5, 0.5], [0, 0, 1, 1], False),  # the same value for both classes
        ([0.5, 0.5, 0.9, 0.7], [0, 0, 1, 2], False),  # a class seen once
    ],
)
def test_encodes_label_by_hand(column, labels, expected):
    x = torch.tensor(column)[:, None]
    assert _encodes_label(x, torch.tensor(labels), classes=3).tolist() == [expected]


def test_bands_of_a_real_target_by_hand():
    y = torch.tensor([0.1, 0.9, 0.4, 1.6, 1.2, 2.2])
    x = torch.stack(
        [
            y.round(),  # bands, in the target's order: 0, 1, 0, 2, 1, 2
            -y.round(),  # in the reverse order
            y,  # a copy (one value per row: the correlation's to judge, not a band)
            torch.tensor([0.0, 1, 1, 2, 1, 2]),  # 0.4 is in band 1, 0.9 in band 1, but 0.1 in 0: in order
            torch.tensor([1.0, 0, 0, 2, 1, 2]),  # out of order
            torch.ones(6),  # one value
        ],
        1,
    )
    assert _bands_of(x, y).tolist() == [True, True, False, True, False, False]


def test_correlation_is_the_larger_of_pearson_and_spearman():
    y = torch.arange(6.0)
    x = torch.stack([y**3, -2 * y + 1, torch.tensor([1.0, -1, 1, -1, 1, -1])], 1)
    found = rank_correlation(x, y)
    assert found[0] == pytest.approx(1.0) and found[1] == pytest.approx(1.0) and found[2] < 0.5


def test_a_feature_is_named_by_its_position():
    assert _name("batch", True, (2, 3), 4) == "inputs[:, 1, 1]"
    assert _name("batch['code']", False, (1,), 0) == "batch['code'][:, 0]"
