"""``DataCheck``'s pairing: every target the loss reads, judged on samples drawn as validation's are."""

from __future__ import annotations

from typing import Any

import lightning.pytorch as pl
import pytest
import torch
from torch import Tensor, nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, Dataset, Sampler, TensorDataset

from lightning_recipes.checks import DataCheck, preflight
from lightning_recipes.testing import TinyClassifier

WIDTH = 32


def bumps(n: int, seed: int) -> tuple[Tensor, Tensor, Tensor]:
    """Signals with one bump: its width is the class (2 or 4 samples: 0/1), its centre the box to regress."""
    g = torch.Generator().manual_seed(seed)
    label = torch.randint(0, 2, (n,), generator=g)
    centre = torch.randint(4, WIDTH - 4, (n,), generator=g)
    grid = torch.arange(WIDTH)
    noise = 0.05 * torch.randn(n, WIDTH, generator=g)
    x = ((grid - centre[:, None]).abs() <= label[:, None] + 1).float() + noise
    return x, label, centre.float()[:, None] / WIDTH


class Shifted(Dataset):
    """Each read shifts the signal by up to 8 samples; ``move_box`` moves the box with it."""

    def __init__(self, x: Tensor, label: Tensor, box: Tensor, move_box: bool | None) -> None:
        self.x, self.label, self.box, self.move_box = x, label, box, move_box

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int) -> tuple[Tensor, Tensor, Tensor]:
        shift = int(torch.randint(-8, 9, ())) if self.move_box is not None else 0
        moved = self.box[i] + shift / WIDTH if self.move_box else self.box[i]
        return self.x[i].roll(shift), self.label[i], moved


class Detector(TinyClassifier):
    """A trunk, a class head and a box head; cross-entropy plus the box's L1 error."""

    def __init__(self) -> None:
        super().__init__()
        self.trunk, self.classes, self.box = nn.Linear(WIDTH, 64), nn.Linear(64, 2), nn.Linear(64, 1)

    def forward(self, x: Tensor) -> tuple[Tensor, Tensor]:
        h = F.relu(self.trunk(x))
        return self.classes(h), self.box(h)

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        x, label, box = batch
        logits, predicted = self(x)
        return F.cross_entropy(logits, label) + 5 * F.l1_loss(predicted, box)

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        self.log("val_loss", self.training_step(batch, batch_idx))


@pytest.mark.parametrize("move_box", [False, True, None])
def test_every_target_the_loss_reads_is_paired_with_the_input(move_box: bool | None) -> None:
    torch.manual_seed(0)
    train = DataLoader(Shifted(*bumps(1024, 1), move_box=move_box), batch_size=64, shuffle=True)
    val = DataLoader(Shifted(*bumps(512, 2), move_box=None), batch_size=64)
    report = preflight(
        Detector(),
        train_dataloaders=train,
        val_dataloaders=val,
        checks=[DataCheck()],
        num_threads=1,
        progress=False,
    )
    result = report["data"]
    further = result.details["further_targets"]["2"]  # the box, beside the class (the main target)
    assert {r["fitted_on"] for r in further} == {"train", "val"}
    if move_box is False:
        assert result.status == "fail", result.message
        worst = max(further, key=lambda r: r["z"])
        assert worst["fitted_on"] == "val" and worst["own_score"] - worst["other_score"] >= 0.25
    else:
        assert result.status == "pass", result.message


class EasiestFirst(Sampler[int]):
    """A curriculum at its first stage: only the samples whose noise is in the lowest quarter, shuffled."""

    def __init__(self, noise: Tensor) -> None:
        self.easy = torch.nonzero(noise <= noise.quantile(0.25)).flatten()

    def __len__(self) -> int:
        return len(self.easy)

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(self.easy[torch.randperm(len(self.easy))].tolist())


def test_pairing_is_judged_on_uniform_draws_not_on_what_a_curriculum_serves_first() -> None:
    """On the easy quarter one input feature gives the label away; on all samples (validation) it does not.
    The curriculum is healthy: the relation is compared on samples drawn uniformly from the dataset."""
    g = torch.Generator().manual_seed(0)

    def rows(n: int) -> tuple[Tensor, Tensor, Tensor]:
        label, noise = torch.randint(0, 2, (n,), generator=g), torch.rand(n, generator=g)
        x = torch.randn(n, 8, generator=g)
        x[:, 0] = label + 3 * noise * torch.randn(n, generator=g)  # clean on easy samples, noise on hard
        return x, label, noise

    x, y, noise = rows(2048)
    train = DataLoader(TensorDataset(x, y), batch_size=64, sampler=EasiestFirst(noise))
    val = DataLoader(TensorDataset(*rows(512)[:2]), batch_size=64)
    report = preflight(
        TinyClassifier(), train_dataloaders=train, val_dataloaders=val, checks=[DataCheck()], num_threads=1
    )
    assert report["data"].status == "pass", report["data"].message


class FoldIn(TinyClassifier):
    """A Mult-DAE-like recommender: training reconstructs each user's clicks (target = input); validation
    reads a fold-in share of a held-out user's clicks and is scored on the rest (another map, by design)."""

    def __init__(self) -> None:
        super().__init__(in_features=WIDTH, num_classes=WIDTH)

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        clicks, target = batch
        return F.binary_cross_entropy_with_logits(self(clicks), target)


def _clicks(n: int, seed: int) -> Tensor:
    return (torch.rand(n, WIDTH, generator=torch.Generator().manual_seed(seed)) < 0.2).float()


@pytest.mark.parametrize("validation", ["fold_in", "copy"])
def test_a_reconstruction_in_training_is_not_compared_with_another_map_in_validation(validation: str) -> None:
    """Training copies its input; a validation that asks for held-out items differs by design and is not
    compared. The other way round (validation copying what training denoises) is still judged."""
    train, held = _clicks(512, 0), _clicks(256, 1)
    fold_in = held * (torch.rand(held.shape, generator=torch.Generator().manual_seed(2)) < 0.5)
    val = (fold_in, held - fold_in) if validation == "fold_in" else (held, held)
    data = {
        "train_dataloaders": DataLoader(TensorDataset(train, train), batch_size=64),
        "val_dataloaders": DataLoader(TensorDataset(*val), batch_size=64),
    }
    result = preflight(FoldIn(), **data, checks=[DataCheck()])["data"]
    relation = result.details.get("relation")
    if validation == "fold_in":
        assert relation == "not compared: training reconstructs its input, validation does not", (
            result.message
        )
    else:
        assert relation != "not compared: training reconstructs its input, validation does not"


def _snippets(books: range, seed: int = 0) -> tuple[Tensor, Tensor]:
    """40 snippets of each book (its author ``book % 4``): a weak author style, a strong per-book topic."""
    g = torch.Generator().manual_seed(seed)
    style, topic = torch.randn(4, 16, generator=g), torch.randn(max(books) + 1, 16, generator=g)
    author = torch.tensor([b % 4 for b in books for _ in range(40)])
    book = torch.tensor([b for b in books for _ in range(40)])
    x = 0.5 * style[author] + 1.5 * topic[book] + 0.5 * torch.randn(len(book), 16, generator=g)
    return x, author


@pytest.mark.parametrize("validation", ["books_held_out", "labels_shuffled", "books_held_out_x255"])
def test_validation_from_unseen_books_is_a_population_not_a_pairing(validation: str) -> None:
    """Validation books training never saw lie beyond its reach (training's neighbours are their own book's),
    on training's scale: not scored there. Validation snippets of training's books with their authors shuffled
    are within reach and fail; unseen books on another scale (x 255: a validation-only preprocessing) fail."""
    train_x, train_y = _snippets(range(16))
    val_x, val_y = _snippets(range(16, 24))  # the same authors, new books
    if validation == "labels_shuffled":
        val_x, val_y = _snippets(range(16), seed=0)
        val_x = val_x + 0.3 * torch.randn(val_x.shape, generator=torch.Generator().manual_seed(5))
        val_y = val_y[torch.randperm(len(val_y), generator=torch.Generator().manual_seed(6))]
    if validation == "books_held_out_x255":
        val_x = 255 * val_x
    data = {
        "train_dataloaders": DataLoader(TensorDataset(train_x, train_y), batch_size=64, shuffle=True),
        "val_dataloaders": DataLoader(TensorDataset(val_x, val_y), batch_size=64),
    }
    result = preflight(TinyClassifier(), **data, checks=[DataCheck(num_batches=10)], progress=False)["data"]
    if validation == "books_held_out":  # before: nearest neighbours fit on train 1.00 there, 0.30 on val
        assert result.status == "pass", result.message
    else:
        assert result.status == "fail" and "pairing differs across splits" in result.message, result.message


class Upsampler(pl.LightningModule):
    """A fully convolutional 2x super-resolution net: any image size in, twice the size out."""

    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 4, 3, padding=1))

    def forward(self, x: Tensor) -> Tensor:
        return F.pixel_shuffle(self.net(x), 2)

    def training_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> Tensor:
        return F.mse_loss(self(batch[0]), batch[1])

    def validation_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> None:
        self.log("val_loss", F.mse_loss(self(batch[0]), batch[1]))

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.Adam(self.parameters(), lr=1e-3)


def test_crops_in_training_and_whole_images_in_validation_are_not_an_error() -> None:
    """Training on 8x8 crops and validating on 12x12 images (a fully convolutional model) gives samples of
    two shapes: the pairing has no common rows to compare, so it is left out, not an ``error``."""
    g = torch.Generator().manual_seed(0)
    crops, images = torch.rand(256, 1, 8, 8, generator=g), torch.rand(64, 1, 12, 12, generator=g)
    data = {
        "train_dataloaders": DataLoader(TensorDataset(F.avg_pool2d(crops, 2), crops), batch_size=32),
        "val_dataloaders": DataLoader(TensorDataset(F.avg_pool2d(images, 2), images), batch_size=32),
    }
    result = preflight(Upsampler(), **data, checks=[DataCheck()], num_threads=1, progress=False)["data"]
    assert result.status == "pass", result.message
