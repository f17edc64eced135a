"""The typed results of ``target_leakage``'s sub-tests (``checks/data/_leakage_probes.py``): each record's
``details()`` is the JSON the check reports (same keys, same order) and its ``message`` follows from its
fields; the batch plumbing the probes share."""

from __future__ import annotations

import dataclasses
import math
from collections import namedtuple

import pytest
import torch

from lightning_recipes.checks.data._leakage_probes import (
    CopyTargets,
    FeatureGroup,
    Look,
    SingleFeature,
    TargetFed,
    TooGood,
    entries,
    label_of,
    other_values,
    replace_entry,
    same_tensor,
)
from lightning_recipes.checks.data._leakage_statistics import CopyShares


def test_records_are_frozen():
    for record in (TargetFed(), CopyTargets(), SingleFeature(), TooGood(), Look(1, 0.5)):
        with pytest.raises(dataclasses.FrozenInstanceError):
            record.reason = "changed"  # type: ignore[misc]


def test_a_sub_test_that_does_not_apply_reports_only_its_reason():
    for record in (TargetFed("r0"), CopyTargets("ra"), SingleFeature("rb"), TooGood("rc")):
        assert record.details() == {"reason": record.reason} and not record.leak
        assert record.message == record.reason


def test_target_fed_turned_off_keeps_its_measurements_and_never_leaks():
    found = TargetFed("off", starts=(0,), changes=(0.3,), loss_uses_target=True, leaking=(0,))
    assert not found.leak
    details = found.details()
    assert list(details) == ["starts", "changes", "leak", "loss_uses_target", "reason"]
    assert details["starts"] == [0] and details["changes"] == [0.3] and details["reason"] == "off"


def test_target_fed_messages_name_the_position_or_the_entry():
    sequence = TargetFed(starts=(0, 4, 7), changes=(0.0, 0.2, 0.3), leaking=(4, 7), sequence=True)
    assert sequence.leak and "output at position 4 changes" in sequence.message
    assert list(sequence.details()) == ["starts", "changes", "leak", "loss_uses_target", "message"]
    plain = TargetFed(starts=(0,), changes=(1.0,), leaking=(0,), target_label="batch['y']")
    assert "changes when only the target (batch['y']) changes" in plain.message
    quiet = TargetFed(starts=(0, 4, 7), changes=(0.0,) * 3, sequence=True)
    assert quiet.message.endswith("from position t on (outputs up to t compared)") and not quiet.leak


def test_copy_targets_record():
    shares = CopyShares(next=0.0, same=0.02, back1=0.97, back2=0.01)
    found = CopyTargets(shares=shares, trained_positions=40, leak="back1")
    assert found.measured == 0.97
    assert "one position back (97% of 40 trained positions; the next token only 0%)" in found.message
    assert "shifted the wrong way" in found.message
    details = found.details()
    assert list(details) == ["shares", "trained_positions", "leak", "message"]
    assert details["shares"] == {"next": 0.0, "same": 0.02, "back1": 0.97, "back2": 0.01}
    assert "not shifted (targets == inputs)" in dataclasses.replace(found, leak="same").message
    assert CopyTargets(shares=shares, trained_positions=40).measured == 0.0


def _lookup(**changes) -> SingleFeature:
    found = SingleFeature(
        task="classification",
        classes=4,
        name="batch['c'][:, 0]",
        score=1.0,
        samples=64,
        threshold=0.99,
        majority_baseline=0.25,
        features_scanned=17,
        determines=True,
        is_input=False,
        entry="batch['c']",
    )
    return dataclasses.replace(found, **changes)


def test_single_feature_details_keep_the_reported_keys_in_order():
    details = _lookup(encodes_label=True, reads_tested=True, model_reads_it=True).details()
    assert list(details) == [
        "task",
        "name",
        "score",
        "majority_baseline",
        "features_scanned",
        "leak",
        "encodes_label_within_each_split",
        "model_reads_it",
        "message",
    ]
    assert details["task"] == ("classification", 4) and details["leak"] is True
    regression = SingleFeature(task="regression", name="inputs[:, 2]", score=0.5, samples=9, threshold=0.999)
    assert list(regression.details()) == ["task", "name", "score", "leak", "message"]
    assert regression.details()["task"] == ("regression", None)


def test_single_feature_a_copy_counts_only_when_the_model_reads_it():
    unread = _lookup(reads_tested=True, model_reads_it=False)
    assert not unread.leak and "does not read it (harmless" in unread.message
    assert unread.message.startswith("(b) a lookup table on `batch['c'][:, 0]` alone predicts 100.0% of 64")
    unknown = _lookup(reads_tested=True, model_reads_it=None)  # the loss could not be re-run: it counts
    assert unknown.leak and "`batch['c']`, a batch entry the model reads besides its input" in unknown.message
    assert _lookup(determines=False).message.startswith("(b) best single feature: a lookup table")
    assert "an input feature determines the label" in _lookup(is_input=True).message
    assert "it encodes the label" in _lookup(encodes_label=True).message


def test_too_good_record():
    loss = 0.05
    found = TooGood(looks=(Look(5, 0.9), Look(10, loss)), bound=0.0693, classes=4, fraction=0.05)
    assert found.leak
    assert f"geometric-mean probability of {math.exp(-loss):.1%}" in found.message
    assert "after only 10 training steps" in found.message
    details = found.details()
    assert list(details) == ["looks", "bound", "classes", "leak", "message"]
    assert details["looks"] == [{"step": 5, "loss": 0.9}, {"step": 10, "loss": loss}]
    stopped = TooGood(looks=(Look(0, 1.4),), bound=0.0693, classes=4, fraction=0.05, budget_stopped=True)
    assert not stopped.leak and stopped.message.endswith("(the time budget stopped training at step 0)")


def test_feature_group_names_a_feature_by_its_position():
    group = FeatureGroup("x", "batch['x']", False, (3, 4), None, torch.zeros(1, 12), torch.zeros(1, 12))
    assert group.feature_name(7) == "batch['x'][:, 1, 3]"
    scalar = FeatureGroup(0, "batch[0]", True, (), None, torch.zeros(1, 1), torch.zeros(1, 1))
    assert scalar.feature_name(0) == "inputs[:, 0]"


def test_batch_entries_and_replacing_one():
    x, y = torch.zeros(2, 3), torch.ones(2)
    assert [(k, label) for k, label, _ in entries([x, "note", y])] == [(0, "batch[0]"), (2, "batch[2]")]
    assert [k for k, _, _ in entries(x)] == [None] and entries("text") == []
    assert label_of({"y": y}, "y") == "batch['y']" and label_of({"y": y}, "z") == "the target"
    pair = namedtuple("pair", "x y")(x, y)
    changed = replace_entry(pair, 1, y * 2)
    assert type(changed) is type(pair) and changed.y.tolist() == [2.0, 2.0] and pair.y.tolist() == [1.0, 1.0]
    assert isinstance(replace_entry([x, y], 0, y), list)
    batch = {"x": x, "y": y}
    assert replace_entry(batch, "y", x)["y"] is x and batch["y"] is y  # the caller's batch is untouched
    assert same_tensor(x, x[:, 0]) and not same_tensor(x, x.clone())


def test_other_values_changes_every_target():
    floats = torch.tensor([0.5, 1.5, 2.5])
    assert bool((other_values(floats, seed=0) != floats).all())
    assert other_values(torch.tensor([3, 3, -100]), seed=0) is None  # one value besides the ignored ones
    labels = torch.tensor([[4, 7, 9], [9, -100, 4]])
    changed = other_values(labels, seed=1)
    valid = labels != -100
    assert bool((changed[valid] != labels[valid]).all()) and int(changed[1, 1]) == -100
    assert set(changed[valid].tolist()) <= {4, 7, 9}
