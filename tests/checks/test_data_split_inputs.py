"""``data``'s pairing invariant across the splits (issue 34): each bug with a healthy twin that passes."""

from __future__ import annotations

from typing import Any

import lightning.pytorch as pl
import pytest
import torch
from torch import Tensor, nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, Dataset, TensorDataset

from galleries.preflight.families._data_models import MLP, digits, gaussian, loaders
from lightning_recipes.checks import DataCheck, InputIndependenceCheck, TrainingPairsCheck, preflight
from lightning_recipes.checks.data._relation import relations
from lightning_recipes.testing import DigitsCNN

from ._models import SGDModule

RAMP = torch.linspace(0, 1, 8)  # a left-to-right brightness ramp: a flip changes the image


def _data(data: dict, model: pl.LightningModule | None = None):
    model = model if model is not None else DigitsCNN(width=4)
    return preflight(model, **data, checks=["data"], progress=False)["data"]


def _broken(result, rule: str, fitted: str) -> None:
    assert result.status == "fail", result.message
    assert (result.details["relation"]["rule"], result.details["relation"]["fitted_on"]) == (rule, fitted)
    assert len(result.summary) <= 120 and result.action


def _taught(data: dict, model: pl.LightningModule) -> tuple[Any, Any]:
    """``data`` and ``training_pairs`` on one model: pairs broken in training only are the second's to see
    (a relation fitted on validation mistakes augmentation for broken pairs, issue #34)."""
    checks = [DataCheck(), TrainingPairsCheck(time_budget=None)]
    report = preflight(model, **data, checks=checks, num_threads=1, progress=False)
    return report["data"], report["training_pairs"]


@pytest.mark.parametrize(
    "transform",
    [
        lambda x: x.transpose(-1, -2),
        lambda x: (x + RAMP).flip(-1) - RAMP,
        lambda x: (x - 0.5) / 0.25,
        lambda x: 255 * x,
        lambda x: x[torch.randperm(len(x), generator=torch.Generator().manual_seed(0))],  # labels shuffled
    ],
    ids=["transposed", "flipped", "normalised", "times_255", "labels_shuffled"],
)
def test_validation_inputs_changed_or_shuffled_break_the_pairing(transform):
    x, y, x_val, y_val = digits()
    _broken(_data(loaders(x + RAMP, y, transform(x_val + RAMP), y_val)), "nearest neighbours", "train")


def test_healthy_twin_same_preprocessing_passes():
    x, y, x_val, y_val = digits()
    result = _data(loaders(x + RAMP, y, x_val + RAMP, y_val))
    assert result.status == "pass", result.message
    assert result.details["relation"]["z"] < result.details["relation"]["needed_z"]


def test_a_label_remap_breaks_the_pairing_both_ways():
    x, y, x_val, y_val = digits()
    result = _data(loaders(x, y, x_val, (y_val + 1) % 10))
    assert result.status == "fail", result.message
    assert result.details["relation"]["other_score"] < 0.1


def test_a_column_that_marks_the_label_in_training_only_fails():
    x, y = gaussian(512, 0)
    x_val, y_val = gaussian(256, 1)
    x[:, 7] = y.float()  # the label leaked into column 7 of the training table only
    result = _data(loaders(x, y, x_val, y_val), MLP())
    _broken(result, "one feature", "train")
    assert result.details["relation"]["feature"] == "inputs[:, 7]"


def test_a_genuinely_predictive_column_in_both_splits_passes():
    x, y = gaussian(512, 0)
    x_val, y_val = gaussian(256, 1)
    x[:, 7], x_val[:, 7] = y.float() + 0.3 * torch.randn(512), y_val.float() + 0.3 * torch.randn(256)
    result = _data(loaders(x, y, x_val, y_val), MLP())
    assert result.status == "pass", result.message


def test_a_relation_that_moved_between_recordings_passes_and_a_rescaled_column_fails():
    """A column that predicts the label in both splits, another way in each (a sensor's phase differs between
    two recordings): not a marker on one side. The same column rescaled in one split is."""
    x, y = gaussian(512, 0)
    x_val, y_val = gaussian(256, 1)
    g = torch.Generator().manual_seed(0)
    x[:, 7] = y.float() / 2 + 0.05 * torch.randn(512, generator=g)
    x_val[:, 7] = ((y_val + 1) % 4).float() / 2 + 0.05 * torch.randn(256, generator=g)
    (moved,) = relations((x, y, {"inputs": x}), (x_val, y_val, {"inputs": x_val}), 4)[1:]
    assert moved.level == "pass", moved  # the worst one-sided feature; column 7's gap was 0.98 -> 0.01
    x_val[:, 7] = 100 * y_val.float() + 5 * torch.randn(256, generator=g)  # un-normalised in one split
    (rescaled,) = relations((x, y, {"inputs": x}), (x_val, y_val, {"inputs": x_val}), 4)[1:]
    assert (rescaled.feature, rescaled.level, rescaled.other_within) == ("inputs[:, 7]", "fail", None)


def test_a_watermark_pixel_in_training_images_only_fails_and_in_both_passes():
    x, y, x_val, y_val = digits()
    marked = x.clone()
    marked[:, 0, 0, 0] = y.float() / 9  # a corner pixel that encodes the class, in training images only
    _broken(_data(loaders(marked, y, x_val, y_val)), "one feature", "train")
    marked_val = x_val.clone()
    marked_val[:, 0, 0, 0] = y_val.float() / 9
    assert _data(loaders(marked, y, marked_val, y_val)).status == "pass"


class _TokenClassifier(SGDModule):
    def __init__(self, vocab: int = 50, classes: int = 3) -> None:
        super().__init__()
        self.embed, self.head = nn.EmbeddingBag(vocab, 16), nn.Linear(16, classes)

    def forward(self, ids: Tensor) -> Tensor:
        return self.head(self.embed(ids))

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        ids, y = batch
        return F.cross_entropy(self(ids), y)


def test_a_token_position_that_marks_the_label_in_training_only_fails():
    g = torch.Generator().manual_seed(0)
    ids, y = torch.randint(3, 50, (512, 12), generator=g), torch.randint(0, 3, (512,), generator=g)
    ids_val, y_val = torch.randint(3, 50, (256, 12), generator=g), torch.randint(0, 3, (256,), generator=g)
    healthy = _data(loaders(ids, y, ids_val, y_val), _TokenClassifier())
    assert healthy.status == "pass", healthy.message
    ids[:, 0] = y  # a class token at position 0 in the training sequences only
    result = _data(loaders(ids, y, ids_val, y_val), _TokenClassifier())
    _broken(result, "one feature", "train")


def test_another_class_mix_in_validation_opens_no_gap():
    """Validation holds classes 0-2 only (a sorted loader read in part): the own split's score is taken under
    the other split's class mix."""
    x, y, x_val, y_val = digits()
    keep = y_val < 3
    result = _data(loaders(x, y, x_val[keep], y_val[keep]))
    assert result.status == "warn" and result.details["label_distribution"]["significant"], result.message
    assert result.details["relation"]["z"] < result.details["relation"]["needed_z"]


class FlippedBlobs(Dataset):
    """16x16 images of one bright blob; the target is its (x, y) centre. Flipped left-right with
    probability 1/2 as read; ``mirror`` mirrors the x target with it (the fix)."""

    def __init__(self, n: int, seed: int, mirror: bool | None, points: int = 0) -> None:
        g = torch.Generator().manual_seed(seed)
        self.points = points  # > 0: the target as ``points`` copies of the centre, [points, 2]
        self.centre = 2 + 11 * torch.rand(n, 2, generator=g)
        grid = torch.arange(16.0)
        dx = (grid - self.centre[:, :1]) ** 2
        dy = (grid - self.centre[:, 1:]) ** 2
        self.images = torch.exp(-(dy[:, :, None] + dx[:, None, :]) / 2.9)[:, None]
        self.mirror = mirror

    def __len__(self) -> int:
        return len(self.images)

    def __getitem__(self, i: int) -> tuple[Tensor, Tensor]:
        image, target = self.images[i], (self.centre[i] - 7.5) / 7.5
        if self.mirror is not None and torch.rand(()) < 0.5:
            image = image.flip(-1)
            target = target * torch.tensor([-1.0, 1.0]) if self.mirror else target
        return image, target.expand(self.points, 2) if self.points else target


class BlobLocator(pl.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Flatten(), nn.Linear(256, 32), nn.ReLU(), nn.Linear(32, 2))

    def forward(self, x: Tensor) -> Tensor:
        return self.net(x)

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        image, target = batch
        return F.mse_loss(
            self(image).view(len(target), -1, 2).expand_as(target.view(len(target), -1, 2)),
            target.view(len(target), -1, 2),
        )

    def configure_optimizers(self) -> Any:
        return torch.optim.Adam(self.parameters())


@pytest.mark.parametrize("points", [0, 3])
@pytest.mark.parametrize("mirror", [False, True])
def test_an_augmentation_that_moves_the_input_must_move_its_target(mirror, points):
    """The horizontal flip of issue 34: the x target not mirrored with the image; also as ``points`` copies
    ``[3, 2]`` per sample (keypoints, joints: a target of more dimensions than one sample's row)."""
    train = DataLoader(FlippedBlobs(1024, 1, mirror, points), batch_size=64, shuffle=True)
    val = DataLoader(FlippedBlobs(300, 2, None, points), batch_size=64)
    data, taught = _taught({"train_dataloaders": train, "val_dataloaders": val}, BlobLocator())
    assert data.status == "pass", data.message
    assert taught.status == ("pass" if mirror else "fail"), taught.message


def _tags(n: int, seed: int, shift: bool) -> tuple[Tensor, Tensor]:
    """Tokens and a tag per token (tag = token > 10); ``shift`` moves the tags one position (the bug)."""
    tokens = torch.randint(1, 21, (n, 12), generator=torch.Generator().manual_seed(seed))
    tags = (tokens > 10).long()
    return tokens, tags.roll(1, 1) if shift else tags


class Tagger(SGDModule):
    """A tag per token from the token's embedding (cross-entropy over every position)."""

    def __init__(self) -> None:
        super().__init__()
        self.embed, self.head = nn.Embedding(21, 16), nn.Linear(16, 2)

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        tokens, tags = batch
        return F.cross_entropy(self.head(self.embed(tokens)).transpose(1, 2), tags)


@pytest.mark.parametrize("shift", [True, False])
def test_tags_collated_out_of_line_with_their_tokens_break_the_per_position_pairing(shift):
    x, y = _tags(512, 0, shift)
    val = DataLoader(TensorDataset(*_tags(256, 1, False)), batch_size=64)  # training_pairs: 2 batches or more
    data, taught = _taught({**loaders(x, y), "val_dataloaders": val}, Tagger())
    assert data.status == "pass", data.message
    assert taught.status == ("fail" if shift else "pass"), taught.message


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_an_iid_split_whose_class_means_carry_no_class_information_passes(seed):
    """Class = a sine's frequency at a random phase: the class means (noise around 0) match by chance."""
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, 4, (1920,), generator=g)
    phase = 2 * torch.pi * torch.rand(1920, 1, generator=g)
    noise = 0.3 * torch.randn(1920, 16, generator=g)
    x = torch.sin((y.unsqueeze(1) + 1) * 0.35 * torch.arange(16.0) + phase) + noise
    result = _data(loaders(x[:1536], y[:1536], x[1536:], y[1536:]), MLP())
    assert result.status == "pass", result.message


@pytest.mark.parametrize("shuffled", [False, True])
def test_an_augmentation_of_training_only_keeps_the_pairing(shuffled):
    """Training digits shifted by up to a pixel and noised, validation plain (sealed gallery C): training
    samples validation does not cover say nothing about pairing; its labels shuffled still break it."""
    x, y, x_val, y_val = digits()
    g = torch.Generator().manual_seed(0)
    shifts = torch.randint(-1, 2, (len(x), 2), generator=g).tolist()
    x = torch.stack([s.roll(tuple(d), dims=(-2, -1)) for s, d in zip(x, shifts, strict=True)])
    x = x + 0.05 * torch.randn(x.shape, generator=g)
    y = y[torch.randperm(len(y), generator=g)] if shuffled else y
    checks = [DataCheck(), TrainingPairsCheck(time_budget=None), InputIndependenceCheck(time_budget=None)]
    report = preflight(DigitsCNN(width=4), **loaders(x, y, x_val, y_val), checks=checks, num_threads=1)
    assert report["data"].status == "pass", report["data"].message
    if shuffled:  # no pair left: the controls fail it; the copy taught by validation beats it by far
        assert report["input_independence"].status == "fail", report["input_independence"].message
        assert report["training_pairs"].status in ("warn", "fail"), report["training_pairs"].message
    else:
        assert report["training_pairs"].status == "pass", report["training_pairs"].message
