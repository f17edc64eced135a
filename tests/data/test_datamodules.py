import pytest
import torch

from lightning_recipes.data import CharLMDataModule, DigitsDataModule


def test_digits_split_is_stratified_disjoint_and_deterministic():
    a, b = DigitsDataModule(seed=3), DigitsDataModule(seed=3)
    a.setup(), b.setup()
    assert torch.equal(a.val_set.tensors[1], b.val_set.tensors[1])
    val_counts = torch.bincount(a.val_set.tensors[1], minlength=10)
    assert val_counts.min() >= 35 and val_counts.max() <= 37
    assert len(a.train_set) + len(a.val_set) == 1797
    assert float(a.train_set.tensors[0].max()) == 1.0


def test_char_lm_windows_cover_text_and_roundtrip():
    dm = CharLMDataModule(seq_len=50, batch_size=8, max_chars=10_000, val_fraction=0.2)
    dm.setup()
    assert dm.vocab_size > 90
    tokens, target = dm.train_set[3]
    assert dm.decode(tokens) == dm.text[150:200]
    assert dm.decode(target) == dm.text[151:201]
    assert len(dm.train_set) == (8000 - 1) // 50


@pytest.mark.parametrize(
    ("datamodule", "kwargs", "error"),
    [
        (DigitsDataModule, {"batch_size": 0}, ValueError),
        (DigitsDataModule, {"batch_size": 8.0}, ValueError),
        (DigitsDataModule, {"batch_size": True}, ValueError),
        (DigitsDataModule, {"val_fraction": 1.0}, ValueError),
        (DigitsDataModule, {"val_fraction": float("nan")}, ValueError),
        (DigitsDataModule, {"seed": 1.5}, ValueError),
        (DigitsDataModule, {"num_workers": -1}, ValueError),
        (DigitsDataModule, {"flatten": "yes"}, TypeError),
        (CharLMDataModule, {"seq_len": 0}, ValueError),
        (CharLMDataModule, {"batch_size": 0}, ValueError),
        (CharLMDataModule, {"val_fraction": 0.0}, ValueError),
        (CharLMDataModule, {"max_chars": 0}, ValueError),
        (CharLMDataModule, {"num_workers": 0.5}, ValueError),
    ],
)
def test_bad_arguments_are_refused_naming_the_argument_and_value(datamodule, kwargs, error):
    ((argument, value),) = kwargs.items()
    with pytest.raises(error, match=f"`{argument}`") as raised:
        datamodule(**kwargs)
    assert f"got {value!r}" in str(raised.value)
