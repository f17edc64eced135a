"""InputIndependenceCheck: three copies (real pairs, inputs removed, targets permuted), fixed steps."""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch
from torch import Tensor, nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset

from galleries.preflight.stage.data_stages import HEALTHY
from lightning_recipes._stats import held_out_gain
from lightning_recipes.checks import preflight
from lightning_recipes.checks.loss.input_independence_check import (
    InputIndependenceCheck,
    _one_target_for_all,
    loss_drop,
    training_gain,
)
from lightning_recipes.checks.report import SUMMARY_LIMIT
from lightning_recipes.testing import TinyClassifier, random_classification_loader

from . import _models as M


def _run(model: Any, **data: Any) -> Any:
    torch.manual_seed(0)
    check = InputIndependenceCheck(time_budget=None)  # the verdict, not the safety cap, on a loaded machine
    report = preflight(model, **data, checks=[check], num_threads=1, progress=False)
    result = report["input_independence"]
    assert len(result.summary) <= SUMMARY_LIMIT, result.summary
    return result


class ZeroLR(TinyClassifier):
    """Learnable labels, a randomly initialised head, and an optimizer that never moves a weight."""

    def __init__(self) -> None:
        super().__init__()
        nn.init.normal_(self.head.weight, std=0.5)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.0)


@pytest.mark.parametrize("seed", range(10))
def test_a_model_that_does_not_learn_is_inconclusive_never_blamed_on_the_labels(seed: int) -> None:
    torch.manual_seed(seed)
    report = preflight(
        ZeroLR(),
        train_dataloaders=random_classification_loader(seed=seed),
        checks=[InputIndependenceCheck()],
        seed=seed,
        num_threads=1,
        progress=False,
    )
    result = report["input_independence"]
    assert result.status == "inconclusive", result.message
    assert result.details["learned"] is False and result.details["train_loss_drop"] == 0.0


def test_a_learning_model_passes_against_both_controls() -> None:
    result = _run(TinyClassifier(lr=0.5), train_dataloaders=random_classification_loader())
    assert result.status == "pass", result.message
    for control in ("gain_over_targets_permuted", "gain_over_inputs_removed"):
        assert result.details[control]["low"] > 0  # beyond the 99% bound
    assert result.details["steps"] <= 120


def test_shuffled_labels_with_clean_validation_fail() -> None:
    """Labels permuted in training only, clean validation: both controls fail it."""
    clean = M.loader(n=512, shuffle=False, seed=3)
    x, y = clean.dataset.tensors
    shuffled = y[torch.randperm(len(y), generator=torch.Generator().manual_seed(1))]
    result = _run(M.MLP(), train_dataloaders=M.loader_from(x, shuffled), val_dataloaders=M.loader(seed=4))
    assert result.status == "fail", result.message
    fitted = result.details["training_gain_over_targets_permuted"]
    assert fitted["low"] <= 0 and fitted["high"] < result.details["min_improvement"]
    assert result.details["gain_over_inputs_removed"]["low"] <= 0


class PackedGRU(nn.Module):
    """Packs each row by its count of non-zero tokens: a row of zeros (length 0) makes packing raise."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(12, 16, padding_idx=0)
        self.gru, self.head = nn.GRU(16, 16), nn.Linear(16, 3)

    def forward(self, tokens: Tensor) -> Tensor:
        lengths = (tokens != 0).sum(1)
        packed = nn.utils.rnn.pack_padded_sequence(
            self.embed(tokens), lengths, batch_first=True, enforce_sorted=False
        )
        return self.head(self.gru(packed)[1][0])


class Packed(TinyClassifier):
    def __init__(self) -> None:
        super().__init__(lr=0.05)
        self.net = PackedGRU()

    def forward(self, x: Tensor) -> Tensor:
        return self.net(x)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.Adam(self.parameters(), lr=0.01)


def _token_data(seed: int) -> DataLoader:
    g = torch.Generator().manual_seed(seed)
    tokens = torch.randint(1, 12, (256, 8), generator=g)
    tokens[torch.arange(8)[None, :] >= torch.randint(2, 9, (256, 1), generator=g)] = 0  # padding at the end
    return DataLoader(TensorDataset(tokens, tokens[:, 0] % 3), batch_size=32)


def test_a_model_that_raises_on_zero_length_inputs_is_judged_not_errored() -> None:
    """Inputs are removed by giving each sample another's input, which keeps every length valid."""
    result = _run(Packed(), train_dataloaders=_token_data(0), val_dataloaders=_token_data(1))
    assert result.status == "pass", result.message


def test_user_code_that_raises_on_a_perturbed_batch_makes_the_check_inconclusive_not_an_error() -> None:
    """A step that insists on batches sorted by an input feature rejects the controls' inputs (moved to other
    samples): the check abstains, saying why (`perturbed`), instead of reporting an error."""

    class RaisesOnMovedInputs(TinyClassifier):
        def training_step(self, batch: Any, batch_idx: int) -> Tensor:
            x, y = batch
            if not bool((x[1:, 0] >= x[:-1, 0]).all()):
                raise ValueError("inputs not sorted")
            return F.cross_entropy(self(x), y)

    g = torch.Generator().manual_seed(0)
    x = torch.randn(256, 16, generator=g)
    x = x[torch.argsort(x[:, 0])]
    rows = [(x[i : i + 32], (x[i : i + 32, 1] > 0).long()) for i in range(0, 256, 32)]
    result = _run(RaisesOnMovedInputs(), train_dataloaders=DataLoader(rows, batch_size=None))
    assert result.status == "inconclusive", result.message
    assert "raised ValueError on inputs given to other samples" in result.details["abstained"]


@pytest.mark.parametrize(
    ("losses", "num_batches", "fell"),
    [
        ([2.0, 2.2, 1.8, 2.0] * 4, 4, False),  # the same batch, the same loss: nothing learned
        ([2.0, 2.2, 1.8, 2.0, 1.7, 1.9, 1.5, 1.7], 4, True),  # 0.3 lower on every batch, noise 0.115
        ([2.0, 2.2, 1.8, 2.0, 1.95, 2.15, 1.75, 1.95], 4, False),  # 0.05 lower: within the noise
        ([1.0, 2.0, 1.0, 2.0, 1.0, 2.0], 8, False),  # no batch seen twice: halves, no drop
        ([3.0, 2.5, 2.0, 1.5, 1.0, 0.5], 8, True),
        ([2.0, 1.0, math.nan, 0.5], 4, False),  # not finite: no evidence
        ([2.0, 1.0, 0.5], 1, False),  # too few steps
    ],
)
def test_loss_drop_is_learning_beyond_the_losss_own_noise(losses, num_batches, fell) -> None:
    assert loss_drop(losses, num_batches).fell is fell
    assert loss_drop([torch.tensor(v) for v in losses], num_batches).fell is fell  # the check's tensors


def test_healthy_data_split_by_subject_is_not_blamed_on_the_labels() -> None:
    """Subjects memorised by the small copy: the permuted-target control tells it from shuffled labels."""
    (case,) = [c for c in HEALTHY if c.id == "st_ok_repeat_measurements_split_by_subject"]
    result = _run(case.model(), **case.data())
    assert result.status in ("inconclusive", "pass"), result.message
    assert result.details["training_gain_over_targets_permuted"]["low"] > 0


def _images(n: int, seed: int) -> Tensor:
    """Images of 16 pixels on a 2-D manifold (neighbouring pixels alike): a reconstructable signal."""
    g = torch.Generator().manual_seed(seed)
    basis = torch.randn(2, 16, generator=g).cumsum(1) / 4
    return torch.randn(n, 2, generator=g) @ basis + 0.05 * torch.randn(n, 16, generator=g)


class MaskedReconstruction(TinyClassifier):
    """``(image, mask)`` batches: masked pixels hidden, scored by a hand-written loss (any mask fits)."""

    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Linear(16, 16)

    def forward(self, image: Tensor, mask: Tensor) -> Tensor:
        return self.net(image * (1 - mask) - mask)

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        image, mask = batch
        return (((self(image, mask) - image) ** 2) * mask).sum() / mask.sum().clamp_min(1)

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        self.log("val_loss", self.training_step(batch, batch_idx))

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.01)


def test_a_real_pairing_shown_by_the_input_as_prediction_is_never_failed() -> None:
    """Sealed E, masked patches: the input as the prediction shows the pairs are real: no fail (the mask named
    as the target); with the mask only guessed to be the target, the model reads it: the check abstains."""
    g = torch.Generator().manual_seed(1)
    masks = [(torch.rand(n, 16, generator=g) < 0.4).float() for n in (512, 128)]
    train = DataLoader(TensorDataset(_images(512, 2), masks[0]), batch_size=32, shuffle=True)
    val = DataLoader(TensorDataset(_images(128, 3), masks[1]), batch_size=32)
    result = _run(MaskedReconstruction(), train_dataloaders=train, val_dataloaders=val, target_key=1)
    assert result.status in ("pass", "inconclusive"), result.message
    if result.status == "inconclusive":
        assert all(gain["low"] > 0 for gain in result.details["input_as_prediction"].values())
    guessed = _run(MaskedReconstruction(), train_dataloaders=train, val_dataloaders=val)  # the mask, guessed
    assert guessed.status == "skip" and "read by the model" in guessed.summary, guessed.summary


class Denoiser(TinyClassifier):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Linear(16, 16)

    def forward(self, x: Tensor) -> Tensor:
        return self.net(x)

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        x, y = batch
        return F.mse_loss(self(x), y)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.05)


def test_shuffled_targets_shaped_like_the_input_still_fail() -> None:
    """Noisy images served with another image's clean target: the model-free control does not rescue them."""
    clean = _images(512, 1) + 1  # a mean to learn first: the real copy's loss falls
    noisy = clean + 0.3 * torch.randn(clean.shape, generator=torch.Generator().manual_seed(5))
    shuffled = clean[torch.randperm(512, generator=torch.Generator().manual_seed(6))]
    val_clean = _images(128, 2) + 1
    val = DataLoader(TensorDataset(val_clean + 0.3 * torch.randn(128, 16), val_clean), batch_size=32)
    train = DataLoader(TensorDataset(noisy, shuffled), batch_size=32, shuffle=True)
    result = _run(Denoiser(), train_dataloaders=train, val_dataloaders=val)
    assert result.status == "fail", result.message
    shown = result.details["input_as_prediction"]  # validation's pairs are real, training's are not
    assert shown["held_out"]["low"] > 0 and shown["train"]["low"] <= 0


class ClassConditionalDecoder(TinyClassifier):
    """Decodes a digit image from its class (one-hot), by squared error: the class-conditional mean."""

    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(10, 64), nn.ReLU(), nn.Linear(64, 64))

    def forward(self, label: Tensor) -> Tensor:
        return self.net(F.one_hot(label, 10).float())

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        image, label = batch
        return F.mse_loss(self(label), image)

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        self.log("val_loss", self.training_step(batch, batch_idx))

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.Adam(self.parameters(), lr=1e-2)


@pytest.mark.parametrize("sorted_apart", [True, False])
def test_the_permuted_target_control_decides_when_moved_inputs_do_worse(sorted_apart: bool) -> None:
    """Images sorted by ink, labels not: the permuted-target control decides (fail); kept together: pass."""
    from sklearn.datasets import load_digits

    x, y = (torch.as_tensor(a) for a in load_digits(return_X_y=True))
    x, y = x.float() / 16, y.long()
    train_x = x[:1400][x[:1400].sum(1).argsort()] if sorted_apart else x[:1400]
    train = DataLoader(TensorDataset(train_x, y[:1400]), batch_size=32, shuffle=True)
    val = DataLoader(TensorDataset(x[1400:], y[1400:]), batch_size=64)
    result = _run(ClassConditionalDecoder(), train_dataloaders=train, val_dataloaders=val)
    if not sorted_apart:
        assert result.status == "pass", result.message
        return
    assert result.status == "fail", result.message
    assert result.details["gain_over_inputs_removed"]["low"] > 0  # the old rule's control could not decide
    permuted = result.details["gain_over_targets_permuted"]
    assert permuted["low"] <= 0 and permuted["high"] < result.details["min_improvement"]


def test_held_out_gain_is_a_share_with_student_t_bounds():
    real, control = torch.tensor([1.0, 1.1, 0.9, 1.0]), torch.tensor([2.0, 2.2, 1.9, 2.1])
    gain = held_out_gain(real, control)
    assert round(gain.gain, 3) == 0.512 and gain.low > 0
    assert held_out_gain(torch.zeros(3), torch.zeros(3)).gain == 0.0  # both 0: no gain


def test_training_gain_over_block_means():
    real = [torch.tensor(2.0 - 0.01 * i) for i in range(40)]
    control = [torch.tensor(2.0 - 0.005 * i) for i in range(40)]
    gain = training_gain(real, control)
    assert round(gain.gain, 3) == 0.051 and gain.low > 0


def test_one_target_for_all_samples():
    assert _one_target_for_all([(torch.randn(4, 2), torch.ones(4))], {1})
