"""``split_overlap``'s repeat test: noisy repeats of training samples; each bug has a healthy twin."""

from __future__ import annotations

import math

import pytest
import torch
from torch import Tensor
from torch.utils.data import DataLoader, TensorDataset

from galleries.preflight.families._data_models import MLP, digits, loaders
from lightning_recipes.checks import CheckContext, preflight
from lightning_recipes.checks.data._split_repeats import ALPHA, Repeats, repeat_features, repeat_test
from lightning_recipes.checks.data.split_overlap_check import SplitOverlapCheck
from lightning_recipes.testing import DigitsCNN


def _random_split(x: Tensor, y: Tensor, seed: int = 0, train: float = 0.8) -> dict:
    order = torch.randperm(len(x), generator=torch.Generator().manual_seed(seed))
    cut = int(train * len(x))
    return loaders(x[order[:cut]], y[order[:cut]], x[order[cut:]], y[order[cut:]])


def _subjects(sigma: float, subjects: int = 400, repeats: int = 4, dim: int = 16, seed: int = 0):
    """``repeats`` measurements of each subject (mean N(0, I), noise std ``sigma``): the cosine between two
    measurements of one subject is about ``1 / (1 + sigma^2)``."""
    g = torch.Generator().manual_seed(seed)
    centre = torch.randn(subjects, dim, generator=g)
    x = (centre[:, None] + sigma * torch.randn(subjects, repeats, dim, generator=g)).reshape(-1, dim)
    teacher = torch.randn(dim, 4, generator=torch.Generator().manual_seed(1234))
    return x, (x @ teacher).argmax(-1)


def _run(model, data: dict):
    return preflight(model, **data, checks=["split_overlap"], progress=False)["split_overlap"]


def _cosine_between_repeats(x: Tensor, repeats: int = 4) -> float:
    a = x.reshape(-1, repeats, x.shape[1])
    a = a - a.mean(-1, keepdim=True)
    return float(torch.nn.functional.cosine_similarity(a[:, 0], a[:, 1], dim=-1).mean())


@pytest.mark.parametrize("sigma", [0.1, 0.25])
def test_subject_repeats_split_at_random_fail(sigma):
    """Repeats at cosine 0.94-0.99 (under a fixed 0.99) split at random fail."""
    x, y = _subjects(sigma)
    assert 0.93 < _cosine_between_repeats(x) < 0.995
    result = _run(MLP(), _random_split(x, y))
    assert result.status == "fail", result.message
    repeats = result.details["repeats"]
    assert repeats["flagged"] > repeats["expected"] and result.action
    assert repeats["flagged"] > 0.5 * repeats["queries"] and repeats["chance_p"] < 1e-6
    assert result.details["val_exact"] == 0


def test_subjects_split_by_subject_pass():
    """The healthy twin: the same measurements split by subject (all of a subject's repeats on one side)."""
    x, y = _subjects(0.25)
    cut = 4 * 320  # subjects 0..319 train, 320..399 validation
    result = _run(MLP(), loaders(x[:cut], y[:cut], x[cut:], y[cut:]))
    assert result.status == "pass", result.message
    assert result.details["repeats"]["flagged"] <= 3


def test_validation_equal_to_training_plus_small_noise_fails():
    """Noisy copies (cosine about 0.92, under the fixed 0.99) fail."""
    g = torch.Generator().manual_seed(3)
    x = torch.randn(1200, 16, generator=g)
    y = (x[:, 0] > 0).long()
    noisy = x[:300] + 0.3 * torch.randn(300, 16, generator=g)  # cosine about 0.92 to its original
    result = _run(MLP(classes=2), loaders(x, y, noisy, y[:300]))
    assert result.status == "fail", result.message
    assert result.details["val_near"] == 0  # the fixed cosine 0.99 sees none of them
    assert result.details["repeats"]["flagged"] > 200
    flagged, tested = result.details["repeats"]["flagged"], result.details["repeats"]["queries"]
    assert result.summary.startswith(f"{flagged} of {tested} validation samples sit nearer training than")


def test_gaussian_clusters_split_at_random_pass():
    g = torch.Generator().manual_seed(1)
    centres = 3 * torch.randn(4, 16, generator=g)
    y = torch.randint(0, 4, (2000,), generator=g)
    x = centres[y] + torch.randn(2000, 16, generator=g)
    result = _run(MLP(), _random_split(x, y))
    assert result.status == "pass", result.message
    assert result.details["repeats"]["flagged"] <= 3


def test_digits_split_at_random_pass():
    x_train, y_train, x_val, y_val = digits()
    x, y = torch.cat([x_train, x_val]), torch.cat([y_train, y_val])
    result = _run(DigitsCNN(width=4), _random_split(x, y, seed=2))
    assert result.status == "pass", result.message
    repeats = result.details["repeats"]
    assert repeats["flagged"] <= 3 and 3 < repeats["dimension"] < 30


@pytest.mark.parametrize("dim", [1, 2])
def test_low_dimensional_data_with_close_neighbours_pass(dim):
    """Uniform data in 1 or 2 dimensions: the nearest neighbour is often much closer than the 10th by
    chance; the measured local dimension accounts for it."""
    g = torch.Generator().manual_seed(4)
    x = torch.rand(2000, dim, generator=g)
    y = (x.sum(1) > dim / 2).long()
    result = _run(MLP(in_features=dim, classes=2), _random_split(x, y))
    assert result.status == "pass", result.message
    assert abs(result.details["repeats"]["dimension"] - dim) < 0.5 * dim


def test_augmentation_in_training_only_passes():
    """Five jittered copies of each training sample, independent validation samples: repeats within the
    training set are not overlap."""
    g = torch.Generator().manual_seed(5)
    base = torch.randn(300, 16, generator=g)
    train = (base[:, None] + 0.05 * torch.randn(300, 5, 16, generator=g)).reshape(-1, 16)
    val = torch.randn(300, 16, generator=g)
    result = _run(MLP(classes=2), loaders(train, (train[:, 0] > 0).long(), val, (val[:, 0] > 0).long()))
    assert result.status == "pass", result.message


def test_two_repeats_in_a_small_sample_of_a_large_training_set_are_inconclusive():
    """2 of 40 validation samples repeat training samples among the 512 read of 2048: extrapolated, a 20%
    overlap, but 2 flagged samples happen by chance with probability about 1e-3: neither pass nor fail."""
    g = torch.Generator().manual_seed(6)
    x = torch.randn(2048, 16, generator=g)
    val = torch.randn(40, 16, generator=g)
    val[:2] = x[:2] + 0.25 * torch.randn(2, 16, generator=g)  # cosine about 0.94: no near match at 0.99
    y, y_val = (x[:, 0] > 0).long(), (val[:, 0] > 0).long()
    train_loader = DataLoader(TensorDataset(x, y), batch_size=64)  # not shuffled: the first 512 are read
    val_loader = DataLoader(TensorDataset(val, y_val), batch_size=64)
    result = SplitOverlapCheck(num_batches=8).run(CheckContext(MLP(classes=2), train_loader, val_loader))
    assert result.status == "inconclusive", result.message
    assert result.details["repeats"]["flagged"] == 2 and result.details["val_near"] == 0
    assert "too few samples" in result.summary and "num_batches" in result.action


def test_expected_noise_and_excess_of_the_flagged_count():
    found = Repeats(queries=400, keys=1600, flagged=300, dimension=10.0, median_ratio=0.2)
    assert (
        found.expected == 0.4 and round(found.noise, 2) == 0.63 and round(found.excess_fraction, 3) == 0.749
    )


def test_noisy_repeats_of_training_are_flagged_and_independent_samples_are_not():
    g = torch.Generator().manual_seed(0)
    subjects = torch.randn(300, 16, generator=g)
    a, b = (subjects + 0.2 * torch.randn(300, 16, generator=g) for _ in range(2))
    assert repeat_test(torch.cat([a, torch.randn(300, 16, generator=g)]), b).flagged > 250  # repeats of a
    assert repeat_test(torch.cat([a, b]), torch.randn(300, 16, generator=g)).flagged <= 3  # independent


def test_chance_probability_is_the_poisson_tail():
    found = Repeats(queries=1000, keys=4000, flagged=3, dimension=5.0, median_ratio=0.5)
    lam = ALPHA * 1000
    tail = 1 - sum(math.exp(-lam) * lam**i / math.factorial(i) for i in range(3))
    assert found.chance_p == pytest.approx(tail, rel=1e-5)
    assert Repeats(queries=10, keys=40, flagged=0, dimension=2.0, median_ratio=0.5).chance_p == 1.0


def test_exact_copies_and_ties_are_left_to_the_exact_path():
    """``d_1 = 0`` (exact copy) and ``d_k = 0`` (ten or more exact copies) are not tested."""
    g = torch.Generator().manual_seed(7)
    x = torch.randn(400, 8, generator=g)
    val = torch.cat([x[:50], torch.randn(100, 8, generator=g)])
    found = repeat_test(x, val)
    assert found is not None and found.queries == 100
    binary = torch.randint(0, 2, (800, 3), generator=g).float()  # 8 possible rows: every d_10 is 0
    assert repeat_test(binary, binary[:100].clone()) is None


def test_small_distances_are_exact_despite_large_norms():
    """Float32 ``|a|^2 + |b|^2 - 2ab`` cancels for close points far from the origin; the candidates'
    distances are recomputed in float64."""
    g = torch.Generator().manual_seed(8)
    x = 1000 + torch.rand(2000, 1, generator=g)
    found = repeat_test(x[:1600], x[1600:])
    assert found is not None and found.flagged <= 2


def test_features_pool_large_images_and_keep_small_ones():
    assert repeat_features(torch.zeros(2, 3, 8, 8)).shape == (2, 192)
    assert repeat_features(torch.zeros(2, 1, 64, 64)).shape == (2, 256)


def test_a_large_split_is_searched_within_the_sample_caps():
    """4096 training x 1024 validation samples of 256 features offered: 2048 x 512 searched (the work cap)."""
    g = torch.Generator().manual_seed(9)
    train, val = torch.randn(4096, 256, generator=g), torch.randn(1024, 256, generator=g)
    found = repeat_test(train, val)
    assert found is not None and found.queries == 512 and found.keys == 2048


@pytest.mark.parametrize(("copies", "status"), [(9, "pass"), (60, "fail")])
def test_the_repeat_test_speaks_only_from_fail_fraction(copies, status):
    """Noisy copies of training (cosine about 0.94, below the near threshold) in 3% of validation are within
    the chance law's own error on healthy data (up to 6% on the galleries): pass, with the flagged count in
    ``details``. In 20% of validation they fail."""
    g = torch.Generator().manual_seed(7)
    x, val = torch.randn(1200, 16, generator=g), torch.randn(300, 16, generator=g)
    val[:copies] = x[:copies] + 0.25 * torch.randn(copies, 16, generator=g)
    y, y_val = (x[:, 0] > 0).long(), (val[:, 0] > 0).long()
    result = _run(MLP(classes=2), loaders(x, y, val, y_val))
    assert result.status == status, result.message
    assert result.details["val_near"] == 0 and result.details["val_exact"] == 0
    assert result.details["repeats"]["flagged"] >= 0.8 * copies
