"""The fine-tuning demo: the class split, a tiny run through `main`, argument errors (help: test_cli_help)."""

from __future__ import annotations

import pytest
import torch

from lightning_recipes.demos.finetuning import VARIANTS, main, split_digits


def test_split_keeps_old_and_new_digits_apart():
    data = split_digits(seed=0, shots=4)
    x, y = data["pretrain"].tensors
    assert sorted(set(y.tolist())) == [0, 1, 2, 3, 4] and len(y) > 500
    fx, fy = data["finetune"].tensors
    assert fy.bincount().tolist() == [4] * 5  # 4 shots of each of 5-9, relabelled 0-4
    vx, vy = data["val"].tensors
    assert sorted(set(vy.tolist())) == [0, 1, 2, 3, 4]
    # no fine-tuning image is a validation image, and none of them is a pretraining image
    flat = lambda t: {tuple(row.tolist()) for row in t.flatten(1)}  # noqa: E731
    assert not flat(fx) & flat(vx)
    assert not flat(fx) & flat(x)
    assert torch.equal(split_digits(seed=0, shots=4)["finetune"].tensors[0], fx)  # seeded


def test_main_runs_every_variant_and_prints_the_table(capsys):
    assert main(["--seeds", "3", "--shots", "2", "--pretrain-epochs", "1", "--finetune-epochs", "3"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "fine-tuning demo: digits 0-4 -> 2 images per digit 5-9, seeds [3]"
    rows = {line.split()[0]: line.split()[1:] for line in lines[2:5]}
    assert list(rows) == list(VARIANTS)
    for accuracy, mean, _, std in rows.values():  # one seed: the mean is that run, the spread 0
        assert 0.0 <= float(accuracy) <= 1.0 and mean == accuracy and std == "0.0000"
    assert lines[5].startswith("wall time ")


@pytest.mark.parametrize(
    ("argv", "match"),
    [
        (["--shots", "0"], "`--shots` must be >= 1, got 0"),
        (["--finetune-epochs", "2"], "`--finetune_epochs` must be >= 3"),  # kebab accepted, snake documented
        (["--pretrain_epochs", "0"], "`--pretrain_epochs` must be >= 1, got 0"),
        (["--threads", "0"], "`--threads` must be >= 1, got 0"),
    ],
)
def test_bad_arguments_are_named(argv, match):
    with pytest.raises(ValueError, match=match):
        main(argv)
