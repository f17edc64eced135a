"""The ``loader`` check: empty loaders fail (and the other checks say why they cannot run), a sampler that
makes rare classes rarer or never serves a class fails, balanced and shuffled samplers pass."""

from __future__ import annotations

import lightning.pytorch as pl
import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset, SubsetRandomSampler, TensorDataset, WeightedRandomSampler

from lightning_recipes.checks import Preflight, preflight
from lightning_recipes.checks.data._loader_samples import (
    dataset_labels,
    distinct_loader,
    served_indices,
    yields_a_batch,
)
from lightning_recipes.checks.data.loader_check import LoaderCheck, compare_shares
from lightning_recipes.checks.loop.schedule_check import ScheduleCheck
from lightning_recipes.testing import TinyClassifier, fast_trainer

SHARES = [700, 200, 60, 40]  # an imbalanced 4-class dataset


def imbalanced(n_per_class: list[int] = SHARES, seed: int = 0) -> TensorDataset:
    generator = torch.Generator().manual_seed(seed)
    y = torch.cat([torch.full((n,), c) for c, n in enumerate(n_per_class)])
    x = torch.randn(len(y), 16, generator=generator) + y[:, None].float()
    return TensorDataset(x, y)


def weights(dataset: TensorDataset, power: float) -> torch.Tensor:
    y = dataset.tensors[1]
    return torch.bincount(y).float()[y] ** power


def run_loader(loader: DataLoader, val: DataLoader | None = None, **kwargs):
    data = {"train_dataloaders": loader, "val_dataloaders": val}
    return preflight(TinyClassifier(), **data, checks=[LoaderCheck(**kwargs)], progress=False)["loader"]


class ListDataset(Dataset):
    """A map-style dataset with no label attribute: labels are read with ``dataset[i]``."""

    def __init__(self, base: TensorDataset) -> None:
        self.x, self.y = base.tensors

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, i: int):
        return self.x[i], int(self.y[i])


# ---------------------------------------------------------------- empty loaders
def test_drop_last_with_a_batch_larger_than_the_dataset_fails_and_every_other_check_says_why():
    data = TensorDataset(torch.randn(20, 16), torch.randint(0, 4, (20,)))
    loader = DataLoader(data, batch_size=32, drop_last=True)
    checks = [LoaderCheck(), "data", "init_loss", "grad_flow", "overfit_batch"]
    report = preflight(TinyClassifier(), train_dataloaders=loader, checks=checks, progress=False)
    result = report["loader"]
    assert result.status == "fail"
    for fact in ("len(dataset)=20", "batch_size=32", "drop_last=True"):
        assert fact in result.details["loader"]
    assert "drop_last=False" in result.action
    for name in ("data", "init_loss", "grad_flow", "overfit_batch"):  # were IndexError `error`s before
        assert report[name].status == "skip", (name, report[name].message)
        assert "yielded no batch" in report[name].message
        assert "batch_size=32" in report[name].message
    assert not report.ok


def test_the_same_data_without_drop_last_passes():
    data = TensorDataset(torch.randn(20, 16), torch.randint(0, 4, (20,)))
    result = run_loader(DataLoader(data, batch_size=32, drop_last=False, shuffle=True))
    assert result.status == "pass", result.message
    assert result.details["batches_per_epoch"] == 1


def test_an_empty_dataset_and_a_sampler_with_no_indices_fail_naming_the_cause():
    empty = TensorDataset(torch.zeros(0, 16), torch.zeros(0, dtype=torch.long))
    result = run_loader(DataLoader(empty, batch_size=8))
    assert result.status == "fail" and "The dataset is empty" in result.action
    data = imbalanced()
    result = run_loader(DataLoader(data, batch_size=8, sampler=SubsetRandomSampler([])))
    assert result.status == "fail" and "yields no index" in result.action


def test_an_empty_validation_loader_fails_and_a_full_one_passes():
    data = imbalanced()
    train = DataLoader(data, batch_size=50, shuffle=True)
    small = TensorDataset(torch.randn(10, 16), torch.randint(0, 4, (10,)))
    result = run_loader(train, DataLoader(small, batch_size=16, drop_last=True))
    assert result.status == "fail"
    assert result.details["split"] == "validation" and "len(dataset)=10" in result.details["loader"]
    assert run_loader(train, DataLoader(small, batch_size=16)).status == "pass"


# ---------------------------------------------------------------- served label distribution
def test_weights_proportional_to_class_frequency_make_rare_classes_rarer_and_fail():
    data = imbalanced()
    sampler = WeightedRandomSampler(weights(data, 1.0), num_samples=len(data))  # meant 1 / counts[y]
    result = run_loader(DataLoader(data, batch_size=50, sampler=sampler))
    assert result.status == "fail", result.message
    assert len(result.summary) <= 120 and result.action
    rare = result.details["classes"]["3"]
    assert rare["served_share"] < 0.5 * rare["dataset_share"] and rare["z"] <= -4
    assert "binomial" in result.details["noise"]


def test_a_balanced_weighted_sampler_serves_rare_classes_more_and_passes():
    data = imbalanced()
    sampler = WeightedRandomSampler(weights(data, -1.0), num_samples=len(data))
    result = run_loader(DataLoader(data, batch_size=50, sampler=sampler))
    assert result.status == "pass", result.message
    rare = result.details["classes"]["3"]
    assert rare["served_share"] > 3 * rare["dataset_share"]


def test_a_sampler_given_one_weight_per_class_draws_two_rows_over_and_over_and_fails_whatever_the_targets():
    """Sealed gallery Z (blind): ``WeightedRandomSampler`` handed the 2 class weights draws rows 0 and 1
    only; the float 0/1 targets of a binary logit skipped the class shares, so nothing said so."""
    data = TensorDataset(torch.randn(2400, 9), (torch.rand(2400) < 0.1).float())
    sampler = WeightedRandomSampler(torch.tensor([0.1, 0.9]), num_samples=2400)  # meant one per row
    result = run_loader(DataLoader(data, batch_size=64, sampler=sampler))
    assert result.status == "fail" and result.details["distinct_served"] == 2, result.message
    assert "from only 2 of the dataset's 2400" in result.summary and result.action
    few = SubsetRandomSampler(list(range(0, 2400, 40)))  # a 2.5% labelled subset, each row once: not a repeat
    assert run_loader(DataLoader(data, batch_size=64, sampler=few)).status == "skip"


class Widening(torch.utils.data.Sampler):
    """A curriculum: epoch ``e`` draws 2,400 times from the easiest ``20 * 10 ** e`` samples."""

    def __init__(self, size: int) -> None:
        self.size, self.epoch = size, 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        return 2400

    def __iter__(self):
        reach = min(self.size, 20 * 10**self.epoch)
        return iter(torch.randint(0, reach, (2400,), generator=torch.Generator().manual_seed(0)).tolist())


def test_a_curriculum_that_repeats_a_few_samples_at_first_and_widens_with_set_epoch_is_not_failed():
    data = TensorDataset(torch.randn(2400, 9), torch.rand(2400))
    result = run_loader(DataLoader(data, batch_size=64, sampler=Widening(2400)))
    assert result.status == "skip" and "distinct_served" not in result.details, result.message


@pytest.mark.parametrize("make", ["shuffle", "uniform_replacement", "random_subset"])
def test_samplers_that_keep_the_shares_pass(make):
    data = imbalanced()
    generator = torch.Generator().manual_seed(1)
    if make == "shuffle":
        loader = DataLoader(data, batch_size=50, shuffle=True)
    elif make == "uniform_replacement":  # binomial noise around the dataset's shares
        sampler = WeightedRandomSampler(torch.ones(len(data)), num_samples=len(data), generator=generator)
        loader = DataLoader(data, batch_size=50, sampler=sampler)
    else:  # an 80% random split through a SubsetRandomSampler (hypergeometric noise)
        indices = torch.randperm(len(data), generator=generator)[:800].tolist()
        loader = DataLoader(data, batch_size=50, sampler=SubsetRandomSampler(indices))
    result = run_loader(loader)
    assert result.status == "pass", result.message


def test_a_class_the_sampler_never_serves_fails_and_a_stratified_subset_passes():
    data = imbalanced()
    y = data.tensors[1]
    without_2 = torch.nonzero(y != 2).flatten().tolist()
    result = run_loader(DataLoader(data, batch_size=50, sampler=SubsetRandomSampler(without_2)))
    assert result.status == "fail", result.message
    assert result.details["classes"]["2"]["served_share"] == 0  # never served
    stratified = [i for c in range(4) for i in torch.nonzero(y == c).flatten()[::2].tolist()]
    result = run_loader(DataLoader(data, batch_size=50, sampler=SubsetRandomSampler(stratified)))
    assert result.status == "pass", result.message


def test_labels_read_with_getitem_when_the_dataset_has_no_label_tensor():
    data = imbalanced()
    listed = ListDataset(data)
    wrong = WeightedRandomSampler(weights(data, 1.0), num_samples=len(data))
    assert run_loader(DataLoader(listed, batch_size=50, sampler=wrong)).status == "fail"
    right = WeightedRandomSampler(weights(data, -1.0), num_samples=len(data))
    assert run_loader(DataLoader(listed, batch_size=50, sampler=right)).status == "pass"


def test_too_few_served_samples_to_tell_is_inconclusive_not_a_fail():
    data = imbalanced()
    generator = torch.Generator().manual_seed(3)
    sampler = WeightedRandomSampler(weights(data, 1.0), num_samples=12, generator=generator)
    result = run_loader(DataLoader(data, batch_size=4, sampler=sampler))
    assert result.status == "inconclusive", result.message
    assert "within sampling noise" in result.message


class TinyRegressor(TinyClassifier):
    def __init__(self) -> None:
        super().__init__(num_classes=1)

    def training_step(self, batch, batch_idx):
        x, y = batch
        return nn.functional.mse_loss(self(x).squeeze(-1), y)


def test_regression_targets_skip_the_distribution_and_say_why():
    data = TensorDataset(torch.randn(64, 16), torch.randn(64))
    loader = DataLoader(data, batch_size=16)
    report = preflight(TinyRegressor(), train_dataloaders=loader, checks=[LoaderCheck()], progress=False)
    assert report["loader"].status == "skip"
    assert "not one integer label per sample" in report["loader"].message


# ---------------------------------------------------------------- inside a real Trainer
@pytest.mark.parametrize(("power", "status"), [(-1.0, "pass"), (1.0, "fail")])
def test_inside_trainer_fit_the_sampler_the_trainer_uses_is_judged(tmp_path, power, status):
    data = imbalanced()
    sampler = WeightedRandomSampler(weights(data, power), num_samples=len(data))
    check = Preflight(checks=[LoaderCheck()], on_fail="warn", print_report=False, progress=False)
    trainer = fast_trainer(max_steps=1, callbacks=[check], default_root_dir=tmp_path)
    if status == "fail":
        with pytest.warns(UserWarning, match="makes class 3 rarer"):
            trainer.fit(TinyClassifier(), DataLoader(data, batch_size=50, sampler=sampler))
    else:
        trainer.fit(TinyClassifier(), DataLoader(data, batch_size=50, sampler=sampler))
    assert check.report is not None and check.report["loader"].status == status


class TargetsAttribute(Dataset):
    """A torchvision-style dataset: ``targets`` as a list, samples loaded in ``__getitem__``."""

    def __init__(self, base: TensorDataset) -> None:
        self.x, y = base.tensors
        self.targets = y.tolist()

    def __len__(self) -> int:
        return len(self.targets)

    def __getitem__(self, i: int):
        raise AssertionError("labels come from `targets`: no sample is loaded for them")


def test_labels_come_from_a_targets_attribute_without_loading_samples():
    data = imbalanced()
    labels = dataset_labels(TargetsAttribute(data), range(len(data)), None)
    assert labels is not None and labels.tolist() == data.tensors[1].tolist()


def test_labels_of_a_tensor_dataset_by_index_and_none_for_float_targets():
    data = TensorDataset(torch.randn(4, 2), torch.tensor([3, 1, 0, 1]))
    assert dataset_labels(data, [3, 0], None).tolist() == [1, 3]
    assert dataset_labels(TensorDataset(torch.randn(4, 2), torch.randn(4)), [0], None) is None


def test_served_indices_batches_and_distinct_samples_read_from_the_sampler():
    served = served_indices(DataLoader(range(5), batch_size=2), max_indices=100)
    assert (served.indices, served.batches, served.complete) == ([0, 1, 2, 3, 4], 3, True)
    assert yields_a_batch(DataLoader(range(3), batch_size=4))
    assert not yields_a_batch(DataLoader(range(3), batch_size=4, drop_last=True))
    assert [b.tolist() for b in distinct_loader(DataLoader(range(10), batch_size=2), [4, 4, 1, 4])] == [
        [4, 1]
    ]


def test_compare_shares_finds_the_class_made_rarer():
    served = torch.tensor([0] * 98 + [1] * 2)  # class 1 made rarer
    rare = compare_shares(torch.tensor([0] * 80 + [1] * 20), served, reference_is_sample=False)[0][0]
    assert (rare.label, rare.served_count, round(rare.ratio, 2), round(rare.z, 1)) == (1, 2, 0.1, -4.5)


class _WriteVerdicts(pl.Callback):
    def __init__(self, flight: Preflight, out) -> None:
        self.flight, self.out = flight, out

    def on_train_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        assert self.flight.report is not None
        loader, schedule = self.flight.report["loader"], self.flight.report["schedule"]
        seen = (loader.status, loader.details.get("served_samples"))
        seen += (schedule.status, schedule.details["total_steps"])
        (self.out / f"rank{trainer.global_rank}.txt").write_text(repr(seen))


class _OneCycle(TinyClassifier):
    def configure_optimizers(self):
        optimizer = torch.optim.SGD(self.parameters(), lr=0.1)
        total = int(self.trainer.estimated_stepping_batches)
        scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=0.1, total_steps=total)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}


def test_ddp_each_rank_judges_the_sampler_the_trainer_wraps_and_its_own_run_length(tmp_path):
    data = imbalanced()
    # Lightning makes the sampler distributed
    sampler = WeightedRandomSampler(weights(data, 1.0), num_samples=len(data))
    checks = [LoaderCheck(), ScheduleCheck()]
    flight = Preflight(checks=checks, on_fail="warn", print_report=False, progress=False)
    callbacks = [flight, _WriteVerdicts(flight, tmp_path)]
    ddp = {"strategy": "ddp_fork", "devices": 2, "default_root_dir": tmp_path}
    trainer = fast_trainer(max_epochs=2, limit_train_batches=2, callbacks=callbacks, **ddp)
    trainer.fit(_OneCycle(), DataLoader(data, batch_size=50, sampler=sampler))
    # each rank serves half of the 1000 draws; the run is 2 epochs x 2 batches (limit_train_batches) per rank
    expected = repr(("fail", 500, "pass", 4))
    outcomes = {path.name: path.read_text() for path in tmp_path.glob("rank*.txt")}
    assert outcomes == {"rank0.txt": expected, "rank1.txt": expected}
