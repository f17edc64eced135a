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


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"batch_size": 0}, "`batch_size` must be an integer >= 1, got 0"),
        ({"batch_size": 8.0}, "`batch_size` must be an integer >= 1, got 8.0"),
        ({"batch_size": True}, "`batch_size` must be an integer >= 1, got True"),
        ({"val_fraction": 1.0}, r"`val_fraction` must be a number in \(0, 1\), got 1.0"),
        ({"val_fraction": float("nan")}, r"`val_fraction` must be a number in \(0, 1\), got nan"),
        ({"seed": 1.5}, "`seed` must be an integer, got 1.5"),
        ({"num_workers": -1}, "`num_workers` must be an integer >= 0, got -1"),
    ],
)
def test_digits_rejects_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        DigitsDataModule(**kwargs)


def test_char_lm_windows_cover_text_and_roundtrip():
    dm = CharLMDataModule(seq_len=50, batch_size=8, max_chars=10_000, val_fraction=0.2)
    dm.setup()
    assert dm.vocab_size > 90
    tokens, target = dm.train_set[3]
    assert dm.decode(tokens) == dm.text[150:200]
    assert dm.decode(target) == dm.text[151:201]
    assert len(dm.train_set) == (8000 - 1) // 50


def test_digits_flatten_must_be_a_bool():
    with pytest.raises(TypeError, match="`flatten`"):
        DigitsDataModule(flatten="yes")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"seq_len": 0}, "`seq_len` must be an integer >= 1, got 0"),
        ({"batch_size": 0}, "`batch_size` must be an integer >= 1, got 0"),
        ({"val_fraction": 0.0}, r"`val_fraction` must be a number in \(0, 1\), got 0.0"),
        ({"max_chars": 0}, "`max_chars` must be an integer >= 1, got 0"),
        ({"num_workers": 0.5}, "`num_workers` must be an integer >= 0, got 0.5"),
    ],
)
def test_char_lm_rejects_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        CharLMDataModule(**kwargs)
