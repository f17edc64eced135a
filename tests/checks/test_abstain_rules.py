"""Issue #34's "understand or abstain" rules (and sealed galleries D and F's), on tiny real modules."""

from __future__ import annotations

from typing import Any

import lightning.pytorch as pl
import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.utils.data import DataLoader, TensorDataset

from lightning_recipes.checks import (
    BatchIndependenceCheck,
    CheckContext,
    DataCheck,
    EvalModeCheck,
    GradFlowCheck,
    InputIndependenceCheck,
    SplitOverlapCheck,
    ValidationPathCheck,
    preflight,
)

from ._models import AdamModule


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


def _loader(*tensors: Tensor, batch_size: int = 32) -> DataLoader:
    return DataLoader(
        TensorDataset(*tensors),
        batch_size=batch_size,
        shuffle=True,
        generator=torch.Generator().manual_seed(0),
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
    y = torch.bucketize(x[:, 0].contiguous(), torch.tensor([-1.0, -0.3, 0.3, 1.0]))  # ranks 0..4, head of 4
    result = DataCheck().run(CheckContext(Coral(), _loader(x, y)))
    assert result.details["labels_out_of_range"] == 0 and "labels_range" in result.details
    assert result.status != "fail"


def test_near_copies_are_not_judged_on_a_dense_training_split():
    t = torch.arange(3000.0)
    noise = 0.02 * torch.randn(3000, generator=torch.Generator().manual_seed(0))
    series = torch.sin(t / 40) + 0.3 * torch.sin(t / 7) + noise
    x, y = series.unfold(0, 16, 1)[:-1], series[16:]  # windows of 16 steps, the next step the target
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


# ---- sealed gallery D
class Siamese(_Module):
    """A shared tower; the loss reads the distance of the two embeddings, so the last bias cancels."""

    def __init__(self, cut_second: bool = False) -> None:
        super().__init__(nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4)))
        self.cut_second = cut_second

    def training_step(self, batch: tuple[Tensor, Tensor, Tensor], batch_idx: int) -> Tensor:
        a, b, same = batch
        second = self(b).detach() if self.cut_second else self(b)
        distance = (self(a) - second).norm(dim=-1)
        return (same * distance**2 + (1 - same) * F.relu(1 - distance) ** 2).mean()


def test_a_gradient_whose_calls_cancel_is_a_symmetry_but_a_cut_call_still_fails():
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(64, 8, generator=g), torch.randn(64, 8, generator=g)
    same = (torch.rand(64, generator=g) < 0.5).float()
    result = GradFlowCheck().run(CheckContext(Siamese(), _loader(a, b, same)))
    assert result.status == "pass", result.message
    assert result.details["cancelled"] == ["net.2.bias"]
    # with one tower call detached nothing cancels: the bias gets the other call's gradient
    cut = GradFlowCheck().run(CheckContext(Siamese(cut_second=True), _loader(a, b, same)))
    assert cut.status == "pass" and cut.details["cancelled"] == []


class PseudoLabels(_Module):
    """Cross-entropy with ignore_index=-1; unknown rows (-1) take the model's confident guesses."""

    def __init__(self) -> None:
        super().__init__(nn.Linear(8, 4))

    def training_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> Tensor:
        x, y = batch
        logits = self(x)
        confidence, guess = logits.detach().softmax(-1).max(-1)
        target = torch.where((y < 0) & (confidence > 0.9), guess, y)
        return F.cross_entropy(logits, target, ignore_index=-1)


def test_labels_the_pseudo_label_loss_ignores_are_missing_not_out_of_range_and_not_a_class():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(512, 8, generator=g)
    y = x[:, :4].argmax(1)
    y[100:] = -1  # most rows unlabelled
    x_val = torch.randn(256, 8, generator=g)
    context = CheckContext(PseudoLabels(), _loader(x, y), _loader(x_val, x_val[:, :4].argmax(1)))
    result = DataCheck(num_classes=4).run(context)
    assert result.details["labels_out_of_range"] == 0, result.message
    assert result.details["ignore_index"] == -1
    assert -1 not in result.details["train_class_counts"]
    # a value the loss does not ignore is still out of range
    y[100:] = -2
    bad = DataCheck(num_classes=4).run(CheckContext(PseudoLabels(), _loader(x, y)))
    assert bad.status == "fail" and bad.details["labels_out_of_range"] > 0


class AutoEncoder(_Module):
    """Reconstructs its batch through a 4-dim code; ``ignore_input``: the decoder reads a zero code."""

    def __init__(self, ignore_input: bool = False) -> None:
        super().__init__(nn.Linear(16, 4))
        self.decoder = nn.Linear(4, 16)
        self.ignore_input = ignore_input

    def training_step(self, batch: tuple[Tensor], batch_idx: int) -> Tensor:
        (x,) = batch
        code = self(x)
        return F.mse_loss(self.decoder(torch.zeros_like(code) if self.ignore_input else code), x)


class ElboVae(_Module):
    """A VAE's ELBO per sample (Bernoulli pixels summed, KL summed over a 4-dim latent)."""

    def __init__(self) -> None:
        super().__init__(nn.Linear(16, 8))
        self.decoder = nn.Sequential(nn.Linear(4, 16), nn.Sigmoid())

    def training_step(self, batch: tuple[Tensor], batch_idx: int) -> Tensor:
        (x,) = batch
        mu, log_var = self(x).chunk(2, -1)
        z = mu + (0.5 * log_var).exp() * torch.randn_like(mu)
        kl = 0.5 * (mu**2 + log_var.exp() - 1 - log_var)
        recon = F.binary_cross_entropy(self.decoder(z), x, reduction="none")
        return recon.sum(1).mean() + kl.sum(1).mean()


def test_a_reconstruction_that_reads_its_input_is_not_failed_but_one_that_ignores_it_is():
    """The target is the input: a VAE still learning the mean is not failed; a model ignoring its input is."""
    g = torch.Generator().manual_seed(0)
    x, held_out = torch.rand(256, 16, generator=g), torch.rand(64, 16, generator=g)
    vae = InputIndependenceCheck().run(CheckContext(ElboVae(), _loader(x), _loader(held_out)))
    assert vae.status == "inconclusive", vae.message
    assert "the target is the input itself" in vae.summary
    ignores = InputIndependenceCheck().run(CheckContext(AutoEncoder(True), _loader(x), _loader(held_out)))
    assert ignores.status == "fail", ignores.message


def _dots(n: int, seed: int) -> Tensor:
    """10x10 images with 1..9 bright pixels on faint noise: images with few dots coincide across any two
    draws (100 one-dot images are possible), within training as often as across the splits."""
    g = torch.Generator().manual_seed(seed)
    images = 0.05 * torch.rand(n, 100, generator=g)
    for i, k in enumerate(torch.randint(1, 10, (n,), generator=g).tolist()):
        images[i, torch.randperm(100, generator=g)[:k]] = 0.6 + 0.4 * torch.rand(k, generator=g)
    return images


def test_samples_that_coincide_by_chance_are_not_a_leak_but_noisy_copies_are():
    model = _Module(nn.Linear(100, 1))
    train, val = _dots(1000, 1), _dots(300, 2)
    y, y_val = torch.zeros(1000), torch.zeros(300)
    chance = SplitOverlapCheck().run(CheckContext(model, _loader(train, y), _loader(val, y_val)))
    assert chance.status == "inconclusive", chance.message
    assert chance.details["repeats"]["within_training_rate"]
    # validation made of noisy copies of training samples repeats training beyond training's own rate
    copies = train[:300] + 0.005 * torch.randn(300, 100, generator=torch.Generator().manual_seed(3))
    leak = SplitOverlapCheck().run(CheckContext(model, _loader(train, y), _loader(copies, y_val)))
    assert leak.status == "fail", leak.message


# ---- sealed gallery F
class RunningNormaliser(nn.Module):
    """Standardises with the batch's statistics in training and keeps running ones for eval, by hand."""

    def __init__(self, width: int, momentum: float = 0.01) -> None:
        super().__init__()
        self.momentum = momentum
        self.register_buffer("mean", torch.zeros(width))
        self.register_buffer("var", torch.ones(width))

    def forward(self, x: Tensor) -> Tensor:
        if not self.training:
            return (x - self.mean) / (self.var + 1e-5).sqrt()
        mean, var = x.mean(0), x.var(0)
        with torch.no_grad():
            self.mean.lerp_(mean, self.momentum)
            self.var.lerp_(var, self.momentum)
        return (x - mean) / (var + 1e-5).sqrt()


class Regressor(AdamModule):
    def __init__(self, normaliser: nn.Module, mix: bool = False) -> None:
        super().__init__()
        self.net = nn.Sequential(normaliser, nn.Linear(6, 32), nn.ReLU(), nn.Linear(32, 1))
        self.mix = mix

    def forward(self, x: Tensor) -> Tensor:
        out = self.net(x).squeeze(-1)
        return out - out.mean() if self.mix else out  # mix: every output moves with every sample, in eval too

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        x, y = batch
        return F.mse_loss(self(x), y)

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        x, y = batch
        self.log("val_loss", F.mse_loss(self(x), y))


def _sensors(n: int = 256, shuffle: bool = False) -> DataLoader:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(n, 6, generator=g) * 40 + 50  # raw units: far from standardised
    y = (x[:, 0] - 50) / 40 + 0.5 * ((x[:, 1] - 50) / 40) ** 2
    return DataLoader(TensorDataset(x, y), batch_size=32, shuffle=shuffle, generator=g if shuffle else None)


def test_a_running_normaliser_written_by_hand_runs_in_eval_like_batchnorm():
    passed = BatchIndependenceCheck().run(CheckContext(Regressor(RunningNormaliser(6)), _sensors()))
    assert passed.status == "pass", passed.message
    assert float(passed.details["max_cross_effect"]) == 0.0
    # the positive control: an output that mixes the (shuffled) batch in eval as well still fails
    mixing = Regressor(RunningNormaliser(6), mix=True)
    mixed = BatchIndependenceCheck().run(CheckContext(mixing, _sensors(shuffle=True)))
    assert mixed.status == "fail", mixed.message


def test_validation_reading_statistics_kept_by_hand_is_not_judged():
    loader = _sensors()
    report = preflight(
        Regressor(RunningNormaliser(6, momentum=0.001)),
        train_dataloaders=loader,
        val_dataloaders=loader,
        checks=[ValidationPathCheck()],
        num_threads=1,
        progress=False,
    )
    result = report["validation_path"]
    # the running statistics (momentum 0.001) still hold almost all of their start: validation lags the fit
    assert result.status == "inconclusive", result.message
    assert "running statistics kept by net.0" in result.summary


class Preference(AdamModule):
    """A Bradley-Terry reward model on (chosen, rejected) pairs: the target, "the first wins", is always 1."""

    def __init__(self) -> None:
        super().__init__()
        self.reward = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 1))

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        chosen, rejected, first_wins = batch
        margin = (self.reward(chosen) - self.reward(rejected)).squeeze(-1)
        return F.binary_cross_entropy_with_logits(margin, first_wins)


def _preferences(shuffled_target: bool = False, n: int = 512) -> DataLoader:
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(n, 8, generator=g), torch.randn(n, 8, generator=g)
    a_wins = a[:, 0] > b[:, 0]
    chosen = torch.where(a_wins[:, None], a, b)
    rejected = torch.where(a_wins[:, None], b, a)
    target = torch.ones(n)
    if shuffled_target:  # the pairs stored as (a, b) with a label that is not theirs
        chosen, rejected, target = a, b, a_wins.float()[torch.randperm(n, generator=g)]
    return DataLoader(TensorDataset(chosen, rejected, target), batch_size=32)


def test_one_target_for_every_sample_leaves_no_pair_to_break():
    result = InputIndependenceCheck().run(CheckContext(Preference(), _preferences()))
    assert result.status == "skip", result.message
    assert "every sample has the same target" in result.summary
    # the positive control: labels that vary but were shuffled apart from their pairs still fail
    shuffled = InputIndependenceCheck().run(CheckContext(Preference(), _preferences(shuffled_target=True)))
    assert shuffled.status == "fail", shuffled.message
