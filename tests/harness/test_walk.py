"""The one walk over a nested batch: tensors in tuples, lists, namedtuples, dicts and dataclasses."""

from __future__ import annotations

import dataclasses
from collections import namedtuple

import torch

from lightning_recipes.harness import batch_entries, batch_keys, map_tensors, tensors_of
from lightning_recipes.harness.batches import clone_tensors, slice_batch

Pair = namedtuple("Pair", ["x", "y"])


@dataclasses.dataclass
class Sample:
    image: torch.Tensor
    label: torch.Tensor
    name: str = "s"


def _nested():
    x, y, mask = torch.zeros(4, 3), torch.arange(4), torch.ones(4, dtype=torch.bool)
    batch = {"x": x, "extra": [Pair(mask, "tag"), (7, None)], "sample": Sample(x + 1, y + 1), "id": "b0"}
    return batch, [x, mask, x + 1, y + 1]


def test_tensors_of_visits_every_container_in_order_and_skips_non_tensor_leaves():
    batch, expected = _nested()
    found = tensors_of(batch)
    assert len(found) == len(expected)
    assert all(torch.equal(a, b) for a, b in zip(found, expected))
    assert tensors_of(("text", 3, None)) == []
    assert tensors_of([[torch.ones(1)], [[torch.zeros(2)]]])[1].shape == (2,)


def test_map_tensors_rebuilds_each_container_type_and_leaves_the_input_alone():
    batch, _ = _nested()
    halved = map_tensors(batch, lambda t: t[:2])
    assert type(halved) is dict and halved["id"] == "b0"
    pair = halved["extra"][0]
    assert isinstance(pair, Pair) and pair.y == "tag" and pair.x.shape == (2,)
    assert halved["extra"][1] == (7, None)
    assert isinstance(halved["sample"], Sample) and halved["sample"].image.shape == (2, 3)
    assert halved["sample"].name == "s"
    assert batch["x"].shape == (4, 3) and batch["sample"].label.shape == (4,)


def test_slice_and_clone_go_through_the_walker():
    batch, _ = _nested()
    cut = slice_batch(batch, 2, batch_size=4)
    assert cut["x"].shape == (2, 3) and cut["extra"][0].x.shape == (2,) and cut["sample"].label.shape == (2,)
    copied = clone_tensors(batch)
    assert torch.equal(copied["x"], batch["x"]) and copied["x"].data_ptr() != batch["x"].data_ptr()
    assert copied["sample"].image.data_ptr() != batch["sample"].image.data_ptr()


def test_batch_entries_key_tensors_by_their_top_level_entry():
    batch, _ = _nested()
    assert [key for key, _ in batch_entries(batch)] == ["x", "extra", "sample", "sample"]
    assert batch_keys(batch) == ["x", "extra", "sample"]
    assert batch_keys((torch.zeros(2), "t", [torch.ones(2), torch.ones(2)])) == [0, 2]
    assert batch_keys(torch.zeros(2)) == [None]
    assert batch_entries(Sample(torch.zeros(1), torch.zeros(1))) == []  # no `batch[key]` to read it by
