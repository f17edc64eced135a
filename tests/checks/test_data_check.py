"""``DataCheck``: finite, varied and in-range data; data is pure (reading it does not change it) and paired
(the input-target relation transfers between the splits). Fields, not wording."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import pytest
import torch
from torch import Tensor
from torch.utils.data import DataLoader, Dataset, TensorDataset

from galleries.preflight.families import data as gallery
from galleries.preflight.families._data_models import gaussian, loaders, regression
from lightning_recipes.checks import CheckContext, DataCheck, TrainingPairsCheck, preflight
from lightning_recipes.checks.data.data_check import stored_duplicate_fraction
from lightning_recipes.checks.report import SUMMARY_LIMIT
from lightning_recipes.testing import TinyTransformerLM, random_token_loader
from tests.helpers.saved_results import assert_same_as_saved

from . import _models as M
from ._models import UninspectableLoader


def _unlabelled_batches(count: int = 4) -> list[Tensor]:
    generator = torch.Generator().manual_seed(0)
    return [torch.randn(16, M.IN, generator=generator) for _ in range(count)]


@pytest.mark.parametrize(
    ("model", "loader"),
    [
        (M.MLP, lambda: UninspectableLoader(_unlabelled_batches())),  # no labels, no sampler to inspect
        (M.Regressor, M.regression_loader),  # float targets
        (M.MLP, M.loader),  # labels, a shuffling loader
    ],
)
def test_healthy_batches_pass_with_a_short_summary(model, loader):
    result = DataCheck(num_batches=4).run(CheckContext(model(), loader()))
    assert result.status == "pass", result.message
    assert len(result.summary) <= SUMMARY_LIMIT and result.action == "" and "findings" not in result.details


def _structured(result) -> None:
    assert len(result.summary) <= SUMMARY_LIMIT, result.summary
    assert result.action and result.details["findings"][0] == result.summary


@pytest.mark.parametrize("case", gallery.BUGS, ids=lambda c: c.id)
def test_gallery_bug_is_flagged(case):
    result = preflight(case.model(), **case.data(), checks=[DataCheck()])["data"]
    assert result.status == case.status, result.message
    _structured(result)


@pytest.mark.parametrize("case", gallery.HEALTHY, ids=lambda c: c.id)
def test_gallery_healthy_data_passes(case):
    result = preflight(case.model(), **case.data(), checks=[DataCheck()])["data"]
    assert result.status == "pass", result.message


def _run(x: Tensor, y: Tensor, x_val: Tensor | None = None, y_val: Tensor | None = None, model=None):
    data = loaders(x, y, x_val, y_val)
    context = CheckContext(model or M.MLP(), data["train_dataloaders"], data.get("val_dataloaders"))
    return DataCheck(num_batches=8).run(context)


def test_nonfinite_values_are_counted_per_role():
    x, y = gaussian(256, 0)
    x[5, 2], x[9, 0] = float("inf"), float("-inf")
    result = _run(x, y)
    assert result.status == "fail" and result.details["nonfinite_values"] == 2
    assert result.details["nonfinite_by_tensor"] == {"inputs": {"nan": 0, "inf": 2}}
    x, y = regression(256, 0)
    y[[3, 70]], y[100] = float("nan"), float("inf")
    result = _run(x, y, model=M.Regressor())
    assert result.details["nonfinite_by_tensor"] == {"targets": {"nan": 2, "inf": 1}}
    _structured(result)


@pytest.mark.parametrize(("blank", "status"), [(1, "pass"), (6, "warn"), (16, "fail")])
def test_blank_sample_thresholds(blank, status):
    """256 samples read: 1 blank (0.4%) passes, 6 (2.3%) warn (>= 1%), 16 (6.3%) fail (>= 5%)."""
    x, y = gaussian(256, 0)
    x[:blank] = 0.0
    result = _run(x, y)
    assert result.status == status, result.message
    assert result.details["blank_samples"] == blank and result.details["blank_fraction"] == blank / 256


@pytest.mark.parametrize(("copies", "status"), [(4, "pass"), (20, "warn"), (100, "warn")])
def test_identical_sample_thresholds(copies, status):
    """``copies`` stored samples overwritten with earlier ones: 1.6% passes, 7.8% warns (>= 5%), and 39% warns
    too, since the data itself repeats (what is stored: a reader repeating distinct rows fails, below)."""
    x, y = gaussian(256, 0)
    x[256 - copies :] = x[:copies]
    result = _run(x, y)
    assert result.status == status, result.message
    assert result.details["duplicate_samples"] == copies
    if status != "pass":
        assert result.details["stored_duplicate_fraction"] == copies / 256


def test_the_stored_duplicate_fraction_reads_the_dataset_tensor_shaped_like_the_inputs():
    x = torch.arange(40.0).view(10, 4)
    assert stored_duplicate_fraction(DataLoader(TensorDataset(x, torch.zeros(10))), [x[:2]]) == 0.0


class _RepeatsRows(Dataset):
    """Distinct stored rows, read in runs of 4: ``__getitem__`` drops the index's low bits."""

    def __init__(self, x: Tensor, y: Tensor) -> None:
        self.x, self.y = x, y

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, index: int) -> tuple[Tensor, Tensor]:
        return self.x[index - index % 4], self.y[index - index % 4]


def test_identical_samples_fail_only_when_reading_repeats_distinct_stored_rows():
    x, y = gaussian(256, 0)
    generator = torch.Generator().manual_seed(0)
    train = DataLoader(_RepeatsRows(x, y), batch_size=32, shuffle=True, generator=generator)
    result = DataCheck(num_batches=8).run(CheckContext(M.MLP(), train))
    assert result.status == "fail", result.message
    assert result.details["duplicate_fraction"] > 0.5 and result.details["stored_duplicate_fraction"] == 0.0
    unread = UninspectableLoader(list(train))  # the same batches, nothing stored that the check can read
    assert DataCheck(num_batches=8).run(CheckContext(M.MLP(), unread)).status == "warn"


def test_repeated_token_sequences_are_not_flagged():
    """random_token_loader draws 128 sequences from 64 starts: repeats are the data, not a bug."""
    context = CheckContext(TinyTransformerLM(), random_token_loader(), random_token_loader(seed=1))
    result = DataCheck().run(context)
    assert result.status == "pass", result.message


def test_disjoint_labels_fail_and_a_rare_unseen_class_is_counted():
    x, y = gaussian(512, 0)
    x_val, y_val = gaussian(256, 1)
    result = _run(x, y, x_val, y_val + 4, model=M.MLP(classes=8))
    assert result.status == "fail" and result.details["val_unseen_label_fraction"] == 1.0
    shifted = torch.where(y_val == 3, torch.full_like(y_val, 4), y_val)  # class 4 never in training
    result = _run(x, y, x_val, shifted, model=M.MLP(classes=5))
    assert result.details["val_unseen_label_fraction"] == (y_val == 3).float().mean().item()


def test_swapped_validation_labels_break_the_pairing_and_proper_labels_pass():
    x, y = gaussian(512, 0)
    x_val, y_val = gaussian(256, 1)
    swapped = y_val.clone()
    swapped[y_val == 0], swapped[y_val == 1] = 1, 0  # classes 0 and 1 swapped in validation only
    result = _run(x, y, x_val, swapped)
    assert result.status == "fail", result.message
    relation = result.details["relation"]
    assert relation["own_score"] - relation["other_score"] > 0.35 * relation["own_score"]
    assert _run(x, y, x_val, y_val).status == "pass"


class InPlaceNoise(Dataset):
    """``(noisy, clean)`` pairs; ``in_place`` adds the noise to the stored sample (the bug)."""

    def __init__(self, x: Tensor, in_place: bool) -> None:
        self.x, self.in_place = x, in_place

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int) -> tuple[Tensor, Tensor]:
        clean = self.x[i]
        if self.in_place:
            clean += 0.1 * torch.randn_like(clean)
            return clean, clean
        return clean + 0.1 * torch.randn_like(clean), clean


@pytest.mark.parametrize("in_place", [True, False])
def test_reading_the_data_must_not_change_it_and_the_check_restores_it(in_place):
    x = torch.randn(128, M.IN, generator=torch.Generator().manual_seed(0))
    dataset = InPlaceNoise(x, in_place)
    result = DataCheck(num_batches=1).run(CheckContext(M.Regressor(), DataLoader(dataset, batch_size=16)))
    assert result.status == ("fail" if in_place else "pass"), result.message
    if in_place:
        assert result.details["purity"]["tensor"] == "dataset.x"
        assert result.details["purity"]["changed_elements"] == 64 * M.IN  # 64 samples read, every value
        _structured(result)


# ---- results saved: status and details on cases that reach every branch of the check (every gallery case,
# the broken-data loaders, every threshold), rewritten when the check was rebuilt on its invariants (#34)
# with `PYTHONPATH=. python tests/checks/data/make_golden_results.py`.

GOLDEN = Path(__file__).resolve().parent / "data" / "data_check_results.json"


def _labelled_batches(classes_per_batch: list[list[int]], size: int = 16) -> UninspectableLoader:
    """Batches of Gaussian inputs whose labels cycle through the classes given for each batch."""
    generator = torch.Generator().manual_seed(0)
    batches = []
    for classes in classes_per_batch:
        labels = torch.tensor(classes).repeat(size // len(classes) + 1)[:size]
        batches.append((torch.randn(size, M.IN, generator=generator), labels))
    return UninspectableLoader(batches)


def _dict_batches_with_inf() -> UninspectableLoader:
    """Dict batches whose extra float entry (a sample weight) holds an Inf and a NaN."""
    generator = torch.Generator().manual_seed(0)
    batches = []
    for _ in range(3):
        weight = torch.ones(16)
        weight[2], weight[5] = float("inf"), float("nan")
        x, y = torch.randn(16, M.IN, generator=generator), torch.randint(0, M.C, (16,), generator=generator)
        batches.append({"x": x, "y": y, "weight": weight})
    return UninspectableLoader(batches)


def _golden_gaussian(mutate: Callable[[Tensor, Tensor, Tensor, Tensor], None], classes: int = M.C) -> Any:
    x, y = gaussian(512, 0)
    x_val, y_val = gaussian(256, 1)
    mutate(x, y, x_val, y_val)
    data = loaders(x, y, x_val, y_val)
    return M.MLP(classes=classes), data["train_dataloaders"], data["val_dataloaders"]


def _blank(count: int) -> Callable[[Tensor, Tensor, Tensor, Tensor], None]:
    def mutate(x: Tensor, y: Tensor, x_val: Tensor, y_val: Tensor) -> None:
        x[:count] = 0.0

    return mutate


def _copies(count: int) -> Callable[[Tensor, Tensor, Tensor, Tensor], None]:
    def mutate(x: Tensor, y: Tensor, x_val: Tensor, y_val: Tensor) -> None:
        x[len(x) - count :] = x[:count]

    return mutate


def _swap_01(x: Tensor, y: Tensor, x_val: Tensor, y_val: Tensor) -> None:
    swapped = y_val.clone()
    swapped[y_val == 0], swapped[y_val == 1] = 1, 0
    y_val.copy_(swapped)


def _unseen_class_4(x: Tensor, y: Tensor, x_val: Tensor, y_val: Tensor) -> None:
    y_val[y_val == 3] = 4


def _mostly_unseen(x: Tensor, y: Tensor, x_val: Tensor, y_val: Tensor) -> None:
    y_val.add_(3)  # validation 3..6: only class 3 shared


def _ignored_labels(x: Tensor, y: Tensor, x_val: Tensor, y_val: Tensor) -> None:
    y[::9] = -100
    y_val[::7] = -100


def _nan_unshuffled() -> Any:
    """A NaN input (a fail) from a loader that does not shuffle (a warning): both in one message."""
    x, y = M.nan_loader().dataset.tensors
    return M.MLP(), M.loader_from(x, y, shuffle=False), None


def _gallery_golden(case_id: str) -> Callable[[], Any]:
    def build() -> Any:
        (case,) = [c for c in [*gallery.BUGS, *gallery.HEALTHY] if c.id == case_id]
        data = case.data()
        return case.model(), data["train_dataloaders"], data.get("val_dataloaders")

    return build


GOLDEN_CASES: dict[str, tuple[Callable[[], Any], dict[str, Any]]] = {  # name: (model and loaders, arguments)
    **{f"gallery:{c.id}": (_gallery_golden(c.id), {}) for c in [*gallery.BUGS, *gallery.HEALTHY]},
    "nan_inputs": (lambda: (M.MLP(), M.nan_loader(), None), {}),
    "labels_out_of_range": (lambda: (M.MLP(), M.out_of_range_loader(), None), {}),
    "labels_out_of_range:classes_unknown": (  # the forward fails: no class count to bound the labels
        lambda: (M.MLP(in_features=8), M.out_of_range_loader(), None),
        {},
    ),
    "nan_inputs_unshuffled": (_nan_unshuffled, {}),
    "sorted_unshuffled": (lambda: (M.MLP(), M.sorted_unshuffled_loader(), None), {}),
    "unshuffled": (lambda: (M.MLP(), M.loader(shuffle=False), None), {}),
    "constant_inputs": (lambda: (M.MLP(), M.constant_input_loader(), None), {}),
    "unnormalised_inputs": (lambda: (M.MLP(), M.unnormalised_loader(), None), {}),
    "unnormalised_inputs:max_scale_200": (
        lambda: (M.MLP(), M.unnormalised_loader(), None),
        {"max_scale": 200},
    ),
    "no_labels_uninspectable": (lambda: (M.MLP(), UninspectableLoader(_unlabelled_batches()), None), {}),
    "labels_uninspectable": (lambda: (M.MLP(), _labelled_batches([[0, 1, 2, 3]] * 4), None), {}),
    "some_single_class_batches": (
        lambda: (M.MLP(), _labelled_batches([[2], [0, 1, 2, 3], [1, 3]]), None),
        {},
    ),
    "every_batch_single_class": (lambda: (M.MLP(), _labelled_batches([[2], [0], [3], [1]]), None), {}),
    "float_targets": (lambda: (M.Regressor(), M.regression_loader(), None), {"num_batches": 2}),
    "dict_batch_inf_weights": (
        lambda: (M.MLP(), _dict_batches_with_inf(), None),
        {"input_key": "x", "target_key": "y"},
    ),
    "token_lm_repeats": (
        lambda: (TinyTransformerLM(), random_token_loader(), random_token_loader(seed=1)),
        {},
    ),
    "gaussian_split": (lambda: _golden_gaussian(lambda *_: None), {}),
    "blank_6:warn": (lambda: _golden_gaussian(_blank(6)), {}),
    "blank_6:fractions": (lambda: _golden_gaussian(_blank(6)), {"blank_fractions": (0.002, 0.01)}),
    "copies_30:warn": (lambda: _golden_gaussian(_copies(30)), {}),
    "copies_200:stored": (lambda: _golden_gaussian(_copies(200)), {}),
    "copies_30:fractions": (lambda: _golden_gaussian(_copies(30)), {"duplicate_fractions": (0.5, 0.9)}),
    "labels_swapped": (lambda: _golden_gaussian(_swap_01), {}),
    "val_class_unseen": (lambda: _golden_gaussian(_unseen_class_4, classes=5), {}),
    "val_mostly_unseen": (lambda: _golden_gaussian(_mostly_unseen, classes=7), {}),
    "ignored_labels": (lambda: _golden_gaussian(_ignored_labels), {}),
    "num_classes_given": (lambda: _golden_gaussian(lambda *_: None), {"num_classes": 6, "num_batches": 3}),
}


def golden_result(name: str) -> dict[str, Any]:
    """``DataCheck``'s ``to_dict()`` (without its duration) on ``GOLDEN_CASES[name]``, seeded, no budget."""
    build, kwargs = GOLDEN_CASES[name]
    torch.manual_seed(0)
    model, train, val = build()
    check = DataCheck(time_budget=None, **kwargs)
    result = check.run(CheckContext(model, train, val)).to_dict()
    for key in ("seconds", "summary", "action", "guide", "message"):  # fields compared: status and details
        del result[key]
    result["details"].pop("findings", None)  # sentences: the wording is free to change
    return json.loads(json.dumps(result))


@pytest.mark.parametrize("name", list(GOLDEN_CASES))
def test_results_match_those_saved(name):
    saved = json.loads(GOLDEN.read_text())[name]
    got = golden_result(name)
    assert got["status"] == saved["status"]
    assert_same_as_saved(got, saved)


def _trajectories(episodes: int, seed: int) -> tuple[Tensor, Tensor]:
    """Behaviour cloning: (position, goal) states along 10-step episodes, episode after episode, and the
    expert's action (half the way to the goal, capped): neighbouring rows share a goal and a path."""
    g = torch.Generator().manual_seed(seed)
    pos, goal = 2 * torch.rand(episodes, 2, generator=g) - 1, 2 * torch.rand(episodes, 2, generator=g) - 1
    states, actions = [], []
    for _ in range(10):
        states.append(torch.cat([pos, goal], -1))
        actions.append((0.5 * (goal - pos)).clamp(-0.2, 0.2))
        pos = pos + actions[-1] + 0.05 * torch.randn(episodes, 2, generator=g)
    return torch.stack(states, 1).flatten(0, 1), torch.stack(actions, 1).flatten(0, 1)


class _Cloner(pl.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(4, 64), torch.nn.Tanh(), torch.nn.Linear(64, 2))

    def forward(self, x: Tensor) -> Tensor:
        return self.net(x)

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        return torch.nn.functional.mse_loss(self(batch[0]), batch[1])

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.Adam(self.parameters(), lr=1e-3)


def _data_result(x: Tensor, y: Tensor, x_val: Tensor, y_val: Tensor) -> Any:
    torch.manual_seed(0)
    report = preflight(
        _Cloner(), **loaders(x, y, x_val, y_val), checks=[DataCheck()], num_threads=1, progress=False
    )
    return report["data"]


def test_rows_served_in_runs_are_not_paired_with_their_own_neighbours() -> None:
    """Sealed E: rows served episode after episode are split in order, so the healthy data passes."""
    x, y = _trajectories(100, 1)
    x_val, y_val = _trajectories(30, 2)
    result = _data_result(x, y, x_val, y_val)
    assert result.status == "pass", result.message


def test_a_training_only_shuffle_of_rows_served_in_runs_is_still_caught() -> None:
    """Training actions shuffled across rows, validation episodes intact: ``training_pairs`` (the copy
    taught by validation halves against the one taught by training batches) sees it; ``data`` no longer
    fits a rule on validation to score augmented training reads (issue #34)."""
    x, y = _trajectories(200, 1)
    x_val, y_val = _trajectories(60, 2)
    shuffled = y[torch.randperm(len(y), generator=torch.Generator().manual_seed(7))]
    torch.manual_seed(0)
    checks = [TrainingPairsCheck(time_budget=None)]
    report = preflight(_Cloner(), **loaders(x, shuffled, x_val, y_val), checks=checks, num_threads=1)
    result = report["training_pairs"]
    assert result.status in ("fail", "warn"), result.message
    assert result.details["held_out_loss"]["training"] > result.details["held_out_loss"]["validation"]
