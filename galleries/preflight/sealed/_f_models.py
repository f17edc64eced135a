"""Sealed gallery F's models: each correct model (a healthy twin) and, next to it, the buggy variant a user
wrote (a subclass, or a flag, that changes the one place the bug lives in). Every model is built from the
global RNG; ``predict`` is what a served model answers and ``loss(batch)`` what it trains on."""

from __future__ import annotations

import lightning.pytorch as pl
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

from galleries.preflight.sealed import _f_data as data
from galleries.preflight.sealed._d_models import mlp


class _Adam(pl.LightningModule):
    """Adam on every parameter; ``loss(batch)`` is logged in training and validation; ``predict`` is
    ``forward``."""

    lr = 3e-3

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=self.lr)

    def training_step(self, batch, batch_idx):
        loss = self.loss(batch)
        self.log("train_loss", loss)
        return loss

    def validation_step(self, batch, batch_idx):
        self.log("val_loss", self.loss(batch))

    def predict(self, *inputs: torch.Tensor) -> torch.Tensor:
        return self(*inputs)


class _Classifier(_Adam):
    """``net`` on ``x`` against class indices with cross-entropy."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)

    def loss(self, batch) -> torch.Tensor:
        x, y = batch[:2]
        return F.cross_entropy(self(x), y)


class _Regressor(_Classifier):
    def loss(self, batch) -> torch.Tensor:
        x, y = batch[:2]
        return F.mse_loss(self(x).squeeze(-1), y)


# --- detection: class and box heads on a shared trunk -------------------------------------------------------
class Detector(_Adam):
    """A trunk on the 16x16 canvas, a class head (10) and a box head (the offset, 2); the loss is
    cross-entropy plus 5x the box's L1 error (not ln 10 at init)."""

    def __init__(self) -> None:
        super().__init__()
        self.trunk = mlp(data.CANVAS**2, 256, 128)
        self.classes, self.box = nn.Linear(128, 10), nn.Linear(128, 2)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = F.relu(self.trunk(x))
        return self.classes(h), self.box(h)

    def loss(self, batch) -> torch.Tensor:
        x, label, box = batch
        logits, predicted = self(x)
        return F.cross_entropy(logits, label) + 5 * F.l1_loss(predicted, box)


class DetectorTwoOptimizersManual(Detector):
    """Manual optimisation done right: SGD with momentum on the trunk, Adam on the heads, both zeroed, stepped
    every batch."""

    def __init__(self) -> None:
        super().__init__()
        self.automatic_optimization = False

    def configure_optimizers(self):
        heads = [*self.classes.parameters(), *self.box.parameters()]
        return torch.optim.SGD(self.trunk.parameters(), lr=0.05, momentum=0.9), torch.optim.Adam(
            heads, lr=self.lr
        )

    def training_step(self, batch, batch_idx):
        optimizers = self.optimizers()
        loss = self.loss(batch)
        for opt in optimizers:
            opt.zero_grad()
        self.manual_backward(loss)
        for opt in optimizers:
            opt.step()
        self.log("train_loss", loss)
        return loss


# --- audio-like tones: a 1-D CNN ----------------------------------------------------------------------------
class ToneNet(_Classifier):
    """Two 1-D convolutions, global max pooling and a linear head over the 5 frequencies."""

    def __init__(self, scheduler: str | None = None) -> None:
        super().__init__()
        self.scheduler = scheduler
        self.net = nn.Sequential(
            nn.Unflatten(1, (1, data.LENGTH)),
            nn.Conv1d(1, 16, 9, padding=4),
            nn.ReLU(),
            nn.Conv1d(16, 32, 9, padding=4),
            nn.ReLU(),
            nn.AdaptiveMaxPool1d(1),
            nn.Flatten(),
            nn.Linear(32, len(data.FREQUENCIES)),
        )

    def configure_optimizers(self):
        """``scheduler``: ``"epoch"`` decays the LR by 0.7 per epoch as declared; ``"step"`` (the BUG) feeds
        the same per-epoch ExponentialLR a step interval, so it decays 0.7 per batch and training stops in
        ~20 steps."""
        opt = torch.optim.Adam(self.parameters(), lr=self.lr)
        if self.scheduler is None:
            return opt
        decay = torch.optim.lr_scheduler.ExponentialLR(opt, gamma=0.7)
        return {"optimizer": opt, "lr_scheduler": {"scheduler": decay, "interval": self.scheduler}}


# --- forecasting-based anomaly detection --------------------------------------------------------------------
class Forecaster(_Adam):
    """Forecasts a chunk's last step from the 16 before it, each chunk standardised by its inputs' mean and
    spread; the anomaly score is the standardised forecast error."""

    def __init__(self) -> None:
        super().__init__()
        self.net = mlp(data.WINDOW, 64, 64, 1)

    def standardised(self, chunk: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        past = chunk[:, :-1]
        mean, spread = past.mean(1, keepdim=True), past.std(1, keepdim=True) + 1e-3
        return (past - mean) / spread, (chunk[:, -1:] - mean) / spread

    def forward(self, chunk: torch.Tensor) -> torch.Tensor:
        """The standardised forecast error of each chunk's last step (the anomaly score, squared)."""
        inputs, target = self.standardised(chunk)
        return (self.net(inputs) - target).squeeze(-1) ** 2

    def loss(self, batch) -> torch.Tensor:
        return self(batch[0]).mean()


class ForecasterWindowIncludesTarget(Forecaster):
    """BUG: the window is sliced ``chunk[:, 1:]`` (16 steps ending at the last one), so the input holds the
    value to forecast, the model learns to copy it and no forecast error, spike or not, is ever large."""

    def standardised(self, chunk: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        past = chunk[:, 1:]
        mean, spread = past.mean(1, keepdim=True), past.std(1, keepdim=True) + 1e-3
        return (past - mean) / spread, (chunk[:, -1:] - mean) / spread


# --- multi-modal fusion (dict batches) ----------------------------------------------------------------------
class FusionNet(_Adam):
    """An image branch and a side-code branch, concatenated, then a head; ``dropout`` drops the side code
    during training only (modality dropout)."""

    def __init__(self, dropout: float = 0.0) -> None:
        super().__init__()
        self.image, self.side = mlp(64, 128, 64), nn.Linear(data.SIDE, 16)
        self.head, self.dropout = mlp(80, 128, 20), nn.Dropout(dropout)

    def side_code(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        return self.dropout(batch["side"])

    def forward(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        image = F.relu(self.image(batch["image"]))
        return self.head(torch.cat([image, F.relu(self.side(self.side_code(batch)))], -1))

    def loss(self, batch) -> torch.Tensor:
        return F.cross_entropy(self(batch), batch["target"])


class FusionNetSideKeyTypo(FusionNet):
    """BUG: the side code is read as ``batch.get("aux", zeros)`` (the key of an older loader), so the side
    branch always sees zeros and the model can only guess the shift."""

    def side_code(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        return batch.get("aux", torch.zeros_like(batch["side"]))


class FusionNetFunctionalDropout(FusionNet):
    """BUG: modality dropout written ``F.dropout(side, 0.3)``, whose ``training`` defaults to True, so the
    served model still drops the side code of 30% of the inputs."""

    def side_code(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        return F.dropout(batch["side"], 0.3)


# --- class-conditional decoder ------------------------------------------------------------------------------
class ConditionalDecoder(_Regressor):
    """Decodes a digit image from its class (one-hot): the class-conditional mean, by squared error."""

    def __init__(self) -> None:
        super().__init__()
        self.net = mlp(10, 64, 64)

    def forward(self, label: torch.Tensor) -> torch.Tensor:
        return self.net(F.one_hot(label, 10).float())

    def loss(self, batch) -> torch.Tensor:
        image, label = batch
        return F.mse_loss(self(label), image)


# --- character-level CNN ------------------------------------------------------------------------------------
class CharCNN(_Classifier):
    """Embeddings (padding 0), a width-3 convolution over positions, max pooling over the real letters."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(data.CHARS + 1, data.MAX_LEN, padding_idx=0)
        self.conv, self.head = nn.Conv1d(data.MAX_LEN, 64, 3, padding=1), nn.Linear(64, len(data.MOTIFS))

    def features(self, codes: torch.Tensor) -> torch.Tensor:
        return self.embed(codes).transpose(1, 2)  # (batch, channels = embedding, positions)

    def forward(self, codes: torch.Tensor) -> torch.Tensor:
        h = F.relu(self.conv(self.features(codes)))
        return self.head(h.masked_fill((codes == 0)[:, None, :], 0).amax(-1))


class CharCNNNoTranspose(CharCNN):
    """BUG: the embedding's (batch, positions, embedding) output goes into the convolution untransposed; with
    24 positions and 24 embedding dimensions the shapes fit, and it convolves over embedding dimensions."""

    def features(self, codes: torch.Tensor) -> torch.Tensor:
        return self.embed(codes)


class _Accumulated:
    """Manual gradient accumulation over 4 micro-batches of a tuple batch; ``zero_every_micro_batch`` (the
    BUG) clears the gradient before each micro-batch's backward, so each step uses the last quarter only."""

    def __init__(self, zero_every_micro_batch: bool = False) -> None:
        super().__init__()
        self.automatic_optimization, self.zero_every_micro_batch = False, zero_every_micro_batch

    def training_step(self, batch, batch_idx):
        opt = self.optimizers()
        total = 0.0
        for micro_batch in zip(*(part.chunk(4) for part in batch), strict=True):
            if self.zero_every_micro_batch:
                opt.zero_grad()
            loss = self.loss(micro_batch) / 4
            self.manual_backward(loss)
            total = total + loss.detach()
        opt.step()
        opt.zero_grad()
        self.log("train_loss", total)
        return total


class CharCNNAccumulated(_Accumulated, CharCNN):
    pass


class ToneNetAccumulated(_Accumulated, ToneNet):
    pass


# --- gradient checkpointing, shared layers, early exits (digits) --------------------------------------------
class CheckpointedNet(_Classifier):
    """A 64 -> 24 bottleneck block run under activation checkpointing, then an MLP head."""

    use_reentrant = False

    def __init__(self) -> None:
        super().__init__()
        self.block, self.head = nn.Sequential(nn.Linear(64, 24), nn.ReLU()), mlp(24, 128, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(checkpoint(self.block, x, use_reentrant=self.use_reentrant))


class CheckpointedNetReentrant(CheckpointedNet):
    """BUG: reentrant checkpointing of a block whose input (the raw pixels) does not require grad: the block's
    output has no grad_fn to its weights, which never get a gradient and stay random (a warning, not an
    error)."""

    use_reentrant = True


class SharedBlockNet(_Classifier):
    """One residual block applied 4 times (its weights shared by design), then a head."""

    def __init__(self) -> None:
        super().__init__()
        self.embed, self.block, self.head = nn.Linear(64, 64), mlp(64, 64, 64), nn.Linear(64, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.embed(x)
        for _ in range(4):
            h = h + 0.5 * self.block(F.relu(h))
        return self.head(F.relu(h))


class EarlyExitNet(_Classifier):
    """Three stages, each with a classifier; the loss sums the three cross-entropies (3 ln 10 at init). A
    served input leaves at the first head whose softmax confidence passes 0.9."""

    threshold = 0.9

    def __init__(self) -> None:
        super().__init__()
        self.stages = nn.ModuleList([nn.Linear(64, 64) for _ in range(3)])
        cheap = nn.Sequential(nn.Linear(64, 3), nn.Linear(3, 10))  # the first exit: a rank-3 classifier
        self.heads = nn.ModuleList([cheap, nn.Linear(64, 10), nn.Linear(64, 10)])

    def forward(self, x: torch.Tensor) -> list[torch.Tensor]:
        outputs = []
        for stage, head in zip(self.stages, self.heads, strict=True):
            x = F.relu(stage(x))
            outputs.append(head(x))
        return outputs

    def loss(self, batch) -> torch.Tensor:
        x, y = batch
        return sum(F.cross_entropy(logits, y) for logits in self(x))

    def confidence(self, logits: torch.Tensor) -> torch.Tensor:
        return logits.softmax(-1).amax(-1)

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        outputs = self(x)
        answer, done = outputs[-1].argmax(-1), torch.zeros(len(x), dtype=torch.bool)
        for logits in outputs[:-1]:
            leave = ~done & (self.confidence(logits) > self.threshold)
            answer, done = torch.where(leave, logits.argmax(-1), answer), done | leave
        return answer


class EarlyExitNetLogitConfidence(EarlyExitNet):
    """BUG: the confidence is the largest raw logit, not a probability; it passes 0.9 for almost every input,
    so nearly everything leaves at the cheap rank-3 first head."""

    def confidence(self, logits: torch.Tensor) -> torch.Tensor:
        return logits.amax(-1)


# --- implicit neural representation with a custom autograd Function -----------------------------------------
class _Softplus(torch.autograd.Function):
    """softplus(x) = log(1 + e^x) by hand; its derivative is sigmoid(x)."""

    @staticmethod
    def forward(ctx, x: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(x)
        return F.softplus(x)

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> torch.Tensor:
        (x,) = ctx.saved_tensors
        return grad * torch.sigmoid(x)


class _SoftplusWrongBackward(_Softplus):
    """BUG: the backward uses sigmoid(-x), the derivative of softplus(-x): positive like the right one, so
    training runs, but wrong in size everywhere (small where the unit is active)."""

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> torch.Tensor:
        (x,) = ctx.saved_tensors
        return grad * torch.sigmoid(-x)


class FieldNet(_Regressor):
    """A coordinate MLP (2 -> 128 -> 128 -> 1) with a hand-written softplus and a 30-step linear LR
    warm-up."""

    activation = _Softplus
    warmup_interval = "step"
    lr = 1e-2

    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(2, 128), nn.Linear(128, 128), nn.Linear(128, 1)])

    def forward(self, xy: torch.Tensor) -> torch.Tensor:
        h = xy
        for layer in self.layers[:-1]:
            h = self.activation.apply(layer(h))
        return self.layers[-1](h)

    def configure_optimizers(self):
        """A linear warm-up over 30 optimizer steps, then a constant LR."""
        opt = torch.optim.Adam(self.parameters(), lr=self.lr)
        ramp = torch.optim.lr_scheduler.LambdaLR(opt, lambda i: min(1.0, (i + 1) / 30))
        return {"optimizer": opt, "lr_scheduler": {"scheduler": ramp, "interval": self.warmup_interval}}


class FieldNetWrongBackward(FieldNet):
    activation = _SoftplusWrongBackward


class FieldNetWarmupPerEpoch(FieldNet):
    """BUG: the warm-up counted in optimizer steps is stepped once per epoch, so the LR stays at 1/30..1/4 of
    its value for the whole run."""

    warmup_interval = "epoch"


# --- a hand-kept running normaliser (buffers) ---------------------------------------------------------------
class RunningNorm(nn.Module):
    """Standardises by the batch in training, by running buffers (updated under no_grad) in evaluation."""

    def __init__(self, width: int, momentum: float = 0.1) -> None:
        super().__init__()
        self.momentum = momentum
        self.register_buffer("mean", torch.zeros(width))
        self.register_buffer("var", torch.ones(width))

    def spread(self, x: torch.Tensor) -> torch.Tensor:
        return x.var(0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training:
            return (x - self.mean) / (self.var + 1e-5).sqrt()
        with torch.no_grad():
            self.mean.lerp_(x.mean(0), self.momentum)
            self.var.lerp_(self.spread(x), self.momentum)
        return (x - x.mean(0)) / (x.var(0) + 1e-5).sqrt()


class RunningNormFromStd(RunningNorm):
    """BUG: the running ``var`` is fed the batch's standard deviation; evaluation divides by its square root,
    so served inputs are scaled up to ~17x on the widest sensor."""

    def spread(self, x: torch.Tensor) -> torch.Tensor:
        return x.std(0)


class SensorRegressor(_Regressor):
    norm = RunningNorm

    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(self.norm(6), mlp(6, 128, 128, 1))


class SensorRegressorStdBuffer(SensorRegressor):
    norm = RunningNormFromStd


class SubjectRegressor(_Regressor):
    """An MLP on a row's device fingerprint and features."""

    def __init__(self) -> None:
        super().__init__()
        self.net = mlp(16, 128, 128, 1)


# --- heteroscedastic regression -----------------------------------------------------------------------------
class HeteroscedasticNet(_Adam):
    """A mean and a log-variance head on a shared trunk, by Gaussian negative log-likelihood (it goes below
    zero)."""

    def __init__(self) -> None:
        super().__init__()
        self.trunk, self.mean, self.log_var = mlp(1, 64, 64), nn.Linear(64, 1), nn.Linear(64, 1)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = F.relu(self.trunk(x))
        return self.mean(h).squeeze(-1), self.log_var(h).squeeze(-1)

    def predict(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The mean and the variance."""
        mean, log_var = self(x)
        return mean, log_var.exp()

    def nll(self, mean: torch.Tensor, log_var: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return 0.5 * (log_var + (y - mean) ** 2 / log_var.exp()).mean()

    def loss(self, batch) -> torch.Tensor:
        x, y = batch
        return self.nll(*self(x), y)


class HeteroscedasticNetLogStdInLoss(HeteroscedasticNet):
    """BUG: the loss was written for a log-std head (``h + r^2 / (2 e^{2h})``) while ``predict`` reads the
    head as a log-variance, so the served variance is the standard deviation: far too wide where the noise
    is small."""

    def nll(self, mean: torch.Tensor, log_var: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return super().nll(mean, 2 * log_var, y)


class HeteroscedasticNetMeanDetached(HeteroscedasticNet):
    """BUG: the mean is detached in the loss (meant to stop the variance term pushing the mean, as in
    beta-NLL, but applied to the whole loss), so the mean head never gets a gradient."""

    def nll(self, mean: torch.Tensor, log_var: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return super().nll(mean.detach(), log_var, y)


# --- preference (reward) model ------------------------------------------------------------------------------
class RewardModel(_Adam):
    """A scalar score per item, Bradley-Terry on pairs: P(b beats a) = sigmoid(s_b - s_a)."""

    def __init__(self, chosen_first: bool = False) -> None:
        super().__init__()
        self.net, self.chosen_first = mlp(8, 64, 64, 1), chosen_first

    def forward(self, items: torch.Tensor) -> torch.Tensor:
        return self.net(items).squeeze(-1)

    def b_won(self, winner: torch.Tensor) -> torch.Tensor:
        return winner

    def loss(self, batch) -> torch.Tensor:
        a, b, winner = batch
        if self.chosen_first:  # rows are (chosen, rejected, 1.0): the first always won
            return F.binary_cross_entropy_with_logits(self(a) - self(b), winner)
        return F.binary_cross_entropy_with_logits(self(b) - self(a), self.b_won(winner))


class RewardModelSGD(RewardModel):
    """SGD with momentum; ``max_norm`` clips the gradient's norm before each step (1.0, as planned)."""

    max_norm = 1.0

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.05, momentum=0.9)

    def on_before_optimizer_step(self, optimizer) -> None:
        torch.nn.utils.clip_grad_norm_(self.parameters(), self.max_norm)


class RewardModelSGDClippedTo1e3(RewardModelSGD):
    """BUG: ``max_norm=1e-3`` (a typo for 1.0), so every SGD step is a thousandth of the planned one at most
    and the model barely moves from its start."""

    max_norm = 1e-3


class RewardModelWinnerFlipped(RewardModel):
    """BUG: the annotation's ``winner`` (0 = a won) is read the other way round, so the model learns to
    prefer what the annotators rejected."""

    def b_won(self, winner: torch.Tensor) -> torch.Tensor:
        return 1 - winner


# --- rare events --------------------------------------------------------------------------------------------
class EventDetector(_Adam):
    """Logistic MLP with ``pos_weight = negatives / positives`` of its training labels; an event is a logit
    above 0."""

    def __init__(self, pos_weight: float) -> None:
        super().__init__()
        self.net, self.pos_weight = mlp(8, 32, 1), torch.tensor(pos_weight)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x).squeeze(-1)

    def loss(self, batch) -> torch.Tensor:
        x, y = batch
        return F.binary_cross_entropy_with_logits(self(x), y, pos_weight=self.pos_weight)
