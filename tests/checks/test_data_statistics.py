"""The pure parts of ``DataCheck`` (issue 23): the input scans of ``data_check.py``, the label statistics of
``_data_statistics.py`` and its split comparison, against values computed by hand."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from lightning_recipes.checks.data._statistics import (
    ClassMixing,
    LabelRange,
    LabelShift,
    RemappedClass,
    Remapping,
    class_counts,
    class_mixing,
    distribution_shift,
    label_range,
    labelled,
    labels_in_range,
    proportions,
    remapped_classes,
    split_labels,
)
from lightning_recipes.checks.data.data_check import (
    InputScale,
    NonFinite,
    SampleScan,
    compare_splits,
    input_scale,
    scan_nonfinite,
    scan_samples,
)

NAN, INF = float("nan"), float("inf")


# ---------------------------------------------------------------- input scans


def test_nonfinite_counts_per_role_in_role_order_skipping_clean_roles_and_integer_tensors():
    x1, y1, w1 = torch.tensor([[NAN, 1.0], [INF, NAN]]), torch.tensor([0, 1]), torch.tensor([1.0, -INF])
    x2, y2, w2 = torch.tensor([[0.0, 1.0], [2.0, 3.0]]), torch.tensor([1, 0]), torch.tensor([NAN, INF])
    batches = [{"x": x1, "y": y1, "w": w1}, {"w": w2, "x": x2, "y": y2}]  # the role, not the order, counts
    found = scan_nonfinite(batches, [x1, x2], [y1, y2])
    assert found == (NonFinite("inputs", 2, 1), NonFinite("other tensors", 1, 2))


def test_nonfinite_targets_are_found_by_identity_and_a_clean_batch_gives_nothing():
    x, y = torch.zeros(2, 3), torch.tensor([NAN, 2.0])
    assert scan_nonfinite([(x, y)], [x], [y]) == (NonFinite("targets", 1, 0),)
    assert scan_nonfinite([(x, y.nan_to_num())], [x], [None]) == ()


def test_input_scale_averages_the_batch_means_and_unbiased_stds_and_lists_constant_batches():
    scale = input_scale([torch.tensor([[1.0, 3.0], [5.0, 7.0]]), torch.full((2, 2), 2.0)])
    assert scale.mean == pytest.approx((4.0 + 2.0) / 2)
    assert scale.std == pytest.approx((math.sqrt(20 / 3) + 0.0) / 2)  # std of 1, 3, 5, 7 is sqrt(20/3)
    assert scale.constant == (1,)


def test_input_scale_reads_nan_as_zero_and_a_batch_with_nan_is_not_constant():
    scale = input_scale([torch.tensor([NAN, 2.0])])
    assert (scale.mean, scale.constant) == (pytest.approx(1.0), ())
    assert scale.std == pytest.approx(math.sqrt(2.0))  # std of 0, 2


def test_sample_scan_counts_blank_and_repeated_samples_across_batches_of_one_shape():
    a = torch.tensor([[1.0, 2.0, 3.0, 4.0], [5.0, 5.0, 5.0, 5.0], [1.0, 2.0, 3.0, 4.0]])
    b = torch.tensor([[0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0], [1.0, 2.0, 3.0, 4.0], [9.0, 8.0, 7.0, 6.0]])
    scan = scan_samples([a, b])
    # blank: a[1], b[0], b[1] (equal blanks are not counted as repeats); repeats: 2 of the four [1, 2, 3, 4]
    assert scan == SampleScan(total=7, blank=3, blank_example=(0, 1), duplicates=2, checked_for_duplicates=4)
    assert (scan.blank_fraction, scan.duplicate_fraction) == (3 / 7, 0.5)


def test_sample_scan_does_not_count_repeated_token_sequences_and_skips_tiny_samples():
    tokens = torch.tensor([[0, 0, 0, 0], [1, 2, 3, 4], [1, 2, 3, 4]])
    scan = scan_samples([tokens, torch.zeros(5, 3), torch.zeros(8), None])
    assert scan == SampleScan(total=3, blank=1, blank_example=(0, 0), duplicates=0, checked_for_duplicates=0)
    assert scan.duplicate_fraction == 0.0
    assert scan_samples([torch.zeros(5, 3), torch.zeros(8), None]) is None


def test_sample_scan_groups_by_shape_and_gives_the_first_blank_of_the_first_group():
    wide, narrow = torch.ones(2, 6), torch.arange(8.0).view(2, 4)
    narrow[1] = 7.0
    scan = scan_samples([narrow, wide])  # the narrow group comes first; only wide's rows are both blank
    assert scan is not None and (scan.total, scan.blank, scan.blank_example) == (4, 3, (0, 1))


# ---------------------------------------------------------------- label statistics


def test_labelled_keeps_one_integer_label_per_sample():
    x = torch.zeros(2, 3)
    good = (x, torch.tensor([0, 1]))
    pairs = [
        good,
        (x, torch.tensor([0.0, 1.0])),
        (x, torch.tensor([True, False])),
        (x, torch.ones(2, 2).long()),
    ]
    assert labelled([*pairs, (x, None)]) == [good]


def test_class_counts_label_range_and_proportions():
    assert class_counts(torch.tensor([3, 1, 3, 3, -2])) == {-2: 1, 1: 1, 3: 3}
    assert label_range({k: 1 for k in (5, 0, 2, 1, 4, 3)}) == "{0, 1, 2, 3, 4, 5}"  # 6 labels: all shown
    assert label_range({k: 1 for k in range(7)}) == "{0, 1, ..., 6} (7 labels)"
    assert proportions({2: 1, 0: 3, 1: 4}) == "1: 50%, 0: 38%, 2: 12%"  # 3/8 = 37.5% rounds to even
    assert proportions({0: 1, 1: 1, 2: 1, 3: 1, 4: 6}) == "4: 60%, 0: 10%, 1: 10%, 2: 10%, ..."


def test_distribution_shift_on_hand_computed_tables():
    # 50/50 vs 20/80: tv 0.3; expected 35 and 65 per cell: chi2 = 2 (15^2/35 + 15^2/65), df 1 (bar 8.07)
    shift = distribution_shift({0: 50, 1: 50}, {0: 20, 1: 80})
    assert shift.tv == pytest.approx(0.3) and shift.df == 1
    assert shift.chi2 == pytest.approx(2 * (225 / 35 + 225 / 65))
    assert shift.significant
    # disjoint labels: tv 1, every expected count 5: chi2 = 4 * 25 / 5
    assert distribution_shift({0: 10}, {1: 10}) == LabelShift(tv=1.0, chi2=20.0, df=1, significant=True)


def test_distribution_shift_matches_the_chi_square_formula():
    train, val = {0: 50, 1: 30, 2: 20}, {0: 10, 1: 10, 2: 40}
    n_train, n_val = 100, 60
    chi2 = 0.0
    for k in (0, 1, 2):
        for observed, n in ((train[k], n_train), (val[k], n_val)):
            expected = (train[k] + val[k]) * n / (n_train + n_val)
            chi2 += (observed - expected) ** 2 / expected
    tv = 0.5 * (abs(0.5 - 10 / 60) + abs(0.3 - 10 / 60) + abs(0.2 - 40 / 60))
    shift = distribution_shift(train, val)
    assert shift.chi2 == pytest.approx(chi2) and shift.tv == pytest.approx(tv) and shift.df == 2
    assert shift.significant == (tv > 0.2 and chi2 > 2 + 5 * math.sqrt(4))


def test_distribution_shift_needs_both_a_large_tv_and_a_large_chi2():
    small = distribution_shift({0: 3, 1: 2}, {0: 1, 1: 4})  # tv 0.4 but 10 samples: chi2 = 5/3 < 8.07
    assert small.tv == pytest.approx(0.4) and small.chi2 == pytest.approx(5 / 3) and not small.significant
    mild = distribution_shift({0: 9, 1: 91}, {0: 29, 1: 71})  # tv exactly 0.2 (in floats too), chi2 13.0
    assert mild.tv == 0.2 and mild.chi2 == pytest.approx(200 / 19 + 200 / 81) and not mild.significant
    assert distribution_shift({0: 9, 1: 91}, {0: 30, 1: 70}).significant  # tv 0.21


def test_label_shift_details_keep_the_saved_keys_and_order_and_the_record_is_frozen():
    shift = LabelShift(0.5, 3.0, 2, False)
    assert list(shift.details().items()) == [("tv", 0.5), ("chi2", 3.0), ("df", 2), ("significant", False)]
    with pytest.raises(dataclasses.FrozenInstanceError):
        shift.tv = 0.0  # type: ignore[misc]


def _clusters(labels: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
    """Three samples per label at the one-hot point of the label (4 features)."""
    y = torch.tensor(labels).repeat_interleave(3)
    return torch.nn.functional.one_hot(y, 4).float(), y


def test_remapped_classes_names_the_classes_whose_validation_mean_sits_on_another_class():
    x, y = _clusters([0, 1, 2])
    x_val, y_val = x.clone(), y.clone()
    y_val[y == 0], y_val[y == 1] = 1, 0  # 0 and 1 swapped in validation
    keep, keep_val = torch.ones(9, dtype=torch.bool), torch.ones(9, dtype=torch.bool)
    remapping = remapped_classes([(x, y)], [(x_val, y_val)], keep, keep_val, {0, 1, 2})
    assert remapping is not None and remapping.compared == 3
    # standardised one-hot means: each class's mean is (2, -1, -1) / sqrt(3) rotated: cosine 1 to itself,
    # (-2 - 2 + 1) / 6 = -0.5 to another class
    assert [(c.val, c.train) for c in remapping.classes] == [(0, 1), (1, 0)]
    assert [(c.similarity, c.own) for c in remapping.classes] == [pytest.approx((1.0, -0.5))] * 2
    assert remapping.flagged  # 2 of 3 classes
    pairs, compared = remapping.details()
    assert compared == 3 and [p[:2] for p in pairs] == [(0, 1), (1, 0)]
    assert pairs[0][2:] == (remapping.classes[0].similarity, remapping.classes[0].own)


def test_remapped_classes_drops_ignored_samples_and_classes_with_fewer_than_three():
    x, y = _clusters([0, 1, 2])
    keep = torch.ones(9, dtype=torch.bool)
    keep_val = keep.clone()
    keep_val[6] = False  # class 2 keeps 2 validation samples: only 0 and 1 are compared
    remapping = remapped_classes([(x, y)], [(x, y)], keep, keep_val, {0, 1, 2})
    assert remapping == Remapping(classes=(), compared=2) and not remapping.flagged
    keep_val[3] = False  # class 1 too: one class left, nothing to compare
    assert remapped_classes([(x, y)], [(x, y)], keep, keep_val, {0, 1, 2}) is None


def test_remapped_classes_needs_float_inputs_of_one_shape():
    x, y = _clusters([0, 1])
    keep = torch.ones(6, dtype=torch.bool)
    assert remapped_classes([(x, y)], [(x[:, :3], y)], keep, keep, {0, 1}) is None
    assert remapped_classes([(x.long(), y)], [(x.long(), y)], keep, keep, {0, 1}) is None
    assert remapped_classes([(None, y)], [(x, y)], keep, keep, {0, 1}) is None


@pytest.mark.parametrize(
    ("remapped", "compared", "flagged"),
    [(2, 2, True), (1, 2, False), (2, 3, True), (2, 4, True), (2, 5, False), (3, 5, True)],
)
def test_remapping_is_flagged_from_half_of_the_classes_and_at_least_two(remapped, compared, flagged):
    classes = tuple(RemappedClass(i, i + 1, 0.9, 0.1) for i in range(remapped))
    assert Remapping(classes, compared).flagged is flagged


def test_records_are_frozen():
    for record in (NonFinite("inputs", 1, 0), InputScale(0.0, 1.0, ()), RemappedClass(0, 1, 0.9, 0.1)):
        with pytest.raises(dataclasses.FrozenInstanceError):
            record.role = "x"  # type: ignore[union-attr]


def test_labels_in_range_counts_negatives_and_labels_past_the_class_count_but_not_the_ignore_index():
    labels = [torch.tensor([0, 3, -100, 4]), torch.tensor([[-1, 2], [7, 0]])]
    assert labels_in_range(labels, 4, ignore_index=-100) == LabelRange(3, low=-1, high=7)
    assert labels_in_range(labels, None, ignore_index=-100) == LabelRange(1, low=-1, high=-1)
    assert labels_in_range(labels, 8, ignore_index=-1) == LabelRange(1, low=-100, high=-100)
    assert labels_in_range([torch.tensor([0, 1])], 2, ignore_index=-100) == LabelRange(0)


def test_class_mixing_single_class_batches_need_8_samples_and_the_ignore_index_is_no_class():
    eight_zeros = torch.zeros(8, dtype=torch.long)
    with_ignored = torch.tensor([1] * 7 + [-100])
    short = torch.full((7,), 2)
    mixing = class_mixing([eight_zeros, with_ignored, short, torch.tensor([[0, 1]])], ignore_index=-100)
    # batches of one label per sample: 3; single: 0 and 1 (7 samples is too few); classes 0, 1, 2, -100
    assert mixing == ClassMixing(batches=3, single=(0, 1), classes=4, sorted=False)
    assert not mixing.all_single
    assert class_mixing([torch.tensor([[0, 1]]), torch.tensor([5])], ignore_index=-100) is None


def test_class_mixing_sorted_needs_two_classes_and_all_single_needs_two_classes():
    ordered = class_mixing([torch.tensor([0, 0, 1]), torch.tensor([1, 2, 2])], ignore_index=-100)
    assert ordered is not None and ordered.sorted and ordered.classes == 3
    one_class = class_mixing([torch.zeros(8).long(), torch.zeros(8).long()], ignore_index=-100)
    assert one_class == ClassMixing(batches=2, single=(0, 1), classes=1, sorted=False)
    assert not one_class.all_single  # the whole dataset may be one class: nothing to mix
    assert class_mixing([torch.zeros(8).long(), torch.ones(8).long()], -100).all_single  # type: ignore[union-attr]


def test_split_labels_drop_unlabelled_batches_and_ignored_samples():
    x = torch.zeros(4, 2)
    train = [(x, torch.tensor([0, 1, 1, -100])), (x, torch.rand(4)), (x, None)]
    val = [(x, torch.tensor([1, 2, 2, 2]))]
    found = split_labels(train, val, ignore_index=-100)
    assert found is not None and len(found.train) == 1 and len(found.val) == 1
    assert found.keep_train.tolist() == [True, True, True, False] and found.keep_val.all()
    assert (found.train_counts, found.val_counts, found.shared) == ({0: 1, 1: 2}, {1: 1, 2: 3}, {1})
    assert (found.unseen, found.unseen_fraction) == (3, 0.75)
    assert split_labels(train, [(x, torch.rand(4))], ignore_index=-100) is None
    assert split_labels(train, [(x, torch.full((4,), -100))], ignore_index=-100) is None


# ---------------------------------------------------------------- the split comparison


def _split(train: list[int], val: list[int], x_train=None, x_val=None):
    """``SplitLabels`` of one training and one validation batch (inputs: zeros unless given)."""
    y, y_val = torch.tensor(train), torch.tensor(val)
    x = torch.zeros(len(train), 4) if x_train is None else x_train
    xv = torch.zeros(len(val), 4) if x_val is None else x_val
    found = split_labels([(x, y)], [(xv, y_val)], ignore_index=-100)
    assert found is not None
    return found


def test_comparison_stops_at_disjoint_labels_with_only_the_counts_in_details():
    comparison = compare_splits(_split([0, 0, 1], [2, 3]))
    assert comparison.stage == "disjoint" and comparison.warns == ()
    assert list(comparison.details()) == ["train_class_counts", "val_class_counts"]
    assert "disjoint: training has classes {0, 1}, validation {2, 3}" in comparison.fails[0]


def test_comparison_fails_from_half_of_the_validation_labels_unseen():
    comparison = compare_splits(_split([0, 1], [1, 2]))  # unseen 1 of 2: exactly the bar
    assert comparison.stage == "unseen" and comparison.details()["val_unseen_label_fraction"] == 0.5
    assert comparison.fails[0].startswith("50% of the validation samples carry labels never seen")
    below = compare_splits(_split([0, 1], [1, 1, 2]))  # 1 of 3: below the bar, reported only from 3 samples
    assert below.stage == "shift" and below.fails == () and below.remapping is None
    assert list(below.details()) == [
        "train_class_counts",
        "val_class_counts",
        "val_unseen_label_fraction",
        "remapped_classes",
        "label_distribution",
    ]


def test_comparison_warns_on_three_unseen_samples_and_on_a_shifted_distribution():
    train = [0] * 50 + [1] * 50
    val = [0] * 20 + [1] * 77 + [2] * 3  # 3 unseen (3%)
    comparison = compare_splits(_split(train, val))
    assert comparison.stage == "shift" and comparison.fails == ()
    assert comparison.shift is not None and comparison.shift.significant
    unseen, shifted = comparison.warns
    assert unseen.startswith("3 validation sample(s) (3.0%) carry labels absent")
    # tv = (0.30 + 0.27 + 0.03) / 2; chi2 = 2 (15^2/35 + 13.5^2/63.5 + 1.5^2/1.5) = 21.6 > 2 + 5 sqrt(4) = 12
    assert shifted.startswith(
        "the label distribution differs between the splits: total variation 0.30 (chi-square 21.6 on 2"
    )
    assert "training 0: 50%, 1: 50%, validation 1: 77%, 0: 20%, 2: 3%" in shifted


def test_comparison_stops_at_remapped_classes_and_names_them():
    x, y = _clusters([0, 1, 2])
    y_val = y.clone()
    y_val[y == 0], y_val[y == 1] = 1, 0
    comparison = compare_splits(_split(y.tolist(), y_val.tolist(), x, x.clone()))
    assert comparison.stage == "remapped" and comparison.shift is None and comparison.warns == ()
    assert comparison.details()["remapped_classes"] == comparison.remapping.details()  # type: ignore[union-attr]
    assert "label_distribution" not in comparison.details()
    assert "mean input of 2 of 3 validation classes" in comparison.fails[0]
    assert "val 0 looks like train 1 (similarity 1.00 vs -0.50 to train 0)" in comparison.fails[0]


def test_split_comparison_and_label_records_are_frozen():
    comparison = compare_splits(_split([0, 1], [1, 2]))
    for record, field in (
        (comparison, "stage"),
        (LabelRange(0), "low"),
        (ClassMixing(1, (), 2, False), "sorted"),
    ):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(record, field, None)
