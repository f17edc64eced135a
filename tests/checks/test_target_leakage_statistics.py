"""The arithmetic of ``target_leakage`` (``checks/data/_leakage_statistics.py``) against hand-computed values
and step-by-step references: lookup tables, correlations, label encodings, copy shares and the thresholds."""

from __future__ import annotations

import math

import pytest
import torch

from lightning_recipes.checks.data._leakage_statistics import (
    COPY_MARGIN,
    COPY_SHARE,
    MAX_CLASSES,
    CopyShares,
    abs_pearson,
    class_values,
    copy_leak,
    copy_shares,
    encodes_label,
    lookup_accuracy,
    lookup_leaks,
    loss_changed,
    max_abs_correlation,
    output_moved,
    ranks,
    too_good_bound,
)


def test_lookup_accuracy_by_hand_quantile_bins_one_bin_per_value_and_an_empty_bin():
    """Column 0: 9 distinct values in 3 bins; the quantile positions round(8/3)=3, round(16/3)=5 give edges
    [3, 5], so 0-3 | 4-5 | 6-8 map to labels 0 | 1 | 2; the held-out -1 falls in bin 0 (wrong): 4/5.
    Column 1: one training value (1.0): edges [1, inf], everything in bin 0 (majority label 0): 1/5.
    Column 2: the same training column, held-out values 2.0 land in the empty bin 1, which predicts the
    ``majority`` passed in (2 here, not the bin-0 label): 2/5."""
    x = torch.tensor([[0, 1, 1], [1, 1, 1], [2, 1, 1], [3, 1, 1], [4, 1, 1], [5, 1, 1], [6, 1, 1], [7, 1, 1]])
    x = torch.cat([x, torch.tensor([[8, 1, 1]])]).float()
    y = torch.tensor([0, 0, 0, 0, 1, 1, 2, 2, 2])
    h = torch.tensor([[3.0, 1.0, 2.0], [4.0, 1.0, 2.0], [5.5, 1.0, 2.0], [10.0, 1.0, 2.0], [-1.0, 1.0, 2.0]])
    y_held = torch.tensor([0, 1, 2, 2, 1])
    got = lookup_accuracy(x, h, y, y_held, classes=3, bins=3, majority=torch.tensor(2)).tolist()
    assert got == pytest.approx([4 / 5, 1 / 5, 2 / 5])


def _reference_lookup_accuracy(x, h, y, y_held, classes, bins):
    """Step by step: edges at the training quantiles (the distinct values themselves when there are at most
    ``bins`` of them), a value's bin = number of edges below it, majority label per bin (lowest class on
    ties; the overall majority for an empty bin), held-out accuracy."""
    n = len(x)
    counts_all = [sum(1 for label in y.tolist() if label == c) for c in range(classes)]
    overall = counts_all.index(max(counts_all))
    accuracies = []
    for d in range(x.shape[1]):
        column = sorted(x[:, d].tolist())
        distinct = sorted(set(column))
        if len(distinct) <= bins:  # one bin per value: the edges are the values themselves
            edges = distinct[: bins - 1]
        else:
            edges = [column[i * (n - 1) // bins] for i in range(1, bins)]
        counts = [[0] * classes for _ in range(bins)]
        for value, label in zip(x[:, d].tolist(), y.tolist()):
            counts[sum(e < value for e in edges)][label] += 1
        table = [row.index(max(row)) if sum(row) else overall for row in counts]
        hits = [
            table[sum(e < v for e in edges)] == label for v, label in zip(h[:, d].tolist(), y_held.tolist())
        ]
        accuracies.append(sum(hits) / len(hits))
    return accuracies


def test_lookup_accuracy_matches_the_step_by_step_reference():
    g = torch.Generator().manual_seed(0)
    x = torch.randint(0, 6, (97, 5), generator=g).float()  # (97 - 1) / 4: exact quantile positions
    x[:, 1] = torch.randn(97, generator=g)
    y = torch.randint(0, 3, (97,), generator=g)
    x[:, 2] = y.float() * 2  # a copy of the label
    h = torch.randint(0, 6, (40, 5), generator=g).float()
    y_held = torch.randint(0, 3, (40,), generator=g)
    h[:, 2] = y_held.float() * 2
    majority = torch.bincount(y, minlength=3).argmax()
    got = lookup_accuracy(x, h, y, y_held, 3, 4, majority).tolist()
    want = _reference_lookup_accuracy(x, h, y, y_held, 3, 4)
    assert got == pytest.approx(want)
    assert got[2] == 1.0


def test_a_rare_label_value_gets_a_bin_of_its_own():
    """A copy of the label where one class is rare: quantile edges would merge its value with the next."""
    y = torch.tensor([0] * 2 + [1] * 60 + [2] * 60 + [3] * 60)
    x = y.float()[:, None] + 28
    majority = torch.bincount(y).argmax()
    assert lookup_accuracy(x, x, y, y, 4, 32, majority).item() == 1.0
    assert lookup_accuracy(x, x, y, y, 4, 4, majority).item() == 1.0


def test_abs_pearson_matches_the_formula():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(50, 3, generator=g, dtype=torch.float64)
    y = torch.randn(50, generator=g, dtype=torch.float64)
    x[:, 1] = -3 * y + 2
    x[:, 2] = 1.0  # constant column: 0
    for d in range(2):
        a, b = x[:, d] - x[:, d].mean(), y - y.mean()
        want = abs(float((a * b).sum() / math.sqrt(float((a * a).sum() * (b * b).sum()))))
        assert float(abs_pearson(x, y)[d]) == pytest.approx(want)
    assert float(abs_pearson(x, y)[1]) == pytest.approx(1.0)
    assert float(abs_pearson(x, y)[2]) == 0.0


def test_abs_pearson_by_hand():
    """x = 1..4, y = (1, 3, 2, 4): centred (-1.5, -0.5, 0.5, 1.5) and (-1.5, 0.5, -0.5, 1.5), products sum to
    4, both norms squared are 5: r = 4/5; the negated column gives |r| = 4/5 too."""
    x = torch.tensor([[1.0, -1.0], [2.0, -2.0], [3.0, -3.0], [4.0, -4.0]])
    assert abs_pearson(x, torch.tensor([1.0, 3.0, 2.0, 4.0])).tolist() == pytest.approx([0.8, 0.8])


def test_ranks_and_the_larger_of_pearson_and_spearman():
    assert ranks(torch.tensor([[30.0, 1.0], [10.0, 3.0], [20.0, 2.0]])).tolist() == [[2, 0], [0, 2], [1, 1]]
    y = torch.tensor([1.0, 2.0, 3.0, 4.0])
    x = torch.tensor([[1.0, 1.0], [2.0, 3.0], [3.0, 2.0], [10.0, 4.0]])
    # column 0: monotone in y (Spearman 1) but not affine (Pearson < 1); column 1: ranks (0, 2, 1, 3) give
    # Pearson = Spearman = 4/5 (the hand computation above)
    assert float(abs_pearson(x, y)[0]) < 0.95
    assert max_abs_correlation(x, y).tolist() == pytest.approx([1.0, 0.8])


@pytest.mark.parametrize(
    ("column", "labels", "expected"),
    [
        ([7.0, 7.0, 3.0, 3.0, 5.0, 5.0], [0, 0, 1, 1, 2, 2], True),  # one value per class, all different
        ([7.0, 7.0, 7.0, 7.0, 5.0, 5.0], [0, 0, 1, 1, 2, 2], False),  # classes 0 and 1 share a value
        ([7.0, 6.0, 3.0, 3.0, 5.0, 5.0], [0, 0, 1, 1, 2, 2], False),  # not constant within class 0
        ([7.0, 7.0, 3.0, 3.0, 5.0, 9.0], [0, 0, 1, 1, 2, 3], False),  # a class seen once: no verdict
        ([7.0, 7.0, 7.0, 7.0], [0, 0, 0, 0], False),  # one class present: nothing to tell apart
        ([7.0, 7.0, 3.0, 3.0], [0, 0, 2, 2], True),  # class 1 absent: the two present ones suffice
        ([math.inf, math.inf, 3.0, 3.0], [0, 0, 1, 1], False),  # an infinite value is no encoding
    ],
)
def test_encodes_label_by_hand(column, labels, expected):
    assert encodes_label(torch.tensor(column)[:, None], torch.tensor(labels), classes=4).tolist() == [
        expected
    ]


def test_class_values_tells_labels_from_a_regression_target():
    values, classification = class_values(torch.tensor([3, 1, 3]))
    assert values.tolist() == [1, 3] and classification
    assert class_values(torch.arange(MAX_CLASSES).float())[1]
    assert not class_values(torch.arange(MAX_CLASSES + 1).float())[1]  # 33 integral values: regression
    assert not class_values(torch.tensor([0.0, 0.5, 1.0]))[1]


def test_copy_shares_by_hand():
    """Inputs 5..9, every position trained toward the next input token (the last one toward 0); position 0
    not trained. next: pairs (t, t+1) at t = 1, 2, 3 (t = 0 is inactive): 3 of 3; same: 0 of 4; one back:
    4 trained positions t = 1..4, none equal to input t-1; two back: 3 positions."""
    inputs = torch.tensor([[5, 6, 7, 8, 9]])
    paired = torch.tensor([[6, 7, 8, 9, 0]])
    active = torch.tensor([[False, True, True, True, True]])
    shares, counts = copy_shares(paired, inputs, active)
    assert shares.tolist() == [1.0, 0.0, 0.0, 0.0] and counts.tolist() == [3, 4, 4, 3]
    shares, counts = copy_shares(paired, inputs, torch.zeros(1, 5, dtype=torch.bool))
    assert shares.tolist() == [0.0] * 4 and counts.tolist() == [0] * 4  # no trained position: 0, not NaN


@pytest.mark.parametrize(
    ("shares", "expected"),
    [
        (CopyShares(next=0.4, same=COPY_SHARE, back1=0.0, back2=0.0), "same"),  # at both thresholds' edge
        (CopyShares(next=0.5, same=1.0, back1=0.0, back2=0.0), "same"),  # margin exactly 0.5
        (CopyShares(next=0.51, same=1.0, back1=0.0, back2=0.0), None),  # the next token explains it too
        (CopyShares(next=0.0, same=0.94, back1=0.0, back2=0.0), None),  # below the 95% share
        (CopyShares(next=0.0, same=0.96, back1=0.97, back2=0.0), "back1"),  # the largest copy share
        (CopyShares(next=0.0, same=0.0, back1=1.0, back2=1.0), "back1"),  # ties: the nearest shift
        (CopyShares(next=0.0, same=0.0, back1=0.0, back2=1.0), "back2"),
    ],
)
def test_copy_leak_thresholds(shares, expected):
    assert (COPY_SHARE, COPY_MARGIN) == (0.95, 0.5)
    assert copy_leak(shares) == expected


def test_copy_shares_record_reads_back_in_order():
    assert CopyShares(0.1, 0.2, 0.3, 0.4).as_dict() == {"next": 0.1, "same": 0.2, "back1": 0.3, "back2": 0.4}


def test_lookup_leaks_needs_the_accuracy_and_a_majority_class_of_at_most_90_percent():
    assert lookup_leaks(0.99, 0.9, 0.99)
    assert not lookup_leaks(1.0, 0.91, 0.99)  # a 91% majority class makes any accuracy cheap
    assert not lookup_leaks(0.985, 0.5, 0.99)


def test_loss_changed_is_relative_to_the_loss():
    assert not loss_changed(100.0, 100.0 + 5e-5)  # 5e-5 < 1e-6 x 100
    assert loss_changed(100.0, 100.0 + 2e-4)
    assert loss_changed(-100.0, -100.0 - 2e-4)
    assert not loss_changed(0.0, 0.0) and loss_changed(0.0, 1e-15)  # a zero loss: any change counts


def test_output_moved_is_relative_to_the_largest_output():
    assert not output_moved(1e-5, 1.0)  # exactly the limit: not moved
    assert output_moved(2e-5, 1.0) and not output_moved(2e-5, 10.0)
    assert output_moved(1e-16, 0.0)  # all-zero outputs: any change counts


def test_too_good_bound_is_the_fraction_of_ln_c():
    assert too_good_bound(0.05, 4) == pytest.approx(0.0693147, rel=1e-6)  # 0.05 x 1.3862944
    assert too_good_bound(0.5, 10) == pytest.approx(1.1512925, rel=1e-6)  # 0.5 x 2.3025851
