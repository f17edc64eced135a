"""Sealed gallery D's "understand or abstain" rules (issue #34), on tiny real modules: a zero gradient whose
calls cancel is a symmetry of the loss, a label the loss ignores is a missing label also behind pseudo-labels,
a reconstruction target is not a pair to break, and samples that coincide by chance are not a split leak."""

from __future__ import annotations

import lightning.pytorch as pl
import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.utils.data import DataLoader, TensorDataset

from lightning_recipes.checks import (
    CheckContext,
    DataCheck,
    GradFlowCheck,
    InputIndependenceCheck,
    SplitOverlapCheck,
)


class _Module(pl.LightningModule):
    def __init__(self, net: nn.Module) -> None:
        super().__init__()
        self.net = net

    def forward(self, x: Tensor) -> Tensor:
        return self.net(x)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.Adam(self.parameters(), lr=1e-3)


def _loader(*tensors: Tensor, batch_size: int = 32) -> DataLoader:
    return DataLoader(
        TensorDataset(*tensors),
        batch_size=batch_size,
        shuffle=True,
        generator=torch.Generator().manual_seed(0),
    )


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


class Vae(_Module):
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
    """The target is the input: a VAE still learning the mean (the KL pulls its code to the prior) fits no
    better than with other samples' inputs, like a model ignoring its input; only the latter is proven (the
    copy given other samples' inputs trains exactly alike)."""
    g = torch.Generator().manual_seed(0)
    x, held_out = torch.rand(256, 16, generator=g), torch.rand(64, 16, generator=g)
    vae = InputIndependenceCheck().run(CheckContext(Vae(), _loader(x), _loader(held_out)))
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
