"""LightningModules of sealed gallery A, as a user of each task would write them. A model's planted bug (where
it lives in the model, not the data) sits behind a constructor flag; the flag off is the bug's healthy twin.

Every model is built from the global RNG (no seed inside) and fresh per call.
"""

from __future__ import annotations

import lightning.pytorch as pl
import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence

from galleries.preflight.sealed import _a_data as data
from galleries.sealed import mlp


class _Adam(pl.LightningModule):
    lr = 2e-3

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=self.lr)


# ----------------------------------------------------------------------------------------------- contrastive
class SimCLR(_Adam):
    """SimCLR on digits: an encoder and a projection head, symmetric InfoNCE with a temperature over the two
    views of each sample in a dict batch (``index`` and ``label`` ride along as metadata)."""

    def __init__(self, temperature: float = 0.2) -> None:
        super().__init__()
        self.temperature, self.lr = temperature, 3e-3
        self.encoder = mlp(64, 128, 32)
        self.projector = mlp(32, 64, 32)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.encoder(x)

    def info_nce(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        first = F.normalize(self.projector(self(batch["view1"])), dim=1)
        second = F.normalize(self.projector(self(batch["view2"])), dim=1)
        logits = first @ second.T / self.temperature
        own = torch.arange(len(logits), device=logits.device)
        return (F.cross_entropy(logits, own) + F.cross_entropy(logits.T, own)) / 2

    def training_step(self, batch, batch_idx):
        loss = self.info_nce(batch)
        self.log("train_loss", loss)
        return loss

    def validation_step(self, batch, batch_idx):
        self.log("val_loss", self.info_nce(batch))


# -------------------------------------------------------------------------------------------- metric learning
class TripletNet(_Adam):
    """A digit embedding trained with a triplet margin loss on (anchor, positive, negative) batches."""

    def __init__(self) -> None:
        super().__init__()
        self.encoder = mlp(64, 128, 32)
        self.loss = nn.TripletMarginLoss(margin=1.0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.encoder(x)

    def training_step(self, batch, batch_idx):
        anchor, positive, negative = batch
        loss = self.loss(self(anchor), self(positive), self(negative))
        self.log("train_loss", loss)
        return loss

    def validation_step(self, batch, batch_idx):
        anchor, positive, negative = batch
        self.log("val_loss", self.loss(self(anchor), self(positive), self(negative)))


class SiameseVerifier(pl.LightningModule):
    """Same-class verification of digit pairs: a shared encoder, a head on |e1 - e2|, binary cross-entropy;
    manual optimisation (SGD with momentum) with gradient accumulation over two batches.

    ``zero_grad=False`` is the planted bug: the optimizer's gradients are never zeroed, so each step applies
    the sum of every gradient since the start.
    """

    def __init__(self, zero_grad: bool = True, accumulate: int = 2, lr: float = 0.05) -> None:
        super().__init__()
        self.automatic_optimization = False
        self.zero_grad_after_step, self.accumulate, self.lr = zero_grad, accumulate, lr
        self.encoder = mlp(64, 128, 32)
        self.head = mlp(32, 32, 1)

    def forward(self, first: torch.Tensor, second: torch.Tensor) -> torch.Tensor:
        return self.head((self.encoder(first) - self.encoder(second)).abs()).squeeze(-1)

    def training_step(self, batch, batch_idx):
        first, second, same = batch
        loss = F.binary_cross_entropy_with_logits(self(first, second), same)
        optimizer = self.optimizers()
        self.manual_backward(loss / self.accumulate)
        if (batch_idx + 1) % self.accumulate == 0:
            optimizer.step()
            if self.zero_grad_after_step:
                optimizer.zero_grad()
        self.log("train_loss", loss)
        return loss

    def validation_step(self, batch, batch_idx):
        first, second, same = batch
        self.log("val_loss", F.binary_cross_entropy_with_logits(self(first, second), same))

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=self.lr, momentum=0.9)


# ----------------------------------------------------------------------------------------------- denoising
class Denoiser(_Adam):
    """An MLP denoiser of (noisy, clean) digit pairs, mean squared error; ``dropout`` between its layers."""

    def __init__(self, dropout: float = 0.0) -> None:
        super().__init__()
        self.net = mlp(64, 256, 256, 64, dropout=dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)

    def training_step(self, batch, batch_idx):
        noisy, clean = batch
        loss = F.mse_loss(self(noisy), clean)
        self.log("train_loss", loss)
        return loss

    def validation_step(self, batch, batch_idx):
        noisy, clean = batch
        self.log("val_loss", F.mse_loss(self(noisy), clean))


# ----------------------------------------------------------------------------------------------- autoencoder
class AutoEncoder(pl.LightningModule):
    """A bottleneck autoencoder of digits; Adam with a step decay meant to halve the rate every 4 epochs.

    ``scheduler_interval="step"`` is the planted bug (copied from a warm-up recipe): the decay is stepped
    every batch, so the rate is ~0 after a hundred steps.
    """

    def __init__(self, scheduler_interval: str = "epoch") -> None:
        super().__init__()
        self.scheduler_interval = scheduler_interval
        self.encoder = mlp(64, 128, 8)
        self.decoder = mlp(8, 128, 64)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.decoder(self.encoder(x))

    def training_step(self, batch, batch_idx):
        (x,) = batch
        loss = F.mse_loss(self(x), x)
        self.log("train_loss", loss)
        return loss

    def validation_step(self, batch, batch_idx):
        (x,) = batch
        self.log("val_loss", F.mse_loss(self(x), x))

    def configure_optimizers(self):
        optimizer = torch.optim.Adam(self.parameters(), lr=3e-3)
        scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=4, gamma=0.5)
        return {
            "optimizer": optimizer,
            "lr_scheduler": {"scheduler": scheduler, "interval": self.scheduler_interval},
        }


# ----------------------------------------------------------------------------------------------- VAE
class VAE(_Adam):
    """A Bernoulli VAE of digits. The loss is the negative ELBO summed over pixels and latents, averaged
    over the batch (~45 nats at init), with the KL weight warmed up from 0 to 1 over ``warmup`` epochs.

    ``stuck_warmup=True`` is the planted bug: the warm-up assigns a local ``beta`` in ``on_train_epoch_start``
    instead of ``self.beta``, so the KL term is weighted by 0 for the whole run.
    """

    def __init__(self, latent: int = 8, warmup: int = 3, stuck_warmup: bool = False) -> None:
        super().__init__()
        self.warmup, self.stuck_warmup, self.beta = warmup, stuck_warmup, 0.0
        self.encoder = mlp(64, 128, 2 * latent)
        self.decoder = mlp(latent, 128, 64)

    def on_train_epoch_start(self) -> None:
        if self.stuck_warmup:
            beta = min(1.0, (self.current_epoch + 1) / self.warmup)  # noqa: F841 (the bug: never stored)
        else:
            self.beta = min(1.0, (self.current_epoch + 1) / self.warmup)

    def terms(
        self, x: torch.Tensor, generator: torch.Generator | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Reconstruction and KL, each summed over its dimensions and averaged over the batch."""
        mu, logvar = self.encoder(x).chunk(2, dim=1)
        eps = torch.randn(mu.shape, generator=generator, device=mu.device)
        z = mu + eps * torch.exp(0.5 * logvar)
        recon = F.binary_cross_entropy_with_logits(self.decoder(z), x, reduction="sum") / len(x)
        kl = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp()) / len(x)
        return recon, kl

    def training_step(self, batch, batch_idx):
        recon, kl = self.terms(batch[0])
        loss = recon + self.beta * kl
        self.log_dict({"train_loss": loss, "recon": recon, "kl": kl})
        return loss

    def validation_step(self, batch, batch_idx):
        recon, kl = self.terms(batch[0])
        self.log("val_elbo", -(recon + kl))


# ----------------------------------------------------------------------------------------------- multi-task
class MultiTask(_Adam):
    """A shared digit backbone with a class head (cross-entropy) and an ink-share regression head (MSE).

    ``squeeze=False`` is the planted bug: the regression head's (B, 1) output is compared with the (B,)
    target, which broadcasts to (B, B) (a warning, no error), so the head learns the batch mean.
    ``uncertainty_weighting=True`` (healthy) weighs the two losses with learned log-variances (Kendall et
    al.), summed over the batch: the loss is large at init and goes negative as it trains.
    """

    def __init__(self, squeeze: bool = True, uncertainty_weighting: bool = False) -> None:
        super().__init__()
        self.squeeze, self.uncertainty_weighting = squeeze, uncertainty_weighting
        self.backbone = mlp(64, 128, 64)
        self.classify = nn.Linear(64, 10)
        self.regress = nn.Linear(64, 1)
        if uncertainty_weighting:
            self.log_vars = nn.Parameter(torch.zeros(2))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        features = torch.relu(self.backbone(x))
        ink = self.regress(features)
        return self.classify(features), ink.squeeze(-1) if self.squeeze else ink

    def losses(self, batch) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        x, label, ink = batch
        logits, predicted_ink = self(x)
        reduction = "sum" if self.uncertainty_weighting else "mean"
        cls = F.cross_entropy(logits, label, reduction=reduction)
        reg = F.mse_loss(predicted_ink, ink, reduction=reduction)
        if self.uncertainty_weighting:
            precision = torch.exp(-self.log_vars)
            total = precision[0] * cls + precision[1] * reg + len(x) * self.log_vars.sum()
        else:
            total = cls + reg
        return total, cls, reg

    def training_step(self, batch, batch_idx):
        total, cls, reg = self.losses(batch)
        self.log_dict({"train_loss": total, "cls": cls, "reg": reg})
        return total

    def validation_step(self, batch, batch_idx):
        total, cls, reg = self.losses(batch)
        self.log_dict({"val_loss": total, "val_cls": cls, "val_reg": reg})


# ----------------------------------------------------------------------------------------------- distillation
def pretrained_teacher(steps: int = 400) -> nn.Module:
    """A digit classifier (64-256-256-10, dropout 0.2) trained on the labelled training split, as a user would
    load it from a checkpoint (built from the global RNG)."""
    teacher = mlp(64, 256, 256, 10, dropout=0.2)
    x, y = data.digits("train")
    optimizer = torch.optim.Adam(teacher.parameters(), lr=2e-3)
    for _ in range(steps):
        rows = torch.randint(len(x), (64,))
        optimizer.zero_grad()
        F.cross_entropy(teacher(x[rows]), y[rows]).backward()
        optimizer.step()
    return teacher.eval()


class Distiller(_Adam):
    """A small student distilled from a pretrained teacher on unlabelled digits: KL divergence at temperature
    ``T``, scaled by T^2 (Hinton et al.), so the loss at init is nowhere near ln 10. Validation batches carry
    labels and report the student's accuracy.

    ``freeze_teacher=False`` is the planted bug: the teacher is a registered submodule left trainable (in the
    optimizer, out of ``no_grad``, in train mode), so the KL pulls the teacher towards the student.
    """

    def __init__(self, temperature: float = 4.0, freeze_teacher: bool = True) -> None:
        super().__init__()
        self.temperature, self.freeze_teacher = temperature, freeze_teacher
        self.teacher = pretrained_teacher()
        if freeze_teacher:
            self.teacher.requires_grad_(False)
        self.student = mlp(64, 64, 10)
        self.lr = 5e-3

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.student(x)

    def training_step(self, batch, batch_idx):
        (x,) = batch
        if self.freeze_teacher:
            self.teacher.eval()
            with torch.no_grad():
                teacher_logits = self.teacher(x)
        else:
            teacher_logits = self.teacher(x)
        t = self.temperature
        loss = (
            F.kl_div(
                F.log_softmax(self(x) / t, dim=1),
                F.log_softmax(teacher_logits / t, dim=1),
                log_target=True,
                reduction="batchmean",
            )
            * t**2
        )
        self.log("train_loss", loss)
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        self.log("val_acc", (self(x).argmax(dim=1) == y).float().mean())

    def configure_optimizers(self):
        parameters = self.student.parameters() if self.freeze_teacher else self.parameters()
        return torch.optim.Adam(parameters, lr=self.lr)


# ----------------------------------------------------------------------------------------------- seq2seq
class Seq2Seq(_Adam):
    """A GRU encoder-decoder that reverses variable-length symbol sequences: batches are (source, lengths,
    target), padded with 0; the encoder packs by length (``pack_padded_sequence`` raises on a zero length),
    the decoder is teacher-forced on the target shifted right behind a start token, and padding is ignored
    by the loss. Validation reports teacher-forced token accuracy.

    Planted bugs: ``shift=False`` feeds the decoder the unshifted target (each step sees the token it must
    predict); ``pass_state=False`` starts the decoder from zeros instead of the encoder's final state.
    """

    def __init__(self, shift: bool = True, pass_state: bool = True) -> None:
        super().__init__()
        self.shift, self.pass_state = shift, pass_state
        self.lr = 5e-3
        self.embed = nn.Embedding(data.VOCAB, 32, padding_idx=data.PAD)
        self.encoder = nn.GRU(32, 96, batch_first=True)
        self.decoder = nn.GRU(32, 96, batch_first=True)
        self.out = nn.Linear(96, data.VOCAB)

    def encode(self, source: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        packed = pack_padded_sequence(
            self.embed(source), lengths.cpu(), batch_first=True, enforce_sorted=False
        )
        _, state = self.encoder(packed)
        return state if self.pass_state else torch.zeros_like(state)

    def forward(self, source: torch.Tensor, lengths: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        state = self.encode(source, lengths)
        if self.shift:
            start = torch.full_like(target[:, :1], data.BOS)
            decoder_input = torch.cat([start, target[:, :-1]], dim=1)
        else:
            decoder_input = target
        output, _ = self.decoder(self.embed(decoder_input), state)
        return self.out(output)

    @torch.no_grad()
    def generate(self, source: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """Greedy decoding of ``MAX_LEN`` tokens."""
        state = self.encode(source, lengths)
        token = torch.full((len(source), 1), data.BOS, dtype=torch.long, device=source.device)
        tokens = []
        for _ in range(data.MAX_LEN):
            output, state = self.decoder(self.embed(token), state)
            token = self.out(output).argmax(dim=-1)
            tokens.append(token)
        return torch.cat(tokens, dim=1)

    def training_step(self, batch, batch_idx):
        source, lengths, target = batch
        logits = self(source, lengths, target)
        loss = F.cross_entropy(logits.reshape(-1, data.VOCAB), target.reshape(-1), ignore_index=data.PAD)
        self.log("train_loss", loss)
        return loss

    def validation_step(self, batch, batch_idx):
        source, lengths, target = batch
        logits = self(source, lengths, target)
        mask = target != data.PAD
        self.log(
            "val_loss", F.cross_entropy(logits.reshape(-1, data.VOCAB), target.reshape(-1), ignore_index=0)
        )
        self.log("val_token_acc", (logits.argmax(-1) == target)[mask].float().mean())


# ----------------------------------------------------------------------------------------------- two-tower
class TwoTower(_Adam):
    """A two-tower recommender: a user tower over the mean embedding of the session's history items, an item
    tower over item ids (or, with ``frozen_item_features``, over fixed content features kept frozen on
    purpose), scored by dot product against the whole catalogue with softmax cross-entropy. Dict batches
    carry a ``day`` field the model does not use. Validation reports recall@10."""

    def __init__(self, frozen_item_features: bool = False, cache_catalogue: bool = False) -> None:
        super().__init__()
        self.cache_catalogue = cache_catalogue
        self.history_embedding = nn.EmbeddingBag(data.N_ITEMS, 32, mode="mean")
        self.user_tower = mlp(32, 64, 32)
        if frozen_item_features:
            self.item_embedding = nn.Embedding.from_pretrained(data.item_features(), freeze=True)
            self.item_tower = mlp(6, 64, 32)
        else:
            self.item_embedding = nn.Embedding(data.N_ITEMS, 32)
            self.item_tower = mlp(32, 64, 32)
        self.register_buffer("catalogue", torch.arange(data.N_ITEMS))

    def scores(self, history: torch.Tensor) -> torch.Tensor:
        users = self.user_tower(self.history_embedding(history))
        if self.cache_catalogue:
            with torch.no_grad():
                items = self.item_tower(self.item_embedding(self.catalogue))
        else:
            items = self.item_tower(self.item_embedding(self.catalogue))
        return users @ items.T

    def training_step(self, batch, batch_idx):
        loss = F.cross_entropy(self.scores(batch["history"]), batch["item"])
        self.log("train_loss", loss)
        return loss

    def validation_step(self, batch, batch_idx):
        top = self.scores(batch["history"]).topk(10, dim=1).indices
        self.log("val_recall_at_10", (top == batch["item"][:, None]).any(dim=1).float().mean())
