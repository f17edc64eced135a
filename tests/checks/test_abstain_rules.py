"""Issue #34's "understand or abstain" rules: labels judged against the loss that consumes them, near copies
not judged on a dense training split, a sampled output not judged as a mode bug."""

from __future__ import annotations

import lightning.pytorch as pl
import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.utils.data import DataLoader, TensorDataset

from lightning_recipes.checks import CheckContext, DataCheck, EvalModeCheck, SplitOverlapCheck


class _Module(pl.LightningModule):
    def __init__(self, net: nn.Module) -> None:
        super().__init__()
        self.net = net

    def forward(self, x: Tensor) -> Tensor:
        return self.net(x)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.Adam(self.parameters(), lr=1e-3)


class BorderIgnoringSegmenter(_Module):
    """Per-pixel cross-entropy over 3 classes; border pixels are labelled 255 and ignored by the loss."""

    def __init__(self) -> None:
        super().__init__(nn.Conv2d(1, 3, 3, padding=1))

    def training_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> Tensor:
        x, y = batch
        return F.cross_entropy(self(x), y, ignore_index=255)


class Coral(_Module):
    """CORAL ordinal regression: K = 5 ranks, K - 1 = 4 cumulative logits, a BCE per threshold."""

    def __init__(self) -> None:
        super().__init__(nn.Linear(6, 4))

    def training_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> Tensor:
        x, y = batch
        levels = (y[:, None] > torch.arange(4)).float()
        return F.binary_cross_entropy_with_logits(self(x), levels)


def _loader(*tensors: Tensor) -> DataLoader:
    return DataLoader(
        TensorDataset(*tensors), batch_size=32, shuffle=True, generator=torch.Generator().manual_seed(0)
    )


def test_a_label_the_loss_ignores_is_not_out_of_range_and_one_it_cannot_take_is():
    x = torch.randn(128, 1, 8, 8)
    y = (x[:, 0] > 0).long() + (x[:, 0] > 1).long()
    y[:, 0] = y[:, -1] = y[:, :, 0] = y[:, :, -1] = 255  # unreliable border
    result = DataCheck(num_classes=3).run(CheckContext(BorderIgnoringSegmenter(), _loader(x, y)))
    assert (result.details["labels_out_of_range"], result.details["ignore_index"]) == (0, 255)
    y[0, 3, 3] = 7  # neither a class nor the ignored value: cross-entropy raises on it
    result = DataCheck(num_classes=3).run(CheckContext(BorderIgnoringSegmenter(), _loader(x, y)))
    assert result.status == "fail" and result.details["labels_out_of_range"] >= 1  # the step raised


def test_ordinal_ranks_beyond_the_head_width_are_not_judged_without_a_class_index_loss():
    x = torch.randn(256, 6)
    y = torch.bucketize(
        x[:, 0].contiguous(), torch.tensor([-1.0, -0.3, 0.3, 1.0])
    )  # ranks 0..4 for a 4-wide head
    result = DataCheck().run(CheckContext(Coral(), _loader(x, y)))
    assert result.details["labels_out_of_range"] == 0 and "labels_range" in result.details
    assert result.status != "fail"


def _windows(series: Tensor, width: int = 16) -> tuple[Tensor, Tensor]:
    x = series.unfold(0, width, 1)[:-1]
    return x, series[width:]


def test_near_copies_are_not_judged_on_a_dense_training_split():
    t = torch.arange(3000.0)
    series = (
        torch.sin(t / 40)
        + 0.3 * torch.sin(t / 7)
        + 0.02 * torch.randn(3000, generator=torch.Generator().manual_seed(0))
    )
    x, y = _windows(series)
    train, val = _loader(x[:2300], y[:2300]), _loader(x[2300:], y[2300:])
    result = SplitOverlapCheck().run(CheckContext(_Module(nn.Linear(16, 1)), train, val))
    assert result.status != "fail" and result.details["near_method"].startswith("exact only")


class Vae(_Module):
    def __init__(self, scale_from: str = "input") -> None:
        super().__init__(nn.Linear(8, 4))
        self.decoder = nn.Linear(2, 8)
        self.log_std = nn.Parameter(torch.zeros(2))
        self.scale_from = scale_from

    def forward(self, x: Tensor) -> Tensor:
        mu, logvar = self.net(x).chunk(2, -1)
        scale = (0.5 * logvar).exp() if self.scale_from == "input" else self.log_std.exp()
        return self.decoder(mu + torch.randn_like(mu) * scale)


def test_a_reparameterised_sample_is_not_a_mode_bug_but_noise_of_a_fixed_scale_is():
    loader = _loader(torch.randn(64, 8), torch.randn(64, 8))
    sampled = EvalModeCheck().run(CheckContext(Vae(), loader))
    assert sampled.status == "pass" and sampled.details["sampled"] is True
    noise = EvalModeCheck().run(CheckContext(Vae(scale_from="parameter"), loader))  # not predicted per input
    assert noise.status == "fail" and "sampled" not in noise.details
